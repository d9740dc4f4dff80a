// depend(depobj: ...) with omp_depend_t objects (#pragma omp depobj with
// depend, update and destroy): GOMP_task's depend array with depobj entries,
// mixed with plain depend clauses on the same addresses, checked against the
// order a serial run gives. (depend on omp_all_memory needs gcc 13: gcc 12
// rejects it, so it is not here.)
#include <omp.h>

#include "omp_check.h"

static unsigned long mix(unsigned long v, long k) {
  return (v ^ (unsigned long)k) * 0x9E3779B97F4A7C15ul + 1;
}

int main(void) {
  const int n = OMPT_SIZE(20000, 2000);
  for (int rep = 0; rep < OMPT_SIZE(2, 1); ++rep) {
    unsigned long x = 0, y = 0;
    unsigned long* seen = calloc((size_t)n, sizeof *seen);
    CHECK(seen != NULL, "out of memory");
    omp_depend_t write_x, read_x, write_y, mutex_y;
#pragma omp depobj(write_x) depend(inout : x)
#pragma omp depobj(read_x) depend(inout : x)
#pragma omp depobj(read_x) update(in)
#pragma omp depobj(write_y) depend(out : y)
#pragma omp depobj(mutex_y) depend(mutexinoutset : y)
#pragma omp parallel
#pragma omp single
    {
      for (long k = 0; k < n; ++k) {
        switch (k % 6) {
          case 0:  // a writer through a depend object
#pragma omp task depend(depobj : write_x) firstprivate(k)
            x = mix(x, k);
            break;
          case 1:  // a reader through a depend object updated to `in`
#pragma omp task depend(depobj : read_x) shared(seen) firstprivate(k)
            seen[k] = x;
            break;
          case 2:  // a plain writer of the same address
#pragma omp task depend(inout : x) firstprivate(k)
            x = mix(x, k);
            break;
          case 3:  // both objects: reads x, writes y
#pragma omp task depend(depobj : read_x, write_y) shared(seen) firstprivate(k)
          {
            seen[k] = x;
            y = mix(y, (long)x);
          } break;
          case 4:  // mutexinoutset through a depend object: adds, in any order
#pragma omp task depend(depobj : mutex_y) firstprivate(k)
            y += (unsigned long)k;
            break;
          case 5:  // a plain reader of y
#pragma omp task depend(in : y) shared(seen) firstprivate(k)
            seen[k] = y;
            break;
        }
        // Windows of 500 tasks: GNU's libgomp slows down more than linearly
        // as a graph of pending tasks grows (see task_depend.c).
        if (k % 500 == 499) {
#pragma omp taskwait
        }
      }
    }
#pragma omp depobj(write_x) destroy
#pragma omp depobj(read_x) destroy
#pragma omp depobj(write_y) destroy
#pragma omp depobj(mutex_y) destroy

    unsigned long sx = 0, sy = 0;
    for (long k = 0; k < n; ++k) {
      unsigned long want = 0;
      switch (k % 6) {
        case 0:
          sx = mix(sx, k);
          break;
        case 1:
          want = sx;
          break;
        case 2:
          sx = mix(sx, k);
          break;
        case 3:
          want = sx;
          sy = mix(sy, (long)sx);
          break;
        case 4:
          sy += (unsigned long)k;
          break;
        case 5:
          want = sy;
          break;
      }
      if (k % 6 == 1 || k % 6 == 3 || k % 6 == 5) {
        CHECK(seen[k] == want, "task %ld (kind %ld) found %lx, the serial order gives %lx", k,
              k % 6, seen[k], want);
      }
    }
    CHECK(x == sx && y == sy, "final x %lx y %lx, serial %lx %lx", x, y, sx, sy);
    free(seen);
  }
  puts("task_depobj: ok");
  return 0;
}
