// Fork-join kernels on OpenMP tasks. Built twice: with g++ -fopenmp (GNU
// OpenMP, libgomp) and with clang++ -fopenmp=libomp (LLVM OpenMP);
// MOTE_BENCH_OMP_NAME names the runtime in the records.
#include <omp.h>

#include "../common/omp_info.hpp"
#include "driver.hpp"

#ifndef MOTE_BENCH_OMP_NAME
#  define MOTE_BENCH_OMP_NAME "openmp"
#endif

namespace {

struct omp_par {
  template <class F, class G>
  static void fork2(F&& f, G&& g) {
#pragma omp task shared(g)
    g();
    f();
#pragma omp taskwait
  }
  template <class F>
  static void spawn_each(int n, F&& f) {
    for (int i = 0; i < n; ++i) {
#pragma omp task shared(f) firstprivate(i)
      f(i);
    }
#pragma omp taskwait
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  const int threads = static_cast<int>(o.workers);
  auto run = [threads](auto&& f) {
    decltype(f()) result{};
#pragma omp parallel num_threads(threads) shared(result, f)
#pragma omp single
    result = f();
    return result;
  };
  return mote_bench::fork_join::run_suite<omp_par>(o, MOTE_BENCH_OMP_NAME, run,
                                                   mote_bench::omp_info());
}
