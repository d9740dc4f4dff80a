// The split deque's slow paths and the thief side. docs/design.md has the
// whole protocol; the comments here give each ordering's pairing.
#include <cassert>

#include "mote/detail/worker.hpp"
#include "mote/trace.hpp"
#include "runtime/runtime_impl.hpp"

namespace mote::detail {

constinit thread_local worker* current_worker __attribute__((tls_model("initial-exec"))) = nullptr;

worker::worker(runtime_impl& rt, unsigned index, std::uint32_t capacity)
    : push_limit_(capacity),
      capacity_(capacity),
      slots_(new std::atomic<task*>[capacity]),
      runtime_(&rt),
      index_(index),
      rng_(0x9E3779B97F4A7C15ull * (index + 1)) {
  for (std::uint32_t i = 0; i < capacity; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
}

worker::~worker() { delete[] slots_; }

void task::finish(bool failed) noexcept {
  // Release: the task's results (written by the thief before this call) become
  // visible to the spawner's acquire load of `state` in wait_for(). After this
  // exchange the spawner may return and end the task's lifetime, so the wake
  // below uses only the address: a private futex wake reads no memory there.
  if (state.exchange(failed ? kFailed : kDone, std::memory_order_acq_rel) == kParked) {
    futex_wake(&state, 1);
  }
}

void worker::grow_shared() noexcept {
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
  // (2) ordered before notify_one()'s seq_cst load of idle_sleepers_, the
  // Dekker pair of park()'s increment-then-look.
  while (!tail_split_.compare_exchange_weak(ts, pack(tail_of(ts), new_split),
                                            std::memory_order_seq_cst,
                                            std::memory_order_relaxed)) {
  }
  split_ = new_split;
  ++stats_.shares;
  runtime_->notify_one();
}

bool worker::push_slow(task* t) noexcept {
  const bool fits = head_ < capacity_;
  if (fits) {
    slots_[head_].store(t, std::memory_order_relaxed);
    ++head_;
  }
  if (push_limit_.load(std::memory_order_relaxed) == 0) grow_shared();
  return fits;
}

bool worker::pop_shared() noexcept {
  assert(head_ == split_);
  if (head_ == 0) return false;  // unreachable from balanced code
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
      ++stats_.shrinks;
      return true;
    }
  }
  // tail == split == head_: thieves took every shared task, the top one too.
  // Before this slot can be reused, the thief must have read it: it then
  // replaces it with its tagged address (release), paired with this acquire
  // load. The window is a few instructions unless the thief was preempted.
  const std::uint32_t top = head_ - 1;
  backoff wait;
  std::uintptr_t mark;
  while (((mark = reinterpret_cast<std::uintptr_t>(slots_[top].load(std::memory_order_acquire))) &
          kStolenTag) == 0) {
    wait.pause();
  }
  last_thief_ = reinterpret_cast<worker*>(mark & ~kStolenTag);
  ++stats_.stolen_pops;
  head_ = top;
  split_ = top;
  // No thief can be mid-CAS on a state with tail < split (there is none), so
  // a plain store resets the empty shared part to the new top.
  tail_split_.store(pack(top, top), std::memory_order_relaxed);
  return false;
}

task* worker::steal_from(worker& victim) noexcept {
  std::uint64_t ts = victim.tail_split_.load(std::memory_order_acquire);
  const std::uint32_t tail = tail_of(ts);
  const std::uint32_t split = split_of(ts);
  if (tail >= split) {
    ++stats_.failed_steals;
    if (MOTE_UNLIKELY(trace_ != nullptr)) trace_->put(trace_kind::failed_steal, victim.index_);
    // Ask the owner to share. Read first: writing an already-set flag would
    // pull the line away from the owner for nothing.
    if (victim.push_limit_.load(std::memory_order_relaxed) != 0) {
      victim.push_limit_.store(0, std::memory_order_relaxed);
    }
    return nullptr;
  }
  // Acquire: pairs with the owner's release CAS in grow_shared() (or a thief
  // CAS in its release sequence), so the slot below holds the owner's task.
  if (!victim.tail_split_.compare_exchange_strong(ts, pack(tail + 1, split),
                                                  std::memory_order_acq_rel,
                                                  std::memory_order_relaxed)) {
    ++stats_.failed_steals;
    if (MOTE_UNLIKELY(trace_ != nullptr)) trace_->put(trace_kind::failed_steal, victim.index_);
    return nullptr;
  }
  ++stats_.steals;
  if (MOTE_UNLIKELY(trace_ != nullptr)) trace_->put(trace_kind::steal, victim.index_);
  task* t = victim.slots_[tail].load(std::memory_order_relaxed);
  // Release: the owner reuses this slot only after seeing our mark (the
  // acquire loop in pop_shared()), so our read above happens before its write.
  victim.slots_[tail].store(
      reinterpret_cast<task*>(reinterpret_cast<std::uintptr_t>(this) | kStolenTag),
      std::memory_order_release);
  // More shared tasks left there: let another sleeper come for them.
  if (tail + 1 < split) runtime_->notify_one();
  return t;
}

