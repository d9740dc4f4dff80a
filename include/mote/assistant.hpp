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
#include <optional>
#include <type_traits>
#include <utility>

#include "mote/detail/adaptive.hpp"
#include "mote/detail/platform.hpp"
#include "mote/detail/worker.hpp"
#include "mote/export.hpp"
#include "mote/site.hpp"

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
  // Offload only when it pays (docs/adaptive.md): submit() runs a task in
  // place when its call site's tasks are short against the current cost of
  // a hand-off to this assistant, and hands it over otherwise. false: every
  // task goes through the ring (while there is room), as a plain SPSC queue.
  // Unset: MOTE_ADAPTIVE (0 or 1), else true.
  std::optional<bool> adaptive;
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

// A probe's task on the assistant: f, timed in cycle-counter ticks (stored
// in *out, exceptions included).
template <class F>
struct timed_call {
  F f;
  std::uint64_t* out;
  void operator()() {
    struct stamp {
      std::uint64_t* out;
      std::uint64_t start;
      ~stamp() { *out = cycle_clock() - start; }
    } s{out, cycle_clock()};
    f();
  }
};

}  // namespace detail

// An assistant thread for the thread that creates it (its owner). Only the
// owner may submit and wait; a call from any other thread throws
// mote::usage_error. Tasks that go through the ring run on the assistant in
// submission order; a task submitted while the ring is full runs at once on
// the owner instead, ahead of those still in the ring. Adaptive (the
// default, assistant_options::adaptive): a task whose call site's tasks are
// too short to gain from a hand-off, against the hand-off cost measured on
// this pair of threads, also runs at once on the owner (docs/adaptive.md).
// Either way a task's exception reaches wait(). On the assistant thread,
// mote::join and mote::parallel_invoke run their callables in place, one
// after the other.
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
  // no work is ever dropped (that task then runs before the ring's others).
  // Adaptive, runs f here when tasks of its site (the closure's type) are
  // short against the current hand-off cost. A task run here that throws
  // has its exception kept for wait(), as one run there. Closures up to 112
  // bytes are stored in the ring; larger ones are moved to the heap. Owner
  // only.
  template <class F>
  void submit(F&& f) {
    submit_at(&detail::type_site<std::decay_t<F>>, std::forward<F>(f));
  }
  // The same, with the duration estimate of site s (see mote::site).
  //
  //   static mote::site leaf{"leaf"};
  //   helper.submit(leaf, [&] { visit(left); });
  template <class F>
  void submit(site& s, F&& f) {
    submit_at(&s, std::forward<F>(f));
  }
  // Hands fn(arg) to the assistant. Adaptive, every call of this form
  // shares one site (one duration estimate): give tasks of different sizes
  // a mote::site of their own with submit(site&, F&&). Owner only.
  void submit(void (*fn)(void*), void* arg) { submit(detail::raw_call{fn, arg}); }

  // Returns when every task submitted so far has run, and rethrows the first
  // exception one of them threw since the last wait(). Spins first (tasks
  // are meant to be tiny); after assistant_options::idle_park it sleeps until
  // the assistant finishes. Owner only.
  void wait() {
    check_owner("wait");
    // Nothing went through the ring since the last wait (everything ran
    // here): nothing to wait for. Owner-private fields only.
    // (In a child after fork(), wait_ring() says the assistant is gone. The
    // relaxed load suffices: fork_generation changes only in the child's
    // fork handler, on this same thread, before it returns from fork().)
    if (MOTE_LIKELY(head_ == tail_cache_ && !owner_failed_ && !probe_.pending &&
                    generation_ == detail::fork_generation.load(std::memory_order_relaxed))) {
      return;
    }
    wait_ring();
  }

  // Hints (any thread, any order, any number of times). wake_up_hint() makes
  // a parked assistant spin again, to hide its wake-up before a parallel
  // section; sleep_hint() lets it park as soon as its ring is empty, after a
  // parallel section. Work submitted while it sleeps still wakes it.
  void wake_up_hint() noexcept;
  void sleep_hint() noexcept;

  int cpu() const noexcept;              // the CPU it is pinned to, or -1
  std::uint32_t capacity() const noexcept;
  bool is_owner() const noexcept;        // is the calling thread the owner?
  bool adaptive() const noexcept { return model_ != nullptr; }
  // The current hand-off estimate in nanoseconds (0: not adaptive, or not
  // measured yet). Owner only.
  double handoff_ns() const noexcept;

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
  template <class F>
  void submit_at(site* s, F&& f);
  // Builds the closure in the slot (in place, or on the heap).
  template <class F>
  void emplace(detail::assistant_slot* slot, F&& f);
  // Runs f here, keeping an exception for wait(). False when it threw.
  template <class F>
  bool run_here(site* s, F&& f);
  // A probe: f through the ring, timed end to end. False (nothing done)
  // when a probe is already out or the ring is full.
  template <class F>
  bool submit_timed(site* s, F&& f);
  void wait_ring();
  void keep_owner_error() noexcept;
  void note_inlined(site* s) noexcept;
  void finish_probe(bool waited) noexcept;
  void measure_at_start();
  bool refresh_tail() noexcept;
  void wake() noexcept;
  void park_owner(std::int64_t timeout_ns) noexcept;
  [[noreturn]] void not_owner(const char* what) const;
  void check_owner(const char* what) const {
    if (MOTE_UNLIKELY(owner_token_ != detail::thread_token())) not_owner(what);
  }

  static constexpr std::uint32_t kAwake = 0;
  static constexpr std::uint32_t kParking = 1;  // about to sleep (2: asleep; src/wait/event_count.hpp)

  // ---- Owner-private: the producer's side of the ring -------------------
  alignas(detail::cache_line) std::uint64_t head_ = 0;         // entries submitted
  std::uint64_t generation_ = 0;   // detail::fork_generation at creation
  std::uint64_t tail_cache_ = 0;   // the assistant's tail as last seen
  std::uint64_t mask_;
  std::uint32_t capacity_;
  detail::assistant_slot* slots_;
  const void* owner_token_;
  state* state_;
  // Adaptive: the owner's model (nullptr when not adaptive), the probe out in
  // the ring, and where inlined tasks are marked (MOTE_TRACE).
  detail::offload_model* model_ = nullptr;
  struct probe_state {
    bool pending = false;
    bool clean = false;      // the ring was empty and the assistant awake at submit
    bool at_start = false;   // one of the constructor's measurements
    std::uint64_t index = 0;  // its entry's number
    std::uint64_t submitted = 0;  // cycle counter at submit
    site* key = nullptr;
    std::uint64_t start_sample = 0;  // at_start: the hand-off it measured (~0: none)
  } probe_;
  detail::trace_buffer* trace_ = nullptr;
  bool owner_failed_ = false;  // state's owner_error holds an exception

  // ---- Written by the owner, read by the assistant ----------------------
  // Entries published; read by the assistant only when it is about to park.
  alignas(detail::cache_line) std::atomic<std::uint64_t> head_pub_{0};
  std::atomic<std::uint32_t> sleep_requested_{0};  // sleep_hint() sets, wake_up_hint() clears

  // ---- Written by the assistant, read by the owner ----------------------
  // Entries run (published after each one finishes, so tail_pub_ == head_
  // means all done).
  alignas(detail::cache_line) std::atomic<std::uint64_t> tail_pub_{0};
  // A probe's run, in ticks: written by the assistant (timed_call) before the
  // tail_pub_ store that publishes its end, read by the owner after seeing it.
  std::uint64_t probe_ticks_ = 0;
  // kAwake while spinning; not kAwake from just before it parks until woken.
  // Its word in the event count (a waiter_slot).
  alignas(detail::cache_line) std::atomic<std::uint32_t> park_state_{kAwake};
  std::atomic<std::uint32_t> has_error_{0};

  // ---- Written by the owner when it sleeps in wait(), read by the assistant
  // after each task: on a line of its own, so that the read hits its cache.
  alignas(detail::cache_line) std::atomic<std::uint32_t> owner_parked_{0};

  friend struct state;
};

