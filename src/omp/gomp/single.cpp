// The single construct (GOMP_single_start), single with copyprivate
// (GOMP_single_copy_start/end), and the scope construct with task reductions
// (GOMP_scope_start): constructs every thread of the team meets once,
// omp/worksharing.hpp.
#include <cstdint>

#include "omp/gomp/abi.hpp"
#include "omp/worksharing.hpp"

extern "C" {

// True in the one thread that runs the construct's body.
MOTE_GOMP_EXPORT bool GOMP_single_start() { return mote::omp::single_start(); }

// nullptr in the thread that runs the body, which then passes its
// copyprivate data to GOMP_single_copy_end; the others get that data.
MOTE_GOMP_EXPORT void* GOMP_single_copy_start() { return mote::omp::single_copy_start(); }
MOTE_GOMP_EXPORT void GOMP_single_copy_end(void* data) { mote::omp::single_copy_end(data); }

// GOMP_5.1: #pragma omp scope reduction(task, ...). (A scope without task
// reductions calls nothing: its barrier is GOMP_barrier.)
MOTE_GOMP_EXPORT void GOMP_scope_start(std::uintptr_t* reductions) {
  mote::omp::scope_start(reductions);
}

}  // extern "C"
