// mote::cached_ring<T>: a single-producer single-consumer ring with cached
// indices (FastForward, MCRingBuffer): each side keeps its last view of the
// other's index and reads the shared one again only when the cached view
// says full (or empty), so the index lines move once per lap of the slack,
// not once per item.
//
// Who should choose it over mote::batch_queue: a stream whose every item
// must be visible to the consumer the moment push() returns, from a producer
// that cannot say when it is done for a while (it never calls flush(), and
// it does not block on the queue between items): sporadic requests, replies,
// control messages. batch_queue publishes a half when it fills, on flush()
// and when its producer waits; between those its items are not visible.
// For a long stream, batch_queue moves fewer cache lines per item and is the
// better queue (docs/streams.md has the figures).
//
// One thread pushes and one pops at a time; either role may move to another
// thread with synchronization between the two.
//
//   mote::cached_ring<int> q(1024);             // capacity rounds up to a power of 2
//   std::thread consumer([&] { while (auto v = q.pop()) use(*v); });
//   for (int i = 0; i < n; ++i) q.push(i);
//   q.close();
//   consumer.join();
//
// detail::lamport_ring<T> is Lamport's ring, the same code without the
// cached indices (every operation reads the other side's index): the
// reference design the benchmarks measure the others against, not a public
// queue (nothing recommends it over cached_ring).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <utility>

#include "mote/detail/platform.hpp"
#include "mote/detail/queue_wait.hpp"
#include "mote/error.hpp"

namespace mote {

namespace detail {

// The ring behind both. Cached says whether each side keeps a private copy of
// the other side's index.
template <class T, bool Cached>
class spsc_ring {
 public:
  explicit spsc_ring(std::size_t capacity) {
    if (capacity < 2 || capacity > (std::size_t{1} << 40)) {
      throw std::invalid_argument("mote: ring capacity must be from 2 to 2^40");
    }
    std::size_t cap = 2;
    while (cap < capacity) cap *= 2;
    mask_ = cap - 1;
    pmask_ = mask_;
    cmask_ = mask_;
    // T may itself be a pointer (a ring of task*): the slots hold T.
    // NOLINTNEXTLINE(bugprone-sizeof-expression)
    slots_ = static_cast<T*>(::operator new(cap * sizeof(T), std::align_val_t{kAlign}));
  }
  spsc_ring(const spsc_ring&) = delete;
  spsc_ring& operator=(const spsc_ring&) = delete;

  ~spsc_ring() {
    if constexpr (!std::is_trivially_destructible_v<T>) {
      const std::uint64_t end = tail_.load(std::memory_order_acquire);
      for (std::uint64_t i = head_.load(std::memory_order_relaxed); i < end; ++i) std::destroy_at(slot(i));
    }
    ::operator delete(slots_, std::align_val_t{kAlign});
  }

  // ---- Producer ------------------------------------------------------------

  // Appends an item; false when the ring is full. Throws mote::usage_error
  // after close().
  //
  //   while (!q.try_push(v)) do_something_else();
  bool try_push(const T& v) { return try_emplace(v); }
  bool try_push(T&& v) { return try_emplace(std::move(v)); }
  template <class... A>
  bool try_emplace(A&&... a) {
    if (MOTE_UNLIKELY(closed_.load(std::memory_order_relaxed))) throw_closed();
    const std::uint64_t t = ptail_;
    if (!room_for(1)) return false;
    std::construct_at(slot_p(t), std::forward<A>(a)...);
    publish(t + 1);
    return true;
  }

  // Appends v, waiting while the ring is full (spins, then sleeps).
  //
  //   q.push(std::make_unique<Frame>());
  void push(const T& v) { emplace(v); }
  void push(T&& v) { emplace(std::move(v)); }
  template <class... A>
  void emplace(A&&... a) {
    while (!try_emplace(std::forward<A>(a)...)) wait_for_space();
  }

