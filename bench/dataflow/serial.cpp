// Data-flow kernels, serial twin: every spawn is a plain call, in program
// order (a valid order of every task graph).
#include "driver.hpp"

namespace {

struct serial_env {
  template <class Body>
  void region(Body&& body) {
    body();
  }
  template <class P>
  struct program {
    P& p;
    void execute() {
      mote_bench::dataflow::serial_flow w;
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
  o.workers = 1;
  serial_env env;
  return mote_bench::dataflow::run_suite(o, "serial", env);
}
