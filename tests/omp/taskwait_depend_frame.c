// #pragma omp taskwait depend(...) returns once the tasks it names are done;
// whatever the runtime used to wake it must not outlive that return. The
// waiting thread, back from taskwait, reuses the stack its wait ran on: it
// fills it with the address of a word that reads "a waiter is about to
// sleep" (1, mote's kAnnounced), then watches the word. A runtime that
// touches the wait's frame after the return takes one of those addresses
// for a waiter's word and wakes it, which changes the word.
//
// mote's libgomp.so.1 reads MOTE_OMP_TEST_TASKWAIT_DEPEND_PAUSE_US (a test
// seam: the task that marks the dependences met pauses there after doing
// so), which ctest sets for this program to widen that window.
#include <omp.h>
#include <stdint.h>

#include "omp_check.h"

static uint32_t canary;

// The stack below the caller's frame, where the wait's frames were, holds
// the canary's address; then the canary is watched for `ms` milliseconds.
__attribute__((noinline)) static int scribble_and_watch(int ms) {
  volatile uintptr_t area[4096];
  for (int i = 0; i < 4096; ++i) area[i] = (uintptr_t)&canary;
  const double end = ompt_now() + ms / 1000.0;
  while (ompt_now() < end) {
    if (__atomic_load_n(&canary, __ATOMIC_SEQ_CST) != 1) break;
    sched_yield();
  }
  return area[17] != 0 && __atomic_load_n(&canary, __ATOMIC_SEQ_CST) == 1;
}

int main(void) {
  const int rounds = OMPT_SIZE(8, 3);
  int elsewhere = 0;  // rounds whose task ran on the other thread (those that can show the defect)
  for (int r = 0; r < rounds; ++r) {
    __atomic_store_n(&canary, 1, __ATOMIC_SEQ_CST);
    int x = 0, started = 0, waiting = 0, intact = 1, ran_on = -1;
#pragma omp parallel num_threads(2) shared(x, started, waiting, intact, ran_on)
    {
      CHECK(omp_get_num_threads() == 2, "a team of %d threads, 2 wanted", omp_get_num_threads());
      if (omp_get_thread_num() == 0) {
        // The task the wait names, best run on the other thread (it finishes
        // the dependence there, and the runtime may run the wait's own task
        // there: the case this program is about).
#pragma omp task depend(out : x) shared(x, started, waiting, ran_on)
        {
          ran_on = omp_get_thread_num();
          __atomic_store_n(&started, 1, __ATOMIC_SEQ_CST);
          WAIT_UNTIL(__atomic_load_n(&waiting, __ATOMIC_SEQ_CST), "thread 0 to reach its taskwait");
          ompt_sleep_ms(20);  // widens the window: thread 0's wait is registered by then
          x = 1;
        }
        // Thread 0 leaves the task to the other thread for a while: it makes
        // more (which lets a runtime with pools share it) until the other
        // thread has it, or 200 ms have passed (then its wait below may run
        // the task itself, and this round shows nothing).
        const double end = ompt_now() + 0.2;
        while (!__atomic_load_n(&started, __ATOMIC_SEQ_CST) && ompt_now() < end) {
#pragma omp task
          {
          }
        }
        // Work of its own for its wait below (20000 tasks of 10 us), so that
        // it has no reason to take the other thread's tasks meanwhile.
        for (int k = 0; k < 20000; ++k) {
#pragma omp task
          {
            const double until = ompt_now() + 10e-6;
            while (ompt_now() < until) {
            }
          }
        }
        __atomic_store_n(&waiting, 1, __ATOMIC_SEQ_CST);
#pragma omp taskwait depend(in : x)
        CHECK(x == 1, "taskwait depend(in: x) returned before the task that writes x");
        intact = scribble_and_watch(150);
      }
    }
    elsewhere += ran_on == 1;
    CHECK(intact, "round %d: a word on the stack of a returned taskwait depend was used as a waiter's word", r);
  }
  printf("taskwait_depend_frame: ok (the task ran on the other thread in %d of %d rounds)\n", elsewhere, rounds);
  return 0;
}
