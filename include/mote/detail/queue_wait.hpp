// How the queues and channels of mote wait (include/mote/queues/,
// include/mote/channel.hpp): spin on the runtime's wait policy, then sleep on
// a futex, with a wake-up that costs the fast path nothing.
//
// The handshake is an asymmetric Dekker pair. A thread that changes what a
// waiter waits for (an item pushed, a slot freed, the queue closed) makes
// the change with a plain release store and then reads `sleepers` with a
// relaxed load: no fence, so a push stays a few instructions. A waiter that
// is about to sleep announces itself (fetch_add on `sleepers`), then runs
// heavy_barrier(): membarrier(2), which makes every running thread of the
// process execute a full memory barrier before it returns. Whichever side's
// barrier point comes first, one of them sees the other: either the waker's
// load comes after the barrier and sees the sleeper (and wakes it), or its
// store was drained by the barrier and the waiter's look after it sees the
// change (and does not sleep). Where membarrier is not available the waiter
// sleeps with a timeout instead (50 us doubling to 4 ms), so a lost wake-up
// costs a bounded delay, never a hang.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "mote/detail/platform.hpp"
#include "mote/export.hpp"

namespace mote::detail {

// One place to wait: an epoch that every wake-up bumps (the futex word), and
// the number of threads asleep on it. On a line of its own, so that the
// waker's load of `sleepers` hits its cache until somebody sleeps.
struct alignas(cache_line) wait_point {
  std::atomic<std::uint32_t> epoch{0};
  std::atomic<std::uint32_t> sleepers{0};
};

// Makes every running thread of the process execute a full memory barrier
// before it returns (membarrier, private expedited). False when the kernel
// refuses: then the caller may not rely on it.
MOTE_API bool heavy_barrier() noexcept;
// Has heavy_barrier() worked in this process (it is tried once)?
MOTE_API bool heavy_barrier_available() noexcept;

MOTE_API void wake_waiters(wait_point& w) noexcept;

// The waker's half: call after the store that a waiter may be waiting for.
inline void notify(wait_point& w) noexcept {
  // Keeps the compiler from moving the load above the caller's store; the
  // processor's store-load reordering is covered by the sleeper's
  // heavy_barrier() (see the top of this file).
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (MOTE_UNLIKELY(w.sleepers.load(std::memory_order_relaxed) != 0)) wake_waiters(w);
}

// The waiter's half, out of line: returns once ready(ctx) is true. Spins on
// the runtime's wait policy (pause, yield on a crowded machine) for up to
// spin_ns, then sleeps on w. ready() must read what the wakers write with
// acquire loads.
MOTE_API void wait_slow(wait_point& w, bool (*ready)(void*), void* ctx, std::int64_t spin_ns) noexcept;

// How long a queue's waiter spins before it sleeps.
inline constexpr std::int64_t kQueueSpinNs = 50'000;

// The calling thread's list of producers with a partial batch (below), or
// null before its first batch.
struct pending_list;
MOTE_API extern constinit thread_local pending_list* this_thread_pending;
MOTE_API void publish_pending_slow(pending_list* l) noexcept;

// On a worker, shares every task it holds privately (worker::publish_own);
// on any other thread, nothing.
MOTE_API void publish_worker_work() noexcept;

// Before a wait: makes visible what the calling thread holds that another
// thread may be waiting for, so that nothing sits unseen while it waits:
// every partial batch it produced (below), and, on a worker, the tasks in
// the private parts of its deques (split_deque::publish). Every wait and
// every sleep of a mote thread calls it.
inline void publish_before_wait() noexcept {
  if (pending_list* l = this_thread_pending) publish_pending_slow(l);
  publish_worker_work();
}

template <class Ready>
void wait_until(wait_point& w, Ready&& ready) noexcept {
  if (ready()) return;
  // About to wait: first show the consumers what this thread produced.
  publish_before_wait();
  // A short, tight spin first: an answer from the other core takes a few
  // hundred nanoseconds, and each look here is one load.
  for (int i = 0; i < 128; ++i) {
    cpu_pause();
    if (ready()) return;
  }
  wait_slow(
      w, [](void* c) { return (*static_cast<std::remove_reference_t<Ready>*>(c))(); }, &ready,
      kQueueSpinNs);
}

// Before a thread waits (in a queue or channel operation, in a task-group
// wait, or as an idle worker) it publishes the partial batches it holds as a
// producer (batch_queue, channel), so that an item never sits unseen while
// both sides wait. A producer enlists on its thread's list when it starts a
// batch on a thread whose list it is not on (once, in the steady state); the
// list is walked before the thread waits, and when the thread ends. A
// producer whose role moves to another thread calls flush() first, which
// publishes and takes it off the list.

struct pending_batch_access;

class MOTE_API pending_batch {
 public:
  // Publishes the partial batch now, if there is one. Called on the
  // producer's thread by the walk of its list, under the list's lock.
  virtual void publish_pending() noexcept = 0;

