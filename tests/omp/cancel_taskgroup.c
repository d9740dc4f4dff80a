// cancel taskgroup and cancellation point taskgroup (GOMP_cancel,
// GOMP_cancellation_point inside tasks of a taskgroup): once a task of the
// group has cancelled it, tasks of the group that have not started never
// do, running ones leave at their next cancellation point, and the group
// ends; with cancellation disabled (OMP_CANCELLATION unset) every task runs.
// A parallel search that cancels when it finds its target still returns
// the right answer. A worksharing loop's taskgroup (for reduction(task))
// is cancelled with the taskgroup around it, and cancel taskgroup in its
// tasks cancels that one, as GNU's library does.
//
//   cancel_taskgroup on    OMP_CANCELLATION=true must be in force
//   cancel_taskgroup off   OMP_CANCELLATION must be unset (or false)
#include <omp.h>

#include "omp_check.h"

static int enabled;

static void cancel_then_create(int before, int after) {
  int started = 0, finished = 0, after_ran = 0, canceller_went_on = 0;
#pragma omp parallel
#pragma omp single
  {
#pragma omp taskgroup
    {
      for (int k = 0; k < before; ++k) {
#pragma omp task shared(started, finished)
        {
          __atomic_fetch_add(&started, 1, __ATOMIC_RELAXED);
          int stopped = 0;
          for (int step = 0; step < 200 && !stopped; ++step) {
            volatile int work = 0;
            for (int w = 0; w < 100; ++w) work = work + w;
            stopped = 1;
#pragma omp cancellation point taskgroup
            stopped = 0;
          }
          if (!stopped) __atomic_fetch_add(&finished, 1, __ATOMIC_RELAXED);
        }
      }
      // Undeferred: the cancellation is active when the creating task goes on.
#pragma omp task if (0) shared(canceller_went_on)
      {
#pragma omp cancel taskgroup
        canceller_went_on = 1;
      }
      for (int k = 0; k < after; ++k) {
#pragma omp task shared(after_ran)
        __atomic_fetch_add(&after_ran, 1, __ATOMIC_RELAXED);
      }
    }
  }
  CHECK(finished <= started && started <= before, "%d tasks finished, %d started, of %d", finished,
        started, before);
  if (enabled) {
    CHECK(canceller_went_on == 0, "the task that cancelled its taskgroup went on past the cancel");
    CHECK(after_ran == 0, "%d tasks created in a cancelled taskgroup ran", after_ran);
  } else {
    CHECK(canceller_went_on == 1, "cancellation disabled: cancel taskgroup was not ignored");
    CHECK(after_ran == after && started == before && finished == before,
          "cancellation disabled: %d of %d later tasks ran, %d and %d of %d earlier ones started "
          "and finished",
          after_ran, after, started, finished, before);
  }

  // The next taskgroup is not cancelled.
  int next_ran = 0;
#pragma omp parallel
#pragma omp single
  {
#pragma omp taskgroup
    {
      for (int k = 0; k < 50; ++k) {
#pragma omp task shared(next_ran)
        __atomic_fetch_add(&next_ran, 1, __ATOMIC_RELAXED);
      }
    }
  }
  CHECK(next_ran == 50, "the taskgroup after a cancelled one ran %d of 50 tasks", next_ran);
}

// A worksharing loop with a task reduction opens a taskgroup of its own on
// each thread (GOMP_loop_start with reductions). Its tasks belong to the
// taskgroup around the loop as well: when that one is cancelled, they do not
// start (the loop's iterations still run).
static void workshare_group_in_cancelled_group(void) {
  int sum = 0, loop_tasks = 0, later_tasks = 0;
#pragma omp parallel
#pragma omp taskgroup
  {
    // Undeferred: each thread's taskgroup is cancelled before it goes on.
#pragma omp task if (0)
    {
#pragma omp cancel taskgroup
    }
#pragma omp for reduction(task, + : sum)
    for (int i = 0; i < 64; ++i) {
      sum += 1;
#pragma omp task in_reduction(+ : sum) shared(loop_tasks)
      {
        sum += 100;
        __atomic_fetch_add(&loop_tasks, 1, __ATOMIC_RELAXED);
      }
    }
#pragma omp task shared(later_tasks)
    __atomic_fetch_add(&later_tasks, 1, __ATOMIC_RELAXED);
  }
  int threads = omp_get_max_threads();
  if (enabled) {
    CHECK(loop_tasks == 0 && sum == 64,
          "in a cancelled taskgroup, %d tasks of a for reduction(task) loop ran (sum %d, 64 "
          "expected)",
          loop_tasks, sum);
    CHECK(later_tasks == 0, "%d tasks made in cancelled taskgroups ran", later_tasks);
  } else {
    CHECK(loop_tasks == 64 && sum == 64 * 101 && later_tasks >= 1 && later_tasks <= threads,
          "cancellation disabled: %d of 64 loop tasks ran (sum %d), %d later ones", loop_tasks, sum,
          later_tasks);
  }
}

