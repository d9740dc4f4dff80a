// OpenMP and mote's own API in one program: a mote::task_group inside
// OpenMP tasks, mote::parallel_for and mote::join inside a parallel region's
// single, and OpenMP parallel regions inside mote tasks. On mote's
// libgomp.so.1 both run on one set of workers; on GNU's they are two
// runtimes side by side. Either way the results must be right.
#include <omp.h>

#include <atomic>
#include <mote/mote.hpp>
#include <numeric>
#include <vector>

#include "omp_check.h"

namespace {

long fib_join(int n) {
  if (n < 2) return n;
  auto [a, b] = mote::join([n] { return fib_join(n - 1); }, [n] { return fib_join(n - 2); });
  return a + b;
}

long fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

// mote::task_group inside OpenMP tasks.
void groups_in_omp_tasks() {
  const int tasks = OMPT_SIZE(64, 16);
  std::vector<long> results(tasks, -1);
#pragma omp parallel
#pragma omp single
  for (int k = 0; k < tasks; ++k) {
#pragma omp task firstprivate(k) shared(results)
    {
      std::vector<long> parts(16, 0);
      mote::task_group g;
      for (int j = 0; j < 16; ++j) g.spawn([&parts, j, k] { parts[j] = static_cast<long>(j) * k; });
      g.wait();
      results[k] = std::accumulate(parts.begin(), parts.end(), 0L);
    }
  }
  for (int k = 0; k < tasks; ++k) {
    CHECK(results[k] == 120L * k, "task_group in OpenMP task %d summed %ld, %ld expected", k,
          results[k], 120L * k);
  }
}

// mote::parallel_for and mote::join from the thread that runs a single.
void mote_loops_in_single() {
  const int n = OMPT_SIZE(200000, 20000);
  std::vector<int> v(n, 0);
  long fib = 0;
  int others = 0;
#pragma omp parallel
  {
#pragma omp single
    {
      mote::parallel_for(0, n, [&v](int i) { v[i] = 2 * i + 1; });
      fib = fib_join(OMPT_SIZE(22, 16));
    }
    // The other threads of the team waited at the single's barrier.
#pragma omp atomic
    others++;
  }
  for (int i = 0; i < n; ++i)
    CHECK(v[i] == 2 * i + 1, "parallel_for in single: v[%d] = %d", i, v[i]);
  CHECK(fib == fib_serial(OMPT_SIZE(22, 16)), "mote::join in single: fib %ld", fib);
  CHECK(others == omp_get_max_threads(), "%d threads left the region", others);
}

// OpenMP parallel regions (and tasks) inside mote tasks.
void omp_in_mote_tasks() {
  const int tasks = 4;
  std::vector<long> sums(tasks, -1), task_sums(tasks, -1);
  std::vector<int> teams(tasks, 0);
  mote::task_group g;
  for (int t = 0; t < tasks; ++t) {
    g.spawn([&sums, &task_sums, &teams, t] {
      long s = 0;
      int team = 0;
#pragma omp parallel for reduction(+ : s) reduction(max : team) schedule(dynamic, 64)
      for (int i = 0; i < 10000; ++i) {
        s += i + t;
        if (omp_get_num_threads() > team) team = omp_get_num_threads();
      }
      sums[t] = s;
      teams[t] = team;
      long ts = 0;
#pragma omp parallel
#pragma omp single
      for (int k = 0; k < 100; ++k) {
#pragma omp task shared(ts) firstprivate(k)
        {
#pragma omp atomic
          ts += k;
        }
      }
      task_sums[t] = ts;
    });
  }
  g.wait();
  for (int t = 0; t < tasks; ++t) {
    long want = 10000L * 9999 / 2 + 10000L * t;
    CHECK(sums[t] == want, "OpenMP loop in mote task %d: %ld, %ld expected", t, sums[t], want);
    CHECK(teams[t] >= 1, "OpenMP loop in mote task %d ran on a team of %d", t, teams[t]);
    CHECK(task_sums[t] == 4950, "OpenMP tasks in mote task %d: %ld", t, task_sums[t]);
  }
}

}  // namespace

int main() {
  for (int rep = 0; rep < OMPT_SIZE(2, 1); ++rep) {
    groups_in_omp_tasks();
    mote_loops_in_single();
    omp_in_mote_tasks();
  }
  std::puts("mixed: ok");
  return 0;
}
