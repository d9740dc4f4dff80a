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

namespace detail {

// Heap record of one spawned task. It frees itself after running (or after
// being skipped because its group was cancelled).
template <class F>
struct group_task : task {
  task_group* group;
  F fn;

  template <class A>
  group_task(task_group* g, A&& f) : group(g), fn(std::forward<A>(f)) {
    init(&group_task::run);
  }
  static void run(task* base, worker& w) noexcept;
};

template <class F>
struct is_named_group_fn : std::false_type {};
template <class F>
struct is_named_group_fn<named_fn<F>> : std::true_type {};

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

}  // namespace detail

// A group of tasks to wait for together. spawn() as often as you like, from
// the group's own frame or from inside its tasks; wait() returns when all are
// done and rethrows the first exception any of them threw (the tasks that had
// not started by then are skipped). Groups nest freely, and a group can be
// reused after wait(). Called on a thread that is not a worker, spawn hands the
// task to the runtime and wait() sleeps until the group is done.
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
  // A group must be waited for. If tasks are still pending, the destructor
  // cancels those that have not started, waits for the rest, and then throws
  // mote::missing_wait (unless an exception is already propagating).
  ~task_group() noexcept(false);  // NOLINT(bugprone-exception-escape): throws missing_wait by design
  task_group(const task_group&) = delete;
  task_group& operator=(const task_group&) = delete;

  // Adds f to the group; it may run at once, later, here or elsewhere. When the
  // worker's deque is full, f runs here before spawn returns.
  template <class F>
  void spawn(F&& f);

  // Returns when every task spawned so far is done. Rethrows the first
  // exception a task threw, once; the group is then ready for reuse.
  void wait();

  // Tasks of this group that have not started yet will not run.
  void cancel() noexcept;
  bool is_cancelled() const noexcept { return cancelled_.load(std::memory_order_relaxed); }

  // ---- for the runtime -------------------------------------------------
  void task_finished() noexcept;              // after each task, run or skipped
  void record_exception(std::exception_ptr e) noexcept;

 private:
  void spawn_task(detail::task* t);
  void wait_external();

  detail::runtime_impl* runtime_;
  detail::worker* owner_;           // the worker that created the group, or nullptr
  std::uint32_t base_ = 0;          // owner's deque depth when the group started
  std::uint32_t top_ = 0;           // owner's deque depth after the group's last local push
  std::uint64_t context_ = 0;       // owner's task context when the group started
  std::int64_t local_count_ = 0;    // tasks on the owner's deque since the last wait (owner only)
  // Tasks that run elsewhere and have not finished: foreign spawns (counted
  // before they are submitted) and local tasks that a thief took (counted by
  // the owner when its pop finds them gone, which may come after the thief's
  // decrement: the count can dip below zero meanwhile). Local tasks that the
  // owner runs itself never touch it. Decrements in task_finished() are
  // seq_cst (release for the task's writes), paired with the acquire loads in
  // wait().
  alignas(detail::cache_line) std::atomic<std::int64_t> pending_{0};
  std::atomic<std::uint32_t> waiters_{0};    // threads parked in wait()
  std::atomic<std::uint32_t> wake_word_{0};  // futex word the parked waiters sleep on
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> has_error_{false};
  std::exception_ptr error_;        // the first exception, written once under has_error_
};

template <class F>
void task_group::spawn(F&& f) {
  using record = detail::group_task<std::decay_t<F>>;
  auto* t = new record(this, std::forward<F>(f));
  detail::worker* w = detail::current_worker;
  constexpr bool named = detail::is_named_group_fn<std::decay_t<F>>::value;
  if (w != nullptr) {
    if (MOTE_UNLIKELY(w->instrumented())) w->note_spawn(detail::group_trace_what(t), named);
  } else if (MOTE_UNLIKELY(trace::enabled())) {
    detail::note_outside_spawn(detail::group_trace_what(t), named);
  }
  // Local push only from the group's own frame: same worker, same task
  // context, nothing pushed above the group's last task.
  if (MOTE_LIKELY(w == owner_ && w != nullptr && w->depth() == top_ && w->context() == context_)) {
    if (MOTE_LIKELY(w->push(t))) {
      top_ = w->depth();
      ++local_count_;
      return;
    }
    t->state.store(detail::task::kOwnerRun, std::memory_order_relaxed);
    t->execute(t, *w);  // deque full: run it here
    return;
  }
  // Relaxed: the submission (the injection queue's mutex) orders this
  // increment before the task's decrement.
  pending_.fetch_add(1, std::memory_order_relaxed);
  spawn_task(t);
}

template <class F>
void detail::group_task<F>::run(task* base, worker& w) noexcept {
  auto* self = static_cast<group_task*>(base);
  if constexpr (is_named_group_fn<F>::value) {
    if (MOTE_UNLIKELY(w.instrumented())) w.note_task_name(self->fn.name);
  }
  task_group* g = self->group;
  if (!g->is_cancelled()) {
    try {
      self->fn();
    } catch (...) {
      g->record_exception(std::current_exception());
    }
  }
  const bool counted = self->state.load(std::memory_order_relaxed) != kOwnerRun;
  delete self;
  if (counted) g->task_finished();
}

}  // namespace mote
