// mote::channel: a bounded, closable stream of values between threads, one
// interface over mote's queues.
//
// A channel with one producer and one consumer runs on mote::batch_queue
// (two half-buffers, one hand-off per half: see queues/batch_queue.hpp); any
// other channel runs on mote::mpmc_queue. The kind says how the choice is
// made:
//   channel_kind::spsc       declared: one producer and one consumer at a
//                            time (roles may move between threads with
//                            synchronization, the producer after a flush()).
//                            BatchQueue, with no check on every call.
//   channel_kind::mpmc       declared: any number of producers and consumers.
//   channel_kind::automatic  (the default) seen at run time: the channel
//                            starts on BatchQueue, bound to the first thread
//                            that pushes and the first that pops; when another
//                            thread pushes or pops, or another thread closes
//                            it, it switches to the MPMC queue for good,
//                            keeping every item and each producer's order.
// MOTE_STATS=1 prints how many channels used which queue at exit, and the
// trace (MOTE_TRACE) marks each channel's choice and each switch.
//
// Go's channels in C++: pop() waits and returns an empty optional once the
// channel is closed and drained; push() waits while it is full and throws
// mote::usage_error after close(). Waits spin briefly, then sleep. An item
// is visible to consumers when its batch fills, at flush() or close(), and
// whenever the producing thread waits (in a push or pop on any channel or
// queue of mote, a task-group wait, an idle worker) or ends: it never sits
// unseen while both sides wait.
//
//   mote::channel<int> ch(1024);
//   std::thread consumer([&] { long s = 0; while (auto v = ch.pop()) s += *v; });
//   for (int i = 0; i < 1000; ++i) ch.push(i);
//   ch.close();
//   consumer.join();
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "mote/detail/platform.hpp"
#include "mote/detail/queue_wait.hpp"
#include "mote/detail/worker.hpp"
#include "mote/error.hpp"
#include "mote/export.hpp"
#include "mote/queues/batch_queue.hpp"
#include "mote/queues/mpmc_queue.hpp"

namespace mote {

enum class channel_kind : std::uint8_t { automatic, spsc, mpmc };

template <class T>
class channel {
 public:
  // capacity: how many items the channel holds (at least 2).
  //
  //   mote::channel<Frame> frames(64, mote::channel_kind::spsc);
  explicit channel(std::size_t capacity, channel_kind kind = channel_kind::automatic) : kind_(kind) {
    if (kind == channel_kind::automatic && !detail::heavy_barrier_available()) {
      kind_ = channel_kind::mpmc;  // the switch needs membarrier(2); without it, start where it ends
    }
    if (kind_ != channel_kind::mpmc) batch_.emplace(capacity);
    // An automatic channel keeps its MPMC queue ready, so that the switch
    // never allocates and the threads that see it need no further handshake.
    if (kind_ != channel_kind::spsc) mpmc_ = std::make_unique<mpmc_queue<T>>(capacity);
    switched_.store(kind_ == channel_kind::mpmc, std::memory_order_relaxed);
    detail::note_channel(this, kind_ == channel_kind::mpmc ? 1U : 0U);
  }

  channel(const channel&) = delete;
  channel& operator=(const channel&) = delete;

  // ---- Producers -------------------------------------------------------------

  // Appends v, waiting while the channel is full. Throws mote::usage_error
  // after close().
  //
  //   ch.push(42);
  void push(const T& v) { emplace(detail::small_copy(v)); }
  void push(T&& v) { emplace(std::move(v)); }
  template <class... A>
  MOTE_ALWAYS_INLINE void emplace(A&&... a) {
    if (MOTE_LIKELY(kind_ == channel_kind::spsc)) {
      batch_->emplace(std::forward<A>(a)...);
      return;
    }
    if (kind_ == channel_kind::automatic && enter_bound(producer_) && bound_try_emplace(std::forward<A>(a)...)) {
      return;
    }
    emplace_slow(std::forward<A>(a)...);
  }

