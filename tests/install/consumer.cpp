// A program outside mote's tree that uses the C++ API as a user would: one
// fork-join and one task group, with results checked. Built by the
// find_package, add_subdirectory and pkg-config consumers alike.
#include <mote/mote.hpp>

#include <atomic>
#include <cstdio>

static long fib(int n) {
  if (n < 2) return n;
  auto [a, b] = mote::join([&] { return fib(n - 1); }, [&] { return fib(n - 2); });
  return a + b;
}

int main() {
  mote::runtime_options options;
  options.num_workers = 2;
  options.bind = mote::binding::parse("none");
  mote::runtime rt(options);

  const long f = rt.run([] { return fib(20); });
  if (f != 6765) {
    std::fprintf(stderr, "fib(20) = %ld, expected 6765\n", f);
    return 1;
  }

  std::atomic<long> sum{0};
  mote::task_group g(rt);
  for (long i = 1; i <= 100; ++i)
    g.spawn([&sum, i] { sum.fetch_add(i, std::memory_order_relaxed); });
  g.wait();
  if (sum.load() != 5050) {
    std::fprintf(stderr, "task_group sum = %ld, expected 5050\n", sum.load());
    return 2;
  }
  std::puts("consumer: ok");
  return 0;
}
