// Workers and their split deques: the inline fast path of fork-join.
//
// Each worker owns one deque of task pointers, split in two (the Lace split
// deque, van Dijk and van de Pol, Euro-Par 2014): entries at or above `split`
// are private to the owner, who pushes and pops them with plain loads and
// stores; entries in [tail, split) are shared, and thieves take the oldest one
// with a compare-and-swap on the packed {tail, split} word. The owner moves the
// split point only when thieves ask for work (`push_limit_` = 0) or when its
// private part is empty, so a spawn and a join that nobody disturbs cost a few
// stores, one relaxed load and no atomic read-modify-write.
//
// docs/design.md states the protocol and the memory-order argument in full.
#pragma once

#include <atomic>
#include <cstdint>

#include "mote/detail/platform.hpp"
#include "mote/export.hpp"

namespace mote {
class assistant;
}

namespace mote::detail {

class worker;
class trace_buffer;
class runtime_impl;

// A unit of work that a thief may run. Lives in its spawner's stack frame
// (join) or on the heap (task_group). Two words, both written before the push:
// the fast path of join pays for nothing else.
struct task {
  using execute_fn = void (*)(task*, worker&) noexcept;

  // Runs the task on a worker other than its spawner (stolen), or on its
  // spawner when popped generically (task_group). Written by the spawner before
  // the push; read by the thief after the acquire CAS in steal_from().
  execute_fn execute;
  // kRunning until a thief that ran it calls finish(); kParked while the
  // spawner sleeps on it. finish() publishes the task's results with a release
  // exchange that pairs with the acquire load in worker::wait_for().
  std::atomic<std::uint32_t> state;

  static constexpr std::uint32_t kRunning = 0;
  static constexpr std::uint32_t kParked = 1;
  static constexpr std::uint32_t kDone = 2;
  static constexpr std::uint32_t kFailed = 3;  // done, and an exception is stored
  // A task_group task that its owner popped back and runs itself (owner-private).
  static constexpr std::uint32_t kOwnerRun = 4;

  void init(execute_fn fn) noexcept {
    execute = fn;
    state.store(kRunning, std::memory_order_relaxed);
  }
  // Called by the thief that ran a stolen task, as its last access to it.
  MOTE_API void finish(bool failed) noexcept;
};

// The worker the calling thread is, or nullptr for any other thread.
// Initial-exec TLS: one %fs-relative load, no __tls_get_addr call, which is
// what makes join() cheap from inside a shared library. The library is linked
// at start-up (not dlopen'ed), so static TLS space is guaranteed.
MOTE_API extern constinit thread_local worker* current_worker
    __attribute__((tls_model("initial-exec")));

// Per-worker event counts. The first group is kept on slow paths only, always;
// the second only while the worker is instrumented (MOTE_STATS=1 or
// MOTE_TRACE), so the fast path of join counts nothing otherwise. Each worker
// writes its own; they are read when the runtime ends, after the workers have
// been joined.
struct worker_stats {
  std::uint64_t tasks = 0;           // tasks run here (inline or taken from elsewhere)
  std::uint64_t spawns = 0;          // join and task_group spawns made here
  std::int64_t idle_ns = 0;          // looking for work, spinning or parked
  std::int64_t started_ns = 0;       // when the worker started (busy = lifetime - idle)
  std::int64_t ended_ns = 0;
  std::uint64_t steals = 0;          // tasks this worker stole
  std::uint64_t failed_steals = 0;   // steal attempts that found nothing
  std::uint64_t shares = 0;          // grow_shared: private tasks made stealable
  std::uint64_t shrinks = 0;         // pop_shared took a shared task back
  std::uint64_t stolen_pops = 0;     // pops that found their task stolen
  std::uint64_t parks = 0;           // sleeps on the idle futex
  std::uint64_t injected = 0;        // tasks taken from the injection queue
};

// What an instrumented worker does besides its work.
inline constexpr std::uint32_t kInstrumentStats = 1;
inline constexpr std::uint32_t kInstrumentTrace = 2;

// A per-thread address, unique among live threads: the address of this
// thread's current_worker slot. Cheap (an %fs-relative address).
inline const void* thread_token() noexcept { return &current_worker; }

class alignas(cache_line) worker {
 public:
  static constexpr std::uint32_t kDefaultCapacity = 1u << 14;

  // ---- Fast path, owner only -------------------------------------------

  // Pushes t on top of the deque. Returns false, leaving the deque as it was,
  // when the deque is full: the caller then runs the work itself, so no work is
  // ever lost. Owner only.
  MOTE_ALWAYS_INLINE bool push(task* t) noexcept {
    // One load and one compare cover both rare cases: a full deque, and a
    // thief's request to share (it sets the limit to 0). Relaxed: acting on a
    // request late only delays sharing.
    if (MOTE_UNLIKELY(head_ >= push_limit_.load(std::memory_order_relaxed))) return push_slow(t);
    // Relaxed: a thief reads this slot only after the CAS in steal_from()
    // acquires the {tail, split} value that the owner released in
    // grow_shared(), which is sequenced after this store.
    slots_[head_].store(t, std::memory_order_relaxed);
    ++head_;
    return true;
  }

  // Takes back the task pushed last. True: nobody stole it, and it is the
  // caller's again (to run or to drop). False: a thief has it; the caller
  // waits for it (join) or leaves it to the thief (task_group). Owner only.
  MOTE_ALWAYS_INLINE bool pop() noexcept {
    if (MOTE_LIKELY(head_ > split_)) {
      --head_;
      return true;
    }
    return pop_shared();
  }

