// A worker: one thread of a runtime, its two deques and its other state.
//
// The deques (split_deque.hpp) are what thieves touch; each keeps its shared
// line apart from its owner-private one. The rest is the thread's own:
// statistics, trace buffer, the cache of task records, the random state for
// choosing victims, the stack of task groups it is running tasks of (read by
// thieves, to tell which group a stolen join belongs to), and the extension
// slots in which models (loops, assistants, adaptive joins) keep their
// per-worker state (src/models.cpp lists them).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include "mote/detail/platform.hpp"
#include "mote/detail/split_deque.hpp"
#include "mote/detail/task.hpp"
#include "mote/detail/task_alloc.hpp"
#include "mote/export.hpp"

namespace mote {
class task_group;
}  // namespace mote

namespace mote::detail {

class trace_buffer;
class runtime_impl;

// The worker the calling thread is, or nullptr for any other thread.
// Initial-exec TLS: one %fs-relative load, no __tls_get_addr call, which is
// what makes join() cheap from inside a shared library. The library is linked
// at start-up (not dlopen'ed), so static TLS space is guaranteed.
MOTE_API extern constinit thread_local worker* current_worker
    __attribute__((tls_model("initial-exec")));

// Counts the fork()s this process descends from: a child bumps it (relaxed;
// the child has one thread then). Objects remember the value they were made
// under, to refuse work in a child whose threads they do not have.
MOTE_API extern std::atomic<std::uint64_t> fork_generation;

// Per-worker event counts. The first group is kept on slow paths only, always;
// the second only while the worker is instrumented (MOTE_STATS=1 or
// MOTE_TRACE), so the fast paths count nothing otherwise. Each worker writes
// its own; they are read when the runtime ends, after the workers have been
// joined.
struct worker_stats {
  std::uint64_t tasks = 0;           // tasks run here (inline or taken from elsewhere)
  std::uint64_t spawns = 0;          // join and task_group spawns made here
  std::int64_t idle_ns = 0;          // looking for work, spinning or parked
  std::int64_t started_ns = 0;       // when the worker started (busy = lifetime - idle)
  std::int64_t ended_ns = 0;
  std::uint64_t steals = 0;          // tasks this worker stole
  std::uint64_t failed_steals = 0;   // steal attempts that found nothing
  std::uint64_t parks = 0;           // idle sleeps (nothing to do)
  std::uint64_t wait_parks = 0;      // sleeps inside a join, group or run() wait
  std::uint64_t injected = 0;        // tasks taken from the injection queue
  std::uint64_t loops = 0;           // parallel loops led on a team (not run alone)
  std::uint64_t loop_joins = 0;      // loops of others joined while idle
  std::uint64_t loop_batches = 0;    // batches claimed (led or joined)
  std::uint64_t loop_remote = 0;     // of which through a request combiner
};

// What an instrumented worker does besides its work.
inline constexpr std::uint32_t kInstrumentStats = 1;
inline constexpr std::uint32_t kInstrumentTrace = 2;
// Not instrumentation, but a reason for join to leave its plain path too:
// runtime_options::adaptive (join_on tests the three bits at once).
inline constexpr std::uint32_t kJoinAdaptive = 4;

// A per-thread address, unique among live threads: the address of this
// thread's current_worker slot. Cheap (an %fs-relative address).
inline const void* thread_token() noexcept { return &current_worker; }

class alignas(cache_line) worker {
 public:
  // `instrument`: kInstrument* bits; `trace`: this worker's buffer or nullptr.
  worker(runtime_impl& rt, unsigned index, std::uint32_t capacity, std::uint32_t instrument = 0,
         trace_buffer* trace = nullptr);
  ~worker();
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  // ---- join's records: the fast path (owner only) ------------------------
  // The records join pushes live in join's frames and are taken back in
  // exactly the reverse order, so a failed pop() is always the caller's own.
  MOTE_ALWAYS_INLINE bool push(task* t) noexcept { return frames_.push(t); }
  MOTE_ALWAYS_INLINE worker* pop() noexcept { return frames_.pop(); }

  // Runs other work until t, whose pop() returned `thief`, is done: first
  // what the thief has shared (t's subtree: leapfrogging), then this worker's
  // own task_group tasks; after the spin window it parks on t. Returns t's
  // final state (task::kDone or task::kFailed). Owner only.
  MOTE_API std::uint32_t wait_for(task* t, worker& thief) noexcept;

  split_deque& frames() noexcept { return frames_; }  // join's records
  split_deque& pool() noexcept { return pool_; }      // task_group's tasks (and the kept ones)
  split_deque& kept() noexcept { return kept_; }      // pool().keep()'s tasks

