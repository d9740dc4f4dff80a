// mote::task_group: spawn any number of tasks, then wait for all of them.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <new>
#include <type_traits>
#include <utility>

#include "mote/detail/worker.hpp"
#include "mote/runtime.hpp"
#include "mote/trace.hpp"

namespace mote {

class task_group;

// Tag for a group that is not bound to the group whose task creates it: its
// cancellation neither comes from nor goes to any other group.
struct isolated_t {
  explicit isolated_t() = default;
};
inline constexpr isolated_t isolated{};

// What task_group::wait() found, as oneTBB's task_group_status: every task ran
// (complete), or the group was cancelled, by cancel() or through the group it
// is bound to, and tasks that had not started did not run (canceled).
enum class task_group_status { complete, canceled };

namespace detail {

// The part of a task_group record that the runtime knows.
struct group_task_base : queued_task {
  task_group* group;
  // Pushed on the pool of the group's owner by the owner itself: counted in
  // the owner's private count, not in the shared one (see task_group).
  bool local;
};

template <class F>
struct is_named_group_fn : std::false_type {};
template <class F>
struct is_named_group_fn<named_fn<F>> : std::true_type {};

// One spawned task: a pooled record that frees itself after running (or
// after being skipped because its group was cancelled).
template <class F>
struct group_task final : group_task_base {
  F fn;

  template <class A>
  group_task(task_group* g, A&& f) : fn(std::forward<A>(f)) {
    execute = &group_task::run;  // `state` is join's alone
    group = g;
    local = false;
  }
  static void run(task* base, worker& w) noexcept;

  // Its block (task_alloc.hpp): from the calling worker's cache, whichever
  // worker ends the task gives it to its own. w: the calling worker (any
  // runtime's), or nullptr on other threads.
  static constexpr record_tag kTag = record_tag::of(sizeof(group_task), alignof(group_task));
  static void* allocate(worker* w) {
    return w != nullptr ? take_record(kTag, sizeof(group_task), w->cache())
                        : take_record(kTag, sizeof(group_task));
  }
  static void deallocate(void* p, worker* w) noexcept {
    if (w != nullptr) {
      give_record(p, kTag, w->cache());
    } else {
      give_record(p, kTag);
    }
  }
};

// The trace's name for a spawned callable (see join's trace_what).
template <class F>
const void* group_trace_what(const group_task<F>* t) noexcept {
  if constexpr (is_named_group_fn<F>::value) {
    return t->fn.name;
  } else {
    return reinterpret_cast<const void*>(&group_task<F>::run);
  }
}

// Spawn events from threads that are not workers (MOTE_TRACE only).
MOTE_API void note_outside_spawn(const void* what, bool named) noexcept;

// Bumped whenever any group is cancelled, so that a group bound to others
// needs to look up its chain of parents only after some cancellation.
MOTE_API extern std::atomic<std::uint32_t> group_cancel_epoch;
// How many groups are cancelled right now (from cancel() to the end of their
// next wait). While none is, a task's start needs no look at its group's
// cancellation at all: one load of a line that nobody writes.
MOTE_API extern std::atomic<std::uint32_t> group_cancels_active;

// The runtime's way into a group's private parts, and the C API's.
struct group_access;

}  // namespace detail

// A group of tasks to wait for together: the shape of oneTBB's task_group.
//
// spawn() as often as you like, from any thread and from inside any task
// (the group's own, or any other) until the group's wait() has returned.
// wait() returns when every task spawned so far is done, including those
// that tasks spawned while it waited, and rethrows the first exception any
// of them threw. Groups nest freely: a task may create groups of its own,
// spawn into the group of an enclosing frame, or into any group it holds a
// reference to, and the groups of one frame may be waited in any order.
// While it waits, the waiting thread runs tasks (this group's, and any
// other's that it finds first) rather than sleep, when it is a worker.
//
// A group created inside a task of another group is bound to it (as oneTBB
// binds task_group_context): cancelling the outer group, or a task of it
// failing, cancels the inner one too. A bound group must not outlive the task
// it was created in (as a local variable it never does); create it with
// mote::isolated otherwise.
//
//   mote::task_group g;
//   std::vector<int> out(8);
//   for (int i = 0; i < 8; ++i) g.spawn([&out, i] { out[i] = i * i; });
//   g.wait();
class MOTE_API task_group {
 public:
  // On a worker: a group of that worker's runtime. Elsewhere: of the default one.
  task_group();
  explicit task_group(runtime& rt);
  explicit task_group(isolated_t);
  task_group(runtime& rt, isolated_t);
  // A group must be waited for after its last spawn. If it was not, the
  // destructor cancels the tasks that have not started, waits for the rest,
  // and then throws mote::missing_wait (unless an exception is already
  // propagating): nothing runs against a destroyed group.
  ~task_group() noexcept(false);  // NOLINT(bugprone-exception-escape): throws missing_wait by design
  task_group(const task_group&) = delete;
  task_group& operator=(const task_group&) = delete;

