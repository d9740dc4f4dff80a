// The compiled side of a runtime: worker threads, the injection queue through
// which other threads hand in work, and the parking protocol.
//
// Where the pieces live: runtime.cpp (creation, destruction, the facade),
// worker_loop.cpp (the worker loop, finding work, parking and waking),
// injection.cpp (work from threads that are not workers), fork.cpp (fork()),
// cpu_registry.cpp (oversubscription, CPUs for assistants), stats.cpp
// (MOTE_STATS output), worker.cpp and split_deque.cpp (the deques, stealing,
// join's wait).
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "mote/detail/platform.hpp"
#include "mote/detail/worker.hpp"
#include "mote/runtime.hpp"
#include "core/config.hpp"
#include "core/os_thread.hpp"
#include "core/extension.hpp"
#include "core/work_source.hpp"
#include "scheduler/scheduler.hpp"
#include "wait/event_count.hpp"

namespace mote::detail {

// ---- fork() (fork.cpp) --------------------------------------------------------

// The number of fork()s this process descends from (0 in the original
// process); installs the fork handlers on first use. An object that owns
// threads records it, and knows itself orphaned in a child when it changed.
std::uint64_t current_fork_generation();
// Locks that a child process may take, held across fork() by the prepare
// handler so that the child never inherits one held by a thread it lacks.
std::mutex& default_runtime_mutex();
std::mutex& spinner_registry_mutex();
void forget_spinners_in_child() noexcept;  // cpu_registry.cpp

class runtime_impl {
 public:
  runtime_impl(const resolved_config& config, runtime* facade);
  ~runtime_impl();
  runtime_impl(const runtime_impl&) = delete;
  runtime_impl& operator=(const runtime_impl&) = delete;

  unsigned num_workers() const noexcept { return static_cast<unsigned>(workers_.size()); }
  const resolved_config& config() const noexcept { return config_; }
  runtime* facade() const noexcept { return facade_; }
  std::int64_t spin_ns() const noexcept { return spin_ns_; }
  // How many pooled tasks an idle worker's steal may take at once (worker::
  // steal_from): 8, or 1 for a model whose tasks must not gather on their
  // thief (OpenMP's: a thief inside a taskwait may start only the waiting
  // task's descendants, and would hand the rest back). Relaxed: a setting,
  // made once after the runtime starts; a steal that reads the old one takes
  // a batch once more, which is correct, only less apt.
  std::uint32_t steal_batch() const noexcept { return steal_batch_.load(std::memory_order_relaxed); }
  void set_steal_batch(std::uint32_t n) noexcept { steal_batch_.store(n, std::memory_order_relaxed); }
  worker& worker_at(unsigned i) const noexcept { return *workers_[i]; }
  task_cache::spill_pool& record_spill() noexcept { return record_spill_; }

  // Hands t to the workers through the injection queue. Any thread. Throws
  // std::logic_error in a child process after fork() (see orphaned()), and
  // nothing else.
  void submit(queued_task* t);

  // Pins the workers that have threads of their own onto cpus, in turn (the
  // first thread's worker on cpus[0], wrapping around), as a binding list
  // given at creation would have: worker_cpus() reports them, and the
  // spinner registry counts them there. False, changing nothing, when the
  // runtime's binding was chosen (runtime_options::bind, MOTE_BIND), cpus
  // is empty, or the kernel refused a CPU (the workers pinned before it
  // stay moved; worker_cpus() says where each is). Not while a thread
  // outside the runtime hands it work (wake_one reads the CPUs).
  bool place_workers(const std::vector<int>& cpus);

