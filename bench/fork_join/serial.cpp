// Fork-join kernels, serial twin: every spawn is a plain call.
#include "driver.hpp"

namespace {

struct serial_par {
  template <class F, class G>
  static void fork2(F&& f, G&& g) {
    f();
    g();
  }
  template <class F>
  static void spawn_each(int n, F&& f) {
    for (int i = 0; i < n; ++i) f(i);
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  o.workers = 1;
  return mote_bench::fork_join::run_suite<serial_par>(o, "serial", [](auto&& f) { return f(); });
}
