// Staying correct under pressure: more workers than cores, two processes at
// once, a busy program on one of the cores, a group whose every task throws,
// recursion deeper than the deque, many outside threads at once. Results are
// checked against serial computations; nothing here measures speed.
//
// The program runs itself as a second process (posix_spawn of argv[0] with
// --workload or --spin), which also works under the sanitizers.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mote/mote.hpp"
#include "test_util.hpp"

extern char** environ;

namespace {

std::string self_path;

using mote_test::fib;

// A random tree of task groups: each node spawns 0..4 children and adds up
// their values; the serial twin walks the same tree.
std::int64_t tree_value(std::uint64_t seed, int depth) {
  return static_cast<std::int64_t>((seed * 0x9E3779B97F4A7C15ull) >> 40) + depth;
}
int tree_children(std::uint64_t seed, int depth) {
  return depth == 0 ? 0 : static_cast<int>((seed >> 7) % 5);
}
std::uint64_t child_seed(std::uint64_t seed, int i) { return seed * 6364136223846793005ull + 1442695040888963407ull + i; }

std::int64_t tree_serial(std::uint64_t seed, int depth) {
  std::int64_t sum = tree_value(seed, depth);
  for (int i = 0; i < tree_children(seed, depth); ++i) sum += tree_serial(child_seed(seed, i), depth - 1);
  return sum;
}

std::int64_t tree_parallel(std::uint64_t seed, int depth) {
  const int n = tree_children(seed, depth);
  std::vector<std::int64_t> parts(static_cast<std::size_t>(n), 0);
  mote::task_group g;
  for (int i = 0; i < n; ++i) {
    g.spawn([&parts, seed, depth, i] { parts[static_cast<std::size_t>(i)] = tree_parallel(child_seed(seed, i), depth - 1); });
  }
  g.wait();
  std::int64_t sum = tree_value(seed, depth);
  for (std::int64_t p : parts) sum += p;
  return sum;
}

// The workload every scenario runs: fib through join, a task-group tree.
// Returns the number of wrong answers.
int workload(mote::runtime& rt, int rounds) {
  int wrong = 0;
  const int n = mote_test::kSanitized ? 19 : 25;
  const int depth = mote_test::kSanitized ? 8 : 11;
  for (int r = 0; r < rounds; ++r) {
    if (rt.run([n] { return fib(n); }) != mote_test::serial_fib(n)) ++wrong;
    const std::uint64_t seed = mote_test::test_seed() + static_cast<std::uint64_t>(r);
    if (rt.run([seed, depth] { return tree_parallel(seed, depth); }) != tree_serial(seed, depth)) ++wrong;
  }
  return wrong;
}

pid_t spawn_self(const char* mode, const char* arg = nullptr) {
  std::string a0 = self_path, a1 = mode, a2 = arg ? arg : "";
  char* argv[] = {a0.data(), a1.data(), arg ? a2.data() : nullptr, nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, self_path.c_str(), nullptr, nullptr, argv, environ) != 0) return -1;
  return pid;
}