  // Adds f to the group; it may run at once, later, here or elsewhere. When
  // the worker's pool of tasks is full (16384 by default; work stealing
  // only: the delegation scheduler never runs f in spawn), f runs here before
  // spawn returns. Throws what copying f throws, and std::bad_alloc; then
  // nothing was added.
  template <class F>
  void spawn(F&& f);

  // Returns when every task spawned so far is done, or skipped because the
  // group was cancelled (then task_group_status::canceled). Rethrows the
  // first exception a task threw, once; the group is then ready for reuse.
  // Any thread may wait, one at a time (a second concurrent wait() throws
  // mote::usage_error), but not a task of this group (it would wait for
  // itself: mote::usage_error).
  task_group_status wait();

  // Tasks of this group that have not started yet will not run, nor will
  // those of the groups bound to it. Tasks that are running see
  // is_cancelled() and may stop early. Ends at the next wait().
  void cancel() noexcept;
  // Cancelled, directly or through the group it is bound to.
  //
  //   g.spawn([&g] { for (auto& part : parts) { if (g.is_cancelled()) return; work(part); } });
  bool is_cancelled() const noexcept {
    if (flags_.load(std::memory_order_relaxed) & kCancelled) return true;
    if (parent_ == nullptr) return false;
    // Acquire: pairs with the release increment in cancel(); a changed epoch
    // shows the cancelled flag that was set before it.
    const std::uint32_t epoch = detail::group_cancel_epoch.load(std::memory_order_acquire);
    if (epoch == seen_epoch_.load(std::memory_order_relaxed)) return false;
    return cancelled_through_parents(epoch);
  }

 private:
  friend struct detail::group_access;

  static constexpr std::uint32_t kCancelled = 1;
  static constexpr std::uint32_t kFailed = 2;  // error_ holds the first exception

  // The shared word (remote_): bits 0-7 count parked waiters, bits 8-39 the
  // tasks that the owner's private count does not cover (modulo 2^32), bits
  // 40-63 a version that every change of the count moves, so that a reader of
  // the two counts can tell that the shared one held still.
  static constexpr std::uint64_t kWaiterOne = 1;
  static constexpr std::uint64_t kCountShift = 8;
  static constexpr std::uint64_t kCountOne = std::uint64_t{1} << kCountShift;
  static constexpr std::uint64_t kVersionOne = std::uint64_t{1} << 40;
  static std::uint32_t count_of(std::uint64_t v) noexcept {
    return static_cast<std::uint32_t>(v >> kCountShift);
  }
  static std::uint32_t waiters_of(std::uint64_t v) noexcept { return static_cast<std::uint32_t>(v & 0xff); }

  void construct(detail::runtime_impl& rt, bool bound);
  void spawn_elsewhere(detail::group_task_base* t, detail::worker* w);
  bool cancelled_through_parents(std::uint32_t epoch) const noexcept;
  void record_exception(std::exception_ptr e) noexcept;
  void record_exception_only(std::exception_ptr e) noexcept;
  void uncancel() noexcept;  // ends a cancellation (the end of a wait)
  void finish_remote() noexcept;
  // Counts: what is left, as the owner sees it / as any other thread sees it.
  std::uint32_t pending_for_owner() const noexcept {
    return static_cast<std::uint32_t>(local_.load(std::memory_order_relaxed)) +
           count_of(remote_.load(std::memory_order_acquire));
  }
  std::uint32_t pending_for_others() const noexcept;
  bool pending(detail::worker* w) const noexcept {
    return (w != nullptr && w == owner_ ? pending_for_owner() : pending_for_others()) != 0;
  }
  // The waits: each returns when nothing is pending, running tasks meanwhile
  // where it can. They leave errors and flags alone.
  void await(detail::worker* w) noexcept;
  void await_as_owner(detail::worker& w) noexcept;
  void await_elsewhere(detail::worker* w) noexcept;
  void park_as_owner(detail::worker& w, std::int64_t timeout_ns) noexcept;
  void park_elsewhere(std::int64_t timeout_ns) noexcept;
  void park_worker_elsewhere(detail::worker& w, std::int64_t timeout_ns) noexcept;
  // The body of wait(): the first task exception (or nullptr), and whether
  // the group was cancelled; throws mote::usage_error for a concurrent wait,
  // a wait from inside the group's own task, or a forked runtime.
  std::exception_ptr wait_for_all(task_group_status* status);

