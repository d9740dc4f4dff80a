// mote::batch_queue: a single-producer single-consumer queue designed for the
// cache-coherence protocol (BatchQueue, Preud'homme, Sopena, Thomas and
// Folliot, SBAC-PAD 2010).
//
// The buffer is two halves. The producer fills one while the consumer
// empties the other, so they never write the same cache line, and they meet
// once per half, not once per item. Each signal has one writer: the
// producer publishes a half by storing its batch number and item count in
// the half's first line, next to the first items (so a batch of one item
// costs one line transfer); the consumer hands halves back by counting the
// batches it has finished on a line of its own, which the producer reads
// only when its cached copy says both halves are taken. (The seed's single
// status flag, written by both sides, moves its line twice per hand-off,
// and a hand-off written into the data line makes the producer's next
// write fetch that line from the consumer's cache first.) A spare 128-byte
// line separates the halves, so that the adjacent-line prefetcher does not
// drag one side's line into the other's cache.
//
// Publishing is in place: the count in a half's header says how many of its
// items are visible, and a flush() raises it without handing the half over.
// The producer goes on filling the same half after a flush, and the consumer
// gives a half back only once it has taken every item of it; so flushing
// after every push costs one header store per item, never space: the queue
// holds `capacity` items however often it is flushed.
//
// When the consumer sees an item (the latency bound). A pushed item becomes
// visible when its half fills; when the producer calls flush() or close();
// when the producing thread waits (a blocking push or pop on any mote queue
// or channel, a task-group wait, an idle worker); or when the producing
// thread ends. So an item never sits unseen while both sides wait; a
// producer that pushes a few items and then computes for a long time
// without waiting calls flush() to show them at once.
//
//   mote::batch_queue<int> q(512);              // two halves of 256
//   std::thread consumer([&] { while (auto v = q.pop()) use(*v); });
//   for (int i = 0; i < n; ++i) q.push(i);
//   q.close();                                  // publishes the last partial half
//   consumer.join();
//
// One thread pushes and one thread pops at a time; either role may move to
// another thread with synchronization between the two, the producer after a
// flush(). close() belongs to the producer.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "mote/detail/platform.hpp"
#include "mote/detail/queue_wait.hpp"
#include "mote/error.hpp"

namespace mote {

template <class T>
class channel;

// final: not a base class (it has a virtual function, for its thread's list
// of pending batches, and a destructor that is not virtual).
template <class T>
class batch_queue final : private detail::pending_batch {
 public:
  // capacity: the items the queue holds, two halves of capacity / 2 (an odd
  // capacity rounds up). At least 2.
  explicit batch_queue(std::size_t capacity) {
    if (capacity < 2 || capacity > (std::size_t{1} << 31)) {
      throw std::invalid_argument("mote::batch_queue: capacity must be from 2 to 2^31");
    }
    half_ = static_cast<std::uint32_t>((capacity + 1) / 2);
    slot_off_ = round_up(sizeof(std::atomic<std::uint64_t>), alignof(T));
    // Each half on whole 128-byte lines, then a spare line before the next.
    stride_ = round_up(slot_off_ + std::size_t{half_} * sizeof(T), kAlign) + detail::cache_line;
    base_ = static_cast<std::byte*>(::operator new(2 * stride_, std::align_val_t{kAlign}));
    for (unsigned h = 0; h < 2; ++h) new (base_ + h * stride_) std::atomic<std::uint64_t>(0);
    phalf_ = half_;
    chalf_ = half_;
  }

  batch_queue(const batch_queue&) = delete;
  batch_queue& operator=(const batch_queue&) = delete;

  // Destroys the items still inside, published or not.
  ~batch_queue() {
    delist();
    // Batches cb_ to pb_ - 1 are full; batch pb_ holds pn_ items. The
    // consumer has taken the first cn_ of batch cb_.
    for (std::uint64_t b = cb_; b <= pb_; ++b) {
      const std::uint32_t end = b == pb_ ? pn_ : half_;
      destroy_range(static_cast<unsigned>(b & 1U), b == cb_ ? cn_ : 0, end);
    }
    ::operator delete(base_, std::align_val_t{kAlign});
  }

  // ---- Producer ------------------------------------------------------------

