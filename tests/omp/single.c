// GOMP_single_start (with and without nowait) and GOMP_single_copy_start/end
// (copyprivate): each single construct runs once per team, its barrier
// publishes what it wrote, and copyprivate hands the executing thread's
// private values (a scalar, an array, a struct) to every thread.
#include <omp.h>

#include "omp_check.h"

struct blob {
  long id;
  double values[5];
  char name[16];
};

int main(void) {
  const int rounds = OMPT_SIZE(300, 100);
  int* ran = calloc((size_t)rounds, sizeof *ran);
  int* ran_nowait = calloc((size_t)rounds, sizeof *ran_nowait);
  CHECK(ran != NULL && ran_nowait != NULL, "out of memory");
  int published = -1;
#pragma omp parallel
  {
    for (int r = 0; r < rounds; ++r) {
#pragma omp single
      {
        ran[r]++;
        published = r;
      }
      // single's barrier: the write is visible to every thread.
      CHECK(published == r, "after single %d a thread reads %d", r, published);
#pragma omp barrier
#pragma omp single nowait
      {
#pragma omp atomic
        ran_nowait[r]++;
      }
    }
  }
  for (int r = 0; r < rounds; ++r) {
    CHECK(ran[r] == 1, "single %d ran %d times", r, ran[r]);
    CHECK(ran_nowait[r] == 1, "single nowait %d ran %d times", r, ran_nowait[r]);
  }
  free(ran);
  free(ran_nowait);

  // copyprivate: the value the single's thread computed, in every thread.
  int bad = 0;
#pragma omp parallel reduction(+ : bad)
  {
    for (int r = 0; r < rounds; ++r) {
      int x;
      long arr[3];
      struct blob b;
#pragma omp single copyprivate(x, arr, b)
      {
        x = r * 7;
        arr[0] = r;
        arr[1] = -r;
        arr[2] = 2L * r;
        b.id = r;
        for (int k = 0; k < 5; ++k) b.values[k] = r + k * 0.5;
        snprintf(b.name, sizeof b.name, "round%d", r % 1000);
      }
      if (x != r * 7 || arr[0] != r || arr[1] != -r || arr[2] != 2L * r || b.id != r ||
          b.values[4] != r + 2.0) {
        bad++;
      }
      char want[16];
      snprintf(want, sizeof want, "round%d", r % 1000);
      if (strcmp(b.name, want) != 0) bad++;
    }
  }
  CHECK(bad == 0, "%d copyprivate values differed from the single's", bad);
  puts("single: ok");
  return 0;
}
