// Shared by the OpenMP test programs (C and C++): a failed check names what
// differed on stderr and aborts; a watchdog turns a hang into a failure; sizes
// shrink under a sanitizer; a seeded random source; a bounded wait.
//
//   CHECK(sum == expected, "sum %ld, serial %ld", sum, expected);
//   WAIT_UNTIL(__atomic_load_n(&flag, __ATOMIC_ACQUIRE), "the detached task's event");
//
// The programs run on GNU's libgomp, LLVM's libomp and mote's libgomp.so.1;
// they check what the OpenMP specification (or GNU's documented behaviour,
// where a program says so) promises, never how fast anything is.
#ifndef MOTE_TESTS_OMP_CHECK_H
#define MOTE_TESTS_OMP_CHECK_H

#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define OMPT_SANITIZED 1
#else
#define OMPT_SANITIZED 0
#endif

// A size for a release build and a smaller one under a sanitizer, which runs
// the same program ten to fifty times slower.
#define OMPT_SIZE(release, sanitized) (OMPT_SANITIZED ? (sanitized) : (release))

// The message first (on stderr, with the failed condition and where it is),
// then abort(): a core file and a non-zero status for ctest.
#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      fflush(stderr);                                                          \
      abort();                                                                 \
    }                                                                          \
  } while (0)

#define FAIL(...)                                           \
  do {                                                      \
    fprintf(stderr, "%s:%d: failed: ", __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__);                           \
    fputc('\n', stderr);                                    \
    fflush(stderr);                                         \
    abort();                                                \
  } while (0)

static inline double ompt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void ompt_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

// Spins (yielding the CPU: the machine may have fewer cores than threads)
// until cond holds; fails after 20 s (100 s under a sanitizer), naming what it
// waited for. Only for waits that the program itself arranges to end.
#define WAIT_UNTIL(cond, what)                                               \
  do {                                                                       \
    double ompt_deadline_ = ompt_now() + (OMPT_SANITIZED ? 100.0 : 20.0);    \
    while (!(cond)) {                                                        \
      if (ompt_now() > ompt_deadline_) FAIL("waited too long for %s", what); \
      sched_yield();                                                         \
    }                                                                        \
  } while (0)

// splitmix64: a seeded random source, the same sequence on every run.
static inline uint64_t ompt_random(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The watchdog: SIGALRM after MOTE_OMP_TEST_WATCHDOG seconds (ctest sets it a
// little under the test's timeout, so that the message, not ctest's kill, is
// what a hang leaves behind). Set before main, so it covers the runtime's
// start as well.
static void ompt_watchdog_fired(int sig) {
  static const char msg[] =
      "watchdog: the program did not finish in time (a wait that never ends?)\n";
  (void)sig;
  // write() and abort() are async-signal-safe; fprintf is not.
  ssize_t unused = write(2, msg, sizeof msg - 1);
  (void)unused;
  abort();
}

__attribute__((constructor)) static void ompt_watchdog_start(void) {
  unsigned seconds = OMPT_SANITIZED ? 280 : 50;
  const char* text = getenv("MOTE_OMP_TEST_WATCHDOG");
  if (text != NULL && atoi(text) > 0) seconds = (unsigned)atoi(text);
  signal(SIGALRM, ompt_watchdog_fired);
  alarm(seconds);
}

#endif  // MOTE_TESTS_OMP_CHECK_H
