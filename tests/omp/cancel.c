// cancel parallel, cancel for, cancel sections and cancellation points
// (GOMP_cancel, GOMP_cancellation_point, GOMP_barrier_cancel,
// GOMP_loop_end_cancel, GOMP_sections_end_cancel), with cancellation
// enabled (OMP_CANCELLATION=true) and disabled (unset: every cancel and
// cancellation point is ignored). A cancelled loop's cancellation ends with
// it: the constructs after it run whole.
//
//   cancel on    OMP_CANCELLATION=true must be in force
//   cancel off   OMP_CANCELLATION must be unset (or false)
#include <omp.h>

#include "omp_check.h"

static int enabled;

// Thread 0 cancels; the others wait at a cancellation point, which lets them
// out (enabled), or lets them go after a moment (disabled).
static void cancel_parallel(void) {
  int cancelled_went_on = 0, others_went_on = 0;
#pragma omp parallel num_threads(2)
  {
    if (omp_get_thread_num() == 0) {
#pragma omp cancel parallel
      cancelled_went_on = 1;
    } else {
      double start = ompt_now();
      for (;;) {
#pragma omp cancellation point parallel
        double waited = ompt_now() - start;
        if (!enabled && waited > 0.01) break;
        if (waited > (OMPT_SANITIZED ? 100.0 : 20.0))
          FAIL("a cancellation point never ended the cancelled region");
        sched_yield();
      }
      others_went_on = 1;
    }
  }
  if (enabled) {
    CHECK(cancelled_went_on == 0 && others_went_on == 0,
          "cancel parallel: the cancelling thread went on (%d), the other passed its cancellation "
          "point (%d)",
          cancelled_went_on, others_went_on);
  } else {
    CHECK(cancelled_went_on == 1 && others_went_on == 1,
          "cancellation disabled: cancel parallel was not ignored (%d %d)", cancelled_went_on,
          others_went_on);
  }
}

// A thread waiting at a barrier is released by the cancellation.
static void cancel_at_barrier(void) {
  int arrived = 0, past_barrier[2] = {0, 0};
#pragma omp parallel num_threads(2)
  {
    int t = omp_get_thread_num();
    if (t == 0) {
      WAIT_UNTIL(__atomic_load_n(&arrived, __ATOMIC_ACQUIRE), "thread 1 to reach the barrier");
      ompt_sleep_ms(2);  // most likely waiting inside the barrier by now
#pragma omp cancel parallel
    } else {
      __atomic_store_n(&arrived, 1, __ATOMIC_RELEASE);
    }
#pragma omp barrier
    past_barrier[t] = 1;
  }
  int want = enabled ? 0 : 1;
  CHECK(past_barrier[0] == want && past_barrier[1] == want,
        "barrier in a %scancelled region: threads went past it (%d, %d)", enabled ? "" : "not ",
        past_barrier[0], past_barrier[1]);
}

// The barriers at the end of a loop and of sections in a region that may be
// cancelled (GOMP_loop_end_cancel, GOMP_sections_end_cancel): thread 0
// cancels the region instead of joining them, and the thread waiting there
// is let out, past neither barrier.
static void cancel_at_worksharing_end(void) {
  int past_loop[2] = {0, 0}, past_sections[2] = {0, 0}, iterations = 0;
  for (int which = 0; which < 2; ++which) {
    int arrived = 0;
#pragma omp parallel num_threads(2)
    {
      int t = omp_get_thread_num();
      if (t == 0) {
        WAIT_UNTIL(__atomic_load_n(&arrived, __ATOMIC_ACQUIRE), "thread 1 to reach the construct");
        ompt_sleep_ms(2);
#pragma omp cancel parallel
      } else {
        __atomic_store_n(&arrived, 1, __ATOMIC_RELEASE);
      }
      if (which == 0) {
#pragma omp for schedule(dynamic)
        for (int i = 0; i < 100; ++i) __atomic_fetch_add(&iterations, 1, __ATOMIC_RELAXED);
        past_loop[t] = 1;
      } else {
#pragma omp sections
        {
#pragma omp section
          __atomic_fetch_add(&iterations, 1, __ATOMIC_RELAXED);
#pragma omp section
          __atomic_fetch_add(&iterations, 1, __ATOMIC_RELAXED);
        }
        past_sections[t] = 1;
      }
    }
  }
  int want = enabled ? 0 : 1;
  CHECK(past_loop[0] == want && past_loop[1] == want,
        "the end of a loop in a %scancelled region: threads went past it (%d, %d)",
        enabled ? "" : "not ", past_loop[0], past_loop[1]);
  CHECK(past_sections[0] == want && past_sections[1] == want,
        "the end of sections in a %scancelled region: threads went past it (%d, %d)",
        enabled ? "" : "not ", past_sections[0], past_sections[1]);
  if (!enabled) CHECK(iterations == 102, "%d iterations and sections ran of 102", iterations);
}

