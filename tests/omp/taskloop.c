// GOMP_taskloop and GOMP_taskloop_ull: every iteration once; grainsize(g)
// gives tasks of at least min(g, n) and fewer than 2g iterations;
// num_tasks(k) gives min(k, n) tasks; nogroup does not wait (a taskwait
// after it does); lastprivate, collapse(2), reduction(+) and in_reduction.
// A task's chunk is found through a firstprivate variable, which each task
// of a taskloop gets its own copy of.
#include <omp.h>

#include "omp_check.h"

enum { kN = 10007 };

static int chunk_of[kN];  // the first iteration of the task that ran each iteration
static int runs[kN];
// At file scope: gcc 12 gives the tasks of a taskloop another object than the
// function's own for a function-scope static array.
static int cells[97][103];

static void reset(void) {
  memset(runs, 0, sizeof runs);
  for (int i = 0; i < kN; ++i) chunk_of[i] = -1;
}

// Every iteration once; returns the number of tasks (chunks), and checks
// that each task ran a contiguous range of [lo, hi] iterations.
static int chunks(const char* what, int n, int lo, int hi) {
  int count = 0;
  for (int i = 0; i < n; ++i) {
    CHECK(runs[i] == 1, "%s: iteration %d ran %d times", what, i, runs[i]);
  }
  for (int i = 0; i < n;) {
    int start = chunk_of[i];
    CHECK(start == i, "%s: iteration %d ran in the task that began at %d, not a contiguous chunk",
          what, i, start);
    int end = i;
    while (end < n && chunk_of[end] == start) ++end;
    CHECK(end - start >= lo && end - start <= hi,
          "%s: a task ran %d iterations (%d..%d), %d..%d expected", what, end - start, start,
          end - 1, lo, hi);
    ++count;
    i = end;
  }
  return count;
}

#define RECORD(i, first)                               \
  do {                                                 \
    if ((first) < 0) (first) = (int)(i);               \
    chunk_of[i] = (first);                             \
    __atomic_fetch_add(&runs[i], 1, __ATOMIC_RELAXED); \
  } while (0)

int main(void) {
  for (int rep = 0; rep < OMPT_SIZE(4, 1); ++rep) {
#pragma omp parallel
#pragma omp single
    {
      int first = -1;
      const int grains[] = {1, 7, 100, 5000, 20000};
      for (int g = 0; g < 5; ++g) {
        reset();
        int grain = grains[g];
#pragma omp taskloop grainsize(grain) firstprivate(first)
        for (int i = 0; i < kN; ++i) RECORD(i, first);
        char what[48];
        snprintf(what, sizeof what, "grainsize(%d)", grain);
        int lo = grain < kN ? grain : kN;
        chunks(what, kN, lo, 2 * grain - 1 > kN ? kN : 2 * grain - 1);
      }

      const int counts[] = {1, 2, 3, 64, 20000};
      for (int c = 0; c < 5; ++c) {
        reset();
        int tasks = counts[c];
#pragma omp taskloop num_tasks(tasks) firstprivate(first)
        for (int i = 0; i < kN; ++i) RECORD(i, first);
        char what[48];
        snprintf(what, sizeof what, "num_tasks(%d)", tasks);
        int made = chunks(what, kN, 1, kN);
        int want = tasks < kN ? tasks : kN;
        CHECK(made == want, "%s made %d tasks, %d expected", what, made, want);
      }

      // nogroup: the taskloop does not wait; taskwait waits for its tasks.
      reset();
#pragma omp taskloop nogroup grainsize(64) firstprivate(first)
      for (int i = 0; i < kN; ++i) RECORD(i, first);
#pragma omp taskwait
      chunks("nogroup", kN, 64, 127);

      // Counting down, unsigned long long (GOMP_taskloop_ull), lastprivate.
      reset();
      unsigned long long base = 1ull << 63, last = 0;
#pragma omp taskloop grainsize(10) firstprivate(first) lastprivate(last)
      for (unsigned long long u = base + 3ull * (kN - 1); u >= base; u -= 3) {
        int i = (int)((base + 3ull * (kN - 1) - u) / 3);
        RECORD(i, first);
        last = u;
      }
      chunks("unsigned long long counting down", kN, 10, 19);
      CHECK(last == base, "taskloop lastprivate over unsigned long long: %llx, %llx expected", last,
            base);

      // collapse(2) over a rectangle.
      memset(cells, 0, sizeof cells);
#pragma omp taskloop collapse(2) num_tasks(17)
      for (int a = 0; a < 97; ++a) {
        for (int b = 0; b < 103; ++b) __atomic_fetch_add(&cells[a][b], 1, __ATOMIC_RELAXED);
      }
      for (int a = 0; a < 97; ++a) {
        for (int b = 0; b < 103; ++b) {
          CHECK(cells[a][b] == 1, "taskloop collapse(2): (%d,%d) ran %d times", a, b, cells[a][b]);
        }
      }

      // reduction on the taskloop, and in_reduction into a taskgroup's.
      long sum = 0, group_sum = 0;
#pragma omp taskloop reduction(+ : sum) grainsize(50)
      for (int i = 0; i < kN; ++i) sum += i;
      CHECK(sum == (long)kN * (kN - 1) / 2, "taskloop reduction(+): %ld", sum);
#pragma omp taskgroup task_reduction(+ : group_sum)
      {
#pragma omp taskloop in_reduction(+ : group_sum) num_tasks(8)
        for (int i = 0; i < kN; ++i) group_sum += 2 * i;
#pragma omp task in_reduction(+ : group_sum)
        group_sum += 1;
      }
      CHECK(group_sum == (long)kN * (kN - 1) + 1, "taskloop in_reduction(+): %ld", group_sum);
    }
  }

  // Taskloops started by every thread at once.
  long total = 0;
#pragma omp parallel reduction(+ : total)
  {
    long mine = 0;
#pragma omp taskloop reduction(+ : mine) grainsize(100)
    for (int i = 0; i < kN; ++i) mine += 1;
    total += mine;
  }
  CHECK(total == (long)kN * omp_get_max_threads(), "taskloops from every thread: %ld", total);
  puts("taskloop: ok");
  return 0;
}
