// The main() body every micro variant shares. A variant supplies its backend
// (bench/backends/) as `env`, built for o.workers threads, with:
//
//   double spawn_loop(long iters)   seconds that `iters` spawn+join pairs of an
//                                   empty task take, timed on a worker of the
//                                   runtime (the loop runs inside the runtime)
//   double group_loop<G>(long tasks)  seconds that `tasks` empty tasks take,
//                                   spawned G = kGroupSize at a time into a
//                                   task group (or as tasks) that is then waited
//   double wake_once()              seconds from handing the runtime a task to
//                                   that task starting on a worker thread (not
//                                   the caller), the runtime having been idle
//   void warm(work)                 runs work() in parallel once, so every
//                                   worker of the runtime has been started
//   long micro_iters                the default loop length
//
// Kernels (choose with --kernel; the runner runs spawn with 1 worker and the
// other two with 2):
//   spawn     ns per spawn+join; --iters N (default: env.micro_iters)
//   group_spawn  ns per task of a group of kGroupSize empty tasks, spawned and
//             waited in a loop; --group-tasks N (default: env.micro_iters)
//   wakeup    us from submit to start after --idle-ms (20) of idleness, long
//             enough for spinning workers to park; --wakeups (50) samples
//   wakeup_long  the same after --long-idle-ms (1000) of idleness;
//             --long-wakeups (8) samples
//   idle_cpu  CPU seconds (user+sys, whole process) consumed while the warmed
//             runtime sits idle for --idle-cpu-ms (2000)
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <string_view>
#include <thread>

#include "../common/harness.hpp"

namespace mote_bench::micro {

// Tasks per group in group_spawn: a typical fan-out (nqueens spawns 12-13).
inline constexpr int kGroupSize = 16;

inline double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * t.tv_usec; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

// A few microseconds of work that the optimizer cannot remove, for warm().
inline std::int64_t small_work() {
  volatile std::int64_t sink = 0;
  for (int i = 0; i < 20000; ++i) sink = sink + i;
  return sink;
}

template <class Env>
int run_suite(const options& o, std::string_view runtime_name, Env& env, const extras& info = {}) {
  using namespace std::chrono;
  // Warm-up, then up to o.reps timed runs of `loop(n)` (stopping early once
  // o.budget_ms is spent), each recorded as ns per unit.
  auto per_unit = [&](record& r, long n, long warm_n, auto loop) {
    for (int i = 0; i < o.warmup; ++i) loop(warm_n);
    double spent = 0;
    for (int i = 0; i < o.reps; ++i) {
      const double s = loop(n);
      r.samples.push_back(1e9 * s / static_cast<double>(n));
      spent += s;
      if (o.budget_ms > 0 && 1e3 * spent >= o.budget_ms) break;
    }
    emit(r);
  };
  if (o.wants("spawn")) {
    const long iters = option_value(o, "--iters", env.micro_iters);
    record r{"micro", "spawn", runtime_name, o.workers, "ns", {}, iters, info};
    r.extra.add("iters", std::int64_t{iters});
    per_unit(r, iters, iters / 10 + 1, [&](long n) { return env.spawn_loop(n); });
  }
  if (o.wants("group_spawn")) {
    const long tasks = option_value(o, "--group-tasks", env.micro_iters);
    record r{"micro", "group_spawn", runtime_name, o.workers, "ns", {}, tasks, info};
    r.extra.add("tasks", std::int64_t{tasks}).add("group_size", std::int64_t{kGroupSize});
    per_unit(r, tasks, tasks / 10 + kGroupSize, [&](long n) { return env.template group_loop<kGroupSize>(n); });
  }
  auto wakeups = [&](const char* kernel, long idle_ms, long count) {
    if (o.workers < 2) usage_error("--workers (wakeup needs 2 or more)", "1");
    record r{"micro", kernel, runtime_name, o.workers, "us", {}, count, info};
    r.extra.add("idle_ms", std::int64_t{idle_ms});
    env.warm([] { return small_work(); });
    for (long i = 0; i < count; ++i) {
      std::this_thread::sleep_for(milliseconds(idle_ms));
      r.samples.push_back(1e6 * env.wake_once());
    }
    emit(r);
  };
  if (o.wants("wakeup")) {
    wakeups("wakeup", option_value(o, "--idle-ms", 20), option_value(o, "--wakeups", 50));
  }
  if (o.wants("wakeup_long")) {
    // The first task after a long idle: the workers (and the CPUs) are asleep.
    wakeups("wakeup_long", option_value(o, "--long-idle-ms", 1000), option_value(o, "--long-wakeups", 8));
  }
  if (o.wants("idle_cpu")) {
    const long idle_ms = option_value(o, "--idle-cpu-ms", 2000);
    record r{"micro", "idle_cpu", runtime_name, o.workers, "cpu_s", {}, o.reps, info};
    r.extra.add("idle_ms", std::int64_t{idle_ms});
    for (int i = 0; i < o.reps; ++i) {
      env.warm([] { return small_work(); });
      double before = process_cpu_seconds();
      std::this_thread::sleep_for(milliseconds(idle_ms));
      r.samples.push_back(process_cpu_seconds() - before);
    }
    emit(r);
  }
  return 0;
}

}  // namespace mote_bench::micro
