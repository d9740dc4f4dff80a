// mote::task_group: results against serial runs, nesting, spawns from inside
// tasks and from other threads, exceptions, cancellation and a forgotten wait.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "mote/mote.hpp"
#include "test_util.hpp"

namespace {

using mote_test::scaled;

mote::runtime_options workers(unsigned n) {
  mote::runtime_options o;
  o.num_workers = n;
  o.spin = std::chrono::microseconds(20);
  return o;
}

class GroupOnWorkers : public ::testing::TestWithParam<unsigned> {};

TEST_P(GroupOnWorkers, ManyTasksEachRunOnce) {
  mote::runtime rt(workers(GetParam()));
  const int n = static_cast<int>(scaled(20000));
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  rt.run([&] {
    mote::task_group g;
    for (int i = 0; i < n; ++i) g.spawn([&hits, i] { hits[static_cast<std::size_t>(i)].fetch_add(1); });
    g.wait();
  });
  for (int i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << i;
}

// Recursive sum over a random tree, one group per node, vs serial.
long tree_sum(std::uint64_t seed, int depth) {
  std::mt19937_64 rng(seed);
  const int children = depth == 0 ? 0 : static_cast<int>(rng() % 5);
  long sum = static_cast<long>(rng() % 1000);
  if (children == 0) return sum;
  std::vector<long> parts(static_cast<std::size_t>(children));
  mote::task_group g;
  for (int c = 0; c < children; ++c) {
    const std::uint64_t child_seed = rng();
    g.spawn([&parts, c, child_seed, depth] { parts[static_cast<std::size_t>(c)] = tree_sum(child_seed, depth - 1); });
  }
  g.wait();
  return std::accumulate(parts.begin(), parts.end(), sum);
}

long tree_sum_serial(std::uint64_t seed, int depth) {
  std::mt19937_64 rng(seed);
  const int children = depth == 0 ? 0 : static_cast<int>(rng() % 5);
  long sum = static_cast<long>(rng() % 1000);
  for (int c = 0; c < children; ++c) sum += tree_sum_serial(rng(), depth - 1);
  return sum;
}

TEST_P(GroupOnWorkers, NestedGroupsMatchSerial) {
  mote::runtime rt(workers(GetParam()));
  std::mt19937_64 rng(mote_test::test_seed());
  for (long t = 0; t < scaled(20, 4); ++t) {
    const std::uint64_t seed = rng();
    const int depth = mote_test::kSanitized ? 5 : 7;
    EXPECT_EQ(rt.run([&] { return tree_sum(seed, depth); }), tree_sum_serial(seed, depth));
  }
}

// One group, fed from inside its own tasks (spawns that do not come from the
// group's frame), mixed with joins.
void spawn_tree(mote::task_group& g, std::atomic<long>& count, int depth) {
  count.fetch_add(1);
  if (depth == 0) return;
  g.spawn([&g, &count, depth] { spawn_tree(g, count, depth - 1); });
  mote::join([&] { spawn_tree(g, count, depth - 1); }, [] {});
}

TEST_P(GroupOnWorkers, SpawnsFromInsideTasks) {
  mote::runtime rt(workers(GetParam()));
  const int depth = mote_test::kSanitized ? 9 : 13;
  std::atomic<long> count{0};
  rt.run([&] {
    mote::task_group g;
    spawn_tree(g, count, depth);
    g.wait();
  });
  EXPECT_EQ(count.load(), (1L << (depth + 1)) - 1);
}

INSTANTIATE_TEST_SUITE_P(Workers, GroupOnWorkers, ::testing::Values(1u, 2u, 4u, 8u, 16u));

TEST(TaskGroup, FirstExceptionAtWaitThenReusable) {
  mote::runtime rt(workers(2));
  rt.run([] {
    mote::task_group g;
    std::atomic<int> ran{0};
    for (int i = 0; i < 100; ++i) {
      g.spawn([&ran, i] {
        ran.fetch_add(1);
        if (i == 50) throw std::runtime_error("task 50");
      });
    }
    try {
      g.wait();
      FAIL() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "task 50");
    }
    EXPECT_GE(ran.load(), 1);
    // Reusable, and the old failure does not come back.
    std::atomic<int> again{0};
    for (int i = 0; i < 10; ++i) g.spawn([&again] { again.fetch_add(1); });
    g.wait();
    EXPECT_EQ(again.load(), 10);
  });
}

TEST(TaskGroup, EveryTaskThrowsOneExceptionNoLeak) {
  for (unsigned n : {1u, 2u, 8u}) {
    mote::runtime rt(workers(n));
    rt.run([] {
      mote::task_group g;
      const long tasks = scaled(10000);
      for (long i = 0; i < tasks; ++i) {
        mote_test::lifetime payload(i);
        g.spawn([payload] { throw std::runtime_error(std::to_string(payload.value)); });
      }
      EXPECT_THROW(g.wait(), std::runtime_error);
    });
    EXPECT_EQ(mote_test::lifetime::live.load(), 0);  // every closure destroyed
  }
  EXPECT_EQ(mote_test::lifetime::double_destroyed.load(), 0);
}

TEST(TaskGroup, CancelSkipsUnstartedTasks) {
  mote::runtime rt(workers(1));
  std::atomic<int> ran{0};
  rt.run([&] {
    mote::task_group g;
    g.cancel();
    for (int i = 0; i < 100; ++i) g.spawn([&ran] { ran.fetch_add(1); });
    g.wait();
  });
  // On one worker nothing could start before wait(), and wait() ran none.
  EXPECT_EQ(ran.load(), 0);
}

TEST(TaskGroup, ForgottenWaitIsReported) {
  mote::runtime rt(workers(2));
  std::atomic<int> finished{0};
  EXPECT_THROW(rt.run([&] {
                 mote::task_group g;
                 for (int i = 0; i < 50; ++i) g.spawn([&finished] { finished.fetch_add(1); });
                 // no wait()
               }),
               mote::missing_wait);
  // Whatever ran has finished; nothing runs against the destroyed group.
  const int seen = finished.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(finished.load(), seen);
}

TEST(TaskGroup, ExternalThreadsShareARuntime) {
  mote::runtime rt(workers(2));
  const int threads = mote_test::kSanitized ? 4 : 16;
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < threads; ++t) {
    callers.emplace_back([&, t] {
      mote::task_group g(rt);  // spawned from a thread that is not a worker
      std::vector<int> out(200);
      for (int i = 0; i < 200; ++i) g.spawn([&out, i, t] { out[static_cast<std::size_t>(i)] = i * t; });
      g.wait();
      for (int i = 0; i < 200; ++i) {
        if (out[static_cast<std::size_t>(i)] != i * t) wrong.fetch_add(1);
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(TaskGroup, DefaultRuntimeFromOutside) {
  mote::task_group g;
  std::atomic<int> sum{0};
  for (int i = 1; i <= 100; ++i) g.spawn([&sum, i] { sum.fetch_add(i); });
  g.wait();
  EXPECT_EQ(sum.load(), 5050);
}

}  // namespace

namespace {

TEST(TaskGroup, WaitFromAnotherThreadIsReported) {
  mote::runtime rt(workers(2));
  std::atomic<int> ran{0};
  rt.run([&] {
    mote::task_group g;
    for (int i = 0; i < 10; ++i) g.spawn([&ran] { ran.fetch_add(1); });
    std::thread other([&] { EXPECT_THROW(g.wait(), std::logic_error); });
    other.join();
    g.wait();  // the creator's wait still works and loses nothing
  });
  EXPECT_EQ(ran.load(), 10);
}

TEST(TaskGroup, WaitFromNestedFrameIsReported) {
  mote::runtime rt(workers(1));
  std::atomic<int> ran{0};
  rt.run([&] {
    mote::task_group g;
    g.spawn([&ran] { ran.fetch_add(1); });
    mote::join([&] { EXPECT_THROW(g.wait(), std::logic_error); }, [] {});
    g.wait();
  });
  EXPECT_EQ(ran.load(), 1);
}

}  // namespace
