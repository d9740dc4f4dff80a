// The tiny kernels as a pair of OpenMP tasks (task + taskwait) inside one
// persistent parallel region around the whole loop. Built with g++ -fopenmp
// (GNU OpenMP) and clang++ -fopenmp=libomp (LLVM OpenMP).
#include <omp.h>

#include "../common/omp_info.hpp"
#include "driver.hpp"

#ifndef MOTE_BENCH_OMP_NAME
#  define MOTE_BENCH_OMP_NAME "openmp"
#endif

namespace {
struct omp_env {
  int threads;
  template <class Body>
  void region(Body&& body) {
#pragma omp parallel num_threads(threads) shared(body)
#pragma omp single
    body();
  }
  template <class F, class G>
  void pair(F& f, G& g) {
#pragma omp task shared(g)
    g();
    f();
#pragma omp taskwait
  }
};
}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  omp_env env{static_cast<int>(o.workers)};
  return mote_bench::tiny::run_suite(o, MOTE_BENCH_OMP_NAME, env, mote_bench::omp_info());
}
