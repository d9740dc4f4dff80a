// A parallel region's task reduction at its start (GOMP_parallel_reductions):
// each thread's body first (re)initialises its own copy of the reduction
// variables (gcc's code: the identity, then a flag), and a task that runs on
// a thread whose copy a task initialised before must find that work kept. So
// no task may run on a thread before its body has started: in many short
// regions, each thread makes tasks at once, which the other threads (still
// on their way into the region) could take.
//
// Many regions, each checked: a lost task shows as a product short of a
// factor, or a maximum not reached. At most 20 000 regions, and no more
// once 5 s have passed after the first 1 000: a library that spins (GNU's)
// runs short regions slowly on a loaded machine, and the watchdog must not
// fire for that. The race this looks for showed within a few thousand.
#include <limits.h>
#include <omp.h>

#include "omp_check.h"

int main(int argc, char** argv) {
  const int regions = argc > 1 ? atoi(argv[1]) : OMPT_SIZE(20000, 1000);
  enum { kTasks = 4 };
  const double start = omp_get_wtime();
  for (int r = 0; r < regions && (r < 1000 || omp_get_wtime() - start < 5.0); ++r) {
    unsigned long prod = 1;
    int top = INT_MIN;
    int threads = 0;
#pragma omp parallel reduction(task, * : prod) reduction(task, max : top)
    {
#pragma omp masked
      threads = omp_get_num_threads();
      for (int k = 0; k < kTasks; ++k) {
#pragma omp task in_reduction(* : prod) in_reduction(max : top) firstprivate(k)
        {
          prod *= 2;
          if (k > top) top = k;
        }
      }
    }
    const unsigned long want = 1ul << (kTasks * threads);
    CHECK(prod == want && top == kTasks - 1,
          "region %d of %d threads: reduction(task, *) %#lx, %#lx expected; reduction(task, max) "
          "%d, %d "
          "expected",
          r, threads, prod, want, top, kTasks - 1);
  }
  puts("task_reduction_start: ok");
  return 0;
}
