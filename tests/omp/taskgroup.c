// GOMP_taskgroup_start/end and GOMP_taskyield: a taskgroup waits for every
// descendant of the tasks created in it (children, grandchildren, ...);
// taskgroups nest, in the creating task and inside tasks; taskyield is a
// scheduling point anywhere, and the results stay right.
#include <omp.h>
#include <sched.h>

#include "omp_check.h"

// A tree of tasks of the given depth and fan-out, each counting itself.
static void tree(int depth, int fanout, long* count) {
  __atomic_fetch_add(count, 1, __ATOMIC_RELAXED);
  if (depth == 0) return;
  for (int k = 0; k < fanout; ++k) {
#pragma omp task firstprivate(depth, fanout, count)
    tree(depth - 1, fanout, count);
  }
  // No wait: the tasks outlive this one; only an enclosing taskgroup waits.
}

static long tree_size(int depth, int fanout) {
  long size = 1, level = 1;
  for (int d = 0; d < depth; ++d) size += (level *= fanout);
  return size;
}

// Each task opens its own taskgroup for its children: nested groups in tasks.
static long grouped_sum(int depth) {
  if (depth == 0) return 1;
  long parts[3] = {0, 0, 0};
#pragma omp taskgroup
  {
    for (int k = 0; k < 3; ++k) {
#pragma omp task shared(parts) firstprivate(k, depth)
      {
        parts[k] = grouped_sum(depth - 1);
#pragma omp taskyield
      }
    }
  }
  return parts[0] + parts[1] + parts[2] + 1;
}

int main(void) {
  const int depth = OMPT_SIZE(9, 6);
  const long want = tree_size(depth, 3);
  int bad = 0;
#pragma omp parallel reduction(+ : bad)
#pragma omp single
  {
    for (int rep = 0; rep < OMPT_SIZE(5, 2); ++rep) {
      long outer = 0, inner = 0, inner2 = 0;
#pragma omp taskgroup
      {
#pragma omp task shared(outer)
        tree(depth, 3, &outer);
#pragma omp taskgroup
        {
#pragma omp task shared(inner)
          tree(depth - 1, 3, &inner);
#pragma omp taskyield
        }
        // The inner group is done with all its descendants.
        if (__atomic_load_n(&inner, __ATOMIC_RELAXED) != tree_size(depth - 1, 3)) bad++;
#pragma omp taskgroup
        {
#pragma omp task shared(inner2)
          tree(depth - 2, 3, &inner2);
        }
        if (__atomic_load_n(&inner2, __ATOMIC_RELAXED) != tree_size(depth - 2, 3)) bad++;
      }
      // The outer group is done with all of its descendants too.
      if (__atomic_load_n(&outer, __ATOMIC_RELAXED) != want) bad++;
    }
    long got = grouped_sum(OMPT_SIZE(8, 5));
    if (got != tree_size(OMPT_SIZE(8, 5), 3)) bad++;
  }
  CHECK(bad == 0, "%d taskgroups ended before all their descendant tasks were done", bad);

  // taskyield outside any explicit task, and in tasks that every thread creates.
  long yielded = 0;
#pragma omp parallel
  {
    for (int k = 0; k < 100; ++k) {
#pragma omp task shared(yielded)
      {
#pragma omp taskyield
        __atomic_fetch_add(&yielded, 1, __ATOMIC_RELAXED);
      }
#pragma omp taskyield
    }
#pragma omp taskgroup
    {
#pragma omp task shared(yielded)
      __atomic_fetch_add(&yielded, 1000, __ATOMIC_RELAXED);
    }
  }
  long want_yielded = 1100L * omp_get_max_threads();
  CHECK(yielded == want_yielded, "tasks with taskyield counted %ld, %ld expected", yielded,
        want_yielded);

  // Tasks made by a task that an undeferred (if(0)) task made: descendants
  // of the thread's implicit task, which its taskgroup's end may start, though
  // the undeferred task has ended by then. The other thread spins outside
  // any task meanwhile, so this thread must run them itself.
  long grandchildren = 0;
  int release = 0;
#pragma omp parallel num_threads(2)
  {
    if (omp_get_thread_num() != 0) {
      while (!__atomic_load_n(&release, __ATOMIC_ACQUIRE)) sched_yield();
    } else {
#pragma omp taskgroup
      {
#pragma omp task if(0) shared(grandchildren)
        {
#pragma omp task shared(grandchildren)
          {
            for (int k = 0; k < 8; ++k) {
#pragma omp task shared(grandchildren)
              __atomic_fetch_add(&grandchildren, 1, __ATOMIC_RELAXED);
            }
          }
        }
      }
      __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
    }
  }
  CHECK(grandchildren == 8, "a taskgroup ended with %ld of the 8 grandchildren of an if(0) task run",
        grandchildren);
  puts("taskgroup: ok");
  return 0;
}
