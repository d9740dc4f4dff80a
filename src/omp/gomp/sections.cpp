// The sections construct (GOMP_sections_*, GOMP_parallel_sections): a loop
// over the section numbers, one section at a time (omp/worksharing.hpp).
#include <cstdint>

#include "omp/gomp/abi.hpp"
#include "omp/worksharing.hpp"

extern "C" {

// The number of the first section this thread runs (1-based), 0 for none.
MOTE_GOMP_EXPORT unsigned GOMP_sections_start(unsigned count) {
  return mote::omp::sections_start(count, nullptr);
}

// gcc 9+: with task reductions (`sections reduction(task, ...)`) and `mem`
// (memory shared by the construct's threads), as GOMP_loop_start's.
MOTE_GOMP_EXPORT unsigned GOMP_sections2_start(unsigned count, std::uintptr_t* reductions,
                                               void** mem) {
  return mote::omp::sections_start(count, mem, reductions);
}

MOTE_GOMP_EXPORT unsigned GOMP_sections_next() { return mote::omp::sections_next(); }

// A parallel region that is one sections construct: every thread enters it
// before fn runs (fn starts with GOMP_sections_next).
MOTE_GOMP_EXPORT void GOMP_parallel_sections(void (*fn)(void*), void* data, unsigned nthreads,
                                             unsigned count, unsigned flags) {
  mote::omp::parallel_sections(fn, data, nthreads, flags, count);
}

MOTE_GOMP_EXPORT void GOMP_sections_end() { mote::omp::loop_end(); }
MOTE_GOMP_EXPORT void GOMP_sections_end_nowait() { mote::omp::loop_end_nowait(); }
MOTE_GOMP_EXPORT bool GOMP_sections_end_cancel() { return mote::omp::loop_end_cancel(); }

}  // extern "C"
