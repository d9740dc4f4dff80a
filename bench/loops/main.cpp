// bench_loops_<runtime>: the loop kernels on the backend that CMake names
// (MOTE_BENCH_BACKEND_HEADER, one of bench/backends/). The serial executable
// times the suite's own serial reference (serial_par, kernels.hpp): each loop
// one call of its body over the whole range.
#include MOTE_BENCH_BACKEND_HEADER

#include "driver.hpp"

namespace {

template <class Backend>
int run(mote_bench::options& o, Backend& b) {
  if constexpr (Backend::concurrent) {
    return mote_bench::loops::run_suite(o, b.name(), b, b.info());
  } else {
    mote_bench::loops::serial_par par;
    return mote_bench::loops::run_suite(o, b.name(), par, b.info());
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  mote_bench::backend b(o);
  return run(o, b);
}
