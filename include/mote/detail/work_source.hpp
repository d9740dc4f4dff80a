// A source of work that a library outside libmote attaches to a runtime while
// it runs: the runtime's idle workers poll it, and a busy worker polls it at a
// bounded interval between tasks. mote's MPI layer (libmote_mpi,
// include/mote/mpi.hpp) is the user: its poll tests the pending requests and
// fulfils what completed. The core learns nothing about what is polled.
//
// Why a run-time attachment and not a model (core/extension.hpp): the models
// are compiled into libmote and listed once; a separate library, loaded only
// by programs that use it, cannot add itself to that list. Why a plain struct
// of function pointers and not a virtual class: the check between tasks reads
// one pointer and, when a source is attached, one field (interval_ns), and the
// struct is an ABI the two libraries share without a vtable layout.
//
// One source per runtime: a program uses one transport; a second attach is a
// usage_error.
//
//   static bool poll(void* ctx, bool busy) noexcept { return progress(ctx); }
//   static std::int64_t sleep_ns(void* ctx) noexcept { return has_requests(ctx) ? 50'000 : -1; }
//   mote::detail::work_source src{&poll, &sleep_ns, &state, 50'000};
//   mote::detail::attach_work_source(rt, &src);
//   ...
//   mote::detail::detach_work_source(rt, &src);   // no poll runs after it returns
#pragma once

#include <cstdint>
#include <vector>

#include "mote/export.hpp"

namespace mote {
class runtime;
}  // namespace mote

namespace mote::detail {

class worker;

struct work_source {
  // Makes progress: true when it did some (completed something, readied a
  // task). busy: called by a worker between tasks because the interval had
  // passed (keep it short), rather than by an idle one. Any worker thread,
  // possibly several at once: the source serialises itself if it must (a
  // try-lock that lets the others go on is what the MPI layer does).
  bool (*poll)(void* ctx, bool busy) noexcept;
  // Is anything outstanding, and for how long may an idle worker sleep
  // before it polls again? -1: nothing is outstanding (sleep until woken);
  // otherwise nanoseconds (> 0): nothing wakes a sleeping worker when the
  // outstanding work completes, so it wakes at most that late, polls once
  // and, if that found nothing, sleeps again without spinning. A source
  // whose work has been outstanding long without progress answers longer
  // sleeps: an idle runtime's polling stays bounded. The last look of a
  // worker about to sleep (after its announcement's seq_cst fence; see
  // source_work_added): must be cheap.
  std::int64_t (*sleep_ns)(void* ctx) noexcept;
  void* ctx;
  // How long workers may go without a poll while there is work outstanding
  // (> 0).
  std::int64_t interval_ns;
};

// Attaches s to rt: from now on rt's workers poll it. s must stay valid until
// detach_work_source returns. Throws usage_error when rt has a source already
// or s->interval_ns <= 0. Any thread.
MOTE_API void attach_work_source(runtime& rt, work_source* s);
// Detaches s (if it is rt's source) and waits until no worker is inside one
// of its functions. Any thread but a worker of rt that is itself inside s's
// poll (it would wait for itself).
MOTE_API void detach_work_source(runtime& rt, work_source* s) noexcept;

// Work became outstanding from a thread that is not a worker of rt (whose
// workers may all sleep without a timeout, having seen nothing outstanding):
// wakes one of rt's sleeping workers, which polls and then sleeps at most
// the source's sleep_ns. Call after the seq_cst store (or read-modify-write)
// that makes sleep_ns answer >= 0: the Dekker pair with a worker's last look
// before its sleep (docs/design.md, "The event count"). Any thread.
//
//   outstanding.fetch_add(1, std::memory_order_seq_cst);
//   if (!on_a_worker_of(rt)) mote::detail::source_work_added(rt);
MOTE_API void source_work_added(runtime& rt) noexcept;

// The calling worker polls its runtime's source before it looks for its
// next task (busy = true), whatever the interval: the task it runs started
// a transfer that a poll moves on (a rendezvous answered, a completion seen
// and its successors released). A worker thread of the runtime the source
// is attached to; elsewhere it does nothing.
//
//   MPI_Isend(...); hand_to_source(r); mote::detail::poll_after_task();
MOTE_API void poll_after_task() noexcept;

// Pins rt's workers onto cpus in turn (wrapping around), as a binding list
// given when rt was made would have (runtime::worker_cpus() reports them):
// for a library that learns where its process should run after the runtime
// was made (mote::mpi places each rank on its share of the node). False,
// changing nothing, when rt's binding was chosen (runtime_options::bind,
// MOTE_BIND) or cpus is empty; false too when the kernel refused a CPU.
// Not while a thread outside rt hands it work.
//
//   mote::detail::place_workers(rt, {2, 3});   // workers on CPUs 2, 3, 2, ...
MOTE_API bool place_workers(runtime& rt, const std::vector<int>& cpus);

// Runs other tasks of the calling worker's runtime until done(ctx) is true,
// as a join whose partner was stolen does: its own pool, the policy's queue,
// injected work, the attached source, steals. With nothing to run it spins,
// then sleeps at most the source's sleep_ns (or idle_wait's doubling timeout
// without a source, or with nothing outstanding) and looks again;
// wake_waiting() cuts a sleep short. A worker of a runtime without the
// source waits the same way for a done() that a worker of the source's
// runtime makes true (and wakes it with wake_waiting).
// Worker threads only (w is the calling thread's worker). trace_what: the
// wait's kind in the trace (wait_begin's aux; 0 for none).
//
//   while (!flag) ...   // becomes
//   mote::detail::help_until(*mote::detail::current_worker,
//                            [](const void* f) { return *static_cast<const bool*>(f); }, &flag, 4);
MOTE_API void help_until(worker& w, bool (*done)(const void* ctx) noexcept, const void* ctx,
                         unsigned trace_what) noexcept;
// Wakes w if it sleeps in help_until (after the store that makes its done()
// true), or makes its sleep return at once if it is about to sleep. Any
// thread.
MOTE_API void wake_waiting(worker& w) noexcept;

}  // namespace mote::detail
