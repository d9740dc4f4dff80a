// The split deque's slow paths and the thief side. docs/design.md has the
// whole protocol; the comments here give each ordering's pairing.
#include "mote/detail/split_deque.hpp"

#include <cassert>

#include "core/runtime_impl.hpp"

namespace mote::detail {

split_deque::split_deque(runtime_impl* rt, std::uint32_t capacity)
    : push_limit_(capacity), capacity_(capacity), slots_(new std::atomic<task*>[capacity]), runtime_(rt) {
  for (std::uint32_t i = 0; i < capacity; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
}

split_deque::~split_deque() { delete[] slots_; }

void split_deque::grow_shared() noexcept {
  const std::uint32_t private_count = head_ - split_;
  // With nothing private there is nothing to share. The request stays set so
  // the next push answers it (the thief that set it may be asleep by then).
  if (private_count == 0) return;
  push_limit_.store(capacity_, std::memory_order_relaxed);
  // Share the older half (rounded up): the oldest tasks are the largest.
  const std::uint32_t new_split = split_ + (private_count + 1) / 2;
  std::uint64_t ts = tail_split_.load(std::memory_order_relaxed);
  // seq_cst: (1) release, so that a thief whose CAS reads this value (or a
  // later thief CAS in its release sequence) sees the slots written by push();
  // (2) ordered before notify_one()'s seq_cst load of idle_sleepers_: the
  // event count's notifier half for a seq_cst publication
  // (wait/event_count.hpp), against park()'s announce-then-look.
  while (!tail_split_.compare_exchange_weak(ts, pack(tail_of(ts), new_split),
                                            std::memory_order_seq_cst,
                                            std::memory_order_relaxed)) {
  }
  split_ = new_split;
  ++counts_.shares;
  runtime_->notify_one();
}

bool split_deque::push_slow(task* t) noexcept {
  const bool fits = head_ < capacity_;
  if (fits) {
    slots_[head_].store(t, std::memory_order_relaxed);
    ++head_;
  }
  // Relaxed: a thief's request is a hint; grow_shared()'s CAS is what
  // publishes the slots.
  if (push_limit_.load(std::memory_order_relaxed) == 0) grow_shared();
  return fits;
}

worker* split_deque::pop_shared() noexcept {
  assert(head_ == split_);
  assert(head_ > 0 && "pop() without a matching push()");
  std::uint64_t ts = tail_split_.load(std::memory_order_relaxed);
  for (;;) {
    const std::uint32_t tail = tail_of(ts);
    const std::uint32_t split = split_of(ts);
    if (tail >= split) break;
    // Shrink the shared part to its older half so the top task is private
    // again: new_split <= split - 1 because tail < split. The CAS fails only
    // when a thief moved tail; then look again. Relaxed would suffice for
    // exclusion (one modification order on tail_split_); acq_rel keeps this
    // RMW a clean link in the release sequence that thieves acquire.
    const std::uint32_t new_split = tail + (split - tail) / 2;
    if (tail_split_.compare_exchange_weak(ts, pack(tail, new_split), std::memory_order_acq_rel,
                                          std::memory_order_relaxed)) {
      split_ = new_split;
      --head_;
      ++counts_.shrinks;
      return nullptr;
    }
  }
  // tail == split == head_: thieves took every shared task, the top one too.
  // Before this slot can be reused, the thief must have read it: it then
  // replaces it with its tagged address (release), paired with this acquire
  // load. The window is a few instructions (the thief does its bookkeeping
  // after the mark) unless the thief was preempted.
  const std::uint32_t top = head_ - 1;
  backoff wait;
  std::uintptr_t mark;
  while (((mark = reinterpret_cast<std::uintptr_t>(slots_[top].load(std::memory_order_acquire))) &
          kStolenTag) == 0) {
    wait.pause();
  }
  ++counts_.stolen_pops;
  head_ = top;
  split_ = top;
  // No thief can be mid-CAS on a state with tail < split (there is none), so
  // a plain store resets the empty shared part to the new top.
  tail_split_.store(pack(top, top), std::memory_order_relaxed);
  return reinterpret_cast<worker*>(mark & ~kStolenTag);
}

task* split_deque::steal(worker& thief, std::uint32_t* index) noexcept {
  std::uint64_t ts = tail_split_.load(std::memory_order_acquire);
  const std::uint32_t tail = tail_of(ts);
  const std::uint32_t split = split_of(ts);
  if (tail >= split) {
    // Ask the owner to share. Read first: writing an already-set flag would
    // pull the line away from the owner for nothing.
    if (push_limit_.load(std::memory_order_relaxed) != 0) push_limit_.store(0, std::memory_order_relaxed);
    return nullptr;
  }
  // Acquire: pairs with the owner's release CAS in grow_shared() (or a thief
  // CAS in its release sequence), so the slot below holds the owner's task.
  if (!tail_split_.compare_exchange_strong(ts, pack(tail + 1, split), std::memory_order_acq_rel,
                                           std::memory_order_relaxed)) {
    return nullptr;
  }
  task* t = slots_[tail].load(std::memory_order_relaxed);
  // Release: the owner reuses this slot only after seeing our mark (the
  // acquire loop in pop_shared()), so our read above happens before its
  // write. The owner may be spinning on this very mark: nothing comes between
  // the CAS and it; the thief's statistics and trace records come after.
  slots_[tail].store(reinterpret_cast<task*>(reinterpret_cast<std::uintptr_t>(&thief) | kStolenTag),
                     std::memory_order_release);
  *index = tail;
  // More shared tasks left there: let another sleeper come for them.
  if (tail + 1 < split) runtime_->notify_one();
  return t;
}

bool split_deque::has_shared_else_ask() noexcept {
  // seq_cst: the look in park() must not be reordered before the
  // announcement (see runtime_impl::park).
  const std::uint64_t ts = tail_split_.load(std::memory_order_seq_cst);
  if (tail_of(ts) < split_of(ts)) return true;
  if (push_limit_.load(std::memory_order_seq_cst) != 0) push_limit_.store(0, std::memory_order_seq_cst);
  return false;
}

}  // namespace mote::detail
