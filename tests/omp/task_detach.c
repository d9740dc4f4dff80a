// detach(event) and omp_fulfill_event (GOMP_task's detach flag and event
// argument): a detached task is complete only when its body has ended and
// its event is fulfilled, whether by another task, by a thread outside the
// team, or by itself; taskwait, dependences, taskgroup and the region's
// final barrier all wait for that.
#include <omp.h>
#include <pthread.h>
#include <string.h>

#include "omp_check.h"

enum { kEvents = 64 };

struct fulfiller {
  omp_event_handle_t events[kEvents];
  int count;
  int delay_ms;
  int fulfilled;  // how many it has fulfilled so far
};

// A thread outside the team: waits, then fulfils the events last to first.
static void* fulfil_later(void* arg) {
  struct fulfiller* f = (struct fulfiller*)arg;
  ompt_sleep_ms(f->delay_ms);
  for (int k = f->count - 1; k >= 0; --k) {
    // Count before fulfilling: whoever sees the task complete sees the count.
    __atomic_fetch_add(&f->fulfilled, 1, __ATOMIC_SEQ_CST);
    omp_fulfill_event(f->events[k]);
  }
  return NULL;
}

// Misuse: a detached task's body fulfils its event twice. GNU's library
// stops the program with a message naming omp_fulfill_event (exit status 1);
// the program must not go on (run as `task_detach twice`, expect.sh fail).
static int fulfil_twice(void) {
#pragma omp parallel num_threads(2)
#pragma omp single
  {
    omp_event_handle_t ev;
#pragma omp task detach(ev)
    {
      omp_fulfill_event(ev);
      omp_fulfill_event(ev);
    }
#pragma omp taskwait
  }
  puts("task_detach twice: the second omp_fulfill_event went unreported");
  return 0;
}

// The same misuse once the task is complete (mote's library only: GNU's
// reads the freed task then, and what it does depends on what is there).
static int fulfil_late(void) {
#pragma omp parallel num_threads(2)
#pragma omp single
  {
    omp_event_handle_t ev;
#pragma omp task detach(ev)
    omp_fulfill_event(ev);
#pragma omp taskwait
    omp_fulfill_event(ev);
  }
  puts("task_detach late: the second omp_fulfill_event went unreported");
  return 0;
}

// A team of one (num_threads(1), as GNU's testsuite's task-detach-2.c and
// -3.c): a detached task is still deferred, so its event may be fulfilled
// by a task made after it, and a task that depends on it (made before or
// after the one that fulfils it) runs after that.
static void team_of_one(void) {
  int x = 0, y = 0, z = 0, order_ok = 1;
#pragma omp parallel num_threads(1) shared(x, y, z, order_ok)
#pragma omp single
  {
    omp_event_handle_t e1, e2;
#pragma omp task detach(e1) shared(x)
    x++;
#pragma omp task detach(e2) shared(y)
    {
      y++;
      omp_fulfill_event(e1);
    }
#pragma omp task shared(z)
    {
      z++;
      omp_fulfill_event(e2);
    }
  }
  CHECK(x == 1 && y == 1 && z == 1, "a team of one: x %d, y %d, z %d (1 each)", x, y, z);

  int dep = 0, fulfilled = 0, seen = -1;
#pragma omp parallel num_threads(1)
#pragma omp single
  {
    omp_event_handle_t e;
#pragma omp task depend(out : dep) detach(e) shared(dep)
    dep = 1;
    // A task that depends on the detached one, made before the task that
    // fulfils its event: it must wait for that.
#pragma omp task depend(in : dep) shared(dep, fulfilled, seen, order_ok)
    {
      seen = dep;
      if (!__atomic_load_n(&fulfilled, __ATOMIC_SEQ_CST)) order_ok = 0;
    }
#pragma omp task shared(fulfilled)
    {
      __atomic_store_n(&fulfilled, 1, __ATOMIC_SEQ_CST);
      omp_fulfill_event(e);
    }
#pragma omp taskwait
  }
  CHECK(seen == 1, "a team of one: the dependent task saw %d (or did not run)", seen);
  CHECK(order_ok, "a team of one: a task ran before the detached task it depends on was complete");
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "twice") == 0) return fulfil_twice();
  if (argc > 1 && strcmp(argv[1], "late") == 0) return fulfil_late();
  team_of_one();
  const int rounds = OMPT_SIZE(100, 20);
  int bad = 0;

  // Fulfilled by another task; a dependent task waits for it.