  // Appends v unless the channel is full (then v is left as it was).
  //
  //   if (!ch.try_push(v)) later.push_back(v);
  bool try_push(const T& v) { return try_emplace(v); }
  bool try_push(T&& v) { return try_emplace(std::move(v)); }
  template <class... A>
  MOTE_ALWAYS_INLINE bool try_emplace(A&&... a) {
    if (MOTE_LIKELY(kind_ == channel_kind::spsc)) return batch_->try_emplace(std::forward<A>(a)...);
    if (kind_ == channel_kind::automatic && (enter_bound(producer_) || enter(producer_))) {
      return bound_try_emplace(std::forward<A>(a)...);
    }
    return mpmc_->try_emplace(std::forward<A>(a)...);
  }

  // Pushes n items from first on (moved), waiting for space.
  //
  //   ch.push_n(v.begin(), v.size());
  template <class It>
  void push_n(It first, std::size_t n) {
    if (kind_ == channel_kind::spsc) {
      batch_->push_n(first, n);
      return;
    }
    for (std::size_t i = 0; i < n; ++i, ++first) emplace(std::move(*first));
  }

  // Publishes this producer's partial batch now (BatchQueue). A producer
  // whose role moves to another thread calls it first.
  //
  //   ch.push(request); ch.flush();
  void flush() {
    switch (kind_) {
      case channel_kind::spsc: batch_->flush(); return;
      case channel_kind::mpmc: return;
      case channel_kind::automatic: break;
    }
    if (enter(producer_)) {
      batch_->flush();
      leave(producer_);
    }
  }

  // The end of the stream: later pushes throw, pops return nullopt once the
  // channel is drained, and waiting consumers wake up. Called by a producer
  // (any thread may call it on an automatic or MPMC channel).
  //
  //   ch.close();
  void close() {
    switch (kind_) {
      case channel_kind::spsc: batch_->close(); return;
      case channel_kind::mpmc: mpmc_->close(); return;
      case channel_kind::automatic: break;
    }
    if (enter(producer_)) {
      batch_->close();
      leave(producer_);
      mpmc_->close();
      return;
    }
    switch_to_mpmc();
    {
      std::lock_guard<std::mutex> g(switch_lock_);
      batch_->close_taken_over();
    }
    mpmc_->close();
  }
  bool closed() const noexcept { return batch_.has_value() ? batch_->closed() : mpmc_->closed(); }

  // ---- Consumers -------------------------------------------------------------

  // The oldest item, waiting for one; nullopt once the channel is closed and
  // every item was taken.
  //
  //   while (auto v = ch.pop()) use(*v);
  MOTE_ALWAYS_INLINE std::optional<T> pop() {
    if (MOTE_LIKELY(kind_ == channel_kind::spsc)) return batch_->pop();
    if (kind_ == channel_kind::automatic && enter_bound(consumer_)) {
      std::optional<T> v = batch_->try_pop();
      leave(consumer_);
      if (MOTE_LIKELY(v.has_value())) return v;
    }
    return pop_slow();
  }

  // An item if one is there now.
  //
  //   if (auto v = ch.try_pop()) use(*v);
  MOTE_ALWAYS_INLINE std::optional<T> try_pop() {
    if (MOTE_LIKELY(kind_ == channel_kind::spsc)) return batch_->try_pop();
    if (kind_ == channel_kind::automatic && (enter_bound(consumer_) || enter(consumer_))) {
      std::optional<T> v = batch_->try_pop();
      leave(consumer_);
      return v;
    }
    if (kind_ == channel_kind::automatic) {
      if (std::optional<T> v = pop_left_in_batch()) return v;
    }
    return mpmc_->try_pop();
  }

  // Moves up to max items to out, waiting for the first; returns how many
  // (0: closed and drained).
  //
  //   std::array<int, 64> buf;
  //   while (std::size_t k = ch.pop_n(buf.begin(), buf.size())) consume(buf.data(), k);
  template <class OutIt>
  std::size_t pop_n(OutIt out, std::size_t max) {
    if (kind_ == channel_kind::spsc) return batch_->pop_n(out, max);
    if (max == 0) return 0;
    std::optional<T> first = pop();
    if (!first) return 0;
    *out = std::move(*first);
    ++out;
    std::size_t k = 1;
    while (k < max) {
      std::optional<T> v = try_pop();
      if (!v) break;
      *out = std::move(*v);
      ++out;
      ++k;
    }
    return k;
  }

