// A worker's own side: join's wait for a stolen partner, stealing, running
// tasks taken from elsewhere and the event hooks.
#include "mote/detail/worker.hpp"

#include <algorithm>
#include <cassert>

#include "mote/detail/queue_wait.hpp"
#include "mote/trace.hpp"
#include "wait/idle.hpp"
#include "core/runtime_impl.hpp"
#include "wait/event_count.hpp"

namespace mote::detail {

constinit thread_local worker* current_worker __attribute__((tls_model("initial-exec"))) = nullptr;

worker::worker(runtime_impl& rt, unsigned index, std::uint32_t capacity, std::uint32_t instrument,
               trace_buffer* trace)
    : frames_(&rt, capacity),
      pool_(&rt, capacity),
      kept_(&rt, kKeptCapacity, split_deque::on_request::acknowledge),
      runtime_(&rt),
      index_(index),
      instrument_(instrument),
      rng_(0x9E3779B97F4A7C15ull * (index + 1)),
      trace_(trace),
      cache_(&rt, &rt.record_spill()) {
  pool_.set_kept(&kept_);
}

worker::~worker() = default;

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

task* worker::steal_from(worker& victim, task_group** context, bool batch) noexcept {
  std::uint32_t index = 0;
  std::uint32_t stolen = 1;  // tasks taken (a batch counts each)
  task* t = victim.frames_.steal(*this, &index);
  if (t != nullptr) {
    // A join's branch: it runs inside the group its spawner was in.
    *context = victim.group_of_frame(index);
  } else {
    // A batch (runtime_impl::steal_batch(); one when the caller waits for
    // a join's thief, or the pool is nearly full): the first runs here, the
    // others go on this worker's pool, newest on top, where this worker
    // takes them next and thieves find them as any of its tasks.
    task* taken[kMaxStealBatch];
    std::uint32_t max = batch ? runtime_->steal_batch() : 1;
    if (max > pool_.room()) max = 1;
    const std::uint32_t k = victim.pool_.steal_batch(*this, taken, max);
    t = k != 0 ? taken[0] : nullptr;
    stolen = k != 0 ? k : 1;
    for (std::uint32_t i = k; i-- > 1;) {
      // Room was checked above: only this worker pushes on its pool.
      const bool pushed = pool_.push(taken[i]);
      assert(pushed);
      (void)pushed;
    }
    // A kept task is shared only when its owner went quiet (force_share) or
    // published before blocking: rare, so asked last.
    if (t == nullptr) t = victim.kept_.steal(*this, &index);
    // A pooled task: it enters its own group when it runs.
    *context = nullptr;
  }
  // The bookkeeping comes after the steal marked the slot: the owner may be
  // waiting for that mark.
  if (t != nullptr) {
    stats_.steals += stolen;
    if (MOTE_UNLIKELY(trace_ != nullptr)) trace_->put(trace_kind::steal, victim.index_);
  } else {
    ++stats_.failed_steals;
    if (MOTE_UNLIKELY(trace_ != nullptr)) trace_->put(trace_kind::failed_steal, victim.index_);
  }
  return t;
}

bool worker::rescue_from(worker& victim, std::int64_t now) noexcept {
  bool shared = false;
  if (victim.frames_.request_overdue(now) && victim.frames_.force_share(now)) shared = true;
  if (victim.pool_.request_overdue(now) && victim.pool_.force_share(now)) shared = true;
  if (victim.kept_.request_overdue(now) && victim.kept_.force_share(now)) shared = true;
  return shared;
}

void publish_worker_work() noexcept {
  if (worker* w = current_worker) w->publish_own();
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
      if (task* x = steal_from(thief, &context, false)) {
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
        if (task* x = runtime_->policy().take(*this)) {
          run_task(x, nullptr);
          idle.reset();
          continue;
        }
      }
      // The thief may be holding tasks it does not share (a long leaf of
      // t's subtree, a lock): take them after its request went unanswered.
      if (rescue_due() && rescue_from(thief, now_ns())) {
        idle.reset();
        continue;
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
