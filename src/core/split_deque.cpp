// The split deque's slow paths, the thief side and forced sharing.
// docs/design.md has the whole protocol; the comments here give each
// ordering's pairing.
#include "mote/detail/split_deque.hpp"

#include <cassert>

#include "core/runtime_impl.hpp"
#include "mote/detail/queue_wait.hpp"  // heavy_barrier

namespace mote::detail {

split_deque::split_deque(runtime_impl* rt, std::uint32_t capacity, on_request mode)
    : slots_(new slot[capacity]), capacity_(capacity), mode_(mode), runtime_(rt) {
  for (std::uint32_t i = 0; i < capacity; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
  push_limit_.store(slots_ + capacity_, std::memory_order_relaxed);
  top_.store(slots_, std::memory_order_relaxed);
  split_.store(slots_, std::memory_order_relaxed);
}

split_deque::~split_deque() { delete[] slots_; }

// ---- forcing_: the owner's slow paths against a forcing thief ---------------

void split_deque::lock_owner() noexcept {
  // Acquire: a forcing thief's changes to split_ and tail_split_, released by
  // its store of kFree, are seen by what follows. The thief holds it for a
  // membarrier(2) call at most; back off (yielding in the end) meanwhile.
  backoff wait;
  for (;;) {
    std::uint32_t expected = kFree;
    if (forcing_.compare_exchange_weak(expected, kOwner, std::memory_order_acquire, std::memory_order_relaxed)) {
      return;
    }
    wait.pause();
  }
}

void split_deque::unlock_owner() noexcept {
  // Release: split_ and tail_split_ as the owner left them reach the next
  // forcing thief's acquire.
  forcing_.store(kFree, std::memory_order_release);
}

// ---- The owner's slow paths -------------------------------------------------

void split_deque::share_up_to(std::uint32_t new_split) noexcept {
  std::uint64_t ts = tail_split_.load(std::memory_order_relaxed);
  // seq_cst: (1) release, so that a thief whose CAS reads this value (or a
  // later thief CAS in its release sequence) sees the slots written by push();
  // (2) ordered before notify_one()'s seq_cst load of idle_sleepers_: the
  // event count's notifier half for a seq_cst publication
  // (wait/event_count.hpp), against park()'s announce-then-look. Only thieves
  // move tail meanwhile (the split is ours: forcing_ is held).
  while (!tail_split_.compare_exchange_weak(ts, pack(tail_of(ts), new_split), std::memory_order_seq_cst,
                                            std::memory_order_relaxed)) {
  }
  store_split(new_split);
}

void split_deque::grow_shared() noexcept {
  lock_owner();
  const std::uint32_t head = this->head();
  const std::uint32_t split = split_index();
  // With nothing private there is nothing to share. The request stays set so
  // the next push answers it (the thief that set it may be asleep by then).
  if (head == split) {
    unlock_owner();
    return;
  }
  push_limit_.store(slots_ + capacity_, std::memory_order_relaxed);
  if (mode_ == on_request::acknowledge) {
    // The owner is alive and takes its kept tasks itself: the request is
    // answered without sharing (a thief forces them out only when the owner
    // goes quiet for kForceAfterNs).
    unlock_owner();
    return;
  }
  // Share the older half (rounded up): the oldest tasks are the largest.
  share_up_to(split + (head - split + 1) / 2);
  unlock_owner();
  ++counts_.shares;
  runtime_->notify_one();
}

void split_deque::publish_slow() noexcept {
  lock_owner();
  const std::uint32_t head = this->head();
  const bool any = head > split_index();
  if (any) share_up_to(head);
  unlock_owner();
  if (any) {
    ++counts_.publishes;
    runtime_->notify_one();
  }
}

bool split_deque::push_slow(task* t) noexcept {
  const std::uint32_t head = this->head();
  const bool fits = head < capacity_;
  if (fits) {
    slots_[head].store(t, std::memory_order_relaxed);
    store_head(head + 1, std::memory_order_release);  // as in push()
  }
  // Relaxed: a thief's request is a hint; grow_shared()'s CAS is what
  // publishes the slots.
  if (asked()) grow_shared();
  return fits;
}

worker* split_deque::pop_slow() noexcept {
  // pop() stored head_ = h and found h below split_: the top task is shared,
  // or a forcing thief is raising split_ (and may take that back). With
  // forcing_ held, split_ is settled.
  lock_owner();
  const std::uint32_t h = head();
  if (h >= split_index()) {
    // The thief saw this pop in its look at head_ and lowered split_ again:
    // the task is private after all.
    unlock_owner();
    return nullptr;
  }
  // split_ is h + 1 (it never exceeds the head before a pop: a thief raises
  // it to a head it has seen, and keeps that only if the head did not drop
  // below it after its barrier). Put the task back into the count, and take
  // it back as a shared one.
  assert(split_index() == h + 1);
  store_head(h + 1, std::memory_order_relaxed);
  worker* thief = pop_shared();
  unlock_owner();
  return thief;
}

task* split_deque::pop_any_slow() noexcept {
  for (slot* top = top_.load(std::memory_order_relaxed); top != slots_; top = top_.load(std::memory_order_relaxed)) {
    task* t = top[-1].load(std::memory_order_relaxed);  // as in pop_any()
    if (pop_top(top) == nullptr) return t;
  }
  if (kept_ != nullptr && kept_->head() != 0) return kept_->pop_any();
  return nullptr;
}

worker* split_deque::pop_shared() noexcept {
  const std::uint32_t head = this->head();
  assert(head == split_index());
  assert(head > 0 && "pop() without a matching push()");
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
      store_split(new_split);
      store_head(head - 1, std::memory_order_release);
      ++counts_.shrinks;
      return nullptr;
    }
  }
  // tail == split == head: thieves took every shared task, the top one too.
  // Before this slot can be reused, the thief must have read it: it then
  // replaces it with its tagged address (release), paired with this acquire
  // load. The window is a few instructions (the thief does its bookkeeping
  // after the mark) unless the thief was preempted.
  const std::uint32_t top = head - 1;
  backoff wait;
  std::uintptr_t mark;
  while (((mark = reinterpret_cast<std::uintptr_t>(slots_[top].load(std::memory_order_acquire))) & kStolenTag) ==
         0) {
    wait.pause();
  }
  ++counts_.stolen_pops;
  store_head(top, std::memory_order_release);
  store_split(top);
  // No thief can be mid-CAS on a state with tail < split (there is none), and
  // no forcing thief can move the split (forcing_ is ours), so a plain store
  // resets the empty shared part to the new top.
  tail_split_.store(pack(top, top), std::memory_order_relaxed);
  return reinterpret_cast<worker*>(mark & ~kStolenTag);
}

