// The combined `parallel for`, which gcc turns into one call that starts the
// team and the loop together: GOMP_parallel_loop_dynamic, _guided,
// _nonmonotonic_dynamic, _nonmonotonic_guided, _runtime,
// _nonmonotonic_runtime, _maybe_nonmonotonic_runtime (static schedules are
// GOMP_parallel with the split inlined), with num_threads, if, reductions
// and lastprivate, nested inside an outer region too.
#include <omp.h>

#include "omp_check.h"

enum { kN = 10007 };

static int hits[kN];

static void expect_all(int times, const char* what) {
  for (int i = 0; i < kN; ++i) {
    CHECK(hits[i] == times, "%s: iteration %d counted %d, %d expected", what, i, hits[i], times);
  }
}

#define HIT(i) __atomic_fetch_add(&hits[i], 1, __ATOMIC_RELAXED)

int main(void) {
  for (int rep = 0; rep < OMPT_SIZE(4, 1); ++rep) {
    memset(hits, 0, sizeof hits);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < kN; ++i) HIT(i);
#pragma omp parallel for schedule(static, 7) num_threads(3)
    for (int i = 0; i < kN; ++i) HIT(i);
#pragma omp parallel for schedule(dynamic)
    for (int i = 0; i < kN; ++i) HIT(i);
#pragma omp parallel for schedule(dynamic, 11) num_threads(3)
    for (int i = 0; i < kN; ++i) HIT(i);
#pragma omp parallel for schedule(monotonic : dynamic, 5)
    for (int i = 0; i < kN; ++i) HIT(i);
#pragma omp parallel for schedule(guided)
    for (int i = 0; i < kN; ++i) HIT(i);
#pragma omp parallel for schedule(monotonic : guided, 9)
    for (int i = 0; i < kN; ++i) HIT(i);
#pragma omp parallel for schedule(nonmonotonic : guided, 2)
    for (int i = 0; i < kN; ++i) HIT(i);
#pragma omp parallel for schedule(runtime)
    for (int i = 0; i < kN; ++i) HIT(i);
#pragma omp parallel for schedule(monotonic : runtime)
    for (int i = 0; i < kN; ++i) HIT(i);
#pragma omp parallel for schedule(nonmonotonic : runtime)
    for (int i = 0; i < kN; ++i) HIT(i);
#pragma omp parallel for schedule(auto)
    for (int i = 0; i < kN; ++i) HIT(i);
    expect_all(12, "twelve combined loops");

    // if(0): the whole loop on the encountering thread.
    volatile int zero = 0;
    int others = 0;
#pragma omp parallel for schedule(dynamic, 3) if (zero)
    for (int i = 0; i < kN; ++i) {
      if (omp_get_thread_num() != 0 || omp_get_num_threads() != 1) {
        __atomic_fetch_add(&others, 1, __ATOMIC_RELAXED);
      }
      HIT(i);
    }
    CHECK(others == 0, "if(0) parallel for: %d iterations ran off the encountering thread", others);
    expect_all(13, "if(0) parallel for");

    // Reduction and lastprivate on the combined construct.
    long sum = 0;
    int last = -1;
#pragma omp parallel for schedule(guided, 4) reduction(+ : sum) lastprivate(last)
    for (int i = 0; i < kN; ++i) {
      sum += i;
      last = i;
    }
    CHECK(sum == (long)kN * (kN - 1) / 2 && last == kN - 1, "parallel for reduction %ld, last %d",
          sum, last);

    // Nested: a combined loop per outer thread, two levels active.
    omp_set_max_active_levels(2);
    memset(hits, 0, sizeof hits);
#pragma omp parallel num_threads(2)
    {
      int outer = omp_get_thread_num();
#pragma omp parallel for schedule(dynamic, 13) num_threads(2)
      for (int i = outer; i < kN; i += 2) HIT(i);
    }
    expect_all(1, "nested parallel for");
    omp_set_max_active_levels(1);
  }
  puts("parallel_loop: ok");
  return 0;
}
