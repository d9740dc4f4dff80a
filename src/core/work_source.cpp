// An attached work source (include/mote/detail/work_source.hpp): when the
// workers poll it, and help_until, the wait that keeps a worker running tasks
// while something outside the runtime completes.
#include "core/work_source.hpp"

#include <algorithm>

#include "mote/error.hpp"
#include "mote/runtime.hpp"
#include "mote/trace.hpp"
#include "wait/idle.hpp"
#include "core/runtime_impl.hpp"

namespace mote::detail {

namespace {
// The cycle counter's reading before which poll_if_due on this thread does
// not look at the poll clock (half a polling interval in ticks after its last look).
constinit thread_local std::uint64_t tl_next_look __attribute__((tls_model("initial-exec"))) = 0;
// poll_after_task(): the next poll_if_due on this thread polls.
constinit thread_local bool tl_poll_soon __attribute__((tls_model("initial-exec"))) = false;
}  // namespace

work_source* work_source_slot::enter() noexcept {
  // seq_cst both, against detach()'s seq_cst store of nullptr and load of
  // users_ (a Dekker pair): either detach sees this count and waits for
  // leave(), or this load sees nullptr and calls nothing.
  users_.fetch_add(1, std::memory_order_seq_cst);
  work_source* s = source_.load(std::memory_order_seq_cst);
  if (s == nullptr) leave();
  return s;
}

void work_source_slot::leave() noexcept {
  // Release: what the source's function did happens before detach()'s
  // acquire load that sees the count drop, so before the source is freed.
  users_.fetch_sub(1, std::memory_order_release);
}

bool work_source_slot::poll(work_source* s, bool busy) noexcept {
  // Relaxed: a timestamp that only spaces polls out; two workers that both
  // read an old one poll twice, which the source tolerates (it serialises
  // itself).
  last_poll_ns_.store(now_ns(), std::memory_order_relaxed);
  return s->poll(s->ctx, busy);
}

void work_source_slot::poll_soon() noexcept { tl_poll_soon = true; }

void work_source_slot::poll_if_due() noexcept {
  if (MOTE_UNLIKELY(tl_poll_soon)) {
    // The task just run started a transfer: poll now, as a busy worker.
    tl_poll_soon = false;
    if (work_source* s = enter()) {
      (void)poll(s, true);
      leave();
    }
    return;
  }
  // By time, not by tasks: a count of tasks between looks spaced them by the
  // tasks' length (8 tasks of 50 us kept a halo that had arrived unseen for
  // 400 us). The cycle counter (trace_clock) costs about 10 ns here. Its
  // ticks are taken for nanoseconds: a counter of 1 GHz or more (every x86
  // this runs on; the clock itself elsewhere) then looks at the clock at
  // least every half interval, and one of 3 GHz every sixth.
  const std::uint64_t now = trace_clock();
  if (now < tl_next_look) return;
  work_source* s = enter();
  if (s == nullptr) return;
  tl_next_look = now + static_cast<std::uint64_t>(s->interval_ns) / 2;
  // Relaxed: see poll().
  if (now_ns() - last_poll_ns_.load(std::memory_order_relaxed) >= s->interval_ns) (void)poll(s, true);
  leave();
}

bool work_source_slot::poll_idle() noexcept {
  work_source* s = enter();
  if (s == nullptr) return false;
  const bool progressed = poll(s, false);
  leave();
  return progressed;
}

std::int64_t work_source_slot::sleep_limit_ns() noexcept {
  if (!attached()) return -1;
  work_source* s = enter();
  if (s == nullptr) return -1;
  const std::int64_t limit = s->sleep_ns(s->ctx);
  leave();
  return limit < 0 ? -1 : std::max<std::int64_t>(limit, 1);
}

void work_source_slot::attach(work_source* s) {
  if (s == nullptr || s->poll == nullptr || s->sleep_ns == nullptr || s->interval_ns <= 0) {
    throw usage_error("mote::detail::attach_work_source: the source needs poll, sleep_ns and an interval > 0");
  }
  work_source* expected = nullptr;
  // Release: the source's fields (and what ctx points to) are complete for a
  // worker whose enter() loads the pointer.
  if (!source_.compare_exchange_strong(expected, s, std::memory_order_release, std::memory_order_relaxed)) {
    throw usage_error("mote::detail::attach_work_source: the runtime has a work source attached already");
  }
}

void work_source_slot::detach(work_source* s) noexcept {
  work_source* expected = s;
  // seq_cst: the other half of enter()'s Dekker pair.
  if (!source_.compare_exchange_strong(expected, nullptr, std::memory_order_seq_cst, std::memory_order_relaxed)) {
    return;  // not the attached one
  }
  // Acquire: pairs with leave()'s release. A poll lasts microseconds: yield
  // rather than sleep.
  while (users_.load(std::memory_order_seq_cst) != 0) thread_yield();
  std::atomic_thread_fence(std::memory_order_acquire);
}

void attach_work_source(runtime& rt, work_source* s) {
  runtime_impl& impl = runtime_access::impl(rt);
  impl.source().attach(s);
  impl.note_source(true);
}

void detach_work_source(runtime& rt, work_source* s) noexcept {
  runtime_impl& impl = runtime_access::impl(rt);
  impl.source().detach(s);
  impl.note_source(impl.source().attached());
}

void source_work_added(runtime& rt) noexcept {
  // The event count's notifier half: the caller's publication was seq_cst,
  // and notify_one's look at the sleepers is a seq_cst load.
  runtime_access::impl(rt).notify_one();
}

bool place_workers(runtime& rt, const std::vector<int>& cpus) { return runtime_access::impl(rt).place_workers(cpus); }

void poll_after_task() noexcept {
  worker* w = current_worker;
  if (w != nullptr && w->runtime().source().attached()) work_source_slot::poll_soon();
}

void help_until(worker& w, bool (*done)(const void* ctx) noexcept, const void* ctx, unsigned trace_what) noexcept {
  if (done(ctx)) return;
  runtime_impl& rt = w.runtime();
  const bool traced = w.instrumented() && trace_what != 0;
  if (MOTE_UNLIKELY(traced)) w.note_wait_begin(trace_what);
  idle_wait idle(rt.spin_ns());
  while (!done(ctx)) {
    if (rt.help_once(w)) {  // which polls the source too
      idle.reset();
      continue;
    }
    if (idle.spin()) continue;
    // Nothing wakes this sleep when a source's work completes (the poll that
    // sees it may be our own, after the sleep): at most the source's sleep.
    const std::int64_t limit = rt.source().sleep_limit_ns();
    const std::int64_t timeout = limit > 0 ? limit : idle.next_park_timeout();
    ++w.stats().wait_parks;
    if (MOTE_UNLIKELY(w.instrumented())) w.note_park(true);
    rt.park_waiting(w, done, ctx, timeout);
    if (MOTE_UNLIKELY(w.instrumented())) w.note_park(false);
  }
  if (MOTE_UNLIKELY(traced)) w.note_wait_end();
}

void wake_waiting(worker& w) noexcept { runtime_impl::wake_parked(w.park_word()); }

}  // namespace mote::detail
