// mote::assistant: one helper thread owned by one main thread, fed through a
// single-producer single-consumer ring (Relic, Los and Petushkov: a main
// thread hands tiny tasks to an assistant on its SMT sibling; both spin with
// `pause`; the owner gives wake-up and sleep hints).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "mote/detail/platform.hpp"
#include "mote/detail/worker.hpp"
#include "mote/export.hpp"

namespace mote {

// Options for an assistant.
//
//   mote::assistant_options o;
//   o.capacity = 256;                          // ring entries (a power of two)
//   o.idle_park = std::chrono::microseconds(500);
//   mote::assistant a(o);
struct assistant_options {
  // Ring entries, a power of two from 2 to 65536.
  std::uint32_t capacity = 128;
  // The CPU to pin the assistant to. -1: the SMT sibling of the owner's CPU;
  // where the core has none, the nearest allowed CPU that no mote worker is
  // pinned to (or, if every CPU has one, the nearest other CPU).
  int cpu = -1;
  // Pin at all (false: the kernel places the assistant).
  bool pin = true;
  // After this long with an empty ring the assistant parks on a futex, so an
  // idle assistant costs nothing. Zero: park only after sleep_hint().
  std::chrono::microseconds idle_park{1000};
};

namespace detail {

// One ring entry: a readiness word, then a function that runs (and destroys)
// the closure stored inline beside it. The assistant polls the readiness word
// of the entry it expects next, so one cache-line transfer brings it both the
// news and the task. A cache_line (128 bytes) per entry: the adjacent-line
// prefetcher moves 64-byte lines in pairs, so neighbours would still collide.
struct alignas(cache_line) assistant_slot {
  using run_fn = void (*)(void* closure);
  static constexpr std::size_t kInline = cache_line - sizeof(std::uint64_t) - sizeof(run_fn);
  static constexpr std::size_t kInlineAlign = alignof(run_fn);
  // The entry's number + 1 once it is published (release by the owner).
  std::atomic<std::uint64_t> ready{0};
  run_fn run = nullptr;
  alignas(kInlineAlign) unsigned char closure[kInline];
};
static_assert(sizeof(assistant_slot) == cache_line);

template <class F>
void run_inline_closure(void* p) {
  F* f = std::launder(reinterpret_cast<F*>(p));
  struct destroy {
    F* f;
    ~destroy() { f->~F(); }
  } guard{f};
  (*f)();
}

template <class F>
void run_heap_closure(void* p) {
  F* f = *std::launder(reinterpret_cast<F**>(p));
  struct destroy {
    F* f;
    ~destroy() { delete f; }
  } guard{f};
  (*f)();
}

struct raw_call {
  void (*fn)(void*);
  void* arg;
  void operator()() const { fn(arg); }
};

}  // namespace detail

// An assistant thread for the thread that creates it (its owner). Only the
// owner may submit and wait; a call from any other thread throws
// mote::usage_error. Tasks that go through the ring run on the assistant in
// submission order; a task submitted while the ring is full runs at once on
// the owner instead, ahead of those still in the ring. On the assistant
// thread, mote::join and mote::parallel_invoke run their callables in place,
// one after the other.
//
//   mote::assistant helper;                  // pinned near the calling thread
//   int a = 0, b = 0;
//   helper.submit([&] { a = 1; });           // runs on the assistant
//   b = 2;                                   // meanwhile, here
//   helper.wait();                           // a == 1: every submitted task is done
class MOTE_API assistant {
 public:
  assistant();
  explicit assistant(const assistant_options& options);
  // Waits for the submitted tasks (an exception from one is dropped: call
  // wait() to see it), then stops and joins the assistant thread.
  ~assistant();
  assistant(const assistant&) = delete;
  assistant& operator=(const assistant&) = delete;

  // Hands f to the assistant. When the ring is full, runs f here instead, so
  // no work is ever dropped (that task then runs before the ring's others). Closures up to 112 bytes are stored in the ring;
  // larger ones are moved to the heap. Owner only.
  template <class F>
  void submit(F&& f);
  // Hands fn(arg) to the assistant. Owner only.
  void submit(void (*fn)(void*), void* arg) { submit(detail::raw_call{fn, arg}); }

  // Returns when every task submitted so far has run, and rethrows the first
  // exception one of them threw since the last wait(). Spins first (tasks
  // are meant to be tiny); after assistant_options::idle_park it sleeps until
  // the assistant finishes. Owner only.
  void wait();

  // Hints (any thread, any order, any number of times). wake_up_hint() makes
  // a parked assistant spin again, to hide its wake-up before a parallel
  // section; sleep_hint() lets it park as soon as its ring is empty, after a
  // parallel section. Work submitted while it sleeps still wakes it.
  void wake_up_hint() noexcept;
  void sleep_hint() noexcept;