  // Pushes n items from first on (moved), waiting for space as push(): one
  // index store per run of free slots, not one per item. When a move throws
  // (or close() ends the wait), the items before it are pushed, and it and
  // the ones after it are not (still the caller's, as the move left them);
  // *pushed, when given, is how many were pushed, whether it returns or
  // throws.
  //
  //   std::size_t pushed = 0;
  //   try { q.push_n(block.begin(), block.size(), &pushed); }
  //   catch (...) { keep(block.begin() + pushed, block.end()); throw; }
  template <class It>
  void push_n(It first, std::size_t n, std::size_t* pushed = nullptr) {
    std::size_t k = 0;
    detail::count_report report(pushed, k);
    while (k < n) {
      if (MOTE_UNLIKELY(closed_.load(std::memory_order_relaxed))) throw_closed();
      const std::size_t free = free_slots();
      if (free == 0) {
        wait_for_space();
        continue;
      }
      const std::size_t run = std::min(n - k, free);
      const std::uint64_t t = ptail_;
      std::size_t done = 0;
      try {
        for (; done < run; ++done, ++first) std::construct_at(slot_p(t + done), std::move(*first));
      } catch (...) {
        publish(t + done);  // what was built is in
        k += done;
        throw;
      }
      publish(t + run);
      k += run;
    }
  }

  // Every push is visible when it returns: nothing to publish.
  void flush() noexcept {}

  // The end of the stream (producer): later pushes throw; pops return
  // nullopt once the ring is empty.
  //
  //   q.close();
  void close() noexcept {
    // Release: every item pushed before is visible to a consumer that
    // acquires the flag (it then looks at the ring once more).
    closed_.store(true, std::memory_order_release);
    detail::notify(not_empty_);
    detail::notify(not_full_);
  }
  bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }

  // ---- Consumer ------------------------------------------------------------

  // The oldest item, or nullopt when the ring is empty now. When moving the
  // item out throws, it stays the oldest.
  //
  //   if (auto v = q.try_pop()) use(*v);
  std::optional<T> try_pop() {
    if (available(1) == 0) return std::nullopt;
    const std::uint64_t h = chead_;
    T* p = slot_c(h);
    return detail::move_out(*p, [this, h, p](bool moved) noexcept {
      if (!moved) return;
      std::destroy_at(p);
      advance(h + 1);
    });
  }

  // The oldest item, waiting for one; nullopt once the ring is closed and
  // empty.
  //
  //   while (auto v = q.pop()) use(*v);
  std::optional<T> pop() {
    for (;;) {
      if (available(1) != 0) return try_pop();
      if (closed()) return try_pop();  // what was pushed before close
      wait_for_items();
    }
  }

  // Moves up to max items to out, waiting for the first; returns how many
  // (0: closed and empty). One index store for the whole run. When a
  // move-assignment to out throws, the items before it are taken (they are
  // in out) and it stays the oldest item of the ring, as the move left it;
  // *moved, when given, is how many went to out, whether it returns or
  // throws.
  //
  //   std::size_t k = q.pop_n(buf.begin(), buf.size());
  template <class OutIt>
  std::size_t pop_n(OutIt out, std::size_t max, std::size_t* moved = nullptr) {
    std::size_t k = 0;
    detail::count_report report(moved, k);
    if (max == 0) return 0;
    std::size_t ready = available(max);
    while (ready == 0) {
      if (closed()) {
        ready = available(max);
        if (ready == 0) return 0;
        break;
      }
      wait_for_items();
      ready = available(max);
    }
    const std::uint64_t h = chead_;
    try {
      for (; k < ready; ++k, ++out) {
        T* p = slot_c(h + k);
        *out = std::move(*p);
        std::destroy_at(p);
      }
    } catch (...) {
      advance(h + k);  // exactly the items handed over
      throw;
    }
    advance(h + ready);
    return k;
  }

  std::size_t capacity() const noexcept { return mask_ + 1; }

  // Items in the ring as any thread sees it now: a snapshot, exact only
  // while neither side moves. Acquire loads of head, then tail (so the
  // answer is never negative: tail only grows, and was at least head when
  // head was read). Its acquire of tail pairs with the producer's release
  // store, so a thread that saw an item here and then takes the consumer
  // side (with synchronization from the last consumer) finds it.
  //
  //   if (q.size_approx() != 0) wake_the_consumer();
  std::size_t size_approx() const noexcept {
    const std::uint64_t h = head_.load(std::memory_order_acquire);
    const std::uint64_t t = tail_.load(std::memory_order_acquire);
    return static_cast<std::size_t>(t - h);
  }

 private:
  static constexpr std::size_t kAlign = detail::cache_line;

