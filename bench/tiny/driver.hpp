// The main() body every tiny variant shares: the study of tiny tasks on two
// threads. Each iteration runs two instances of one kernel, on two identical
// inputs, as a pair of tasks: in parallel through the variant's runtime, or
// back to back on one thread (serial). A sample is the mean time of one pair
// over --iters iterations (ns).
//
// A variant supplies its backend (bench/backends/) as `env`, with
//   template <class Body> void pair_region(Body&& body)   runs body (the whole
//       timed loop) where the runtime can run tasks: on a worker, inside a
//       parallel region, with the assistant awake
//   template <class F, class G> void pair(F& f, G& g) runs f and g, possibly
//       in parallel, and returns when both are done
//
// Kernels (--kernel):
//   bc bfs cc pr sssp tc json   the tiny kernels (kernels.hpp); --iters (100000)
//   sweep_<us>                  two tasks of <us> microseconds of calibrated
//                               busy work, any size from 0.01 to 100 written
//                               as a plain decimal (sweep_0.02, sweep_1.5);
//                               --iters (100000 / max(1, size)). Without
//                               --kernel: sweep_0.1 sweep_0.5 sweep_1 sweep_5
//   roundtrip                   ns for one cache line to go to the other core
//                               and back (two threads pinned to CPUs 0 and 1,
//                               ping-pong), the bound on any hand-off
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "../common/harness.hpp"
#include "kernels.hpp"

