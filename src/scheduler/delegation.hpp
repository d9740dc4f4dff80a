// scheduler_policy::delegation: Nanos6's synchronized scheduler (the seed's
// listing 5) on mote's own locks. docs/scheduler.md has the argument; the
// comment beside each atomic names what it pairs with.
//
//   producers (schedule())            consumers (idle or waiting workers)
//   ----------------------            -----------------------------------
//   lock the add-queue of its node    lock_or_delegate(worker index):
//   (a partitioned ticket lock),        served: a task handed over by the
//   push one pointer, unlock;             holder, without ever holding it;
//   full: drain the add-queues          holder: drain every add-queue into
//   under the delegation lock and         the ready queue, hand one task to
//   push again. Never drops a task.       each waiter in line, take one, unlock.
//
// The add-queues are bounded single-producer single-consumer rings: the
// producer side is serialized by the queue's lock, the consumer side by the
// delegation lock, so neither side needs a read-modify-write on the ring.
// The ready queue is a plain ring touched only by the delegation lock's
// holder.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "mote/detail/platform.hpp"
#include "mote/detail/task.hpp"
#include "mote/sync/delegation_lock.hpp"
#include "mote/sync/ticket_lock.hpp"

namespace mote::detail {

// The unsynchronized ready queue: a growable ring of task pointers, used
// only by the holder of the delegation lock. The oldest task goes to a worker
// that is not inside a task (FIFO, the order tasks became ready in), the
// newest to one that waits inside a task (a group wait, a join's wait): that
// keeps the nesting of waits on one stack shallow, as a worker's own pool
// does under work stealing.
class ready_ring {
 public:
  ready_ring();
  // False when the ring is full and cannot grow (out of memory): the caller
  // leaves the task where it was.
  bool push_back(task* t) noexcept;
  task* pop_front() noexcept;  // nullptr when empty
  task* pop_back() noexcept;   // nullptr when empty
  std::size_t size() const noexcept { return static_cast<std::size_t>(tail_ - head_); }

 private:
  bool grow() noexcept;

  std::unique_ptr<task*[]> slots_;
  std::size_t mask_;
  std::uint64_t head_ = 0;  // oldest
  std::uint64_t tail_ = 0;  // one past the newest
};

class delegation_scheduler {
 public:
  // Slots of one add-queue. A full queue is drained by its producer, so the
  // size only sets how often a burst of spawns pays for a drain.
  static constexpr std::uint32_t kAddQueueCapacity = 1024;

  // worker_nodes[i]: the NUMA node of worker i (< num_nodes). Node queue n
  // serves the workers of node n; queue num_nodes serves every other thread.
  delegation_scheduler(const std::vector<unsigned>& worker_nodes, unsigned num_nodes);
  ~delegation_scheduler();
  delegation_scheduler(const delegation_scheduler&) = delete;
  delegation_scheduler& operator=(const delegation_scheduler&) = delete;

  // Hands t in. worker: the index of the calling worker of this runtime, or
  // kOutside for any other thread. Never drops t: when the add-queue is full
  // it drains the add-queues under the delegation lock (waiting for the lock
  // on the core's wait policy) and pushes again. The caller notifies.
  static constexpr unsigned kOutside = ~0u;
  void add(task* t, unsigned worker) noexcept;

  // A ready task for worker `id`, or nullptr. nested: the caller is inside a
  // task (it gets the newest task, else the oldest). *more: set when this call
  // held the lock and left tasks in the ready queue (pass a wake-up on).
  task* get(unsigned id, bool nested, bool* more) noexcept;

  // A cheap look (relaxed loads of lines that change only when tasks come or
  // go): might a task be waiting? A stale answer only moves the pick-up to
  // the next look.
  bool maybe_ready() const noexcept;
  // park()'s last look: seq_cst loads, in the order the argument needs (see
  // delegation.cpp). True when a task is in an add-queue or the ready queue.
  bool visible() const noexcept;

 private:
  // One add-queue: a ring of kAddQueueCapacity task pointers. tail_ is
  // written by the producer that holds `lock`, head_ by the holder of the
  // delegation lock; each on a line of its own.
  struct add_queue {
    explicit add_queue(std::size_t producers);
    // Producer, under `lock`: false when full.
    bool push(task* t) noexcept;

    partitioned_ticket_lock lock;
    std::unique_ptr<task*[]> slots;
    std::uint64_t head_seen = 0;  // producer's copy of head (under `lock`)
    alignas(cache_line) std::atomic<std::uint64_t> tail{0};
    alignas(cache_line) std::atomic<std::uint64_t> head{0};
  };

  // Per consumer id: whether its current get() is nested, for the holder that
  // serves it.
  struct alignas(cache_line) caller_state {
    std::atomic<bool> nested{false};
  };

  // Holder only: moves every add-queue's tasks into ready_.
  void drain() noexcept;
  // Holder only: one task to each delegating waiter in line, while any are left.
  void serve_waiters();
  task* take(bool nested) noexcept { return nested ? ready_.pop_back() : ready_.pop_front(); }
  // Holder only: ready_count_ = ready_.size().
  void publish_count() noexcept;

  std::vector<std::unique_ptr<add_queue>> queues_;  // node queues, then the outside one
  std::vector<unsigned> queue_of_worker_;
  std::unique_ptr<caller_state[]> callers_;
  delegation_lock<task*> lock_;
  ready_ring ready_;  // under lock_
  // ready_.size() as of the last holder: written by holders only, read by
  // anyone (maybe_ready, visible). See publish_count().
  alignas(cache_line) std::atomic<std::size_t> ready_count_{0};
};

}  // namespace mote::detail
