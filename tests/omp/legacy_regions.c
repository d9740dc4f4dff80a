// Many regions through the entry points of gcc before 4.9, as an old binary
// calls them (GOMP_parallel_loop_<schedule>_start and
// GOMP_parallel_sections_start, then GOMP_parallel_end), each region checked:
// the library must keep nothing per region once it has ended. The heap in
// use (mallinfo2) may not grow by more than a few bytes per region over
// 20 000 regions (a region's loop description kept to the end of the
// program is 40 bytes and more).
#include <malloc.h>
#include <omp.h>
#include <stdbool.h>

#include "omp_check.h"

void GOMP_parallel_loop_static_start(void (*fn)(void*), void* data, unsigned num_threads, long start, long end,
                                     long incr, long chunk);
void GOMP_parallel_loop_dynamic_start(void (*fn)(void*), void* data, unsigned num_threads, long start, long end,
                                      long incr, long chunk);
void GOMP_parallel_loop_guided_start(void (*fn)(void*), void* data, unsigned num_threads, long start, long end,
                                     long incr, long chunk);
void GOMP_parallel_loop_runtime_start(void (*fn)(void*), void* data, unsigned num_threads, long start, long end,
                                      long incr);
void GOMP_parallel_sections_start(void (*fn)(void*), void* data, unsigned num_threads, unsigned count);
void GOMP_parallel_end(void);
bool GOMP_loop_static_next(long* istart, long* iend);
bool GOMP_loop_dynamic_next(long* istart, long* iend);
bool GOMP_loop_guided_next(long* istart, long* iend);
bool GOMP_loop_runtime_next(long* istart, long* iend);
void GOMP_loop_end_nowait(void);
unsigned GOMP_sections_next(void);
void GOMP_sections_end_nowait(void);

enum { kN = 16, kSections = 3 };

struct shared {
  long sum;
  int sections;
  bool (*next)(long*, long*);
};

static void loop_body(void* arg) {
  struct shared* s = arg;
  long lo, hi, mine = 0;
  while (s->next(&lo, &hi)) {
    for (long i = lo; i < hi; ++i) mine += i;
  }
  GOMP_loop_end_nowait();
  __atomic_fetch_add(&s->sum, mine, __ATOMIC_RELAXED);
}

static void sections_body(void* arg) {
  struct shared* s = arg;
  for (unsigned k = GOMP_sections_next(); k != 0; k = GOMP_sections_next()) {
    __atomic_fetch_add(&s->sections, 1, __ATOMIC_RELAXED);
  }
  GOMP_sections_end_nowait();
}

// One region of each kind; each checked.
static void one_round(struct shared* s) {
  const long expected = (long)kN * (kN - 1) / 2;
  s->sum = 0;
  s->next = GOMP_loop_static_next;
  GOMP_parallel_loop_static_start(loop_body, s, 2, 0, kN, 1, 3);
  loop_body(s);
  GOMP_parallel_end();
  CHECK(s->sum == expected, "GOMP_parallel_loop_static_start: sum %ld, %ld expected", s->sum, expected);
  s->sum = 0;
  s->next = GOMP_loop_dynamic_next;
  GOMP_parallel_loop_dynamic_start(loop_body, s, 2, 0, kN, 1, 2);
  loop_body(s);
  GOMP_parallel_end();
  CHECK(s->sum == expected, "GOMP_parallel_loop_dynamic_start: sum %ld, %ld expected", s->sum, expected);
  s->sum = 0;
  s->next = GOMP_loop_guided_next;
  GOMP_parallel_loop_guided_start(loop_body, s, 2, 0, kN, 1, 1);
  loop_body(s);
  GOMP_parallel_end();
  CHECK(s->sum == expected, "GOMP_parallel_loop_guided_start: sum %ld, %ld expected", s->sum, expected);
  s->sum = 0;
  s->next = GOMP_loop_runtime_next;
  GOMP_parallel_loop_runtime_start(loop_body, s, 2, 0, kN, 1);
  loop_body(s);
  GOMP_parallel_end();
  CHECK(s->sum == expected, "GOMP_parallel_loop_runtime_start: sum %ld, %ld expected", s->sum, expected);
  s->sections = 0;
  GOMP_parallel_sections_start(sections_body, s, 2, kSections);
  sections_body(s);
  GOMP_parallel_end();
  CHECK(s->sections == kSections, "GOMP_parallel_sections_start: %d sections ran, %d expected", s->sections,
        kSections);
}

int main(void) {
  static struct shared s;
  // Warm up: the library's own structures (its threads, a team kept for the
  // next region) are made now.
  for (int i = 0; i < 1000; ++i) one_round(&s);
  const size_t before = mallinfo2().uordblks;
  const int rounds = OMPT_SIZE(4000, 1000);
  for (int i = 0; i < rounds; ++i) one_round(&s);
  const size_t after = mallinfo2().uordblks;
  const long regions = 5L * rounds;
  const long growth = after > before ? (long)(after - before) : 0;
  CHECK(growth <= 4 * regions, "the heap grew by %ld bytes over %ld regions (%.1f bytes a region)", growth, regions,
        (double)growth / (double)regions);
  return 0;
}
