// mote::delegation_lock<T>: a partitioned ticket lock whose holder may serve
// the threads waiting behind it instead of letting each of them in.
//
// A thread that wants a result computed under the lock (a ready task from a
// scheduler, say) calls lock_or_delegate(id, item). Either it gets the lock
// (true: it computes the result itself, and may serve the others first), or
// the holder computed the result for it and handed it over in `item` (false:
// it never entered). The holder sees the waiters in arrival order through
// empty()/front(), gives each its item with set_item() and lets it go with
// pop_front(); it stays the holder throughout, and a waiter it does not serve
// gets the lock in its turn when the holder calls unlock(). This is the
// Delegation Ticket Lock of Nanos6's scheduler.
//
// Ids: every thread that calls lock_or_delegate at the same time uses an id
// of its own in [0, max_ids) (a worker index, say); ids index the result
// slots. lock(), try_lock() and unlock() take no id, and any number of
// threads may call them; more waiters than slots are correct.
//
//   mote::delegation_lock<int> m(workers);
//   int item;
//   if (m.lock_or_delegate(my_id, item)) {   // we hold the lock
//     while (!m.empty() && !pending.empty()) {
//       m.set_item(m.front(), take_one(pending));
//       m.pop_front();                        // that waiter returns false with its item
//     }
//     item = take_one(pending);
//     m.unlock();
//   }
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "mote/detail/platform.hpp"
#include "mote/error.hpp"
#include "mote/sync/ticket_lock.hpp"

namespace mote {
namespace detail {

// A waiter's entry in the log of its ticket's slot: the ticket's low 48 bits
// and the caller's id in the low 16. An id field of all ones marks an empty
// entry. An entry is the holder's to serve only when its ticket is exactly
// the next one to let in: a later ticket that shares the slot (more waiters
// than slots) overwrites an earlier one's entry, and that earlier waiter then
// simply takes the lock in its turn.
struct delegation_log {
  static constexpr std::uint64_t kNoId = 0xffff;
  static constexpr std::uint64_t kEmpty = kNoId;
  static constexpr std::size_t kMaxIds = 0xffff;
  static constexpr std::uint64_t encode(std::uint64_t ticket, std::size_t id) noexcept {
    return (ticket << 16) | static_cast<std::uint64_t>(id);
  }
  static constexpr bool names(std::uint64_t entry, std::uint64_t ticket) noexcept {
    return (entry & kNoId) != kNoId && (entry >> 16) == (ticket & ((std::uint64_t{1} << 48) - 1));
  }
};

[[noreturn]] MOTE_API void delegation_misuse(const char* what);

}  // namespace detail

template <class T>
class delegation_lock {
 public:
  // max_ids: how many distinct ids lock_or_delegate will see (at most 65535);
  // the default is one per CPU this machine has.
  explicit delegation_lock(std::size_t max_ids = detail::default_lock_slots())
      : ids_(checked(max_ids)),
        slot_count_(detail::lock_slots(max_ids)),
        slots_(new detail::ticket_slot[slot_count_]),
        log_(new log_entry[slot_count_]),
        ready_(new ready_entry[max_ids]),
        queue_(slots_.get(), slot_count_) {}
  delegation_lock(const delegation_lock&) = delete;
  delegation_lock& operator=(const delegation_lock&) = delete;

  // Waits for the lock, or for the holder to serve this call. True: the lock
  // is held (unlock it). False: `item` holds what the holder set for `id`.
  // Throws mote::usage_error when id >= max_ids.
  bool lock_or_delegate(std::size_t id, T& item) {
    if (MOTE_UNLIKELY(id >= ids_)) detail::delegation_misuse("mote::delegation_lock: id out of range");
    const std::uint64_t t = queue_.take();
    std::atomic<std::uint64_t>& entry = log_[queue_.index(t)].word;
    const std::uint64_t mine = detail::delegation_log::encode(t, id);
    // Release: our reads of ready_[id] in earlier calls happen before the
    // holder writes it again, which it does only after reading this entry
    // (acquire, in peek()).
    entry.store(mine, std::memory_order_release);
    queue_.wait_turn(t);  // acquire: what the holder set is visible
    ready_entry& r = ready_[id];
    const bool served = r.ticket.load(std::memory_order_relaxed) == t;
    // Our entry is spent either way; a later ticket may have replaced it.
    std::uint64_t expected = mine;
    entry.compare_exchange_strong(expected, detail::delegation_log::kEmpty, std::memory_order_relaxed);
    if (served) {
      item = std::move(r.item);
      return false;
    }
    return true;
  }

