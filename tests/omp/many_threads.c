// Teams of more threads than a library may be willing to start (5000, from
// OMP_NUM_THREADS and from a num_threads clause): OpenMP lets a team be
// smaller than asked, so the program checks what every team must satisfy
// whatever its size: omp_get_num_threads() is the number of threads that
// run the region, each with its own number from 0, a barrier holds them
// all, and a worksharing loop gives each iteration once. The ICV keeps what
// was asked (omp_get_max_threads). Run with OMP_NUM_THREADS=5000.
//
//   many_threads [N | N+]   (a team of exactly N, or of at least N)
#include <omp.h>

#include "omp_check.h"

enum { kAsked = 5000, kN = 20000 };

static unsigned char seen[kAsked];
static int hits[kN];

// The region's body, run by every thread of the team.
static void body(int limit, int* team, int* ran, int* after_barrier) {
  const int id = omp_get_thread_num();
  const int n = omp_get_num_threads();
  CHECK(id >= 0 && id < n && n <= limit, "thread %d of a team of %d (%d asked)", id, n, limit);
  CHECK(__atomic_exchange_n(&seen[id], 1, __ATOMIC_RELAXED) == 0, "thread number %d twice", id);
  __atomic_fetch_add(ran, 1, __ATOMIC_RELAXED);
#pragma omp barrier
#pragma omp master
  {
    *team = n;
    *after_barrier = __atomic_load_n(ran, __ATOMIC_RELAXED);
  }
#pragma omp for schedule(static)
  for (int i = 0; i < kN; ++i) hits[i] += 1;
}

// A region with num_threads(asked), or without the clause when asked is 0.
static void check_team(int asked, int expected) {
  memset(seen, 0, sizeof seen);
  memset(hits, 0, sizeof hits);
  int team = 0;
  int ran = 0;
  int after_barrier = 0;
  if (asked > 0) {
#pragma omp parallel num_threads(asked)
    body(asked, &team, &ran, &after_barrier);
  } else {
    const int limit = omp_get_max_threads();
#pragma omp parallel
    body(limit, &team, &ran, &after_barrier);
  }
  CHECK(team >= 1 && team == ran, "a team of %d, %d threads ran the region", team, ran);
  CHECK(after_barrier == team, "%d threads had arrived after the barrier, of %d", after_barrier, team);
  for (int i = 0; i < kN; ++i) CHECK(hits[i] == 1, "iteration %d ran %d times", i, hits[i]);
  if (expected > 0) CHECK(team == expected, "a team of %d, %d expected", team, expected);
  if (expected < 0) CHECK(team >= -expected, "a team of %d, at least %d expected", team, -expected);
}

int main(int argc, char** argv) {
  int expected = argc > 1 ? atoi(argv[1]) : 0;
  if (argc > 1 && argv[1][strlen(argv[1]) - 1] == '+') expected = -expected;
  CHECK(omp_get_max_threads() == kAsked, "omp_get_max_threads() is %d, OMP_NUM_THREADS=%d expected",
        omp_get_max_threads(), kAsked);
  check_team(0, expected);      // OMP_NUM_THREADS's 5000
  check_team(kAsked, expected); // num_threads(5000)
  check_team(3, 3);             // and a small team again
  CHECK(omp_get_max_threads() == kAsked, "omp_get_max_threads() is %d after the regions", omp_get_max_threads());
  return 0;
}
