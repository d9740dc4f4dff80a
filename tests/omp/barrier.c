// GOMP_barrier: many barriers back to back, checking that no thread passes
// one before every thread has arrived, and that what a thread wrote before a
// barrier is what every thread reads after it. Threads arrive in a different
// order each round (some do extra work first). Also the implicit barriers
// at the end of a worksharing loop and of single.
#include <omp.h>

#include "omp_check.h"

static void explicit_barriers(int rounds) {
  long arrived = 0;  // incremented by every thread before each barrier
  int n = omp_get_max_threads();
  int* slots = calloc((size_t)n, sizeof *slots);
  CHECK(slots != NULL, "out of memory");
#pragma omp parallel
  {
    int id = omp_get_thread_num();
    uint64_t rng = 1234 + (uint64_t)id;
    for (int r = 0; r < rounds; ++r) {
      // A different thread is late each round.
      if ((ompt_random(&rng) & 7) == 0) {
        volatile int spin = 0;
        for (int k = 0; k < 2000; ++k) spin += k;
      }
      slots[id] = r;  // plain write: the barrier is what publishes it
#pragma omp atomic update
      arrived++;
#pragma omp barrier
      long seen;
#pragma omp atomic read
      seen = arrived;
      // Every thread's increment of this round is in, and none of the next
      // round's (that waits for the second barrier, which this thread holds).
      CHECK(seen == (long)(r + 1) * n,
            "thread %d after barrier %d counts %ld arrivals, %ld expected", id, r, seen,
            (long)(r + 1) * n);
      for (int t = 0; t < n; ++t) {
        CHECK(slots[t] == r, "thread %d after barrier %d reads %d from thread %d", id, r, slots[t],
              t);
      }
#pragma omp barrier
    }
  }
  free(slots);
  CHECK(arrived == (long)rounds * n, "%ld arrivals, %ld expected", arrived, (long)rounds * n);
}

// The barrier at the end of a loop (no nowait) and of single.
static void implicit_barriers(int rounds) {
  enum { kLen = 257 };
  int data[kLen];
  int flag = 0;
#pragma omp parallel
  {
    for (int r = 0; r < rounds; ++r) {
#pragma omp for schedule(dynamic, 8)
      for (int i = 0; i < kLen; ++i) data[i] = r * kLen + i;
      // After the loop's barrier every element is this round's.
      for (int i = 0; i < kLen; i += 17) {
        CHECK(data[i] == r * kLen + i, "after loop %d: data[%d] = %d", r, i, data[i]);
      }
#pragma omp single
      flag = r + 1;
      CHECK(flag == r + 1, "after single %d: flag %d", r, flag);
#pragma omp barrier
    }
  }
}

int main(void) {
  explicit_barriers(OMPT_SIZE(2000, 300));
  implicit_barriers(OMPT_SIZE(500, 100));
  // A team larger than the machine: a waiting thread must yield to the late one.
  omp_set_num_threads(omp_get_max_threads() + 2);
  explicit_barriers(OMPT_SIZE(300, 50));
  puts("barrier: ok");
  return 0;
}
