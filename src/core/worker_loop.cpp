// The worker loop: find work, run it; spin, then park when there is none.
// docs/design.md ("The event count") has the protocol.
#include <sched.h>

#include <cstdio>
#include <exception>
#include <memory>

#include "mote/topology.hpp"
#include "mote/trace.hpp"
#include "wait/idle.hpp"
#include "core/runtime_impl.hpp"
#include "wait/event_count.hpp"

namespace mote::detail {

bool runtime_impl::help_once(worker& self) noexcept {
  // An attached source is polled between tasks once its interval has passed.
  if (MOTE_UNLIKELY(source_.attached())) source_.poll_if_due();
  // Urgent tasks before the worker's own pool, whose newest-first order
  // would leave them under the tasks readied after them.
  if (MOTE_UNLIKELY(urgent_waiting())) {
    if (task* t = take_urgent()) {
      self.run_task(t, nullptr);
      return true;
    }
  }
  if (task* t = self.pool().pop_any()) {
    self.run_task(t, nullptr);
    return true;
  }
  // The policy's own queue (under delegation, where spawns and data-flow
  // tasks wait; its own pool above is then a fallback only).
  if (task* t = policy_->take(self)) {
    self.run_task(t, nullptr);
    return true;
  }
  // Relaxed: a stale zero only delays the pick-up to the next look; the mutex
  // in take_injected() orders the task's contents.
  if (inject_count_.load(std::memory_order_relaxed) != 0) {
    if (task* t = take_injected()) {
      ++self.stats().injected;
      self.run_task(t, nullptr);
      return true;
    }
  }
  // An attached source (as a model's work, but also with one worker).
  if (MOTE_UNLIKELY(source_.attached()) && source_.poll_idle()) return true;
  const auto n = static_cast<unsigned>(workers_.size());
  if (n < 2) return false;
  // The models' work (open loops) before stealing: their batches are the
  // work others wait for.
  if (models_.help(self)) return true;
  const unsigned start = static_cast<unsigned>(self.next_random() % n);
  for (unsigned k = 0; k < n; ++k) {
    const unsigned v = (start + k) % n;
    if (v == self.index()) continue;
    task_group* context = nullptr;
    if (task* t = self.steal_from(*workers_[v], &context)) {
      self.run_task(t, context);
      return true;
    }
  }
  // Nothing shared anywhere. Now and then (the clock costs a look or two),
  // take the private tasks of an owner that has not answered a request for
  // split_deque::kForceAfterNs: it is computing, blocked or asleep.
  if (self.rescue_due()) return rescue(self, now_ns());
  return false;
}

bool runtime_impl::help_or_rescue(worker& self) noexcept {
  if (help_once(self)) return true;
  return workers_.size() > 1 && rescue(self, now_ns());
}

bool runtime_impl::rescue(worker& self, std::int64_t now) noexcept {
  const auto n = static_cast<unsigned>(workers_.size());
  const unsigned start = static_cast<unsigned>(self.next_random() % n);
  for (unsigned k = 0; k < n; ++k) {
    worker& victim = *workers_[(start + k) % n];
    if (&victim == &self || !self.rescue_from(victim, now)) continue;
    task_group* context = nullptr;
    if (task* t = self.steal_from(victim, &context)) {
      self.run_task(t, context);
      return true;
    }
  }
  return false;
}

bool runtime_impl::work_visible_else_ask(worker& self, bool* stranded, bool* others_awake) noexcept {
  // seq_cst, both counts: the look of the event count's pair with their
  // stores (schedule_urgent, inject).
  if (urgent_count_.load(std::memory_order_seq_cst) != 0) return true;
  if (inject_count_.load(std::memory_order_seq_cst) != 0) return true;
  // The policy's queue, then the models' work (seq_cst loads that pair
  // with their publication of work: scheduler::visible, model_hooks::visible).
  if (policy_->visible(self)) return true;
  if (models_.visible(self)) return true;
  bool found = false;
  // Relaxed: whether the seat is occupied only tunes the sleep's timeout.
  const bool empty_seat = config_.caller_seat && !seat_taken_.load(std::memory_order_relaxed);
  for (auto& w : workers_) {
    if (w.get() == &self) continue;
    // Visit all, every deque: each one without shared tasks is asked to share.
    if (w->frames().has_shared_else_ask(stranded)) found = true;
    if (w->pool().has_shared_else_ask(stranded)) found = true;
    if (w->kept().has_shared_else_ask(stranded)) found = true;
    // Relaxed: a hint for the sleep's timeout (an empty seat's word stays
    // awake, and nobody runs there).
    if (w->park_word().load(std::memory_order_relaxed) == waiter_slot::kAwake &&
        !(empty_seat && w->index() == 0)) {
      *others_awake = true;
    }
  }
  return found;
}

bool runtime_impl::park(worker& self, std::int64_t* stranded_timeout_ns, bool* for_source) noexcept {
  std::atomic<std::uint32_t>& word = self.park_word();
  *for_source = false;
  // A waiter_slot of the event count (wait/event_count.hpp has the argument):
  // announce, then the last look for work and for stop_, against
  // notify_one()'s and the destructor's seq_cst publication and look. The
  // announcement says too that the sleep will have no timeout unless the
  // look finds a reason for one (kept_appeared() is the notifier of that
  // part; prepare's fence orders both counts before the look). Relaxed: see
  // there.
  self.untimed_flag().store(true, std::memory_order_relaxed);
  untimed_sleepers_.fetch_add(1, std::memory_order_relaxed);
  waiter_slot::prepare(word, &idle_sleepers_);
  bool stranded = false;
  bool others_awake = false;
  if (!stop_.load(std::memory_order_seq_cst) && !work_visible_else_ask(self, &stranded, &others_awake)) {
    // Returns false at once when a notifier cancelled the announcement
    // (wake_one found nobody asleep and chose us): then look again.
    trace_buffer* trace = self.trace();
    // With a source's work outstanding, a timed sleep: nothing wakes us when
    // it completes. With private tasks on another worker, a timed sleep too:
    // their owner wakes us when it shares them (its next push, or before it
    // blocks), but not if it computes on without pushing, or keeps them
    // (split_deque::keep); then we take them (rescue) once the sleep is
    // over. That timeout doubles while each rescue finds the owner still
    // answering, up to idle_wait's last one. And while another worker is
    // awake, the sleep ends after that last one at the latest: the request
    // protocol's relaxed looks may miss tasks made private just after this
    // look. Only a runtime whose workers all sleep sleeps without a bound.
    const std::int64_t source_limit = source_.sleep_limit_ns();
    std::int64_t limit = source_limit;
    std::int64_t watch = -1;
    if (stranded) {
      watch = *stranded_timeout_ns;
      if (*stranded_timeout_ns < idle_wait::kLastParkNs) *stranded_timeout_ns *= 2;
    } else if (others_awake) {
      watch = idle_wait::kLastParkNs;
    }
    if (watch >= 0 && (limit < 0 || watch < limit)) limit = watch;
    // The source's sleep bounds this one: poll once after it, then sleep
    // again (the caller skips the spin window).
    *for_source = source_limit >= 0 && limit == source_limit;
    if (limit >= 0) untimed_done(self);
    const bool slept = limit >= 0 ? waiter_slot::commit_for(word, limit) : waiter_slot::commit(word, [&] {
      ++self.stats().parks;
      if (MOTE_UNLIKELY(trace != nullptr)) trace->put(trace_kind::park_begin);
    });
    if (MOTE_UNLIKELY(slept && trace != nullptr)) trace->put(trace_kind::park_end);
  }
  waiter_slot::retire(word, &idle_sleepers_);
  untimed_done(self);
  return stranded || others_awake;
}

void runtime_impl::untimed_done(worker& self) noexcept {
  // Relaxed: a notifier that still sees the flag spends a look (and at worst
  // a wake-up) on a worker that is looking anyway.
  if (self.untimed_flag().load(std::memory_order_relaxed)) {
    self.untimed_flag().store(false, std::memory_order_relaxed);
    untimed_sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }
}

void runtime_impl::wake_untimed() noexcept {
  for (auto& w : workers_) {
    // Relaxed flag: the seq_cst look at the word below is what the
    // event count's argument uses (kept_appeared's fence is Y).
    if (!w->untimed_flag().load(std::memory_order_relaxed)) continue;
    if (waiter_slot::cancel_or_wake(w->park_word(), waiter_slot::state_seq_cst(w->park_word()))) return;
  }
}

void runtime_impl::park_waiting(worker& self, bool (*done)(const void*), const void* ctx,
                                std::int64_t timeout_ns) noexcept {
  std::atomic<std::uint32_t>& word = self.park_word();
  // As park(), and done() is part of the look: the group's last count-down
  // is the notifier (wake_parked). One timed sleep: the caller looks again
  // after any return (woken, timed out, cancelled or spurious), and its
  // looks (help_once) take stranded tasks in time.
  waiter_slot::prepare(word, &idle_sleepers_);
  bool stranded = false;
  bool others_awake = false;
  if (!done(ctx) && !work_visible_else_ask(self, &stranded, &others_awake)) waiter_slot::commit_for(word, timeout_ns);
  waiter_slot::retire(word, &idle_sleepers_);
  // Woken: the seat's occupant may wake where a worker is pinned.
  if (MOTE_UNLIKELY(config_.seat_cpu >= 0) && &self == workers_[0].get()) keep_seat_apart();
}

void runtime_impl::wake_parked(std::atomic<std::uint32_t>& word) noexcept {
  // The event count's notify (with its fence): cancel the announcement, or
  // wake the worker if it committed.
  waiter_slot::notify(word);
}

void runtime_impl::wake_one() noexcept {
  // Which sleeper: for a thread outside the runtime (runtime::run, an outside
  // spawn), the one pinned to the CPU the caller runs on, if it sleeps. Such
  // a caller usually blocks right after handing in work, and handing its CPU
  // to a thread there is a local wake-up, while waking a halted CPU takes an
  // inter-processor interrupt: on the virtual machine of the benchmark report
  // that is the difference between a median of about 10 us and 1-8 us from
  // submit to start. From a worker: the ones after it, round the ring.
  //
  // Only a worker asleep on its futex is worth a wake-up. One that has
  // announced but not yet committed is looking for work right now; it is
  // chosen only when nobody sleeps, by cancelling its announcement (its
  // commit CAS then fails and it looks again). A worker that is awake, or was
  // woken already, is never chosen: a wake-up is not spent twice.
  worker* const me = current_worker;
  const bool outside = me == nullptr || &me->runtime() != this;
  const int here = outside && !config_.worker_cpus.empty() ? sched_getcpu() : -1;
  const auto n = static_cast<unsigned>(workers_.size());
  const unsigned start = outside ? 0 : me->index() + 1;
  worker* announced = nullptr;
  for (int pass = here >= 0 ? 0 : 1; pass < 2; ++pass) {
    for (unsigned k = 0; k < n; ++k) {
      const unsigned i = (start + k) % n;
      if (pass == 0 && config_.worker_cpus[i] != here) continue;
      worker& w = *workers_[i];
      // Look before the CAS, so that awake workers' lines stay put. The
      // seq_cst look of the event count (its argument: the publication that
      // notifies is seq_cst).
      const std::uint32_t state = waiter_slot::state_seq_cst(w.park_word());
      if (waiter_slot::wake_sleeper(w.park_word(), state)) return;
      if (state == waiter_slot::kAnnounced && announced == nullptr) announced = &w;
    }
  }
  if (announced != nullptr) waiter_slot::cancel_or_wake(announced->park_word(), waiter_slot::kAnnounced);
}

bool runtime_impl::wake_idle(worker& w) noexcept {
  // The seq_cst look of the event count (its argument: the caller's
  // publication of work was seq_cst); an announced worker looks again
  // instead of sleeping.
  return waiter_slot::cancel_or_wake(w.park_word(), waiter_slot::state_seq_cst(w.park_word()));
}

void runtime_impl::wake_all() noexcept {
  // After the caller's seq_cst store of stop_.
  for (auto& w : workers_) waiter_slot::notify_always(w->park_word());
}

void runtime_impl::worker_main(unsigned index) {
  worker& self = *workers_[index];
  {
    // Against place_workers(): either it sees this thread and pins it, or
    // this reads the CPU it chose.
    std::lock_guard<std::mutex> lock(placement_mutex_);
    const int cpu = config_.worker_cpus.empty() ? -1 : config_.worker_cpus[index];
    if (cpu >= 0) pin_current_thread(cpu);
  }
  current_worker = &self;
  // The models' per-thread state (a worker's assistant).
  models_.thread_begin(self);

  const bool timed = self.instrumented();
  if (timed) self.stats().started_ns = now_ns();
  idle_wait idle(spin_ns_);
  std::int64_t idle_from = 0;
  std::int64_t stranded_timeout = split_deque::kForceAfterNs;
  // The last park was bounded by the attached source's sleep: the look after
  // it (help_once, which polls) is all there is before the next park. A
  // spin window after every such sleep would poll on for the whole window
  // each time: an idle runtime with work outstanding would never be idle.
  bool after_source_sleep = false;
  for (;;) {
    if (help_once(self)) {
      if (timed && idle_from != 0) {
        self.stats().idle_ns += now_ns() - idle_from;
        idle_from = 0;
      }
      idle.reset();
      stranded_timeout = split_deque::kForceAfterNs;
      after_source_sleep = false;
      continue;
    }
    if (stop_.load(std::memory_order_acquire)) break;
    if (timed && idle_from == 0) idle_from = now_ns();
    // Probes come every few pauses (a few hundred nanoseconds at most): a
    // task shared for a thief lasts only until its owner's next pop, which
    // for sub-microsecond tasks is soon. Reading victims' words that do not
    // change costs no coherence traffic.
    if (!after_source_sleep && idle.spin()) continue;
    if (park(self, &stranded_timeout, &after_source_sleep)) {
      // A timed sleep while another worker held private tasks or was awake:
      // take those tasks now if their owner still has not answered, else
      // sleep again at once (the spin window is spent; the timeout has
      // doubled).
      if (!stop_.load(std::memory_order_acquire) && rescue(self, now_ns())) {
        idle.reset();
        stranded_timeout = split_deque::kForceAfterNs;
      }
      continue;
    }
    if (!after_source_sleep) idle.reset();
    // After a park or a stop: look again (drain, then leave above).
  }
  if (timed) {
    if (idle_from != 0) self.stats().idle_ns += now_ns() - idle_from;
    self.stats().ended_ns = now_ns();
  }
  models_.thread_end(self);
  current_worker = nullptr;
}

}  // namespace mote::detail
