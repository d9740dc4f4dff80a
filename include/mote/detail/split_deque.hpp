// The work-stealing deque: the Lace split deque (van Dijk and van de Pol,
// Euro-Par 2014), extended so that a thief can share an owner's private tasks
// when the owner does not answer. Every worker owns three (worker.hpp): one
// for join's records, one for its pool (task_group's tasks, ready data-flow
// tasks) and one for the tasks a model keeps for it (keep()).
//
// Entries at or above `split` are private to the owner, who pushes and pops
// them with plain loads and stores; entries in [tail, split) are shared, and
// thieves take the oldest one with a compare-and-swap on the packed
// {tail, split} word. The owner moves the split point when thieves ask for
// work (`push_limit_` at the bottom) or when its private part is empty, so a push and a
// pop that nobody disturbs cost a few stores, one relaxed load and no atomic
// read-modify-write.
//
// Lace's owner answers a request at its next push or pop. An owner that does
// neither for long (a long leaf, a lock, a blocking call) would hold its
// private tasks out of reach, so a thief whose request has gone unanswered
// for kForceAfterNs shares them itself (force_share()): it raises the
// owner's split, runs heavy_barrier() (membarrier(2): every running thread of
// the process executes a full fence) and looks at the owner's head again.
// The owner's pop stores its head before it reads the split, with only a
// compiler fence between: an asymmetric Dekker pair, so the fast path costs
// what it cost before. And an owner about to block in a wait that runs no
// tasks shares everything itself first (publish()).
//
// docs/design.md states the protocol and the memory-order argument in full.
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>

#include "mote/detail/platform.hpp"
#include "mote/detail/task.hpp"
#include "mote/export.hpp"

namespace mote::detail {

class worker;
class runtime_impl;

// What a deque's owner did on its slow paths (kept always: they are rare).
struct deque_counts {
  std::uint64_t shares = 0;       // grow_shared: private tasks made stealable
  std::uint64_t shrinks = 0;      // pop_shared took a shared task back
  std::uint64_t stolen_pops = 0;  // pops that found their task stolen
  std::uint64_t publishes = 0;    // publish(): everything shared before a wait
};

class split_deque {
 public:
  using slot = std::atomic<task*>;
  static constexpr std::uint32_t kDefaultCapacity = 1u << 14;
  // A thief marks the slot it emptied with its worker's address, tagged with
  // this bit: that tells the owner both that the slot is free and who has
  // the task.
  static constexpr std::uintptr_t kStolenTag = 1;
  // How long a thief's request may go unanswered before the thief shares the
  // owner's private tasks itself: about a futex wake-up. An owner that pushes
  // or pops within this answers first, and never pays for a forced share.
  static constexpr std::int64_t kForceAfterNs = 20'000;
  // The same for kept tasks (keep()), whose owner means to run them itself:
  // ten times longer, so that a hiccup of an owner that is busy with them (a
  // page fault, a table's growth, a short preemption) does not move them.
  static constexpr std::int64_t kForceKeptAfterNs = 200'000;

  // How the owner answers a thief's request (push_limit_ at the bottom).
  enum class on_request : std::uint8_t {
    share,        // shares the older half of its private tasks
    acknowledge,  // only shows that it is alive (keep(): tasks meant for
                  // the owner; a thief forces them out only when the owner
                  // has neither pushed nor taken any for kForceAfterNs)
  };

  // `rt` is told when tasks become stealable (runtime_impl::notify_one).
  split_deque(runtime_impl* rt, std::uint32_t capacity, on_request mode = on_request::share);
  ~split_deque();
  split_deque(const split_deque&) = delete;
  split_deque& operator=(const split_deque&) = delete;

  // ---- Owner only ----------------------------------------------------------

  // Pushes t on top. Returns false, leaving the deque as it was, when the
  // deque is full: the caller then runs the work itself, so nothing is lost.
  MOTE_ALWAYS_INLINE bool push(task* t) noexcept {
    slot* const top = top_.load(std::memory_order_relaxed);  // the owner's own
    // One load and one compare cover both rare cases: a full deque, and a
    // thief's request to share (it sets the limit to the bottom). Relaxed:
    // acting on a request late only delays sharing (force_share() covers
    // an owner that never acts).
    if (MOTE_UNLIKELY(top >= push_limit_.load(std::memory_order_relaxed))) return push_slow(t);
    // Relaxed: a thief reads this slot only after an acquire that follows
    // the release below (force_share()'s load of top_) or grow_shared()'s
    // CAS, both sequenced after this store.
    top->store(t, std::memory_order_relaxed);
    // Release (a plain store on x86): a thief that forces a share reads
    // top_ with acquire, and then the slots below it and the tasks they
    // point to are the ones pushed.
    top_.store(top + 1, std::memory_order_release);
    return true;
  }

