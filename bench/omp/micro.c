// micro: what the OpenMP constructs themselves cost, in nanoseconds each, one
// kernel per construct (--kernel NAME; without it, all):
//
//   parallel          an empty parallel region, `iters` of them in a row:
//                     region entry and exit (the team's fork and join)
//   barrier           `iters` barriers in a row inside one region
//   for_static        `iters` worksharing loops of 1000 empty iterations,
//                     schedule(static), inside one region (each ends in its
//                     implicit barrier)
//   task_spawn        one thread spawns 1000 empty tasks and waits for them
//                     (taskwait), over and over: per task
//   parallel_barrier  a parallel region holding one barrier, `iters` of them:
//                     region entry, a barrier and exit
//
//   OMP_NUM_THREADS=2 ./bench_omp_micro --kernel barrier --iters 20000
//
// A sample is one batch of --iters constructs (default per kernel) divided by
// their number; a batch stops early once it has taken --max-sample-ms (default
// 250), which only a loaded machine reaches. barrier and for_static open one
// region per 1000 barriers or 200 loops, so the region's cost adds at most
// 1/1000 or 1/200 of itself to theirs. The timed loops do nothing but the
// construct, so the answer is checked apart, once per process: the same
// construct a hundred times, with bodies that record what ran (every thread in
// every region, no thread past a barrier before all arrived, every iteration
// and task run once).
#include "omp_harness.h"

enum {
  MICRO_LOOP = 1000,   // iterations of a for_static loop
  MICRO_TASKS = 1000,  // tasks per task_spawn round
  MICRO_CHECKS = 100,  // constructs in a checked twin
  MICRO_MAX_TEAM = 256,
  // Constructs between two looks at the clock, and barriers or loops per
  // region: a region's own cost spread over this many adds at most 1/this.
  MICRO_CHUNK = 64,
  MICRO_BARRIERS_PER_REGION = 1000,
  MICRO_LOOPS_PER_REGION = 200,
};

struct micro_state {
  long iters;          // constructs per sample asked for
  long done;           // constructs the last sample did
  int64_t max_sample;  // ns: a sample stops early past this
  int checked;
};

static long micro_min(long a, long b) { return a < b ? a : b; }

// On a loaded machine a construct that needs every thread of the team can
// wait a whole time slice for one of them; a sample then stops early, after
// max_sample ns, and counts the constructs it did.
static int micro_past(int64_t deadline) { return omp_bench_now_ns() >= deadline; }

static int64_t run_parallel(void* ctx) {
  struct micro_state* s = ctx;
  int64_t deadline = omp_bench_now_ns() + s->max_sample;
  long done = 0;
  while (done < s->iters) {
    long chunk = micro_min(MICRO_CHUNK, s->iters - done);
    for (long i = 0; i < chunk; ++i) {
#pragma omp parallel
      OMP_BENCH_EMPTY();
    }
    done += chunk;
    if (micro_past(deadline)) break;
  }
  s->done = done;
  return s->iters;
}

static int64_t run_barrier(void* ctx) {
  struct micro_state* s = ctx;
  int64_t deadline = omp_bench_now_ns() + s->max_sample;
  long done = 0;
  while (done < s->iters) {
    long chunk = micro_min(MICRO_BARRIERS_PER_REGION, s->iters - done);
#pragma omp parallel
    for (long i = 0; i < chunk; ++i) {
#pragma omp barrier
    }
    done += chunk;
    if (micro_past(deadline)) break;
  }
  s->done = done;
  return s->iters;
}

static int64_t run_for_static(void* ctx) {
  struct micro_state* s = ctx;
  int64_t deadline = omp_bench_now_ns() + s->max_sample;
  long done = 0;
  while (done < s->iters) {
    long chunk = micro_min(MICRO_LOOPS_PER_REGION, s->iters - done);
#pragma omp parallel
    for (long r = 0; r < chunk; ++r) {
#pragma omp for schedule(static)
      for (int i = 0; i < MICRO_LOOP; ++i) OMP_BENCH_KEEP(i);
    }
    done += chunk;
    if (micro_past(deadline)) break;
  }
  s->done = done;
  return s->iters;
}

static int64_t run_task_spawn(void* ctx) {
  struct micro_state* s = ctx;
  int64_t deadline = omp_bench_now_ns() + s->max_sample;
  long rounds = s->iters / MICRO_TASKS;
  long done = 0;
#pragma omp parallel
  {
#pragma omp single
    for (long r = 0; r < rounds; ++r) {
      for (int t = 0; t < MICRO_TASKS; ++t) {
#pragma omp task
        OMP_BENCH_EMPTY();
      }
#pragma omp taskwait
      done += MICRO_TASKS;
      if (micro_past(deadline)) break;
    }
  }
  s->done = done;
  return s->iters;
}

static int64_t run_parallel_barrier(void* ctx) {
  struct micro_state* s = ctx;
  int64_t deadline = omp_bench_now_ns() + s->max_sample;
  long done = 0;
  while (done < s->iters) {
    long chunk = micro_min(MICRO_CHUNK, s->iters - done);
    for (long i = 0; i < chunk; ++i) {
#pragma omp parallel
      {
#pragma omp barrier
      }
    }
    done += chunk;
    if (micro_past(deadline)) break;
  }
  s->done = done;
  return s->iters;
}

static double micro_ops(void* ctx) {
  const struct micro_state* s = ctx;
  return (double)s->done;
}

// ---- the checked twins ------------------------------------------------------

static int micro_team(void) {
  return omp_get_max_threads() < MICRO_MAX_TEAM ? omp_get_max_threads() : MICRO_MAX_TEAM;
}

