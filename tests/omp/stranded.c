// No ready task waits for a thread that does not run it. Two programs:
//
//   spawner: one thread (single) creates four tasks and then computes,
//            reaching no scheduling point, until all four have run: the other
//            thread, at the single's barrier, must run them meanwhile.
//   lock:    thread 0 holds a lock across a taskwait for its children
//            X -> {Y1, Y2} (depend out / in). Thread 1 yields (taskyield)
//            until X has run, then blocks on the lock. Where thread 1 ran X in
//            its taskyield (a library may run tasks there), X's end made Y1
//            and Y2 ready on thread 1; whichever of them it did not run before
//            blocking must still reach thread 0's taskwait.
//
// Each runs many rounds: the schedules that strand a task are a matter of
// timing. Passes on GNU's libgomp (whose taskyield runs nothing, and whose
// tasks sit in one shared queue).
#include <omp.h>

#include "omp_check.h"

static void spawner(int rounds) {
  for (int r = 0; r < rounds; ++r) {
    int ran = 0;
#pragma omp parallel num_threads(2) shared(ran)
    {
#pragma omp single
      {
        for (int i = 0; i < 4; ++i) {
#pragma omp task shared(ran)
          __atomic_fetch_add(&ran, 1, __ATOMIC_ACQ_REL);
        }
        // Computes: WAIT_UNTIL yields the CPU but reaches no scheduling point.
        WAIT_UNTIL(__atomic_load_n(&ran, __ATOMIC_ACQUIRE) == 4, "the tasks made before a long computation");
      }
    }
    CHECK(ran == 4, "round %d: %d tasks ran", r, ran);
  }
}

// How many rounds ran X on thread 1 (the schedule that can strand Y1 or Y2).
static int x_on_thread_1 = 0;

static void lock_across_taskwait(int rounds) {
  for (int r = 0; r < rounds; ++r) {
    omp_lock_t lock;
    omp_init_lock(&lock);
    int x = 0;
    int yielding = 0;
    int x_done = 0;
    int y = 0;
#pragma omp parallel num_threads(2) shared(lock, x, yielding, x_done, y)
    {
      if (omp_get_thread_num() == 0) {
        // Thread 1 is at its scheduling points before the tasks exist.
        WAIT_UNTIL(__atomic_load_n(&yielding, __ATOMIC_ACQUIRE), "thread 1 at its taskyield");
        omp_set_lock(&lock);
#pragma omp task depend(out : x) shared(x, x_done)
        {
          x = 1;
          if (omp_get_thread_num() == 1) __atomic_fetch_add(&x_on_thread_1, 1, __ATOMIC_RELAXED);
          __atomic_store_n(&x_done, 1, __ATOMIC_RELEASE);
        }
#pragma omp task depend(in : x) shared(x, y)
        __atomic_fetch_add(&y, x, __ATOMIC_ACQ_REL);
#pragma omp task depend(in : x) shared(x, y)
        __atomic_fetch_add(&y, x, __ATOMIC_ACQ_REL);
        // A moment for thread 1 to take X (no scheduling point here).
        double until = ompt_now() + 0.0005;
        while (!__atomic_load_n(&x_done, __ATOMIC_ACQUIRE) && ompt_now() < until) {
        }
#pragma omp taskwait
        CHECK(__atomic_load_n(&y, __ATOMIC_ACQUIRE) == 2, "round %d: y %d after the taskwait", r, y);
        omp_unset_lock(&lock);
      } else if (omp_get_thread_num() == 1) {
        __atomic_store_n(&yielding, 1, __ATOMIC_RELEASE);
        double deadline = ompt_now() + (OMPT_SANITIZED ? 100.0 : 20.0);
        while (!__atomic_load_n(&x_done, __ATOMIC_ACQUIRE)) {
          if (ompt_now() > deadline) FAIL("round %d: X never ran", r);
#pragma omp taskyield
        }
        omp_set_lock(&lock);  // held by thread 0 until its taskwait ends
        omp_unset_lock(&lock);
      }
    }
    omp_destroy_lock(&lock);
    CHECK(y == 2, "round %d: y %d", r, y);
  }
  printf("lock: X ran on thread 1 in %d of %d rounds\n", x_on_thread_1, rounds);
}

// Both programs, or the one named on the command line.
int main(int argc, char** argv) {
  const char* only = argc > 1 ? argv[1] : "";
  if (only[0] == 0 || strcmp(only, "spawner") == 0) spawner(OMPT_SIZE(50, 10));
  if (only[0] == 0 || strcmp(only, "lock") == 0) lock_across_taskwait(OMPT_SIZE(500, 50));
  printf("stranded: ok\n");
  return 0;
}
