// FIFO locks: mote::ticket_lock and mote::partitioned_ticket_lock.
//
// Both hand the lock to waiters strictly in the order they arrived. A waiter
// spins briefly (the runtime's wait policy: pause, yield on a crowded
// machine), then sleeps on a futex, so a thread stuck behind a long critical
// section, or behind a holder that lost its CPU, costs nothing.
//
// ticket_lock: every waiter watches one word. Cheapest when two or three
// threads meet; each hand-off is seen by all waiters.
// partitioned_ticket_lock: waiters watch a slot of their own (ticket modulo
// the slot count), so a hand-off touches one waiter's cache line only
// (Dice's partitioned ticket lock). More threads than slots stay correct:
// threads whose tickets share a slot wait there in ticket order.
//
// Both meet the Lockable requirements (lock, try_lock, unlock), so
// std::lock_guard, std::unique_lock and std::scoped_lock work with them.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "mote/detail/platform.hpp"
#include "mote/export.hpp"

namespace mote {
namespace detail {

// One place where waiters for a ticket wait. `grant` is the newest ticket
// allowed in through this slot; a ticket t may enter once grant >= t. Grants
// to one slot only grow. `sleepers` counts the threads asleep on the low half
// of `grant`.
struct alignas(cache_line) ticket_slot {
  std::atomic<std::uint64_t> grant{0};
  std::atomic<std::uint32_t> sleepers{0};
};

// Waits until s.grant >= ticket (acquire): spins, then sleeps (out of line:
// src/sync/ticket_wait.cpp, on the runtime's wait policy).
MOTE_API void ticket_wait(ticket_slot& s, std::uint64_t ticket) noexcept;
// Wakes every thread asleep on s.
MOTE_API void ticket_wake(ticket_slot& s) noexcept;

// The ticket machinery the locks share: a ticket counter, the slots, and the
// holder's own record of the next ticket to let in.
class ticket_queue {
 public:
  // slots: a power of two, at least 1; the caller provides the storage.
  ticket_queue(ticket_slot* slots, std::size_t count) noexcept : slots_(slots), mask_(count - 1) {}

  // A place in the line. Relaxed: the ticket's order is the counter's
  // modification order; what the holder did is received through the grant.
  std::uint64_t take() noexcept { return head_.fetch_add(1, std::memory_order_relaxed); }

  // Returns once ticket t may enter: the lock is held.
  void wait_turn(std::uint64_t t) noexcept {
    ticket_slot& s = slot(t);
    // Acquire: pairs with the release in grant_next(); the previous holder's
    // critical section (and next_) happen before ours.
    if (MOTE_LIKELY(s.grant.load(std::memory_order_acquire) >= t)) return;
    ticket_wait(s, t);
  }

  // Takes the lock if it is free right now: the next ticket has been granted
  // and nobody holds it. May fail when the lock is being handed over.
  bool try_take() noexcept {
    std::uint64_t t = head_.load(std::memory_order_relaxed);
    // Acquire: as in wait_turn. Then only the ticket itself remains to take.
    if (slot(t).grant.load(std::memory_order_acquire) < t) return false;
    return head_.compare_exchange_strong(t, t + 1, std::memory_order_relaxed);
  }

  // The holder lets the next ticket in (which may not be taken yet).
  void grant_next() noexcept {
    const std::uint64_t t = next_;
    next_ = t + 1;  // read by that ticket's holder, after its acquire
    ticket_slot& s = slot(t);
    // seq_cst store, then seq_cst load of `sleepers`; a sleeper increments
    // `sleepers` (seq_cst), then loads `grant` (seq_cst). In the single total
    // order one of the two comes first: either the sleeper sees this grant
    // and does not sleep, or this load sees the sleeper and wakes it. The
    // store is also the release that hands the critical section over.
    s.grant.store(t, std::memory_order_seq_cst);
    if (MOTE_UNLIKELY(s.sleepers.load(std::memory_order_seq_cst) != 0)) ticket_wake(s);
  }

