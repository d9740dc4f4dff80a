// schedule(runtime): the run-sched-var ICV set by omp_set_schedule (and, in
// the environment entries, by OMP_SCHEDULE) decides how a runtime loop is
// split: GOMP_loop_[ull_]{,maybe_nonmonotonic_,nonmonotonic_}runtime_start/next
// (schedule(runtime) without and with a modifier), GOMP_parallel_loop_*runtime,
// omp_set_schedule, omp_get_schedule.
//
//   loop_runtime                      cycles through schedules set by omp_set_schedule
//   loop_runtime expect dynamic 3     OMP_SCHEDULE must have set dynamic,3: checks that first
#include "loop_record.h"

#define MONOTONIC ((int)omp_sched_monotonic)

static const char* kind_name(omp_sched_t kind) {
  switch ((int)kind & ~MONOTONIC) {
    case omp_sched_static:
      return "static";
    case omp_sched_dynamic:
      return "dynamic";
    case omp_sched_guided:
      return "guided";
    case omp_sched_auto:
      return "auto";
    default:
      return "unknown";
  }
}

// What a runtime loop must do under schedule (kind, chunk).
static void check_schedule(omp_sched_t kind, int chunk, const char* what) {
  int threads = omp_get_max_threads();
  each_once(what);
  int base = (int)kind & ~MONOTONIC;
  int monotonic = ((int)kind & MONOTONIC) != 0;
  if (base == omp_sched_static) {
    if (chunk >= 1) {
      round_robin(what, chunk, threads);
    } else {
      one_chunk_each(what, threads);
    }
    increasing_per_thread(what, threads);
  } else if (base == omp_sched_dynamic) {
    whole_chunks(what, chunk >= 1 ? chunk : 1);
    if (monotonic) increasing_per_thread(what, threads);
  } else if (base == omp_sched_guided) {
    runs_at_least(what, chunk >= 1 ? chunk : 1);
    if (monotonic) increasing_per_thread(what, threads);
  }
}

// Runtime loops over int (in a region, and combined), over unsigned long
// long, and counting down, each checked against the schedule in force.
static void runtime_loops(omp_sched_t kind, int chunk) {
  char what[96];
  snprintf(what, sizeof what, "runtime %s%s, %d", (int)kind & MONOTONIC ? "monotonic:" : "",
           kind_name(kind), chunk);

  // The implicit tasks of a region start with the encountering task's run-sched-var.
  int inside_ok = 1;
#pragma omp parallel reduction(&& : inside_ok)
  {
    omp_sched_t k;
    int c;
    omp_get_schedule(&k, &c);
    inside_ok = k == kind && c == chunk;
  }
  CHECK(inside_ok, "%s: omp_get_schedule inside a region differs", what);

  RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(runtime));
  check_schedule(kind, chunk, what);
  RECORDED_LOOP((int i = kN - 1; i >= 0; --i), kN - 1 - i, schedule(runtime));
  check_schedule(kind, chunk, what);
  // With a modifier: GOMP_loop_runtime_* (monotonic) and
  // GOMP_loop_nonmonotonic_runtime_* (nonmonotonic: no order promised).
  RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(monotonic : runtime));
  check_schedule((omp_sched_t)(kind | MONOTONIC), chunk, what);
  RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(nonmonotonic : runtime));
  each_once(what);
  // Over unsigned long long, from bounds the compiler cannot narrow.
  volatile unsigned long long top = 0xFFFFFFFF00000000ull;
  const unsigned long long base = top;
  RECORDED_LOOP((unsigned long long u = base; u < base + kN; ++u), u - base, schedule(runtime));
  check_schedule(kind, chunk, what);
  RECORDED_LOOP((unsigned long long u = base; u < base + kN; ++u), u - base,
                schedule(monotonic
                         : runtime));
  check_schedule((omp_sched_t)(kind | MONOTONIC), chunk, what);
  RECORDED_LOOP((unsigned long long u = base; u < base + kN; ++u), u - base,
                schedule(nonmonotonic
                         : runtime));
  each_once(what);

  // The combined construct (GOMP_parallel_loop_*runtime).
  int* count = calloc(kN, sizeof *count);
  CHECK(count != NULL, "out of memory");
