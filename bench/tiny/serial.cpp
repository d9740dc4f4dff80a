// The tiny kernels back to back on one thread: the baseline.
#include "driver.hpp"

namespace {
struct serial_env {
  template <class Body>
  void region(Body&& body) {
    body();
  }
  template <class F, class G>
  void pair(F& f, G& g) {
    f();
    g();
  }
};
}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  mote_bench::tiny::pin_to(0);
  serial_env env;
  return mote_bench::tiny::run_suite(o, "serial", env);
}
