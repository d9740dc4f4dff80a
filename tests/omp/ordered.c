// for ordered with #pragma omp ordered: GOMP_loop_ordered_*_start/next,
// GOMP_ordered_start/end, for each schedule and for unsigned long long
// loops. The ordered blocks append their iteration to a log without a
// lock; the log must read 0, 1, 2, ... (sequential order), while the
// unordered part of each iteration runs in parallel.
#include <omp.h>

#include "omp_check.h"

enum { kN = 300 };

static int logbook[kN];
static int logged;

static void check_log(const char* what) {
  CHECK(logged == kN, "%s: %d ordered blocks ran, %d expected", what, logged, kN);
  for (int i = 0; i < kN; ++i) {
    CHECK(logbook[i] == i, "%s: ordered block %d logged iteration %d", what, i, logbook[i]);
  }
  logged = 0;
}

// An ordered block appends; the work before it is unordered.
#define ORDERED_BODY(i)                                      \
  do {                                                       \
    volatile long work = 0;                                  \
    for (int k = 0; k < (int)((i) % 7) * 50; ++k) work += k; \
    _Pragma("omp ordered") { logbook[logged++] = (int)(i); } \
  } while (0)

int main(void) {
  for (int rep = 0; rep < OMPT_SIZE(2, 1); ++rep) {
#pragma omp parallel for ordered schedule(static)
    for (int i = 0; i < kN; ++i) ORDERED_BODY(i);
    check_log("schedule(static)");
#pragma omp parallel for ordered schedule(static, 3)
    for (int i = 0; i < kN; ++i) ORDERED_BODY(i);
    check_log("schedule(static, 3)");
#pragma omp parallel for ordered schedule(dynamic)
    for (int i = 0; i < kN; ++i) ORDERED_BODY(i);
    check_log("schedule(dynamic)");
#pragma omp parallel for ordered schedule(dynamic, 5)
    for (int i = 0; i < kN; ++i) ORDERED_BODY(i);
    check_log("schedule(dynamic, 5)");
#pragma omp parallel for ordered schedule(guided, 2)
    for (int i = 0; i < kN; ++i) ORDERED_BODY(i);
    check_log("schedule(guided, 2)");
#pragma omp parallel for ordered schedule(runtime)
    for (int i = 0; i < kN; ++i) ORDERED_BODY(i);
    check_log("schedule(runtime)");
    // A loop counting down: sequential order is from the top.
#pragma omp parallel for ordered schedule(dynamic, 4)
    for (int i = kN - 1; i >= 0; --i) ORDERED_BODY(kN - 1 - i);
    check_log("schedule(dynamic, 4), counting down");
    // unsigned long long iterations (GOMP_loop_ull_ordered_*).
    unsigned long long base = 1ull << 40;
#pragma omp parallel for ordered schedule(dynamic, 3)
    for (unsigned long long u = base; u < base + kN; ++u) ORDERED_BODY(u - base);
    check_log("unsigned long long, schedule(dynamic, 3)");
#pragma omp parallel for ordered schedule(static, 1)
    for (unsigned long long u = base; u < base + kN; ++u) ORDERED_BODY(u - base);
    check_log("unsigned long long, schedule(static, 1)");
#pragma omp parallel for ordered schedule(guided)
    for (unsigned long long u = base; u < base + kN; ++u) ORDERED_BODY(u - base);
    check_log("unsigned long long, schedule(guided)");
#pragma omp parallel for ordered schedule(runtime)
    for (unsigned long long u = base; u < base + kN; ++u) ORDERED_BODY(u - base);
    check_log("unsigned long long, schedule(runtime)");
    // Inside a region, with a reduction beside the ordered part.
    long sum = 0;
#pragma omp parallel
    {
#pragma omp for ordered schedule(dynamic, 2) reduction(+ : sum)
      for (int i = 0; i < kN; ++i) {
        sum += i;
        ORDERED_BODY(i);
      }
    }
    check_log("for ordered reduction(+) in a region");
    CHECK(sum == (long)kN * (kN - 1) / 2, "ordered loop's reduction: %ld", sum);
  }
  puts("ordered: ok");
  return 0;
}
