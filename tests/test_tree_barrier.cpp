// mote::tree_barrier (include/mote/tree_barrier.hpp): no thread leaves
// barrier k before every thread has arrived at it, and what each wrote before
// is visible after (plain data, which ThreadSanitizer checks too), for teams
// of 1 to 9 and 17 threads, thousands of barriers back to back, random
// arrival delays, more threads than CPUs, waiters that always sleep; poll()
// running tasks while the root holds the release until they are all done
// (sums checked against the serial answer); a ready() that turns true late;
// notify_waiters() waking sleepers that have work; an idle waiter that
// sleeps instead of spinning. Every test runs under a hang guard: a lost
// wake-up fails it instead of hanging.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mote/error.hpp"
#include "mote/tree_barrier.hpp"
#include "test_util.hpp"

namespace {

using mote_test::scaled;
using namespace std::chrono_literals;

// The first two CPUs this process may run on (one when it has only one):
// teams pinned there are oversubscribed on any machine.
std::vector<int> two_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

void pin_self(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// Runs body(id) on n threads, ids 0..n-1, under a hang guard; with `pin`,
// the threads share the first two CPUs.
template <class Body>
void run_team(std::size_t n, const std::string& what, Body body, bool pin = false) {
  mote_test::hang_guard guard(what);
  const std::vector<int> cpus = pin ? two_cpus() : std::vector<int>{};
  std::vector<std::thread> team;
  team.reserve(n);
  for (std::size_t id = 0; id < n; ++id) {
    team.emplace_back([&, id] {
      if (!cpus.empty()) pin_self(cpus[id % cpus.size()]);
      body(id);
    });
  }
  for (auto& t : team) t.join();
}

// What each thread writes before barrier k and checks after it. `slots` are
// plain words: only the barrier orders them (a thread reads slot k&1 of the
// others after barrier k, and they write it again only after barrier k+1,
// which waits for this thread). `latest` is atomic: after barrier k every
// thread has written k, and none can have written more than k+1.
struct phase_board {
  explicit phase_board(std::size_t n) : slots{std::vector<std::uint64_t>(n), std::vector<std::uint64_t>(n)}, latest(n) {}

  void arrive(std::size_t id, std::uint64_t k) {
    slots[k & 1][id] = k;
    latest[id].store(k, std::memory_order_relaxed);
  }
  // After barrier k: counts what is wrong.
  void check(std::uint64_t k) {
    for (std::size_t j = 0; j < latest.size(); ++j) {
      if (slots[k & 1][j] != k) errors.fetch_add(1, std::memory_order_relaxed);
      const std::uint64_t l = latest[j].load(std::memory_order_relaxed);
      if (l < k || l > k + 1) errors.fetch_add(1, std::memory_order_relaxed);
    }
  }

  std::vector<std::uint64_t> slots[2];
  std::vector<std::atomic<std::uint64_t>> latest;
  std::atomic<long> errors{0};
};

// `phases` barriers back to back on n threads; `delay` (may do nothing) runs
// before each arrival.
template <class Delay>
long run_phases(std::size_t n, long phases, std::chrono::nanoseconds spin, bool pin, Delay delay) {
  mote::tree_barrier barrier(n, spin);
  EXPECT_EQ(barrier.size(), n);
  phase_board board(n);
  run_team(
      n, "a team of " + std::to_string(n) + " in " + std::to_string(phases) + " barriers",
      [&](std::size_t id) {
        std::mt19937_64 rng(mote_test::test_seed() + id);
        for (long k = 1; k <= phases; ++k) {
          delay(rng);
          board.arrive(id, static_cast<std::uint64_t>(k));
          barrier.wait(id);
          board.check(static_cast<std::uint64_t>(k));
        }
      },
      pin);
  return board.errors.load();
}

void no_delay(std::mt19937_64&) {}

// Crowded or not, from the CPUs the team may use: the count given, else the
// constructing thread's mask. A thread pinned to one CPU that builds a
// barrier for a team spread over more passes their count (the OpenMP
// team's primary thread does: tests/test_omp_team.cpp).
TEST(TreeBarrier, CrowdedCountsTheCpusGivenElseTheBuildersMask) {
  EXPECT_TRUE(mote::tree_barrier(3, mote::tree_barrier::default_spin, 2).crowded());
  EXPECT_FALSE(mote::tree_barrier(2, mote::tree_barrier::default_spin, 2).crowded());
  EXPECT_FALSE(mote::tree_barrier(1, mote::tree_barrier::default_spin, 1).crowded());
  std::thread([] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(two_cpus().front(), &one);
    ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
    EXPECT_TRUE(mote::tree_barrier(2).crowded());
    EXPECT_FALSE(mote::tree_barrier(1).crowded());
    EXPECT_FALSE(mote::tree_barrier(2, mote::tree_barrier::default_spin, 2).crowded());
  }).join();
}

TEST(TreeBarrier, ZeroThreadsIsRefused) { EXPECT_THROW(mote::tree_barrier(0), mote::usage_error); }

// An id outside the team is misuse that wait() (noexcept) reports with one
// line naming the id and the team's size, then aborts; in every form of the
// wait, and for ids just past the end and far past it.
TEST(TreeBarrierDeathTest, AnIdOutsideTheTeamAbortsNamingItAndTheSize) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        mote::tree_barrier barrier(3);
        barrier.wait(3);
      },
      "mote::tree_barrier::wait: id 3 is out of range for a team of 3 threads");
  EXPECT_DEATH(
      {
        mote::tree_barrier barrier(1);
        barrier.wait(1000000, [] { return false; });
      },
      "mote::tree_barrier::wait: id 1000000 is out of range for a team of 1 threads");
  EXPECT_DEATH(
      {
        mote::tree_barrier barrier(5);
        barrier.wait(
            static_cast<std::size_t>(-1), [] { return false; }, [] { return true; });
      },
      "mote::tree_barrier::wait: id 18446744073709551615 is out of range for a team of 5 threads");
}

