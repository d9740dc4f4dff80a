// fib: the Fibonacci recursion with both recursive calls as tasks and a
// taskwait, as the Barcelona OpenMP Tasks Suite describes its fib kernel. The
// work per task is a few additions, so the time is the runtime's per-task cost:
// spawning, scheduling, waiting.
//
//   OMP_NUM_THREADS=2 ./bench_omp_fib --n 28 --cutoff 0
//
// --cutoff C runs calls with n <= C serially (default 0: every call with
// n >= 2 makes two tasks). The answer is checked against the iterative
// Fibonacci number.
#include "omp_harness.h"

struct fib_state {
  int n;
  int cutoff;
};

static long long fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

static long long fib_tasks(int n, int cutoff) {
  if (n < 2) return n;
  if (n <= cutoff) return fib_serial(n);
  long long x;
  long long y;
#pragma omp task shared(x) firstprivate(n, cutoff)
  x = fib_tasks(n - 1, cutoff);
#pragma omp task shared(y) firstprivate(n, cutoff)
  y = fib_tasks(n - 2, cutoff);
#pragma omp taskwait
  return x + y;
}

static long long fib_known(int n) {
  long long a = 0;
  long long b = 1;
  for (int i = 0; i < n; ++i) {
    long long next = a + b;
    a = b;
    b = next;
  }
  return a;
}

// The tasks one call makes: two per call with n >= 2 above the cut-off.
static long long fib_task_count(int n, int cutoff) {
  if (n < 2 || n <= cutoff) return 0;
  return 2 + fib_task_count(n - 1, cutoff) + fib_task_count(n - 2, cutoff);
}

static int64_t run_fib(void* ctx) {
  const struct fib_state* s = ctx;
  long long answer = 0;
#pragma omp parallel
  {
#pragma omp single
    answer = fib_tasks(s->n, s->cutoff);
  }
  return answer;
}

static int check_fib(void* ctx, int64_t answer) {
  const struct fib_state* s = ctx;
  return answer == fib_known(s->n);
}

int main(int argc, char** argv) {
  struct omp_bench_options o = omp_bench_parse(argc, argv);
  static const char* const kernels[] = {"fib"};
  omp_bench_known_kernels(&o, kernels, 1);
  struct fib_state s = {(int)omp_bench_long(&o, "--n", 28), (int)omp_bench_long(&o, "--cutoff", 0)};
  if (s.n < 0 || s.n > 60) omp_bench_usage_error("--n", "out of 0..60");
  struct omp_bench_kernel k = {.name = "fib", .run = run_fib, .check = check_fib, .ctx = &s};
  omp_bench_extra(&k, "n", s.n);
  omp_bench_extra(&k, "cutoff", s.cutoff);
  omp_bench_extra(&k, "tasks", fib_task_count(s.n, s.cutoff));
  omp_bench_time(&o, &k);
  return 0;
}
