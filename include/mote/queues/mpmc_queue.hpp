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

  // Pushes n items from first on (moved), waiting for space.
  //
  //   q.push_n(jobs.begin(), jobs.size());
  template <class It>
  void push_n(It first, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i, ++first) emplace(std::move(*first));
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

  // The oldest item whose push has finished, if it is the next in line.
  //
  //   if (auto j = q.try_pop()) run(*j);
  std::optional<T> try_pop() {
    for (;;) {
      std::uint64_t pos = deq_.load(std::memory_order_relaxed);
      cell* c;
      for (;;) {
        c = &at(pos);
        // Acquire: pairs with fill()'s release store: the item is built.
        const std::uint64_t seq = c->seq.load(std::memory_order_acquire);
        const auto dif = static_cast<std::int64_t>(seq - (pos + 1));
        if (dif == 0) {
          if (deq_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
        } else if (dif < 0) {
          return std::nullopt;  // empty, or its producer is still building it
        } else {
          pos = deq_.load(std::memory_order_relaxed);
        }
      }
      if (MOTE_UNLIKELY(c->hole)) {  // a push whose item failed to build
        release(*c, pos);
        continue;
      }
      struct give_back {
        mpmc_queue* q;
        cell* c;
        std::uint64_t pos;
        ~give_back() {
          std::destroy_at(c->item());
          q->release(*c, pos);
        }
      } g{this, c, pos};
      return std::optional<T>(std::move(*c->item()));
    }
  }

  // The oldest item, waiting for one; nullopt once the queue is closed and
  // every item pushed before the close was taken.
  //
  //   while (auto j = q.pop()) run(*j);
  std::optional<T> pop() {
    for (;;) {
      if (std::optional<T> v = try_pop()) return v;
      if (drained()) return std::nullopt;
      detail::wait_until(not_empty_, [this] {
        const std::uint64_t p = deq_.load(std::memory_order_acquire);
        return at(p).seq.load(std::memory_order_acquire) == p + 1 ||
               (enq_.load(std::memory_order_acquire) & kClosed) != 0;
      });
    }
  }

  // Moves up to max items to out, waiting for the first; returns how many
  // (0: closed and drained).
  //
  //   std::array<Job, 16> buf;
  //   std::size_t k = q.pop_n(buf.begin(), buf.size());
  template <class OutIt>
  std::size_t pop_n(OutIt out, std::size_t max) {
    if (max == 0) return 0;
    std::optional<T> v = pop();
    std::size_t k = 0;
    while (v) {
      *out = std::move(*v);
      ++out;
      if (++k == max) break;
      v = try_pop();
    }
    return k;
  }

  std::size_t capacity() const noexcept { return mask_ + 1; }

 private:
  static constexpr std::uint64_t kClosed = std::uint64_t{1} << 63;

  struct cell {
    std::atomic<std::uint64_t> seq{0};
    bool hole = false;  // claimed, but the item's constructor threw
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

  // Closed, and every claimed position taken. A claim made before the close
  // is counted in enq_ and waited for, built or not yet.
  bool drained() const noexcept {
    const std::uint64_t e = enq_.load(std::memory_order_acquire);
    return (e & kClosed) != 0 && deq_.load(std::memory_order_acquire) >= (e & ~kClosed);
  }

  alignas(detail::cache_line) std::atomic<std::uint64_t> enq_{0};  // positions claimed | kClosed
  alignas(detail::cache_line) std::atomic<std::uint64_t> deq_{0};  // positions taken
  alignas(detail::cache_line) cell* cells_ = nullptr;
  std::size_t mask_ = 0;
  detail::wait_point not_empty_;
  detail::wait_point not_full_;
};

}  // namespace mote
