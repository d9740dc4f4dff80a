// Data-sharing clauses of a parallel region and its loops: threadprivate
// (persisting between regions of the same team size), copyin (the
// primary thread's copy to every thread), firstprivate, lastprivate
// (the sequentially last iteration's value), private.
#include <omp.h>

#include "omp_check.h"

struct pair {
  long a;
  double b;
};

static int counter;
static long vector[8];
static struct pair record;
#pragma omp threadprivate(counter, vector, record)

static void threadprivate_copyin(void) {
  omp_set_dynamic(0);  // persistence of threadprivate data needs dyn-var false
  int n = omp_get_max_threads();
  counter = 42;
  for (int i = 0; i < 8; ++i) vector[i] = 100 + i;
  record.a = -7;
  record.b = 0.25;
  int bad = 0;
#pragma omp parallel copyin(counter, vector, record) reduction(+ : bad)
  {
    // copyin: every thread starts from the primary thread's values.
    if (counter != 42 || record.a != -7 || record.b != 0.25) bad++;
    for (int i = 0; i < 8; ++i) {
      if (vector[i] != 100 + i) bad++;
    }
    int id = omp_get_thread_num();
    // Each thread's own copy: another thread's writes never show here.
    counter = 1000 + id;
    vector[id % 8] = -id;
    record.a = id;
#pragma omp barrier
    if (counter != 1000 + id || record.a != id || vector[id % 8] != -id) bad++;
  }
  CHECK(bad == 0, "%d threadprivate values differed inside the copyin region", bad);
  CHECK(counter == 1000, "the primary thread's copy after the region: %d", counter);

  // The next region with the same number of threads: each thread finds the
  // values it left (OpenMP: dyn-var false, same team size, not nested).
  int seen[64];
  for (int i = 0; i < 64; ++i) seen[i] = -1;
#pragma omp parallel num_threads(n)
  {
    int id = omp_get_thread_num();
    if (id < 64) seen[id] = (counter == 1000 + id && record.a == id) ? 1 : 0;
  }
  for (int i = 0; i < n && i < 64; ++i) {
    CHECK(seen[i] == 1, "thread %d did not find its threadprivate values of the previous region",
          i);
  }
}

static void firstprivate_private(void) {
  int x = 5;
  long arr[4] = {1, 2, 3, 4};
  int bad = 0;
#pragma omp parallel firstprivate(x, arr) reduction(+ : bad)
  {
    if (x != 5 || arr[0] != 1 || arr[3] != 4) bad++;
    x += omp_get_thread_num();
    arr[0] = -1;
#pragma omp barrier
    if (x != 5 + omp_get_thread_num() || arr[0] != -1) bad++;
  }
  CHECK(bad == 0, "%d firstprivate copies differed", bad);
  CHECK(x == 5 && arr[0] == 1, "firstprivate changed the original: x %d arr[0] %ld", x, arr[0]);

  int y = 9;
#pragma omp parallel private(y) reduction(+ : bad)
  {
    y = omp_get_thread_num();
#pragma omp barrier
    if (y != omp_get_thread_num()) bad++;
  }
  CHECK(bad == 0, "private copies were shared (%d differed)", bad);
  CHECK(y == 9, "private changed the original: %d", y);
}

static void lastprivate_loops(void) {
  const int n = 1003;
  int last = -1, lp_fp = 7;
  long sq = 0;
#pragma omp parallel for lastprivate(last, sq) schedule(dynamic, 7)
  for (int i = 0; i < n; ++i) {
    last = i;
    sq = (long)i * i;
  }
  CHECK(last == n - 1 && sq == (long)(n - 1) * (n - 1), "lastprivate: %d, %ld", last, sq);

  // firstprivate and lastprivate on one variable: each thread starts from 7,
  // the value after the loop is the last iteration's.
  int bad = 0;
#pragma omp parallel for firstprivate(lp_fp) lastprivate(lp_fp) schedule(static) reduction(+ : bad)
  for (int i = 0; i < n; ++i) {
    if (lp_fp < 7) bad++;
    lp_fp = 7 + i;
  }
  CHECK(bad == 0, "firstprivate+lastprivate: %d iterations found a smaller start", bad);
  CHECK(lp_fp == 7 + n - 1, "firstprivate+lastprivate: %d", lp_fp);

  // lastprivate on the loop variable: its value after a sequential run, one
  // step past the last iteration.
  int i = -1, iterations = 0;
#pragma omp parallel for schedule(guided) lastprivate(i)
  for (i = 0; i < n; i += 3) {
#pragma omp atomic
    iterations++;
  }
  CHECK(i == 1005, "the loop variable after the loop: %d, 1005 expected", i);
  CHECK(iterations == 335, "%d iterations of 335", iterations);
}

int main(void) {
  threadprivate_copyin();
  firstprivate_private();
  lastprivate_loops();
  puts("data_sharing: ok");
  return 0;
}
