// fib: the Fibonacci recursion with both recursive calls as tasks and a
// taskwait, as the Barcelona OpenMP Tasks Suite describes its fib kernel. The
// work per task is a few additions, so the time is the runtime's per-task cost:
// spawning, scheduling, waiting.
//
//   OMP_NUM_THREADS=2 ./bench_omp_fib --n 28 --kernel fib_if_clause --cutoff 10
//
// Kernels: BOTS' six variants (omp_harness.h): fib (a task per call with
// n >= 2, no cut-off), fib_if_clause (calls at depth >= --cutoff are
// if(0) tasks), fib_manual (calls at depth >= --cutoff are serial), each also
// _untied. --cutoff defaults to 10 (BOTS' default depth). The answer is
// checked against the iterative Fibonacci number.
#include "omp_harness.h"

struct fib_state {
  int n;
  int cutoff;
  enum omp_bench_cut cut;
};

static long long fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

// One recursion per tiedness (omp_harness.h, "BOTS' variants").
#define FIB_TASKS(name, tiedness)                                                              \
  static long long name(int n, int depth, const struct fib_state* s) {                        \
    if (n < 2) return n;                                                                       \
    if (s->cut == OMP_BENCH_MANUAL && depth >= s->cutoff) return fib_serial(n);                \
    const int spawn = s->cut != OMP_BENCH_IF_CLAUSE || depth < s->cutoff;                      \
    long long x;                                                                               \
    long long y;                                                                               \
    OMP_BENCH_PRAGMA(omp task shared(x) firstprivate(n, depth, s) if(spawn) tiedness)          \
    x = name(n - 1, depth + 1, s);                                                             \
    OMP_BENCH_PRAGMA(omp task shared(y) firstprivate(n, depth, s) if(spawn) tiedness)          \
    y = name(n - 2, depth + 1, s);                                                             \
    OMP_BENCH_PRAGMA(omp taskwait)                                                             \
    return x + y;                                                                              \
  }
FIB_TASKS(fib_tied, )
FIB_TASKS(fib_untied, untied)

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

// The tasks one call makes (if(0) ones included): two per call with n >= 2
// that is not cut off by hand.
static long long fib_task_count(int n, int depth, const struct fib_state* s) {
  if (n < 2 || (s->cut == OMP_BENCH_MANUAL && depth >= s->cutoff)) return 0;
  return 2 + fib_task_count(n - 1, depth + 1, s) + fib_task_count(n - 2, depth + 1, s);
}

struct fib_kernel {
  struct fib_state s;
  int untied;
};

static int64_t run_fib(void* ctx) {
  const struct fib_kernel* k = ctx;
  long long answer = 0;
#pragma omp parallel
  {
#pragma omp single
    answer = k->untied ? fib_untied(k->s.n, 0, &k->s) : fib_tied(k->s.n, 0, &k->s);
  }
  return answer;
}

static int check_fib(void* ctx, int64_t answer) {
  const struct fib_kernel* k = ctx;
  return answer == fib_known(k->s.n);
}

int main(int argc, char** argv) {
  struct omp_bench_options o = omp_bench_parse(argc, argv);
  omp_bench_known_variants(&o, "fib");
  const int n = (int)omp_bench_long(&o, "--n", 28);
  const int cutoff = (int)omp_bench_long(&o, "--cutoff", 10);
  if (n < 0 || n > 60) omp_bench_usage_error("--n", "out of 0..60");
  for (int v = 0; v < OMP_BENCH_VARIANTS; ++v) {
    const struct omp_bench_variant* var = &omp_bench_variants[v];
    char name[64];
    omp_bench_variant_name(name, sizeof name, "fib", var);
    if (!omp_bench_wants(&o, name)) continue;
    struct fib_kernel fk = {{n, cutoff, var->cut}, var->untied};
    struct omp_bench_kernel k = {.name = name, .run = run_fib, .check = check_fib, .ctx = &fk};
    omp_bench_extra(&k, "n", n);
    omp_bench_extra(&k, "cutoff", var->cut == OMP_BENCH_NO_CUTOFF ? -1 : cutoff);
    omp_bench_extra(&k, "tasks", fib_task_count(n, 0, &fk.s));
    omp_bench_time(&o, &k);
  }
  return 0;
}