// Every size from one thread (the root alone) to two levels under it.
TEST(TreeBarrier, PhasesHoldForEverySize) {
  for (std::size_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 17}) {
    // More threads than CPUs pass each barrier only as fast as they are
    // scheduled: fewer barriers for the larger teams.
    const long phases = scaled(n <= 4 ? 5000 : 1500, 5);
    EXPECT_EQ(run_phases(n, phases, mote::tree_barrier::default_spin, false, no_delay), 0) << n << " threads";
  }
}

// Waiters that sleep at once: every wait that does not find its condition
// at the first look goes through the event count.
TEST(TreeBarrier, PhasesHoldWhenEveryWaitSleeps) {
  for (std::size_t n : {2, 3, 5, 9, 17}) {
    EXPECT_EQ(run_phases(n, scaled(1000, 5), 0ns, false, no_delay), 0) << n << " threads";
  }
}

// Arrivals in every order: before each barrier a thread may spin or sleep a
// random while.
TEST(TreeBarrier, PhasesHoldWithRandomDelays) {
  auto delay = [](std::mt19937_64& rng) {
    const unsigned r = static_cast<unsigned>(rng() % 16);
    if (r < 8) return;  // no delay: the common case back to back
    if (r < 14) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(rng() % 30);
      while (std::chrono::steady_clock::now() < until) {
      }
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
  };
  for (std::size_t n : {2, 4, 5, 9, 17}) {
    for (const auto spin : {mote::tree_barrier::default_spin, std::chrono::nanoseconds(2'000), 0ns}) {
      EXPECT_EQ(run_phases(n, scaled(400, 4), spin, false, delay), 0) << n << " threads, spin " << spin.count();
    }
  }
}

// 8 and 16 threads on two CPUs: a waiter spins while the thread it waits for
// may need its CPU; the barrier must finish all the same, spinning (with the
// spin policy's yields) or sleeping at once.
TEST(TreeBarrier, OversubscribedTeamsFinish) {
  for (std::size_t n : {8, 16}) {
    for (const auto spin : {mote::tree_barrier::default_spin, 0ns}) {
      EXPECT_EQ(run_phases(n, scaled(1000, 10), spin, true, no_delay), 0) << n << " threads, spin " << spin.count();
    }
  }
}

// ---- poll() and ready(): a team's tasks run inside the barrier ---------------

// A shared pool of tasks, each belonging to a barrier: a task (k, v) with
// v >= 2 makes the tasks (k, v-1) and (k, v-2); one with v < 2 adds v to its
// barrier's sum. A root task (k, v) so sums fib(v). `outstanding` counts the
// tasks made and not finished (children are counted before their parent
// finishes), so it is 0 only when every task of the team is done.
struct task_pool {
  struct task {
    std::uint32_t phase;
    int v;
  };

  task_pool(mote::tree_barrier& b, long phases) : barrier(b), sums(static_cast<std::size_t>(phases) + 1) {}

  void push(task t) {
    outstanding.fetch_add(1, std::memory_order_seq_cst);
    {
      std::lock_guard<std::mutex> hold(mutex);
      tasks.push_back(t);
    }
    barrier.notify_waiters();  // a sleeper may run it
  }

  // poll(): runs one task. True when it did.
  bool run_one() {
    task t{};
    {
      std::lock_guard<std::mutex> hold(mutex);
      if (tasks.empty()) return false;
      t = tasks.back();
      tasks.pop_back();
    }
    if (t.v < 2) {
      sums[t.phase].fetch_add(t.v, std::memory_order_relaxed);
    } else {
      push({t.phase, t.v - 1});
      push({t.phase, t.v - 2});
    }
    ran.fetch_add(1, std::memory_order_relaxed);
    // The last task done makes ready() true: the root may sleep on it.
    if (outstanding.fetch_sub(1, std::memory_order_acq_rel) == 1) barrier.notify_waiters();
    return true;
  }

  // ready(): every task made so far is done. Acquire: pairs with the
  // fetch_sub of the last one, so every sum is complete when it is true.
  bool all_done() const { return outstanding.load(std::memory_order_acquire) == 0; }

  mote::tree_barrier& barrier;
  std::mutex mutex;
  std::deque<task> tasks;
  std::atomic<long> outstanding{0};
  std::atomic<long> ran{0};
  std::vector<std::atomic<long>> sums;
};

// Each thread makes a tree of tasks before each barrier and then waits,
// running tasks; the root holds the release until all are done. After the
// barrier every sum must be the serial answer, so no thread left while a
// task of that barrier was still to run.
TEST(TreeBarrier, PollRunsTasksAndReadyHoldsTheRelease) {
  for (std::size_t n : {1, 2, 3, 5, 9}) {
    for (const auto spin : {mote::tree_barrier::default_spin, 0ns}) {
      const long phases = scaled(200, 5);
      mote::tree_barrier barrier(n, spin);
      task_pool pool(barrier, phases);
      auto root_value = [](std::size_t id, long k) { return 6 + static_cast<int>((id + static_cast<std::size_t>(k)) % 7); };
      std::vector<long> expected(static_cast<std::size_t>(phases) + 1, 0);
      for (long k = 1; k <= phases; ++k) {
        for (std::size_t id = 0; id < n; ++id) expected[static_cast<std::size_t>(k)] += mote_test::serial_fib(root_value(id, k));
      }
      std::atomic<long> errors{0};
      run_team(n, "a team running tasks in its barriers", [&](std::size_t id) {
        for (long k = 1; k <= phases; ++k) {
          pool.push({static_cast<std::uint32_t>(k), root_value(id, k)});
          barrier.wait(id, [&] { return pool.run_one(); }, [&] { return pool.all_done(); });
          if (pool.sums[static_cast<std::size_t>(k)].load(std::memory_order_relaxed) != expected[static_cast<std::size_t>(k)]) {
            errors.fetch_add(1, std::memory_order_relaxed);
          }
        }
      });
      EXPECT_EQ(errors.load(), 0) << n << " threads, spin " << spin.count();
      EXPECT_EQ(pool.outstanding.load(), 0);
      EXPECT_TRUE(pool.tasks.empty());
    }
  }
}

// ready() turns true a while after every thread has arrived and polled,
// set by a thread outside the team, which then calls notify_waiters(): no
// thread may leave before, and the root, which may be asleep on ready(),
// must wake.
TEST(TreeBarrier, ReadyTurnsTrueLate) {
  for (std::size_t n : {1, 2, 4, 6}) {
    for (const auto spin : {mote::tree_barrier::default_spin, 0ns}) {
      const long phases = scaled(20, 2);
      mote::tree_barrier barrier(n, spin);
      std::atomic<long> go{0};  // the last barrier whose ready() is true
      std::vector<std::atomic<long>> polled(n);  // the last barrier each thread polled in
      std::atomic<long> errors{0};
      std::atomic<bool> finished{false};
      mote_test::hang_guard guard("ready() that turns true late");
      std::thread setter([&] {
        for (long k = 1; k <= phases; ++k) {
          // Every thread but the root is held in barrier k, polling: wait
          // until each has polled there. (The root may be past its poll and
          // asleep on ready().)
          for (std::size_t id = 1; id < n; ++id) {
            while (polled[id].load(std::memory_order_acquire) < k) std::this_thread::yield();
          }
          std::this_thread::sleep_for(1ms);
          go.store(k, std::memory_order_release);
          barrier.notify_waiters();
        }
        finished.store(true);
      });
      run_team(n, "a team held by a late ready()", [&](std::size_t id) {
        for (long k = 1; k <= phases; ++k) {
          barrier.wait(
              id,
              [&] {
                polled[id].store(k, std::memory_order_release);
                return false;
              },
              [&] { return go.load(std::memory_order_acquire) >= k; });
          if (go.load(std::memory_order_acquire) < k) errors.fetch_add(1, std::memory_order_relaxed);
        }
      });
      setter.join();
      EXPECT_TRUE(finished.load());
      EXPECT_EQ(errors.load(), 0) << n << " threads, spin " << spin.count();
    }
  }
}

// Waiters asleep in the barrier (spin 0) get work only notify_waiters() tells
// them of: before it arrives, one thread (a different one each barrier)
// puts an item in every other thread's own mailbox, which only its owner's
// poll() takes, and waits until all are taken. A lost wake-up leaves an
// owner asleep and the hang guard ends the test.
TEST(TreeBarrier, NotifyWaitersWakesSleepersWithWork) {
  for (std::size_t n : {2, 3, 5, 8}) {
    const long phases = scaled(300, 5);
    mote::tree_barrier barrier(n, 0ns);
    std::vector<std::atomic<int>> mailbox(n);
    std::vector<std::atomic<long>> taken(n);
    run_team(n, "sleepers woken for their work", [&](std::size_t id) {
      std::mt19937_64 rng(mote_test::test_seed() + id);
      for (long k = 1; k <= phases; ++k) {
        if (static_cast<std::size_t>(k) % n == id) {
          std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
          for (std::size_t j = 0; j < n; ++j) {
            if (j != id) mailbox[j].store(1, std::memory_order_release);
          }
          barrier.notify_waiters();
          for (std::size_t j = 0; j < n; ++j) {
            while (j != id && mailbox[j].load(std::memory_order_acquire) != 0) std::this_thread::yield();
          }
        }
        barrier.wait(id, [&] {
          if (mailbox[id].exchange(0, std::memory_order_acq_rel) == 0) return false;
          taken[id].fetch_add(1, std::memory_order_relaxed);
          return true;
        });
      }
    });
    // Each thread took one item in every barrier but its own turns.
    for (std::size_t id = 0; id < n; ++id) {
      long turns = 0;
      for (long k = 1; k <= phases; ++k) turns += static_cast<std::size_t>(k) % n == id ? 1 : 0;
      EXPECT_EQ(taken[id].load(), phases - turns) << "thread " << id << " of " << n;
    }
  }
}

// The same wake-up hunted at close range: thread 0 lets thread 1 into the
// barrier (where, with spin 0, it goes from its first poll() straight to its
// last look and its sleep) and, a random few hundred nanoseconds to
// microseconds later, gives it work and notifies. Over thousands of rounds
// the notify meets every step of the sleep: during a poll() that has looked
// and found nothing (the last look must find the work), between the
// announcement and the sleep (the commit must fail), during the sleep (the
// futex wake). A wake-up lost in any of them leaves thread 1 asleep with its
// work, thread 0 waiting for it, and the hang guard ends the test.
TEST(TreeBarrier, NotifyWaitersMeetsTheSleepInEveryOrder) {
  const long rounds = scaled(5000, 5);
  mote::tree_barrier barrier(2, 0ns);
  std::atomic<long> at_gate{0};  // the round thread 1 waits to enter
  std::atomic<long> go{0};       // the round thread 1 may enter
  std::atomic<int> mailbox{0};
  long taken = 0;  // thread 1's own count, read after the join
  run_team(2, "a notify meeting a sleep", [&](std::size_t id) {
    std::mt19937_64 rng(mote_test::test_seed() + id);
    // Pauses, not yields, while the two meet: a yield takes longer than the
    // steps to meet. One yield in 256 looks, for a CPU shared by both.
    auto await = [](auto&& done) {
      for (unsigned looks = 1; !done(); ++looks) {
        mote::detail::cpu_pause();
        if (looks % 256 == 0) std::this_thread::yield();
      }
    };
    for (long k = 1; k <= rounds; ++k) {
      if (id == 1) {
        at_gate.store(k, std::memory_order_release);
        await([&] { return go.load(std::memory_order_acquire) >= k; });
        barrier.wait(1, [&] {
          if (mailbox.exchange(0, std::memory_order_acq_rel) == 0) {
            // A poll takes a while after its look (a real one tries other
            // places): work that comes meanwhile is found by the barrier's
            // last look, or its wake-up.
            for (unsigned spin = static_cast<unsigned>(rng() % 32); spin > 0; --spin) mote::detail::cpu_pause();
            return false;
          }
          ++taken;
          return true;
        });
        continue;
      }
      // Both spin now (thread 1 may still be waking from the last barrier):
      // thread 1 sees the gate open a few hundred nanoseconds later.
      await([&] { return at_gate.load(std::memory_order_acquire) >= k; });
      // Both spin now (thread 1 may still be waking from the last barrier):
      // thread 1 sees the gate open a few hundred nanoseconds later.
      await([&] { return at_gate.load(std::memory_order_acquire) >= k; });
      go.store(k, std::memory_order_release);
      // Half the rounds close to thread 1's first poll, half spread over its
      // announcement, membarrier and sleep.
      const unsigned range = (k & 1) != 0 ? 64 : 512;
      for (unsigned spin = static_cast<unsigned>(rng() % range); spin > 0; --spin) mote::detail::cpu_pause();
      mailbox.store(1, std::memory_order_release);
      barrier.notify_waiters();
      await([&] { return mailbox.load(std::memory_order_acquire) == 0; });
      barrier.wait(0);
    }
      },
      /*pin=*/true);  // on two CPUs: the meeting needs both running
  EXPECT_EQ(taken, rounds);
}

// A team waiting for a late thread sleeps: each waiter blocks (the kernel
// counts a voluntary switch, which a spin or a yield does not) during a wait
// far longer than its spin window.
TEST(TreeBarrier, IdleWaitersSleep) {
  constexpr std::size_t n = 4;
  mote::tree_barrier barrier(n);  // the default spin window, 100 us
  std::vector<long> blocked(n, -2);
  run_team(n, "a team waiting for a late thread", [&](std::size_t id) {
    if (id == n - 1) {
      std::this_thread::sleep_for(300ms);
      barrier.wait(id);
      return;
    }
    const long tid = mote_test::this_thread_id();
    const long before = mote_test::voluntary_switches(tid);
    barrier.wait(id);
    const long after = mote_test::voluntary_switches(tid);
    blocked[id] = before < 0 || after < 0 ? -1 : after - before;
  });
  for (std::size_t id = 0; id + 1 < n; ++id) {
    if (blocked[id] == -1) GTEST_SKIP() << "/proc does not count context switches here";
    EXPECT_GE(blocked[id], 1) << "thread " << id << " never slept in a 300 ms wait";
  }
}

}  // namespace