  // Appends v; false when both halves are full (v is left as it was).
  // Throws mote::usage_error after close().
  //
  //   while (!q.try_push(v)) do_something_else();
  bool try_push(const T& v) { return try_emplace(v); }
  bool try_push(T&& v) { return try_emplace(std::move(v)); }
  template <class... A>
  bool try_emplace(A&&... a) {
    if (pn_ == ppub_ && !open_batch()) return false;
    std::construct_at(pslots_ + pn_, std::forward<A>(a)...);
    if (++pn_ == phalf_) {
      publish_full();
    } else if ((pn_ & (kPerLine - 1)) == 0 && pn_ + kAheadItems < phalf_) {
      // A line filled: ask for the one a window ahead, which keeps the
      // transfers of a long half overlapping as the start_half burst did.
      prefetch_for_write(pslots_ + pn_ + kAheadItems);
    }
    return true;
  }

  // Appends v, waiting while the queue is full (spins, then sleeps).
  // Throws mote::usage_error after close().
  //
  //   q.push(std::make_unique<Frame>());   // move-only types work
  void push(const T& v) { emplace(detail::small_copy(v)); }
  void push(T&& v) { emplace(std::move(v)); }
  template <class... A>
  void emplace(A&&... a) {
    while (!try_emplace(std::forward<A>(a)...)) wait_for_space();
  }

  // Pushes n items from first on (moving them), waiting for space as push().
  // When a move throws (or the queue is closed), the items before it are
  // pushed, and it and the ones after it are not (still the caller's, as the
  // move left them); *pushed, when given, is how many were pushed, whether
  // it returns or throws.
  //
  //   std::size_t pushed = 0;
  //   try { q.push_n(block.begin(), block.size(), &pushed); }
  //   catch (...) { keep(block.begin() + pushed, block.end()); throw; }
  template <class It>
  void push_n(It first, std::size_t n, std::size_t* pushed = nullptr) {
    std::size_t k = 0;
    detail::count_report report(pushed, k);
    while (k < n) {
      if (pn_ == ppub_ && !open_batch()) {
        wait_for_space();
        continue;
      }
      // A run into the half being filled: the position stays in a register
      // (one at a time, it goes through memory on every push).
      const std::uint32_t run = static_cast<std::uint32_t>(std::min<std::size_t>(n - k, phalf_ - pn_));
      T* p = pslots_ + pn_;
      std::uint32_t done = 0;
      try {
        for (; done < run; ++done, ++first) std::construct_at(p + done, std::move(*first));
      } catch (...) {
        pn_ += done;  // what was built is in (the half has room for the item that threw)
        k += done;
        throw;
      }
      pn_ += run;
      k += run;
      if (pn_ == phalf_) publish_full();
    }
  }

  // Zero-copy writing, for trivial T: the free slots of the half being
  // filled (empty when the queue is full); write into a prefix of it, then
  // commit() that many.
  //
  //   auto s = q.write_span();
  //   std::size_t k = std::min(s.size(), todo);
  //   std::copy_n(src, k, s.begin());
  //   q.commit(k);
  std::span<T> write_span() {
    static_assert(std::is_trivial_v<T>, "write_span() hands out raw slots: T must be trivial");
    if (pn_ == ppub_ && !open_batch()) return {};
    return {pslots_ + pn_, phalf_ - pn_};
  }
  void commit(std::size_t k) noexcept {
    pn_ += static_cast<std::uint32_t>(k);
    if (pn_ == phalf_) publish_full();
  }

  // Publishes the items of the half being filled now, so the consumer sees
  // them (do it before the producer role moves to another thread). The half
  // stays the producer's to fill: a flush costs no space.
  //
  //   q.push(request); q.flush();   // the consumer sees it at once
  void flush() noexcept {
    if (pn_ != ppub_) publish_partial();
  }

  // The end of the stream: publishes what is left, then makes every later
  // push throw and every pop return nullopt once the queue is empty.
  //
  //   q.close();
  void close() noexcept {
    flush();
    delist();
    // Release: everything published above is visible to a consumer that
    // acquires closed_ (it then looks at the counts once more).
    closed_.store(true, std::memory_order_release);
    detail::notify(not_empty_);
    detail::notify(not_full_);
  }
  bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }

  // ---- Consumer ------------------------------------------------------------

