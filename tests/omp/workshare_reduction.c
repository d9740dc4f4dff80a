// Task reductions on worksharing constructs, which gcc 12 starts through
// the OpenMP 5.0 entry points that carry a reduction descriptor:
// GOMP_scope_start (scope), GOMP_sections2_start (sections),
// GOMP_loop_start and GOMP_loop_ull_start (for), GOMP_loop_ordered_start and
// GOMP_loop_ull_ordered_start (for ordered), GOMP_loop_doacross_start and
// GOMP_loop_ull_doacross_start (for ordered(1) with depend(sink/source)),
// and GOMP_workshare_task_reduction_unregister at their end. Tasks created
// in each construct add into its reduction; the totals are checked, and the
// ordered and doacross parts keep their order.
#include <omp.h>

#include "omp_check.h"

enum { kN = 300 };

static int logbook[kN];
static int logged;
static unsigned long chain[kN];

int main(void) {
  // Bounds the compiler cannot narrow: the loops stay unsigned long long.
  volatile unsigned long long top = 1ull << 63;
  const unsigned long long base = top;
  for (int rep = 0; rep < OMPT_SIZE(2, 1); ++rep) {
    long scope_sum = 0, sections_sum = 0, loop_sum = 0, ull_sum = 0, ordered_sum = 0;
    long ull_ordered_sum = 0, doacross_sum = 0, ull_doacross_sum = 0;
    logged = 0;
#pragma omp parallel
    {
#pragma omp scope reduction(task, + : scope_sum)
      {
#pragma omp task in_reduction(+ : scope_sum)
        scope_sum += 1;
        scope_sum += 10;  // each thread's own part
      }
#pragma omp sections reduction(task, + : sections_sum)
      {
#pragma omp section
        {
#pragma omp task in_reduction(+ : sections_sum)
          sections_sum += 100;
        }
#pragma omp section
        sections_sum += 1000;
      }
#pragma omp for reduction(task, + : loop_sum) schedule(dynamic, 7)
      for (int i = 0; i < kN; ++i) {
#pragma omp task in_reduction(+ : loop_sum) firstprivate(i)
        loop_sum += i;
      }
#pragma omp for reduction(task, + : ull_sum) schedule(guided)
      for (unsigned long long u = base; u < base + kN; ++u) {
#pragma omp task in_reduction(+ : ull_sum) firstprivate(u)
        ull_sum += (long)(u - base);
      }
#pragma omp for ordered reduction(task, + : ordered_sum) schedule(dynamic, 3)
      for (int i = 0; i < kN; ++i) {
#pragma omp task in_reduction(+ : ordered_sum) firstprivate(i)
        ordered_sum += i;
#pragma omp ordered
        logbook[logged++] = i;
      }
#pragma omp for ordered reduction(task, + : ull_ordered_sum) schedule(static, 5)
      for (unsigned long long u = base; u < base + kN; ++u) {
#pragma omp task in_reduction(+ : ull_ordered_sum) firstprivate(u)
        ull_ordered_sum += 2;
#pragma omp ordered
        logbook[u - base] += 1;
      }
#pragma omp for ordered(1) reduction(task, + : doacross_sum) schedule(static, 50)
      for (int i = 1; i < kN; ++i) {
#pragma omp ordered depend(sink : i - 1)
        chain[i] = chain[i - 1] + i;
#pragma omp ordered depend(source)
#pragma omp task in_reduction(+ : doacross_sum)
        doacross_sum += 1;
      }
#pragma omp for ordered(1) reduction(task, + : ull_doacross_sum) schedule(dynamic, 50)
      for (unsigned long long u = base + 1; u < base + kN; ++u) {
#pragma omp ordered depend(sink : u - 1)
        chain[u - base] = chain[u - base - 1] * 3 + 1;
#pragma omp ordered depend(source)
#pragma omp task in_reduction(+ : ull_doacross_sum)
        ull_doacross_sum += 1;
      }
    }
    long threads = omp_get_max_threads();
    long triangle = (long)kN * (kN - 1) / 2;
    CHECK(scope_sum == 11 * threads, "scope reduction(task): %ld, %ld expected", scope_sum,
          11 * threads);
    CHECK(sections_sum == 1100, "sections reduction(task): %ld, 1100 expected", sections_sum);
    CHECK(loop_sum == triangle, "for reduction(task): %ld, %ld expected", loop_sum, triangle);
    CHECK(ull_sum == triangle, "for reduction(task) over unsigned long long: %ld", ull_sum);
    CHECK(ordered_sum == triangle, "for ordered reduction(task): %ld", ordered_sum);
    CHECK(ull_ordered_sum == 2L * kN, "for ordered reduction(task), unsigned long long: %ld",
          ull_ordered_sum);
    CHECK(doacross_sum == kN - 1 && ull_doacross_sum == kN - 1,
          "doacross reduction(task): %ld and %ld, %d expected", doacross_sum, ull_doacross_sum,
          kN - 1);
    for (int i = 0; i < kN; ++i) {
      CHECK(logbook[i] == i + 1, "ordered blocks: entry %d is %d, %d expected", i, logbook[i],
            i + 1);
    }
    unsigned long want = 0;
    for (int i = 1; i < kN; ++i) want = want * 3 + 1;
    CHECK(chain[kN - 1] == want, "doacross chain ends at %lx, serial %lx", chain[kN - 1], want);
  }
  puts("workshare_reduction: ok");
  return 0;
}
