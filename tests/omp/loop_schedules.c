// Worksharing loops over int, one schedule at a time: static, static with a
// chunk, dynamic, dynamic with a chunk, guided, guided with a chunk, auto,
// monotonic:static, monotonic:dynamic, nonmonotonic:dynamic,
// nonmonotonic:guided (gcc inlines static schedules; the others call
// GOMP_loop_*_start/next and GOMP_loop_end[_nowait]). Each iteration must
// run once, and each schedule's promise is checked: the iteration-to-thread
// map of static schedules, whole chunks for dynamic, chunks of at least the
// chunk size for guided, increasing order per thread for monotonic ones.
#include "loop_record.h"

// Two loops with the same static schedule and iteration count in one region
// map iterations to threads the same way, so the second may read what the
// first wrote at the same index without a barrier (nowait).
static void static_nowait_pairs(void) {
  static int first[kN];
  int bad = 0;
#pragma omp parallel reduction(+ : bad)
  {
#pragma omp for schedule(static) nowait
    for (int i = 0; i < kN; ++i) first[i] = i * 3 + omp_get_thread_num();
#pragma omp for schedule(static)
    for (int i = 0; i < kN; ++i) {
      if (first[i] != i * 3 + omp_get_thread_num()) bad++;
    }
#pragma omp for schedule(static, 7) nowait
    for (int i = 0; i < kN; ++i) first[i] = -i - omp_get_thread_num();
#pragma omp for schedule(monotonic : static, 7) nowait
    for (int i = 0; i < kN; ++i) {
      if (first[i] != -i - omp_get_thread_num()) bad++;
    }
  }
  CHECK(bad == 0,
        "%d iterations of a static nowait loop ran on another thread than in the loop "
        "before",
        bad);
}

int main(void) {
  int threads = omp_get_max_threads();
  CHECK(threads <= kMaxThreads, "more than %d threads", kMaxThreads);
  for (int rep = 0; rep < OMPT_SIZE(5, 1); ++rep) {
    RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(static));
    each_once("static");
    one_chunk_each("static", threads);
    increasing_per_thread("static", threads);

    RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(static, 3));
    each_once("static, 3");
    round_robin("static, 3", 3, threads);
    increasing_per_thread("static, 3", threads);

    RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(monotonic : static, 64));
    each_once("monotonic:static, 64");
    round_robin("monotonic:static, 64", 64, threads);
    increasing_per_thread("monotonic:static, 64", threads);

    RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(dynamic));
    each_once("dynamic");

    RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(dynamic, 16));
    each_once("dynamic, 16");
    whole_chunks("dynamic, 16", 16);

    RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(monotonic : dynamic, 5));
    each_once("monotonic:dynamic, 5");
    whole_chunks("monotonic:dynamic, 5", 5);
    increasing_per_thread("monotonic:dynamic, 5", threads);

    RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(nonmonotonic : dynamic, 7));
    each_once("nonmonotonic:dynamic, 7");
    whole_chunks("nonmonotonic:dynamic, 7", 7);

    RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(guided));
    each_once("guided");

    RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(guided, 10));
    each_once("guided, 10");
    runs_at_least("guided, 10", 10);

    RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(monotonic : guided, 4));
    each_once("monotonic:guided, 4");
    runs_at_least("monotonic:guided, 4", 4);
    increasing_per_thread("monotonic:guided, 4", threads);

    RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(nonmonotonic : guided, 4));
    each_once("nonmonotonic:guided, 4");
    runs_at_least("nonmonotonic:guided, 4", 4);

    RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(auto));
    each_once("auto");

    static_nowait_pairs();
  }
  puts("loop_schedules: ok");
  return 0;
}
