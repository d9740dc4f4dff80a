// bench_tiny_<runtime>: the tiny kernels as pairs of tasks on the backend that
// CMake names (MOTE_BENCH_BACKEND_HEADER, one of bench/backends/). A backend
// whose caller runs tasks itself (serial, mote's assistant) has the caller
// pinned to CPU 0 before it starts.
#include MOTE_BENCH_BACKEND_HEADER

#include "driver.hpp"

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  if constexpr (mote_bench::backend::runs_on_caller) mote_bench::pin_to_cpu(0);
  mote_bench::backend b(o);
  return mote_bench::tiny::run_suite(o, b.name(), b, b.info());
}
