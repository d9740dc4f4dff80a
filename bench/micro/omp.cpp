// Micro benchmarks on OpenMP. Built with g++ (GNU OpenMP) and with clang++
// and libomp (LLVM OpenMP); MOTE_BENCH_OMP_NAME names the runtime.
#include <omp.h>

#include "../common/omp_info.hpp"
#include "driver.hpp"

#ifndef MOTE_BENCH_OMP_NAME
#  define MOTE_BENCH_OMP_NAME "openmp"
#endif

namespace {

struct omp_env {
  int threads;
  long default_iters = 1'000'000;

  double spawn_loop(long iters) {
    double seconds = 0;
#pragma omp parallel num_threads(threads) shared(seconds)
#pragma omp single
    {
      auto t0 = mote_bench::clock::now();
      for (long i = 0; i < iters; ++i) {
#pragma omp task
        mote_bench::empty_task_body();
        mote_bench::empty_task_body();
#pragma omp taskwait
      }
      seconds = mote_bench::seconds_between(t0, mote_bench::clock::now());
    }
    return seconds;
  }
  double group_loop(long tasks) {
    double seconds = 0;
#pragma omp parallel num_threads(threads) shared(seconds)
#pragma omp single
    {
      auto t0 = mote_bench::clock::now();
      for (long done = 0; done < tasks; done += mote_bench::micro::kGroupSize) {
        for (int i = 0; i < mote_bench::micro::kGroupSize; ++i) {
#pragma omp task
          mote_bench::empty_task_body();
        }
#pragma omp taskwait
      }
      seconds = mote_bench::seconds_between(t0, mote_bench::clock::now());
    }
    return seconds;
  }
  // From just before the parallel construct to the first statement of a
  // thread other than the master.
  double wake_once() {
    mote_bench::clock::time_point started;
    auto submitted = mote_bench::clock::now();
#pragma omp parallel num_threads(threads) shared(started)
    {
      if (omp_get_thread_num() == 1) started = mote_bench::clock::now();
    }
    return mote_bench::seconds_between(submitted, started);
  }
  void warm() {
    std::int64_t sum = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
    sum += mote_bench::micro::small_work();
    mote_bench::do_not_optimize(sum);
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  omp_env env{static_cast<int>(o.workers)};
  return mote_bench::micro::run_suite(o, MOTE_BENCH_OMP_NAME, env, mote_bench::omp_info());
}
