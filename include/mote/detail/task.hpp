// The unit of work that a deque holds and a thief runs.
#pragma once

#include <atomic>
#include <cstdint>

#include "mote/export.hpp"

namespace mote::detail {

class worker;

// A task that a worker other than its spawner may run. Two words, both
// written before the push: the fast path of join pays for nothing else.
//
// Three kinds live in deques and queues, all through this header:
//  - join's second callable (join.hpp): in join's frame, on `worker::frames`;
//    its spawner takes it back with a pop, or waits for the thief that ran it;
//  - a task_group task (task_group.hpp): a pooled record, on `worker::pool`
//    or the injection queue; whoever takes it runs it and frees it;
//  - an outside call (runtime::run): in the caller's frame, injected.
struct task {
  using execute_fn = void (*)(task*, worker&) noexcept;

  // Runs the task. Written by the spawner before the push; read by the taker
  // after the acquire that took it (the thief's CAS in steal(), the owner's
  // pop, the injection queue's mutex).
  execute_fn execute;
  // join's records only: kRunning until the thief that ran it calls finish();
  // kParked while the spawner sleeps on it. finish() publishes the results
  // with a release exchange that pairs with the acquire load in
  // worker::wait_for(). Other kinds leave it unused.
  std::atomic<std::uint32_t> state;

  static constexpr std::uint32_t kRunning = 0;
  static constexpr std::uint32_t kParked = 1;
  static constexpr std::uint32_t kDone = 2;
  static constexpr std::uint32_t kFailed = 3;  // done, and an exception is stored

  void init(execute_fn fn) noexcept {
    execute = fn;
    state.store(kRunning, std::memory_order_relaxed);
  }
  // Called by the thief that ran a stolen join record, as its last access to it.
  MOTE_API void finish(bool failed) noexcept;
};

// A task that may wait in the runtime's injection queue: task_group and
// data-flow records, outside calls (never join's records, which keep to two
// words). The queue links them through `next`, so that handing one in never
// allocates: a task readied where nothing may throw (the end of a
// data-flow task's predecessor, the last step of a spawn) always finds room.
struct queued_task : task {
  // The link of the one list the task is in while it waits: the injection
  // queue's (under its mutex).
  queued_task* next;
};

}  // namespace mote::detail
