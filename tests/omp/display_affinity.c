// OMP_DISPLAY_AFFINITY=true: each thread's line (OMP_AFFINITY_FORMAT, here
// "L%L n%n N%N a%a") is shown on stderr when it enters its first region,
// and again only where what the line shows changed: a second region like the
// first shows nothing; a nested region shows the inner teams' lines (level
// 2) and not the outer team's again. The program reads its own stderr (a
// file it points fd 2 at) after each step; lines may come in any order.
// Run with OMP_DISPLAY_AFFINITY=true OMP_AFFINITY_FORMAT="L%L n%n N%N a%a".
#include <omp.h>

#include "omp_check.h"

static FILE* capture;
static int saved_stderr;
static int sink;  // each thread writes it: the regions are not empty

// stderr into the file while the regions run; back for the checks' messages.
static void capture_on(void) {
  fflush(stderr);
  CHECK(dup2(fileno(capture), 2) == 2, "dup2");
}

// The lines written to stderr since the last call, in `out` (one string,
// '\n' after each), and how many; stderr is the program's again.
static int new_lines(char* out, size_t size) {
  fflush(stderr);
  dup2(saved_stderr, 2);
  static long offset = 0;
  fseek(capture, offset, SEEK_SET);
  size_t n = fread(out, 1, size - 1, capture);
  out[n] = '\0';
  offset += (long)n;
  int lines = 0;
  for (size_t i = 0; i < n; ++i) lines += out[i] == '\n';
  return lines;
}

static void expect_line(const char* text, const char* line, const char* step) {
  char want[64];
  snprintf(want, sizeof want, "%s\n", line);
  const char* at = strstr(text, want);
  CHECK(at != NULL && (at == text || at[-1] == '\n'), "%s: no line '%s' in:\n%s", step, line, text);
  CHECK(strstr(at + 1, want) == NULL, "%s: line '%s' twice in:\n%s", step, line, text);
}

int main(void) {
  CHECK(getenv("OMP_DISPLAY_AFFINITY") != NULL, "run with OMP_DISPLAY_AFFINITY=true");
  // Room for nesting from the start (a library may size itself at its first region).
  omp_set_max_active_levels(2);
  saved_stderr = dup(2);
  capture = tmpfile();
  CHECK(capture != NULL && saved_stderr >= 0, "tmpfile");
  char text[4096];

  capture_on();
#pragma omp parallel num_threads(2)
  __atomic_store_n(&sink, omp_get_thread_num(), __ATOMIC_RELAXED);
  int lines = new_lines(text, sizeof text);
  CHECK(lines == 2, "the first region of 2 threads showed %d lines:\n%s", lines, text);
  expect_line(text, "L1 n0 N2 a0", "the first region");
  expect_line(text, "L1 n1 N2 a0", "the first region");

  capture_on();
#pragma omp parallel num_threads(2)
  __atomic_store_n(&sink, omp_get_thread_num(), __ATOMIC_RELAXED);
  lines = new_lines(text, sizeof text);
  CHECK(lines == 0, "a second region like the first showed %d lines:\n%s", lines, text);

  int inner_sizes = 0;
  capture_on();
#pragma omp parallel num_threads(2) reduction(+ : inner_sizes)
  {
#pragma omp parallel num_threads(2)
    {
#pragma omp master
      inner_sizes += omp_get_num_threads();
    }
  }
  lines = new_lines(text, sizeof text);
  if (inner_sizes == 4) {
    CHECK(lines == 4, "a nested region (2 teams of 2) showed %d lines:\n%s", lines, text);
    expect_line(text, "L2 n0 N2 a0", "the nested region");
    expect_line(text, "L2 n1 N2 a0", "the nested region");
    expect_line(text, "L2 n0 N2 a1", "the nested region");
    expect_line(text, "L2 n1 N2 a1", "the nested region");
  } else {
    // Inner teams smaller than asked (a library may give fewer threads).
    CHECK(strstr(text, "L1 ") == NULL, "the outer team's lines again:\n%s", text);
  }
  return 0;
}
