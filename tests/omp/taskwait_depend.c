// #pragma omp taskwait depend(...) (GOMP_taskwait_depend): the encountering
// task waits for the sibling tasks its dependences name, and they are done
// when it resumes; a depend(out) wait also waits for the readers.
#include <omp.h>

#include "omp_check.h"

int main(void) {
  const int rounds = OMPT_SIZE(500, 100);
  int bad = 0;
#pragma omp parallel reduction(+ : bad)
#pragma omp single
  {
    for (int r = 0; r < rounds; ++r) {
      long x = 0, y = 0;
      int readers_done = 0;
      // A writer of x that takes a moment, then readers of x.
#pragma omp task depend(out : x) shared(x)
      {
        volatile long work = 0;
        for (int k = 0; k < 2000; ++k) work += k;
        (void)work;
        x = 42;
      }
      for (int k = 0; k < 4; ++k) {
#pragma omp task depend(in : x) shared(x, readers_done)
        {
          if (x == 42) __atomic_fetch_add(&readers_done, 1, __ATOMIC_RELAXED);
        }
      }
#pragma omp task depend(out : y) shared(y)
      y = 7;
      // in: waits for the writer of x (not necessarily for the readers).
#pragma omp taskwait depend(in : x)
      if (x != 42) bad++;
        // out: waits for the readers of x as well.
#pragma omp taskwait depend(out : x)
      if (__atomic_load_n(&readers_done, __ATOMIC_RELAXED) != 4) bad++;
#pragma omp taskwait depend(inout : y)
      if (y != 7) bad++;
    }
  }
  CHECK(bad == 0, "%d taskwait depend waits returned before the tasks they name were done", bad);

  // Through a depend object.
  long z = 0;
  omp_depend_t on_z;
#pragma omp depobj(on_z) depend(inout : z)
#pragma omp parallel
#pragma omp single
  {
    for (int r = 0; r < rounds; ++r) {
#pragma omp task depend(inout : z) shared(z)
      z += 2;
#pragma omp taskwait depend(depobj : on_z)
      CHECK(z == 2L * (r + 1), "after taskwait depend(depobj) in round %d, z is %ld", r, z);
    }
  }
#pragma omp depobj(on_z) destroy
  puts("taskwait_depend: ok");
  return 0;
}