  int cpu() const noexcept;              // the CPU it is pinned to, or -1
  std::uint32_t capacity() const noexcept;
  bool is_owner() const noexcept;        // is the calling thread the owner?

  struct state;  // the thread and the error slot (src/assistant/assistant.cpp)

 private:
  // Takes a ring entry to fill, or nullptr when the ring is full.
  detail::assistant_slot* claim() noexcept {
    if (MOTE_UNLIKELY(head_ - tail_cache_ == capacity_)) {
      if (!refresh_tail()) return nullptr;
    }
    return &slots_[head_ & mask_];
  }
  // Makes the claimed entry visible to the assistant.
  void publish(detail::assistant_slot* slot) noexcept {
    // Release: the entry's contents, written above, become visible to the
    // assistant's acquire load of `ready` before it runs the entry.
    slot->ready.store(head_ + 1, std::memory_order_release);
    ++head_;
    // Relaxed: head_pub_ serves only the parking handshake (state::park()
    // and wait()); the entry itself is published by `ready`.
    head_pub_.store(head_, std::memory_order_relaxed);
    // Relaxed: the common case of a parked assistant is caught here; the
    // rare race with one that is just parking is closed in wait().
    if (MOTE_UNLIKELY(park_state_.load(std::memory_order_relaxed) != kAwake)) wake();
  }
  bool refresh_tail() noexcept;
  void wake() noexcept;
  void park_owner(std::int64_t timeout_ns) noexcept;
  [[noreturn]] void not_owner(const char* what) const;
  void check_owner(const char* what) const {
    if (MOTE_UNLIKELY(owner_token_ != detail::thread_token())) not_owner(what);
  }

  static constexpr std::uint32_t kAwake = 0;
  static constexpr std::uint32_t kParking = 1;  // about to sleep, or asleep

  // ---- Owner-private: the producer's side of the ring -------------------
  alignas(detail::cache_line) std::uint64_t head_ = 0;         // entries submitted
  std::uint64_t tail_cache_ = 0;   // the assistant's tail as last seen
  std::uint64_t mask_;
  std::uint32_t capacity_;
  detail::assistant_slot* slots_;
  const void* owner_token_;
  state* state_;

  // ---- Written by the owner, read by the assistant ----------------------
  // Entries published; read by the assistant only when it is about to park.
  alignas(detail::cache_line) std::atomic<std::uint64_t> head_pub_{0};
  std::atomic<std::uint32_t> sleep_requested_{0};  // sleep_hint() sets, wake_up_hint() clears

  // ---- Written by the assistant, read by the owner ----------------------
  // Entries run (published after each one finishes, so tail_pub_ == head_
  // means all done).
  alignas(detail::cache_line) std::atomic<std::uint64_t> tail_pub_{0};
  // kAwake while spinning; kParking from just before it parks until woken.
  // Its futex word.
  alignas(detail::cache_line) std::atomic<std::uint32_t> park_state_{kAwake};
  std::atomic<std::uint32_t> has_error_{0};

  // ---- Written by the owner when it sleeps in wait(), read by the assistant
  // after each task: on a line of its own, so that the read hits its cache.
  alignas(detail::cache_line) std::atomic<std::uint32_t> owner_parked_{0};

  friend struct state;
};

template <class F>
void assistant::submit(F&& f) {
  using closure = std::decay_t<F>;
  check_owner("submit");
  detail::assistant_slot* slot = claim();
  if (MOTE_UNLIKELY(slot == nullptr)) {
    // Ring full: run it here. Nothing is dropped; order among the tasks is
    // not promised beyond "all done at wait()".
    closure c(std::forward<F>(f));
    c();
    return;
  }
  if constexpr (sizeof(closure) <= detail::assistant_slot::kInline &&
                alignof(closure) <= detail::assistant_slot::kInlineAlign) {
    ::new (static_cast<void*>(slot->closure)) closure(std::forward<F>(f));
    slot->run = &detail::run_inline_closure<closure>;
  } else {
    closure* heap = new closure(std::forward<F>(f));
    ::new (static_cast<void*>(slot->closure)) closure*(heap);
    slot->run = &detail::run_heap_closure<closure>;
  }
  publish(slot);
}

// The assistant of the calling worker, when its runtime was created with
// runtime_options::assistants; nullptr on any other thread.
//
//   mote::runtime rt(mote::runtime_options{.assistants = true});
//   rt.run([] {
//     mote::assistant* a = mote::this_worker_assistant();
//     if (a) { a->submit([] { /* tiny piece */ }); a->wait(); }
//   });
MOTE_API assistant* this_worker_assistant() noexcept;

}  // namespace mote
