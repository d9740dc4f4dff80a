// mote::task_group: results against serial runs, nesting, spawns from inside
// tasks and from other threads, exceptions, cancellation and a forgotten wait.
#include <gtest/gtest.h>
#include <atomic>
#include <chrono>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

#include "mote/mote.hpp"
#include "test_util.hpp"

namespace {

using mote_test::scaled;

using mote_test::workers;

// Each test runs under both scheduler policies (docs/scheduler.md).
class GroupOnWorkers : public ::testing::TestWithParam<std::tuple<unsigned, mote::scheduler_policy>> {
 protected:
  static mote::runtime_options options() {
    mote::runtime_options o = workers(std::get<0>(GetParam()));
    o.scheduler = std::get<1>(GetParam());
    return o;
  }
};

TEST_P(GroupOnWorkers, ManyTasksEachRunOnce) {
  mote::runtime rt(options());
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
  mote::runtime rt(options());
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
  mote::runtime rt(options());
  const int depth = mote_test::kSanitized ? 9 : 13;
  std::atomic<long> count{0};
  rt.run([&] {
    mote::task_group g;
    spawn_tree(g, count, depth);
    g.wait();
  });
  EXPECT_EQ(count.load(), (1L << (depth + 1)) - 1);
}

INSTANTIATE_TEST_SUITE_P(Workers, GroupOnWorkers,
                         ::testing::Combine(::testing::Values(1u, 2u, 4u, 8u, 16u),
                                            ::testing::Values(mote::scheduler_policy::work_stealing,
                                                              mote::scheduler_policy::delegation)));

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
    EXPECT_EQ(g.wait(), mote::task_group_status::canceled);
    // The wait ended the cancellation.
    g.spawn([&ran] { ran.fetch_add(1000); });
    EXPECT_EQ(g.wait(), mote::task_group_status::complete);
  });
  // On one worker nothing could start before wait(), and wait() ran none.
  EXPECT_EQ(ran.load(), 1000);
}