  // Shares every private task of this worker (join's records, its pool, the
  // kept tasks) with thieves, waking one: before this thread blocks in a
  // wait that runs no tasks (a lock, a queue, a futex sleep), so that
  // nothing it holds waits for it. Owner only; a few loads when nothing is
  // private.
  void publish_own() noexcept {
    frames_.publish();
    pool_.publish();
  }

  // Idle looks since the last look for stranded work (help_once's rescue,
  // which reads the clock once every kRescueEvery of them). Owner only.
  static constexpr std::uint32_t kRescueEvery = 16;
  bool rescue_due() noexcept { return (++rescue_looks_ % kRescueEvery) == 0; }

  runtime_impl& runtime() const noexcept { return *runtime_; }
  unsigned index() const noexcept { return index_; }

  // ---- task_group support (owner only) -----------------------------------
  task_cache& cache() noexcept { return cache_; }

  // The group whose task this worker is running innermost (nullptr outside
  // any): a group created now is bound to it (task_group.hpp). A thread
  // running a stolen join branch is inside the group its spawner was in.
  task_group* current_group() const noexcept {
    const std::uint32_t level = level_.load(std::memory_order_relaxed);
    if (level == 0) return nullptr;
    return levels_[(level < kLevels ? level : kLevels) - 1].group.load(std::memory_order_relaxed);
  }
  // Brackets a task of group g (or a task in no group: nullptr). enter
  // returns what leave takes back.
  std::uint32_t enter_group(task_group* g) noexcept {
    const std::uint32_t level = level_.load(std::memory_order_relaxed);
    if (MOTE_LIKELY(level < kLevels)) {
      levels_[level].start_depth.store(frames_.depth(), std::memory_order_relaxed);
      levels_[level].group.store(g, std::memory_order_relaxed);
    }
    // Release: a thief that reads this level (group_of_frame, acquire) sees
    // the entry written above.
    level_.store(level + 1, std::memory_order_release);
    return level;
  }
  void leave_group(std::uint32_t level) noexcept { level_.store(level, std::memory_order_relaxed); }
  // Is a task of g (or a join branch of one) running on this worker? Then a
  // wait for g here would wait for itself. Owner only; looks at the recorded
  // levels.
  bool inside_group(const task_group* g) const noexcept {
    const std::uint32_t level = level_.load(std::memory_order_relaxed);
    const std::uint32_t recorded = level < kLevels ? level : kLevels;
    for (std::uint32_t k = 0; k < recorded; ++k) {
      if (levels_[k].group.load(std::memory_order_relaxed) == g) return true;
    }
    return false;
  }
  // Thief side: the group the owner was inside when it pushed the join record
  // at `index` of its frames deque. Call only while that record is stolen and
  // not yet joined: the levels that enclose it cannot end before the join.
  task_group* group_of_frame(std::uint32_t index) const noexcept;

  // Runs a task that this worker took from anywhere but the top of its own
  // frames deque, inside `context` (the task's group, when it has one, enters
  // its own on top). Checks that it left the frames deque as it found it.
  void run_task(task* t, task_group* context) noexcept;

  // ---- The scheduler policy (owner-read; fixed before the thread starts) --
  // scheduler_policy::delegation: task_group's spawns on this worker go
  // through runtime_impl::schedule() instead of onto its pool. Read on the
  // spawn fast path, beside instrument_ on the owner-private line.
  bool delegating() const noexcept { return delegating_; }
  void set_delegating(bool on) noexcept { delegating_ = on; }
  // Is this worker running a task (any level deep)? Owner only.
  bool inside_task() const noexcept { return level_.load(std::memory_order_relaxed) != 0; }

  // ---- Instrumentation (MOTE_STATS=1, MOTE_TRACE) ------------------------
  // One test covers both: the fast path of join branches on it once.
  bool instrumented() const noexcept { return (instrument_ & (kInstrumentStats | kInstrumentTrace)) != 0; }
  // Does join leave its plain path (instrumented, or adaptive)? The fast
  // path's one test.
  bool join_slow() const noexcept { return instrument_ != 0; }
  // Marks a join that adaptive offloading ran in place (MOTE_TRACE).
  MOTE_API void note_inlined(const char* site_name) noexcept;
  trace_buffer* trace() const noexcept { return trace_; }
  // Event hooks, called only when instrumented(). `what` is the task's
  // function or, with `named`, its name (const char*).
  MOTE_API void note_spawn(const void* what, bool named) noexcept;
  MOTE_API void note_task_begin(const void* what, bool named) noexcept;
  MOTE_API void note_task_end() noexcept;
  MOTE_API void note_task_name(const char* name) noexcept;
  MOTE_API void note_wait_begin(unsigned what) noexcept;
  MOTE_API void note_wait_end() noexcept;
  // A futex sleep begins (true) or ends (false): traced, and counted as idle.
  MOTE_API void note_park(bool begin) noexcept;

