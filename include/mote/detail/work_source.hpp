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
//   static bool pending(void* ctx) noexcept { return has_requests(ctx); }
//   mote::detail::work_source src{&poll, &pending, &state, 50'000};
//   mote::detail::attach_work_source(rt, &src);
//   ...
//   mote::detail::detach_work_source(rt, &src);   // no poll runs after it returns
#pragma once

#include <cstdint>

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
  // Is anything outstanding? The last look of a worker about to sleep: when
  // true it sleeps at most interval_ns, to poll again, since nothing will
  // wake it when the outstanding work completes. Must be cheap.
  bool (*pending)(void* ctx) noexcept;
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

// Runs other tasks of the calling worker's runtime until done(ctx) is true,
// as a join whose partner was stolen does: its own pool, the policy's queue,
// injected work, the attached source, steals. With nothing to run it spins,
// then sleeps at most the source's interval (or idle_wait's doubling timeout
// without a source) and looks again; wake_waiting() cuts a sleep short.
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
