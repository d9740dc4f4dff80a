// The affinity format API: omp_set_affinity_format, omp_get_affinity_format
// (return value and truncation), omp_capture_affinity inside a region (the
// fields whose values OpenMP fixes are checked exactly: thread and team
// numbers, nesting level, ancestor, process id, field widths and long
// names; host, native thread id and affinity only for being there), and
// omp_display_affinity (it prints).
#include <omp.h>

#include "omp_check.h"

static void get_and_set(void) {
  char buf[256];
  size_t len = omp_get_affinity_format(buf, sizeof buf);
  CHECK(len > 0 && len == strlen(buf), "default affinity format '%s', length %zu", buf, len);
  const char* format = "tn=%n nt=%N";
  omp_set_affinity_format(format);
  len = omp_get_affinity_format(buf, sizeof buf);
  CHECK(len == strlen(format) && strcmp(buf, format) == 0,
        "omp_get_affinity_format gave '%s' (%zu)", buf, len);
  char tiny[5];
  len = omp_get_affinity_format(tiny, sizeof tiny);
  CHECK(len == strlen(format) && strcmp(tiny, "tn=%") == 0,
        "a 5-byte buffer: returned %zu and '%s' (the length and a truncated copy expected)", len,
        tiny);
}

static void capture(void) {
  int bad = 0;
  char first_error[640] = "";
#pragma omp parallel num_threads(3) reduction(+ : bad)
  {
    int t = omp_get_thread_num();
    char got[256], want[256];
    size_t len = omp_capture_affinity(got, sizeof got,
                                      "tn=%n nt=%N lvl=%L anc=%a pid=%P team=%t teams=%T "
                                      "long=%{thread_num} w=[%0.4n][%.3n][%3n]");
    snprintf(want, sizeof want,
             "tn=%d nt=3 lvl=1 anc=0 pid=%ld team=0 teams=1 long=%d w=[%04d][%3d][%-3d]", t,
             (long)getpid(), t, t, t, t);
    if (len != strlen(want) || strcmp(got, want) != 0) {
      bad++;
#pragma omp critical
      snprintf(first_error, sizeof first_error, "thread %d: '%s' (%zu), '%s' expected", t, got, len,
               want);
    }
    // The fields that depend on the machine: there, and not empty.
    len = omp_capture_affinity(got, sizeof got, "H=<%H> i=<%i> A=<%A>");
    if (strstr(got, "H=<>") != NULL || strstr(got, "i=<>") != NULL || len != strlen(got)) {
      bad++;
#pragma omp critical
      snprintf(first_error, sizeof first_error,
               "thread %d: host, thread id or affinity empty: '%s'", t, got);
    }
    // NULL: the affinity-format-var; a small buffer: truncated, full length returned.
    size_t full = omp_capture_affinity(got, sizeof got, NULL);
    char small[4];
    size_t cut = omp_capture_affinity(small, sizeof small, NULL);
    if (full != cut || strlen(small) != 3 || strncmp(small, got, 3) != 0) {
      bad++;
#pragma omp critical
      snprintf(first_error, sizeof first_error,
               "thread %d: NULL format gave '%s' (%zu), truncated '%s' (%zu)", t, got, full, small,
               cut);
    }
  }
  CHECK(bad == 0, "%d affinity captures differed; %s", bad, first_error);
}

// omp_display_affinity prints one line per call (to stdout or stderr: both
// are captured).
static void display(void) {
  fflush(stdout);
  fflush(stderr);
  FILE* capture = tmpfile();
  CHECK(capture != NULL, "tmpfile failed");
  int saved_out = dup(1), saved_err = dup(2);
  dup2(fileno(capture), 1);
  dup2(fileno(capture), 2);
#pragma omp parallel num_threads(2)
  omp_display_affinity("shown tn=%n nt=%N");
  fflush(stdout);
  fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  char text[1024];
  rewind(capture);
  size_t len = fread(text, 1, sizeof text - 1, capture);
  text[len] = '\0';
  fclose(capture);
  CHECK(strstr(text, "shown tn=0 nt=2") != NULL && strstr(text, "shown tn=1 nt=2") != NULL,
        "omp_display_affinity printed:\n%s", text);
}

int main(void) {
  get_and_set();
  capture();
  display();
  puts("affinity_format: ok");
  return 0;
}