#pragma omp parallel for schedule(runtime)
  for (int i = 0; i < kN; ++i) __atomic_fetch_add(&count[i], 1, __ATOMIC_RELAXED);
  for (int i = 0; i < kN; ++i)
    CHECK(count[i] == 1, "%s, parallel for: iteration %d ran %d times", what, i, count[i]);
  free(count);
}

static omp_sched_t parse_kind(const char* text) {
  int monotonic = 0;
  if (strncmp(text, "monotonic:", 10) == 0) monotonic = MONOTONIC, text += 10;
  int kind = 0;
  if (strcmp(text, "static") == 0) kind = omp_sched_static;
  if (strcmp(text, "dynamic") == 0) kind = omp_sched_dynamic;
  if (strcmp(text, "guided") == 0) kind = omp_sched_guided;
  if (strcmp(text, "auto") == 0) kind = omp_sched_auto;
  CHECK(kind != 0, "unknown schedule kind %s", text);
  return (omp_sched_t)(kind | monotonic);
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "expect") == 0) {
    omp_sched_t want_kind = parse_kind(argv[2]);
    int want_chunk = atoi(argv[3]);
    omp_sched_t kind;
    int chunk;
    omp_get_schedule(&kind, &chunk);
    CHECK(kind == want_kind && chunk == want_chunk,
          "OMP_SCHEDULE=%s: omp_get_schedule gives (%#x, %d), (%#x, %d) expected",
          getenv("OMP_SCHEDULE") ? getenv("OMP_SCHEDULE") : "(unset)", (unsigned)kind, chunk,
          (unsigned)want_kind, want_chunk);
    runtime_loops(kind, chunk);
    puts("loop_runtime: ok");
    return 0;
  }
  CHECK(argc == 1, "usage: loop_runtime [expect KIND CHUNK]");

  const struct {
    omp_sched_t kind;
    int chunk;
  } schedules[] = {
      {omp_sched_static, 0},
      {omp_sched_static, 1},
      {omp_sched_static, 13},
      {omp_sched_dynamic, 1},
      {omp_sched_dynamic, 9},
      {(omp_sched_t)(omp_sched_dynamic | MONOTONIC), 4},
      {omp_sched_guided, 1},
      {omp_sched_guided, 20},
      {(omp_sched_t)(omp_sched_guided | MONOTONIC), 2},
  };
  for (size_t s = 0; s < sizeof schedules / sizeof schedules[0]; ++s) {
    omp_set_schedule(schedules[s].kind, schedules[s].chunk);
    omp_sched_t kind;
    int chunk;
    omp_get_schedule(&kind, &chunk);
    CHECK(kind == schedules[s].kind && chunk == schedules[s].chunk,
          "omp_set_schedule(%#x, %d), omp_get_schedule gives (%#x, %d)",
          (unsigned)schedules[s].kind, schedules[s].chunk, (unsigned)kind, chunk);
    runtime_loops(kind, chunk);
  }
  // auto: the implementation chooses; every iteration still runs once.
  omp_set_schedule(omp_sched_auto, 0);
  omp_sched_t auto_kind;
  int auto_chunk;
  omp_get_schedule(&auto_kind, &auto_chunk);
  CHECK(auto_kind == omp_sched_auto, "omp_set_schedule(auto), omp_get_schedule gives %#x",
        (unsigned)auto_kind);
  RECORDED_LOOP((int i = 0; i < kN; ++i), i, schedule(runtime));
  each_once("runtime auto");

  // The ICV is per task: a thread that sets it inside a region changes its
  // own runtime loops' schedule (checked through omp_get_schedule), not the
  // initial thread's after the region.
  omp_set_schedule(omp_sched_dynamic, 2);
  int own_ok = 1;
#pragma omp parallel reduction(&& : own_ok)
  {
    int t = omp_get_thread_num();
    omp_set_schedule(omp_sched_static, 3 + t);
    omp_sched_t k;
    int c;
    omp_get_schedule(&k, &c);
    own_ok = k == omp_sched_static && c == 3 + t;
  }
  CHECK(own_ok, "a thread's omp_set_schedule inside a region is not its own");
  omp_sched_t kind;
  int chunk;
  omp_get_schedule(&kind, &chunk);
  CHECK(kind == omp_sched_dynamic && chunk == 2,
        "after the region the initial thread's schedule is (%#x, %d), (dynamic, 2) expected",
        (unsigned)kind, chunk);
  puts("loop_runtime: ok");
  return 0;
}