  // ---- Zero copy (spsc channels) ----------------------------------------------

  // The consumer's view of the items published in place; consume(k) takes
  // the first k. Only on channel_kind::spsc (else mote::usage_error).
  //
  //   auto s = ch.read_span(); for (auto& v : s) use(v); ch.consume(s.size());
  std::span<T> read_span() { return spsc("read_span").read_span(); }
  void consume(std::size_t k) { spsc("consume").consume(k); }
  // The producer's free slots (trivial T); commit(k) publishes the first k
  // as pushed items. Only on channel_kind::spsc.
  //
  //   auto s = ch.write_span(); std::size_t k = fill(s); ch.commit(k);
  std::span<T> write_span() { return spsc("write_span").write_span(); }
  void commit(std::size_t k) { spsc("commit").commit(k); }

  // ---- About the channel --------------------------------------------------------

  // How the channel was declared (automatic without membarrier(2) reads mpmc).
  channel_kind kind() const noexcept { return kind_; }
  // The queue in use now: spsc (BatchQueue) or mpmc.
  //
  //   if (ch.queue_in_use() == mote::channel_kind::spsc) std::puts("BatchQueue");
  channel_kind queue_in_use() const noexcept {
    return switched_.load(std::memory_order_acquire) ? channel_kind::mpmc : channel_kind::spsc;
  }
  std::size_t capacity() const noexcept { return batch_.has_value() ? batch_->capacity() : mpmc_->capacity(); }

 private:
  // One side of an automatic channel while it runs on BatchQueue: the thread
  // bound to it, and whether that thread is inside an operation now. On a
  // line of its own: the bound thread writes `busy` twice per operation.
  struct alignas(detail::cache_line) side {
    std::atomic<const void*> owner{nullptr};
    std::atomic<std::uint32_t> busy{0};
  };

  batch_queue<T>& spsc(const char* what) {
    if (kind_ != channel_kind::spsc) {
      throw usage_error(std::string("mote::channel::") + what + ": only on a channel_kind::spsc channel");
    }
    return *batch_;
  }

  // Enters an operation on BatchQueue as this side's bound thread; false when
  // the channel runs (or has just been switched) on the MPMC queue.
  //
  // The switch is an asymmetric Dekker pair, so the bound thread pays two
  // plain stores and a load per operation: it stores busy = 1, then loads
  // switched_; the switching thread stores switched_, runs heavy_barrier()
  // (every running thread executes a full barrier), then waits for busy == 0.
  // Either the bound thread's load comes after its barrier point and sees
  // the switch, or its busy store was drained by it and the switching thread
  // waits for the operation to end.
  bool enter(side& s) {
    // Relaxed: a thread that goes to the MPMC queue needs nothing from the
    // switch (leftovers in BatchQueue are taken under switch_lock_).
    if (MOTE_UNLIKELY(switched_.load(std::memory_order_relaxed))) return false;
    const void* me = detail::thread_token();
    const void* owner = s.owner.load(std::memory_order_relaxed);
    if (MOTE_UNLIKELY(owner != me)) {
      // Relaxed: binding orders nothing; the switch below synchronizes.
      if (owner != nullptr || !s.owner.compare_exchange_strong(owner, me, std::memory_order_relaxed)) {
        switch_to_mpmc();  // a second thread on this side
        return false;
      }
    }
    s.busy.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (MOTE_UNLIKELY(switched_.load(std::memory_order_relaxed))) {
      s.busy.store(0, std::memory_order_release);
      return false;
    }
    return true;
  }
  // The fast path of enter(): this thread is the bound one and no switch is
  // under way. False otherwise (the slow path then binds, or switches).
  MOTE_ALWAYS_INLINE bool enter_bound(side& s) noexcept {
    if (MOTE_UNLIKELY(s.owner.load(std::memory_order_relaxed) != detail::thread_token())) return false;
    s.busy.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (MOTE_UNLIKELY(switched_.load(std::memory_order_relaxed))) {
      s.busy.store(0, std::memory_order_release);
      return false;
    }
    return true;
  }

