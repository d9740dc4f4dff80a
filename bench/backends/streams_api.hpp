// What the streams suite's applications (bench/streams/kernels.hpp) and the
// backends' streams parts share: the stage descriptions, the serial pipeline
// every answer is checked against, and thread pinning.
//
// A kernel pushes its stream through `par`, a backend (or serial_par below):
//
//   template <class... S> void pipeline(std::size_t items, std::size_t in_flight, S&... stages)
//       runs items 0..items-1 through the stages in order. Each stage is a
//       stage<F> (serial_in_order or parallel) whose f(i) works on item i;
//       the first stage is called for i = 0, 1, 2, ... in order (par stops
//       the stream after `items`). At most in_flight items at once.
//   template <class S, class A, class B, class C>
//   void feedback(std::size_t items, std::size_t d, std::size_t in_flight, S& s, A& a, B& b, C& c)
//       four serial stages s(i), a(i, fb), b(i) -> feedback_value, c(i),
//       where a of item i needs what b returned for item i - d (fb points to
//       it; nullptr for i < d): a backward dependency that only a pipeline
//       with a feedback path can run in parallel.
//
// Items live in a ring of kRing blocks (item i in block i % kRing): every
// par keeps fewer than kRing items in flight (in_flight <= kRing / 2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "../common/harness.hpp"

namespace mote_bench::streams {

// ---------------------------------------------------------------- threads

using mote_bench::pin_to_cpu;

inline void cpu_relax() { __builtin_ia32_pause(); }

// ---------------------------------------------------------------- pipeline description

enum class mode : std::uint8_t { serial_in_order, parallel };

template <class F>
struct stage {
  mode m;
  F f;  // f(std::size_t item)
};

template <class F>
stage<F> serial_stage(F f) {
  return {mode::serial_in_order, std::move(f)};
}
template <class F>
stage<F> parallel_stage(F f) {
  return {mode::parallel, std::move(f)};
}

constexpr std::size_t kRing = 64;
constexpr std::size_t kMaxInFlight = kRing / 2;

// What stage b of item i hands back to stage a of item i + d.
struct feedback_value {
  std::uint64_t w[8];
};

struct serial_par {
  template <class... S>
  void pipeline(std::size_t items, std::size_t /*in_flight*/, S&... s) {
    for (std::size_t i = 0; i < items; ++i) (s.f(i), ...);
  }
  template <class S, class A, class B, class C>
  void feedback(std::size_t items, std::size_t d, std::size_t /*in_flight*/, S& s, A& a, B& b, C& c) {
    std::vector<feedback_value> fb(kRing);
    for (std::size_t i = 0; i < items; ++i) {
      s(i);
      a(i, i >= d ? &fb[(i - d) % kRing] : nullptr);
      fb[i % kRing] = b(i);
      c(i);
    }
  }
};

}  // namespace mote_bench::streams