// Waits up to `seconds` for pid; its exit status, or -1 after killing it.
int wait_for_exit(pid_t pid, int seconds) {
  for (int i = 0; i < seconds * 100; ++i) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

class Oversubscribed : public ::testing::TestWithParam<unsigned> {};

TEST_P(Oversubscribed, ResultsMatchSerial) {
  mote::runtime rt(mote::runtime_options{.num_workers = GetParam()});
  EXPECT_EQ(rt.num_workers(), GetParam());
  EXPECT_EQ(workload(rt, 3), 0);
}

INSTANTIATE_TEST_SUITE_P(WorkersOnTwoCores, Oversubscribed, ::testing::Values(4u, 8u, 32u));

TEST(Robust, TwoProcessesAtOnce) {
  const pid_t a = spawn_self("--workload");
  const pid_t b = spawn_self("--workload");
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  EXPECT_EQ(wait_for_exit(a, 300), 0);
  EXPECT_EQ(wait_for_exit(b, 300), 0);
}

TEST(Robust, BusyProgramPinnedToACore) {
  const pid_t spinner = spawn_self("--spin", "0");
  ASSERT_GT(spinner, 0);
  {
    mote::runtime rt(mote::runtime_options{.num_workers = 2});
    EXPECT_EQ(workload(rt, 3), 0);
  }
  kill(spinner, SIGKILL);
  waitpid(spinner, nullptr, 0);
}

TEST(Robust, EveryTaskOfALargeGroupThrows) {
  mote::runtime rt(mote::runtime_options{.num_workers = 2});
  const int n = static_cast<int>(mote_test::scaled(10000, 4));
  for (int round = 0; round < 3; ++round) {
    std::atomic<int> started{0};
    std::string caught;
    rt.run([&] {
      mote::task_group g;
      for (int i = 0; i < n; ++i) {
        g.spawn([&started, i] {
          started.fetch_add(1);
          throw std::runtime_error("task " + std::to_string(i));
        });
      }
      try {
        g.wait();
      } catch (const std::runtime_error& e) {
        caught = e.what();
      }
      // The group is ready for reuse.
      std::atomic<int> ok{0};
      for (int i = 0; i < 10; ++i) g.spawn([&ok] { ok.fetch_add(1); });
      g.wait();
      if (ok.load() != 10) caught += " (reuse failed)";
    });
    EXPECT_EQ(caught.rfind("task ", 0), 0u) << caught;
    EXPECT_GE(started.load(), 1);
    EXPECT_LE(started.load(), n);  // the rest were cancelled, cleanly
  }
  // The runtime is still fine.
  EXPECT_EQ(rt.run([] { return fib(15); }), mote_test::serial_fib(15));
}

// A chain of joins much deeper than the deque: the spawns past its capacity
// run inline, and nothing is lost.
long chain(int depth) {
  if (depth == 0) return 0;
  auto [a, b] = mote::join([depth] { return chain(depth - 1); }, [depth] { return static_cast<long>(depth); });
  return a + b;
}

TEST(Robust, RecursionDeeperThanTheDeque) {
  mote::runtime rt(mote::runtime_options{.num_workers = 2, .deque_capacity = 64});
  const int depth = static_cast<int>(mote_test::scaled(10000, 5));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(rt.run([depth] { return chain(depth); }), static_cast<long>(depth) * (depth + 1) / 2);
  }
  EXPECT_EQ(rt.run([] { return fib(20); }), mote_test::serial_fib(20));
}

TEST(Robust, SixteenOutsideThreadsAtOnce) {
  mote::runtime rt(mote::runtime_options{.num_workers = 2});
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  const int n = static_cast<int>(mote_test::scaled(16, 1) - (mote_test::kSanitized ? 4 : 0));
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&rt, &wrong, n, t] {
      for (int r = 0; r < 5; ++r) {
        if (rt.run([n] { return fib(n); }) != mote_test::serial_fib(n)) wrong.fetch_add(1);
        // A group from outside the runtime: spawns go through the injection queue.
        mote::task_group g(rt);
        std::vector<long> out(20, 0);
        for (int i = 0; i < 20; ++i) g.spawn([&out, i, t] { out[static_cast<std::size_t>(i)] = i * t; });
        g.wait();
        for (int i = 0; i < 20; ++i) {
          if (out[static_cast<std::size_t>(i)] != i * t) wrong.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(Robust, DestroyWhileWorkersSleepManyTimes) {
  for (int i = 0; i < static_cast<int>(mote_test::scaled(30, 3)); ++i) {
    mote::runtime rt(mote::runtime_options{.num_workers = 1u + static_cast<unsigned>(i % 8),
                                           .spin = std::chrono::microseconds(i % 2 == 0 ? 0 : 20)});
    EXPECT_EQ(rt.run([] { return fib(12); }), mote_test::serial_fib(12));
    // Past the spin window: the workers are parked when the runtime ends.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

int main(int argc, char** argv) {
  self_path = argv[0];
  if (argc >= 2 && std::strcmp(argv[1], "--workload") == 0) {
    mote::runtime rt(mote::runtime_options{.num_workers = 2});
    return workload(rt, 5) == 0 ? 0 : 1;
  }
  if (argc >= 3 && std::strcmp(argv[1], "--spin") == 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(std::atoi(argv[2]), &set);
    sched_setaffinity(0, sizeof(set), &set);
    volatile unsigned long x = 0;
    for (;;) x = x + 1;  // until killed
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