  detail::runtime_impl* runtime_ = nullptr;
  // The worker that created the group (a worker of runtime_), or nullptr.
  detail::worker* owner_ = nullptr;
  // Bound: the group whose task created this one.
  task_group* parent_ = nullptr;
  // The owner's private count: tasks it pushed on its own pool minus those it
  // ran itself. Written only by the owner, with plain loads and stores (never
  // a read-modify-write); atomic so that other threads may read it (see
  // pending_for_others()). Release stores: a reader that sees a decrement
  // sees the effects of the task that made it.
  std::atomic<std::int64_t> local_{0};
  std::atomic<std::uint32_t> flags_{0};  // kCancelled | kFailed
  // The group_cancel_epoch at which the parents were last found not cancelled.
  mutable std::atomic<std::uint32_t> seen_epoch_{0};
  std::atomic<bool> waiting_{false};  // a wait() is in progress
  // The owner's wait goes through the runtime's look (help_once) between
  // tasks while it asks for that (urgent tasks, a work source to poll): a
  // data-flow scope's group, whose tasks may have priorities or wait for a
  // source. Other groups keep the plain loop. Set before the first spawn.
  bool helps_runtime_ = false;
  // The shared count's version at the end of the last wait: the destructor
  // compares it to tell whether anything was spawned from elsewhere since.
  std::uint64_t waited_version_ = 0;
  // Whether the owner spawned since the last wait (the destructor's other test).
  std::atomic<bool> owner_spawned_{false};
  std::exception_ptr error_;  // the first exception; written once, under kFailed

