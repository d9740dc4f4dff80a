// sections: GOMP_sections_start/next/end (and _nowait), GOMP_sections2_start
// (sections with a reduction), GOMP_parallel_sections (the combined
// construct): every section once per encounter, lastprivate from the
// lexically last section, reductions, nowait.
#include <omp.h>

#include "omp_check.h"

int main(void) {
  const int rounds = OMPT_SIZE(100, 30);
  int counts[4] = {0};
  int last = -1;
  long sum = 0;
#pragma omp parallel
  {
    for (int r = 0; r < rounds; ++r) {
#pragma omp sections lastprivate(last)
      {
#pragma omp section
        {
          counts[0]++;
          last = 0;
        }
#pragma omp section
        {
          counts[1]++;
          last = 1;
        }
#pragma omp section
        {
          counts[2]++;
          last = 2;
        }
      }
      // The barrier at the end of sections publishes last.
      CHECK(last == 2, "round %d: lastprivate from the sections is %d", r, last);
#pragma omp barrier
#pragma omp sections reduction(+ : sum)
      {
#pragma omp section
        sum += 1;
#pragma omp section
        sum += 10;
#pragma omp section
        sum += 100;
#pragma omp section
        sum += 1000;
      }
#pragma omp sections nowait
      {
#pragma omp section
        {
#pragma omp atomic
          counts[3]++;
        }
#pragma omp section
        {
#pragma omp atomic
          counts[3] += 2;
        }
      }
    }
  }
  for (int s = 0; s < 3; ++s) {
    CHECK(counts[s] == rounds, "section %d ran %d times in %d rounds", s, counts[s], rounds);
  }
  CHECK(counts[3] == 3 * rounds, "nowait sections added %d, %d expected", counts[3], 3 * rounds);
  CHECK(sum == 1111L * rounds, "sections reduction: %ld, %ld expected", sum, 1111L * rounds);

  // parallel sections: more sections than threads, each once.
  int ran[9] = {0};
  int who_last = -1;
#pragma omp parallel sections lastprivate(who_last)
  {
#pragma omp section
    ran[0]++, who_last = 0;
#pragma omp section
    ran[1]++, who_last = 1;
#pragma omp section
    ran[2]++, who_last = 2;
#pragma omp section
    ran[3]++, who_last = 3;
#pragma omp section
    ran[4]++, who_last = 4;
#pragma omp section
    ran[5]++, who_last = 5;
#pragma omp section
    ran[6]++, who_last = 6;
#pragma omp section
    ran[7]++, who_last = 7;
#pragma omp section
    ran[8]++, who_last = 8;
  }
  for (int s = 0; s < 9; ++s)
    CHECK(ran[s] == 1, "parallel sections: section %d ran %d times", s, ran[s]);
  CHECK(who_last == 8, "parallel sections lastprivate: %d", who_last);
  puts("sections: ok");
  return 0;
}
