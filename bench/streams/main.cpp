// bench_streams_<runtime>: the stream applications on the backend that CMake
// names (MOTE_BENCH_BACKEND_HEADER, one of bench/backends/; its streams part,
// driver.hpp). The serial executable runs every stage of an item in turn,
// item after item. The queue micro-benchmarks are queues.cpp.
#include MOTE_BENCH_BACKEND_HEADER

#include "driver.hpp"

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  mote_bench::backend b(o);
  return mote_bench::streams::run_suite(o, b.name(), b, b.info());
}