bool split_deque::keep(task* t) noexcept {
  if (kept_ == nullptr) return false;
  // Whether the owner held no kept task privately before this one: then an
  // idle worker asleep without a timeout (it saw nothing to watch) is told
  // (runtime_impl::kept_appeared), since nothing else would wake it if this
  // worker now goes quiet.
  const bool was_quiet = kept_->top_.load(std::memory_order_relaxed) == kept_->split_.load(std::memory_order_relaxed);
  if (!kept_->push(t)) return false;
  if (was_quiet) runtime_->kept_appeared();
  return true;
}

// ---- Thieves ------------------------------------------------------------------

void split_deque::ask(std::int64_t now) noexcept {
  // Read first: writing an already-set flag would pull the line away from
  // the owner for nothing. The time before the flag, so that a thief that
  // sees the flag mostly sees this request's time (relaxed both: a stale
  // time moves a forced share by one request, nothing more).
  if (!asked()) {
    asked_at_.store(now, std::memory_order_relaxed);
    push_limit_.store(slots_, std::memory_order_relaxed);
  } else if (asked_at_.load(std::memory_order_relaxed) == kNotAsked) {
    asked_at_.store(now, std::memory_order_relaxed);
  }
}

task* split_deque::steal(worker& thief, std::uint32_t* index) noexcept {
  std::uint64_t ts = tail_split_.load(std::memory_order_acquire);
  const std::uint32_t tail = tail_of(ts);
  const std::uint32_t split = split_of(ts);
  if (tail >= split) {
    // Ask the owner to share (the clock is read only when the request is
    // new). A deque that only acknowledges is asked at the rescue's pace
    // instead (request_overdue).
    if (mode_ == on_request::share &&
        (!asked() || asked_at_.load(std::memory_order_relaxed) == kNotAsked)) {
      ask(now_ns());
    }
    return nullptr;
  }
  // Acquire: pairs with the release CAS that shared the slot (grow_shared(),
  // publish(), force_share(), or a thief CAS in its release sequence), so the
  // slot below holds the owner's task.
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

std::uint32_t split_deque::steal_batch(worker& thief, task** out, std::uint32_t max) noexcept {
  std::uint64_t ts = tail_split_.load(std::memory_order_acquire);
  const std::uint32_t tail = tail_of(ts);
  const std::uint32_t split = split_of(ts);
  if (split - tail < kBatchFrom || tail >= split || max <= 1) {
    // Nothing shared (steal() asks the owner), one task wanted, or few
    // shared: an owner that shares a handful is a recursive one whose
    // oldest tasks are its largest, where a thief that takes two of them
    // leaves the owner short and steals back.
    std::uint32_t index = 0;
    task* t = steal(thief, &index);
    out[0] = t;
    return t != nullptr ? 1 : 0;
  }
  // Half of what is shared, at most max: the thief leaves the owner (and
  // other thieves) the other half, as grow_shared() shares half.
  std::uint32_t k = (split - tail) / 2;
  if (k > max) k = max;
  // Acquire: as in steal(), the slots below hold the owner's tasks.
  if (!tail_split_.compare_exchange_strong(ts, pack(tail + k, split), std::memory_order_acq_rel,
                                           std::memory_order_relaxed)) {
    return 0;
  }
  // Each slot is read, then marked (release), as steal() does one: the owner
  // reuses a slot only after it has seen its mark (pop_shared()'s acquire
  // loop). The marks come before anything else, oldest first.
  for (std::uint32_t i = 0; i < k; ++i) {
    out[i] = slots_[tail + i].load(std::memory_order_relaxed);
    slots_[tail + i].store(reinterpret_cast<task*>(reinterpret_cast<std::uintptr_t>(&thief) | kStolenTag),
                           std::memory_order_release);
  }
  if (tail + k < split) runtime_->notify_one();
  return k;
}

bool split_deque::has_shared_else_ask(bool* stranded) noexcept {
  // seq_cst: the look in park() must not be reordered before the
  // announcement (see runtime_impl::park).
  const std::uint64_t ts = tail_split_.load(std::memory_order_seq_cst);
  if (tail_of(ts) < split_of(ts)) return true;
  if (push_limit_.load(std::memory_order_seq_cst) != slots_) {
    asked_at_.store(now_ns(), std::memory_order_relaxed);
    push_limit_.store(slots_, std::memory_order_seq_cst);
  } else if (asked_at_.load(std::memory_order_relaxed) == kNotAsked) {
    asked_at_.store(now_ns(), std::memory_order_relaxed);
  }
  // A look at the owner's line, once per park: private tasks that the owner
  // may never share by itself.
  if (top_.load(std::memory_order_relaxed) > split_.load(std::memory_order_relaxed)) *stranded = true;
  return false;
}

bool split_deque::force_share(std::int64_t now) noexcept {
  // Restart the request's clock first: whatever happens below, the next try
  // comes kForceAfterNs later.
  asked_at_.store(now, std::memory_order_relaxed);
  if (forcing_.load(std::memory_order_relaxed) != kFree) return false;
  std::uint32_t expected = kFree;
  // Acquire: pairs with the owner's release of forcing_ (unlock_owner), so
  // split_ below is the one its last slow path left, equal to the split half
  // of tail_split_.
  if (!forcing_.compare_exchange_strong(expected, kThief, std::memory_order_acquire, std::memory_order_relaxed)) {
    return false;
  }
  const std::uint32_t split = split_index();
  // Acquire: pairs with the owner's release store of top_ (push, pop): the
  // slots below it, and the tasks they point to, are visible.
  const std::uint32_t head = this->head(std::memory_order_acquire);
  bool shared = false;
  if (head > split && heavy_barrier_available()) {
    // The thief's half of the asymmetric Dekker pair with pop(): raise the
    // split, then (after every running thread has executed a full fence)
    // look at the head again. Either the look sees every pop the owner made
    // below `head` (then the owner keeps those tasks: lower the split back),
    // or the owner's pop came after its fence and its load of split_ sees
    // the raised value, so it takes the slow path, which waits for forcing_.
    // Pushes meanwhile only add private tasks above `head`. A pop and a push
    // back up to `head` before the barrier leave the slots below `head`
    // holding tasks the owner has not taken: those are what is shared.
    store_split(head);
    if (heavy_barrier() && this->head(std::memory_order_acquire) >= head) {
      share_up_to(head);
      shared = true;
    } else {
      store_split(split);
    }
  }
  // Release: the split as left here reaches the owner's next slow path.
  forcing_.store(kFree, std::memory_order_release);
  if (shared) {
    forced_.fetch_add(1, std::memory_order_relaxed);
    runtime_->notify_one();
  }
  return shared;
}

}  // namespace mote::detail