  // Written by every thread but the owner: tasks spawned from elsewhere are
  // counted up here, and tasks that finish anywhere but on the owner's own
  // pops count down here. See the bit layout above.
  alignas(detail::cache_line) std::atomic<std::uint64_t> remote_{0};
  // The park word of a worker that waits here without owning the group
  // (park_worker_elsewhere), or nullptr: the last count-down wakes it. On
  // remote_'s line, which every count-down takes anyway.
  std::atomic<std::atomic<std::uint32_t>*> waiter_word_{nullptr};
};

namespace detail {

struct group_access {
  static worker* owner(const task_group& g) noexcept { return g.owner_; }
  static runtime_impl& runtime_of(const task_group& g) noexcept { return *g.runtime_; }
  static void record_exception(task_group& g, std::exception_ptr e) noexcept {
    g.record_exception(std::move(e));
  }
  // Records e as the group's first exception, if it is, without cancelling
  // the group (data-flow scopes: the tasks that do not depend on the one that
  // failed still run).
  static void record_exception_only(task_group& g, std::exception_ptr e) noexcept {
    g.record_exception_only(std::move(e));
  }
  // Makes g's owner wait through the runtime's look while it asks for that
  // (task_group::helps_runtime_). Before g's first spawn.
  static void set_helps_runtime(task_group& g) noexcept { g.helps_runtime_ = true; }
  // Counts one task into g that will be handed to the scheduler later (a
  // data-flow task that waits for its inputs), exactly as spawn() counts one.
  // Returns whether it was counted in the owner's private count: then the
  // task must count itself down with finish_local() if it ends on the owner
  // and finish_remote() anywhere else; otherwise always finish_remote().
  // w: current_worker.
  static bool count_in(task_group& g, worker* w) noexcept {
    if (w == g.owner_ && w != nullptr) {
      // As in spawn(): relaxed, the hand-off to the scheduler publishes it.
      g.owner_spawned_.store(true, std::memory_order_relaxed);
      g.local_.store(g.local_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return true;
    }
    // As in spawn_elsewhere(): relaxed, the task's publication orders it
    // before the count-down.
    g.remote_.fetch_add(task_group::kVersionOne + task_group::kCountOne, std::memory_order_relaxed);
    return false;
  }
  // A local task finished on the owner: its last access to the group.
  static void finish_local(task_group& g) noexcept {
    g.local_.store(g.local_.load(std::memory_order_relaxed) - 1, std::memory_order_release);
  }
  static void finish_remote(task_group& g) noexcept { g.finish_remote(); }
  // Tasks of g not yet finished, as its owner sees them (owner only).
  static std::uint32_t pending_for_owner(const task_group& g) noexcept { return g.pending_for_owner(); }
  static std::uint32_t pending_for_others(const task_group& g) noexcept { return g.pending_for_others(); }
  // wait() without the rethrow: the first task exception, or nullptr; the
  // status in *status. Throws mote::usage_error (and waited for nothing) on
  // misuse.
  static std::exception_ptr wait_for_all(task_group& g, task_group_status* status) {
    return g.wait_for_all(status);
  }
  // In a child process after fork(), the group's runtime has no workers: its
  // tasks will never run, and none can touch the group.
  MOTE_API static bool orphaned(const task_group& g) noexcept;
};

}  // namespace detail

template <class F>
void task_group::spawn(F&& f) {
  using record = detail::group_task<std::decay_t<F>>;
  detail::worker* w = detail::current_worker;
  void* memory = record::allocate(w);
  record* t;
  try {
    t = ::new (memory) record(this, std::forward<F>(f));
  } catch (...) {
    record::deallocate(memory, w);
    throw;
  }
  constexpr bool named = detail::is_named_group_fn<std::decay_t<F>>::value;
  if (w != nullptr) {
    if (MOTE_UNLIKELY(w->instrumented())) w->note_spawn(detail::group_trace_what(t), named);
  } else if (MOTE_UNLIKELY(trace::enabled())) {
    detail::note_outside_spawn(detail::group_trace_what(t), named);
  }
  if (MOTE_LIKELY(w == owner_ && w != nullptr)) {
    // The owner's own spawn: counted privately, pushed on its own pool.
    t->local = true;
    // Relaxed: read by the destructor (see there) and reset by wait().
    owner_spawned_.store(true, std::memory_order_relaxed);
    // Counted before the push: once pushed, a thief may run it and count it
    // down in the shared word, and the sum must never read zero while it is
    // pending. Relaxed: the push below publishes the task (a thief's acquire
    // CAS on the deque), and this store is sequenced before it.
    local_.store(local_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    // scheduler_policy::delegation: into the scheduler instead (its add-queue's
    // release store publishes the task, as the push would); it never runs it
    // here and never throws for a worker of its own runtime. One test of a
    // flag on the line instrumented() just read, never taken under stealing.
    if (MOTE_UNLIKELY(w->delegating())) {
      detail::schedule_task(w->runtime(), t, w);
      return;
    }
    if (MOTE_LIKELY(w->pool().push(t))) return;
    t->execute(t, *w);  // the pool is full: run it here; its end counts it down
    return;
  }
  try {
    spawn_elsewhere(t, w);
  } catch (...) {
    // Not handed in (spawn_elsewhere took its count back): nothing was added.
    t->~record();
    record::deallocate(t, w);
    throw;
  }
}

template <class F>
void detail::group_task<F>::run(task* base, worker& w) noexcept {
  auto* self = static_cast<group_task*>(base);
  if constexpr (is_named_group_fn<F>::value) {
    if (MOTE_UNLIKELY(w.instrumented())) w.note_task_name(self->fn.name);
  }
  task_group& g = *self->group;
  // A local task runs on its owner only when the owner popped it; any other
  // worker that runs it stole it.
  const bool counted_by_owner = self->local && &w == group_access::owner(g);
  // Relaxed: cancellation is a request; a task that starts just as its group
  // is cancelled elsewhere may run. A thread sees its own cancel().
  if (MOTE_LIKELY(group_cancels_active.load(std::memory_order_relaxed) == 0) || !g.is_cancelled()) {
    const std::uint32_t level = w.enter_group(&g);
    try {
      self->fn();
    } catch (...) {
      group_access::record_exception(g, std::current_exception());
    }
    w.leave_group(level);
  }
  self->~group_task();
  deallocate(self, &w);
  // The task's last access to its group: once counted down, the group may
  // be finished and destroyed by its waiter.
  if (counted_by_owner) {
    group_access::finish_local(g);
  } else {
    group_access::finish_remote(g);
  }
}

}  // namespace mote