  template <class... A>
  MOTE_NOINLINE void emplace_slow(A&&... a) {
    if (kind_ == channel_kind::mpmc) {
      mpmc_->emplace(std::forward<A>(a)...);
      return;
    }
    for (;;) {
      if (!enter(producer_)) break;
      if (bound_try_emplace(std::forward<A>(a)...)) return;
      batch_->wait_for_space_unless([this] { return switched_.load(std::memory_order_acquire); });
      if (batch_->closed()) throw usage_error("mote::channel: push after close()");
    }
    mpmc_->emplace(std::forward<A>(a)...);
  }

  MOTE_NOINLINE std::optional<T> pop_slow() {
    if (kind_ == channel_kind::mpmc) return mpmc_->pop();
    while (enter(consumer_)) {
      std::optional<T> v = batch_->try_pop();
      const bool closed = !v && batch_->closed();
      if (closed) v = batch_->try_pop();
      leave(consumer_);
      if (v || closed) return v;
      batch_->wait_for_items_unless([this] { return switched_.load(std::memory_order_acquire); });
    }
    if (std::optional<T> v = pop_left_in_batch()) return v;
    return mpmc_->pop();
  }

  // The bound producer's push to BatchQueue, between enter() and leave().
  template <class... A>
  MOTE_ALWAYS_INLINE bool bound_try_emplace(A&&... a) {
    bool pushed = false;
    try {
      pushed = batch_->try_emplace(std::forward<A>(a)...);
    } catch (...) {
      leave(producer_);
      throw;
    }
    leave(producer_);
    return pushed;
  }

  static void leave(side& s) noexcept {
    // Release: this operation's effects on BatchQueue happen before the
    // switching thread's acquire load that sees busy == 0.
    s.busy.store(0, std::memory_order_release);
  }

  void switch_to_mpmc() {
    std::lock_guard<std::mutex> g(switch_lock_);
    if (switched_.load(std::memory_order_relaxed)) return;
    switched_.store(true, std::memory_order_relaxed);
    detail::heavy_barrier();
    // The bound threads finish the operation they are in; their next one
    // sees the switch. Acquire: pairs with leave().
    detail::backoff b;
    while (producer_.busy.load(std::memory_order_acquire) != 0 || consumer_.busy.load(std::memory_order_acquire) != 0) {
      b.pause();
    }
    // BatchQueue takes no more items. Publish the producer's partial batch
    // (taken off its thread's list first), and wake the bound threads that
    // wait on BatchQueue so that they move to the MPMC queue.
    batch_->take_over_flush();
    batch_->wake_all();
    detail::note_channel(this, 2);
  }

  // After the switch, what BatchQueue still holds goes first (each
  // producer's order is kept); its consumer side is shared from now on, so
  // it is taken under the lock, until it is empty for good.
  std::optional<T> pop_left_in_batch() {
    if (batch_drained_.load(std::memory_order_acquire)) return std::nullopt;
    std::lock_guard<std::mutex> g(switch_lock_);
    if (batch_drained_.load(std::memory_order_relaxed)) return std::nullopt;
    if (std::optional<T> v = batch_->try_pop()) return v;
    // Release: pairs with the acquire above; nothing is left.
    batch_drained_.store(true, std::memory_order_release);
    return std::nullopt;
  }

  channel_kind kind_;
  // In place: the hot path reaches it at a fixed offset, with no pointer to load.
  std::optional<batch_queue<T>> batch_;
  std::unique_ptr<mpmc_queue<T>> mpmc_;
  side producer_;
  side consumer_;
  alignas(detail::cache_line) std::atomic<bool> switched_{false};
  std::atomic<bool> batch_drained_{false};
  std::mutex switch_lock_;
};

}  // namespace mote
