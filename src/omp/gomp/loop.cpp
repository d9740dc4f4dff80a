// The worksharing loop over long (GOMP_loop_*, GOMP_parallel_loop_*): the edge
// between gcc's calls and mote::omp's loops (omp/worksharing.hpp).
//
// Every GOMP_loop_*_next takes the next chunk of whatever loop the thread is
// in: the loop remembers the schedule it was started with, so the name of
// the _next entry point gcc pairs with a _start one adds nothing.
#include <array>
#include <cstdint>
#include <vector>

#include "omp/gomp/abi.hpp"
#include "omp/worksharing.hpp"

namespace {

using mote::omp::loop_bounds;
using mote::omp::loop_flavour;
using mote::omp::monotonicity;
using mote::omp::schedule_kind;
using mote::omp::schedule_request;

// A chunk size as gcc passes it (0: none given; never negative in practice).
std::uint64_t chunk_of(long chunk) noexcept {
  return chunk > 0 ? static_cast<std::uint64_t>(chunk) : 0;
}

schedule_request request(schedule_kind kind, monotonicity mono, long chunk) noexcept {
  return {kind, mono, chunk_of(chunk)};
}

// GOMP_loop_start's `sched`: a GFS_* code with the monotonic bit. Without the
// bit, dynamic and guided are nonmonotonic (OpenMP 5's default); RUNTIME
// leaves the modifier to the run-sched-var ICV, and AUTO is how gcc spells
// schedule(nonmonotonic: runtime).
schedule_request request_of_code(long sched, long chunk) noexcept {
  const auto code = static_cast<unsigned long>(sched);
  const bool mono = (code & GFS_MONOTONIC) != 0;
  const monotonicity given = mono ? monotonicity::monotonic : monotonicity::nonmonotonic;
  switch (code & ~static_cast<unsigned long>(GFS_MONOTONIC)) {
    case GFS_STATIC:
      return request(schedule_kind::static_, monotonicity::monotonic, chunk);
    case GFS_DYNAMIC:
      return request(schedule_kind::dynamic, given, chunk);
    case GFS_GUIDED:
      return request(schedule_kind::guided, given, chunk);
    case GFS_AUTO:
      return request(schedule_kind::runtime, monotonicity::nonmonotonic, 0);
    default:
      return request(schedule_kind::runtime,
                     mono ? monotonicity::monotonic : monotonicity::unspecified, 0);
  }
}

bool give(bool got, std::uint64_t lo, std::uint64_t hi, long* istart, long* iend) noexcept {
  if (got) {
    *istart = static_cast<long>(lo);
    *iend = static_cast<long>(hi);
  }
  return got;
}

bool begin_loop(long start, long end, long incr, schedule_request s, loop_flavour f, long* istart,
                long* iend) {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  const bool got =
      mote::omp::loop_start(loop_bounds::of_long(start, end, incr), s, f, &lo, &hi, nullptr);
  return give(got, lo, hi, istart, iend);
}

// GOMP_loop_start and GOMP_loop_ordered_start: istart nullptr only enters the
// loop (gcc computes a static schedule itself and wants `mem`); reductions:
// `for reduction(task, ...)` (the taskgroup is closed by
// GOMP_workshare_task_reduction_unregister, after the loop's end).
bool start_full(long start, long end, long incr, long sched, long chunk, long* istart, long* iend,
                std::uintptr_t* reductions, void** mem, loop_flavour f) {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  const bool got =
      mote::omp::loop_start(loop_bounds::of_long(start, end, incr), request_of_code(sched, chunk),
                            f, istart != nullptr ? &lo : nullptr, &hi, mem, reductions);
  if (istart == nullptr) return got;
  return give(got, lo, hi, istart, iend);
}

bool next(long* istart, long* iend) {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  const bool got = mote::omp::loop_next(&lo, &hi);
  return give(got, lo, hi, istart, iend);
}

// A doacross loop's counts, as the unsigned values mote::omp takes.
class counts_copy {
 public:
  counts_copy(unsigned n, const long* counts) {
    std::uint64_t* out = small_.data();
    if (n > small_.size()) {
      large_.resize(n);
      out = large_.data();
    }
    for (unsigned i = 0; i < n; ++i) out[i] = static_cast<std::uint64_t>(counts[i]);
    data_ = out;
  }
  const std::uint64_t* data() const noexcept { return data_; }

 private:
  std::array<std::uint64_t, 8> small_{};
  std::vector<std::uint64_t> large_;
  const std::uint64_t* data_ = nullptr;
};

bool doacross(unsigned ncounts, const long* counts, schedule_request s, long* istart, long* iend,
              void** mem, std::uintptr_t* reductions) {
  const counts_copy c(ncounts, counts);
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  const bool got = mote::omp::loop_doacross_start(
      ncounts, c.data(), s, istart != nullptr ? &lo : nullptr, &hi, mem, reductions);
  if (istart == nullptr) return got;
  return give(got, lo, hi, istart, iend);
}

void parallel_loop(void (*fn)(void*), void* data, unsigned nthreads, long start, long end,
                   long incr, schedule_request s, unsigned flags) {
  mote::omp::parallel_loop(fn, data, nthreads, flags, loop_bounds::of_long(start, end, incr), s);
}

}  // namespace

