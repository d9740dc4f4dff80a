// A task_group: spawn any number of tasks, then wait for all of them. The
// first exception a task throws comes back out of wait().
#include <mote/mote.hpp>

#include <cstdio>
#include <stdexcept>
#include <vector>

int main() {
  std::vector<long> squares(1000);
  mote::task_group group;
  for (long i = 0; i < static_cast<long>(squares.size()); ++i) {
    group.spawn([&squares, i] { squares[i] = i * i; });
  }
  group.wait();

  long sum = 0;
  for (long v : squares) sum += v;
  std::printf("sum of squares below 1000 = %ld\n", sum);

  // A failing task: the others that have not started are skipped, and wait()
  // rethrows. The group can be used again afterwards.
  group.spawn([] { throw std::runtime_error("task 7 failed"); });
  try {
    group.wait();
    return 1;
  } catch (const std::runtime_error& e) {
    std::printf("caught: %s\n", e.what());
  }
  return sum == 332833500 ? 0 : 1;
}