#pragma omp parallel reduction(+ : bad)
#pragma omp single
  {
    for (int r = 0; r < rounds; ++r) {
      omp_event_handle_t ev;
      int x = 0, fulfilled = 0;
#pragma omp task detach(ev) depend(out : x) shared(x)
      x = 1;
#pragma omp task firstprivate(ev) shared(fulfilled)
      {
        volatile int work = 0;
        for (int k = 0; k < 1000; ++k) work = work + k;
        __atomic_store_n(&fulfilled, 1, __ATOMIC_SEQ_CST);
        omp_fulfill_event(ev);
      }
#pragma omp task depend(in : x) shared(x, fulfilled, bad)
      {
        if (__atomic_load_n(&fulfilled, __ATOMIC_SEQ_CST) != 1 || x != 1) {
#pragma omp atomic
          bad++;
        }
      }
#pragma omp taskwait
    }
  }
  CHECK(bad == 0, "%d tasks that depend on a detached task ran before its event was fulfilled",
        bad);

  // Fulfilled by a thread outside the team, later: taskwait waits for it.
  for (int r = 0; r < OMPT_SIZE(10, 3); ++r) {
    struct fulfiller f = {.count = kEvents, .delay_ms = 2 + r % 5};
    int bodies = 0, seen_fulfilled = -1;
    pthread_t helper;
#pragma omp parallel
#pragma omp single
    {
      for (int k = 0; k < kEvents; ++k) {
        omp_event_handle_t ev;
#pragma omp task detach(ev) shared(bodies)
        __atomic_fetch_add(&bodies, 1, __ATOMIC_RELAXED);
        f.events[k] = ev;
      }
      CHECK(pthread_create(&helper, NULL, fulfil_later, &f) == 0, "pthread_create failed");
#pragma omp taskwait
      seen_fulfilled = __atomic_load_n(&f.fulfilled, __ATOMIC_SEQ_CST);
    }
    pthread_join(helper, NULL);
    CHECK(bodies == kEvents, "%d detached bodies ran of %d", bodies, kEvents);
    CHECK(seen_fulfilled == kEvents,
          "taskwait returned when %d of %d events had been fulfilled by another thread",
          seen_fulfilled, kEvents);
  }

  // The same through a taskgroup; and through the barrier at the end of the
  // region, fulfilled by a task once single nowait has let every thread go.
  // (GNU's libgomp 12 never leaves that barrier when a thread outside the
  // team fulfils the events, so here a task does it.)
  for (int r = 0; r < OMPT_SIZE(5, 2); ++r) {
    struct fulfiller f = {.count = kEvents, .delay_ms = 5};
    struct fulfiller g = {.count = kEvents, .delay_ms = 5};
    int in_group = -1, bodies = 0;
    pthread_t helper;
#pragma omp parallel
    {
#pragma omp single
      {
#pragma omp taskgroup
        {
          for (int k = 0; k < kEvents; ++k) {
            omp_event_handle_t ev;
#pragma omp task detach(ev) shared(bodies)
            __atomic_fetch_add(&bodies, 1, __ATOMIC_RELAXED);
            f.events[k] = ev;
          }
          CHECK(pthread_create(&helper, NULL, fulfil_later, &f) == 0, "pthread_create failed");
        }
        in_group = __atomic_load_n(&f.fulfilled, __ATOMIC_SEQ_CST);
      }
#pragma omp single nowait
      {
        for (int k = 0; k < kEvents; ++k) {
          omp_event_handle_t ev;
#pragma omp task detach(ev) shared(bodies)
          __atomic_fetch_add(&bodies, 1, __ATOMIC_RELAXED);
          g.events[k] = ev;
        }
#pragma omp task
        fulfil_later(&g);
      }
    }
    int at_region_end = __atomic_load_n(&g.fulfilled, __ATOMIC_SEQ_CST);
    pthread_join(helper, NULL);
    CHECK(bodies == 2 * kEvents, "%d detached bodies ran of %d", bodies, 2 * kEvents);
    CHECK(in_group == kEvents, "the taskgroup ended when %d of %d events were fulfilled", in_group,
          kEvents);
    CHECK(at_region_end == kEvents, "the region ended when %d of %d events were fulfilled",
          at_region_end, kEvents);
  }

  // Fulfilled by the task itself, before its body ends: complete at the end.
  int self_done = 0;
#pragma omp parallel
#pragma omp single
  {
    for (int k = 0; k < 100; ++k) {
      omp_event_handle_t ev;
#pragma omp task detach(ev) shared(self_done)
      {
        omp_fulfill_event(ev);
        __atomic_fetch_add(&self_done, 1, __ATOMIC_RELAXED);
      }
    }
#pragma omp taskwait
    CHECK(__atomic_load_n(&self_done, __ATOMIC_RELAXED) == 100,
          "taskwait returned with %d of 100 self-fulfilled tasks done", self_done);
  }
  puts("task_detach: ok");
  return 0;
}
