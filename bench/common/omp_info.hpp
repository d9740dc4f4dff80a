// Which OpenMP runtime this executable really runs on: the shared object that
// defines omp_get_num_threads, and the _OPENMP version the compiler targets.
// Recorded beside every OpenMP result, so a mix-up of libgomp and libomp shows.
#pragma once

#include <dlfcn.h>
#include <omp.h>

#include <cstdint>

#include "harness.hpp"

namespace mote_bench {

inline extras omp_info() {
  extras e;
  Dl_info where{};
  if (dladdr(reinterpret_cast<void*>(&omp_get_num_threads), &where) != 0 && where.dli_fname != nullptr) {
    e.add("omp_library", where.dli_fname);
  }
  e.add("openmp_version", static_cast<std::int64_t>(_OPENMP));
  return e;
}

}  // namespace mote_bench
