// GOMP_CPU_AFFINITY naming CPUs beyond those this process may use (0-63 on
// a machine of 2): the list is GNU's (one place per CPU named, as
// omp_get_num_places answers on GNU's library), the program runs, and the
// default team's threads are each on the place of their number, CPUs 0 and
// 1 (with fewer than 2 CPUs the program says so and is skipped; CPUs 0 and 1
// are taken to be usable: the initial thread is bound to its place before
// main, so its mask no longer tells). Run with GOMP_CPU_AFFINITY=0-63 and
// OMP_NUM_THREADS=2.
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>

#include "omp_check.h"

enum { kSkip = 77 };

int main(void) {
  if (omp_get_num_procs() < 2) {
    printf("cpu_affinity: fewer than 2 CPUs here: skipped\n");
    return kSkip;
  }
  const int places = omp_get_num_places();
  CHECK(places >= 2, "GOMP_CPU_AFFINITY=%s: %d places", getenv("GOMP_CPU_AFFINITY"), places);
  for (int p = 0; p < 2; ++p) {
    int id = -1;
    CHECK(omp_get_place_num_procs(p) == 1, "place %d has %d CPUs", p, omp_get_place_num_procs(p));
    omp_get_place_proc_ids(p, &id);
    CHECK(id == p, "place %d is CPU %d", p, id);
  }
  CHECK(omp_get_proc_bind() != omp_proc_bind_false, "GOMP_CPU_AFFINITY set, but bind-var is false");
  int team = 0;
  int wrong = 0;
  for (int round = 0; round < 3; ++round) {
#pragma omp parallel reduction(+ : wrong)
    {
#pragma omp single
      team = omp_get_num_threads();
      const int place = omp_get_place_num();
      const int cpu = sched_getcpu();
      if (place != omp_get_thread_num() || cpu != place) {
        fprintf(stderr, "thread %d on place %d, CPU %d\n", omp_get_thread_num(), place, cpu);
        wrong++;
      }
    }
  }
  CHECK(team == 2, "a team of %d, OMP_NUM_THREADS=2", team);
  CHECK(wrong == 0, "%d threads were not on the place of their number", wrong);
  return 0;
}