 protected:
  pending_batch() = default;
  ~pending_batch() = default;
  pending_batch(const pending_batch&) = delete;
  pending_batch& operator=(const pending_batch&) = delete;

  // Producer's thread, when a batch gets its first item: makes sure this
  // producer is on the calling thread's list (a load and a compare when it
  // is, the steady state). It stays listed until delist() (flush, close,
  // destruction) or the end of the thread.
  void enlist_here() noexcept {
    pending_list* const here = this_thread_pending;
    if (MOTE_UNLIKELY(here == nullptr || list_.load(std::memory_order_relaxed) != here)) enlist_slow();
  }
  // Any thread: take it off again (a batch published, a producer destroyed
  // or taken over); does nothing when it is not listed.
  void delist() noexcept {
    if (list_.load(std::memory_order_acquire) != nullptr) delist_slow();
  }
  bool enlisted() const noexcept { return list_.load(std::memory_order_relaxed) != nullptr; }

 private:
  void delist_slow() noexcept;
  void enlist_slow() noexcept;
  friend struct pending_batch_access;
  // The list this producer is on, or null. Written under that list's lock
  // (which orders the walk, a cross-thread delist and the producer's own).
  std::atomic<pending_list*> list_{nullptr};
};

// A thread that waits on queues and spins (a dedicated pipeline or stream
// thread) counts itself among the spinning threads while it lives, so that
// every wait in the process yields the CPU when they outnumber the CPUs, or
// share one (cpu: where it is pinned, or -1).
MOTE_API void register_spinner(int cpu);
MOTE_API void unregister_spinner(int cpu) noexcept;
struct spinner_scope {
  int cpu;
  explicit spinner_scope(int c) : cpu(c) { register_spinner(cpu); }
  ~spinner_scope() { unregister_spinner(cpu); }
  spinner_scope(const spinner_scope&) = delete;
  spinner_scope& operator=(const spinner_scope&) = delete;
};

// What push(const T&) passes on: a copy of a small trivially copyable value
// (the caller's variable, often a loop counter, then does not escape to the
// slow path and stays in a register), else the reference.
template <class T>
decltype(auto) small_copy(const T& v) noexcept(std::is_trivially_copyable_v<T>) {
  if constexpr (std::is_trivially_copyable_v<T> && sizeof(T) <= 16) {
    return T(v);
  } else {
    return (v);
  }
}

// How a pop hands an item over: builds the optional it returns by moving
// `item` into it, then calls after(true); when that move throws, after(false)
// and the exception goes on, the item left where it was (as the move left
// it). The optional is built in the caller's return slot (return the call
// itself), so no second move can throw once the item has left the queue.
//
//   return detail::move_out(*p, [&](bool moved) noexcept { if (moved) { std::destroy_at(p); ++head; } });
template <class T, class After>
std::optional<T> move_out(T& item, After&& after) {
  if constexpr (std::is_nothrow_move_constructible_v<T>) {
    struct finish {
      After& after;
      ~finish() { after(true); }
    } f{after};
    return std::optional<T>(std::in_place, std::move(item));
  } else {
    struct finish {
      After& after;
      int unwinding = std::uncaught_exceptions();
      ~finish() { after(std::uncaught_exceptions() == unwinding); }
    } f{after};
    return std::optional<T>(std::in_place, std::move(item));
  }
}

// What a bulk operation (push_n, pop_n) reports through its optional count
// argument: the items moved so far, written when the operation returns and
// also when a move, a wait or a closed queue ends it with an exception.
class count_report {
 public:
  count_report(std::size_t* to, const std::size_t& moved) noexcept : to_(to), moved_(moved) {}
  ~count_report() {
    if (to_ != nullptr) *to_ = moved_;
  }
  count_report(const count_report&) = delete;
  count_report& operator=(const count_report&) = delete;

 private:
  std::size_t* to_;
  const std::size_t& moved_;
};

// Counts a channel's queue for MOTE_STATS and marks it in the trace:
// 0 BatchQueue, 1 MPMC queue, 2 switched to MPMC (src/queues/channel.cpp).
MOTE_API void note_channel(const void* ch, unsigned queue) noexcept;

}  // namespace mote::detail
