// mote::runtime: options and environment, create/destroy cycles, concurrent
// runtimes, callers from outside, exceptions through run(), and parking.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mote/mote.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;

using mote_test::fib;

using mote_test::workers;

using mote_test::scoped_env;

TEST(Runtime, OptionsAreHonoured) {
  mote::runtime rt(workers(3, 75us));
  EXPECT_EQ(rt.num_workers(), 3u);
  EXPECT_EQ(rt.spin(), 75us);
  EXPECT_EQ(rt.worker_cpus().size(), 3u);
  std::vector<std::atomic<int>> seen(3);
  // Every worker index is valid and the calling thread is not a worker.
  EXPECT_EQ(mote::runtime::current_worker_index(), -1);
  rt.run([&] {
    mote::task_group g;
    for (int i = 0; i < 1000; ++i) {
      g.spawn([&] {
        const int w = mote::runtime::current_worker_index();
        ASSERT_GE(w, 0);
        ASSERT_LT(w, 3);
        seen[static_cast<std::size_t>(w)].fetch_add(1);
        EXPECT_EQ(mote::runtime::current(), &rt);
      });
    }
    g.wait();
  });
}

TEST(Runtime, EnvironmentIsReadAndBadValuesNamed) {
  {
    scoped_env threads("MOTE_NUM_THREADS", "3");
    scoped_env spin("MOTE_SPIN_US", "10");
    mote::runtime rt;
    EXPECT_EQ(rt.num_workers(), 3u);
    EXPECT_EQ(rt.spin(), 10us);
  }
  {
    scoped_env threads("MOTE_NUM_THREADS", "three");
    try {
      mote::runtime rt;
      FAIL() << "accepted MOTE_NUM_THREADS=three";
    } catch (const mote::config_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("MOTE_NUM_THREADS"), std::string::npos) << what;
      EXPECT_NE(what.find("three"), std::string::npos) << what;
    }
  }
  {
    scoped_env bind("MOTE_BIND", "0,99999");
    EXPECT_THROW(mote::runtime rt, mote::config_error);
  }
  {
    scoped_env spin("MOTE_SPIN_US", "-4");
    EXPECT_THROW(mote::runtime rt, mote::config_error);
  }
  {
    // Explicit options win over the environment.
    scoped_env threads("MOTE_NUM_THREADS", "garbage");
    mote::runtime rt(workers(2));
    EXPECT_EQ(rt.num_workers(), 2u);
  }
}

TEST(Runtime, CreateUseDestroyManyTimes) {
  const int cycles = mote_test::kSanitized ? 20 : 100;
  for (int i = 0; i < cycles; ++i) {
    mote::runtime rt(workers(1 + static_cast<unsigned>(i % 4)));
    EXPECT_EQ(rt.run([] { return fib(12); }), mote_test::serial_fib(12));
  }
}

TEST(Runtime, CreateAndDestroyWithoutWork) {
  for (int i = 0; i < 50; ++i) mote::runtime rt(workers(1 + static_cast<unsigned>(i % 3)));
}

TEST(Runtime, DestroyWhileWorkersSleep) {
  mote::runtime rt(workers(4, 1us));
  EXPECT_EQ(rt.run([] { return fib(10); }), 55);
  std::this_thread::sleep_for(20ms);  // far past the spin window: all parked
  // The destructor must wake and join them (the test would hang otherwise).
}

TEST(Runtime, SeveralRuntimesAtOnce) {
  mote::runtime a(workers(2));
  mote::runtime b(workers(3));
  std::thread ta([&] { for (int i = 0; i < 20; ++i) EXPECT_EQ(a.run([] { return fib(14); }), 377); });
  std::thread tb([&] { for (int i = 0; i < 20; ++i) EXPECT_EQ(b.run([] { return fib(14); }), 377); });
  ta.join();
  tb.join();
  // A worker of one runtime calling into another waits for it like any thread.
  EXPECT_EQ(a.run([&] { return b.run([] { return fib(10); }); }), 55);
}