bool worker::has_shared_work(worker& victim) noexcept {
  // seq_cst: the look in park() must not be reordered before the increment of
  // idle_sleepers_ (see runtime_impl::notify_one).
  const std::uint64_t ts = victim.tail_split_.load(std::memory_order_seq_cst);
  if (tail_of(ts) < split_of(ts)) return true;
  if (victim.push_limit_.load(std::memory_order_seq_cst) != 0) {
    victim.push_limit_.store(0, std::memory_order_seq_cst);
  }
  return false;
}

void worker::run_foreign(task* t) noexcept {
  [[maybe_unused]] const std::uint32_t depth = head_;
  const std::uint64_t outer = context_;
  context_ = ++context_seq_;
  if (MOTE_UNLIKELY(instrument_ != 0)) {
    note_task_begin(reinterpret_cast<const void*>(t->execute), false);
    t->execute(t, *this);
    note_task_end();
  } else {
    t->execute(t, *this);
  }
  context_ = outer;
  // Every model pops what it pushes before its task ends.
  assert(head_ == depth);
}

std::uint32_t worker::wait_for(task* t) noexcept {
  worker* const thief = last_thief_;
  const std::int64_t spin = runtime_->spin_ns();
  std::int64_t idle_since = 0;
  std::int64_t park_ns = 50'000;
  unsigned round = 0;
  for (;;) {
    // Acquire: pairs with finish()'s release exchange; the results are ours.
    const std::uint32_t state = t->state.load(std::memory_order_acquire);
    if (state >= task::kDone) {
      // The thief has just finished t and is probably looking for work: share
      // the next push at once instead of waiting for it to ask (a relaxed
      // store to our own word; grow_shared() restores the limit).
      push_limit_.store(0, std::memory_order_relaxed);
      return state;
    }
    if (state == task::kRunning) {
      // Leapfrog: whatever the thief has shared belongs to t's subtree.
      if (task* x = steal_from(*thief)) {
        run_foreign(x);
        idle_since = 0;
        park_ns = 50'000;
        continue;
      }
      // Look at t every couple of pauses: a sub-microsecond task should not
      // wait microseconds to be noticed. The clock is read every 16 rounds.
      cpu_pause();
      cpu_pause();
      if ((++round & 15) != 0) continue;
      const std::int64_t now = now_ns();
      if (idle_since == 0) idle_since = now;
      if (now - idle_since < spin) continue;
      std::uint32_t expected = task::kRunning;
      // Announce that we sleep; finish() sees kParked and wakes us.
      if (!t->state.compare_exchange_strong(expected, task::kParked, std::memory_order_acq_rel,
                                            std::memory_order_acquire)) {
        continue;  // it finished meanwhile
      }
    }
    // Parked. The timeout lets us look at the thief's deque again now and
    // then, since nothing wakes us for the work that appears there.
    if (MOTE_UNLIKELY(instrument_ != 0)) {
      note_park(true);
      futex_wait_for(&t->state, task::kParked, park_ns);
      note_park(false);
    } else {
      futex_wait_for(&t->state, task::kParked, park_ns);
    }
    if (park_ns < 4'000'000) park_ns *= 2;
    std::uint32_t parked = task::kParked;
    t->state.compare_exchange_strong(parked, task::kRunning, std::memory_order_acq_rel,
                                     std::memory_order_acquire);
  }
}

// ---- Instrumentation: reached only when instrument_ != 0 -------------------

void worker::note_spawn(const void* what, bool named) noexcept {
  ++stats_.spawns;
  if (trace_ != nullptr) trace_->put(trace_kind::spawn, named ? 1 : 0, what);
}

void worker::note_task_begin(const void* what, bool named) noexcept {
  ++stats_.tasks;
  if (trace_ != nullptr) trace_->put(trace_kind::task_begin, named ? 1 : 0, what);
}

void worker::note_task_end() noexcept {
  if (trace_ != nullptr) trace_->put(trace_kind::task_end);
}

void worker::note_task_name(const char* name) noexcept {
  if (trace_ != nullptr) trace_->put(trace_kind::task_name, 0, name);
}

void worker::note_wait_begin(unsigned what) noexcept {
  if (trace_ != nullptr) trace_->put(trace_kind::wait_begin, what);
}

void worker::note_wait_end() noexcept {
  if (trace_ != nullptr) trace_->put(trace_kind::wait_end);
}

void worker::note_park(bool begin) noexcept {
  if (begin) {
    park_since_ = now_ns();
    if (trace_ != nullptr) trace_->put(trace_kind::park_begin);
  } else {
    stats_.idle_ns += now_ns() - park_since_;
    if (trace_ != nullptr) trace_->put(trace_kind::park_end);
  }
}

}  // namespace mote::detail
