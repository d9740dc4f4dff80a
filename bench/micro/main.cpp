// bench_micro_<runtime>: the runtime-cost benchmarks on the backend that CMake
// names (MOTE_BENCH_BACKEND_HEADER, one of bench/backends/).
#include MOTE_BENCH_BACKEND_HEADER

#include "driver.hpp"

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  mote_bench::backend b(o);
  return mote_bench::micro::run_suite(o, b.name(), b, b.info());
}