// Every thread of the team runs every region, and sees the team's size.
static int check_parallel_once(void) {
  long ran = 0;
  long wrong_size = 0;
  int team = micro_team();
  for (int r = 0; r < MICRO_CHECKS; ++r) {
#pragma omp parallel
    {
      if (omp_get_num_threads() != team) {
#pragma omp atomic update
        wrong_size++;
      }
#pragma omp atomic update
      ran++;
    }
  }
  return ran == (long)MICRO_CHECKS * team && wrong_size == 0;
}

// The round each thread last announced (check_barrier_once).
static int micro_phase[MICRO_MAX_TEAM];

// Each thread announces its round, waits at the barrier, then must see every
// thread's announcement of that round; a second barrier keeps the next round's
// announcements until all have looked. `regions`: one region per round (the
// parallel_barrier kernel) instead of one region for all rounds.
static int check_barrier_once(int regions) {
  long wrong = 0;
  int team = micro_team();
  for (int t = 0; t < team; ++t) micro_phase[t] = -1;
  int outer = regions ? MICRO_CHECKS : 1;
  int inner = regions ? 1 : MICRO_CHECKS;
  for (int o = 0; o < outer; ++o) {
#pragma omp parallel shared(wrong)
    {
      int me = omp_get_thread_num();
      for (int i = 0; i < inner; ++i) {
        int round = o * inner + i;
#pragma omp atomic write
        micro_phase[me] = round;
#pragma omp barrier
        for (int t = 0; t < omp_get_num_threads(); ++t) {
          int seen;
#pragma omp atomic read
          seen = micro_phase[t];
          if (seen != round) {
#pragma omp atomic update
            wrong++;
          }
        }
#pragma omp barrier
      }
    }
  }
  return wrong == 0;
}

// Every iteration of every loop runs exactly once; a loop's implicit barrier
// orders its writes before the next loop's.
static int check_for_static_once(void) {
  static int hits[MICRO_LOOP];
  memset(hits, 0, sizeof hits);
#pragma omp parallel
  for (int r = 0; r < MICRO_CHECKS; ++r) {
#pragma omp for schedule(static)
    for (int i = 0; i < MICRO_LOOP; ++i) hits[i]++;
  }
  for (int i = 0; i < MICRO_LOOP; ++i) {
    if (hits[i] != MICRO_CHECKS) return 0;
  }
  return 1;
}

// Every task has run when taskwait returns.
static int check_task_spawn_once(void) {
  long done = 0;
  int ok = 1;
#pragma omp parallel
  {
#pragma omp single
    for (int r = 0; r < 10; ++r) {
      for (int t = 0; t < MICRO_TASKS; ++t) {
#pragma omp task shared(done)
        {
#pragma omp atomic update
          done++;
        }
      }
#pragma omp taskwait
      long seen;
#pragma omp atomic read
      seen = done;
      if (seen != (long)(r + 1) * MICRO_TASKS) ok = 0;
    }
  }
  return ok;
}

static int micro_checked(struct micro_state* s, int (*twin)(void), int64_t result) {
  if (!s->checked) {
    if (!twin()) return 0;
    s->checked = 1;
  }
  return result == s->iters && s->done > 0;
}

static int check_parallel(void* ctx, int64_t result) {
  return micro_checked(ctx, check_parallel_once, result);
}
static int barrier_checks(void) { return check_barrier_once(0); }
static int parallel_barrier_checks(void) { return check_barrier_once(1); }
static int check_barrier(void* ctx, int64_t result) {
  return micro_checked(ctx, barrier_checks, result);
}
static int check_for_static(void* ctx, int64_t result) {
  return micro_checked(ctx, check_for_static_once, result);
}
static int check_task_spawn(void* ctx, int64_t result) {
  return micro_checked(ctx, check_task_spawn_once, result);
}
static int check_parallel_barrier(void* ctx, int64_t result) {
  return micro_checked(ctx, parallel_barrier_checks, result);
}

int main(int argc, char** argv) {
  struct omp_bench_options o = omp_bench_parse(argc, argv);
  static const char* const names[] = {"parallel", "barrier", "for_static", "task_spawn",
                                      "parallel_barrier"};
  omp_bench_known_kernels(&o, names, 5);
  if (micro_team() < omp_get_max_threads()) omp_bench_usage_error("team size", "above 256");
  static const long default_iters[] = {5000, 20000, 5000, 200000, 5000};
  int64_t (*const runs[])(void*) = {run_parallel, run_barrier, run_for_static, run_task_spawn,
                                    run_parallel_barrier};
  int (*const checks[])(void*, int64_t) = {check_parallel, check_barrier, check_for_static,
                                           check_task_spawn, check_parallel_barrier};
  for (int i = 0; i < 5; ++i) {
    if (!omp_bench_wants(&o, names[i])) continue;
    struct micro_state s = {omp_bench_long(&o, "--iters", default_iters[i]), 0,
                            omp_bench_long(&o, "--max-sample-ms", 250) * 1000000, 0};
    if (i == 3) s.iters = (s.iters + MICRO_TASKS - 1) / MICRO_TASKS * MICRO_TASKS;  // whole rounds
    if (s.iters < 1) omp_bench_usage_error("--iters", "below 1");
    struct omp_bench_kernel k = {
        .name = names[i], .run = runs[i], .check = checks[i], .ctx = &s, .ops = micro_ops};
    omp_bench_extra(&k, "iters", s.iters);
    omp_bench_time(&o, &k);
  }
  return 0;
}