  // The oldest published item, or nullopt when none is published now. When
  // moving the item out throws, it stays the oldest.
  //
  //   if (auto v = q.try_pop()) use(*v);
  std::optional<T> try_pop() {
    if (!can_pop()) return std::nullopt;
    T* p = cslots_ + cn_;
    return detail::move_out(*p, [this, p](bool moved) noexcept {
      if (!moved) return;
      std::destroy_at(p);
      if (++cn_ == chalf_) {
        give_back();
      } else if ((cn_ & (kPerLine - 1)) == 0 && cn_ + kAheadItems < cm_) {
        prefetch_read(cslots_ + cn_ + kAheadItems);
      }
    });
  }

  // The oldest item, waiting for one (spins, then sleeps); nullopt once the
  // queue is closed and every item was taken.
  //
  //   while (auto v = q.pop()) use(*v);
  std::optional<T> pop() {
    for (;;) {
      if (can_pop()) return try_pop();
      if (closed()) return try_pop();  // what was published before close
      wait_for_items();
    }
  }

  // Moves up to max items to out, waiting for the first one; returns how
  // many (0: closed and drained). When a move-assignment to out throws, the
  // items before it are taken (they are in out) and it stays the oldest
  // item of the queue, as the move left it; *moved, when given, is how many
  // went to out, whether it returns or throws.
  //
  //   std::vector<int> got(64);
  //   std::size_t k = q.pop_n(got.begin(), got.size());
  template <class OutIt>
  std::size_t pop_n(OutIt out, std::size_t max, std::size_t* moved = nullptr) {
    std::size_t k = 0;
    detail::count_report report(moved, k);
    if (max == 0) return 0;
    for (;;) {
      take_published(out, max, k);
      if (k != 0) return k;
      if (closed()) {
        take_published(out, max, k);  // what was published before close
        return k;
      }
      wait_for_items();
    }
  }

  // Zero-copy reading: the published items the consumer may read in place
  // (empty when none is published now); consume(k) then destroys the first
  // k of them and moves on.
  //
  //   auto s = q.read_span();
  //   for (const auto& v : s) use(v);
  //   q.consume(s.size());
  std::span<T> read_span() {
    if (!can_pop()) return {};
    return {cslots_ + cn_, cm_ - cn_};
  }
  void consume(std::size_t k) noexcept {
    destroy_range(static_cast<unsigned>(cb_ & 1U), cn_, cn_ + static_cast<std::uint32_t>(k));
    cn_ += static_cast<std::uint32_t>(k);
    if (cn_ == chalf_) give_back();
  }

  std::size_t capacity() const noexcept { return 2 * std::size_t{half_}; }
  std::size_t batch_size() const noexcept { return half_; }

 private:
  template <class>
  friend class channel;

  // For a channel taking over a quiescent producer on another thread: off
  // the producer's list first (after that its thread's walk cannot touch
  // this queue), then publish.
  void take_over_flush() noexcept {
    delist();
    if (pn_ != ppub_) publish_partial();
  }
  void wake_all() noexcept {
    detail::notify(not_empty_);
    detail::notify(not_full_);
  }
  // For a channel's bound thread: sleeps on the queue's wait point until
  // look(), the channel's whole test, is true. The channel makes the test
  // inside a bound operation, so that it never reads this queue's fields
  // beside a thread that took them over after a switch (channel.hpp).
  template <class Look>
  void wait_for_space_until(Look look) {
    detail::wait_until(not_full_, look);
  }
  template <class Look>
  void wait_for_items_until(Look look) {
    detail::wait_until(not_empty_, look);
  }

  static constexpr std::size_t kAlign = detail::cache_line;
  static constexpr std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

  // A half's header: (batch number + 1) << 32 | the number of its items
  // published so far, for the last batch published in it.
  std::atomic<std::uint64_t>& header(unsigned h) const noexcept {
    return *std::launder(reinterpret_cast<std::atomic<std::uint64_t>*>(base_ + h * stride_));
  }
  static constexpr std::uint64_t stamp(std::uint64_t batch) noexcept { return (batch + 1) << 32; }
  T* slot(unsigned h, std::uint32_t i) const noexcept {
    return reinterpret_cast<T*>(base_ + h * stride_ + slot_off_) + i;
  }
  void destroy_range(unsigned h, std::uint32_t from, std::uint32_t to) noexcept {
    if constexpr (!std::is_trivially_destructible_v<T>) {
      for (std::uint32_t i = from; i < to; ++i) std::destroy_at(slot(h, i));
    }
  }

