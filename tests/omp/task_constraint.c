// OpenMP's task scheduling constraint: at a task scheduling point inside a
// tied task (taskwait, taskyield, the wait for a detached child), the thread
// may start only a descendant of that task, never an unrelated one on top of
// it. So a task that holds a lock across taskwait or taskyield never finds
// an unrelated task of its own thread waiting for that lock beneath it (a
// deadlock), nor one entering its nest lock (locks are owned by tasks), and
// the nesting of tasks on one thread's stack is bounded by the depth of the
// task tree (fib: n), whatever the scheduler.
//
//   omp_task_constraint [all|locks|depth N]
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "omp_check.h"

// ---- A lock held across a scheduling point ------------------------------------------

enum hold_kind { kPlainTaskwait, kNestTaskwait, kPlainTaskyield, kNestTaskyield };
static const char* const kHoldNames[] = {"omp_lock_t across taskwait", "omp_nest_lock_t across taskwait",
                                         "omp_lock_t across taskyield", "omp_nest_lock_t across taskyield"};

static omp_lock_t plain;
static omp_nest_lock_t nest;
static omp_event_handle_t child_event;
static int child_ran, holder_inside, unrelated_ran, overlap;

static void take(enum hold_kind kind) {
  if (kind == kPlainTaskwait || kind == kPlainTaskyield) {
    omp_set_lock(&plain);
  } else {
    omp_set_nest_lock(&nest);
  }
}

static void give(enum hold_kind kind) {
  if (kind == kPlainTaskwait || kind == kPlainTaskyield) {
    omp_unset_lock(&plain);
  } else {
    omp_unset_nest_lock(&nest);
  }
}

