// mote::mpmc_queue: a bounded queue for any number of producers and
// consumers, lock-free on its fast paths.
//
// A ring of cells, each with a sequence number that says whose turn it is
// (the array-based design of Dmitry Vyukov's bounded MPMC queue): a producer
// claims position p with a compare-and-swap on the enqueue count when cell
// p mod capacity reads p, builds the item and stores p + 1; a consumer
// claims position p when the cell reads p + 1, takes the item and stores
// p + capacity, which hands the cell to the producer of the next lap. Each
// producer's items come out in its order; there is no order between
// producers. The closed flag is the top bit of the enqueue count, so close()
// and a claim are ordered by that one word: a push either lands before the
// close (and will be popped) or throws.
//
// A consumer's claim cannot be given back either: when moving an item out
// of its cell throws, the item stays in the cell, set aside, and the next
// pop (by any consumer) takes it before the item at the head.
//
//   mote::mpmc_queue<Job> q(1024);               // capacity rounds up to a power of 2
//   // producers:  q.push(job);                   consumers:  while (auto j = q.pop()) run(*j);
//   // when every producer is done:  q.close();
//
// Blocking push and pop spin briefly, then sleep on a futex (see
// detail/queue_wait.hpp); an item is visible as soon as its push returns.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "mote/detail/platform.hpp"
#include "mote/detail/queue_wait.hpp"
#include "mote/error.hpp"

namespace mote {

template <class T>
class channel;

template <class T>
class mpmc_queue {
 public:
  // capacity: at least 2, rounded up to a power of two.
  explicit mpmc_queue(std::size_t capacity) {
    if (capacity < 2 || capacity > (std::size_t{1} << 40)) {
      throw std::invalid_argument("mote::mpmc_queue: capacity must be from 2 to 2^40");
    }
    std::size_t cap = 2;
    while (cap < capacity) cap *= 2;
    mask_ = cap - 1;
    cells_ = static_cast<cell*>(::operator new(cap * sizeof(cell), std::align_val_t{alignof(cell)}));
    for (std::size_t i = 0; i < cap; ++i) {
      auto* c = new (cells_ + i) cell;
      c->seq.store(i, std::memory_order_relaxed);
    }
  }

  mpmc_queue(const mpmc_queue&) = delete;
  mpmc_queue& operator=(const mpmc_queue&) = delete;

  // Destroys the items still inside. No other thread may be in a call.
  ~mpmc_queue() {
    const std::uint64_t end = enq_.load(std::memory_order_acquire) & ~kClosed;
    for (std::uint64_t p = deq_.load(std::memory_order_relaxed); p < end; ++p) {
      cell& c = at(p);
      if (c.seq.load(std::memory_order_acquire) == p + 1 && !c.hole) std::destroy_at(c.item());
    }
    // Acquire, both: pair with set_aside()'s release stores, so an item set
    // aside by another thread is seen whole before it is destroyed (the
    // destructor runs after every user's last operation, by contract).
    if (set_aside_count_.load(std::memory_order_acquire) != 0) {
      for (std::size_t i = 0; i <= mask_; ++i) {
        if (cells_[i].set_aside.load(std::memory_order_acquire)) std::destroy_at(cells_[i].item());
      }
    }
    std::destroy_n(cells_, mask_ + 1);
    ::operator delete(cells_, std::align_val_t{alignof(cell)});
  }

  // ---- Producers -------------------------------------------------------------

