// A small deterministic generator (splitmix64), shared by the suites that
// generate their inputs: the same seed gives the same input on every runtime.
#pragma once

#include <cstdint>

namespace mote_bench {

struct rng64 {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
};

}  // namespace mote_bench
