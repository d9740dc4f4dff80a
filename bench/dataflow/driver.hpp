// The main() body every data-flow variant shares: which kernels, what sizes,
// what is checked, what is timed.
//
// It runs on the backend CMake names (bench/backends/), whose data-flow part
// is
//   template <class Body> void flow_region(Body&& body)
//       runs body (the whole repetition loop) where tasks can be spawned: on a
//       worker (mote), inside one persistent parallel region on one producer
//       thread (OpenMP), inside the task_arena (oneTBB), or just here (serial)
//   template <class P> auto flow_prepare(P& problem)
//       called inside flow_region, untimed: returns a program whose execute()
//       spawns problem.graph()'s tasks and waits for them all (timed). oneTBB
//       builds its flow graph here, once, and execute() runs it again
//       (static constexpr bool flow_builds_graph says so: extra.build_ms).
//
// Kernels (--kernel NAME; all of them without): NAME is <family>_<size>:
//   chains_empty chains_1us          64 chains x 1000 tasks (inout on the chain),
//                                    empty bodies or ~1 us of busy work
//   wavefront_<B>   B x B tiles      4 Gauss-Seidel sweeps of a 1024^2 grid
//   heat_<B>        B x B tiles      the same, 4 time steps with a residual reduction each
//   dot_<B>         B elements       dot product of 2^20 doubles, 16 passes
//   matmul_<B>      B x B tiles      C += A B, n = 512, one dgemm per task
//   cholesky_<B>    B x B tiles      blocked Cholesky, n = 768
//   nbody_<B>       B bodies         1024 bodies, 4 steps
// Any <size> that divides the problem works; kDefault lists the swept ones.
// --quick makes every problem smaller (4 to 8 times less work).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "../common/harness.hpp"
#include "kernels.hpp"

namespace mote_bench::dataflow {

// The swept sizes: per family, task granularity from well under 1 us to tens of us.
inline const std::vector<std::string>& default_kernels() {
  static const std::vector<std::string> names = {
      "chains_empty", "chains_1us",                                              //
      "wavefront_8",  "wavefront_16", "wavefront_32", "wavefront_64", "wavefront_128",  //
      "heat_8",       "heat_16",      "heat_32",      "heat_64",      "heat_128",       //
      "dot_256",      "dot_2048",     "dot_16384",    "dot_131072",                     //
      "matmul_16",    "matmul_32",    "matmul_64",    "matmul_128",                     //
      "cholesky_16",  "cholesky_32",  "cholesky_64",  "cholesky_128",                   //
      "nbody_8",      "nbody_16",     "nbody_32",     "nbody_64",     "nbody_128"};
  return names;
}

[[noreturn]] inline void fail(std::string_view kernel, std::string_view runtime, const std::string& why) {
  std::fprintf(stderr, "bench: %.*s on %.*s: %s\n", static_cast<int>(kernel.size()), kernel.data(),
               static_cast<int>(runtime.size()), runtime.data(), why.c_str());
  std::exit(1);
}

// Times one problem: warm-up runs, then timed ones until o.reps or o.budget_ms.
template <class Backend, class P>
void run_problem(const options& o, std::string_view runtime, Backend& backend, const extras& info, P& p) {
  const std::int64_t expected = p.reference();
  record r{"dataflow", p.name, runtime, o.workers, "ms", {}, expected, info};
  std::string why;      // the first failure, reported once outside the region
  double build_ms = -1;  // oneTBB: building the flow graph (untimed)
  backend.flow_region([&] {
    auto t_build = clock::now();
    auto program = backend.flow_prepare(p);
    build_ms = 1e3 * seconds_between(t_build, clock::now());
    double warm_ms = 0;
    double spent_ms = 0;
    for (int i = 0; i < o.warmup + o.reps; ++i) {
      const bool warm = i < o.warmup;
      if (warm && o.budget_ms > 0 && warm_ms > o.budget_ms / 2) continue;
      p.reset();
      auto t0 = clock::now();
      program.execute();
      const double ms = 1e3 * seconds_between(t0, clock::now());
      const std::int64_t got = p.verify(why);
      if (why.empty() && got != expected) {
        why = "computed " + std::to_string(got) + ", expected " + std::to_string(expected);
      }
      if (!why.empty()) return;
      if (warm) {
        warm_ms += ms;
        continue;
      }
      r.samples.push_back(ms);
      r.result = got;
      spent_ms += ms;
      if (o.budget_ms > 0 && spent_ms >= o.budget_ms) break;
    }
  });
  if (!why.empty()) fail(p.name, runtime, why);
  r.extra.add("family", p.family).add("block", std::int64_t{p.block}).add("tasks", p.tasks);
  if constexpr (requires { Backend::flow_builds_graph; }) r.extra.add("build_ms", build_ms);
  p.describe(r.extra);
  emit(r);
}

template <class Backend>
void run_kernel(const options& o, std::string_view runtime, Backend& backend, const extras& info, const std::string& name) {
  const auto cut = name.rfind('_');
  const std::string family = name.substr(0, cut == std::string::npos ? name.size() : cut);
  const std::string size = cut == std::string::npos ? "" : name.substr(cut + 1);
  if (family == "chains") {
    if (size != "empty" && size != "1us") usage_error("--kernel", name.c_str());
    chains p(o.quick, size == "1us" ? 1.0 : 0.0, name);
    run_problem(o, runtime, backend, info, p);
    return;
  }
  const long b = parse_long(size.c_str(), "--kernel size");
  if (b < 1 || b > (1 << 24)) usage_error("--kernel", name.c_str());
  const int bi = static_cast<int>(b);
  auto need_divides = [&](long n) {
    if (n % b != 0) usage_error("--kernel (size must divide the problem)", name.c_str());
  };
  if (family == "wavefront") {
    need_divides(o.quick ? 512 : 1024);
    wavefront p(o.quick, bi, name);
    run_problem(o, runtime, backend, info, p);
  } else if (family == "heat") {
    need_divides(o.quick ? 512 : 1024);
    heat p(o.quick, bi, name);
    run_problem(o, runtime, backend, info, p);
  } else if (family == "dot") {
    need_divides(o.quick ? (1 << 18) : (1 << 20));
    dot p(o.quick, bi, name);
    run_problem(o, runtime, backend, info, p);
  } else if (family == "matmul") {
    need_divides(o.quick ? 256 : 512);
    matmul p(o.quick, bi, name);
    run_problem(o, runtime, backend, info, p);
  } else if (family == "cholesky") {
    need_divides(o.quick ? 384 : 768);
    cholesky p(o.quick, bi, name);
    run_problem(o, runtime, backend, info, p);
  } else if (family == "nbody") {
    need_divides(o.quick ? 512 : 1024);
    nbody p(o.quick, bi, name);
    run_problem(o, runtime, backend, info, p);
  } else {
    usage_error("--kernel", name.c_str());
  }
}

template <class Backend>
int run_suite(const options& o, std::string_view runtime, Backend& backend, const extras& info = {}) {
  // Every dgemm / trsm / potrf is one task's work on one thread.
  openblas_set_num_threads(1);
  if (!o.kernel.empty()) {
    run_kernel(o, runtime, backend, info, o.kernel);
  } else {
    for (const std::string& name : default_kernels()) run_kernel(o, runtime, backend, info, name);
  }
  return 0;
}

}  // namespace mote_bench::dataflow
