// GOMP_critical_start/end (unnamed) and GOMP_critical_name_start/end
// (named): mutual exclusion checked by a flag that only one thread may hold,
// counters updated without atomics, named sections nested inside each other
// and inside the unnamed one, and a hint.
#include <omp.h>

#include "omp_check.h"

// Set while a thread is inside the section it guards; a second thread that
// finds it set proves two threads inside at once.
static int inside_unnamed, inside_a, inside_b;

static void enter(int* inside, const char* name) {
  int was = __atomic_exchange_n(inside, 1, __ATOMIC_RELAXED);
  CHECK(was == 0, "two threads inside critical section %s at once", name);
}

static void leave(int* inside) { __atomic_store_n(inside, 0, __ATOMIC_RELAXED); }

int main(void) {
  const int per_thread = OMPT_SIZE(20000, 2000);
  long unnamed = 0, named_a = 0, named_b = 0, nested = 0, hinted = 0;
  int n = 0;
#pragma omp parallel
  {
#pragma omp single
    n = omp_get_num_threads();
    for (int k = 0; k < per_thread; ++k) {
#pragma omp critical
      {
        enter(&inside_unnamed, "(unnamed)");
        unnamed++;  // a plain read-modify-write: only the section protects it
        leave(&inside_unnamed);
      }
#pragma omp critical(section_a)
      {
        enter(&inside_a, "section_a");
        named_a += 2;
        leave(&inside_a);
      }
      if (k % 16 == 0) {
        // Different names nest (in either order, here always a then b), and a
        // named section nests inside the unnamed one.
#pragma omp critical
        {
#pragma omp critical(section_a)
          {
#pragma omp critical(section_b)
            {
              enter(&inside_b, "section_b");
              nested++;
              named_b += 3;
              leave(&inside_b);
            }
          }
        }
      }
#pragma omp critical(section_hinted) hint(omp_sync_hint_contended)
      hinted++;
    }
  }
  long rounds = (long)per_thread * n;
  long nested_rounds = (long)((per_thread + 15) / 16) * n;
  CHECK(unnamed == rounds, "unnamed critical: %ld increments, %ld expected", unnamed, rounds);
  CHECK(named_a == 2 * rounds, "critical(section_a): %ld, %ld expected", named_a, 2 * rounds);
  CHECK(nested == nested_rounds && named_b == 3 * nested_rounds,
        "nested critical sections: %ld and %ld, %ld and %ld expected", nested, named_b,
        nested_rounds, 3 * nested_rounds);
  CHECK(hinted == rounds, "critical with a hint: %ld, %ld expected", hinted, rounds);
  puts("critical: ok");
  return 0;
}
