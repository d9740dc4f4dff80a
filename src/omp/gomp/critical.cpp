// Critical sections: unnamed (GOMP_critical_start/end), named
// (GOMP_critical_name_start/end, whose argument is the pointer-sized slot
// gcc reserves per name, .gomp_critical_user_<name>), and the lock of the
// atomic constructs gcc cannot do with one instruction (GOMP_atomic_start/end).
#include "omp/gomp/abi.hpp"
#include "omp/worksharing.hpp"

extern "C" {

MOTE_GOMP_EXPORT void GOMP_critical_start() { mote::omp::critical_start(); }
MOTE_GOMP_EXPORT void GOMP_critical_end() { mote::omp::critical_end(); }
MOTE_GOMP_EXPORT void GOMP_critical_name_start(void** name) {
  mote::omp::critical_name_start(name);
}
MOTE_GOMP_EXPORT void GOMP_critical_name_end(void** name) { mote::omp::critical_name_end(name); }
MOTE_GOMP_EXPORT void GOMP_atomic_start() { mote::omp::atomic_start(); }
MOTE_GOMP_EXPORT void GOMP_atomic_end() { mote::omp::atomic_end(); }

}  // extern "C"