  // ---- The caller seat (runtime_options::caller_seat) ---------------------
  // The calling thread becomes worker 0 until leave_seat(): it runs tasks,
  // waits and is woken as that worker. Returns the worker the thread was
  // before (nullptr, or a worker of another runtime), for leave_seat(). A
  // second thread that enters sleeps until the first has left. Throws
  // std::logic_error when the runtime has no seat or the thread sits in it.
  worker* enter_seat();
  // Precondition: worker 0's deques are empty (everything the occupant
  // spawned has been run or waited for). Its park word is left awake, so no
  // wake-up is ever spent on the empty seat. A thread that entered on a
  // worker's CPU, and was moved for its stay, gets its own affinity back.
  void leave_seat(worker* previous) noexcept;
  // The occupant, on entry and after each of its sleeps (park_waiting, the
  // OpenMP team's barrier): found on a CPU a worker is pinned to, it is
  // moved to config().seat_cpu until it leaves. Only the occupant's thread.
  void keep_seat_apart() noexcept;
  bool has_seat() const noexcept { return config_.caller_seat; }

  // True in a child process after fork(): this runtime's workers live in the
  // parent only. Its destructor then frees memory but joins nothing.
  bool orphaned() const noexcept;
  void check_not_orphaned() const;

  // Finds one task for `self` and runs it: an urgent task (schedule_urgent),
  // else the newest of its own pool (the
  // task_group tasks it spawned), else one from the scheduler policy's own
  // queue (delegation's ready queue), else injected work (it has waited
  // longest), else the models' work (open parallel loops), else a steal from
  // a random victim (join's records, then pools). False when there was none.
  // Worker of this runtime only.
  bool help_once(worker& self) noexcept;
  // help_once(), and when it found nothing, rescue() (the clock read, every
  // overdue owner's private tasks forced out): for waits whose sleeps are
  // only bounded, such as an OpenMP barrier while its team has tasks
  // pending, where the rescue must not wait for help_once's occasional one.
  bool help_or_rescue(worker& self) noexcept;

  // ---- The scheduler policy (src/scheduler/scheduler.hpp) ----------------
  // Hands a ready task that is not join's (a data-flow task whose inputs are
  // satisfied; task_group's spawns) to the policy. w: the calling thread's
  // worker (of any runtime), or nullptr. Never runs t here, never drops it,
  // never allocates. Throws only what submit() throws, and only when w is not
  // a worker of this runtime.
  void schedule(queued_task* t, worker* w) { policy_->schedule(t, w); }
  scheduler& policy() noexcept { return *policy_; }

  // Appends t to the injection queue and wakes a worker (submit(), and the
  // work-stealing policy when a worker's pool is full). Links t in: never
  // allocates. Any thread.
  void inject(queued_task* t) noexcept;

  // ---- Urgent tasks: a ready data-flow task with a priority --------------
  // Hands t, a ready task with priority > 0, to the runtime's urgent list,
  // which every worker looks at before its own pool (help_once, a group
  // owner's wait, park()'s last look): higher priorities first, equal ones
  // in the order they came. Wakes a worker. Links t in through `next`, and
  // keeps the priority in its `state` word (join's alone otherwise) while it
  // waits: never allocates. Any thread, both policies.
  void schedule_urgent(queued_task* t, std::uint32_t priority) noexcept;
  // The first urgent task, or nullptr; passes a wake-up on when more wait.
  task* take_urgent() noexcept;
  // Relaxed: a hint (the mutex in take_urgent orders the task); a stale
  // zero delays the pick-up to the next look, which park()'s seq_cst look
  // covers before any sleep.
  bool urgent_waiting() const noexcept { return urgent_count_.load(std::memory_order_relaxed) != 0; }
  // Should a worker's own tight loop (a group owner taking back its pool)
  // go through help_once instead: urgent tasks wait, or a source is
  // attached whose polls must go on between tasks. One relaxed load of a
  // word that only those events write (a stale answer delays the switch
  // by one task).
  bool wants_help_once() const noexcept { return attention_.load(std::memory_order_relaxed) != 0; }
  // A work source was attached (true) or detached: wants_help_once() says
  // so from now on. Relaxed read-modify-writes: a hint, see there.
  void note_source(bool attached) noexcept {
    if (attached) {
      attention_.fetch_or(kAttentionSource, std::memory_order_relaxed);
    } else {
      attention_.fetch_and(~kAttentionSource, std::memory_order_relaxed);
    }
  }

