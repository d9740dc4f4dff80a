// Tasks that a runtime may run at once (undeferred) rather than defer: OpenMP
// lets it do so for any task, and mote does for tasks measured too short for a
// hand-off and for tasks made while the spawning thread's queue is deep. Such
// a task is still a task of its own: its children are its own (taskwait and
// taskgroup in it wait for them), its ICVs are its own (a change in it does
// not reach its parent), and it is final only if it was made final. The
// programs repeat small tasks of a few call sites many times, so that every
// site is measured and then run in place; the ctest entries run them with
// mote's hand-off cost at its default, at 0 (every task deferred) and very
// high (every measured site in place).
//
//   omp_task_inplace
#include <omp.h>
#include <stdint.h>

#include "omp_check.h"

static long fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

static long fib_tasks(int n) {
  if (n < 2) return n;
  long x, y;
#pragma omp task shared(x) firstprivate(n)
  x = fib_tasks(n - 1);
#pragma omp task shared(y) firstprivate(n)
  y = fib_tasks(n - 2);
#pragma omp taskwait
  return x + y;
}

// The answer of a recursion whose small tasks run in place.
static void check_fib(void) {
  const int n = OMPT_SIZE(20, 14);
  const long expected = fib_serial(n);
  for (int round = 0; round < 40; ++round) {
    long got = 0;
#pragma omp parallel
#pragma omp single
    got = fib_tasks(n);
    CHECK(got == expected, "fib(%d) %ld, serially %ld (round %d)", n, got, expected, round);
  }
}

// taskwait inside a task waits for that task's children, and a task's own
// ICV changes stay in it: each level sets nthreads-var to its depth + 2 and
// checks it after its children ran (which set theirs), and the leaves count.
static long leaves;

static void nest(int depth) {
  omp_set_num_threads(depth + 2);
  if (depth == 0) {
    __atomic_fetch_add(&leaves, 1, __ATOMIC_RELAXED);
    return;
  }
  int done[3] = {0, 0, 0};
  for (int c = 0; c < 3; ++c) {
#pragma omp task firstprivate(c, depth) shared(done)
    {
      nest(depth - 1);
      __atomic_store_n(&done[c], 1, __ATOMIC_RELEASE);
    }
  }
#pragma omp taskwait
  for (int c = 0; c < 3; ++c) {
    CHECK(__atomic_load_n(&done[c], __ATOMIC_ACQUIRE) == 1, "child %d of a depth-%d task not done after taskwait", c,
          depth);
  }
  CHECK(omp_get_max_threads() == depth + 2, "nthreads-var %d after the children ran, the task set %d",
        omp_get_max_threads(), depth + 2);
}

static void check_nest(void) {
  const int depth = OMPT_SIZE(6, 4);
  long expected = 1;
  for (int d = 0; d < depth; ++d) expected *= 3;
  for (int round = 0; round < 20; ++round) {
    __atomic_store_n(&leaves, 0, __ATOMIC_RELAXED);
#pragma omp parallel
#pragma omp single
    {
      const int outer = omp_get_max_threads();
#pragma omp task
      nest(depth);
#pragma omp taskwait
      CHECK(omp_get_max_threads() == outer, "nthreads-var %d in the single after its task, %d before",
            omp_get_max_threads(), outer);
    }
    CHECK(leaves == expected, "%ld leaves, expected %ld (round %d)", leaves, expected, round);
  }
}

// A taskgroup waits for its tasks' descendants too, whether its tasks ran in
// place or not.
static long grandchildren;

static void check_taskgroup(void) {
  const int tasks = OMPT_SIZE(200, 50);
  for (int round = 0; round < 20; ++round) {
    __atomic_store_n(&grandchildren, 0, __ATOMIC_RELAXED);
#pragma omp parallel
#pragma omp single
    {
#pragma omp taskgroup
      {
        for (int i = 0; i < tasks; ++i) {
#pragma omp task
          {
#pragma omp task
            __atomic_fetch_add(&grandchildren, 1, __ATOMIC_RELAXED);
          }
        }
      }
      CHECK(__atomic_load_n(&grandchildren, __ATOMIC_RELAXED) == tasks,
            "%ld grandchildren done at the taskgroup's end, %d made (round %d)",
            __atomic_load_n(&grandchildren, __ATOMIC_RELAXED), tasks, round);
    }
  }
}

// A task run in place is not final unless made final; a final task's
// descendants are final.
static int not_final_seen_final, final_seen_not_final;

static void check_final(void) {
  for (int round = 0; round < 20; ++round) {
#pragma omp parallel
#pragma omp single
    {
      for (int i = 0; i < 200; ++i) {
#pragma omp task
        {
          if (omp_in_final()) __atomic_store_n(&not_final_seen_final, 1, __ATOMIC_RELAXED);
        }
#pragma omp task final(1)
        {
#pragma omp task
          {
            if (!omp_in_final()) __atomic_store_n(&final_seen_not_final, 1, __ATOMIC_RELAXED);
          }
        }
      }
    }
  }
  CHECK(!not_final_seen_final, "omp_in_final() was true in a task not made final");
  CHECK(!final_seen_not_final, "omp_in_final() was false in a final task's child");
}

int main(void) {
  check_fib();
  check_nest();
  check_taskgroup();
  check_final();
  return 0;
}
