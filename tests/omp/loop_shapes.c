// Worksharing loops of every shape: collapse(2) (rectangular and
// triangular), negative steps, empty loops and loops with fewer iterations
// than threads, nowait, lastprivate, and the reductions gcc 12 routes through
// GOMP_loop_start: reduction(task, +) with in_reduction tasks, and
// reduction(inscan, +) with inclusive and exclusive scans.
#include <omp.h>

#include "omp_check.h"

enum { kRows = 37, kCols = 53 };

static void collapsed(void) {
  static int hits[kRows][kCols];
  static int thread_of[kRows * kCols];
  memset(hits, 0, sizeof hits);
  int threads = omp_get_max_threads();
#pragma omp parallel for collapse(2) schedule(static, 5)
  for (int i = 0; i < kRows; ++i) {
    for (int j = 0; j < kCols; ++j) {
      __atomic_fetch_add(&hits[i][j], 1, __ATOMIC_RELAXED);
      thread_of[i * kCols + j] = omp_get_thread_num();
    }
  }
  for (int k = 0; k < kRows * kCols; ++k) {
    CHECK(hits[k / kCols][k % kCols] == 1, "collapse(2) static 5: (%d,%d) ran %d times", k / kCols,
          k % kCols, hits[k / kCols][k % kCols]);
    // The collapsed iteration space is one loop: chunk k/5 on thread (k/5) mod T.
    CHECK(thread_of[k] == (k / 5) % threads,
          "collapse(2) static 5: logical iteration %d on thread %d", k, thread_of[k]);
  }
#pragma omp parallel for collapse(2) schedule(dynamic, 3)
  for (int i = kRows - 1; i >= 0; --i) {
    for (long j = 0; j < 2L * kCols; j += 2) {
      __atomic_fetch_add(&hits[i][j / 2], 2, __ATOMIC_RELAXED);
    }
  }
  unsigned long long base = 1ull << 62;
#pragma omp parallel for collapse(2) schedule(guided)
  for (unsigned long long i = base; i < base + kRows; ++i) {
    for (unsigned long long j = 0; j < kCols; ++j) {
      __atomic_fetch_add(&hits[i - base][j], 4, __ATOMIC_RELAXED);
    }
  }
  for (int i = 0; i < kRows; ++i) {
    for (int j = 0; j < kCols; ++j) {
      CHECK(hits[i][j] == 7,
            "collapse(2) with dynamic, guided, ull: (%d,%d) counted %d, 7 expected", i, j,
            hits[i][j]);
    }
  }

  // Triangular (non-rectangular) collapse: j runs up to i.
  static int tri[kCols][kCols];
  memset(tri, 0, sizeof tri);
#pragma omp parallel for collapse(2)
  for (int i = 0; i < kCols; ++i) {
    for (int j = 0; j <= i; ++j) __atomic_fetch_add(&tri[i][j], 1, __ATOMIC_RELAXED);
  }
  for (int i = 0; i < kCols; ++i) {
    for (int j = 0; j < kCols; ++j) {
      CHECK(tri[i][j] == (j <= i), "triangular collapse(2): (%d,%d) ran %d times", i, j, tri[i][j]);
    }
  }
}

static void negative_steps(void) {
  static int hits[200];
  memset(hits, 0, sizeof hits);
  int last = 0;
#pragma omp parallel
  {
#pragma omp for schedule(dynamic, 2) lastprivate(last)
    for (int i = 99; i > -100; i -= 3) {
      __atomic_fetch_add(&hits[i + 100], 1, __ATOMIC_RELAXED);
      last = i;
    }
#pragma omp for schedule(guided, 2)
    for (long i = 98; i >= -99; i -= 3) __atomic_fetch_add(&hits[i + 100], 2, __ATOMIC_RELAXED);
#pragma omp for schedule(static, 4)
    for (int i = 97; i > -101; i -= 3) __atomic_fetch_add(&hits[i + 100], 4, __ATOMIC_RELAXED);
  }
  // 99, 96, ..., -99 once; 98, 95, ..., -97 twice; 97, 94, ..., -98 four times.
  for (int i = -99; i <= 99; ++i) {
    int r = ((i % 3) + 3) % 3;
    int want = r == 0 ? 1 : r == 2 ? 2 : 4;
    CHECK(hits[i + 100] == want, "negative steps: %d counted %d, %d expected", i, hits[i + 100],
          want);
  }
  CHECK(last == -99, "lastprivate of a loop counting down by 3: %d, -99 expected", last);
}

