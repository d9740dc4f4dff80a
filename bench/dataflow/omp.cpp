// Data-flow kernels on OpenMP tasks with depend clauses, in one persistent
// parallel region whose single thread spawns every task (the others run
// them). Built with g++ -fopenmp (GNU OpenMP) and clang++ -fopenmp=libomp
// (LLVM OpenMP); MOTE_BENCH_OMP_NAME names the runtime in the records.
//
// The accesses map to depend(in:) / depend(inout:) / depend(mutexinoutset:)
// on the first address, and dep::sum to in_reduction(+:) under a taskgroup
// task_reduction(+:) (OpenMP 5.0): that taskgroup waits for its tasks at its
// end, so heat's per-step reductions put a wait after every time step, where
// the other runtimes let the next step start on the blocks that are ready.
// OpenMP needs every depend clause written out, so spawn() below has one
// pragma per access pattern the kernels use.
#include <omp.h>

#include "../common/omp_info.hpp"
#include "driver.hpp"

#ifndef MOTE_BENCH_OMP_NAME
#  define MOTE_BENCH_OMP_NAME "openmp"
#endif

#define DF_PRAGMA(...) _Pragma(#__VA_ARGS__)
// One deferred task running `call`, firstprivate copy of the callable fn.
#define DF_TASK(call, ...)                                  \
  {                                                         \
    DF_PRAGMA(omp task firstprivate(fn) __VA_ARGS__)        \
    call;                                                   \
  }

namespace {

namespace dep = mote_bench::dataflow::dep;

// The first address of each access, by kind, in order.
struct addresses {
  char* in[4];
  char* io[2];
  char* cm[1];
  double* sum[1];
  int nin = 0, nio = 0, ncm = 0, nsum = 0;

  template <class T>
  void add(const dep::in_t<T>& a) {
    in[nin++] = reinterpret_cast<char*>(const_cast<std::remove_const_t<T>*>(a.p));
  }
  template <class T>
  void add(const dep::inout_t<T>& a) {
    io[nio++] = reinterpret_cast<char*>(a.p);
  }
  template <class T>
  void add(const dep::commutative_t<T>& a) {
    cm[ncm++] = reinterpret_cast<char*>(a.p);
  }
  void add(const dep::sum_t& a) { sum[nsum++] = a.target; }
};

template <class... A>
struct pattern {
  static constexpr int in = (0 + ... + dep::kind<A>::in);
  static constexpr int inout = (0 + ... + dep::kind<A>::inout);
  static constexpr int commutative = (0 + ... + dep::kind<A>::commutative);
  static constexpr int sum = (0 + ... + dep::kind<A>::sum);
};

struct omp_flow {
  template <class F, class... A>
  void spawn(F&& f, const A&... a) {
    using P = pattern<A...>;
    static_assert(P::in <= 4 && P::inout <= 2 && P::commutative <= 1 && P::sum <= 1);
    addresses d;
    (d.add(a), ...);
    std::decay_t<F> fn(std::forward<F>(f));
    [[maybe_unused]] char** in = d.in;
    [[maybe_unused]] char** io = d.io;
    [[maybe_unused]] char** cm = d.cm;
    if constexpr (P::sum == 0 && P::commutative == 0) {
      if constexpr (P::inout == 1 && P::in == 0) {
        DF_TASK(fn(), depend(inout : io[0][0]))
      } else if constexpr (P::inout == 1 && P::in == 1) {
        DF_TASK(fn(), depend(inout : io[0][0]) depend(in : in[0][0]))
      } else if constexpr (P::inout == 1 && P::in == 2) {
        DF_TASK(fn(), depend(inout : io[0][0]) depend(in : in[0][0], in[1][0]))
      } else if constexpr (P::inout == 1 && P::in == 3) {
        DF_TASK(fn(), depend(inout : io[0][0]) depend(in : in[0][0], in[1][0], in[2][0]))
      } else if constexpr (P::inout == 1 && P::in == 4) {
        DF_TASK(fn(), depend(inout : io[0][0]) depend(in : in[0][0], in[1][0], in[2][0], in[3][0]))
      } else if constexpr (P::inout == 2 && P::in == 0) {
        DF_TASK(fn(), depend(inout : io[0][0], io[1][0]))
      } else {
        static_assert(sizeof(F) == 0, "access pattern not written out");
      }
    } else if constexpr (P::sum == 0 && P::commutative == 1 && P::inout == 0) {
      if constexpr (P::in == 1) {
        DF_TASK(fn(), depend(mutexinoutset : cm[0][0]) depend(in : in[0][0]))
      } else if constexpr (P::in == 2) {
        DF_TASK(fn(), depend(mutexinoutset : cm[0][0]) depend(in : in[0][0], in[1][0]))
      } else {
        static_assert(sizeof(F) == 0, "access pattern not written out");
      }
    } else if constexpr (P::sum == 1 && P::commutative == 0) {
      double& r = *d.sum[0];
      if constexpr (P::inout == 0 && P::in == 2) {
        DF_TASK(fn(r), depend(in : in[0][0], in[1][0]) in_reduction(+ : r))
      } else if constexpr (P::inout == 1 && P::in == 0) {
        DF_TASK(fn(r), depend(inout : io[0][0]) in_reduction(+ : r))
      } else if constexpr (P::inout == 1 && P::in == 1) {
        DF_TASK(fn(r), depend(inout : io[0][0]) depend(in : in[0][0]) in_reduction(+ : r))
      } else if constexpr (P::inout == 1 && P::in == 2) {
        DF_TASK(fn(r), depend(inout : io[0][0]) depend(in : in[0][0], in[1][0]) in_reduction(+ : r))
      } else if constexpr (P::inout == 1 && P::in == 3) {
        DF_TASK(fn(r), depend(inout : io[0][0]) depend(in : in[0][0], in[1][0], in[2][0]) in_reduction(+ : r))
      } else if constexpr (P::inout == 1 && P::in == 4) {
        DF_TASK(fn(r),
                depend(inout : io[0][0]) depend(in : in[0][0], in[1][0], in[2][0], in[3][0]) in_reduction(+ : r))
      } else {
        static_assert(sizeof(F) == 0, "access pattern not written out");
      }
    } else {
      static_assert(sizeof(F) == 0, "access pattern not written out");
    }
  }

  template <class Body>
  void reduction_scope(double& target, Body&& body) {
    double& r = target;
#pragma omp taskgroup task_reduction(+ : r)
    { body(); }
  }

  void wait() {
#pragma omp taskwait
  }
};

struct omp_env {
  int threads;
  template <class Body>
  void region(Body&& body) {
#pragma omp parallel num_threads(threads) shared(body)
#pragma omp single
    body();
  }
  template <class P>
  struct program {
    P& p;
    void execute() {
      omp_flow w;
      p.graph(w);
      w.wait();
    }
  };
  template <class P>
  program<P> prepare(P& p) {
    return {p};
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  omp_env env{static_cast<int>(o.workers)};
  return mote_bench::dataflow::run_suite(o, MOTE_BENCH_OMP_NAME, env, mote_bench::omp_info());
}
