// omp_pause_resource and omp_pause_resource_all on the host: as GNU's
// library does (beyond what OpenMP requires, which lets an implementation
// keep its threads), a soft and a hard pause both end the threads of the
// runtime, so threadprivate data of the non-initial threads starts afresh in
// the next region; the initial thread keeps its own. Between pauses,
// threadprivate data persists from one region to the next (same number of
// threads, no dynamic adjustment: OpenMP's condition). A pause inside a
// parallel region is refused. Regions and tasks after a pause work.
#include <omp.h>

#include "omp_check.h"

static int tp = 128;
#pragma omp threadprivate(tp)

// Every thread sets its threadprivate value; the threads other than the
// initial one must find the value a fresh thread has (128) when fresh.
static void set_all(int base, int fresh) {
  int wrong = 0, wrong_thread = -1, wrong_value = 0;
#pragma omp parallel
  {
    int id = omp_get_thread_num();
    if (fresh && id != 0 && tp != 128) {
#pragma omp critical
      {
        wrong = 1;
        wrong_thread = id;
        wrong_value = tp;
      }
    }
    tp = base + id;
  }
  CHECK(!wrong,
        "after a pause: thread %d still has its threadprivate value %d (a new thread has 128)",
        wrong_thread, wrong_value);
}

static void check_all(int base) {
  int wrong = 0, wrong_thread = -1, wrong_value = 0;
#pragma omp parallel
  {
    int id = omp_get_thread_num();
    if (tp != base + id) {
#pragma omp critical
      {
        wrong = 1;
        wrong_thread = id;
        wrong_value = tp;
      }
    }
  }
  CHECK(!wrong, "thread %d's threadprivate value is %d in the next region, %d expected",
        wrong_thread, wrong_value, base + wrong_thread);
}

static void tasks_work(void) {
  long sum = 0;
#pragma omp parallel
#pragma omp single
  for (int k = 1; k <= 1000; ++k) {
#pragma omp task firstprivate(k) shared(sum)
    __atomic_fetch_add(&sum, k, __ATOMIC_RELAXED);
  }
  CHECK(sum == 1000L * 1001 / 2, "tasks after a pause: sum %ld, %ld expected", sum,
        1000L * 1001 / 2);
}

int main(void) {
  omp_set_dynamic(0);
  int refused = 1;
#pragma omp parallel
  {
    if (omp_pause_resource(omp_pause_soft, omp_get_initial_device()) == 0 ||
        omp_pause_resource_all(omp_pause_hard) == 0) {
      __atomic_store_n(&refused, 0, __ATOMIC_RELAXED);
    }
  }
  CHECK(refused, "omp_pause_resource inside a parallel region succeeded");
  for (int rep = 0; rep < OMPT_SIZE(20, 3); ++rep) {
    set_all(256, 0);
    check_all(256);
    CHECK(omp_pause_resource(omp_pause_soft, omp_get_initial_device()) == 0, "soft pause failed");
    set_all(384, 1);
    check_all(384);
    tasks_work();
    CHECK(omp_pause_resource_all(omp_pause_hard) == 0, "hard pause failed");
    set_all(512, 1);
    check_all(512);
    tasks_work();
    CHECK(tp == 512, "the initial thread's threadprivate value is %d, 512 expected", tp);
    CHECK(omp_pause_resource_all(omp_pause_soft) == 0, "soft pause of every device failed");
  }
  puts("pause: ok");
  return 0;
}