  // ---- Waking idle workers, for the models ------------------------------
  // Is any worker parked or about to park? seq_cst: the notifier's half of
  // the Dekker pair with park(), after the publication of work.
  bool has_sleepers() const noexcept { return waiter_slot::has_waiters_seq_cst(idle_sleepers_); }
  // Wakes w if it sleeps in park(), or cancels its announcement (it looks
  // again instead of sleeping); false when it was awake. Call after the
  // publication of work that w's last look (a model's visible hook) sees.
  bool wake_idle(worker& w) noexcept;

  // Whether worker i sleeps on its park word right now (a relaxed snapshot,
  // for tests, where idle workers must end up, and for a throttled data-flow
  // spawner, which stops waiting for tasks that no worker runs).
  bool worker_asleep(unsigned i) const noexcept {
    return workers_[i]->park_word().load(std::memory_order_relaxed) == waiter_slot::kSleeping;
  }

  // A worker's kept tasks (split_deque::keep) went from none to some: wakes
  // an idle worker that sleeps without a timeout, if one does, so that it
  // watches them (a timed sleep, then rescue) in case their owner goes
  // quiet. Kept tasks are never shared by the owner's pushes, so nothing
  // else would wake it. The Dekker pair with park(): the keep's store of the
  // head, this fence, the load of untimed_sleepers_; against park()'s count,
  // its fence, its look at every kept deque.
  void kept_appeared() noexcept {
    event_count_fence();
    if (untimed_sleepers_.load(std::memory_order_relaxed) != 0) wake_untimed();
  }

  // Wakes one parked idle worker, if any is parked. Called after work became
  // visible to thieves (grow_shared's CAS, a steal that left more, an
  // injection). The event count's notifier half for a seq_cst publication
  // (wait/event_count.hpp): either the parker sees the new work in its last
  // look, or this load sees the parker.
  void notify_one() noexcept {
    if (waiter_slot::has_waiters_seq_cst(idle_sleepers_)) wake_one();
  }

  // A worker that waits for its own task group sleeps here: as an idle
  // worker does (on its park word, counted among the sleepers, so that new
  // work wakes it through wake_one()), until done(ctx), which the group's
  // last count-down announces with wake_parked(); or until timeout_ns.
  void park_waiting(worker& self, bool (*done)(const void*), const void* ctx, std::int64_t timeout_ns) noexcept;
  // The other half: after the store that makes done() true, wakes the
  // worker whose park word this is if it sleeps (or is about to).
  static void wake_parked(std::atomic<std::uint32_t>& word) noexcept;

  // The work source a library attached at run time (core/work_source.hpp).
  work_source_slot& source() noexcept { return source_; }

 private:
  void worker_main(unsigned index);
  // The first worker with a thread of its own (1 with a caller seat).
  unsigned first_thread() const noexcept { return config_.caller_seat ? 1 : 0; }
  std::vector<int> spinner_cpus() const;
  void print_stats() const;  // stats.cpp
  // Sleeps until notify_one(), unless work is visible or the runtime stops.
  // True when the sleep was timed because another worker held private tasks
  // (*stranded_timeout_ns, which doubles) or was awake: the caller should
  // then rescue() what may be stranded. *for_source: the attached source's
  // sleep_ns bounded the sleep (the caller polls once, then parks again).
  bool park(worker& self, std::int64_t* stranded_timeout_ns, bool* for_source) noexcept;
  // Wakes one sleeping worker, or else cancels one announcement (that worker
  // looks again instead of sleeping). Never spends a wake-up on a worker that
  // is already awake or already woken.
  void wake_one() noexcept;
  // Wakes every parked worker; after stop_ is set.
  void wake_all() noexcept;
  // Wakes (or cancels the announcement of) one idle worker that is about
  // to sleep, or sleeps, without a timeout (worker::untimed_flag).
  void wake_untimed() noexcept;
  // Takes back park()'s announcement of a sleep without a timeout.
  void untimed_done(worker& self) noexcept;
  // The last look before sleeping: injected work, or shared tasks on any
  // other worker. Asks every victim without shared tasks to share (see
  // split_deque::has_shared_else_ask), so one with private work does so on
  // its next push, which notifies; sets *stranded when one holds private
  // tasks (which it may never push again to share), and *others_awake when
  // another worker is awake.
  bool work_visible_else_ask(worker& self, bool* stranded, bool* others_awake) noexcept;
  // Forces out the private tasks of every other worker whose request to
  // share is overdue (worker::rescue_from) and runs one of them. True when
  // it ran one.
  bool rescue(worker& self, std::int64_t now) noexcept;
  task* take_injected() noexcept;