static void empty_and_tiny(void) {
  int ran = 0, after = 0;
  volatile int five = 5, ten = 10;
#pragma omp parallel
  {
#pragma omp for schedule(dynamic)
    for (int i = five; i < five; ++i) __atomic_fetch_add(&ran, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(guided, 3) nowait
    for (int i = ten; i < 0; ++i) __atomic_fetch_add(&ran, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(static)
    for (int i = 0; i > ten; --i) __atomic_fetch_add(&ran, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(runtime)
    for (unsigned long long u = (unsigned long long)ten; u < 10ull; ++u) {
      __atomic_fetch_add(&ran, 1, __ATOMIC_RELAXED);
    }
#pragma omp for schedule(static, 3)
    for (long i = ten; i < ten; i += 2) __atomic_fetch_add(&ran, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&after, 1, __ATOMIC_RELAXED);
  }
  CHECK(ran == 0, "empty loops ran %d iterations", ran);
  CHECK(after == omp_get_max_threads(), "%d threads passed the empty loops", after);

  // One iteration, and fewer iterations than threads: each runs once.
  int one = 0, few[3] = {0};
#pragma omp parallel
  {
#pragma omp for schedule(dynamic, 5)
    for (int i = 0; i < 1; ++i) __atomic_fetch_add(&one, 1, __ATOMIC_RELAXED);
#pragma omp for schedule(guided)
    for (int i = 0; i < 3; ++i) __atomic_fetch_add(&few[i], 1, __ATOMIC_RELAXED);
  }
  CHECK(one == 1 && few[0] == 1 && few[1] == 1 && few[2] == 1, "tiny loops: %d, %d %d %d", one,
        few[0], few[1], few[2]);
}

// nowait loops, then a barrier: everything done by then.
static void nowait_loops(void) {
  enum { kN = 5000 };
  static int a[kN], b[kN];
  int bad = 0;
#pragma omp parallel reduction(+ : bad)
  {
#pragma omp for schedule(dynamic, 16) nowait
    for (int i = 0; i < kN; ++i) a[i] = i;
#pragma omp for schedule(guided) nowait
    for (int i = 0; i < kN; ++i) b[i] = -i;
#pragma omp barrier
#pragma omp for schedule(static)
    for (int i = 0; i < kN; ++i) {
      if (a[i] != i || b[i] != -i) bad++;
    }
  }
  CHECK(bad == 0, "after nowait loops and a barrier, %d elements were not written", bad);
}

static void task_reduction_loop(void) {
  enum { kN = 4000 };
  long sum = 0, tasks_sum = 0;
#pragma omp parallel reduction(task, + : tasks_sum)
  {
#pragma omp for reduction(task, + : sum) schedule(dynamic, 10)
    for (int i = 0; i < kN; ++i) {
      sum += i;  // the loop's own part of the reduction
#pragma omp task in_reduction(+ : sum) firstprivate(i)
      sum += 2L * i;  // and a task's
    }
#pragma omp single
    for (int k = 1; k <= 100; ++k) {
#pragma omp task in_reduction(+ : tasks_sum) firstprivate(k)
      tasks_sum += k;
    }
  }
  CHECK(sum == 3L * kN * (kN - 1) / 2, "for reduction(task, +): %ld, %ld expected", sum,
        3L * kN * (kN - 1) / 2);
  CHECK(tasks_sum == 5050, "parallel reduction(task, +): %ld, 5050 expected", tasks_sum);
}

static void scans(void) {
  enum { kN = 3000 };
  static long in[kN], inclusive[kN], exclusive[kN];
  for (int i = 0; i < kN; ++i) in[i] = (i * 37) % 101 - 50;
  long acc = 0, acc2 = 0;
#pragma omp parallel for reduction(inscan, + : acc)
  for (int i = 0; i < kN; ++i) {
    acc += in[i];
#pragma omp scan inclusive(acc)
    inclusive[i] = acc;
  }
#pragma omp parallel
  {
#pragma omp for reduction(inscan, + : acc2)
    for (int i = 0; i < kN; ++i) {
      exclusive[i] = acc2;
#pragma omp scan exclusive(acc2)
      acc2 += in[i];
    }
  }
  long serial = 0;
  for (int i = 0; i < kN; ++i) {
    CHECK(exclusive[i] == serial, "exclusive scan at %d: %ld, serial %ld", i, exclusive[i], serial);
    serial += in[i];
    CHECK(inclusive[i] == serial, "inclusive scan at %d: %ld, serial %ld", i, inclusive[i], serial);
  }
  CHECK(acc == serial && acc2 == serial, "scan totals %ld %ld, serial %ld", acc, acc2, serial);
}

int main(void) {
  for (int rep = 0; rep < OMPT_SIZE(5, 1); ++rep) {
    collapsed();
    negative_steps();
    empty_and_tiny();
    nowait_loops();
    task_reduction_loop();
    scans();
  }
  puts("loop_shapes: ok");
  return 0;
}
