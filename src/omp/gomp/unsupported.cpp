// The end of every call to an entry point mote does not implement (the weak
// stubs of stubs.cpp): one line naming it, then abort, so that a program
// stops where the missing piece is, with a core dump that shows the caller.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "omp/omp.hpp"

namespace mote::omp {

void unsupported(const char* name) {
  // One write(2) of the whole line: nothing of stdio's buffering (the
  // process aborts next) and no interleaving with another thread's line.
  char line[256];
  const int n =
      std::snprintf(line, sizeof line, "mote: libgomp entry point %s is not implemented\n", name);
  if (n > 0) {
    std::size_t length = static_cast<std::size_t>(n);
    if (length >= sizeof line) {
      // Cut short, still one line.
      length = sizeof line - 1;
      line[length - 1] = '\n';
    }
    [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, line, length);
  }
  std::abort();
}

}  // namespace mote::omp