// A group destroyed without wait(): the destructor cancels what has not
// started and waits for what has before it throws, so nothing runs against
// the dead group. Each closure counts its own lifetime: every one must be
// destroyed exactly once (run or skipped) before the exception arrives, and
// none may run after it (ASan sees any access to the destroyed group).
TEST(TaskGroup, ForgottenWaitIsReported) {
  for (unsigned n : {1u, 2u}) {
    mote::runtime rt(workers(n));
    std::atomic<int> started{0};
    std::atomic<int> finished{0};
    int started_at_throw = -1;
    int finished_at_throw = -1;
    long live_at_throw = -1;
    EXPECT_THROW(rt.run([&] {
                   try {
                     mote::task_group g;
                     for (int i = 0; i < 50; ++i) {
                       mote_test::lifetime payload(i);
                       g.spawn([&started, &finished, payload] {
                         started.fetch_add(1);
                         volatile long spin = 0;  // long enough to be stolen midway
                         for (long k = 0; k < 20000; ++k) spin = spin + k;
                         finished.fetch_add(1);
                       });
                     }
                     // no wait()
                   } catch (const mote::missing_wait&) {
                     started_at_throw = started.load();
                     finished_at_throw = finished.load();
                     live_at_throw = mote_test::lifetime::live.load();
                     throw;
                   }
                 }),
                 mote::missing_wait);
    EXPECT_EQ(started_at_throw, finished_at_throw) << "a task was still running at the throw";
    EXPECT_EQ(live_at_throw, 0) << "a closure outlived its group";
    EXPECT_EQ(started.load(), started_at_throw) << "a task started after its group was gone";
  }
  EXPECT_EQ(mote_test::lifetime::double_destroyed.load(), 0);
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

// A group created on a worker may be waited for from any thread. Here the
// task that created it returns to the scheduler without waiting (its worker
// then runs the tasks it left on its own pool), and a thread that is not a
// worker waits, without help, for the owner's privately counted tasks.
TEST(TaskGroup, WaitFromAnotherThread) {
  for (unsigned n : {1u, 2u}) {
    mote::runtime rt(workers(n));
    std::atomic<int> ran{0};
    std::unique_ptr<mote::task_group> g;
    rt.run([&] {
      g = std::make_unique<mote::task_group>(mote::isolated);
      for (int i = 0; i < 100; ++i) {
        g->spawn([&ran, &g, i] {
          ran.fetch_add(1);
          if (i % 10 == 0) g->spawn([&ran] { ran.fetch_add(1); });  // spawned from a task
        });
      }
    });
    g->wait();
    EXPECT_EQ(ran.load(), 110);
    // And from a worker that is not the owner: a task spawned on another
    // run() waits for a group created by an earlier one.
    rt.run([&] {
      for (int i = 0; i < 50; ++i) g->spawn([&ran] { ran.fetch_add(1); });
    });
    rt.run([&] { g->wait(); });
    EXPECT_EQ(ran.load(), 160);
  }
}

// wait() from a frame nested inside other parallel work: the group's tasks
// sit below a join's record on the worker, and still run. On one worker
// nobody else could run them.
TEST(TaskGroup, WaitFromNestedFrame) {
  mote::runtime rt(workers(1));
  std::atomic<int> ran{0};
  rt.run([&] {
    mote::task_group g;
    g.spawn([&ran] { ran.fetch_add(1); });
    mote::join([&] { g.wait(); }, [&ran] { ran.fetch_add(10); });
    EXPECT_EQ(ran.load(), 11);
    g.spawn([&ran] { ran.fetch_add(100); });
    g.wait();
  });
  EXPECT_EQ(ran.load(), 111);
}

// Two threads waiting for one group at the same time: the second is told
// (mote::usage_error) and loses nothing; the first waits for every task.
TEST(TaskGroup, ConcurrentWaitIsAUsageError) {
  mote::runtime rt(workers(2));
  mote::task_group g(rt);
  std::atomic<bool> release{false};
  std::atomic<int> ran{0};
  g.spawn([&] {
    while (!release.load()) std::this_thread::yield();
    ran.fetch_add(1);
  });
  for (int i = 0; i < 10; ++i) g.spawn([&ran] { ran.fetch_add(1); });
  std::atomic<int> refused{0};
  std::atomic<int> returned{0};
  auto waiter = [&] {
    try {
      g.wait();
      returned.fetch_add(1);
    } catch (const mote::usage_error&) {
      refused.fetch_add(1);
    }
  };
  std::thread a(waiter);
  std::thread b(waiter);
  // The blocked task keeps the first waiter waiting until the second has
  // been refused; no timing is involved.
  while (refused.load() == 0) std::this_thread::yield();
  release.store(true);
  a.join();
  b.join();
  EXPECT_EQ(refused.load(), 1);
  EXPECT_EQ(returned.load(), 1);
  EXPECT_EQ(ran.load(), 11);
}

// Each group's waiters sleep on a futex word of that group: the completion of
// one group wakes its own waiters and nobody else's. A thread parked on group
// `held` (whose only task is held back) stays asleep while 200 other groups
// finish with their own waiters parked; a runtime-wide futex woken on every
// completion would wake it each time.
TEST(TaskGroup, CompletionWakesOnlyItsOwnWaiters) {
  mote::runtime rt(workers(2));
  std::atomic<bool> release{false};
  mote::task_group held(rt);
  held.spawn([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  });
  std::atomic<long> tid{0};
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    tid.store(mote_test::this_thread_id());
    held.wait();  // not a worker: parks at once, untimed
    returned.store(true);
  });
  while (tid.load() == 0) std::this_thread::yield();
  // Parked: its count has settled (the first read may come before the park;
  // two equal reads 20 ms apart, with nothing to wake it, mean asleep).
  long before = mote_test::voluntary_switches(tid.load());
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const long now = mote_test::voluntary_switches(tid.load());
    if (now == before) break;
    before = now;
  }
  ASSERT_GE(before, 0) << "no voluntary_ctxt_switches in /proc";
  const int groups = 200;
  for (int i = 0; i < groups; ++i) {
    mote::task_group other(rt);  // waited from this thread: parks on its own word
    other.spawn([] { std::this_thread::sleep_for(std::chrono::microseconds(100)); });
    EXPECT_EQ(other.wait(), mote::task_group_status::complete);
  }
  const long woken = mote_test::voluntary_switches(tid.load()) - before;
  EXPECT_FALSE(returned.load());
  release.store(true);
  waiter.join();
  EXPECT_TRUE(returned.load());
  // One or two at most (a signal, the sanitizer's own threads' doing); a
  // shared word would give one per completed group.
  EXPECT_LT(woken, groups / 10) << "the held group's waiter woke " << woken << " times for " << groups
                                << " completions of other groups";
}

