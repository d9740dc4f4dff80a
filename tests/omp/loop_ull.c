// Worksharing loops over unsigned long long (GOMP_loop_ull_*_start/next and
// GOMP_parallel_loop_* with ull bounds): bounds beyond 2^63 and up to just
// below 2^64, steps above one, counting down, every schedule, checked as in
// loop_schedules.c by logical iteration.
#include "loop_record.h"

static const unsigned long long kTop = 0xFFFFFFFFFFFFFFFFull;

// Up, by 1, from just above 2^63.
#define UP(...)                                                                            \
  RECORDED_LOOP((unsigned long long u = (1ull << 63) + 5; u < (1ull << 63) + 5 + kN; ++u), \
                u - ((1ull << 63) + 5), __VA_ARGS__)
// Up, by 3, to the last value below 2^64 from which a step does not wrap
// (the runtime's own arithmetic on these bounds must not wrap either).
#define UP3_FIRST (kTop - 3ull - 3ull * (kN - 1))
#define UP3(...)                                                                                   \
  RECORDED_LOOP((unsigned long long u = UP3_FIRST; u <= kTop - 3ull; u += 3), (u - UP3_FIRST) / 3, \
                __VA_ARGS__)
// Down, by 7, from the very top.
#define DOWN7(...)                                                                           \
  RECORDED_LOOP((unsigned long long u = kTop; u > kTop - 7ull * kN; u -= 7), (kTop - u) / 7, \
                __VA_ARGS__)

static void all_shapes_once(const char* what, int chunk, int kind) {
  int threads = omp_get_max_threads();
  char name[80];
  snprintf(name, sizeof name, "unsigned long long %s", what);
  each_once(name);
  if (kind == 's' && chunk > 0) round_robin(name, chunk, threads);
  if (kind == 's' && chunk == 0) one_chunk_each(name, threads);
  if (kind == 'd') whole_chunks(name, chunk > 0 ? chunk : 1);
  if (kind == 'g') runs_at_least(name, chunk > 0 ? chunk : 1);
}

int main(void) {
  for (int rep = 0; rep < OMPT_SIZE(3, 1); ++rep) {
    UP(schedule(static));
    all_shapes_once("up, static", 0, 's');
    UP3(schedule(static, 5));
    all_shapes_once("up by 3 to the top, static 5", 5, 's');
    DOWN7(schedule(static, 2));
    all_shapes_once("down by 7, static 2", 2, 's');

    UP(schedule(dynamic, 8));
    all_shapes_once("up, dynamic 8", 8, 'd');
    UP3(schedule(dynamic));
    all_shapes_once("up by 3 to the top, dynamic", 1, 'd');
    DOWN7(schedule(nonmonotonic : dynamic, 3));
    all_shapes_once("down by 7, nonmonotonic:dynamic 3", 3, 'd');
    DOWN7(schedule(monotonic : dynamic, 3));
    all_shapes_once("down by 7, monotonic:dynamic 3", 3, 'd');
    increasing_per_thread("unsigned long long down by 7, monotonic:dynamic 3",
                          omp_get_max_threads());

    UP(schedule(guided, 6));
    all_shapes_once("up, guided 6", 6, 'g');
    UP3(schedule(guided));
    all_shapes_once("up by 3 to the top, guided", 1, 'g');
    DOWN7(schedule(nonmonotonic : guided, 2));
    all_shapes_once("down by 7, nonmonotonic:guided 2", 2, 'g');

    DOWN7(schedule(monotonic : guided, 5));
    all_shapes_once("down by 7, monotonic:guided 5", 5, 'g');
    increasing_per_thread("unsigned long long down by 7, monotonic:guided 5",
                          omp_get_max_threads());

    UP(schedule(auto));
    all_shapes_once("up, auto", 0, 'a');

    // Combined constructs with ull bounds.
    static int hits[kN];
    memset(hits, 0, sizeof hits);
#pragma omp parallel for schedule(dynamic, 4)
    for (unsigned long long u = kTop; u > kTop - 5ull * kN; u -= 5) {
      __atomic_fetch_add(&hits[(kTop - u) / 5], 1, __ATOMIC_RELAXED);
    }
#pragma omp parallel for schedule(guided, 3)
    for (unsigned long long u = 1ull << 63; u < (1ull << 63) + kN; ++u) {
      __atomic_fetch_add(&hits[u - (1ull << 63)], 2, __ATOMIC_RELAXED);
    }
    for (int i = 0; i < kN; ++i) {
      CHECK(hits[i] == 3,
            "parallel for over unsigned long long: iteration %d counted %d, 3 expected", i,
            hits[i]);
    }
  }
  puts("loop_ull: ok");
  return 0;
}