  resolved_config config_;
  runtime* facade_;
  std::int64_t spin_ns_;
  std::atomic<std::uint32_t> steal_batch_{worker::kMaxStealBatch};
  std::uint64_t generation_;  // the fork generation it was created in
  // The record blocks the workers' caches spill (task_alloc.hpp). Before
  // workers_: it outlives their caches.
  task_cache::spill_pool record_spill_;
  std::vector<std::unique_ptr<worker>> workers_;
  std::vector<os_thread> threads_;
  // Orders a worker's own pinning as it starts against place_workers().
  std::mutex placement_mutex_;

  // Injection queue: rare (one entry per external call or outside spawn), so
  // a mutex is the right tool. A list linked through queued_task::next,
  // oldest first, so that nothing that joins it can fail. inject_count_ lets
  // workers skip the lock when the queue is empty; it is written under the
  // mutex, read without it.
  std::mutex inject_mutex_;
  queued_task* inject_head_ = nullptr;
  queued_task* inject_tail_ = nullptr;
  std::size_t inject_size_ = 0;
  std::atomic<std::size_t> inject_count_{0};

  // Urgent tasks (schedule_urgent), by priority, then in arrival order:
  // linked through queued_task::next, under urgent_mutex_. urgent_count_ is
  // written under the mutex (seq_cst: the publication park()'s last look
  // pairs with) and read without it; on a line of its own, which only
  // urgent tasks' comings and goings write.
  std::mutex urgent_mutex_;
  queued_task* urgent_head_ = nullptr;
  queued_task* urgent_tail_ = nullptr;
  std::size_t urgent_size_ = 0;
  alignas(cache_line) std::atomic<std::size_t> urgent_count_{0};
  // wants_help_once()'s answer, beside the count (both written only when
  // urgent tasks come and go, or a source is attached or detached): a
  // source is attached, urgent tasks wait.
  static constexpr std::uint32_t kAttentionSource = 1;
  static constexpr std::uint32_t kAttentionUrgent = 2;
  std::atomic<std::uint32_t> attention_{0};

  // The scheduler policy, chosen at start (make_scheduler).
  std::unique_ptr<scheduler> policy_;
  // The models' states and work sources. After workers_: destroyed first.
  model_set models_;
  work_source_slot source_;

  // The caller seat: held by its occupant from enter_seat() to leave_seat().
  // seat_taken_ is read by the destructor only (relaxed under the mutex's
  // own ordering; a destructor racing with an occupant is a usage error).
  std::mutex seat_mutex_;
  std::atomic<bool> seat_taken_{false};
  // The occupant was moved to config_.seat_cpu on entry (enter_seat): its
  // own affinity, given back by leave_seat(). Its alone (under the mutex).
  bool seat_moved_ = false;
  cpu_set_t seat_affinity_{};

  alignas(cache_line) std::atomic<std::uint32_t> idle_sleepers_{0};
  // Of those, the ones whose sleep has no timeout (see park()).
  std::atomic<std::uint32_t> untimed_sleepers_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace mote::detail