// Thread 0 makes an unrelated task U, then the holder H (on top of U in its
// pool, when the runtime has pools). H takes the lock, then waits at a
// scheduling point: for a detached child whose event thread 1 fulfils a
// little later (taskwait), or at taskyield. Thread 1 stays in its own code
// meanwhile, so thread 0 alone decides what runs on top of H: never U, which
// would wait for the lock H holds below it (or, a nest lock being owned by
// its task, must not enter it either).
static void hold_across(enum hold_kind kind) {
  const char* what = kHoldNames[kind];
  __atomic_store_n(&child_ran, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&holder_inside, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&unrelated_ran, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&overlap, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&child_event, 0, __ATOMIC_SEQ_CST);
  const int taskwait = kind == kPlainTaskwait || kind == kNestTaskwait;
#pragma omp parallel num_threads(2)
  {
    CHECK(omp_get_num_threads() == 2, "%s: a team of %d threads, 2 wanted", what, omp_get_num_threads());
    if (omp_get_thread_num() == 0) {
#pragma omp task  // U
      {
        take(kind);
        if (__atomic_load_n(&holder_inside, __ATOMIC_SEQ_CST)) __atomic_store_n(&overlap, 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&unrelated_ran, 1, __ATOMIC_SEQ_CST);
        give(kind);
      }
#pragma omp task  // H
      {
        take(kind);
        __atomic_store_n(&holder_inside, 1, __ATOMIC_SEQ_CST);
        if (taskwait) {
          omp_event_handle_t ev;
#pragma omp task detach(ev)
          __atomic_store_n(&child_ran, 1, __ATOMIC_RELEASE);
          __atomic_store_n(&child_event, ev, __ATOMIC_RELEASE);
#pragma omp taskwait
        } else {
          for (int k = 0; k < 100; ++k) {
#pragma omp taskyield
          }
          __atomic_store_n(&child_ran, 1, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&holder_inside, 0, __ATOMIC_SEQ_CST);
        give(kind);
      }
#pragma omp taskwait
    } else {
      WAIT_UNTIL(__atomic_load_n(&child_ran, __ATOMIC_ACQUIRE), "the holder's child (or its taskyields)");
      if (taskwait) {
        WAIT_UNTIL(__atomic_load_n(&child_event, __ATOMIC_ACQUIRE) != 0, "the holder's child's event");
        // Widens the window in which the holder waits for its child; the
        // test is correct without it, it would only catch less.
        ompt_sleep_ms(100);
        omp_fulfill_event(__atomic_load_n(&child_event, __ATOMIC_ACQUIRE));
      }
    }
  }
  CHECK(__atomic_load_n(&unrelated_ran, __ATOMIC_SEQ_CST), "%s: the unrelated task never ran", what);
  CHECK(!__atomic_load_n(&overlap, __ATOMIC_SEQ_CST),
        "%s: an unrelated task entered the lock while the task that holds it waited beneath it", what);
}

// Locks are owned by tasks (OpenMP 3.0 on): an undeferred child does not own
// its parent's nest lock, nor does the implicit task of a region of one.
static void nest_lock_owners(void) {
  omp_nest_lock_t l;
  omp_init_nest_lock(&l);
  CHECK(omp_test_nest_lock(&l) == 1, "omp_test_nest_lock on a free lock is not 1");
  int in_task = -1, in_region = -1;
#pragma omp task if (0) shared(l, in_task)
  in_task = omp_test_nest_lock(&l);
#pragma omp parallel if (0) shared(l, in_region)
  in_region = omp_test_nest_lock(&l);
  CHECK(in_task == 0, "an undeferred task took its parent's nest lock (omp_test_nest_lock: %d)", in_task);
  CHECK(in_region == 0, "the implicit task of a region of one took its encountering task's nest lock (%d)",
        in_region);
  CHECK(omp_test_nest_lock(&l) == 2, "the owner's second omp_test_nest_lock is not 2");
  omp_unset_nest_lock(&l);
  omp_unset_nest_lock(&l);
  // The same in a team, with a child that takes the lock after its parent
  // has released it.
  int bad = 0;
#pragma omp parallel num_threads(2) reduction(+ : bad)
  {
    omp_set_nest_lock(&l);
    int child = -1;
#pragma omp task if (0) shared(l, child)
    child = omp_test_nest_lock(&l);
    bad += child != 0;
    omp_unset_nest_lock(&l);
#pragma omp task shared(l)
    {
      omp_set_nest_lock(&l);
      omp_unset_nest_lock(&l);
    }
#pragma omp taskwait
  }
  CHECK(bad == 0, "%d undeferred children took their parent's nest lock in a team", bad);
  omp_destroy_nest_lock(&l);
}

// ---- Nesting on one thread's stack ------------------------------------------------------

// How many fib frames (each one task) the calling thread has on its stack,
// and the most it had.
static int depth, deepest;
#pragma omp threadprivate(depth, deepest)

static long fib(int n) {
  if (++depth > deepest) deepest = depth;
  long r = n;
  if (n >= 2) {
    long a, b;
#pragma omp task shared(a) firstprivate(n)
    a = fib(n - 1);
#pragma omp task shared(b) firstprivate(n)
    b = fib(n - 2);
#pragma omp taskwait
    r = a + b;
  }
  --depth;
  return r;
}

static long fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

// fib(n) with a task per call and no cut-off (BOTS' fib): a thread waiting in
// fib(k) runs only fib(k)'s descendants on top of it, so no thread ever has
// more than n frames (the depth of the tree) on its stack.
static void nesting_depth(int n) {
  long got = -1;
  int most = 0;
#pragma omp parallel shared(got) reduction(max : most)
  {
    depth = 0;
    deepest = 0;
#pragma omp single
    got = fib(n);
    // (the single's barrier: every task has run)
    most = deepest;
  }
  const long want = fib_serial(n);
  CHECK(got == want, "fib(%d) with tasks: %ld, serial %ld", n, got, want);
  CHECK(most <= n, "a thread had %d fib tasks nested on its stack; fib(%d)'s tree is %d deep", most, n, n);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "all";
  if (strcmp(mode, "all") == 0 || strcmp(mode, "locks") == 0) {
    omp_init_lock(&plain);
    omp_init_nest_lock(&nest);
    for (int kind = kPlainTaskwait; kind <= kNestTaskyield; ++kind) hold_across((enum hold_kind)kind);
    omp_destroy_lock(&plain);
    omp_destroy_nest_lock(&nest);
    nest_lock_owners();
  }
  if (strcmp(mode, "all") == 0 || strcmp(mode, "depth") == 0) {
    const int n = argc > 2 ? atoi(argv[2]) : OMPT_SIZE(22, 16);
    nesting_depth(n);
  }
  printf("task_constraint: ok\n");
  return 0;
}
