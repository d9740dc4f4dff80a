// Doacross loops: for ordered(n) with ordered depend(sink: ...) and
// depend(source) (GOMP_loop_doacross_*_start, GOMP_doacross_wait/post and
// their _ull forms). A one-dimensional recurrence and a two-dimensional
// wavefront, each iteration reading what earlier iterations wrote through
// the sink dependences only, checked against a serial run.
#include <omp.h>

#include "omp_check.h"

// Every sink dependence that crosses threads is a hand-over: GNU's libgomp
// spins for it without yielding, so on a loaded machine (or with more
// threads than cores) each one may cost a time slice. Hence few of them:
// chunks of many iterations for the chains, a small grid.
enum { kLen = 3000, kRows = 24, kCols = 40 };

static unsigned long step(unsigned long prev, long i) {
  return (prev ^ (unsigned long)i) * 0x9E3779B97F4A7C15ul + 3;
}

static unsigned long chain[kLen];
static unsigned long grid[kRows][kCols];

static void check_chain(const char* what) {
  unsigned long want = 1;
  for (long i = 1; i < kLen; ++i) {
    want = step(want, i);
    CHECK(chain[i] == want, "%s: element %ld is %lx, serial %lx", what, i, chain[i], want);
  }
}

static unsigned long cell(unsigned long up, unsigned long left, long i, long j) {
  return step(up * 31 + left, i * kCols + j);
}

static void check_grid(const char* what) {
  static unsigned long want[kRows][kCols];
  for (long i = 0; i < kRows; ++i) {
    for (long j = 0; j < kCols; ++j) {
      if (i == 0 || j == 0) {
        want[i][j] = (unsigned long)(i + j);
      } else {
        want[i][j] = cell(want[i - 1][j], want[i][j - 1], i, j);
      }
      CHECK(grid[i][j] == want[i][j], "%s: cell (%ld,%ld) is %lx, serial %lx", what, i, j,
            grid[i][j], want[i][j]);
    }
  }
}

static void reset_grid(void) {
  memset(grid, 0, sizeof grid);
  for (long i = 0; i < kRows; ++i) grid[i][0] = (unsigned long)i;
  for (long j = 0; j < kCols; ++j) grid[0][j] = (unsigned long)j;
}

int main(void) {
  for (int rep = 0; rep < OMPT_SIZE(5, 1); ++rep) {
    memset(chain, 0, sizeof chain);
    chain[0] = 1;
#pragma omp parallel for ordered(1) schedule(static, 100)
    for (long i = 1; i < kLen; ++i) {
#pragma omp ordered depend(sink : i - 1)
      chain[i] = step(chain[i - 1], i);
#pragma omp ordered depend(source)
    }
    check_chain("ordered(1) static, 100");

    memset(chain, 0, sizeof chain);
    chain[0] = 1;
#pragma omp parallel for ordered(1) schedule(dynamic, 75)
    for (long i = 1; i < kLen; ++i) {
#pragma omp ordered depend(sink : i - 1)
      chain[i] = step(chain[i - 1], i);
#pragma omp ordered depend(source)
    }
    check_chain("ordered(1) dynamic, 75");

    memset(chain, 0, sizeof chain);
    chain[0] = 1;
    // Bounds the compiler cannot narrow: the loops stay unsigned long long.
    volatile unsigned long long top = 1ull << 63;
    const unsigned long long base = top;
#pragma omp parallel for ordered(1) schedule(guided)
    for (unsigned long long u = base + 1; u < base + kLen; ++u) {
#pragma omp ordered depend(sink : u - 1)
      chain[u - base] = step(chain[u - base - 1], (long)(u - base));
#pragma omp ordered depend(source)
    }
    check_chain("ordered(1) guided, unsigned long long");

    // The other schedules over unsigned long long (the runtime one with a
    // chunk: the default dynamic,1 would hand over at every iteration), and
    // guided over int.
    memset(chain, 0, sizeof chain);
    chain[0] = 1;
#pragma omp parallel for ordered(1) schedule(static, 100)
    for (unsigned long long u = base + 1; u < base + kLen; ++u) {
#pragma omp ordered depend(sink : u - 1)
      chain[u - base] = step(chain[u - base - 1], (long)(u - base));
#pragma omp ordered depend(source)
    }
    check_chain("ordered(1) static, 100, unsigned long long");

    memset(chain, 0, sizeof chain);
    chain[0] = 1;
#pragma omp parallel for ordered(1) schedule(dynamic, 60)
    for (unsigned long long u = base + 1; u < base + kLen; ++u) {
#pragma omp ordered depend(sink : u - 1)
      chain[u - base] = step(chain[u - base - 1], (long)(u - base));
#pragma omp ordered depend(source)
    }
    check_chain("ordered(1) dynamic, 60, unsigned long long");

    omp_set_schedule(omp_sched_dynamic, 80);
    memset(chain, 0, sizeof chain);
    chain[0] = 1;
#pragma omp parallel for ordered(1) schedule(runtime)
    for (unsigned long long u = base + 1; u < base + kLen; ++u) {
#pragma omp ordered depend(sink : u - 1)
      chain[u - base] = step(chain[u - base - 1], (long)(u - base));
#pragma omp ordered depend(source)
    }
    check_chain("ordered(1) runtime (dynamic, 80), unsigned long long");
    omp_set_schedule(omp_sched_dynamic, 1);

    memset(chain, 0, sizeof chain);
    chain[0] = 1;
#pragma omp parallel for ordered(1) schedule(guided, 40)
    for (long i = 1; i < kLen; ++i) {
#pragma omp ordered depend(sink : i - 1)
      chain[i] = step(chain[i - 1], i);
#pragma omp ordered depend(source)
    }
    check_chain("ordered(1) guided, 40");

    // Wavefront: (i, j) needs (i-1, j) and (i, j-1).
    reset_grid();
#pragma omp parallel for ordered(2) schedule(static, 1)
    for (long i = 1; i < kRows; ++i) {
      for (long j = 1; j < kCols; ++j) {
#pragma omp ordered depend(sink : i - 1, j) depend(sink : i, j - 1)
        grid[i][j] = cell(grid[i - 1][j], grid[i][j - 1], i, j);
#pragma omp ordered depend(source)
      }
    }
    check_grid("ordered(2) static, 1");

    reset_grid();
#pragma omp parallel for ordered(2) schedule(dynamic)
    for (long i = 1; i < kRows; ++i) {
      for (long j = 1; j < kCols; ++j) {
#pragma omp ordered depend(sink : i - 1, j) depend(sink : i, j - 1)
        grid[i][j] = cell(grid[i - 1][j], grid[i][j - 1], i, j);
#pragma omp ordered depend(source)
      }
    }
    check_grid("ordered(2) dynamic");

    // Counting down in j, under the runtime schedule. (With an unsigned j
    // counting down, gcc 12 and GNU's libgomp never finish this loop.)
    reset_grid();
#pragma omp parallel for ordered(2) schedule(runtime)
    for (long i = 1; i < kRows; ++i) {
      for (long j = kCols - 1; j >= 1; --j) {
        // (i, j) needs (i-1, j) and (i, j+1), which came before it.
#pragma omp ordered depend(sink : i - 1, j) depend(sink : i, j + 1)
        grid[i][kCols - j] = cell(grid[i - 1][kCols - j], grid[i][kCols - j - 1], i, kCols - j);
#pragma omp ordered depend(source)
      }
    }
    check_grid("ordered(2) runtime, counting down");
  }
  puts("doacross: ok");
  return 0;
}