  // Tickets taken so far (any thread; a relaxed snapshot).
  std::uint64_t taken() const noexcept { return head_.load(std::memory_order_relaxed); }

  // Holder only: the ticket that the next grant lets in.
  std::uint64_t next() const noexcept { return next_; }
  std::size_t index(std::uint64_t t) const noexcept { return static_cast<std::size_t>(t & mask_); }

 private:
  ticket_slot& slot(std::uint64_t t) noexcept { return slots_[t & mask_]; }

  alignas(cache_line) std::atomic<std::uint64_t> head_{0};
  // Written by each holder, read by the next one; ticket 0 enters at once
  // (every grant starts at 0), so the first holder lets in ticket 1.
  alignas(cache_line) std::uint64_t next_ = 1;
  ticket_slot* slots_;
  std::uint64_t mask_;
};

// Slots for a partitioned lock when the caller names no count: one per CPU
// this machine has, rounded up to a power of two.
MOTE_API std::size_t default_lock_slots() noexcept;

inline std::size_t lock_slots(std::size_t wanted) noexcept {
  return std::bit_ceil(wanted == 0 ? std::size_t{1} : wanted);
}

}  // namespace detail

namespace detail {

// What the two ticket locks have in common: everything but where the slots
// live.
class ticket_lock_base {
 public:
  ticket_lock_base(const ticket_lock_base&) = delete;
  ticket_lock_base& operator=(const ticket_lock_base&) = delete;

  // Waits (spins, then sleeps) until every earlier caller has had its turn.
  void lock() noexcept { queue_.wait_turn(queue_.take()); }
  // Takes the lock only if nobody holds it or waits for it.
  bool try_lock() noexcept { return queue_.try_take(); }
  // Lets the next waiter in. Only the holder may call it.
  void unlock() noexcept { queue_.grant_next(); }
  // How many times a thread has queued for the lock (lock() calls, and
  // try_lock() calls that succeeded): statistics, and a way for a test to
  // know that a thread is in line.
  std::uint64_t tickets_taken() const noexcept { return queue_.taken(); }

 protected:
  // The slots are the derived lock's; only their address is kept here.
  ticket_lock_base(ticket_slot* slots, std::size_t count) noexcept : queue_(slots, count) {}
  ~ticket_lock_base() = default;

 private:
  ticket_queue queue_;
};

}  // namespace detail

// A FIFO ticket lock: lock() takes a ticket and waits for its turn.
//
//   mote::ticket_lock m;
//   long total = 0;
//   auto add = [&](long v) { std::lock_guard<mote::ticket_lock> hold(m); total += v; };
class ticket_lock : public detail::ticket_lock_base {
 public:
  ticket_lock() noexcept : ticket_lock_base(&slot_, 1) {}

 private:
  detail::ticket_slot slot_;
};

// Dice's partitioned ticket lock: a ticket lock whose waiters spin on
// separate cache lines (ticket modulo `slots`), so that a hand-off disturbs
// only the next waiter. `slots` is rounded up to a power of two; the default
// is one per CPU. More waiters than slots are correct (they share slots, in
// ticket order), only slower.
//
//   mote::partitioned_ticket_lock m;        // or m(64)
//   {
//     std::lock_guard<mote::partitioned_ticket_lock> hold(m);
//     // critical section
//   }
class partitioned_ticket_lock : public detail::ticket_lock_base {
 public:
  explicit partitioned_ticket_lock(std::size_t slots = detail::default_lock_slots())
      : partitioned_ticket_lock(std::make_unique<detail::ticket_slot[]>(detail::lock_slots(slots)),
                                detail::lock_slots(slots)) {}

 private:
  partitioned_ticket_lock(std::unique_ptr<detail::ticket_slot[]> slots, std::size_t count) noexcept
      : ticket_lock_base(slots.get(), count), slots_(std::move(slots)) {}

  std::unique_ptr<detail::ticket_slot[]> slots_;
};

}  // namespace mote