  // Takes back the task pushed last. nullptr: nobody stole it, it is the
  // caller's again (to run or to drop). Otherwise a thief has it, and the
  // result is that thief (the caller waits for it, or leaves it the task).
  // When the deque's tasks are only ever taken back in order (join), the
  // caller knows which task that was; pop_any() is for the other case.
  MOTE_ALWAYS_INLINE worker* pop() noexcept { return pop_top(top_.load(std::memory_order_relaxed)); }

  // Keeps t for the owner: pop_any() returns it after the deque's own tasks
  // (the newest kept first), and a thief's request does not share it. For
  // ready tasks too short to be worth another core (a model's choice, such
  // as data-flow's locality). Kept tasks are not hidden: an owner that does
  // not answer a thief for kForceKeptAfterNs (it answers when it keeps or
  // takes one, or calls share_if_asked() on the kept deque, as data-flow's
  // tasks and spawns do) has them shared by that thief, and publish()
  // shares them too. False when
  // there is no room (or this deque keeps nothing): the caller schedules t
  // the usual way.
  MOTE_API bool keep(task* t) noexcept;
  // The deque keep() uses (owned by the caller, who must keep it alive as
  // long as this one; its mode is on_request::acknowledge).
  void set_kept(split_deque* kept) noexcept { kept_ = kept; }

  // Takes the newest task that no thief has, or nullptr when none is left.
  // Answers a thief's request to share first: a loop that pops many tasks
  // without pushing (a group's wait over leaf tasks) would otherwise leave
  // the thief waiting until the loop ends.
  task* pop_any() noexcept {
    share_if_asked();
    slot* top = top_.load(std::memory_order_relaxed);
    if (MOTE_LIKELY(top != slots_)) {
      // pop_top() inlined, reading the slot too. Read before the pop: when
      // the pop succeeds nobody touched this slot (a thief that took it
      // would have made the pop fail), so this is the task. Relaxed: the
      // owner wrote it.
      --top;
      task* t = top->load(std::memory_order_relaxed);
      top_.store(top, std::memory_order_release);
      std::atomic_signal_fence(std::memory_order_seq_cst);
      if (MOTE_LIKELY(top >= split_.load(std::memory_order_relaxed))) return t;
      if (pop_slow() == nullptr) return t;
    }
    return pop_any_slow();
  }

  // The owner's top as an index: tasks pushed and not yet taken back, stolen
  // ones included (kept ones not counted). A position (task groups record
  // where their frames start), not a count of waiting tasks: see held().
  std::uint32_t depth() const noexcept { return head(); }
  // Tasks pushed and neither taken back nor stolen (kept ones not counted).
  // Owner only. Relaxed load of the thieves' index: a snapshot (a steal in
  // flight may be counted or not), for a choice such as "the idle workers
  // have enough of this worker's tasks already". Stolen slots stay below the
  // owner's top until it pops down to them, so depth() alone counts every
  // task a thief ever took from a spawner that only pushes.
  std::uint32_t held() const noexcept {
    const std::uint32_t h = head();
    const std::uint32_t stolen = tail_of(tail_split_.load(std::memory_order_relaxed));
    return h > stolen ? h - stolen : 0;
  }
  // Free slots above the owner's top (owner only).
  std::uint32_t room() const noexcept { return capacity_ - head(); }
  bool empty() const noexcept { return head() == 0 && (kept_ == nullptr || kept_->head() == 0); }
  // Are some of the owner's tasks (kept ones too) still private? Owner only.
  bool has_private() const noexcept {
    return top_.load(std::memory_order_relaxed) > split_.load(std::memory_order_relaxed) ||
           (kept_ != nullptr && kept_->has_private());
  }

