// Suite producer: one thread creates n tasks of a fixed size (0.1, 1 or 10 us
// of computation each), the other workers run them, and the creator joins
// them once it has made them all: the shape XQueue's mesh and Nanos6's
// delegation scheduler are built for. One source, one executable per runtime
// (MOTE_BENCH_PRODUCER):
//
//   bench_producer_mote  mote::task_group spawns and wait(), on a runtime of
//                        --workers workers; the policy comes from the
//                        environment (MOTE_SCHEDULER=steal|delegation|mesh,
//                        MOTE_MESH_BALANCE), set per job in suites.json
//   bench_producer_tbb   oneTBB task_group run() and wait() in a task_arena
//   bench_producer_gomp  GNU OpenMP: parallel, single, a task per item,
//                        taskwait (the single's barrier also runs tasks)
//
// Kernels (ns per task, wall time of one round / n):
//   task_100ns  n = 20000 tasks of 0.1 us
//   task_1us    n = 10000 tasks of 1 us
//   task_10us   n = 2000 tasks of 10 us
// (a tenth of those with --quick). A task's work is a calibrated loop of
// dependent multiply-adds; the checksum is the number of tasks run.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>

#include "common/harness.hpp"

#if MOTE_BENCH_PRODUCER_mote
#include "mote/mote.hpp"
#define MOTE_BENCH_RUNTIME_NAME "mote"
#elif MOTE_BENCH_PRODUCER_tbb
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#define MOTE_BENCH_RUNTIME_NAME "onetbb"
#elif MOTE_BENCH_PRODUCER_gomp
#include <omp.h>
#define MOTE_BENCH_RUNTIME_NAME "gnu_omp"
#else
#error "define MOTE_BENCH_PRODUCER_<mote|tbb|gomp>"
#endif

namespace {

using namespace mote_bench;

// A dependent chain the compiler cannot remove or shorten.
inline std::uint64_t spin_work(std::uint64_t iters) {
  std::uint64_t x = iters;
  for (std::uint64_t i = 0; i < iters; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    asm volatile("" : "+r"(x));
  }
  return x;
}

// Iterations of spin_work per microsecond on this machine: the fastest of
// many short trials (about 20 us each), so that a loaded machine, which
// preempts now and then, still yields an uninterrupted trial and every
// runtime's executable calibrates the same task size.
double iterations_per_us() {
  double best = 0;
  for (int round = 0; round < 400; ++round) {
    const std::uint64_t iters = 20'000;
    const auto t0 = clock::now();
    do_not_optimize(spin_work(iters));
    const double us = 1e6 * seconds_between(t0, clock::now());
    if (us > 0) best = std::max(best, static_cast<double>(iters) / us);
  }
  return best;
}

std::atomic<std::int64_t> g_ran{0};

inline void task_body(std::uint64_t iters) {
  do_not_optimize(spin_work(iters));
  g_ran.fetch_add(1, std::memory_order_relaxed);
}

#if MOTE_BENCH_PRODUCER_mote
struct runner {
  explicit runner(unsigned workers) : rt(make(workers)) {}
  static mote::runtime_options make(unsigned workers) {
    mote::runtime_options o;
    o.num_workers = workers;
    return o;
  }
  std::int64_t round(long n, std::uint64_t iters) {
    g_ran.store(0);
    rt.run([n, iters] {
      mote::task_group g;
      for (long i = 0; i < n; ++i) g.spawn([iters] { task_body(iters); });
      g.wait();
    });
    return g_ran.load();
  }
  mote::runtime rt;
};
#elif MOTE_BENCH_PRODUCER_tbb
struct runner {
  explicit runner(unsigned workers) : arena(static_cast<int>(workers)) {}
  std::int64_t round(long n, std::uint64_t iters) {
    g_ran.store(0);
    arena.execute([&] {
      tbb::task_group g;
      for (long i = 0; i < n; ++i) g.run([iters] { task_body(iters); });
      g.wait();
    });
    return g_ran.load();
  }
  tbb::task_arena arena;
};
#else
struct runner {
  explicit runner(unsigned workers) : threads(static_cast<int>(workers)) {}
  std::int64_t round(long n, std::uint64_t iters) {
    g_ran.store(0);
#pragma omp parallel num_threads(threads)
    {
#pragma omp single
      {
        for (long i = 0; i < n; ++i) {
#pragma omp task firstprivate(iters)
          task_body(iters);
        }
#pragma omp taskwait
      }
    }
    return g_ran.load();
  }
  int threads;
};
#endif

void kernel(const options& o, runner& r, double per_us, const char* name, double task_us, long n) {
  if (!o.wants(name)) return;
  if (o.quick) n /= 10;
  const auto iters = static_cast<std::uint64_t>(per_us * task_us + 0.5);
  record rec = time_kernel(o, "producer", name, MOTE_BENCH_RUNTIME_NAME, "ns", 1e9, n,
                           [&] { return r.round(n, iters); });
  for (double& s : rec.samples) s /= static_cast<double>(n);
  rec.extra.add("tasks", static_cast<std::int64_t>(n))
      .add("task_us", task_us)
      .add("iters", static_cast<std::int64_t>(iters));
  emit(rec);
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse_options(argc, argv);
  const double per_us = iterations_per_us();
  runner r(o.workers);
  kernel(o, r, per_us, "task_100ns", 0.1, 20000);
  kernel(o, r, per_us, "task_1us", 1.0, 10000);
  kernel(o, r, per_us, "task_10us", 10.0, 2000);
  return 0;
}
