// PLACEHOLDER for the environment part (src/omp/env.cpp replaces it).
#include "omp/icv.hpp"
namespace mote::omp {
const global_icvs& globals() {
  static global_icvs g;
  return g;
}
task_icvs& thread_icvs() {
  static thread_local task_icvs t = globals().initial;
  return t;
}
}  // namespace mote::omp
