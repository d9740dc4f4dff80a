// GOMP_task's flags: final (and omp_in_final; a final task's children are
// included: they run at once, on the same thread, and are final too),
// mergeable, untied (a task that may resume on another thread after a wait
// or a taskyield), priority (with omp_get_max_task_priority, set by
// OMP_MAX_TASK_PRIORITY), and the default firstprivate of a task's locals.
//
//   task_clauses [MAX_PRIORITY]   MAX_PRIORITY: what omp_get_max_task_priority() must be (0)
#include <omp.h>

#include "omp_check.h"

static long fib_final(int n, int cutoff) {
  if (n < 2) return n;
  long a, b;
  // Below the cutoff the task is final: everything under it runs at once.
#pragma omp task shared(a) final(n <= cutoff) mergeable
  a = fib_final(n - 1, cutoff);
#pragma omp task shared(b) final(n <= cutoff) mergeable
  b = fib_final(n - 2, cutoff);
#pragma omp taskwait
  return a + b;
}

static long fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

static void final_tasks(void) {
  int bad = 0;
#pragma omp parallel reduction(+ : bad)
#pragma omp single
  {
    if (omp_in_final()) bad++;
    for (int k = 0; k < 200; ++k) {
#pragma omp task final(1) shared(bad)
      {
        if (!omp_in_final()) {
#pragma omp atomic
          bad++;
        }
        int child_ran = 0, grandchild_ran = 0;
        int here = omp_get_thread_num();
#pragma omp task shared(child_ran, grandchild_ran, bad)
        {
          // Included: the encountering thread runs it before going on.
          if (!omp_in_final() || omp_get_thread_num() != here) {
#pragma omp atomic
            bad++;
          }
#pragma omp task shared(grandchild_ran)
          grandchild_ran = 1;
          if (grandchild_ran != 1) {
#pragma omp atomic
            bad++;
          }
          child_ran = 1;
        }
        if (child_ran != 1) {
#pragma omp atomic
          bad++;
        }
      }
#pragma omp task final(0) shared(bad)
      {
        if (omp_in_final()) {
#pragma omp atomic
          bad++;
        }
      }
    }
  }
  CHECK(bad == 0, "%d final/included task checks failed", bad);

  const int n = OMPT_SIZE(22, 16);
  long got = 0;
#pragma omp parallel
#pragma omp single
  got = fib_final(n, n - 6);
  CHECK(got == fib_serial(n), "fib(%d) with final and mergeable tasks: %ld", n, got);
}

static void untied_tasks(void) {
  const int tasks = OMPT_SIZE(2000, 200);
  long sum = 0;
  int bad = 0;
#pragma omp parallel reduction(+ : bad)
#pragma omp single
  {
    for (int k = 0; k < tasks; ++k) {
#pragma omp task untied shared(sum) firstprivate(k)
      {
        long part = 0;
#pragma omp task shared(part) firstprivate(k)
        part = k;
#pragma omp taskwait
        // An untied task may go on on another thread after a scheduling point.
#pragma omp taskyield
        int t = omp_get_thread_num();
        if (t < 0 || t >= omp_get_num_threads()) {
#pragma omp atomic
          bad++;
        }
#pragma omp atomic
        sum += part + 1;
      }
    }
  }
  CHECK(bad == 0, "%d untied tasks saw a thread number outside the team", bad);
  CHECK(sum == (long)tasks * (tasks + 1) / 2, "untied tasks summed %ld, %ld expected", sum,
        (long)tasks * (tasks + 1) / 2);
}

static void priorities(int max_priority) {
  CHECK(omp_get_max_task_priority() == max_priority, "omp_get_max_task_priority() %d, %d expected",
        omp_get_max_task_priority(), max_priority);
  const int tasks = OMPT_SIZE(5000, 500);
  int* ran = calloc((size_t)tasks, sizeof *ran);
  CHECK(ran != NULL, "out of memory");
#pragma omp parallel
#pragma omp single
  {
    for (int k = 0; k < tasks; ++k) {
      // Priorities above the maximum are allowed (and treated as the maximum).
#pragma omp task priority(k % (max_priority + 3)) firstprivate(k)
      __atomic_fetch_add(&ran[k], 1, __ATOMIC_RELAXED);
    }
  }
  for (int k = 0; k < tasks; ++k)
    CHECK(ran[k] == 1, "task %d with a priority ran %d times", k, ran[k]);
  free(ran);
}

// A task's locals that are not shared in the enclosing context are
// firstprivate: the task sees the value at its creation.
static void default_firstprivate(void) {
  const int tasks = OMPT_SIZE(2000, 200);
  int* got = calloc((size_t)tasks, sizeof *got);
  CHECK(got != NULL, "out of memory");
#pragma omp parallel
#pragma omp single
  {
    int value = 0;
    for (int k = 0; k < tasks; ++k) {
      value = k * 3;
#pragma omp task
      got[k] = value;  // got is a pointer, firstprivate too: the array is shared
      value = -1;
    }
  }
  for (int k = 0; k < tasks; ++k)
    CHECK(got[k] == k * 3, "task %d saw %d, %d at its creation", k, got[k], k * 3);
  free(got);
}

int main(int argc, char** argv) {
  int max_priority = argc > 1 ? atoi(argv[1]) : 0;
  final_tasks();
  untied_tasks();
  priorities(max_priority);
  default_firstprivate();
  puts("task_clauses: ok");
  return 0;
}