// cancel taskgroup in a task of such a loop cancels the taskgroup around the
// loop (the loop's own taskgroup is not what the program names): the tasks
// its thread makes there after the loop do not start.
static void cancel_from_workshare_group(void) {
  int sum = 0, later_tasks = 0;
#pragma omp parallel
#pragma omp taskgroup
  {
    int ran_iterations = 0;
#pragma omp for reduction(task, + : sum)
    for (int i = 0; i < 64; ++i) {
      sum += 1;
      ran_iterations = 1;
#pragma omp task in_reduction(+ : sum)
      {
        sum += 0;
#pragma omp cancel taskgroup
      }
    }
    // This thread's loop tasks are complete (the loop's taskgroup has ended):
    // one of them at least cancelled this thread's taskgroup, if it made any.
#pragma omp task firstprivate(ran_iterations) shared(later_tasks)
    if (ran_iterations) __atomic_fetch_add(&later_tasks, 1, __ATOMIC_RELAXED);
  }
  CHECK(sum == 64, "for reduction(task, +): %d, 64 expected", sum);
  if (enabled) {
    CHECK(later_tasks == 0,
          "cancel taskgroup in a for reduction(task) loop's task: %d tasks made after the loop in "
          "the taskgroup around it ran",
          later_tasks);
  } else {
    CHECK(later_tasks >= 1, "cancellation disabled: no task made after the loop ran");
  }
}

// Tasks look for the one index whose value is the target; the finder
// cancels the rest. The answer is right whether or not the rest ran.
static void search(int n, int target_index) {
  int* values = malloc((size_t)n * sizeof *values);
  CHECK(values != NULL, "out of memory");
  for (int i = 0; i < n; ++i) values[i] = i * 3 + 1;
  int target = values[target_index];
  int found = -1, looked = 0;
#pragma omp parallel
#pragma omp single
  {
#pragma omp taskgroup
    {
      for (int block = 0; block < n; block += 100) {
#pragma omp task firstprivate(block) shared(found, looked)
        {
          for (int i = block; i < block + 100 && i < n; ++i) {
            __atomic_fetch_add(&looked, 1, __ATOMIC_RELAXED);
            if (values[i] == target) {
              __atomic_store_n(&found, i, __ATOMIC_RELAXED);
#pragma omp cancel taskgroup
            }
#pragma omp cancellation point taskgroup
          }
        }
      }
    }
  }
  CHECK(found == target_index, "the search found %d, %d expected", found, target_index);
  CHECK(looked >= 1 && looked <= n, "the search looked at %d of %d", looked, n);
  if (!enabled)
    CHECK(looked == n, "cancellation disabled: the search looked at %d of %d", looked, n);
  free(values);
}

int main(int argc, char** argv) {
  CHECK(argc == 2 && (strcmp(argv[1], "on") == 0 || strcmp(argv[1], "off") == 0),
        "usage: cancel_taskgroup on|off");
  enabled = strcmp(argv[1], "on") == 0;
  CHECK(omp_get_cancellation() == enabled, "omp_get_cancellation() %d with OMP_CANCELLATION=%s",
        omp_get_cancellation(),
        getenv("OMP_CANCELLATION") ? getenv("OMP_CANCELLATION") : "(unset)");
  for (int rep = 0; rep < OMPT_SIZE(10, 3); ++rep) {
    cancel_then_create(20 + rep % 7, 500);
    workshare_group_in_cancelled_group();
    cancel_from_workshare_group();
    search(OMPT_SIZE(20000, 5000), (rep * 7919) % OMPT_SIZE(20000, 5000));
  }
  puts("cancel_taskgroup: ok");
  return 0;
}
