// bench_fork_join_<runtime>: the fork-join kernels on the backend that CMake
// names (MOTE_BENCH_BACKEND_HEADER, one of bench/backends/).
#include MOTE_BENCH_BACKEND_HEADER

#include "driver.hpp"

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  mote_bench::backend b(o);
  return mote_bench::fork_join::run_suite<mote_bench::backend>(
      o, b.name(), [&](auto&& f) { return b.run(f); }, b.info());
}