extern "C" {

// ---- Starting a loop ---------------------------------------------------------------

MOTE_GOMP_EXPORT bool GOMP_loop_static_start(long start, long end, long incr, long chunk,
                                             long* istart, long* iend) {
  return begin_loop(start, end, incr,
                    request(schedule_kind::static_, monotonicity::monotonic, chunk),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_dynamic_start(long start, long end, long incr, long chunk,
                                              long* istart, long* iend) {
  return begin_loop(start, end, incr,
                    request(schedule_kind::dynamic, monotonicity::monotonic, chunk),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_guided_start(long start, long end, long incr, long chunk,
                                             long* istart, long* iend) {
  return begin_loop(start, end, incr,
                    request(schedule_kind::guided, monotonicity::monotonic, chunk),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_runtime_start(long start, long end, long incr, long* istart,
                                              long* iend) {
  return begin_loop(start, end, incr, request(schedule_kind::runtime, monotonicity::monotonic, 0),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_nonmonotonic_dynamic_start(long start, long end, long incr,
                                                           long chunk, long* istart, long* iend) {
  return begin_loop(start, end, incr,
                    request(schedule_kind::dynamic, monotonicity::nonmonotonic, chunk),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_nonmonotonic_guided_start(long start, long end, long incr,
                                                          long chunk, long* istart, long* iend) {
  return begin_loop(start, end, incr,
                    request(schedule_kind::guided, monotonicity::nonmonotonic, chunk),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_nonmonotonic_runtime_start(long start, long end, long incr,
                                                           long* istart, long* iend) {
  return begin_loop(start, end, incr,
                    request(schedule_kind::runtime, monotonicity::nonmonotonic, 0),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_maybe_nonmonotonic_runtime_start(long start, long end, long incr,
                                                                 long* istart, long* iend) {
  return begin_loop(start, end, incr, request(schedule_kind::runtime, monotonicity::unspecified, 0),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_start(long start, long end, long incr, long sched, long chunk,
                                      long* istart, long* iend, std::uintptr_t* reductions,
                                      void** mem) {
  return start_full(start, end, incr, sched, chunk, istart, iend, reductions, mem,
                    loop_flavour::plain);
}

// ---- Ordered loops -----------------------------------------------------------------

MOTE_GOMP_EXPORT bool GOMP_loop_ordered_static_start(long start, long end, long incr, long chunk,
                                                     long* istart, long* iend) {
  return begin_loop(start, end, incr,
                    request(schedule_kind::static_, monotonicity::monotonic, chunk),
                    loop_flavour::ordered, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ordered_dynamic_start(long start, long end, long incr, long chunk,
                                                      long* istart, long* iend) {
  return begin_loop(start, end, incr,
                    request(schedule_kind::dynamic, monotonicity::monotonic, chunk),
                    loop_flavour::ordered, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ordered_guided_start(long start, long end, long incr, long chunk,
                                                     long* istart, long* iend) {
  return begin_loop(start, end, incr,
                    request(schedule_kind::guided, monotonicity::monotonic, chunk),
                    loop_flavour::ordered, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ordered_runtime_start(long start, long end, long incr, long* istart,
                                                      long* iend) {
  return begin_loop(start, end, incr, request(schedule_kind::runtime, monotonicity::monotonic, 0),
                    loop_flavour::ordered, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ordered_start(long start, long end, long incr, long sched,
                                              long chunk, long* istart, long* iend,
                                              std::uintptr_t* reductions, void** mem) {
  return start_full(start, end, incr, sched, chunk, istart, iend, reductions, mem,
                    loop_flavour::ordered);
}

// ---- Doacross loops (ordered(n) with depend(sink) and depend(source)) --------------

MOTE_GOMP_EXPORT bool GOMP_loop_doacross_static_start(unsigned ncounts, long* counts, long chunk,
                                                      long* istart, long* iend) {
  return doacross(ncounts, counts, request(schedule_kind::static_, monotonicity::monotonic, chunk),
                  istart, iend, nullptr, nullptr);
}

MOTE_GOMP_EXPORT bool GOMP_loop_doacross_dynamic_start(unsigned ncounts, long* counts, long chunk,
                                                       long* istart, long* iend) {
  return doacross(ncounts, counts, request(schedule_kind::dynamic, monotonicity::monotonic, chunk),
                  istart, iend, nullptr, nullptr);
}

MOTE_GOMP_EXPORT bool GOMP_loop_doacross_guided_start(unsigned ncounts, long* counts, long chunk,
                                                      long* istart, long* iend) {
  return doacross(ncounts, counts, request(schedule_kind::guided, monotonicity::monotonic, chunk),
                  istart, iend, nullptr, nullptr);
}

MOTE_GOMP_EXPORT bool GOMP_loop_doacross_runtime_start(unsigned ncounts, long* counts, long* istart,
                                                       long* iend) {
  return doacross(ncounts, counts, request(schedule_kind::runtime, monotonicity::monotonic, 0),
                  istart, iend, nullptr, nullptr);
}

MOTE_GOMP_EXPORT bool GOMP_loop_doacross_start(unsigned ncounts, long* counts, long sched,
                                               long chunk, long* istart, long* iend,
                                               std::uintptr_t* reductions, void** mem) {
  return doacross(ncounts, counts, request_of_code(sched, chunk), istart, iend, mem, reductions);
}

// ---- The next chunk ----------------------------------------------------------------

MOTE_GOMP_EXPORT bool GOMP_loop_static_next(long* istart, long* iend) { return next(istart, iend); }
MOTE_GOMP_EXPORT bool GOMP_loop_dynamic_next(long* istart, long* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_guided_next(long* istart, long* iend) { return next(istart, iend); }
MOTE_GOMP_EXPORT bool GOMP_loop_runtime_next(long* istart, long* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_nonmonotonic_dynamic_next(long* istart, long* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_nonmonotonic_guided_next(long* istart, long* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_nonmonotonic_runtime_next(long* istart, long* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_maybe_nonmonotonic_runtime_next(long* istart, long* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_ordered_static_next(long* istart, long* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_ordered_dynamic_next(long* istart, long* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_ordered_guided_next(long* istart, long* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_ordered_runtime_next(long* istart, long* iend) {
  return next(istart, iend);
}

// ---- A parallel region that is one loop: every thread enters it before fn runs -----

MOTE_GOMP_EXPORT void GOMP_parallel_loop_static(void (*fn)(void*), void* data, unsigned nthreads,
                                                long start, long end, long incr, long chunk,
                                                unsigned flags) {
  parallel_loop(fn, data, nthreads, start, end, incr,
                request(schedule_kind::static_, monotonicity::monotonic, chunk), flags);
}

MOTE_GOMP_EXPORT void GOMP_parallel_loop_dynamic(void (*fn)(void*), void* data, unsigned nthreads,
                                                 long start, long end, long incr, long chunk,
                                                 unsigned flags) {
  parallel_loop(fn, data, nthreads, start, end, incr,
                request(schedule_kind::dynamic, monotonicity::monotonic, chunk), flags);
}

MOTE_GOMP_EXPORT void GOMP_parallel_loop_guided(void (*fn)(void*), void* data, unsigned nthreads,
                                                long start, long end, long incr, long chunk,
                                                unsigned flags) {
  parallel_loop(fn, data, nthreads, start, end, incr,
                request(schedule_kind::guided, monotonicity::monotonic, chunk), flags);
}

MOTE_GOMP_EXPORT void GOMP_parallel_loop_runtime(void (*fn)(void*), void* data, unsigned nthreads,
                                                 long start, long end, long incr, unsigned flags) {
  parallel_loop(fn, data, nthreads, start, end, incr,
                request(schedule_kind::runtime, monotonicity::monotonic, 0), flags);
}

MOTE_GOMP_EXPORT void GOMP_parallel_loop_nonmonotonic_dynamic(void (*fn)(void*), void* data,
                                                              unsigned nthreads, long start,
                                                              long end, long incr, long chunk,
                                                              unsigned flags) {
  parallel_loop(fn, data, nthreads, start, end, incr,
                request(schedule_kind::dynamic, monotonicity::nonmonotonic, chunk), flags);
}

MOTE_GOMP_EXPORT void GOMP_parallel_loop_nonmonotonic_guided(void (*fn)(void*), void* data,
                                                             unsigned nthreads, long start,
                                                             long end, long incr, long chunk,
                                                             unsigned flags) {
  parallel_loop(fn, data, nthreads, start, end, incr,
                request(schedule_kind::guided, monotonicity::nonmonotonic, chunk), flags);
}

MOTE_GOMP_EXPORT void GOMP_parallel_loop_nonmonotonic_runtime(void (*fn)(void*), void* data,
                                                              unsigned nthreads, long start,
                                                              long end, long incr, unsigned flags) {
  parallel_loop(fn, data, nthreads, start, end, incr,
                request(schedule_kind::runtime, monotonicity::nonmonotonic, 0), flags);
}

MOTE_GOMP_EXPORT void GOMP_parallel_loop_maybe_nonmonotonic_runtime(void (*fn)(void*), void* data,
                                                                    unsigned nthreads, long start,
                                                                    long end, long incr,
                                                                    unsigned flags) {
  parallel_loop(fn, data, nthreads, start, end, incr,
                request(schedule_kind::runtime, monotonicity::unspecified, 0), flags);
}

// ---- The end of a loop -------------------------------------------------------------

MOTE_GOMP_EXPORT void GOMP_loop_end() { mote::omp::loop_end(); }
MOTE_GOMP_EXPORT void GOMP_loop_end_nowait() { mote::omp::loop_end_nowait(); }
MOTE_GOMP_EXPORT bool GOMP_loop_end_cancel() { return mote::omp::loop_end_cancel(); }

}  // extern "C"
