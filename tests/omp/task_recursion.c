// GOMP_task and GOMP_taskwait under deep recursion: fib(25) with a task per
// call, a chain of 10000 tasks each waiting for the task it created (the
// waits nest 10000 deep), and a chain of 10000 tasks each creating the next
// and returning at once (no wait: the chain lives on in descendants, held
// by the taskgroup and the barrier).
#include <omp.h>

#include "omp_check.h"

static long fib_tasks(int n) {
  if (n < 2) return n;
  long a, b;
#pragma omp task shared(a) firstprivate(n)
  a = fib_tasks(n - 1);
#pragma omp task shared(b) firstprivate(n)
  b = fib_tasks(n - 2);
#pragma omp taskwait
  return a + b;
}

static long fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

// Each level creates the next and waits for it: depth d of nested waits.
static long waiting_chain(int depth) {
  if (depth == 0) return 0;
  long below = -1;
#pragma omp task shared(below) firstprivate(depth)
  below = waiting_chain(depth - 1);
#pragma omp taskwait
  return below + 1;
}

// Each level records itself and creates the next without waiting.
static int* chain_levels;
static void fire_and_forget_chain(int depth) {
  __atomic_fetch_add(&chain_levels[depth], 1, __ATOMIC_RELAXED);
  if (depth == 0) return;
#pragma omp task firstprivate(depth)
  fire_and_forget_chain(depth - 1);
}

int main(void) {
  const int n = OMPT_SIZE(25, 18);
  long want = fib_serial(n);
  for (int rep = 0; rep < OMPT_SIZE(3, 1); ++rep) {
    long got = -1;
#pragma omp parallel
#pragma omp single
    got = fib_tasks(n);
    CHECK(got == want, "fib(%d) with tasks: %ld, serial %ld", n, got, want);
  }

  // The tasks may also be created by every thread at once.
  long sums = 0;
#pragma omp parallel reduction(+ : sums)
  sums += fib_tasks(OMPT_SIZE(20, 14));
  CHECK(sums == omp_get_max_threads() * fib_serial(OMPT_SIZE(20, 14)), "fib from every thread: %ld",
        sums);

  const int depth = OMPT_SIZE(10000, 2000);
  long levels = -1;
#pragma omp parallel
#pragma omp single
  levels = waiting_chain(depth);
  CHECK(levels == depth, "a chain of %d waiting tasks counted %ld levels", depth, levels);

  chain_levels = calloc((size_t)depth + 1, sizeof *chain_levels);
  CHECK(chain_levels != NULL, "out of memory");
#pragma omp parallel
  {
#pragma omp single
    {
#pragma omp taskgroup
      fire_and_forget_chain(depth);
      // The taskgroup waited for every descendant, not only the first task.
      for (int d = 0; d <= depth; ++d) {
        CHECK(chain_levels[d] == 1, "after the taskgroup, chain level %d ran %d times", d,
              chain_levels[d]);
      }
    }
    // And again without a taskgroup: the barrier at the end of single waits.
#pragma omp single
    fire_and_forget_chain(depth);
  }
  for (int d = 0; d <= depth; ++d) {
    CHECK(chain_levels[d] == 2, "after the region, chain level %d ran %d times", d,
          chain_levels[d]);
  }
  free(chain_levels);
  puts("task_recursion: ok");
  return 0;
}