namespace mote_bench::tiny {


// Steps of busy() per nanosecond on this thread, from the median of a few runs.
inline double busy_steps_per_ns() {
  std::vector<double> rates;
  for (int i = 0; i < 7; ++i) {
    const std::int64_t steps = 2'000'000;
    auto t0 = clock::now();
    do_not_optimize(busy(static_cast<std::uint64_t>(i), steps));
    const double ns = 1e9 * seconds_between(t0, clock::now());
    rates.push_back(static_cast<double>(steps) / ns);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

inline double roundtrip_ns(long count) {
  alignas(128) static std::atomic<long> ping{0};
  alignas(128) static std::atomic<long> pong{0};
  ping.store(0);
  pong.store(0);
  std::thread other([count] {
    pin_to_cpu(0);
    for (long i = 1; i <= count; ++i) {
      while (ping.load(std::memory_order_acquire) != i) {
      }
      pong.store(i, std::memory_order_release);
    }
  });
  pin_to_cpu(1);
  auto t0 = clock::now();
  for (long i = 1; i <= count; ++i) {
    ping.store(i, std::memory_order_release);
    while (pong.load(std::memory_order_acquire) != i) {
    }
  }
  const double ns = 1e9 * seconds_between(t0, clock::now()) / static_cast<double>(count);
  other.join();
  return ns;
}

constexpr const char* kSweepPrefix = "sweep_";
constexpr double kSweepMinUs = 0.01;
constexpr double kSweepMaxUs = 100.0;

// The task size a kernel name sweep_<us> asks for, in microseconds; 0 when the
// rest of the name is not a plain decimal (digits, at most one point) within
// [kSweepMinUs, kSweepMaxUs].
inline double sweep_size_us(const std::string& name) {
  const std::string prefix = kSweepPrefix;
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return 0;
  const std::string digits = name.substr(prefix.size());
  int points = 0, figures = 0;
  for (char c : digits) {
    if (c == '.') {
      ++points;
    } else if (c >= '0' && c <= '9') {
      ++figures;
    } else {
      return 0;
    }
  }
  if (points > 1 || figures == 0) return 0;
  const double us = std::strtod(digits.c_str(), nullptr);
  if (!std::isfinite(us) || us < kSweepMinUs || us > kSweepMaxUs) return 0;
  return us;
}

// Seconds that `iters` pairs (fa, fb) take, timed inside the runtime's region.
template <class Env, class FA, class FB>
double time_pairs(Env& env, FA& fa, FB& fb, long iters) {
  double seconds = 0;
  env.pair_region([&] {
    auto t0 = clock::now();
    for (long i = 0; i < iters; ++i) env.pair(fa, fb);
    seconds = seconds_between(t0, clock::now());
  });
  return seconds;
}

template <class Env>
int run_suite(const options& o, std::string_view runtime_name, Env& env, const extras& info = {}) {
  const long default_iters = o.quick ? 10000 : 100000;
  std::vector<instance> inst;  // two instances, each 128-byte aligned, on the heap
  inst.push_back(make_instance());
  inst.push_back(make_instance());
  instance& a = inst[0];
  instance& b = inst[1];

  for (const kernel_entry& k : kKernels) {
    if (!o.wants(k.name)) continue;
    const long iters = option_value(o, "--iters", default_iters);
    instance check = make_instance();
    const std::int64_t expected = k.fn(check);
    record r{"tiny", k.name, runtime_name, o.workers, "ns", {}, expected, info};
    r.extra.add("iters", std::int64_t{iters});
    r.extra.add("vertices", std::int64_t{kVertices});
    r.extra.add("directed_edges", a.g.directed_edges());
    auto fa = [&a, &k] { a.result = k.fn(a); };
    auto fb = [&b, &k] { b.result = k.fn(b); };
    for (int rep = 0; rep < o.warmup + o.reps; ++rep) {
      const double seconds = time_pairs(env, fa, fb, iters);
      check_result(k.name, runtime_name, a.result, expected);
      check_result(k.name, runtime_name, b.result, expected);
      if (rep >= o.warmup) r.samples.push_back(1e9 * seconds / static_cast<double>(iters));
    }
    emit(r);
  }

  // The sweep: the four default sizes when every kernel runs, or the one
  // size a --kernel sweep_<us> names.
  std::vector<std::pair<std::string, double>> sweep;
  if (o.kernel.empty()) {
    sweep = {{"sweep_0.1", 0.1}, {"sweep_0.5", 0.5}, {"sweep_1", 1.0}, {"sweep_5", 5.0}};
  } else if (o.kernel.rfind(kSweepPrefix, 0) == 0) {
    const double us = sweep_size_us(o.kernel);
    if (!(us > 0)) {
      std::fprintf(stderr,
                   "tiny: bad kernel '%s': expected sweep_<us>, <us> a plain decimal from %g to %g "
                   "(e.g. sweep_0.02, sweep_1.5)\n",
                   o.kernel.c_str(), kSweepMinUs, kSweepMaxUs);
      return 2;
    }
    sweep.emplace_back(o.kernel, us);
  }
  bool calibrated = false;
  double steps_per_ns = 0;
  for (const auto& [name, us] : sweep) {
    if (!calibrated) {
      steps_per_ns = busy_steps_per_ns();
      calibrated = true;
    }
    // Start from the rate, then correct against the task itself, timed as it
    // will run (short loops carry call and warm-up costs the rate hides).
    auto steps = static_cast<std::int64_t>(us * 1000.0 * steps_per_ns + 0.5);
    for (int round = 0; round < 4; ++round) {
      std::vector<double> times;
      for (int t = 0; t < 5; ++t) {
        auto t0 = clock::now();
        for (int i = 0; i < 2000; ++i) do_not_optimize(busy(1, steps));
        times.push_back(1e9 * seconds_between(t0, clock::now()) / 2000.0);
      }
      std::sort(times.begin(), times.end());
      const double measured = times[times.size() / 2];
      steps = std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(steps) * us * 1000.0 / measured + 0.5));
    }
    const long iters = option_value(o, "--iters", static_cast<long>(default_iters / std::max(1.0, us)));
    std::uint64_t out_a = 0, out_b = 0;
    auto fa = [&out_a, steps] { out_a = busy(1, steps); };
    auto fb = [&out_b, steps] { out_b = busy(1, steps); };
    // One task alone, here: the size the calibration reached (the median of
    // five runs of 1000 calls, as the report sets it beside the nominal size).
    std::vector<double> alone;
    for (int t = 0; t < 5; ++t) {
      auto t0 = clock::now();
      for (int i = 0; i < 1000; ++i) fa();
      alone.push_back(1e9 * seconds_between(t0, clock::now()) / 1000.0);
    }
    std::sort(alone.begin(), alone.end());
    const double task_ns = alone[alone.size() / 2];
    record r{"tiny", name, runtime_name, o.workers, "ns", {}, iters, info};
    r.extra.add("iters", std::int64_t{iters});
    r.extra.add("task_us", us);
    r.extra.add("steps", steps);
    r.extra.add("task_ns_measured", task_ns);
    for (int rep = 0; rep < o.warmup + o.reps; ++rep) {
      const double seconds = time_pairs(env, fa, fb, iters);
      if (out_a != out_b || out_a != busy(1, steps)) {
        check_result(name, runtime_name, static_cast<std::int64_t>(out_a), static_cast<std::int64_t>(busy(1, steps)));
      }
      if (rep >= o.warmup) r.samples.push_back(1e9 * seconds / static_cast<double>(iters));
    }
    emit(r);
  }

  if (o.wants("roundtrip") && !o.kernel.empty()) {
    record r{"tiny", "roundtrip", runtime_name, o.workers, "ns", {}, 0, info};
    const long count = option_value(o, "--count", o.quick ? 100000 : 1000000);
    for (int rep = 0; rep < o.reps; ++rep) r.samples.push_back(roundtrip_ns(count));
    r.extra.add("count", std::int64_t{count});
    emit(r);
  }
  return 0;
}

}  // namespace mote_bench::tiny