TEST(Runtime, RunPropagatesExceptionsAndValues) {
  mote::runtime rt(workers(2));
  EXPECT_EQ(rt.run([] { return std::string("value"); }), "value");
  int side = 0;
  rt.run([&] { side = 1; });
  EXPECT_EQ(side, 1);
  EXPECT_THROW(rt.run([] { throw std::out_of_range("x"); }), std::out_of_range);
  EXPECT_EQ(rt.run([] { return fib(10); }), 55);  // still healthy
}

TEST(Runtime, ManyOutsideThreadsAtOnce) {
  mote::runtime rt(workers(2));
  std::vector<std::thread> ts;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 16; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        if (rt.run([&] { return fib(10 + (t + i) % 6); }) != mote_test::serial_fib(10 + (t + i) % 6)) {
          wrong.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Functional check of parking (not a speed check): idle workers that kept
// spinning would use ~1 CPU second each over the second below; parked ones
// use next to nothing. The bound is 25x above what a parked runtime uses.
TEST(Runtime, IdleWorkersPark) {
  if (mote_test::kSanitized) GTEST_SKIP() << "sanitizer runtimes add their own background threads";
  mote::runtime rt(workers(2, 100us));
  EXPECT_EQ(rt.run([] { return fib(15); }), 610);
  std::this_thread::sleep_for(50ms);
  const double before = process_cpu_seconds();
  std::this_thread::sleep_for(1s);
  const double used = process_cpu_seconds() - before;
  EXPECT_LT(used, 0.25) << "idle runtime used " << used << " CPU seconds in 1 s";
  // And it wakes up for new work.
  EXPECT_EQ(rt.run([] { return fib(15); }), 610);
}

// A worker of A calls B.run(f), and f calls back into A. A has one worker,
// the one waiting in B.run: it keeps running A's tasks while it waits, so the
// call back runs. (It used to block without helping: a deadlock.) A deadline
// turns a regression into a failure instead of a hang.
TEST(Runtime, CallIntoAnotherRuntimeAndBack) {
  mote::runtime a(workers(1));
  mote::runtime b(workers(1));
  std::atomic<bool> done{false};
  long result = 0;
  std::thread caller([&] {
    result = a.run([&] {
      return b.run([&] { return a.run([] { return fib(15); }) + 1; });
    });
    done.store(true);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(done.load()) << "A's only worker, waiting in B.run, did not run A's task";
  caller.join();
  EXPECT_EQ(result, mote_test::serial_fib(15) + 1);
}

// A burst of run() calls from as many threads as there are workers, each
// task waiting until all of them run at once: it completes only if every
// parked worker is woken (one wake-up per submission, none spent on a worker
// that is already waking, and a worker that takes one of several queued
// tasks passing the wake-up on). Workers park before each burst (spin 0).
TEST(Runtime, BurstOfRunCallsWakesEveryWorker) {
  constexpr unsigned kWorkers = 4;
  mote::runtime rt(workers(kWorkers, 0us));
  const int bursts = mote_test::kSanitized ? 5 : 40;
  for (int burst = 0; burst < bursts; ++burst) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let the workers park
    std::atomic<unsigned> arrived{0};
    std::atomic<int> stuck{0};
    std::vector<std::thread> callers;
    for (unsigned i = 0; i < kWorkers; ++i) {
      callers.emplace_back([&] {
        rt.run([&] {
          arrived.fetch_add(1);
          // A deadline, so that a lost wake-up fails the test instead of
          // hanging it.
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
          while (arrived.load() < kWorkers) {
            if (std::chrono::steady_clock::now() > deadline) {
              stuck.fetch_add(1);
              return;
            }
            std::this_thread::yield();
          }
        });
      });
    }
    for (auto& c : callers) c.join();
    ASSERT_EQ(stuck.load(), 0) << "burst " << burst << ": a worker was never woken";
  }
}

}  // namespace
