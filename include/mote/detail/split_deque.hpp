// The work-stealing deque: the Lace split deque (van Dijk and van de Pol,
// Euro-Par 2014). Every worker owns two (worker.hpp): one for join's records
// and one for task_group's tasks.
//
// Entries at or above `split` are private to the owner, who pushes and pops
// them with plain loads and stores; entries in [tail, split) are shared, and
// thieves take the oldest one with a compare-and-swap on the packed
// {tail, split} word. The owner moves the split point only when thieves ask
// for work (`push_limit_` = 0) or when its private part is empty, so a push
// and a pop that nobody disturbs cost a few stores, one relaxed load and no
// atomic read-modify-write.
//
// docs/design.md states the protocol and the memory-order argument in full.
#pragma once

#include <atomic>
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
};

class split_deque {
 public:
  static constexpr std::uint32_t kDefaultCapacity = 1u << 14;
  // A thief marks the slot it emptied with its worker's address, tagged with
  // this bit: that tells the owner both that the slot is free and who has
  // the task.
  static constexpr std::uintptr_t kStolenTag = 1;

  // `rt` is told when tasks become stealable (runtime_impl::notify_one).
  split_deque(runtime_impl* rt, std::uint32_t capacity);
  ~split_deque();
  split_deque(const split_deque&) = delete;
  split_deque& operator=(const split_deque&) = delete;

  // ---- Owner only ----------------------------------------------------------

  // Pushes t on top. Returns false, leaving the deque as it was, when the
  // deque is full: the caller then runs the work itself, so nothing is lost.
  MOTE_ALWAYS_INLINE bool push(task* t) noexcept {
    // One load and one compare cover both rare cases: a full deque, and a
    // thief's request to share (it sets the limit to 0). Relaxed: acting on a
    // request late only delays sharing.
    if (MOTE_UNLIKELY(head_ >= push_limit_.load(std::memory_order_relaxed))) return push_slow(t);
    // Relaxed: a thief reads this slot only after its CAS in steal()
    // acquires the {tail, split} value that grow_shared() released, and
    // grow_shared() is sequenced after this store.
    slots_[head_].store(t, std::memory_order_relaxed);
    ++head_;
    return true;
  }

  // Takes back the task pushed last. nullptr: nobody stole it, it is the
  // caller's again (to run or to drop). Otherwise a thief has it, and the
  // result is that thief (the caller waits for it, or leaves it the task).
  // When the deque's tasks are only ever taken back in order (join), the
  // caller knows which task that was; pop_any() is for the other case.
  MOTE_ALWAYS_INLINE worker* pop() noexcept {
    if (MOTE_LIKELY(head_ > split_)) {
      --head_;
      return nullptr;
    }
    return pop_shared();
  }

  // Keeps t for the owner alone: pop_any() returns it (after the deque's own
  // tasks, the newest kept first), and no thief ever sees it. For ready
  // tasks too short to be worth another core (a model's choice, such as
  // data-flow's locality): every loop that takes the owner's pool work (its
  // idle loop, its waits) still finds them, and nothing bounds how many are
  // kept. Linked through queued_task::next.
  void keep(queued_task* t) noexcept {
    t->next = kept_;
    kept_ = t;
  }

  // Takes the newest task that no thief has, or nullptr when none is left.
  // Answers a thief's request to share first: a loop that pops many tasks
  // without pushing (a group's wait over leaf tasks) would otherwise leave
  // the thief waiting until the loop ends.
  task* pop_any() noexcept {
    share_if_asked();
    while (head_ > 0) {
      // Read before the pop: when the pop succeeds nobody touched this slot
      // (a thief that took it would have made the pop fail), so this is the
      // task. Relaxed: the owner wrote it.
      task* t = slots_[head_ - 1].load(std::memory_order_relaxed);
      if (pop() == nullptr) return t;
    }
    // The kept tasks after the deque's: the deque's fast path stays as it was.
    if (MOTE_UNLIKELY(kept_ != nullptr)) {
      queued_task* t = kept_;
      kept_ = t->next;
      return t;
    }
    return nullptr;
  }

  std::uint32_t depth() const noexcept { return head_; }
  bool empty() const noexcept { return head_ == 0 && kept_ == nullptr; }

  // Shares half of the private part if thieves asked for work. For loops that
  // pop many tasks without pushing, so that requests are still answered.
  void share_if_asked() noexcept {
    if (MOTE_UNLIKELY(push_limit_.load(std::memory_order_relaxed) == 0)) grow_shared();
  }
  // Shares the next push at once, without waiting for a thief to ask: used
  // when a join finds that its thief has just finished (it is probably
  // looking for work). A relaxed store to the owner's own word; grow_shared()
  // restores the limit.
  void share_next_push() noexcept { push_limit_.store(0, std::memory_order_relaxed); }
  // Has a thief asked this deque to share (a worker looking for work, or
  // one about to park)? A relaxed load of the owner's own word: a hint.
  bool asked() const noexcept { return push_limit_.load(std::memory_order_relaxed) == 0; }

  const deque_counts& counts() const noexcept { return counts_; }

  // ---- Thieves (any worker but the owner) ----------------------------------

  // Takes the oldest shared task, or returns nullptr (and asks the owner to
  // share when there was nothing shared). Marks the emptied slot with
  // `thief`'s address, and stores the slot's index in *index. Notifies the
  // runtime when shared tasks are left for others.
  task* steal(worker& thief, std::uint32_t* index) noexcept;

  // True when the deque has shared tasks. When it has none, asks the owner to
  // share its private ones: this is the last look of a worker about to park,
  // so that an owner with private work shares it on its next push, which
  // notifies. seq_cst loads: see runtime_impl::park().
  bool has_shared_else_ask() noexcept;

 private:
  static constexpr std::uint64_t pack(std::uint32_t tail, std::uint32_t split) noexcept {
    return (static_cast<std::uint64_t>(split) << 32) | tail;
  }
  static constexpr std::uint32_t tail_of(std::uint64_t ts) noexcept { return static_cast<std::uint32_t>(ts); }
  static constexpr std::uint32_t split_of(std::uint64_t ts) noexcept { return static_cast<std::uint32_t>(ts >> 32); }

  MOTE_API worker* pop_shared() noexcept;
  MOTE_API void grow_shared() noexcept;
  MOTE_API bool push_slow(task* t) noexcept;  // full, or asked to share

  // ---- Shared with thieves: one cache line, written by thieves ----------
  // {tail, split}: thieves CAS tail forward while tail < split; only the
  // owner moves split (by CAS, so both halves change atomically together).
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
  queued_task* kept_ = nullptr;  // keep(): the owner's alone, newest first
  runtime_impl* runtime_;
  deque_counts counts_;
};

static_assert(alignof(split_deque) == cache_line);
static_assert(sizeof(split_deque) % cache_line == 0);

}  // namespace mote::detail
