// libgomp.so.1's start-up: the environment is read, and its messages and
// OMP_DISPLAY_ENV's output written, when the library is loaded, before the
// program's main, as GNU's library does (scripts read them there).
#include "omp/icv.hpp"
#include "omp/omp.hpp"

namespace mote::omp {
void display_affinity_on_change();  // api.cpp
}  // namespace mote::omp

namespace {

__attribute__((constructor)) void load_libgomp() {
  mote::omp::initialize();
  mote::omp::bind_initial_thread();
  if (mote::omp::globals().display_affinity) mote::omp::set_region_start_hook(mote::omp::display_affinity_on_change);
}

}  // namespace