  // Shares half of the private part if thieves asked for work. For loops that
  // pop many tasks without pushing, so that requests are still answered.
  void share_if_asked() noexcept {
    if (MOTE_UNLIKELY(asked())) grow_shared();
  }
  // Shares the next push at once, without waiting for a thief to ask: used
  // when a join finds that its thief has just finished (it is probably
  // looking for work). A relaxed store to the owner's own word; grow_shared()
  // restores the limit.
  void share_next_push() noexcept {
    // No thief asked: the clock of a forced share starts at the next ask.
    asked_at_.store(kNotAsked, std::memory_order_relaxed);
    push_limit_.store(slots_, std::memory_order_relaxed);
  }
  // Has a thief asked this deque to share (a worker looking for work, or
  // one about to park)? A relaxed load of the owner's own word: a hint.
  bool asked() const noexcept { return push_limit_.load(std::memory_order_relaxed) == slots_; }
  // When the standing request was made (now_ns()), INT64_MAX when none was
  // timed: a relaxed look, for tests that tell a late answer from a missing
  // one (a request kForceAfterNs old is forced, answered or not).
  std::int64_t asked_at() const noexcept { return asked_at_.load(std::memory_order_relaxed); }

  // Shares every private task (the kept ones too) and wakes a sleeper: for
  // an owner about to block in a wait that runs no tasks, so that nothing it
  // holds waits for it. Cheap when nothing is private.
  void publish() noexcept {
    if (top_.load(std::memory_order_relaxed) > split_.load(std::memory_order_relaxed)) publish_slow();
    if (kept_ != nullptr) kept_->publish();
  }

  const deque_counts& counts() const noexcept { return counts_; }
  // Shares forced by thieves (force_share() calls that shared something).
  std::uint64_t forced_shares() const noexcept { return forced_.load(std::memory_order_relaxed); }

  // ---- Thieves (any worker but the owner) ----------------------------------

  // Takes the oldest shared task, or returns nullptr (and asks the owner to
  // share when there was nothing shared). Marks the emptied slot with
  // `thief`'s address, and stores the slot's index in *index. Notifies the
  // runtime when shared tasks are left for others.
  task* steal(worker& thief, std::uint32_t* index) noexcept;
  // steal() for up to `max` tasks at once (max >= 1): half of the shared
  // ones when kBatchFrom or more are, oldest first, into out[0..k); returns k (0 as steal()'s
  // nullptr). For tasks that may run in any order on any worker (a pool's):
  // the caller runs out[0] and pushes the rest on its own pool. A steal of
  // one task from a producer's deque costs a few line transfers in series
  // (the CAS, the slot, the record); a batch pays the first two once.
  MOTE_API std::uint32_t steal_batch(worker& thief, task** out, std::uint32_t max) noexcept;
  // steal_batch takes one task while fewer than this are shared.
  static constexpr std::uint32_t kBatchFrom = 16;

  // True when the deque has shared tasks. When it has none, asks the owner to
  // share its private ones: this is the last look of a worker about to park,
  // so that an owner with private work shares it on its next push, which
  // notifies. seq_cst loads: see runtime_impl::park(). *stranded: set when
  // the owner holds private tasks (a look at its head, once per park): the
  // caller then sleeps with a timeout, to force them out if the owner does
  // not answer.
  bool has_shared_else_ask(bool* stranded) noexcept;

  // Has a request been outstanding for kForceAfterNs (kForceKeptAfterNs for
  // keep()'s deque; at time `now`, from now_ns())? Two relaxed loads of the thieves' line: cheap enough for
  // every idle look. A deque that acknowledges (keep()'s) is asked here
  // rather than by steal(): once per kForceAfterNs at most, so that its
  // owner, which acknowledges as it runs (dataflow's tasks do), finds the
  // request line changed rarely.
  bool request_overdue(std::int64_t now) noexcept {
    if (asked()) {
      return now - asked_at_.load(std::memory_order_relaxed) >=
             (mode_ == on_request::share ? kForceAfterNs : kForceKeptAfterNs);
    }
    if (mode_ == on_request::acknowledge) {
      const std::int64_t at = asked_at_.load(std::memory_order_relaxed);
      if (at == kNotAsked || now - at >= kForceAfterNs) ask(now);
    }
    return false;
  }
  // Shares every private task of the owner without its help (see the top of
  // this file), then restarts the request's clock. True when it shared
  // something; false when there was nothing private, another thief or the
  // owner's slow path was at it, the owner took the tasks back meanwhile, or
  // membarrier(2) is not available here.
  bool force_share(std::int64_t now) noexcept;

 private:
  // The indices behind the pointers (the slow paths and tail_split_ count
  // in slots).
  std::uint32_t head(std::memory_order order = std::memory_order_relaxed) const noexcept {
    return static_cast<std::uint32_t>(top_.load(order) - slots_);
  }
  void store_head(std::uint32_t h, std::memory_order order) noexcept { top_.store(slots_ + h, order); }
  std::uint32_t split_index() const noexcept {
    return static_cast<std::uint32_t>(split_.load(std::memory_order_relaxed) - slots_);
  }
  void store_split(std::uint32_t s) noexcept { split_.store(slots_ + s, std::memory_order_relaxed); }

