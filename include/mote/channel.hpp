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

// A seam for tests (tests/test_channel.cpp defines it before including this
// header): called inside close() between the MPMC queue's close and
// BatchQueue's, where another thread's push or pop may interleave. Nothing
// otherwise.
#ifndef MOTE_CHANNEL_CLOSE_TEST_POINT
#  define MOTE_CHANNEL_CLOSE_TEST_POINT() ((void)0)
#endif

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
    switched_.store(kind_ == channel_kind::mpmc ? kSwitched : kOnBatch, std::memory_order_relaxed);
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

  // Pushes n items from first on (moved), waiting for space. When a move
  // throws (or close() comes), the items before it are pushed, and it and
  // the ones after it are not (still the caller's, as the move left them);
  // *pushed, when given, is how many were pushed, whether it returns or
  // throws.
  //
  //   std::size_t pushed = 0;
  //   try { ch.push_n(v.begin(), v.size(), &pushed); }
  //   catch (const mote::usage_error&) { /* closed: v[pushed] on were not sent */ }
  template <class It>
  void push_n(It first, std::size_t n, std::size_t* pushed = nullptr) {
    switch (kind_) {
      case channel_kind::spsc: batch_->push_n(first, n, pushed); return;
      case channel_kind::mpmc: mpmc_->push_n(first, n, pushed); return;
      case channel_kind::automatic: break;
    }
    std::size_t k = 0;
    detail::count_report report(pushed, k);
    for (; k < n; ++k, ++first) emplace(std::move(*first));
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
  // (any thread may call it on an automatic or MPMC channel). The close
  // takes effect at one point: a push from any thread lands before it (and
  // is popped before the end of the stream) or throws, and closed() is true
  // from that point on.
  //
  //   ch.close();
  void close() {
    switch (kind_) {
      case channel_kind::spsc: batch_->close(); return;
      case channel_kind::mpmc: mpmc_->close(); return;
      case channel_kind::automatic: break;
    }
    // On an automatic channel that point is the MPMC queue's close (its
    // fetch_or on the enqueue count, which every push to it reads in the
    // same word as its claim), and closed() reads it there. Each push after
    // it throws: a push to the MPMC queue sees the flag; a push to BatchQueue
    // is the bound producer's, and comes after this close (the closer is that
    // thread) or after a switch, which sends it to the MPMC queue.
    if (enter(producer_)) {
      // The bound producer, inside one operation. A switch waits for its end
      // (the switch's acquire load of busy == 0 pairs with leave()'s release
      // store, after the fetch_or), and a push goes to the MPMC queue only
      // once the switch is complete (on_mpmc()): it sees the close.
      bound_operation op{producer_};
      mpmc_->close();
      MOTE_CHANNEL_CLOSE_TEST_POINT();
      // Then BatchQueue's close, the end of the stream for its bound
      // consumer. The MPMC queue is empty: nothing lands there before a
      // switch is complete, and none is (it would wait for this operation).
      batch_->close();
      return;
    }
    // Another thread: the switch moves every thread to the MPMC queue (and
    // publishes the producer's partial batch), so its close is the end.
    switch_to_mpmc();
    mpmc_->close();
  }
  bool closed() const noexcept { return kind_ == channel_kind::spsc ? batch_->closed() : mpmc_->closed(); }

  // ---- Consumers -------------------------------------------------------------

  // The oldest item, waiting for one; nullopt once the channel is closed and
  // every item was taken. When moving the item out throws, it stays in the
  // channel, the next to come out.
  //
  //   while (auto v = ch.pop()) use(*v);
  MOTE_ALWAYS_INLINE std::optional<T> pop() {
    if (MOTE_LIKELY(kind_ == channel_kind::spsc)) return batch_->pop();
    if (kind_ == channel_kind::automatic && enter_bound(consumer_)) {
      bound_operation op{consumer_};
      if (MOTE_LIKELY(batch_->can_pop())) return batch_->try_pop();
    }
    return pop_slow();
  }

  // An item if one is there now.
  //
  //   if (auto v = ch.try_pop()) use(*v);
  MOTE_ALWAYS_INLINE std::optional<T> try_pop() {
    if (MOTE_LIKELY(kind_ == channel_kind::spsc)) return batch_->try_pop();
    if (kind_ == channel_kind::mpmc) return mpmc_->try_pop();
    if (enter_bound(consumer_) || enter(consumer_)) {
      bound_operation op{consumer_};
      return batch_->try_pop();
    }
    return pop_switched<false>();
  }

  // Moves up to max items to out, waiting for the first; returns how many
  // (0: closed and drained). When a move-assignment to out throws, the items
  // before it are taken (they are in out) and it stays in the channel, as the
  // move left it, the next to come out; *moved, when given, is how many went
  // to out, whether it returns or throws.
  //
  //   std::array<int, 64> buf;
  //   while (std::size_t k = ch.pop_n(buf.begin(), buf.size())) consume(buf.data(), k);
  template <class OutIt>
  std::size_t pop_n(OutIt out, std::size_t max, std::size_t* moved = nullptr) {
    switch (kind_) {
      case channel_kind::spsc: return batch_->pop_n(out, max, moved);
      case channel_kind::mpmc: return mpmc_->pop_n(out, max, moved);
      case channel_kind::automatic: break;
    }
    std::size_t k = 0;
    detail::count_report report(moved, k);
    if (max == 0) return 0;
    while (enter(consumer_)) {
      bool end = false;
      {
        bound_operation op{consumer_};
        batch_->take_published(out, max, k);
        if (k == 0 && batch_->closed()) {
          batch_->take_published(out, max, k);  // what was published before the close
          end = true;
        }
      }
      if (k != 0 || end) return k;
      batch_->wait_for_items_until([this] { return items_look(); });
    }
    // On the MPMC queue: what BatchQueue still holds comes first.
    if (!batch_drained_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> g(switch_lock_);
      if (!batch_drained_.load(std::memory_order_relaxed)) {
        batch_->take_published(out, max, k);
        // Release: pairs with the acquire above; nothing is left.
        if (!batch_->can_pop()) batch_drained_.store(true, std::memory_order_release);
      }
    }
    mpmc_->pop_into(out, max, k);  // waits only when k is 0
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
  channel_kind queue_in_use() const noexcept { return switched() ? channel_kind::mpmc : channel_kind::spsc; }
  std::size_t capacity() const noexcept { return batch_.has_value() ? batch_->capacity() : mpmc_->capacity(); }

 private:
  // switched_: BatchQueue in use, a switch under way (the switching thread
  // holds switch_lock_), or the MPMC queue in use.
  static constexpr std::uint8_t kOnBatch = 0;
  static constexpr std::uint8_t kSwitching = 1;
  static constexpr std::uint8_t kSwitched = 2;

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

  // A switch is under way or complete: what a bound thread waiting on
  // BatchQueue wakes up for (enter() then decides), and queue_in_use().
  bool switched() const noexcept {
    // Acquire: pairs with switch_to_mpmc()'s release store of kSwitched.
    return switched_.load(std::memory_order_acquire) != kOnBatch;
  }

  // Enters an operation on BatchQueue as this side's bound thread; false when
  // the channel runs on the MPMC queue (after waiting for a switch under way
  // to be complete).
  //
  // The switch is an asymmetric Dekker pair, so the bound thread pays two
  // plain stores and a load per operation: it stores busy = 1, then loads
  // switched_; the switching thread stores switched_, runs heavy_barrier()
  // (every running thread executes a full barrier), then waits for busy == 0.
  // Either the bound thread's load comes after its barrier point and sees
  // the switch, or its busy store was drained by it and the switching thread
  // waits for the operation to end.
  bool enter(side& s) {
    // Relaxed: a hint; on_mpmc() synchronizes with the switch.
    if (MOTE_UNLIKELY(switched_.load(std::memory_order_relaxed) != kOnBatch)) return on_mpmc();
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
    if (MOTE_UNLIKELY(switched_.load(std::memory_order_relaxed) != kOnBatch)) {
      s.busy.store(0, std::memory_order_release);
      return on_mpmc();
    }
    return true;
  }
  // The fast path of enter(): this thread is the bound one and no switch is
  // under way. False otherwise (the slow path then binds, or switches).
  MOTE_ALWAYS_INLINE bool enter_bound(side& s) noexcept {
    if (MOTE_UNLIKELY(s.owner.load(std::memory_order_relaxed) != detail::thread_token())) return false;
    s.busy.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (MOTE_UNLIKELY(switched_.load(std::memory_order_relaxed) != kOnBatch)) {
      s.busy.store(0, std::memory_order_release);
      return false;
    }
    return true;
  }
  // A waiting bound thread's look at BatchQueue: inside a bound operation,
  // so that a switch waits for it to end, and a consumer on the MPMC side
  // (which takes BatchQueue's remaining items after the switch) never runs
  // beside it. True, which ends the wait, when a switch is under way or done:
  // the thread's next enter() then goes to the MPMC queue.
  bool items_look() noexcept {
    if (!enter_bound(consumer_)) return true;
    bound_operation op{consumer_};
    return batch_->has_items() || batch_->closed();
  }
  bool space_look() noexcept {
    if (!enter_bound(producer_)) return true;
    bound_operation op{producer_};
    return batch_->has_space() || batch_->closed();
  }
  // A thread that saw the switch goes to the MPMC queue only once it is
  // complete: nothing lands there while a bound operation may still be under
  // way, so a bound consumer that finds BatchQueue closed and empty has the
  // whole stream. Returns false (for enter()).
  bool on_mpmc() {
    // Acquire: pairs with the release store of kSwitched in switch_to_mpmc();
    // what the switch did happens before what this thread does next.
    if (switched_.load(std::memory_order_acquire) != kSwitched) {
      std::lock_guard<std::mutex> g(switch_lock_);  // held by the switching thread until it is done
    }
    return false;
  }

  // An operation on BatchQueue by its bound thread, from a successful
  // enter(): leaves when it goes out of scope, also when a move throws.
  struct bound_operation {
    side& s;
    ~bound_operation() { leave(s); }
  };

  template <class... A>
  MOTE_NOINLINE void emplace_slow(A&&... a) {
    if (kind_ == channel_kind::mpmc) {
      mpmc_->emplace(std::forward<A>(a)...);
      return;
    }
    for (;;) {
      if (!enter(producer_)) break;
      if (bound_try_emplace(std::forward<A>(a)...)) return;
      batch_->wait_for_space_until([this] { return space_look(); });
      if (batch_->closed()) throw usage_error("mote::channel: push after close()");
    }
    mpmc_->emplace(std::forward<A>(a)...);
  }

  MOTE_NOINLINE std::optional<T> pop_slow() {
    if (kind_ == channel_kind::mpmc) return mpmc_->pop();
    while (enter(consumer_)) {
      {
        bound_operation op{consumer_};
        // Closed and empty is the end of the stream (see close()); what was
        // published before the close comes first.
        if (batch_->can_pop() || batch_->closed()) return batch_->try_pop();
      }
      batch_->wait_for_items_until([this] { return items_look(); });
    }
    return pop_switched<true>();
  }

  // The bound producer's push to BatchQueue, between enter() and leave().
  template <class... A>
  MOTE_ALWAYS_INLINE bool bound_try_emplace(A&&... a) {
    bound_operation op{producer_};
    return batch_->try_emplace(std::forward<A>(a)...);
  }

  static void leave(side& s) noexcept {
    // Release: this operation's effects on BatchQueue happen before the
    // switching thread's acquire load that sees busy == 0.
    s.busy.store(0, std::memory_order_release);
  }

  void switch_to_mpmc() {
    std::lock_guard<std::mutex> g(switch_lock_);
    // Relaxed, both: switched_ changes only under switch_lock_, held here;
    // the bound threads' side of the switch is ordered by heavy_barrier()
    // below, and its end by the release store of kSwitched.
    if (switched_.load(std::memory_order_relaxed) != kOnBatch) return;
    switched_.store(kSwitching, std::memory_order_relaxed);
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
    // Release: pairs with on_mpmc()'s acquire load; the switch is complete.
    switched_.store(kSwitched, std::memory_order_release);
    batch_->wake_all();
    detail::note_channel(this, 2);
  }

  // On the MPMC queue (after the switch). What BatchQueue still holds goes
  // first (each producer's order is kept); its consumer side is shared from
  // now on, so it is taken under the lock, until it is empty for good.
  template <bool Wait>
  std::optional<T> pop_switched() {
    if (!batch_drained_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> g(switch_lock_);
      if (!batch_drained_.load(std::memory_order_relaxed)) {
        if (batch_->can_pop()) return batch_->try_pop();
        // Release: pairs with the acquire above; nothing is left.
        batch_drained_.store(true, std::memory_order_release);
      }
    }
    if constexpr (Wait) {
      return mpmc_->pop();
    } else {
      return mpmc_->try_pop();
    }
  }

  channel_kind kind_;
  // In place: the hot path reaches it at a fixed offset, with no pointer to load.
  std::optional<batch_queue<T>> batch_;
  std::unique_ptr<mpmc_queue<T>> mpmc_;
  side producer_;
  side consumer_;
  alignas(detail::cache_line) std::atomic<std::uint8_t> switched_{kOnBatch};
  std::atomic<bool> batch_drained_{false};
  std::mutex switch_lock_;
};

}  // namespace mote
