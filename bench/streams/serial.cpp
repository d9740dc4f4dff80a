// The stream kernels on one thread, every stage of an item in turn, item
// after item: the baseline.
#include "driver.hpp"

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  o.workers = 1;
  mote_bench::streams::serial_par par;
  return mote_bench::streams::run_suite(o, "serial", par);
}