  // Asks for the lines of a half all at once, so that their transfers from
  // the other core overlap instead of coming one by one as the items are
  // touched: for ownership (the producer is about to write them) or for
  // reading (the consumer). Bounded: a long half streams on its own.
  static void prefetch_for_write(const void* p) noexcept {
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("prefetchw %0" ::"m"(*static_cast<const char*>(p)));
#else
    __builtin_prefetch(p, 1, 3);
#endif
  }
  static void prefetch_lines(const T* first, std::uint32_t n, bool for_write) noexcept {
    const char* p = reinterpret_cast<const char*>(first);
    const std::size_t bytes = std::min<std::size_t>(std::size_t{n} * sizeof(T), kPrefetchBytes);
    for (std::size_t off = 0; off < bytes; off += 64) {
#if defined(__x86_64__) || defined(__i386__)
      if (for_write) {
        asm volatile("prefetchw %0" ::"m"(*(p + off)));
      } else {
        _mm_prefetch(p + off, _MM_HINT_T0);
      }
#else
      __builtin_prefetch(p + off, for_write ? 1 : 0, 3);
#endif
    }
  }
  static constexpr std::size_t kPrefetchBytes = 4096;
  // Items per 64-byte line (1 for items of a line or more), and the window
  // the producer and the consumer keep asking ahead of themselves.
  static constexpr std::uint32_t kPerLine =
      sizeof(T) < 64 && (64 % sizeof(T)) == 0 ? static_cast<std::uint32_t>(64 / sizeof(T)) : 1;
  static constexpr std::uint32_t kAheadItems = static_cast<std::uint32_t>(kPrefetchBytes / sizeof(T)) + 1;
  static void prefetch_read(const void* p) noexcept {
#if defined(__x86_64__) || defined(__i386__)
    _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
#else
    __builtin_prefetch(p, 0, 3);
#endif
  }

  // The producer may fill batch pb_ when the consumer has finished batch
  // pb_ - 2 (the last one in the same half).
  bool has_space() const noexcept {
    // Acquire: pairs with give_back()'s release store.
    return pb_ - consumed_.load(std::memory_order_acquire) < 2;
  }
  // Batch cb_ has items published that the consumer has not taken.
  bool has_items() const noexcept {
    // Acquire: pairs with publish_partial()'s release store.
    const std::uint64_t w = header(static_cast<unsigned>(cb_ & 1U)).load(std::memory_order_acquire);
    return (w >> 32) == static_cast<std::uint32_t>(cb_ + 1) && static_cast<std::uint32_t>(w) > cn_;
  }

  // The next push adds an item that is not published yet: a new batch, or
  // more of the one a flush published. Either way the producer must be on
  // this thread's list of pending batches (the role may have moved here).
  bool open_batch() {
    if (pn_ == 0) return start_half();
    // close() published everything, so a push after it comes here.
    if (MOTE_UNLIKELY(closed_.load(std::memory_order_relaxed))) {
      throw usage_error("mote::batch_queue: push after close()");
    }
    enlist_here();
    return true;
  }

  // The producer starts batch pb_.
  bool start_half() {
    if (MOTE_UNLIKELY(closed_.load(std::memory_order_relaxed))) {
      throw usage_error("mote::batch_queue: push after close()");
    }
    if (pb_ - consumed_cache_ >= 2) {
      // Both halves were taken when we last looked: look again. Acquire:
      // pairs with give_back()'s release store; the consumer's reads and
      // destructions of that half's items happen before we build new ones.
      consumed_cache_ = consumed_.load(std::memory_order_acquire);
      if (pb_ - consumed_cache_ >= 2) return false;
    }
    // Listed before any producer field changes: a walk by the thread that
    // had the producer role before (after its flush) reads pn_ == 0 only.
    enlist_here();
    pslots_ = slot(static_cast<unsigned>(pb_ & 1U), 0);
    // Streaming (the last batch went out full): ask for the whole half now.
    // After a partial batch (a flush, a wait) the next is likely small too,
    // and fetching lines it will not touch would only slow the consumer.
    if (streaming_) prefetch_lines(pslots_, phalf_, true);
    return true;
  }
  // Shows the consumer the items of batch pb_ built so far.
  void publish_partial() noexcept {
    // Release: the items constructed in the half happen before the
    // consumer's acquire load of the header.
    header(static_cast<unsigned>(pb_ & 1U)).store(stamp(pb_) | pn_, std::memory_order_release);
    ppub_ = pn_;
    streaming_ = false;  // a flush: the next half is likely small too
    detail::notify(not_empty_);
  }
  // Batch pb_ is full: publish it and move to the next.
  void publish_full() noexcept {
    const bool flushed = ppub_ != 0;
    publish_partial();
    streaming_ = !flushed;
    ++pb_;
    pn_ = 0;
    ppub_ = 0;
  }
  void publish_pending() noexcept override { flush(); }