static void cancel_for(void) {
  enum { kN = 4000 };
  static int ran[kN];
  memset(ran, 0, sizeof ran);
  int threads = 0;
  int after_loop = 0;
#pragma omp parallel
  {
#pragma omp single
    threads = omp_get_num_threads();
    // static: thread 0 has the first chunk, and cancels in its first iteration.
#pragma omp for schedule(static)
    for (int i = 0; i < kN; ++i) {
      if (i == 0) {
#pragma omp cancel for
      }
      ran[i] = 1;
#pragma omp cancellation point for
    }
    __atomic_fetch_add(&after_loop, 1, __ATOMIC_RELAXED);
  }
  int total = 0;
  for (int i = 0; i < kN; ++i) total += ran[i];
  CHECK(after_loop == threads, "%d of %d threads went on after the loop", after_loop, threads);
  if (enabled) {
    // Thread 0's chunk (about kN / threads iterations) stopped at its first.
    CHECK(ran[0] == 0, "cancel for: the cancelling iteration went on");
    CHECK(total <= kN - kN / threads, "cancel for: %d iterations ran, at most %d expected", total,
          kN - kN / threads);
  } else {
    CHECK(total == kN, "cancellation disabled: %d iterations of %d ran", total, kN);
  }

  // dynamic: whichever thread cancels runs no further iteration.
  int after_own_cancel = 0, total2 = 0;
#pragma omp parallel
  {
    int i_cancelled = 0;
#pragma omp for schedule(dynamic, 4)
    for (int i = 0; i < kN; ++i) {
      if (i_cancelled) __atomic_fetch_add(&after_own_cancel, 1, __ATOMIC_RELAXED);
      __atomic_fetch_add(&total2, 1, __ATOMIC_RELAXED);
      if (i == kN / 2) {
        i_cancelled = 1;
#pragma omp cancel for
      }
    }
  }
  if (enabled) {
    CHECK(after_own_cancel == 0, "cancel for: the cancelling thread ran %d more iterations",
          after_own_cancel);
  } else {
    CHECK(total2 == kN, "cancellation disabled: dynamic loop ran %d of %d", total2, kN);
  }
}

// A cancelled loop ends with its own end: the loops and sections after it
// in the same region, whose cancel constructs do not fire (each is also a
// cancellation point), run whole. The first loop's schedule is static, as
// gcc computes it inline: no loop entry point runs between the two loops.
static void constructs_after_cancelled_loop(void) {
  enum { kN = 1000 };
  volatile int never = 0;
  int first = 0, static_after = 0, dynamic_after = 0, sections_after = 0;
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int i = 0; i < kN; ++i) {
#pragma omp cancel for if (i == 0)
#pragma omp atomic
      first++;
    }
#pragma omp for schedule(static)
    for (int i = 0; i < kN; ++i) {
#pragma omp cancel for if (never)
#pragma omp atomic
      static_after++;
    }
#pragma omp for schedule(dynamic, 8)
    for (int i = 0; i < kN; ++i) {
#pragma omp cancel for if (never)
#pragma omp atomic
      dynamic_after++;
    }
#pragma omp sections
    {
#pragma omp section
      {
#pragma omp cancel sections if (never)
#pragma omp atomic
        sections_after++;
      }
#pragma omp section
      {
#pragma omp cancel sections if (never)
#pragma omp atomic
        sections_after++;
      }
    }
  }
  if (enabled) {
    CHECK(first < kN, "cancel for: all %d iterations of the cancelled loop ran", kN);
  } else {
    CHECK(first == kN, "cancellation disabled: %d iterations of %d ran", first, kN);
  }
  CHECK(static_after == kN && dynamic_after == kN && sections_after == 2,
        "after a cancelled loop: a static loop ran %d of %d iterations, a dynamic one %d, "
        "sections %d of 2",
        static_after, kN, dynamic_after, sections_after);
}

static void cancel_sections(void) {
  int went_on = 0, passed = 0;
#pragma omp parallel num_threads(2)
  {
#pragma omp sections
    {
#pragma omp section
      {
#pragma omp cancel sections
        went_on = 1;
      }
#pragma omp section
      {
        // May or may not run when the sections are cancelled.
      }
    }
    __atomic_fetch_add(&passed, 1, __ATOMIC_RELAXED);
  }
  CHECK(went_on == (enabled ? 0 : 1), "cancel sections: the cancelling section went on: %d",
        went_on);
  CHECK(passed == 2, "%d of 2 threads went on after cancelled sections", passed);
}

int main(int argc, char** argv) {
  CHECK(argc == 2 && (strcmp(argv[1], "on") == 0 || strcmp(argv[1], "off") == 0),
        "usage: cancel on|off");
  enabled = strcmp(argv[1], "on") == 0;
  CHECK(omp_get_cancellation() == enabled, "omp_get_cancellation() %d with OMP_CANCELLATION=%s",
        omp_get_cancellation(),
        getenv("OMP_CANCELLATION") ? getenv("OMP_CANCELLATION") : "(unset)");
  for (int rep = 0; rep < OMPT_SIZE(5, 2); ++rep) {
    cancel_parallel();
    cancel_at_barrier();
    cancel_at_worksharing_end();
    cancel_for();
    constructs_after_cancelled_loop();
    cancel_sections();
  }
  // A region after the cancelled ones is whole again.
  int count = 0;
#pragma omp parallel num_threads(2)
  {
#pragma omp atomic
    count++;
  }
  CHECK(count == 2, "a region after cancelled ones ran %d threads", count);
  puts("cancel: ok");
  return 0;
}
