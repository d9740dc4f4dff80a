// The tiny kernels as a pair of tasks through mote::join on a 2-worker runtime.
// Built twice (bench/CMakeLists.txt): bench_tiny_mote with join's adaptive
// offload off (runtime "mote", today's behaviour: every join takes the plain
// work-first path) and bench_tiny_moteadapt with it on (runtime
// "mote_adaptive", MOTE_BENCH_TINY_ADAPTIVE=1).
#include <mote/mote.hpp>

#include "driver.hpp"

#ifndef MOTE_BENCH_TINY_ADAPTIVE
#  define MOTE_BENCH_TINY_ADAPTIVE 0
#endif

namespace {
constexpr bool kAdaptive = MOTE_BENCH_TINY_ADAPTIVE != 0;

struct mote_env {
  mote::runtime& rt;
  template <class Body>
  void region(Body&& body) {
    rt.run(body);
  }
  template <class F, class G>
  void pair(F& f, G& g) {
    mote::join(f, g);
  }
};
}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  mote::runtime_options options;
  options.num_workers = o.workers;
  // Explicit either way, so that MOTE_ADAPTIVE in the environment changes neither variant.
  options.adaptive = kAdaptive;
  mote::runtime rt(options);
  mote_env env{rt};
  mote_bench::extras info;
  info.add("spin_us", static_cast<std::int64_t>(rt.spin().count()));
  info.add("adaptive", std::int64_t{kAdaptive ? 1 : 0});
  return mote_bench::tiny::run_suite(o, kAdaptive ? "mote_adaptive" : "mote", env, info);
}
