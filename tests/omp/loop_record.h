// Shared by the worksharing-loop programs: a loop of kN logical iterations
// whose body records which thread ran each iteration and in which order, and
// the checks of what each schedule promises.
//
//   RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(dynamic, 16));
//   each_once("dynamic, 16");
//   whole_chunks("dynamic, 16", 16);
#ifndef MOTE_TESTS_OMP_LOOP_RECORD_H
#define MOTE_TESTS_OMP_LOOP_RECORD_H

#include <omp.h>

#include "omp_check.h"

enum { kN = 10007, kMaxThreads = 64 };

static int owner[kN];  // the thread that ran each iteration
static int order[kN];  // its position in that thread's sequence of iterations
static int runs[kN];   // how often each iteration ran
static int done_by[kMaxThreads];
static int loops_left;  // threads that left a recorded loop

#define PRAGMA(...) _Pragma(#__VA_ARGS__)

static void record_iteration(long i) {
  CHECK(i >= 0 && i < kN, "logical iteration %ld outside 0..%d", i, kN - 1);
  int t = omp_get_thread_num();
  owner[i] = t;
  order[i] = done_by[t]++;
  __atomic_fetch_add(&runs[i], 1, __ATOMIC_RELAXED);
}

// One loop (`for` followed by header) over kN logical iterations with the
// given clauses, in a region of its own; index is the logical iteration
// number (0..kN-1) as an expression of the loop variable. The count after
// the loop keeps gcc from fusing the region and the loop into one combined
// call (parallel_loop.c has those).
// clang-format off
#define RECORDED_LOOP(header, index, ...)                                             \
  do {                                                                                \
    memset(runs, 0, sizeof runs);                                                     \
    memset(done_by, 0, sizeof done_by);                                               \
    PRAGMA(omp parallel) {                                                            \
      PRAGMA(omp for __VA_ARGS__)                                                     \
      for header record_iteration((long)(index));                                     \
      __atomic_fetch_add(&loops_left, 1, __ATOMIC_RELAXED);                           \
    }                                                                                 \
    CHECK(loops_left == omp_get_max_threads(), "%d threads left the loop", loops_left); \
    loops_left = 0;                                                                   \
  } while (0)
// clang-format on

static void each_once(const char* what) {
  for (int i = 0; i < kN; ++i) {
    CHECK(runs[i] == 1, "%s: iteration %d ran %d times", what, i, runs[i]);
  }
}

// monotonic: each thread runs its iterations in increasing order.
static void increasing_per_thread(const char* what, int threads) {
  int last[kMaxThreads];
  for (int t = 0; t < threads; ++t) last[t] = -1;
  for (int i = 0; i < kN; ++i) {
    int t = owner[i];
    CHECK(order[i] > last[t], "%s: thread %d ran iteration %d at position %d, after position %d",
          what, t, i, order[i], last[t]);
    last[t] = order[i];
  }
}

// static with a chunk: chunk k goes to thread k mod T (round robin in thread order).
static void round_robin(const char* what, int chunk, int threads) {
  for (int i = 0; i < kN; ++i) {
    CHECK(owner[i] == (i / chunk) % threads, "%s: iteration %d ran on thread %d, %d expected", what,
          i, owner[i], (i / chunk) % threads);
  }
}

// static without a chunk: at most one chunk per thread, chunks of about
// equal size (none larger than the iterations divided by the threads,
// rounded up).
static void one_chunk_each(const char* what, int threads) {
  int first[kMaxThreads], count[kMaxThreads];
  for (int t = 0; t < threads; ++t) first[t] = -1, count[t] = 0;
  for (int i = 0; i < kN; ++i) {
    int t = owner[i];
    if (first[t] < 0) first[t] = i;
    CHECK(i == first[t] + count[t], "%s: thread %d has a second chunk starting at %d", what, t, i);
    count[t]++;
  }
  int most = (kN + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) {
    CHECK(count[t] <= most, "%s: thread %d ran %d iterations, at most %d expected", what, t,
          count[t], most);
  }
}

// dynamic with a chunk: [k*chunk, (k+1)*chunk) runs on one thread, in order.
static void whole_chunks(const char* what, int chunk) {
  for (int i = 0; i < kN; ++i) {
    if (i % chunk == 0) continue;
    CHECK(owner[i] == owner[i - 1] && order[i] == order[i - 1] + 1,
          "%s: iteration %d (thread %d, position %d) is not in the chunk of iteration %d "
          "(thread %d, position %d)",
          what, i, owner[i], order[i], i - 1, owner[i - 1], order[i - 1]);
  }
}

// guided with a chunk: every run of consecutive iterations that one thread
// took in one go is at least the chunk long, except the loop's last. (Two
// chunks one thread took back to back look like one run; a short chunk may
// hide that way, but never a short run.)
static void runs_at_least(const char* what, int chunk) {
  int start = 0;
  for (int i = 1; i <= kN; ++i) {
    if (i < kN && owner[i] == owner[i - 1] && order[i] == order[i - 1] + 1) continue;
    if (i < kN) {
      CHECK(i - start >= chunk, "%s: iterations %d..%d are a chunk of %d, below the chunk size %d",
            what, start, i - 1, i - start, chunk);
    }
    start = i;
  }
}

#endif  // MOTE_TESTS_OMP_LOOP_RECORD_H
