// The main() body every fork-join variant shares: which kernels, what sizes,
// what is checked. A variant supplies its wrapper `Par` (see kernels.hpp) and
// a `run(f)` that runs f on its runtime, configured for o.workers threads, and
// returns f's result.
#pragma once

#include <cstdint>
#include <string_view>

#include "../common/harness.hpp"
#include "kernels.hpp"

namespace mote_bench::fork_join {

// --fib-n N and --nqueens-n N override the sizes (fib 32, nqueens 12).
template <class Par, class Run>
int run_suite(const options& o, std::string_view runtime_name, Run&& run, const extras& info = {}) {
  const int fib_n = static_cast<int>(option_value(o, "--fib-n", 32));
  const int queens_n = static_cast<int>(option_value(o, "--nqueens-n", 12));
  if (queens_n < 1 || queens_n > kMaxQueens) usage_error("--nqueens-n", "out of range");

  if (o.wants("fib")) {
    record r = time_kernel(o, "fork_join", "fib", runtime_name, "ms", 1e3, fib_expected(fib_n),
                           [&] { return run([&] { return fib<Par>(fib_n); }); });
    r.extra = info;
    r.extra.add("n", std::int64_t{fib_n}).add("spawns", fib_spawns(fib_n));
    emit(r);
  }
  if (o.wants("nqueens")) {
    record r = time_kernel(o, "fork_join", "nqueens", runtime_name, "ms", 1e3,
                           nqueens_expected(queens_n),
                           [&] { return run([&] { return nqueens<Par>(queens_n); }); });
    r.extra = info;
    r.extra.add("n", std::int64_t{queens_n}).add("spawns", nqueens_tasks(queens_n));
    emit(r);
  }
  return 0;
}

}  // namespace mote_bench::fork_join