  // Waits (spins, then sleeps) for the lock, in arrival order.
  void lock() noexcept { queue_.wait_turn(queue_.take()); }
  // Takes the lock only if nobody holds it or waits for it.
  bool try_lock() noexcept { return queue_.try_take(); }
  // Lets the next waiter in: it gets the lock (if it was delegating, it
  // computes its result itself). Holder only.
  void unlock() noexcept { queue_.grant_next(); }
  // How many times a thread has queued (lock(), lock_or_delegate(), and
  // try_lock() calls that succeeded): statistics, and a way for a test to
  // know that a thread is in line.
  std::uint64_t tickets_taken() const noexcept { return queue_.taken(); }

  // Holder only. True when the next waiter in line is not (yet) a
  // lock_or_delegate call that could be served: nobody waits, the next
  // waiter called lock(), or it has not registered yet (it will take the
  // lock in its turn).
  bool empty() const noexcept { return !peek(); }
  // Holder only, when !empty(): the id of the next waiter. Throws
  // mote::usage_error when there is none to serve.
  std::size_t front() const {
    if (!peek()) detail::delegation_misuse("mote::delegation_lock::front: empty()");
    return front_id_;
  }
  // Holder only: the result for the next waiter, whose id is `id` (front()).
  // Throws mote::usage_error when the next waiter is not `id`.
  void set_item(std::size_t id, T item) {
    if (!peek() || front_id_ != id) detail::delegation_misuse("mote::delegation_lock::set_item: id is not front()");
    const std::uint64_t next = queue_.next();
    ready_entry& r = ready_[id];
    r.item = std::move(item);
    // Relaxed: pop_front()'s grant (a release) publishes both fields.
    r.ticket.store(next, std::memory_order_relaxed);
    served_ = next;
  }
  // Holder only, after set_item(front(), ...): hands the item over and lets
  // that waiter go. The caller still holds the lock. Throws
  // mote::usage_error without a set_item for this waiter.
  void pop_front() {
    if (served_ != queue_.next()) detail::delegation_misuse("mote::delegation_lock::pop_front: no set_item for front()");
    queue_.grant_next();
  }

 private:
  static std::size_t checked(std::size_t max_ids) {
    if (max_ids == 0 || max_ids > detail::delegation_log::kMaxIds) {
      detail::delegation_misuse("mote::delegation_lock: max_ids must be in [1, 65535]");
    }
    return max_ids;
  }

  struct alignas(detail::cache_line) log_entry {
    std::atomic<std::uint64_t> word{detail::delegation_log::kEmpty};
  };
  struct alignas(detail::cache_line) ready_entry {
    std::atomic<std::uint64_t> ticket{~std::uint64_t{0}};
    T item{};
  };

  std::size_t ids_;
  std::size_t slot_count_;
  std::unique_ptr<detail::ticket_slot[]> slots_;
  std::unique_ptr<log_entry[]> log_;
  std::unique_ptr<ready_entry[]> ready_;
  detail::ticket_queue queue_;
  std::uint64_t served_ = ~std::uint64_t{0};  // holder only: the ticket set_item served

  // Holder only: whether the next ticket's waiter is registered, remembering
  // what was seen, so that empty(), front() and set_item() agree even when a
  // later ticket sharing the slot overwrites the entry meanwhile (the waiter
  // seen is still served correctly: it reads its own id's result).
  bool peek() const noexcept {
    const std::uint64_t next = queue_.next();
    if (front_ticket_ == next) return true;
    // Acquire: pairs with the registration's release (see lock_or_delegate).
    const std::uint64_t entry = log_[queue_.index(next)].word.load(std::memory_order_acquire);
    if (!detail::delegation_log::names(entry, next)) return false;
    front_ticket_ = next;
    front_id_ = static_cast<std::size_t>(entry & detail::delegation_log::kNoId);
    return true;
  }
  mutable std::uint64_t front_ticket_ = ~std::uint64_t{0};
  mutable std::size_t front_id_ = 0;
};

}  // namespace mote