  worker_stats& stats() noexcept { return stats_; }
  const worker_stats& stats() const noexcept { return stats_; }

  // ---- Thieves -----------------------------------------------------------
  // Takes the oldest shared task of victim's frames deque (then, if none,
  // of its pool, then of its kept tasks) and records the steal. *context
  // receives the group the task runs in. nullptr when all are empty.
  // `batch`: may take several of the victim's pooled tasks at once (see
  // split_deque::steal_batch), as an idle worker does; false in a wait for a
  // join's thief.
  task* steal_from(worker& victim, task_group** context, bool batch = true) noexcept;
  static constexpr std::uint32_t kMaxStealBatch = 8;
  // Shares the private tasks of each of victim's deques whose request to
  // share has gone unanswered for split_deque::kForceAfterNs (at `now`):
  // the owner is computing, blocked or asleep. True when any were shared.
  bool rescue_from(worker& victim, std::int64_t now) noexcept;

  std::uint64_t next_random() noexcept {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return rng_;
  }

  // The word this worker parks on when idle (runtime_impl::park).
  std::atomic<std::uint32_t>& park_word() noexcept { return parked_; }
  // Set while this worker is about to sleep, or sleeps, in park() without a
  // timeout (runtime_impl::kept_appeared looks for such a worker).
  std::atomic<bool>& untimed_flag() noexcept { return untimed_; }

  // ---- Extension slots ---------------------------------------------------
  // A model that keeps per-worker state owns one slot (its number is the
  // model's own constant; src/models.cpp checks that no two share one). The
  // runtime fills the slots from the models' hooks before the worker's thread
  // starts, or on that thread as it starts, and empties them when it ends
  // (core/extension.hpp). Reading a slot costs one load from a line that
  // stays put while the worker runs, so any thread may read any worker's.
  static constexpr unsigned kSlots = 4;
  void* slot(unsigned i) const noexcept { return slots_[i]; }
  // The runtime's, or the model's own hook on the worker's thread.
  void set_slot(unsigned i, void* state) noexcept { slots_[i] = state; }

 private:
  static constexpr std::uint32_t kLevels = 1024;
  // Room for kept tasks; keep() past it fails and the model schedules the
  // task the usual way.
  static constexpr std::uint32_t kKeptCapacity = 4096;
  struct level {
    std::atomic<std::uint32_t> start_depth{0};  // frames depth when the level began
    std::atomic<task_group*> group{nullptr};
  };

  split_deque frames_;
  split_deque pool_;
  split_deque kept_;  // on_request::acknowledge; pool_'s keep() deque

  // ---- Thread state: owner-private --------------------------------------
  alignas(cache_line) runtime_impl* runtime_;
  unsigned index_;
  std::uint32_t instrument_;  // kInstrument* and kJoinAdaptive bits, fixed before the thread starts
  bool delegating_ = false;   // scheduler_policy::delegation (see delegating())
  std::uint64_t rng_;
  trace_buffer* trace_;       // MOTE_TRACE: this worker's buffer (owned by the trace registry)
  std::int64_t park_since_ = 0;           // instrumented: when the current sleep began
  std::uint32_t rescue_looks_ = 0;        // rescue_due()
  worker_stats stats_;
  task_cache cache_;  // record blocks (task_alloc.hpp); go home within this runtime, spill to its pool

  // ---- The groups whose tasks run here: written by the owner, read by
  // thieves (group_of_frame). Levels past kLevels are counted, not recorded.
  alignas(cache_line) std::atomic<std::uint32_t> level_{0};
  level levels_[kLevels];

  // 0 while awake; runtime_impl::park() and wake_one() move it. Written by
  // the worker and by whoever wakes it, so on a line of its own.
  alignas(cache_line) std::atomic<std::uint32_t> parked_{0};
  std::atomic<bool> untimed_{false};

  // The extension slots: written before the thread starts and by the owner as
  // it starts and ends; read by the owner and by idle workers looking for
  // work (a loop's slot), so on a line that no hot write shares.
  alignas(cache_line) void* slots_[kSlots] = {};
};

static_assert(alignof(worker) == cache_line);
static_assert(sizeof(worker) % cache_line == 0);

}  // namespace mote::detail
