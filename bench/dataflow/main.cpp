// bench_dataflow_<runtime>: the data-flow kernels on the backend that CMake
// names (MOTE_BENCH_BACKEND_HEADER, one of bench/backends/; its data-flow
// part, driver.hpp). The serial executable runs every task at once, in
// program order.
#include MOTE_BENCH_BACKEND_HEADER

#include "driver.hpp"

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  mote_bench::backend b(o);
  return mote_bench::dataflow::run_suite(o, b.name(), b, b.info());
}
