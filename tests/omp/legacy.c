// Entry points that gcc no longer emits but that programs built by older
// gcc versions still call (libgomp keeps them for those binaries), called
// here by hand the way gcc used to: GOMP_parallel_start/end (before
// GOMP_parallel), GOMP_parallel_loop_*_start and GOMP_parallel_sections_start
// (the combined constructs before GOMP 4.0), GOMP_parallel_loop_static,
// GOMP_loop_static_start and GOMP_loop_ull_static_start (static schedules
// through the runtime), and GOMP 4.0's target entry points with no device
// (GOMP_target, GOMP_target_data, GOMP_target_update, GOMP_teams).
#include <omp.h>
#include <stdbool.h>

#include "omp_check.h"

// libgomp's own declarations (no header has them: gcc emitted the calls).
void GOMP_parallel_start(void (*fn)(void*), void* data, unsigned num_threads);
void GOMP_parallel_end(void);
void GOMP_parallel_loop_static_start(void (*fn)(void*), void* data, unsigned num_threads,
                                     long start, long end, long incr, long chunk);
void GOMP_parallel_loop_dynamic_start(void (*fn)(void*), void* data, unsigned num_threads,
                                      long start, long end, long incr, long chunk);
void GOMP_parallel_loop_guided_start(void (*fn)(void*), void* data, unsigned num_threads,
                                     long start, long end, long incr, long chunk);
void GOMP_parallel_loop_runtime_start(void (*fn)(void*), void* data, unsigned num_threads,
                                      long start, long end, long incr);
void GOMP_parallel_loop_static(void (*fn)(void*), void* data, unsigned num_threads, long start,
                               long end, long incr, long chunk, unsigned flags);
void GOMP_parallel_sections_start(void (*fn)(void*), void* data, unsigned num_threads,
                                  unsigned count);
bool GOMP_loop_static_start(long start, long end, long incr, long chunk, long* istart, long* iend);
bool GOMP_loop_static_next(long* istart, long* iend);
bool GOMP_loop_dynamic_next(long* istart, long* iend);
bool GOMP_loop_guided_next(long* istart, long* iend);
bool GOMP_loop_runtime_next(long* istart, long* iend);
bool GOMP_loop_ull_static_start(bool up, unsigned long long start, unsigned long long end,
                                unsigned long long incr, unsigned long long chunk,
                                unsigned long long* istart, unsigned long long* iend);
bool GOMP_loop_ull_static_next(unsigned long long* istart, unsigned long long* iend);
void GOMP_loop_end(void);
void GOMP_loop_end_nowait(void);
unsigned GOMP_sections_next(void);
void GOMP_sections_end_nowait(void);
void GOMP_target(int device, void (*fn)(void*), const void* unused, size_t mapnum, void** hostaddrs,
                 size_t* sizes, unsigned char* kinds);
void GOMP_target_data(int device, const void* unused, size_t mapnum, void** hostaddrs,
                      size_t* sizes, unsigned char* kinds);
void GOMP_target_end_data(void);
void GOMP_target_update(int device, const void* unused, size_t mapnum, void** hostaddrs,
                        size_t* sizes, unsigned char* kinds);
void GOMP_teams(unsigned num_teams, unsigned thread_limit);

enum { kN = 1000, kSections = 7 };

struct shared {
  int hits[kN];
  int sections[kSections];
  int threads;
  bool (*next)(long*, long*);
};

static void count_team(void* arg) {
  struct shared* s = arg;
  __atomic_fetch_add(&s->threads, 1, __ATOMIC_RELAXED);
  CHECK(omp_get_num_threads() == 3, "GOMP_parallel_start(3): a team of %d", omp_get_num_threads());
}

// The body of a combined loop: the loop is already set up; take chunks.
static void loop_body(void* arg) {
  struct shared* s = arg;
  long lo, hi;
  while (s->next(&lo, &hi)) {
    for (long i = lo; i < hi; ++i) __atomic_fetch_add(&s->hits[i], 1, __ATOMIC_RELAXED);
  }
  GOMP_loop_end_nowait();
}

static void sections_body(void* arg) {
  struct shared* s = arg;
  for (unsigned k = GOMP_sections_next(); k != 0; k = GOMP_sections_next()) {
    __atomic_fetch_add(&s->sections[k - 1], 1, __ATOMIC_RELAXED);
  }
  GOMP_sections_end_nowait();
}

