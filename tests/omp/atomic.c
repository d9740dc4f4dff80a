// #pragma omp atomic: update, capture, read, write and compare on int,
// long, float, double, and on the types gcc cannot update lock-free, for
// which it calls GOMP_atomic_start/GOMP_atomic_end around a plain update:
// long double and unsigned __int128. Floating-point operands add exactly, so
// the totals do not depend on the order.
#include <omp.h>

#include "omp_check.h"

int main(void) {
  const int per_thread = OMPT_SIZE(20000, 2000);
  int i32 = 0;
  long i64 = 0;
  float f32 = 0;
  double f64 = 0;
  long double f80 = 0;
  unsigned __int128 u128 = 0;
  long double ld_max = 0;
  int n = 0;
#pragma omp parallel
  {
#pragma omp single
    n = omp_get_num_threads();
    for (int k = 0; k < per_thread; ++k) {
#pragma omp atomic
      i32 += 1;
#pragma omp atomic update
      i64 += 3;
#pragma omp atomic
      f32 += 1.0f;
#pragma omp atomic
      f64 += 0.5;
#pragma omp atomic
      f80 += 0.25L;
      // Carries across the low 64 bits: 2^64 - 1 + 1 must reach bit 64.
#pragma omp atomic
      u128 += ((unsigned __int128)1 << 64) + 0xFFFFFFFFFFFFFFFFull;
#pragma omp atomic compare
      ld_max = ld_max < (long double)k ? (long double)k : ld_max;
    }
  }
  long rounds = (long)per_thread * n;
  CHECK(i32 == rounds, "int: %d, %ld expected", i32, rounds);
  CHECK(i64 == 3 * rounds, "long: %ld, %ld expected", i64, 3 * rounds);
  CHECK(f32 == (float)rounds, "float: %g, %ld expected", (double)f32, rounds);
  CHECK(f64 == 0.5 * (double)rounds, "double: %g, %g expected", f64, 0.5 * (double)rounds);
  CHECK(f80 == 0.25L * (long double)rounds, "long double: %Lg, %Lg expected", f80,
        0.25L * (long double)rounds);
  unsigned __int128 want =
      (unsigned __int128)rounds * (((unsigned __int128)1 << 64) + 0xFFFFFFFFFFFFFFFFull);
  CHECK(u128 == want, "unsigned __int128: %016llx%016llx, %016llx%016llx expected",
        (unsigned long long)(u128 >> 64), (unsigned long long)u128,
        (unsigned long long)(want >> 64), (unsigned long long)want);
  CHECK(ld_max == (long double)(per_thread - 1), "long double max: %Lg", ld_max);

  // capture: every thread takes distinct tickets; together they are 0..total-1.
  const int total = OMPT_SIZE(100000, 10000);
  int next = 0;
  long double ld_next = 0;
  char* taken = calloc((size_t)total, 1);
  char* ld_taken = calloc((size_t)total, 1);
  CHECK(taken != NULL && ld_taken != NULL, "out of memory");
#pragma omp parallel
  {
    for (;;) {
      int ticket;
#pragma omp atomic capture
      ticket = next++;
      if (ticket >= total) break;
      taken[ticket]++;  // each index by one thread only, if the tickets are distinct
      long double ld_ticket;
#pragma omp atomic capture
      {
        ld_ticket = ld_next;
        ld_next += 1.0L;
      }
      if (ld_ticket < (long double)total) ld_taken[(int)ld_ticket]++;
    }
  }
  for (int t = 0; t < total; ++t) {
    CHECK(taken[t] == 1, "atomic capture: ticket %d taken %d times", t, taken[t]);
    CHECK(ld_taken[t] == 1, "atomic capture (long double): ticket %d taken %d times", t,
          ld_taken[t]);
  }
  free(taken);
  free(ld_taken);

  // read, write and compare: a shared minimum, and a flag handed over.
  int shared_min = 1 << 30;
  long handed = 0;
#pragma omp parallel
  {
    int id = omp_get_thread_num();
    for (int k = 0; k < 1000; ++k) {
      int candidate = 5000 - k * 3 - id;
#pragma omp atomic compare
      shared_min = shared_min > candidate ? candidate : shared_min;
    }
#pragma omp atomic write
    handed = 1000 + id;
    long v;
#pragma omp atomic read
    v = handed;
    CHECK(v >= 1000 && v < 1000 + omp_get_num_threads(), "atomic read got %ld", v);
  }
  CHECK(shared_min == 5000 - 999 * 3 - (n - 1), "atomic compare minimum %d, %d expected",
        shared_min, 5000 - 999 * 3 - (n - 1));
  puts("atomic: ok");
  return 0;
}