  [[noreturn]] static void throw_closed() { throw usage_error("mote: push to a closed ring"); }

  T* slot(std::uint64_t i) const noexcept { return slots_ + (i & mask_); }
  T* slot_p(std::uint64_t i) const noexcept { return slots_ + (i & pmask_); }
  T* slot_c(std::uint64_t i) const noexcept { return slots_ + (i & cmask_); }

  // Producer: free slots, at least `want` of them if the ring has them.
  std::size_t free_slots() noexcept {
    // Acquire: pairs with advance()'s release store; the consumer's moves
    // out of those slots happen before we build in them again.
    if constexpr (Cached) {
      std::size_t free = pmask_ + 1 - (ptail_ - phead_cache_);
      if (free == 0) {
        phead_cache_ = head_.load(std::memory_order_acquire);
        free = pmask_ + 1 - (ptail_ - phead_cache_);
      }
      return free;
    } else {
      return pmask_ + 1 - (ptail_ - head_.load(std::memory_order_acquire));
    }
  }
  bool room_for(std::size_t) noexcept { return free_slots() != 0; }
  void publish(std::uint64_t t) noexcept {
    ptail_ = t;
    // Release: the items are built before the consumer's acquire load of tail_.
    tail_.store(t, std::memory_order_release);
    detail::notify(not_empty_);
  }

  // Consumer: items ready, up to max.
  std::size_t available(std::size_t max) noexcept {
    // Acquire: pairs with the producer's release store of tail_.
    if constexpr (Cached) {
      if (ctail_cache_ == chead_) ctail_cache_ = tail_.load(std::memory_order_acquire);
      return std::min<std::size_t>(max, ctail_cache_ - chead_);
    } else {
      return std::min<std::size_t>(max, tail_.load(std::memory_order_acquire) - chead_);
    }
  }
  void advance(std::uint64_t h) noexcept {
    chead_ = h;
    // Release: the moves out of the slots happen before the producer reuses
    // them (its acquire load of head_).
    head_.store(h, std::memory_order_release);
    detail::notify(not_full_);
  }

  void wait_for_space() {
    detail::wait_until(not_full_, [this] {
      return ptail_ - head_.load(std::memory_order_acquire) <= pmask_ || closed_.load(std::memory_order_acquire);
    });
    if (closed_.load(std::memory_order_relaxed)) throw_closed();
  }
  void wait_for_items() {
    detail::wait_until(not_empty_, [this] {
      return tail_.load(std::memory_order_acquire) != chead_ || closed_.load(std::memory_order_acquire);
    });
  }

  // ---- Read by both, written once ----------------------------------------------
  alignas(detail::cache_line) T* slots_ = nullptr;
  std::size_t mask_ = 0;
  std::atomic<bool> closed_{false};
  // ---- Written by the producer -------------------------------------------------
  alignas(detail::cache_line) std::atomic<std::uint64_t> tail_{0};
  // ---- Written by the consumer -------------------------------------------------
  alignas(detail::cache_line) std::atomic<std::uint64_t> head_{0};
  // ---- Producer-private (its own copies, so the hot path reads one line) -------
  alignas(detail::cache_line) std::uint64_t ptail_ = 0;
  std::uint64_t phead_cache_ = 0;
  std::size_t pmask_ = 0;
  // ---- Consumer-private ----------------------------------------------------------
  alignas(detail::cache_line) std::uint64_t chead_ = 0;
  std::uint64_t ctail_cache_ = 0;
  std::size_t cmask_ = 0;

  detail::wait_point not_empty_;
  detail::wait_point not_full_;
};

// Lamport's ring (see the top of this file): for the benchmarks and tests.
template <class T>
class lamport_ring : public spsc_ring<T, false> {
 public:
  using spsc_ring<T, false>::spsc_ring;
};

}  // namespace detail

// A single-producer single-consumer ring with cached indices (see the top
// of this file).
//
//   mote::cached_ring<std::string> q(64);
//   q.push("hello");
//   q.close();
//   while (auto s = q.pop()) std::puts(s->c_str());
template <class T>
class cached_ring : public detail::spsc_ring<T, true> {
 public:
  using detail::spsc_ring<T, true>::spsc_ring;
};

}  // namespace mote