// A loop started inside a region by every thread.
static void static_loops(void* arg) {
  struct shared* s = arg;
  long lo, hi;
  if (GOMP_loop_static_start(0, kN, 1, 7, &lo, &hi)) {
    do {
      for (long i = lo; i < hi; ++i) __atomic_fetch_add(&s->hits[i], 1, __ATOMIC_RELAXED);
    } while (GOMP_loop_static_next(&lo, &hi));
  }
  GOMP_loop_end();
  unsigned long long ulo, uhi, base = 1ull << 63;
  if (GOMP_loop_ull_static_start(true, base, base + kN, 1, 0, &ulo, &uhi)) {
    do {
      for (unsigned long long u = ulo; u < uhi; ++u) {
        __atomic_fetch_add(&s->hits[u - base], 1, __ATOMIC_RELAXED);
      }
    } while (GOMP_loop_ull_static_next(&ulo, &uhi));
  }
  GOMP_loop_end();
}

static void expect_hits(struct shared* s, int times, const char* what) {
  for (int i = 0; i < kN; ++i) {
    CHECK(s->hits[i] == times, "%s: iteration %d ran %d times, %d expected", what, i, s->hits[i],
          times);
  }
  memset(s->hits, 0, sizeof s->hits);
}

struct target_data {
  long value;
  int teams_ok;
};

static void target_body(void* arg) {
  void** addrs = arg;  // host fallback: the region gets the host addresses
  struct target_data* d = addrs[0];
  d->value *= 2;
  GOMP_teams(1, 2);
  d->teams_ok = omp_is_initial_device();
}

int main(void) {
  static struct shared s;
  for (int rep = 0; rep < OMPT_SIZE(10, 3); ++rep) {
    s.threads = 0;
    GOMP_parallel_start(count_team, &s, 3);
    count_team(&s);
    GOMP_parallel_end();
    CHECK(s.threads == 3, "GOMP_parallel_start(3): %d threads ran", s.threads);

    s.next = GOMP_loop_static_next;
    GOMP_parallel_loop_static_start(loop_body, &s, 2, 0, kN, 1, 5);
    loop_body(&s);
    GOMP_parallel_end();
    expect_hits(&s, 1, "GOMP_parallel_loop_static_start");
    s.next = GOMP_loop_dynamic_next;
    GOMP_parallel_loop_dynamic_start(loop_body, &s, 2, 0, kN, 1, 3);
    loop_body(&s);
    GOMP_parallel_end();
    expect_hits(&s, 1, "GOMP_parallel_loop_dynamic_start");
    s.next = GOMP_loop_guided_next;
    GOMP_parallel_loop_guided_start(loop_body, &s, 2, 0, kN, 1, 2);
    loop_body(&s);
    GOMP_parallel_end();
    expect_hits(&s, 1, "GOMP_parallel_loop_guided_start");
    s.next = GOMP_loop_runtime_next;
    GOMP_parallel_loop_runtime_start(loop_body, &s, 2, 0, kN, 1);
    loop_body(&s);
    GOMP_parallel_end();
    expect_hits(&s, 1, "GOMP_parallel_loop_runtime_start");
    // GOMP 4.0's combined static loop: one call, the body runs on every thread.
    s.next = GOMP_loop_static_next;
    GOMP_parallel_loop_static(loop_body, &s, 2, 0, kN, 1, 4, 0);
    expect_hits(&s, 1, "GOMP_parallel_loop_static");

    memset(s.sections, 0, sizeof s.sections);
    GOMP_parallel_sections_start(sections_body, &s, 2, kSections);
    sections_body(&s);
    GOMP_parallel_end();
    for (int k = 0; k < kSections; ++k) {
      CHECK(s.sections[k] == 1, "GOMP_parallel_sections_start: section %d ran %d times", k + 1,
            s.sections[k]);
    }

    GOMP_parallel_start(static_loops, &s, 2);
    static_loops(&s);
    GOMP_parallel_end();
    expect_hits(&s, 2, "GOMP_loop_static_start and GOMP_loop_ull_static_start");
  }

  // GOMP 4.0 target entry points, no device: the region runs on the host.
  struct target_data d = {21, 0};
  void* addrs[1] = {&d};
  size_t sizes[1] = {sizeof d};
  unsigned char kinds[1] = {3};  // tofrom
  GOMP_target_data(-1, NULL, 1, addrs, sizes, kinds);
  GOMP_target(-1, target_body, NULL, 1, addrs, sizes, kinds);
  GOMP_target_update(-1, NULL, 1, addrs, sizes, kinds);
  GOMP_target_end_data();
  CHECK(d.value == 42 && d.teams_ok, "GOMP_target on the host: value %ld, teams %d", d.value,
        d.teams_ok);
  puts("legacy: ok");
  return 0;
}
