// master and masked (filter): only the chosen thread runs the block, and
// neither construct has a barrier (gcc inlines both as a test of
// omp_get_thread_num, so this checks that the thread numbers the runtime
// gives match the construct's meaning). The counters are atomic: gcc treats
// omp_get_thread_num as const and may load every counter before the loop on
// every thread, which TSan reports as a race (the program's, not the
// runtime's) unless the accesses are atomic.
#include <omp.h>

#include "omp_check.h"

int main(void) {
  const int rounds = OMPT_SIZE(1000, 200);
  int master_runs = 0, masked_runs = 0, masked1_runs = 0, wrong = 0;
  int n = 0;
#pragma omp parallel reduction(+ : wrong)
  {
#pragma omp single
    n = omp_get_num_threads();
    for (int r = 0; r < rounds; ++r) {
#pragma omp master
      {
        if (omp_get_thread_num() != 0) wrong++;
        __atomic_fetch_add(&master_runs, 1, __ATOMIC_RELAXED);
      }
#pragma omp masked
      {
        if (omp_get_thread_num() != 0) wrong++;
        __atomic_fetch_add(&masked_runs, 1, __ATOMIC_RELAXED);
      }
#pragma omp masked filter(1)
      {
        if (omp_get_thread_num() != 1) wrong++;
        __atomic_fetch_add(&masked1_runs, 1, __ATOMIC_RELAXED);
      }
    }
  }
  CHECK(wrong == 0, "%d master/masked blocks ran on the wrong thread", wrong);
  CHECK(master_runs == rounds && masked_runs == rounds, "master ran %d, masked %d times of %d",
        master_runs, masked_runs, rounds);
  CHECK(masked1_runs == (n > 1 ? rounds : 0), "masked filter(1) ran %d times in a team of %d",
        masked1_runs, n);

  // No barrier: a thread that is not the primary one passes the master block
  // while the primary thread is still inside it, waiting for that thread.
  int released = 0, passed = 0;
#pragma omp parallel num_threads(2)
  {
#pragma omp master
    {
      WAIT_UNTIL(__atomic_load_n(&passed, __ATOMIC_ACQUIRE), "thread 1 to pass the master block");
      released = 1;
    }
    if (omp_get_thread_num() == 1) __atomic_store_n(&passed, 1, __ATOMIC_RELEASE);
  }
  CHECK(released == 1, "the master block did not run");
  puts("master: ok");
  return 0;
}