  // Appends an item built from a...; false when the queue is full (nothing is
  // built then). Throws mote::usage_error after close().
  //
  //   if (!q.try_push(job)) run(job);   // full: do it here
  bool try_push(const T& v) { return try_emplace(v); }
  bool try_push(T&& v) { return try_emplace(std::move(v)); }
  template <class... A>
  bool try_emplace(A&&... a) {
    std::uint64_t pos = enq_.load(std::memory_order_relaxed);
    cell* c;
    for (;;) {
      if (MOTE_UNLIKELY(pos & kClosed)) throw usage_error("mote::mpmc_queue: push after close()");
      c = &at(pos);
      // Acquire: pairs with the consumer's release store of pos, after it
      // took the previous lap's item out of the cell.
      const std::uint64_t seq = c->seq.load(std::memory_order_acquire);
      const auto dif = static_cast<std::int64_t>(seq - pos);
      if (dif == 0) {
        // Relaxed: the claim orders nothing; the cell's sequence does.
        if (enq_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
      } else if (dif < 0) {
        return false;  // the cell still holds last lap's item: full
      } else {
        pos = enq_.load(std::memory_order_relaxed);
      }
    }
    fill(*c, pos, std::forward<A>(a)...);
    return true;
  }

  // Appends v, waiting while the queue is full. Throws mote::usage_error
  // after close() (also when close() comes while it waits).
  //
  //   q.push(std::make_unique<Job>());   // move-only types work
  void push(const T& v) { emplace(v); }
  void push(T&& v) { emplace(std::move(v)); }
  template <class... A>
  void emplace(A&&... a) {
    while (!try_emplace(std::forward<A>(a)...)) {
      detail::wait_until(not_full_, [this] {
        const std::uint64_t e = enq_.load(std::memory_order_acquire);
        return (e & kClosed) != 0 || at(e).seq.load(std::memory_order_acquire) == e;
      });
    }
  }

  // Pushes n items from first on (moved), waiting for space. When a move
  // throws (or close() comes), the items before it are pushed, and it and
  // the ones after it are not (still the caller's, as the move left them);
  // *pushed, when given, is how many were pushed, whether it returns or
  // throws.
  //
  //   std::size_t pushed = 0;
  //   try { q.push_n(jobs.begin(), jobs.size(), &pushed); }
  //   catch (...) { run_here(jobs.begin() + pushed, jobs.end()); }
  template <class It>
  void push_n(It first, std::size_t n, std::size_t* pushed = nullptr) {
    std::size_t k = 0;
    detail::count_report report(pushed, k);
    for (; k < n; ++k, ++first) emplace(std::move(*first));
  }

  // Nothing to publish: every push is visible when it returns. Here so that
  // the queues of mote share one interface.
  void flush() noexcept {}

  // The end of the stream: later pushes throw; pops return nullopt once the
  // items pushed before it are taken; waiting threads wake up. Any thread,
  // once; more calls do nothing.
  //
  //   q.close();
  void close() noexcept {
    // Release: a consumer that acquires the flag sees every claim before it.
    enq_.fetch_or(kClosed, std::memory_order_acq_rel);
    detail::notify(not_empty_);
    detail::notify(not_full_);
  }
  bool closed() const noexcept { return (enq_.load(std::memory_order_acquire) & kClosed) != 0; }

  // ---- Consumers -------------------------------------------------------------

  // The oldest item whose push has finished, if it is the next in line (an
  // item set aside by a pop that threw comes first). When moving the item
  // out throws, it is set aside for the next pop.
  //
  //   if (auto j = q.try_pop()) run(*j);
  std::optional<T> try_pop() {
    cell* c;
    std::uint64_t pos;
    if (!claim(c, pos)) return std::nullopt;
    return take(*c, pos);
  }

  // The oldest item, waiting for one; nullopt once the queue is closed and
  // every item pushed before the close was taken. While a producer that
  // claimed a position before the close still builds its item, this waits
  // for it as for any item (spins, then sleeps).
  //
  //   while (auto j = q.pop()) run(*j);
  std::optional<T> pop() {
    for (;;) {
      cell* c;
      std::uint64_t pos;
      if (claim(c, pos)) return take(*c, pos);
      if (drained()) return std::nullopt;
      wait_for_items();
    }
  }

  // Moves up to max items to out, waiting for the first; returns how many
  // (0: closed and drained). When a move-assignment to out throws, the items
  // before it are taken (they are in out) and it is set aside in the queue,
  // as the move left it, for the next pop; *moved, when given, is how many
  // went to out, whether it returns or throws.
  //
  //   std::array<Job, 16> buf;
  //   std::size_t k = q.pop_n(buf.begin(), buf.size());
  template <class OutIt>
  std::size_t pop_n(OutIt out, std::size_t max, std::size_t* moved = nullptr) {
    std::size_t k = 0;
    detail::count_report report(moved, k);
    pop_into(out, max, k);
    return k;
  }

  std::size_t capacity() const noexcept { return mask_ + 1; }

 private:
  template <class>
  friend class channel;

  static constexpr std::uint64_t kClosed = std::uint64_t{1} << 63;

  struct cell {
    std::atomic<std::uint64_t> seq{0};
    bool hole = false;  // claimed, but the item's constructor threw
    // Claimed by a consumer whose move out of it threw: the item waits here
    // for the next pop (claim_set_aside()).
    std::atomic<bool> set_aside{false};
    alignas(T) unsigned char storage[sizeof(T)];
    T* item() noexcept { return std::launder(reinterpret_cast<T*>(storage)); }
  };

  cell& at(std::uint64_t pos) const noexcept { return cells_[pos & mask_]; }

  template <class... A>
  void fill(cell& c, std::uint64_t pos, A&&... a) {
    if constexpr (std::is_nothrow_constructible_v<T, A&&...>) {
      std::construct_at(c.item(), std::forward<A>(a)...);
    } else {
      // The position is claimed and cannot be given back: if the item fails
      // to build, the cell is published as a hole that consumers skip, and
      // the exception goes on to the caller.
      try {
        std::construct_at(c.item(), std::forward<A>(a)...);
      } catch (...) {
        c.hole = true;
        publish(c, pos);
        throw;
      }
      c.hole = false;
    }
    publish(c, pos);
  }
  void publish(cell& c, std::uint64_t pos) noexcept {
    // Release: the item (or the hole mark) happens before a consumer's
    // acquire load that sees pos + 1.
    c.seq.store(pos + 1, std::memory_order_release);
    detail::notify(not_empty_);
  }
  void release(cell& c, std::uint64_t pos) noexcept {
    c.hole = false;
    // Release: the item's move and destruction happen before the next lap's
    // producer builds in the cell.
    c.seq.store(pos + mask_ + 1, std::memory_order_release);
    detail::notify(not_full_);
  }

  // A consumer's claim on the oldest item: one set aside first, else the
  // item at the head (holes skipped). False when there is none now: empty,
  // or the producer of the head position still builds its item.
  bool claim(cell*& c, std::uint64_t& pos) noexcept {
    // Relaxed: a hint; claim_set_aside() synchronizes.
    if (MOTE_UNLIKELY(set_aside_count_.load(std::memory_order_relaxed) != 0) && claim_set_aside(c, pos)) return true;
    for (;;) {
      pos = deq_.load(std::memory_order_relaxed);
      for (;;) {
        c = &at(pos);
        // Acquire: pairs with publish()'s release store: the item is built.
        const std::uint64_t seq = c->seq.load(std::memory_order_acquire);
        const auto dif = static_cast<std::int64_t>(seq - (pos + 1));
        if (dif == 0) {
          // Relaxed: the claim orders nothing; the cell's sequence does.
          if (deq_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
        } else if (dif < 0) {
          return false;  // empty, or its producer is still building it
        } else {
          pos = deq_.load(std::memory_order_relaxed);
        }
      }
      if (MOTE_LIKELY(!c->hole)) return true;
      release(*c, pos);  // a push whose item failed to build
    }
  }

  // Takes one of the items set aside, if there is one.
  bool claim_set_aside(cell*& c, std::uint64_t& pos) noexcept {
    // Reserve one first. Acquire: pairs with set_aside()'s release
    // fetch_add (the RMWs between are in its release sequence), so the flag
    // it raised before is visible below.
    std::uint64_t n = set_aside_count_.load(std::memory_order_relaxed);
    do {
      if (n == 0) return false;
    } while (!set_aside_count_.compare_exchange_weak(n, n - 1, std::memory_order_acquire, std::memory_order_relaxed));
    // Every reservation has a raised flag of its own (a flag goes up before
    // its count, and comes down only after a reservation), so the scan ends.
    // A set-aside cell lies within one lap before deq_: its position holds
    // the next lap's producer back. From at(deq_) on, that is oldest first.
    for (std::uint64_t p = deq_.load(std::memory_order_relaxed);; ++p) {
      cell& x = at(p);
      bool raised = true;
      // Acquire: pairs with set_aside()'s release store; the item, as the
      // failed move left it, is ours.
      if (x.set_aside.load(std::memory_order_relaxed) &&
          x.set_aside.compare_exchange_strong(raised, false, std::memory_order_acquire, std::memory_order_relaxed)) {
        c = &x;
        // Relaxed: the value its producer published (seen by the consumer
        // that set it aside, before its release above); nobody changes it
        // while the cell is claimed.
        pos = x.seq.load(std::memory_order_relaxed) - 1;
        return true;
      }
    }
  }

  // Moves the item of a claimed cell into the optional a pop returns; then
  // the cell goes to the next lap's producer, or, when the move throws, the
  // item is set aside for the next pop.
  std::optional<T> take(cell& c, std::uint64_t pos) {
    return detail::move_out(*c.item(), [this, &c, pos](bool moved) noexcept {
      if (moved) {
        std::destroy_at(c.item());
        release(c, pos);
      } else {
        set_aside(c);
      }
    });
  }

  // Moves items to out while k < max, counting them in k; waits for the
  // first only when k is 0 (pop_n, and a channel's).
  template <class OutIt>
  void pop_into(OutIt& out, std::size_t max, std::size_t& k) {
    while (k < max) {
      cell* c;
      std::uint64_t pos;
      if (!claim(c, pos)) {
        if (k != 0 || drained()) return;
        wait_for_items();
        continue;
      }
      try {
        *out = std::move(*c->item());
      } catch (...) {
        set_aside(*c);
        throw;
      }
      std::destroy_at(c->item());
      release(*c, pos);
      ++k;
      ++out;
    }
  }

  void set_aside(cell& c) noexcept {
    // Release: pairs with the acquire CAS in claim_set_aside(); the item,
    // as the failed move left it, is seen by the consumer that takes it.
    c.set_aside.store(true, std::memory_order_release);
    // Release: pairs with the acquire CAS on set_aside_count_ there (the
    // flag above is up before the count that sends a consumer to look).
    set_aside_count_.fetch_add(1, std::memory_order_release);
    detail::notify(not_empty_);
  }

  // A consumer may go on: the head position's item (or hole) is published,
  // an item is set aside, or the queue is closed and drained.
  void wait_for_items() {
    detail::wait_until(not_empty_, [this] {
      // Acquire: pairs with the release stores of publish() and set_aside()
      // (and, in drained(), with close()), whose wake-ups this waits for.
      const std::uint64_t p = deq_.load(std::memory_order_acquire);
      return at(p).seq.load(std::memory_order_acquire) == p + 1 ||
             set_aside_count_.load(std::memory_order_acquire) != 0 || drained();
    });
  }

  // Closed, every claimed position taken, and nothing set aside. A claim
  // made before the close is counted in enq_ and waited for, built or not
  // yet.
  bool drained() const noexcept {
    const std::uint64_t e = enq_.load(std::memory_order_acquire);
    return (e & kClosed) != 0 && deq_.load(std::memory_order_acquire) >= (e & ~kClosed) &&
           set_aside_count_.load(std::memory_order_acquire) == 0;
  }

  alignas(detail::cache_line) std::atomic<std::uint64_t> enq_{0};  // positions claimed | kClosed
  alignas(detail::cache_line) std::atomic<std::uint64_t> deq_{0};  // positions taken
  // Cells whose flag set_aside is up, less the ones a consumer has reserved;
  // on the consumers' line, read by every claim.
  std::atomic<std::uint64_t> set_aside_count_{0};
  alignas(detail::cache_line) cell* cells_ = nullptr;
  std::size_t mask_ = 0;
  detail::wait_point not_empty_;
  detail::wait_point not_full_;
};

}  // namespace mote
