// Outermost parallel regions opened at the same time by different
// application threads (pthreads): each is its own contention group with a
// team of its own, and they run at once. The regions here wait for each
// other (every thread of both teams meets at a rendezvous, and each team
// waits for a flag the other sets), so a library that runs them one after
// the other never finishes them. Then many rounds of regions from four
// pthreads at once, each with worksharing, tasks and a reduction checked
// against the serial answer, and a nested region inside; and a region from
// the initial thread afterwards.
#include <omp.h>
#include <pthread.h>

#include "omp_check.h"

enum { kTeam = 2, kApps = 4 };

// ---- Two regions that wait for each other ------------------------------------

static int arrived;      // threads of both teams at the rendezvous
static int flags[2];     // set by team k's thread 0, waited for by the other team
static int sizes[2];
static int ids_seen[2];  // a bit per omp_get_thread_num

static void* meet(void* arg) {
  const int me = (int)(intptr_t)arg;
#pragma omp parallel num_threads(kTeam)
  {
    CHECK(omp_get_level() == 1 && omp_get_active_level() == 1, "an application thread's region is at level %d",
          omp_get_level());
    __atomic_fetch_or(&ids_seen[me], 1 << omp_get_thread_num(), __ATOMIC_RELAXED);
#pragma omp single
    __atomic_store_n(&sizes[me], omp_get_num_threads(), __ATOMIC_RELAXED);
    __atomic_fetch_add(&arrived, 1, __ATOMIC_ACQ_REL);
    WAIT_UNTIL(__atomic_load_n(&arrived, __ATOMIC_ACQUIRE) == 2 * kTeam,
               "every thread of both regions at the rendezvous");
#pragma omp master
    __atomic_store_n(&flags[me], 1, __ATOMIC_RELEASE);
    WAIT_UNTIL(__atomic_load_n(&flags[1 - me], __ATOMIC_ACQUIRE) == 1, "the other region's flag");
  }
  return NULL;
}

static void regions_that_wait_for_each_other(void) {
  pthread_t t[2];
  for (int k = 0; k < 2; ++k) CHECK(pthread_create(&t[k], NULL, meet, (void*)(intptr_t)k) == 0, "pthread_create");
  for (int k = 0; k < 2; ++k) pthread_join(t[k], NULL);
  for (int k = 0; k < 2; ++k) {
    CHECK(sizes[k] == kTeam, "region %d had a team of %d, %d asked", k, sizes[k], kTeam);
    CHECK(ids_seen[k] == (1 << kTeam) - 1, "region %d's thread numbers: mask %#x", k, ids_seen[k]);
  }
}

// ---- Many regions from several application threads ----------------------------

enum { kRounds = OMPT_SIZE(200, 20), kN = 1000 };

static long fib(int n) {
  if (n < 2) return n;
  long a, b;
#pragma omp task shared(a)
  a = fib(n - 1);
#pragma omp task shared(b)
  b = fib(n - 2);
#pragma omp taskwait
  return a + b;
}

static void* rounds(void* arg) {
  const long me = (long)(intptr_t)arg;
  int* data = malloc(kN * sizeof *data);
  CHECK(data != NULL, "malloc");
  for (int round = 0; round < kRounds; ++round) {
    long sum = 0;
    long f = 0;
    int team = 0;
    int inner = 0;
#pragma omp parallel num_threads(kTeam) reduction(+ : sum)
    {
#pragma omp for schedule(dynamic, 7)
      for (int i = 0; i < kN; ++i) {
        data[i] = (int)(i * me + round);
        sum += data[i];
      }
#pragma omp single
      {
        team = omp_get_num_threads();
        f = fib(12);
      }
#pragma omp parallel num_threads(2)
      {
#pragma omp atomic
        inner += 1;
      }
    }
    long expected = 0;
    for (int i = 0; i < kN; ++i) expected += (long)i * me + round;
    CHECK(sum == expected, "application thread %ld, round %d: sum %ld, serial %ld", me, round, sum, expected);
    CHECK(f == 144, "application thread %ld, round %d: fib(12) = %ld", me, round, f);
    CHECK(team == kTeam, "application thread %ld: a team of %d, %d asked", me, team, kTeam);
    CHECK(inner >= team, "application thread %ld: %d threads in the inner regions of %d", me, inner, team);
    for (int i = 0; i < kN; ++i) CHECK(data[i] == (int)(i * me + round), "round %d: element %d", round, i);
  }
  free(data);
  return NULL;
}

static void many_regions(void) {
  pthread_t t[kApps];
  for (long k = 0; k < kApps; ++k) {
    CHECK(pthread_create(&t[k], NULL, rounds, (void*)(intptr_t)(k + 1)) == 0, "pthread_create");
  }
  for (int k = 0; k < kApps; ++k) pthread_join(t[k], NULL);
}

int main(void) {
  regions_that_wait_for_each_other();
  // Again, with teams reused by whoever comes.
  arrived = 0;
  flags[0] = flags[1] = 0;
  ids_seen[0] = ids_seen[1] = 0;
  regions_that_wait_for_each_other();
  many_regions();
  int n = 0;
#pragma omp parallel num_threads(kTeam)
#pragma omp single
  n = omp_get_num_threads();
  CHECK(n == kTeam, "the initial thread's region after the others: a team of %d", n);
  return 0;
}
