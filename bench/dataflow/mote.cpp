// Data-flow kernels on mote::dataflow: one scope per run, created and fed by
// one task on a worker (runtime::run), waited with df.wait(). The accesses map
// one to one: dep::in / inout / commutative to mote::in / inout /
// commutative, dep::sum to mote::reduction(std::plus<>{}, x).
//
// The same source builds the variants, each named by MOTE_BENCH_RUNTIME (its
// runtime name in suites.json) with the setting MOTE_BENCH_ENV
// ("VARIABLE=value", set before the runtime starts, overwriting the caller's):
//   mote             the defaults
//   mote_delegation  MOTE_SCHEDULER=delegation: the delegation scheduler
//   mote_malloc      MOTE_DATAFLOW_POOLS=0: data-flow records from the
//                    system allocator instead of the per-worker pools
//   mote_jemalloc    as mote_malloc, linked with jemalloc (the system
//                    allocator is then jemalloc's malloc)
#include <dlfcn.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <mote/dataflow.hpp>
#include <mote/mote.hpp>

#include "driver.hpp"

#ifndef MOTE_BENCH_RUNTIME
#  define MOTE_BENCH_RUNTIME mote
#endif
#define MOTE_BENCH_STRINGIZE2(x) #x
#define MOTE_BENCH_STRINGIZE(x) MOTE_BENCH_STRINGIZE2(x)

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

constexpr const char* kName = MOTE_BENCH_STRINGIZE(MOTE_BENCH_RUNTIME);

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  mote_bench::extras info;
#ifdef MOTE_BENCH_ENV
  {
    const std::string setting = MOTE_BENCH_ENV;
    const auto eq = setting.find('=');
    setenv(setting.substr(0, eq).c_str(), setting.substr(eq + 1).c_str(), 1);
    info.add("env", MOTE_BENCH_ENV);
  }
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