  static constexpr std::uint64_t pack(std::uint32_t tail, std::uint32_t split) noexcept {
    return (static_cast<std::uint64_t>(split) << 32) | tail;
  }
  static constexpr std::uint32_t tail_of(std::uint64_t ts) noexcept { return static_cast<std::uint32_t>(ts); }
  static constexpr std::uint32_t split_of(std::uint64_t ts) noexcept { return static_cast<std::uint32_t>(ts >> 32); }

  // forcing_: who may change split_ and the split half of tail_split_.
  static constexpr std::uint32_t kFree = 0;
  static constexpr std::uint32_t kOwner = 1;
  static constexpr std::uint32_t kThief = 2;
  // asked_at_ while the request is the owner's own (share_next_push).
  static constexpr std::int64_t kNotAsked = INT64_MAX;

  // pop() with the head already loaded (pop_any's loop reads it once).
  MOTE_ALWAYS_INLINE worker* pop_top(slot* top) noexcept {
    assert(top != slots_ && "pop() without a matching push()");
    --top;
    // The owner's half of the asymmetric Dekker pair with force_share():
    // store the head, then read the split. Only a compiler fence between
    // them; the thief's heavy_barrier() orders the processor (see
    // force_share()). Either the thief's look at top_ sees this pop and it
    // leaves the task private, or this load sees the split it raised and
    // the pop goes the slow way. Release: see push().
    top_.store(top, std::memory_order_release);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (MOTE_LIKELY(top >= split_.load(std::memory_order_relaxed))) return nullptr;
    return pop_slow();
  }
  MOTE_API worker* pop_slow() noexcept;
  // pop_any() past its first pop: the tasks below a stolen one, then the
  // kept ones (after the deque's own, so that the fast path stays as it was).
  MOTE_API task* pop_any_slow() noexcept;
  MOTE_API void grow_shared() noexcept;
  MOTE_API bool push_slow(task* t) noexcept;  // full, or asked to share
  MOTE_API void publish_slow() noexcept;
  worker* pop_shared() noexcept;              // with forcing_ held
  void share_up_to(std::uint32_t new_split) noexcept;  // with forcing_ held
  void lock_owner() noexcept;
  void unlock_owner() noexcept;
  MOTE_API void ask(std::int64_t now) noexcept;

  // ---- Shared with thieves: one cache line, written by thieves ----------
  // {tail, split}: thieves CAS tail forward while tail < split; the split
  // moves only by CAS (so both halves change atomically together), by the
  // owner or a forcing thief holding forcing_.
  alignas(cache_line) std::atomic<std::uint64_t> tail_split_{0};
  // The owner pushes on its fast path while top_ is below this: the end of
  // the slots normally, their start (slots_) once a thief that found no
  // shared task asks the owner to share (the owner restores it when it
  // answers). Checked before it is written, so idle thieves do not keep
  // invalidating the owner's copy.
  std::atomic<slot*> push_limit_;
  // Held (kOwner or kThief) by whoever changes split_: the owner's slow
  // paths and a forcing thief. The owner's fast paths never look at it.
  std::atomic<std::uint32_t> forcing_{kFree};
  // When the outstanding request was made (now_ns()). Relaxed: a stale value
  // only moves a forced share earlier or later.
  std::atomic<std::int64_t> asked_at_{0};
  std::atomic<std::uint64_t> forced_{0};  // forced shares, for MOTE_STATS

  // ---- The owner's line: written by the owner; read by a forcing thief --
  // The next free slot (slots_ + the head index: a pointer, so that a push
  // and a pop are a few instructions).
  alignas(cache_line) std::atomic<slot*> top_;
  // The split as the owner's pops test it (slots_ + the split index). Equal
  // to split_of(tail_split_) whenever forcing_ is free; a forcing thief
  // raises it first (its half of the Dekker pair) and lowers it back if the
  // owner took the tasks.
  std::atomic<slot*> split_;
  slot* slots_;
  std::uint32_t capacity_;
  on_request mode_;
  split_deque* kept_ = nullptr;  // keep()'s deque (the pool's), or nullptr
  runtime_impl* runtime_;
  deque_counts counts_;
};

static_assert(alignof(split_deque) == cache_line);
static_assert(sizeof(split_deque) % cache_line == 0);

}  // namespace mote::detail
