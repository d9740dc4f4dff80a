// Fork-join with mote::join: the classic recursive Fibonacci, with a serial
// cutoff so that each task does enough work to be worth a spawn.
//
//   ./example_fib 32
#include <mote/mote.hpp>

#include <cstdio>
#include <cstdlib>

long fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

long fib(int n) {
  if (n < 20) return fib_serial(n);
  // Both halves may run in parallel; join returns both results as a pair.
  auto [a, b] = mote::join([&] { return fib(n - 1); }, [&] { return fib(n - 2); });
  return a + b;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 30;
  // Called outside any worker, join runs on the default runtime (sized from
  // MOTE_NUM_THREADS, else one worker per core).
  const long result = fib(n);
  std::printf("fib(%d) = %ld\n", n, result);
  return result == fib_serial(n) ? 0 : 1;
}