  // Consumer: an item is published and not taken yet.
  bool can_pop() noexcept { return cn_ != cm_ || take_more(); }

  // Consumer: moves the items published now to out while k < max, counting
  // them in k (pop_n, and a channel's). When a move-assignment throws, the
  // items before it are taken (cn_ covers exactly them) and it stays the
  // oldest, as the move left it.
  template <class OutIt>
  void take_published(OutIt& out, std::size_t max, std::size_t& k) {
    while (k < max && can_pop()) {
      const std::uint32_t run = static_cast<std::uint32_t>(std::min<std::size_t>(max - k, cm_ - cn_));
      T* p = cslots_ + cn_;
      std::uint32_t i = 0;
      try {
        for (; i < run; ++i, ++out) {
          *out = std::move(p[i]);
          std::destroy_at(p + i);
        }
      } catch (...) {
        cn_ += i;  // item i is still in its slot, so the half is not done
        k += i;
        throw;
      }
      cn_ += run;
      k += run;
      if (cn_ == chalf_) give_back();
    }
  }

  // Looks for newly published items of batch cb_ (the first look at a batch
  // sets it up). True when there are some.
  bool take_more() noexcept {
    const unsigned h = static_cast<unsigned>(cb_ & 1U);
    // Acquire: pairs with publish_partial()'s release store: the items are built.
    const std::uint64_t w = header(h).load(std::memory_order_acquire);
    if ((w >> 32) != static_cast<std::uint32_t>(cb_ + 1)) return false;
    const std::uint32_t n = static_cast<std::uint32_t>(w);
    if (n <= cm_) return false;
    if (cm_ == 0) {
      cslots_ = slot(h, 0);
      prefetch_lines(cslots_, n, false);
    }
    cm_ = n;
    return true;
  }
  void give_back() noexcept {
    ++cb_;
    cm_ = 0;
    cn_ = 0;
    // Release: our reads and the destructions of the half's items happen
    // before the producer's acquire load in start_half() lets it reuse them.
    consumed_.store(cb_, std::memory_order_release);
    detail::notify(not_full_);
  }

  void wait_for_space() {
    detail::wait_until(not_full_, [this] { return has_space() || closed_.load(std::memory_order_acquire); });
    if (closed_.load(std::memory_order_relaxed)) throw usage_error("mote::batch_queue: push after close()");
  }
  void wait_for_items() {
    detail::wait_until(not_empty_, [this] { return has_items() || closed_.load(std::memory_order_acquire); });
  }

  // ---- Read by both, written once (closed_ at close) ------------------------
  alignas(detail::cache_line) std::byte* base_ = nullptr;
  std::size_t stride_ = 0;
  std::size_t slot_off_ = 0;
  std::uint32_t half_ = 0;
  std::atomic<bool> closed_{false};

  // ---- Producer-private -----------------------------------------------------
  alignas(detail::cache_line) T* pslots_ = nullptr;  // the slots of the batch being filled
  std::uint64_t pb_ = 0;                             // batches published
  std::uint64_t consumed_cache_ = 0;                 // consumed_ as last read
  std::uint32_t pn_ = 0;                             // items in the batch being filled
  std::uint32_t ppub_ = 0;                           // of which published
  std::uint32_t phalf_ = 0;                          // half_, on this line
  bool streaming_ = true;                            // the last batch went out full

  // ---- Consumer-private -----------------------------------------------------
  alignas(detail::cache_line) T* cslots_ = nullptr;  // the slots of the batch being emptied
  std::uint64_t cb_ = 0;                             // batches finished
  std::uint32_t cn_ = 0;                             // items taken from batch cb_
  std::uint32_t cm_ = 0;                             // items seen published in it
  std::uint32_t chalf_ = 0;                          // half_, on this line

  // ---- Written by the consumer, read by the producer ----------------------------
  alignas(detail::cache_line) std::atomic<std::uint64_t> consumed_{0};  // = cb_

  detail::wait_point not_empty_;
  detail::wait_point not_full_;
};

}  // namespace mote
