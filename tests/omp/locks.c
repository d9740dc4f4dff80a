// The lock API: omp_lock_t and omp_nest_lock_t (init, init_with_hint, set,
// unset, test, destroy) under contention, each guarding a counter updated
// without atomics; test_lock and test_nest_lock semantics (a held lock
// cannot be taken by another thread; a nest lock counts its owner's
// nesting); and omp_get_wtime / omp_get_wtick.
#include <omp.h>

#include "omp_check.h"

// GNU's libgomp 12 declares the _with_hint forms in omp.h but does not
// export them: weak references, used when the library in use has them
// (mote's and LLVM's do), and plain init otherwise.
#pragma weak omp_init_lock_with_hint
#pragma weak omp_init_nest_lock_with_hint

static omp_lock_t simple, hinted;
static omp_nest_lock_t nested, nested_hinted;
// Per lock: the threads inside the part it guards (must stay 0 or 1).
static int holders[4];

static void enter(int lock, const char* what) {
  int was = __atomic_fetch_add(&holders[lock], 1, __ATOMIC_RELAXED);
  CHECK(was == 0, "%s: two threads hold it at once", what);
}

static void leave(int lock) { __atomic_fetch_sub(&holders[lock], 1, __ATOMIC_RELAXED); }

static void contention(void) {
  const int per_thread = OMPT_SIZE(20000, 2000);
  long counter = 0, nest_counter = 0, tested = 0, nest_tested = 0;
  omp_init_lock(&simple);
  omp_init_nest_lock(&nested);
  if (omp_init_lock_with_hint != NULL && omp_init_nest_lock_with_hint != NULL) {
    omp_init_lock_with_hint(&hinted, omp_sync_hint_contended);
    omp_init_nest_lock_with_hint(&nested_hinted, omp_sync_hint_speculative);
  } else {
    omp_init_lock(&hinted);
    omp_init_nest_lock(&nested_hinted);
  }
  int n = 0;
#pragma omp parallel
  {
#pragma omp single
    n = omp_get_num_threads();
    for (int k = 0; k < per_thread; ++k) {
      omp_set_lock(&simple);
      enter(0, "omp_lock_t");
      counter++;
      leave(0);
      omp_unset_lock(&simple);

      omp_set_nest_lock(&nested);
      omp_set_nest_lock(&nested);  // the owner may take it again
      enter(1, "omp_nest_lock_t");
      nest_counter++;
      leave(1);
      omp_unset_nest_lock(&nested);
      omp_unset_nest_lock(&nested);

      // test_lock: spin until taken, counting the successes.
      while (!omp_test_lock(&hinted)) {
      }
      enter(2, "omp_lock_t with a hint");
      tested++;
      leave(2);
      omp_unset_lock(&hinted);

      int depth;
      while ((depth = omp_test_nest_lock(&nested_hinted)) == 0) {
      }
      CHECK(depth == 1, "omp_test_nest_lock on a free lock returned %d, 1 expected", depth);
      enter(3, "omp_nest_lock_t with a hint");
      CHECK(omp_test_nest_lock(&nested_hinted) == 2, "omp_test_nest_lock by the owner is not 2");
      nest_tested++;
      leave(3);
      omp_unset_nest_lock(&nested_hinted);
      omp_unset_nest_lock(&nested_hinted);
    }
  }
  long rounds = (long)per_thread * n;
  CHECK(counter == rounds, "omp_lock_t counter %ld, %ld expected", counter, rounds);
  CHECK(nest_counter == rounds, "omp_nest_lock_t counter %ld, %ld expected", nest_counter, rounds);
  CHECK(tested == rounds && nest_tested == rounds, "test_lock counters %ld and %ld, %ld expected",
        tested, nest_tested, rounds);
  omp_destroy_lock(&simple);
  omp_destroy_lock(&hinted);
  omp_destroy_nest_lock(&nested);
  omp_destroy_nest_lock(&nested_hinted);
}

// A lock held by one thread: another thread's test fails until it is released.
static void test_semantics(void) {
  omp_lock_t lock;
  omp_nest_lock_t nest;
  omp_init_lock(&lock);
  omp_init_nest_lock(&nest);
  int stage = 0;
#pragma omp parallel num_threads(2)
  {
    if (omp_get_thread_num() == 0) {
      omp_set_lock(&lock);
      omp_set_nest_lock(&nest);
      omp_set_nest_lock(&nest);
      __atomic_store_n(&stage, 1, __ATOMIC_RELEASE);
      WAIT_UNTIL(__atomic_load_n(&stage, __ATOMIC_ACQUIRE) == 2, "thread 1's tests of held locks");
      omp_unset_lock(&lock);
      omp_unset_nest_lock(&nest);
      omp_unset_nest_lock(&nest);
      __atomic_store_n(&stage, 3, __ATOMIC_RELEASE);
    } else {
      WAIT_UNTIL(__atomic_load_n(&stage, __ATOMIC_ACQUIRE) == 1, "thread 0 to take the locks");
      CHECK(!omp_test_lock(&lock), "omp_test_lock took a lock another thread holds");
      CHECK(omp_test_nest_lock(&nest) == 0, "omp_test_nest_lock took a lock another thread holds");
      __atomic_store_n(&stage, 2, __ATOMIC_RELEASE);
      WAIT_UNTIL(__atomic_load_n(&stage, __ATOMIC_ACQUIRE) == 3, "thread 0 to release the locks");
      CHECK(omp_test_lock(&lock), "omp_test_lock failed on a released lock");
      omp_unset_lock(&lock);
      CHECK(omp_test_nest_lock(&nest) == 1, "omp_test_nest_lock on a released lock is not 1");
      omp_unset_nest_lock(&nest);
    }
  }
  omp_destroy_lock(&lock);
  omp_destroy_nest_lock(&nest);
}

static void wtime(void) {
  double tick = omp_get_wtick();
  CHECK(tick > 0 && tick < 0.01, "omp_get_wtick() %g", tick);
  double bad = 0;
#pragma omp parallel reduction(+ : bad)
  {
    double previous = omp_get_wtime();
    for (int k = 0; k < 10000; ++k) {
      double now = omp_get_wtime();
      if (now < previous) bad += 1;  // never goes back on one thread
      previous = now;
    }
  }
  CHECK(bad == 0, "omp_get_wtime() went back %g times", bad);
  // It measures elapsed time: a 20 ms sleep is at least 20 ms long (never an
  // upper bound: the machine may be busy).
  double before = omp_get_wtime();
  ompt_sleep_ms(20);
  double elapsed = omp_get_wtime() - before;
  CHECK(elapsed >= 0.019, "omp_get_wtime() measured a 20 ms sleep as %g s", elapsed);
}

int main(void) {
  printf("locks: the _with_hint forms are %s\n",
         omp_init_lock_with_hint != NULL ? "there" : "missing (plain init instead)");
  contention();
  test_semantics();
  wtime();
  puts("locks: ok");
  return 0;
}
