// The stream kernels on OpenMP tasks with dependences: one `#pragma omp
// parallel` region of N threads per run, one thread (single) makes, item
// after item, one task per stage. Each task has depend(inout) on its item's
// place (so an item's stages run in order, and place i % in_flight is reused
// only when item i - in_flight is through: at most in_flight items at
// once); a serial stage's task also has depend(inout) on the stage's own
// token, which chains that stage's tasks in the order they were made (in
// order, one at a time); a parallel stage's task has no other dependence.
// The template adds its backward dependence: b of item i has depend(out) on
// feedback place i, a of item i + d depend(in) on it.
// Built twice: g++ -fopenmp (GNU OpenMP) and clang++ -fopenmp=libomp (LLVM
// OpenMP).
#include <omp.h>

#include <vector>

#include "../common/omp_info.hpp"
#include "driver.hpp"

#ifndef MOTE_BENCH_OMP_NAME
#define MOTE_BENCH_OMP_NAME "openmp"
#endif

namespace {

using mote_bench::streams::feedback_value;
using mote_bench::streams::kRing;
using mote_bench::streams::mode;

// Dependence objects: one byte each, on lines of their own.
struct alignas(64) dep {
  char c;
};

template <class St>
void stage_task(St* s, std::size_t i, dep* token, dep* place) {
  if (s->m == mode::parallel) {
#pragma omp task firstprivate(s, i) depend(inout : place->c)
    s->f(i);
  } else {
#pragma omp task firstprivate(s, i) depend(inout : place->c) depend(inout : token->c)
    s->f(i);
  }
}

struct omp_par {
  int threads;

  template <class... S>
  void pipeline(std::size_t items, std::size_t in_flight, S&... s) {
    std::vector<dep> tokens(sizeof...(S));
    std::vector<dep> places(in_flight);
#pragma omp parallel num_threads(threads)
#pragma omp single
    {
      for (std::size_t i = 0; i < items; ++i) {
        dep* place = &places[i % in_flight];
        std::size_t j = 0;
        (stage_task(&s, i, &tokens[j++], place), ...);
      }
    }
  }

  template <class FS, class FA, class FB, class FC>
  void feedback(std::size_t items, std::size_t d, std::size_t in_flight, FS& s, FA& a, FB& b, FC& c) {
    std::vector<feedback_value> fb(kRing);
    std::vector<dep> fbdep(kRing);
    std::vector<dep> places(in_flight);
    dep tok[4];
#pragma omp parallel num_threads(threads)
#pragma omp single
    {
      for (std::size_t i = 0; i < items; ++i) {
        dep* place = &places[i % in_flight];
#pragma omp task firstprivate(i) depend(inout : place->c) depend(inout : tok[0].c)
        s(i);
        if (i >= d) {
          dep* in = &fbdep[(i - d) % kRing];
#pragma omp task firstprivate(i) depend(inout : place->c) depend(inout : tok[1].c) depend(in : in->c)
          a(i, &fb[(i - d) % kRing]);
        } else {
#pragma omp task firstprivate(i) depend(inout : place->c) depend(inout : tok[1].c)
          a(i, nullptr);
        }
        dep* out = &fbdep[i % kRing];
#pragma omp task firstprivate(i) depend(inout : place->c) depend(inout : tok[2].c) depend(out : out->c)
        fb[i % kRing] = b(i);
#pragma omp task firstprivate(i) depend(inout : place->c) depend(inout : tok[3].c)
        c(i);
      }
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  omp_par par{static_cast<int>(o.workers)};
  mote_bench::extras info = mote_bench::omp_info();
  return mote_bench::streams::run_suite(o, MOTE_BENCH_OMP_NAME, par, info);
}
