// No ready task is stranded: whatever its spawner does next (computes
// without spawning, blocks on a lock, sleeps), an idle worker takes the
// tasks it holds. Each test makes the spawner wait, without spawning or
// taking any task, until its own tasks have run elsewhere; the deadline only
// turns a stranded task (which would make the wait endless) into a failure.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "mote/dataflow.hpp"
#include "mote/join.hpp"
#include "mote/runtime.hpp"
#include "mote/sync/ticket_lock.hpp"
#include "mote/task_group.hpp"
#include "test_util.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

// Far longer than any wake-up: only a stranded task comes near it.
constexpr auto kDeadline = std::chrono::seconds(20);

// Computes (no spawn, no pop, no call into mote) until `done` holds or the
// deadline passes; true when `done` held.
template <class Done>
bool compute_until(Done&& done) {
  const auto end = clock_type::now() + kDeadline;
  volatile std::uint64_t sink = 0;
  while (!done()) {
    if (clock_type::now() > end) return false;
    for (int i = 0; i < 1000; ++i) sink = sink + static_cast<std::uint64_t>(i);
  }
  return true;
}

class Stranded : public ::testing::TestWithParam<std::chrono::microseconds> {
 protected:
  // Two workers; the parameter is the spin window (0: idle workers park at
  // once, so only a wake-up or a timed sleep brings them back).
  mote::runtime_options options() const { return mote_test::workers(2, GetParam()); }
};

TEST_P(Stranded, JoinPartnerRunsWhileTheFirstBranchComputes) {
  mote::runtime rt(options());
  for (int round = 0; round < 20; ++round) {
    std::atomic<bool> g_ran{false};
    bool seen = false;
    rt.run([&] {
      mote::join([&] { seen = compute_until([&] { return g_ran.load(); }); }, [&] { g_ran.store(true); });
    });
    ASSERT_TRUE(seen) << "round " << round << ": join's second branch waited for the first";
  }
}

TEST_P(Stranded, ParallelInvokeRunsLongCallablesTogether) {
  mote::runtime rt(options());
  for (int round = 0; round < 10; ++round) {
    // Two callables that each compute until the other has started.
    std::atomic<int> started{0};
    std::atomic<int> met{0};
    auto body = [&] {
      started.fetch_add(1);
      if (compute_until([&] { return started.load() == 2; })) met.fetch_add(1);
    };
    rt.run([&] { mote::parallel_invoke(body, body); });
    ASSERT_EQ(met.load(), 2) << "round " << round << ": the callables ran one after the other";
  }
}

TEST_P(Stranded, GroupTasksRunWhileTheSpawnerComputes) {
  mote::runtime rt(options());
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> ran{0};
    bool seen = false;
    rt.run([&] {
      mote::task_group g;
      for (int i = 0; i < 4; ++i) g.spawn([&] { ran.fetch_add(1); });
      seen = compute_until([&] { return ran.load() == 4; });
      g.wait();
    });
    ASSERT_TRUE(seen) << "round " << round << ": " << ran.load() << " of 4 tasks ran while their spawner computed";
  }
}

TEST_P(Stranded, KeptDataflowTasksRunWhileTheirWorkerComputes) {
  mote::runtime rt(options());
  for (int round = 0; round < 10; ++round) {
    std::atomic<int> ran{0};
    bool seen = true;
    rt.run([&] {
      mote::dataflow df;
      df.set_locality(mote::dataflow_locality::keep);
      int x = 0;
      int y = 0;
      // A's end readies the five readers of x on the worker that ran A: one
      // runs next there, the others are kept for that worker. The one that
      // runs next computes until the kept ones have run elsewhere (and a
      // reader of y that waits for all five keeps the scope's order honest).
      df.spawn(mote::out(x), [&] { x = 1; });
      for (int i = 0; i < 5; ++i) {
        df.spawn(mote::in(x), mote::concurrent(y), [&] {
          if (ran.fetch_add(1) == 0) {
            if (!compute_until([&] { return ran.load() == 5; })) seen = false;
          }
        });
      }
      df.spawn(mote::in(y), [&] { EXPECT_EQ(ran.load(), 5); });
      df.wait();
    });
    ASSERT_TRUE(seen) << "round " << round << ": kept tasks waited for their worker";
  }
}

