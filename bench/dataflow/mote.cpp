// Data-flow kernels on mote::dataflow: one scope per run, created and fed by
// one task on a worker (runtime::run), waited with df.wait(). The accesses map
// one to one: dep::in / inout / commutative to mote::in / inout /
// commutative, dep::sum to mote::reduction(std::plus<>{}, x).
//
// The same source builds the variants, by MOTE_BENCH_DF_VARIANT:
//   0 (mote)             the defaults
//   1 (mote_delegation)  MOTE_SCHEDULER=delegation: the delegation scheduler
//   2 (mote_malloc)      MOTE_DATAFLOW_POOLS=0: data-flow records from the
//                        system allocator instead of the per-worker pools
//   3 (mote_jemalloc)    as 2, linked with jemalloc (the system allocator is
//                        then jemalloc's malloc)
// The variables are set before the runtime starts and overwrite the caller's.
#include <dlfcn.h>

#include <cstdlib>
#include <functional>
#include <mote/dataflow.hpp>
#include <mote/mote.hpp>

#include "driver.hpp"

#ifndef MOTE_BENCH_DF_VARIANT
#  define MOTE_BENCH_DF_VARIANT 0
#endif

namespace {

namespace dep = mote_bench::dataflow::dep;

template <class T>
mote::access to_mote(const dep::in_t<T>& a) {
  return a.n == 0 ? mote::in(*a.p) : mote::in(a.p, a.n);
}
template <class T>
mote::access to_mote(const dep::inout_t<T>& a) {
  return a.n == 0 ? mote::inout(*a.p) : mote::inout(a.p, a.n);
}
template <class T>
mote::access to_mote(const dep::commutative_t<T>& a) {
  return a.n == 0 ? mote::commutative(*a.p) : mote::commutative(a.p, a.n);
}
inline auto to_mote(const dep::sum_t& a) { return mote::reduction(std::plus<>{}, *a.target); }

struct mote_flow {
  mote::dataflow& df;
  template <class F, class... A>
  void spawn(F&& f, const A&... a) {
    df.spawn(to_mote(a)..., std::forward<F>(f));
  }
  template <class Body>
  void reduction_scope(double&, Body&& body) {
    body();
  }
  void wait() { df.wait(); }
};

struct mote_env {
  mote::runtime& rt;
  template <class Body>
  void region(Body&& body) {
    rt.run([&] { body(); });
  }
  template <class P>
  struct program {
    mote::runtime& rt;
    P& p;
    void execute() {
      mote::dataflow df(rt);
      mote_flow w{df};
      p.graph(w);
      w.wait();
    }
  };
  template <class P>
  program<P> prepare(P& p) {
    return {rt, p};
  }
};

#if MOTE_BENCH_DF_VARIANT == 1
constexpr const char* kName = "mote_delegation";
#elif MOTE_BENCH_DF_VARIANT == 2
constexpr const char* kName = "mote_malloc";
#elif MOTE_BENCH_DF_VARIANT == 3
constexpr const char* kName = "mote_jemalloc";
#else
constexpr const char* kName = "mote";
#endif

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  mote_bench::extras info;
#if MOTE_BENCH_DF_VARIANT == 1
  setenv("MOTE_SCHEDULER", "delegation", 1);
  info.add("env", "MOTE_SCHEDULER=delegation");
#elif MOTE_BENCH_DF_VARIANT == 2 || MOTE_BENCH_DF_VARIANT == 3
  setenv("MOTE_DATAFLOW_POOLS", "0", 1);
  info.add("env", "MOTE_DATAFLOW_POOLS=0");
#endif
  // Which malloc this process really uses: jemalloc exports mallctl.
  info.add("allocator", dlsym(RTLD_DEFAULT, "mallctl") != nullptr ? "jemalloc" : "system");
  mote::runtime_options options;
  options.num_workers = o.workers;
  mote::runtime rt(options);
  info.add("spin_us", static_cast<std::int64_t>(rt.spin().count()));
  mote_env env{rt};
  return mote_bench::dataflow::run_suite(o, kName, env, info);
}
