// #pragma omp error at(execution): GOMP_warning (severity(warning): a line
// on stderr, then the program goes on) and GOMP_error (severity(fatal): a
// line, then the program ends with a failure). expect.sh checks the lines,
// GNU's text: `libgomp: error directive encountered: <message>` and
// `libgomp: fatal error: error directive encountered: <message>`.
//
//   error_directive warning   warns twice (with and without a message) from a region, succeeds
//   error_directive fatal     warns, then stops at a fatal error directive
#include <omp.h>

#include "omp_check.h"

int main(int argc, char** argv) {
  CHECK(argc == 2 && (strcmp(argv[1], "warning") == 0 || strcmp(argv[1], "fatal") == 0),
        "usage: error_directive warning|fatal");
  int went_on = 0;
#pragma omp parallel num_threads(2)
  {
#pragma omp masked
    {
#pragma omp error at(execution) severity(warning) message("the program's warning")
      went_on++;
    }
  }
  CHECK(went_on == 1, "the program did not go on after a warning error directive");
#pragma omp error at(execution) severity(warning)
  if (strcmp(argv[1], "fatal") == 0) {
#pragma omp error at(execution) severity(fatal) message("the program's fatal error")
    FAIL("the program went on after a fatal error directive");
  }
  puts("error_directive: ok");
  return 0;
}
