// A worker's own side: join's wait for a stolen partner, stealing, running
// tasks taken from elsewhere, the record cache and the event hooks.
#include "mote/detail/worker.hpp"

#include <algorithm>
#include <cassert>

#include "mote/detail/adaptive.hpp"
#include "mote/trace.hpp"
#include "loops/loops.hpp"
#include "runtime/idle.hpp"
#include "runtime/runtime_impl.hpp"
#include "wait/event_count.hpp"

namespace mote::detail {

constinit thread_local worker* current_worker __attribute__((tls_model("initial-exec"))) = nullptr;

worker::worker(runtime_impl& rt, unsigned index, std::uint32_t capacity, std::uint32_t instrument,
               trace_buffer* trace)
    : frames_(&rt, capacity),
      pool_(&rt, capacity),
      runtime_(&rt),
      index_(index),
      instrument_(instrument),
      rng_(0x9E3779B97F4A7C15ull * (index + 1)),
      trace_(trace) {
  if (instrument & kJoinAdaptive) {
    // Re-probe within a quarter of the spin window (a site's work is half of
    // its pairs' time, or less): while this worker runs its pairs
    // in place the others find no work, and a probe must come before they
    // park (a probe to a parked worker is not stolen, and measures nothing).
    // Hand-off samples over 20 us were a sleeping or busy thief: not the
    // cost of a hand-off to a worker that is looking for work.
    const std::int64_t spin_us = rt.spin_ns() / 1000;
    const std::uint64_t probe_us = spin_us > 0 ? static_cast<std::uint64_t>(std::clamp<std::int64_t>(spin_us / 4, 5, 500)) : 500;
    model_ = new offload_model(offload_model::defaults(probe_us, 20));
  }
}

worker::~worker() {
  delete model_;  // adds its counts to the sites (MOTE_STATS)
  for (auto& row : loop_frames_) {
    for (loop_desc* d : row) destroy_loop_desc(d);
  }
}

task_cache::~task_cache() {
  // The runtime's workers end together: blocks still in a batch or on a
  // return stack are ordinary operator-new memory, freed here wherever they
  // came from.
  for (int c = 0; c < kClasses; ++c) {
    free_block* lists[2] = {head_[c], outgoing_[c].head};
    for (free_block* b : lists) {
      while (b != nullptr) {
        free_block* next = b->next;
        ::operator delete(b);
        b = next;
      }
    }
    free_block* stack = returned_[c].exchange(nullptr, std::memory_order_acquire);
    while (stack != nullptr) {
      free_block* below = stack->next_batch;
      for (free_block* b = stack; b != nullptr;) {
        free_block* next = b->next;
        ::operator delete(b);
        b = next;
      }
      stack = below;
    }
  }
}

void task_cache::give_home(void* p, int cls, task_cache& home) noexcept {
#if MOTE_TASK_CACHE
  if (&home == this) {
    give(p, cls);
    return;
  }
  batch& out = outgoing_[cls];
  if (out.home != &home && out.count != 0) send(cls);
  auto* b = static_cast<free_block*>(p);
  b->next = out.head;
  out.head = b;
  out.home = &home;
  if (++out.count == kBatch) send(cls);
#else
  (void)home;
  give(p, cls);
#endif
}

void task_cache::send(int cls) noexcept {
  batch& out = outgoing_[cls];
  std::atomic<free_block*>& stack = out.home->returned_[cls];
  free_block* top = stack.load(std::memory_order_relaxed);
  do {
    out.head->next_batch = top;
    // Release: the home's acquire exchange in reclaim() sees the batch's
    // links. Only the home ever pops, and it takes the whole stack at once,
    // so a pushed batch is never removed under a pusher (no ABA).
  } while (!stack.compare_exchange_weak(top, out.head, std::memory_order_release, std::memory_order_relaxed));
  out = batch{};
}

void task_cache::reclaim(int cls) noexcept {
  // Acquire: pairs with send()'s release CAS; every batch's links are visible.
  free_block* stack = returned_[cls].exchange(nullptr, std::memory_order_acquire);
  while (stack != nullptr) {
    free_block* below = stack->next_batch;
    free_block* last = stack;
    std::uint32_t n = 1;
    while (last->next != nullptr) {
      last = last->next;
      ++n;
    }
    last->next = head_[cls];
    head_[cls] = stack;
    count_[cls] += n;
    stack = below;
  }
}

void task::finish(bool failed) noexcept {
  // Release: the task's results (written by the thief before this call) become
  // visible to the spawner's acquire load of `state` in wait_for(). After this
  // exchange the spawner may return and end the task's lifetime, so the wake
  // below uses only the address. The event count's one-word form
  // (wait/event_count.hpp): the exchange shows whether the spawner parked.
  if (state.exchange(failed ? kFailed : kDone, std::memory_order_acq_rel) == kParked) {
    event_word::notify(&state, 1);
  }
}

task_group* worker::group_of_frame(std::uint32_t index) const noexcept {
  // Acquire: pairs with enter_group()'s release store of level_; the entries
  // below the level read are written. The levels that enclose the record at
  // `index` hold still (they end only after its join); deeper ones, which may
  // change meanwhile, all began after the record was pushed, so their start
  // depth is above `index` and the scan stops at them.
  const std::uint32_t level = level_.load(std::memory_order_acquire);
  const std::uint32_t recorded = level < kLevels ? level : kLevels;
  task_group* group = nullptr;
  for (std::uint32_t k = 0; k < recorded; ++k) {
    if (levels_[k].start_depth.load(std::memory_order_relaxed) > index) break;
    group = levels_[k].group.load(std::memory_order_relaxed);
  }
  return group;
}

task* worker::steal_from(worker& victim, task_group** context) noexcept {
  std::uint32_t index = 0;
  task* t = victim.frames_.steal(*this, &index);
  if (t != nullptr) {
    // A join's branch: it runs inside the group its spawner was in.
    *context = victim.group_of_frame(index);
  } else {
    t = victim.pool_.steal(*this, &index);
    // A pooled task: it enters its own group when it runs.
    *context = nullptr;
  }
  // The bookkeeping comes after the steal marked the slot: the owner may be
  // waiting for that mark.
  if (t != nullptr) {
    ++stats_.steals;
    if (MOTE_UNLIKELY(trace_ != nullptr)) trace_->put(trace_kind::steal, victim.index_);
  } else {
    ++stats_.failed_steals;
    if (MOTE_UNLIKELY(trace_ != nullptr)) trace_->put(trace_kind::failed_steal, victim.index_);
  }
  return t;
}

void worker::run_task(task* t, task_group* context) noexcept {
  [[maybe_unused]] const std::uint32_t depth = frames_.depth();
  const std::uint32_t level = enter_group(context);
  if (MOTE_UNLIKELY(instrumented())) {
    note_task_begin(reinterpret_cast<const void*>(t->execute), false);
    t->execute(t, *this);
    note_task_end();
  } else {
    t->execute(t, *this);
  }
  leave_group(level);
  // Every model pops the join records it pushes before its task ends.
  assert(frames_.depth() == depth);
}

std::uint32_t worker::wait_for(task* t, worker& thief) noexcept {
  idle_wait idle(runtime_->spin_ns(), 2);
  for (;;) {
    // Acquire: pairs with finish()'s release exchange; the results are ours.
    const std::uint32_t state = t->state.load(std::memory_order_acquire);
    if (state >= task::kDone) {
      // The thief has just finished t and is probably looking for work: share
      // the next push at once instead of waiting for it to ask.
      frames_.share_next_push();
      return state;
    }
    if (state == task::kRunning) {
      // Leapfrog: what the thief has shared is, in the usual case, t's
      // subtree (a thief steals when its own deques are empty, except one
      // that was itself leapfrogging). Then this worker's own pool:
      // task_group tasks that would otherwise wait for an idle thief.
      task_group* context = nullptr;
      if (task* x = steal_from(thief, &context)) {
        run_task(x, context);
        idle.reset();
        continue;
      }
      if (task* x = pool_.pop_any()) {
        run_task(x, nullptr);
        idle.reset();
        continue;
      }
      // scheduler_policy::delegation: the group tasks that would be on the
      // pool wait in the scheduler (the newest, as this is a nested wait).
      if (MOTE_UNLIKELY(delegating_)) {
        if (task* x = runtime_->take_ready(*this)) {
          run_task(x, nullptr);
          idle.reset();
          continue;
        }
      }
      if (idle.spin()) continue;
      std::uint32_t expected = task::kRunning;
      // Announce that we sleep, in the state word itself (the event count's
      // one-word form): finish() sees kParked and wakes us.
      if (!t->state.compare_exchange_strong(expected, task::kParked, std::memory_order_acq_rel,
                                            std::memory_order_acquire)) {
        continue;  // it finished meanwhile
      }
    }
    // Parked. The timeout lets us look at the thief's deques again now and
    // then, since nothing wakes us for the work that appears there.
    ++stats_.wait_parks;
    if (MOTE_UNLIKELY(instrumented())) note_park(true);
    event_word::commit_for(&t->state, task::kParked, idle.next_park_timeout());
    if (MOTE_UNLIKELY(instrumented())) note_park(false);
    std::uint32_t parked = task::kParked;
    t->state.compare_exchange_strong(parked, task::kRunning, std::memory_order_acq_rel,
                                     std::memory_order_acquire);
  }
}

// ---- Instrumentation: reached only when instrumented() -------------------

void worker::note_inlined(const char* site_name) noexcept {
  if (trace_ != nullptr) trace_->put(trace_kind::inlined, 1, site_name);
}

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
