// The single construct (GOMP_single_start) and single with copyprivate
// (GOMP_single_copy_start/end): omp/worksharing.hpp.
#include "omp/gomp/abi.hpp"
#include "omp/worksharing.hpp"

extern "C" {

// True in the one thread that runs the construct's body.
MOTE_GOMP_EXPORT bool GOMP_single_start() { return mote::omp::single_start(); }

// nullptr in the thread that runs the body, which then passes its
// copyprivate data to GOMP_single_copy_end; the others get that data.
MOTE_GOMP_EXPORT void* GOMP_single_copy_start() { return mote::omp::single_copy_start(); }
MOTE_GOMP_EXPORT void GOMP_single_copy_end(void* data) { mote::omp::single_copy_end(data); }

}  // extern "C"
