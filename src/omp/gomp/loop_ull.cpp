// The worksharing loop over unsigned long long (GOMP_loop_ull_*): as loop.cpp,
// with the direction given by the `up` flag and a downward step passed as its
// two's complement.
#include <array>
#include <cstdint>
#include <vector>

#include "omp/gomp/abi.hpp"
#include "omp/worksharing.hpp"

namespace {

using ull = unsigned long long;
using mote::omp::loop_bounds;
using mote::omp::loop_flavour;
using mote::omp::monotonicity;
using mote::omp::schedule_kind;
using mote::omp::schedule_request;

schedule_request request(schedule_kind kind, monotonicity mono, ull chunk) noexcept {
  return {kind, mono, chunk};
}

// GOMP_loop_ull_start's `sched`: as GOMP_loop_start's (loop.cpp).
schedule_request request_of_code(long sched, ull chunk) noexcept {
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

bool give(bool got, std::uint64_t lo, std::uint64_t hi, ull* istart, ull* iend) noexcept {
  if (got) {
    *istart = lo;
    *iend = hi;
  }
  return got;
}

bool begin_loop(bool up, ull start, ull end, ull incr, schedule_request s, loop_flavour f,
                ull* istart, ull* iend) {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  const bool got =
      mote::omp::loop_start(loop_bounds::of_ull(up, start, end, incr), s, f, &lo, &hi, nullptr);
  return give(got, lo, hi, istart, iend);
}

bool start_full(bool up, ull start, ull end, ull incr, long sched, ull chunk, ull* istart,
                ull* iend, std::uintptr_t* reductions, void** mem, loop_flavour f) {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  const bool got = mote::omp::loop_start(loop_bounds::of_ull(up, start, end, incr),
                                         request_of_code(sched, chunk), f,
                                         istart != nullptr ? &lo : nullptr, &hi, mem, reductions);
  if (istart == nullptr) return got;
  return give(got, lo, hi, istart, iend);
}

bool next(ull* istart, ull* iend) {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  const bool got = mote::omp::loop_next(&lo, &hi);
  return give(got, lo, hi, istart, iend);
}

bool doacross(unsigned ncounts, const ull* counts, schedule_request s, ull* istart, ull* iend,
              void** mem, std::uintptr_t* reductions) {
  std::array<std::uint64_t, 8> small{};
  std::vector<std::uint64_t> large;
  std::uint64_t* c = small.data();
  if (ncounts > small.size()) {
    large.resize(ncounts);
    c = large.data();
  }
  for (unsigned i = 0; i < ncounts; ++i) c[i] = counts[i];
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  const bool got = mote::omp::loop_doacross_start(ncounts, c, s, istart != nullptr ? &lo : nullptr,
                                                  &hi, mem, reductions);
  if (istart == nullptr) return got;
  return give(got, lo, hi, istart, iend);
}

}  // namespace

extern "C" {

// ---- Starting a loop ---------------------------------------------------------------

MOTE_GOMP_EXPORT bool GOMP_loop_ull_static_start(bool up, ull start, ull end, ull incr, ull chunk,
                                                 ull* istart, ull* iend) {
  return begin_loop(up, start, end, incr,
                    request(schedule_kind::static_, monotonicity::monotonic, chunk),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_dynamic_start(bool up, ull start, ull end, ull incr, ull chunk,
                                                  ull* istart, ull* iend) {
  return begin_loop(up, start, end, incr,
                    request(schedule_kind::dynamic, monotonicity::monotonic, chunk),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_guided_start(bool up, ull start, ull end, ull incr, ull chunk,
                                                 ull* istart, ull* iend) {
  return begin_loop(up, start, end, incr,
                    request(schedule_kind::guided, monotonicity::monotonic, chunk),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_runtime_start(bool up, ull start, ull end, ull incr,
                                                  ull* istart, ull* iend) {
  return begin_loop(up, start, end, incr,
                    request(schedule_kind::runtime, monotonicity::monotonic, 0),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_nonmonotonic_dynamic_start(bool up, ull start, ull end,
                                                               ull incr, ull chunk, ull* istart,
                                                               ull* iend) {
  return begin_loop(up, start, end, incr,
                    request(schedule_kind::dynamic, monotonicity::nonmonotonic, chunk),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_nonmonotonic_guided_start(bool up, ull start, ull end, ull incr,
                                                              ull chunk, ull* istart, ull* iend) {
  return begin_loop(up, start, end, incr,
                    request(schedule_kind::guided, monotonicity::nonmonotonic, chunk),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_nonmonotonic_runtime_start(bool up, ull start, ull end,
                                                               ull incr, ull* istart, ull* iend) {
  return begin_loop(up, start, end, incr,
                    request(schedule_kind::runtime, monotonicity::nonmonotonic, 0),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_maybe_nonmonotonic_runtime_start(bool up, ull start, ull end,
                                                                     ull incr, ull* istart,
                                                                     ull* iend) {
  return begin_loop(up, start, end, incr,
                    request(schedule_kind::runtime, monotonicity::unspecified, 0),
                    loop_flavour::plain, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_start(bool up, ull start, ull end, ull incr, long sched,
                                          ull chunk, ull* istart, ull* iend,
                                          std::uintptr_t* reductions, void** mem) {
  return start_full(up, start, end, incr, sched, chunk, istart, iend, reductions, mem,
                    loop_flavour::plain);
}

// ---- Ordered loops -----------------------------------------------------------------

MOTE_GOMP_EXPORT bool GOMP_loop_ull_ordered_static_start(bool up, ull start, ull end, ull incr,
                                                         ull chunk, ull* istart, ull* iend) {
  return begin_loop(up, start, end, incr,
                    request(schedule_kind::static_, monotonicity::monotonic, chunk),
                    loop_flavour::ordered, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_ordered_dynamic_start(bool up, ull start, ull end, ull incr,
                                                          ull chunk, ull* istart, ull* iend) {
  return begin_loop(up, start, end, incr,
                    request(schedule_kind::dynamic, monotonicity::monotonic, chunk),
                    loop_flavour::ordered, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_ordered_guided_start(bool up, ull start, ull end, ull incr,
                                                         ull chunk, ull* istart, ull* iend) {
  return begin_loop(up, start, end, incr,
                    request(schedule_kind::guided, monotonicity::monotonic, chunk),
                    loop_flavour::ordered, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_ordered_runtime_start(bool up, ull start, ull end, ull incr,
                                                          ull* istart, ull* iend) {
  return begin_loop(up, start, end, incr,
                    request(schedule_kind::runtime, monotonicity::monotonic, 0),
                    loop_flavour::ordered, istart, iend);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_ordered_start(bool up, ull start, ull end, ull incr, long sched,
                                                  ull chunk, ull* istart, ull* iend,
                                                  std::uintptr_t* reductions, void** mem) {
  return start_full(up, start, end, incr, sched, chunk, istart, iend, reductions, mem,
                    loop_flavour::ordered);
}

// ---- Doacross loops ----------------------------------------------------------------

MOTE_GOMP_EXPORT bool GOMP_loop_ull_doacross_static_start(unsigned ncounts, ull* counts, ull chunk,
                                                          ull* istart, ull* iend) {
  return doacross(ncounts, counts, request(schedule_kind::static_, monotonicity::monotonic, chunk),
                  istart, iend, nullptr, nullptr);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_doacross_dynamic_start(unsigned ncounts, ull* counts, ull chunk,
                                                           ull* istart, ull* iend) {
  return doacross(ncounts, counts, request(schedule_kind::dynamic, monotonicity::monotonic, chunk),
                  istart, iend, nullptr, nullptr);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_doacross_guided_start(unsigned ncounts, ull* counts, ull chunk,
                                                          ull* istart, ull* iend) {
  return doacross(ncounts, counts, request(schedule_kind::guided, monotonicity::monotonic, chunk),
                  istart, iend, nullptr, nullptr);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_doacross_runtime_start(unsigned ncounts, ull* counts,
                                                           ull* istart, ull* iend) {
  return doacross(ncounts, counts, request(schedule_kind::runtime, monotonicity::monotonic, 0),
                  istart, iend, nullptr, nullptr);
}

MOTE_GOMP_EXPORT bool GOMP_loop_ull_doacross_start(unsigned ncounts, ull* counts, long sched,
                                                   ull chunk, ull* istart, ull* iend,
                                                   std::uintptr_t* reductions, void** mem) {
  return doacross(ncounts, counts, request_of_code(sched, chunk), istart, iend, mem, reductions);
}

// ---- The next chunk (of whatever loop the thread is in) ----------------------------

MOTE_GOMP_EXPORT bool GOMP_loop_ull_static_next(ull* istart, ull* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_ull_dynamic_next(ull* istart, ull* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_ull_guided_next(ull* istart, ull* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_ull_runtime_next(ull* istart, ull* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_ull_nonmonotonic_dynamic_next(ull* istart, ull* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_ull_nonmonotonic_guided_next(ull* istart, ull* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_ull_nonmonotonic_runtime_next(ull* istart, ull* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_ull_maybe_nonmonotonic_runtime_next(ull* istart, ull* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_ull_ordered_static_next(ull* istart, ull* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_ull_ordered_dynamic_next(ull* istart, ull* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_ull_ordered_guided_next(ull* istart, ull* iend) {
  return next(istart, iend);
}
MOTE_GOMP_EXPORT bool GOMP_loop_ull_ordered_runtime_next(ull* istart, ull* iend) {
  return next(istart, iend);
}

}  // extern "C"
