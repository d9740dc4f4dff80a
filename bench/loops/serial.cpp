// The loop kernels on one thread, each loop one call of its body over the
// whole range: the baseline.
#include "driver.hpp"

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  o.workers = 1;
  mote_bench::loops::serial_par par;
  return mote_bench::loops::run_suite(o, "serial", par);
}