// Cancelling a group reaches the groups created inside its tasks (they are
// bound to it, as oneTBB binds contexts): their unstarted tasks do not run.
// An isolated group is not reached. On one worker nothing else runs them.
TEST(TaskGroup, CancellationReachesNestedGroups) {
  mote::runtime rt(workers(1));
  std::atomic<int> bound_ran{0};
  std::atomic<int> isolated_ran{0};
  bool inner_saw = false;
  bool isolated_saw = true;
  rt.run([&] {
    mote::task_group outer;
    outer.spawn([&] {
      mote::task_group inner;  // bound to outer
      mote::task_group alone(mote::isolated);
      for (int i = 0; i < 100; ++i) {
        inner.spawn([&bound_ran] { bound_ran.fetch_add(1); });
        alone.spawn([&isolated_ran] { isolated_ran.fetch_add(1); });
      }
      outer.cancel();
      inner_saw = inner.is_cancelled();
      isolated_saw = alone.is_cancelled();
      EXPECT_EQ(inner.wait(), mote::task_group_status::canceled);
      EXPECT_EQ(alone.wait(), mote::task_group_status::complete);
    });
    EXPECT_EQ(outer.wait(), mote::task_group_status::canceled);
    // The cancellation ends with the wait: the group and its new children run.
    EXPECT_FALSE(outer.is_cancelled());
    outer.spawn([&] {
      mote::task_group inner;
      inner.spawn([&bound_ran] { bound_ran.fetch_add(1000); });
      inner.wait();
    });
    outer.wait();
  });
  EXPECT_TRUE(inner_saw);
  EXPECT_FALSE(isolated_saw);
  EXPECT_EQ(bound_ran.load(), 1000);
  EXPECT_EQ(isolated_ran.load(), 100);
}

// A group created inside a join's branch that another worker stole is bound
// to the group whose task made the join: the thief looks that group up
// from the join's worker.
TEST(TaskGroup, CancellationReachesGroupsInStolenJoinBranches) {
  mote::runtime rt(workers(2));
  std::atomic<int> stage{0};
  bool saw = false;
  int g_worker = -1;
  int f_worker = -2;
  rt.run([&] {
    mote::task_group outer;
    outer.spawn([&] {
      f_worker = mote::runtime::current_worker_index();
      mote::join(
          [&] {
            // Tiny joins answer the thief's requests to share, so g is stolen.
            while (stage.load() == 0) mote::join([] {}, [] {});
            outer.cancel();
            stage.store(2);
          },
          [&] {
            g_worker = mote::runtime::current_worker_index();
            mote::task_group inner;  // created on the thief
            stage.store(1);
            while (stage.load() != 2) std::this_thread::yield();
            saw = inner.is_cancelled();
          });
    });
    outer.wait();
  });
  EXPECT_NE(g_worker, f_worker) << "g was not stolen";
  EXPECT_TRUE(saw);
}

// A task that waits for its own group would wait for itself (it is one of
// the tasks pending): that is reported, and the group's real wait sees the
// error and finishes. Also from a join branch of such a task run by a thief.
TEST(TaskGroup, WaitFromInsideItsOwnTaskIsAUsageError) {
  for (unsigned n : {1u, 2u}) {
    mote::runtime rt(workers(n));
    rt.run([] {
      mote::task_group g;
      g.spawn([&g] { g.wait(); });
      EXPECT_THROW(g.wait(), mote::usage_error);
      g.spawn([&g] { mote::join([] {}, [&g] { g.wait(); }); });
      EXPECT_THROW(g.wait(), mote::usage_error);
      std::atomic<int> ran{0};
      g.spawn([&ran] { ran.fetch_add(1); });  // and it is usable afterwards
      g.wait();
      EXPECT_EQ(ran.load(), 1);
    });
  }
}

}  // namespace