TEST_P(Stranded, TasksOfAWorkerBlockedOnALockRun) {
  mote::runtime rt(options());
  for (int round = 0; round < 10; ++round) {
    mote::ticket_lock lock;
    lock.lock();  // held by this thread until the tasks have run
    std::atomic<int> ran{0};
    std::atomic<bool> blocking{false};
    std::thread holder([&] {
      while (!blocking.load()) std::this_thread::yield();
      EXPECT_TRUE(compute_until([&] { return ran.load() == 4; }))
          << "round " << round << ": the tasks of a worker blocked on a lock did not run";
      lock.unlock();
    });
    rt.run([&] {
      mote::task_group g;
      for (int i = 0; i < 4; ++i) g.spawn([&] { ran.fetch_add(1); });
      blocking.store(true);
      lock.lock();  // a wait that runs no tasks
      lock.unlock();
      g.wait();
    });
    holder.join();
    ASSERT_EQ(ran.load(), 4);
  }
}

TEST_P(Stranded, TasksOfASleepingWorkerRun) {
  mote::runtime rt(options());
  for (int round = 0; round < 5; ++round) {
    std::atomic<int> ran{0};
    bool seen = false;
    rt.run([&] {
      mote::task_group g;
      for (int i = 0; i < 4; ++i) g.spawn([&] { ran.fetch_add(1); });
      // A sleep outside mote (no wait of mote's to publish anything).
      const auto end = clock_type::now() + kDeadline;
      while (ran.load() != 4 && clock_type::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      seen = ran.load() == 4;
      g.wait();
    });
    ASSERT_TRUE(seen) << "round " << round << ": the tasks of a sleeping worker waited for it";
  }
}

// Join's own wait: a thief that runs a stolen branch which holds private
// tasks of its own and then computes must not keep them from the worker
// waiting for that branch.
TEST_P(Stranded, AWaitingJoinTakesItsThiefsPrivateTasks) {
  mote::runtime rt(options());
  for (int round = 0; round < 10; ++round) {
    std::atomic<int> ran{0};
    std::atomic<bool> spawned{false};
    bool seen = true;
    rt.run([&] {
      mote::join(
          // Keeps its worker until the other branch, stolen, has spawned;
          // then this worker waits in the join for that branch.
          [&] { compute_until([&] { return spawned.load(); }); },
          [&] {
            mote::task_group g;
            for (int i = 0; i < 4; ++i) g.spawn([&] { ran.fetch_add(1); });
            spawned.store(true);
            if (!compute_until([&] { return ran.load() == 4; })) seen = false;
            g.wait();
          });
    });
    ASSERT_TRUE(seen) << "round " << round;
  }
}

// A worker that waits for a group it does not own (here, a group of another
// runtime, made outside any worker) keeps taking its own runtime's new work:
// here that work is what the group's task waits for.
TEST_P(Stranded, AWorkerWaitingForAnotherRuntimesGroupTakesNewWork) {
  // Each runtime's worker on a CPU of its own where there are two, so that
  // neither gives its CPU to the other's busy task when it yields.
  mote::runtime_options oa = mote_test::workers(1, GetParam());
  mote::runtime_options ob = mote_test::workers(1, GetParam());
  if (std::thread::hardware_concurrency() >= 2) {
    oa.bind = mote::binding::parse("0", "test");
    ob.bind = mote::binding::parse("1", "test");
  }
  mote::runtime a(oa);
  mote::runtime b(ob);
  for (int round = 0; round < 5; ++round) {
    std::atomic<bool> flag{false};
    std::atomic<bool> waiting{false};
    bool seen = false;
    mote::task_group g(b);  // no owner: made by a thread that is no worker
    g.spawn([&] { seen = compute_until([&] { return flag.load(); }); });
    mote::task_group h(a);
    h.spawn([&] {
      waiting.store(true);
      g.wait();  // on a's only worker
    });
    while (!waiting.load()) std::this_thread::yield();
    // Widens the window in which a's worker sleeps in that wait (the test
    // holds without it).
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    mote::task_group h2(a);
    h2.spawn([&] { flag.store(true); });
    h2.wait();
    h.wait();
    ASSERT_TRUE(seen) << "round " << round << ": the waiting worker left its runtime's new work alone";
  }
}

INSTANTIATE_TEST_SUITE_P(SpinWindows, Stranded,
                         ::testing::Values(std::chrono::microseconds(0), std::chrono::microseconds(20),
                                           std::chrono::microseconds(100)));

}  // namespace