  // The task at the top of the deque (the one pop() would take). Owner only.
  task* top() const noexcept { return slots_[head_ - 1].load(std::memory_order_relaxed); }
  std::uint32_t depth() const noexcept { return head_; }
  // Identifies the task this worker is running: each task taken from
  // elsewhere (stolen, injected) runs in a fresh context. Within one context
  // pushes and pops nest, which is what lets a task_group push locally.
  std::uint64_t context() const noexcept { return context_; }

  // Shares half of the private part if thieves asked for work. Owner only;
  // used by loops that pop many tasks without pushing (task_group::wait).
  void share_if_wanted() noexcept {
    if (MOTE_UNLIKELY(push_limit_.load(std::memory_order_relaxed) == 0)) grow_shared();
  }

  // Runs other work until stolen task t is done, taking it from t's thief,
  // whose deque holds t's subtasks (leapfrogging); after the spin window parks
  // on t. Returns t's final state (kDone or kFailed). Owner only, right after a
  // pop() that returned false for t.
  MOTE_API std::uint32_t wait_for(task* t) noexcept;

  runtime_impl& runtime() const noexcept { return *runtime_; }
  unsigned index() const noexcept { return index_; }

  // ---- Instrumentation (MOTE_STATS=1, MOTE_TRACE) ------------------------
  // One test covers both: the fast path of join branches on it once.
  bool instrumented() const noexcept { return instrument_ != 0; }
  trace_buffer* trace() const noexcept { return trace_; }
  // Event hooks, called only when instrumented(). `what` is the task's
  // function or, with `named`, its name (const char*).
  MOTE_API void note_spawn(const void* what, bool named) noexcept;
  MOTE_API void note_task_begin(const void* what, bool named) noexcept;
  MOTE_API void note_task_end() noexcept;
  MOTE_API void note_task_name(const char* name) noexcept;
  MOTE_API void note_wait_begin(unsigned what) noexcept;
  MOTE_API void note_wait_end() noexcept;
  // A futex sleep begins (true) or ends (false): traced, and counted as idle.
  MOTE_API void note_park(bool begin) noexcept;

  // ---- Slow paths and thieves (src/runtime/worker.cpp) ------------------

  MOTE_API bool pop_shared() noexcept;  // owner
  MOTE_API void grow_shared() noexcept;  // owner
  MOTE_API bool push_slow(task* t) noexcept;  // owner: full, or asked to share
  // Takes the oldest shared task of `victim`, or returns nullptr. A thief
  // marks the slot it emptied with its own address, tagged with kStolenTag,
  // which tells the owner both that the slot is free and who has the task.
  task* steal_from(worker& victim) noexcept;
  static constexpr std::uintptr_t kStolenTag = 1;
  // True when `victim` has shared tasks; asks it to share when it has none.
  bool has_shared_work(worker& victim) noexcept;

  worker(runtime_impl& rt, unsigned index, std::uint32_t capacity);
  ~worker();
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

  // Runs a task taken from elsewhere (stolen or injected), then checks that it
  // left this deque as it found it.
  void run_foreign(task* t) noexcept;
  std::uint64_t next_random() noexcept {
    rng_ ^= rng_ << 13;
    rng_ ^= rng_ >> 7;
    rng_ ^= rng_ << 17;
    return rng_;
  }

 private:
  static constexpr std::uint64_t pack(std::uint32_t tail, std::uint32_t split) noexcept {
    return (static_cast<std::uint64_t>(split) << 32) | tail;
  }
  static constexpr std::uint32_t tail_of(std::uint64_t ts) noexcept { return static_cast<std::uint32_t>(ts); }
  static constexpr std::uint32_t split_of(std::uint64_t ts) noexcept { return static_cast<std::uint32_t>(ts >> 32); }

  // ---- Shared with thieves: one cache line, written by thieves ----------
  // {tail, split}: thieves CAS tail forward while tail < split; only the owner
  // moves split (by CAS, so both halves change atomically together).
  alignas(cache_line) std::atomic<std::uint64_t> tail_split_{0};
  // The owner pushes on its fast path while head_ is below this: capacity_
  // normally, 0 once a thief that found no shared task asks the owner to
  // share (the owner restores it when it shares). Checked before it is
  // written, so idle thieves do not keep invalidating the owner's copy.
  std::atomic<std::uint32_t> push_limit_;

  // ---- Owner-private: read and written by the owner thread only ---------
  alignas(cache_line) std::uint32_t head_ = 0;  // next free slot
  std::uint32_t split_ = 0;                     // the owner's copy of split
  std::uint32_t capacity_;
  std::atomic<task*>* slots_;
  runtime_impl* runtime_;
  unsigned index_;
  std::uint32_t instrument_ = 0;  // kInstrument* bits, set before the worker starts
  std::uint64_t rng_;
  worker* last_thief_ = nullptr;  // who took the task of the last failed pop()
 public:
  worker_stats stats_;
  mote::assistant* assistant_ = nullptr;  // runtime_options::assistants; owned by this worker
 private:
  trace_buffer* trace_ = nullptr;  // MOTE_TRACE: this worker's buffer (owned by the trace registry)
  // 1 while this worker is parked or about to park; its futex word. Written by
  // the worker and by whoever wakes it, so on a line of its own.
  alignas(cache_line) std::atomic<std::uint32_t> parked_{0};
  std::int64_t park_since_ = 0;    // instrumented: when the current sleep began
  std::uint64_t context_ = 0;
  std::uint64_t context_seq_ = 0;

  friend class runtime_impl;
};

static_assert(alignof(worker) == cache_line);
static_assert(sizeof(worker) % cache_line == 0);

}  // namespace mote::detail
