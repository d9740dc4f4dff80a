// The runtime's side of an attached work source (include/mote/detail/work_source.hpp):
// where the pointer lives, who polls when, and how a detach waits for polls
// in progress. runtime_impl holds one; worker_loop.cpp calls it from
// help_once() and park().
#pragma once

#include <atomic>
#include <cstdint>

#include "mote/detail/platform.hpp"
#include "mote/detail/work_source.hpp"

namespace mote::detail {

class work_source_slot {
 public:
  // The check between tasks: one relaxed load and a branch when nothing is
  // attached. Relaxed: a worker that misses a fresh attach polls at its next
  // check; the source's fields are read only through enter(), whose acquire
  // pairs with attach's release.
  bool attached() const noexcept { return source_.load(std::memory_order_relaxed) != nullptr; }

  // A busy worker between tasks (help_once, before it looks for a task):
  // at least every half interval (by the cycle counter) it reads the clock, and polls
  // when the interval has passed since the last poll by any worker. Cold:
  // only with a source.
  void poll_if_due() noexcept;
  // An idle worker, after the models' work and before stealing: polls. True
  // when the poll made progress (the worker then looks for tasks again).
  bool poll_idle() noexcept;
  // The last look before a worker sleeps: the source's sleep_ns when it has
  // work outstanding (the sleep must end to poll again), else -1 (sleep until
  // woken, as without a source).
  std::int64_t sleep_limit_ns() noexcept;

  // poll_after_task(): the calling worker's next poll_if_due() polls.
  static void poll_soon() noexcept;

  void attach(work_source* s);
  void detach(work_source* s) noexcept;

 private:
  // Counts the caller in and returns the source, or nullptr (detached
  // meanwhile: nothing to call). Every enter() that returns a source is
  // followed by leave().
  work_source* enter() noexcept;
  void leave() noexcept;
  bool poll(work_source* s, bool busy) noexcept;

  // Written by attach and detach only: a line every worker reads between
  // tasks, kept apart from the counters below that polls write.
  alignas(cache_line) std::atomic<work_source*> source_{nullptr};
  alignas(cache_line) std::atomic<std::uint32_t> users_{0};   // inside one of the source's functions
  std::atomic<std::int64_t> last_poll_ns_{0};                  // the last poll's start, by any worker
};

}  // namespace mote::detail