template <class F>
bool assistant::run_here(site* s, F&& f) {
  if (MOTE_UNLIKELY(trace_ != nullptr)) note_inlined(s);
  std::decay_t<F> c(std::forward<F>(f));
  try {
    c();
    return true;
  } catch (...) {
    keep_owner_error();
    return false;
  }
}

template <class F>
bool assistant::submit_timed(site* s, F&& f) {
  if (probe_.pending) return false;
  detail::assistant_slot* slot = claim();
  if (slot == nullptr) return false;
  // Relaxed looks, hints only: a probe behind other entries, or to a parked
  // assistant, measures their run or its wake-up, not the hand-off; such a
  // probe still times the task.
  probe_.clean = tail_pub_.load(std::memory_order_relaxed) == head_ &&
                 park_state_.load(std::memory_order_relaxed) == kAwake;
  probe_.pending = true;
  probe_.index = head_;
  probe_.key = s;
  probe_.submitted = detail::cycle_clock();
  emplace(slot, detail::timed_call<std::decay_t<F>>{std::forward<F>(f), &probe_ticks_});
  publish(slot);
  return true;
}

template <class F>
void assistant::submit_at(site* s, F&& f) {
  check_owner("submit");
  if (model_ != nullptr) {
    detail::offload_model::entry& e = model_->find(s);
    switch (model_->decide(e)) {
      case detail::offload_model::choice::here:
        run_here(s, std::forward<F>(f));
        return;
      case detail::offload_model::choice::here_timed: {
        const std::uint64_t start = detail::cycle_clock();
        // Found again: a task that submits may have taken the entry meanwhile.
        if (run_here(s, std::forward<F>(f))) model_->note_work(model_->find(s), detail::cycle_clock() - start);
        return;
      }
      case detail::offload_model::choice::away:
        break;
      case detail::offload_model::choice::away_timed:
        if (submit_timed(s, std::forward<F>(f))) return;
        break;
    }
  }
  detail::assistant_slot* slot = claim();
  if (MOTE_UNLIKELY(slot == nullptr)) {
    // Ring full: run it here. Nothing is dropped; order among the tasks is
    // not promised beyond "all done at wait()".
    run_here(s, std::forward<F>(f));
    return;
  }
  emplace(slot, std::forward<F>(f));
  publish(slot);
}

template <class F>
void assistant::emplace(detail::assistant_slot* slot, F&& f) {
  using closure = std::decay_t<F>;
  if constexpr (sizeof(closure) <= detail::assistant_slot::kInline &&
                alignof(closure) <= detail::assistant_slot::kInlineAlign) {
    ::new (static_cast<void*>(slot->closure)) closure(std::forward<F>(f));
    slot->run = &detail::run_inline_closure<closure>;
  } else {
    closure* heap = new closure(std::forward<F>(f));
    ::new (static_cast<void*>(slot->closure)) closure*(heap);
    slot->run = &detail::run_heap_closure<closure>;
  }
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
