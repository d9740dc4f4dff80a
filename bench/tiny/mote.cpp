// The tiny kernels as a pair of tasks through mote::join on a 2-worker runtime.
#include <mote/mote.hpp>

#include "driver.hpp"

namespace {
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
  mote::runtime rt(options);
  mote_env env{rt};
  mote_bench::extras info;
  info.add("spin_us", static_cast<std::int64_t>(rt.spin().count()));
  return mote_bench::tiny::run_suite(o, "mote", env, info);
}
