// cancel taskgroup and cancellation point taskgroup (GOMP_cancel,
// GOMP_cancellation_point inside tasks of a taskgroup): once a task of the
// group has cancelled it, tasks of the group that have not started never
// do, running ones leave at their next cancellation point, and the group
// ends; with cancellation disabled (OMP_CANCELLATION unset) every task runs.
// A parallel search that cancels when it finds its target still returns
// the right answer.
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
    search(OMPT_SIZE(20000, 5000), (rep * 7919) % OMPT_SIZE(20000, 5000));
  }
  puts("cancel_taskgroup: ok");
  return 0;
}
