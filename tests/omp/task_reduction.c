// Task reductions: taskgroup task_reduction with task in_reduction
// (GOMP_taskgroup_reduction_register/unregister, GOMP_task_reduction_remap),
// with several operators and an array section, nested taskgroups reducing
// the same variable, tasks that take part from nested tasks, and a parallel
// region's reduction(task, ...) fed by tasks of every thread
// (GOMP_parallel_reductions).
#include <limits.h>
#include <omp.h>

#include "omp_check.h"

static void group_reductions(int tasks) {
  long sum = 0, mn = LONG_MAX, mx = LONG_MIN;
  unsigned long prod = 1;
  long hist[8] = {0};
#pragma omp parallel
#pragma omp single
  {
#pragma omp taskgroup task_reduction(+ : sum, hist[0:8]) task_reduction(* : prod) \
    task_reduction(min : mn) task_reduction(max : mx)
    {
      for (int k = 0; k < tasks; ++k) {
#pragma omp task in_reduction(+ : sum, hist[0:8]) in_reduction(* : prod) in_reduction(min : mn) \
    in_reduction(max : mx) firstprivate(k)
        {
          sum += k;
          hist[k % 8] += 1;
          prod *= (unsigned long)(2 * k + 1);
          long v = (k * 7919L) % 1000 - 500;
          if (v < mn) mn = v;
          if (v > mx) mx = v;
          // A child task takes part in the same reduction.
          if (k % 10 == 0) {
#pragma omp task in_reduction(+ : sum) firstprivate(k)
            sum += 1000000L * k;
          }
        }
      }
      // The creating task may take part too.
#pragma omp task in_reduction(+ : sum)
      sum += 7;
    }
  }
  long want_sum = 7, want_mn = LONG_MAX, want_mx = LONG_MIN, want_hist[8] = {0};
  unsigned long want_prod = 1;
  for (int k = 0; k < tasks; ++k) {
    want_sum += k + (k % 10 == 0 ? 1000000L * k : 0);
    want_hist[k % 8] += 1;
    want_prod *= (unsigned long)(2 * k + 1);
    long v = (k * 7919L) % 1000 - 500;
    if (v < want_mn) want_mn = v;
    if (v > want_mx) want_mx = v;
  }
  CHECK(sum == want_sum, "task_reduction(+): %ld, serial %ld", sum, want_sum);
  CHECK(prod == want_prod, "task_reduction(*): %lx, serial %lx", prod, want_prod);
  CHECK(mn == want_mn && mx == want_mx, "task_reduction(min, max): %ld %ld, serial %ld %ld", mn, mx,
        want_mn, want_mx);
  for (int b = 0; b < 8; ++b) {
    CHECK(hist[b] == want_hist[b], "task_reduction on hist[0:8]: bin %d is %ld, serial %ld", b,
          hist[b], want_hist[b]);
  }
}

// An inner taskgroup reduces the same variable; its result joins the outer one.
static void nested_groups(int tasks) {
  long total = 0, inner_seen = -1;
#pragma omp parallel
#pragma omp single
  {
#pragma omp taskgroup task_reduction(+ : total)
    {
      for (int k = 0; k < tasks; ++k) {
#pragma omp task in_reduction(+ : total) firstprivate(k)
        total += 1;
      }
      long inner = 0;
#pragma omp taskgroup task_reduction(+ : inner)
      {
        for (int k = 0; k < tasks; ++k) {
#pragma omp task in_reduction(+ : inner) firstprivate(k)
          inner += 2;
        }
      }
      inner_seen = inner;  // complete once its taskgroup has ended
#pragma omp task in_reduction(+ : total) firstprivate(inner)
      total += inner;
    }
  }
  CHECK(inner_seen == 2L * tasks, "inner task_reduction: %ld, %ld expected", inner_seen,
        2L * tasks);
  CHECK(total == 3L * tasks, "outer task_reduction with the inner result: %ld, %ld expected", total,
        3L * tasks);
}

// reduction(task, +) on a parallel region: tasks of every thread take part.
static void region_task_reduction(int tasks) {
  long sum = 0;
#pragma omp parallel reduction(task, + : sum)
  {
    for (int k = 0; k < tasks; ++k) {
#pragma omp task in_reduction(+ : sum) firstprivate(k)
      sum += k;
    }
    sum += 1;  // each implicit task's own part
  }
  long threads = omp_get_max_threads();
  long want = threads * ((long)tasks * (tasks - 1) / 2 + 1);
  CHECK(sum == want, "parallel reduction(task, +): %ld, %ld expected", sum, want);
}

int main(void) {
  for (int rep = 0; rep < OMPT_SIZE(5, 1); ++rep) {
    group_reductions(OMPT_SIZE(3000, 300));
    nested_groups(OMPT_SIZE(2000, 200));
    region_task_reduction(OMPT_SIZE(1000, 100));
  }
  puts("task_reduction: ok");
  return 0;
}
