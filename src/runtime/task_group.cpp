#include "mote/task_group.hpp"

#include <cstdint>
#include <exception>
#include <stdexcept>

#include "runtime/runtime_impl.hpp"

namespace mote {

namespace {
detail::runtime_impl& runtime_for_caller() {
  detail::worker* w = detail::current_worker;
  return w ? w->runtime() : runtime::default_runtime().impl();
}
}  // namespace

task_group::task_group() : task_group(*runtime_for_caller().facade()) {}

task_group::task_group(runtime& rt) : runtime_(&rt.impl()), owner_(nullptr) {
  detail::worker* w = detail::current_worker;
  if (w != nullptr && &w->runtime() == runtime_) {
    owner_ = w;
    base_ = top_ = w->depth();
    context_ = w->context();
  }
}

// NOLINTNEXTLINE(bugprone-exception-escape): throws missing_wait by design
task_group::~task_group() noexcept(false) {
  if (local_count_ == 0 && pending_.load(std::memory_order_acquire) == 0) return;
  // Forgotten wait: cancel what has not started, wait for what has, and then
  // say so. Nothing is left running against this destroyed frame.
  cancel();
  const bool unwinding = std::uncaught_exceptions() > 0;
  try {
    wait();
  } catch (...) {
    // The group's own failures are superseded by the missing wait below, or by
    // the exception already propagating.
  }
  if (!unwinding) throw missing_wait("mote::task_group destroyed with tasks it never waited for");
}

void task_group::cancel() noexcept { cancelled_.store(true, std::memory_order_relaxed); }

void task_group::record_exception(std::exception_ptr e) noexcept {
  bool expected = false;
  // The winner writes error_ once; the release decrement in task_finished(),
  // which follows, publishes it to wait()'s acquire load of pending_.
  if (has_error_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
    error_ = std::move(e);
  }
  cancel();
}

void task_group::task_finished() noexcept {
  // Read before the decrement: once pending_ reaches zero the waiter may
  // destroy this group, so the wake-up below must not touch it.
  detail::runtime_impl* rt = runtime_;
  // seq_cst: Dekker pair with the waiter's increment of group_waiters_ then
  // seq_cst load of pending_ (see park_waiter in wait()).
  if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1) rt->notify_group_waiters();
}

void task_group::spawn_task(detail::task* t) {
  // Not at the owner's top (another thread, or a frame above other pushes):
  // the deque's last-in-first-out discipline forbids pushing here, so the
  // task goes through the runtime's injection queue.
  runtime_->submit(t);
}

void task_group::wait() {
  detail::worker* w = detail::current_worker;
  if (owner_ != nullptr && w != owner_) {
    throw std::logic_error(
        "mote::task_group::wait: called on a thread other than the worker that created the group");
  }
  if (w != nullptr && &w->runtime() == runtime_) {
    if (w == owner_ && local_count_ != 0) {
      if (w->depth() != top_ || w->context() != context_) {
        throw std::logic_error(
            "mote::task_group::wait: called from a frame nested inside other parallel work "
            "while the group's own tasks are still below it; wait from the frame that spawned them");
      }
      // Take back our own tasks, newest first; run those nobody stole. Until
      // wait() returns, top_ matches no depth, so a spawn from inside a task
      // run here goes through the injection queue instead of pushing between
      // frames.
      top_ = UINT32_MAX;
      while (w->depth() > base_) {
        w->share_if_wanted();
        detail::task* t = w->top();
        if (w->pop()) {
          t->state.store(detail::task::kOwnerRun, std::memory_order_relaxed);
          if (MOTE_UNLIKELY(w->instrumented())) {
            w->note_task_begin(reinterpret_cast<const void*>(t->execute), false);
            t->execute(t, *w);
            w->note_task_end();
          } else {
            t->execute(t, *w);
          }
        } else {
          // A thief has it and counts it down when done, maybe already.
          pending_.fetch_add(1, std::memory_order_seq_cst);
        }
      }
      local_count_ = 0;
    } else if (w == owner_) {
      top_ = UINT32_MAX;
    }
    // Help the runtime until the stolen and injected tasks are done too.
    const bool traced_wait = w->instrumented() && pending_.load(std::memory_order_relaxed) != 0;
    if (traced_wait) w->note_wait_begin(1);
    const std::int64_t spin = runtime_->spin_ns();
    std::int64_t idle_since = 0;
    std::int64_t park_ns = 50'000;
    while (pending_.load(std::memory_order_acquire) != 0) {
      w->share_if_wanted();  // in case our tasks sit below frames still running here
      if (detail::task* t = runtime_->find_work(*w)) {
        w->run_foreign(t);
        idle_since = 0;
        park_ns = 50'000;
        continue;
      }
      const std::int64_t now = detail::now_ns();
      if (idle_since == 0) idle_since = now;
      if (now - idle_since < spin) {
        for (int i = 0; i < 32; ++i) detail::cpu_pause();
        continue;
      }
      // Park, with a timeout: new stealable work does not wake this thread.
      runtime_->group_waiters_.fetch_add(1, std::memory_order_seq_cst);
      const std::uint32_t epoch = runtime_->group_epoch_.load(std::memory_order_seq_cst);
      if (pending_.load(std::memory_order_seq_cst) != 0) {
        if (MOTE_UNLIKELY(w->instrumented())) {
          w->note_park(true);
          detail::futex_wait_for(&runtime_->group_epoch_, epoch, park_ns);
          w->note_park(false);
        } else {
          detail::futex_wait_for(&runtime_->group_epoch_, epoch, park_ns);
        }
      }
      runtime_->group_waiters_.fetch_sub(1, std::memory_order_seq_cst);
      if (park_ns < 4'000'000) park_ns *= 2;
    }
    if (traced_wait) w->note_wait_end();
    if (w == owner_) top_ = base_;
  } else {
    wait_external();
  }

  // Every task has finished; the acquire loads above made their writes, and
  // error_, visible. Reset for reuse, then report the first failure.
  std::exception_ptr error;
  if (has_error_.load(std::memory_order_acquire)) {
    error = std::move(error_);
    error_ = nullptr;
    has_error_.store(false, std::memory_order_relaxed);
  }
  cancelled_.store(false, std::memory_order_relaxed);
  if (error) std::rethrow_exception(error);
}

void task_group::wait_external() {
  // Not a worker of this runtime: sleep until the last task wakes us.
  while (pending_.load(std::memory_order_acquire) != 0) {
    runtime_->group_waiters_.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t epoch = runtime_->group_epoch_.load(std::memory_order_seq_cst);
    if (pending_.load(std::memory_order_seq_cst) != 0) {
      detail::futex_wait(&runtime_->group_epoch_, epoch);
    }
    runtime_->group_waiters_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace mote
