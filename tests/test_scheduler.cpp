// The scheduler policy seam and scheduler_policy::delegation: MOTE_SCHEDULER
// parsing, the delegation scheduler driven directly (a full add-queue never
// drops a task; every task is taken exactly once by concurrent producers and
// consumers), and task groups, joins and outside spawns on runtimes that use
// it, oversubscribed too, with idle workers parking. Nothing here asserts a
// speed: waits for an event have generous deadlines so that a lost wake-up
// fails instead of hanging.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mote/mote.hpp"
#include "core/config.hpp"
#include "core/runtime_impl.hpp"
#include "scheduler/delegation.hpp"
#include "test_util.hpp"

namespace {

using mote::config_error;
using mote::scheduler_policy;
using mote::detail::delegation_scheduler;
using mote::detail::resolve_config;
using mote::detail::task;
using mote_test::scaled;
using mote_test::scoped_env;

constexpr auto kDeadline = std::chrono::seconds(120);

mote::runtime_options delegating(unsigned n, std::chrono::microseconds spin = std::chrono::microseconds(20)) {
  mote::runtime_options o = mote_test::workers(n, spin);
  o.scheduler = scheduler_policy::delegation;
  return o;
}

// Spins (yielding) until pred() holds; false when the deadline passed first.
template <class P>
bool eventually(P pred) {
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// ---- MOTE_SCHEDULER ---------------------------------------------------------

scheduler_policy resolved_policy(const mote::runtime_options& o = {}) {
  return resolve_config(o, mote::topology::system()).policy;
}

TEST(SchedulerConfig, EnvironmentValues) {
  {
    scoped_env e("MOTE_SCHEDULER", nullptr);
    EXPECT_EQ(resolved_policy(), scheduler_policy::work_stealing);
  }
  {
    scoped_env e("MOTE_SCHEDULER", "steal");
    EXPECT_EQ(resolved_policy(), scheduler_policy::work_stealing);
  }
  {
    scoped_env e("MOTE_SCHEDULER", "delegation");
    EXPECT_EQ(resolved_policy(), scheduler_policy::delegation);
  }
  {
    scoped_env e("MOTE_SCHEDULER", "  Delegation\t");
    EXPECT_EQ(resolved_policy(), scheduler_policy::delegation);
  }
  {
    scoped_env e("MOTE_SCHEDULER", "STEAL");
    EXPECT_EQ(resolved_policy(), scheduler_policy::work_stealing);
  }
  {
    scoped_env e("MOTE_SCHEDULER", " ");  // blank: the default, like the other variables
    EXPECT_EQ(resolved_policy(), scheduler_policy::work_stealing);
  }
}

TEST(SchedulerConfig, BadValueNamesTheVariableAndTheValue) {
  for (const char* bad : {"fifo", "stealing", "delegation2", "1"}) {
    scoped_env e("MOTE_SCHEDULER", bad);
    try {
      (void)resolved_policy();
      ADD_FAILURE() << "accepted MOTE_SCHEDULER=" << bad;
    } catch (const config_error& err) {
      const std::string what = err.what();
      EXPECT_NE(what.find("MOTE_SCHEDULER"), std::string::npos) << what;
      EXPECT_NE(what.find(std::string("'") + bad + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("steal or delegation"), std::string::npos) << what;
    }
    // And a runtime created from the environment says the same.
    EXPECT_THROW(mote::runtime rt(mote_test::workers(1)), config_error);
  }
}

TEST(SchedulerConfig, AnOptionWinsOverTheEnvironment) {
  {
    scoped_env e("MOTE_SCHEDULER", "delegation");
    mote::runtime_options o;
    o.scheduler = scheduler_policy::work_stealing;
    EXPECT_EQ(resolved_policy(o), scheduler_policy::work_stealing);
  }
  {
    scoped_env e("MOTE_SCHEDULER", "fifo");  // not even read
    mote::runtime_options o;
    o.scheduler = scheduler_policy::delegation;
    EXPECT_EQ(resolved_policy(o), scheduler_policy::delegation);
  }
  mote::runtime_options o;
  o.scheduler = static_cast<scheduler_policy>(7);
  try {
    (void)resolved_policy(o);
    ADD_FAILURE() << "accepted scheduler_policy 7";
  } catch (const config_error& err) {
    EXPECT_NE(std::string(err.what()).find("runtime_options::scheduler"), std::string::npos) << err.what();
  }
}

// Two NUMA nodes of two cores each: workers get their CPU's node; unpinned
// workers are spread round the nodes.
TEST(SchedulerConfig, WorkersKnowTheirNode) {
  mote::topology t;
  for (int cpu = 0; cpu < 4; ++cpu) {
    mote::cpu_info c;
    c.os_index = cpu;
    c.core = cpu;
    c.numa_node = cpu / 2;
    t.cpus.push_back(c);
  }
  t.num_cores = 4;
  t.num_packages = 1;
  t.num_numa_nodes = 2;
  mote::runtime_options o;
  o.num_workers = 6;
  o.bind = mote::binding::parse("3,2,1,0");
  auto cfg = resolve_config(o, t);
  EXPECT_EQ(cfg.num_nodes, 2u);
  EXPECT_EQ(cfg.worker_nodes, (std::vector<unsigned>{1, 1, 0, 0, 1, 1}));
  o.bind = mote::binding::parse("none");
  cfg = resolve_config(o, t);
  EXPECT_EQ(cfg.worker_nodes, (std::vector<unsigned>{0, 1, 0, 1, 0, 1}));
}

TEST(SchedulerPolicy, TheWorkersFollowThePolicy) {
  for (scheduler_policy p : {scheduler_policy::work_stealing, scheduler_policy::delegation}) {
    mote::runtime_options o = mote_test::workers(3);
    o.scheduler = p;
    mote::runtime rt(o);
    mote::detail::runtime_impl& impl = mote::detail::runtime_access::impl(rt);
    EXPECT_EQ(impl.config().policy, p);
    EXPECT_EQ(impl.policy().takes_spawns(), p == scheduler_policy::delegation);
    for (unsigned i = 0; i < rt.num_workers(); ++i) {
      EXPECT_EQ(impl.worker_at(i).delegating(), p == scheduler_policy::delegation) << i;
    }
  }
}

// The models attach through their hooks (src/models.cpp): every worker holds
// its loop state, and join's offload model exactly when the runtime is adaptive.
TEST(ModelHooks, EveryWorkerHoldsItsModelsState) {
  for (bool adaptive : {false, true}) {
    mote::runtime_options o = mote_test::workers(3);
    o.adaptive = adaptive;
    mote::runtime rt(o);
    mote::detail::runtime_impl& impl = mote::detail::runtime_access::impl(rt);
    for (unsigned i = 0; i < rt.num_workers(); ++i) {
      const mote::detail::worker& w = impl.worker_at(i);
      ASSERT_NE(w.slot(mote::detail::kLoopsSlot), nullptr) << i;
      EXPECT_EQ(mote::detail::loops_of(w).depth, 0u) << i;
      EXPECT_EQ(w.slot(mote::detail::kAdaptiveSlot) != nullptr, adaptive) << i;
    }
    // A loop runs on them, and its state is back to rest afterwards.
    std::atomic<long> sum{0};
    rt.run([&] { mote::parallel_for(0, 1000, [&](int k) { sum.fetch_add(k, std::memory_order_relaxed); }); });
    EXPECT_EQ(sum.load(), 999L * 1000 / 2);
    for (unsigned i = 0; i < rt.num_workers(); ++i) {
      EXPECT_EQ(mote::detail::loops_of(impl.worker_at(i)).open.load(std::memory_order_relaxed), nullptr) << i;
    }
  }
}

// ---- The delegation scheduler, driven directly ----------------------------

// Fake tasks: only their addresses travel through the scheduler.
std::vector<task> fake_tasks(std::size_t n) { return std::vector<task>(n); }

TEST(DelegationScheduler, FullAddQueuesNeverDropATask) {
  // Two workers on one node; no consumer while 3 queues' worth goes into the
  // node queue and the outside queue each: every producer that finds its
  // queue full drains the add-queues itself.
  delegation_scheduler s({0, 0}, 1);
  const std::size_t n = 3 * delegation_scheduler::kAddQueueCapacity + 17;
  std::vector<task> from_worker = fake_tasks(n);
  std::vector<task> from_outside = fake_tasks(n);
  EXPECT_FALSE(s.maybe_ready());
  EXPECT_FALSE(s.visible());
  for (std::size_t i = 0; i < n; ++i) s.add(&from_worker[i], 1);
  EXPECT_TRUE(s.maybe_ready());
  EXPECT_TRUE(s.visible());
  for (std::size_t i = 0; i < n; ++i) s.add(&from_outside[i], delegation_scheduler::kOutside);
  // FIFO for a caller that is not inside a task: each producer's tasks come
  // out in the order they went in.
  std::size_t next_worker = 0;
  std::size_t next_outside = 0;
  for (std::size_t k = 0; k < 2 * n; ++k) {
    bool more = false;
    task* t = s.get(0, false, &more);
    ASSERT_NE(t, nullptr) << "task " << k << " of " << 2 * n << " lost";
    EXPECT_EQ(more, k + 1 < 2 * n) << k;
    if (next_worker < n && t == &from_worker[next_worker]) {
      ++next_worker;
    } else {
      ASSERT_LT(next_outside, n);
      ASSERT_EQ(t, &from_outside[next_outside]) << "out of order at " << k;
      ++next_outside;
    }
  }
  EXPECT_EQ(next_worker, n);
  EXPECT_EQ(next_outside, n);
  bool more = true;
  EXPECT_EQ(s.get(1, false, &more), nullptr);
  EXPECT_FALSE(more);
  EXPECT_FALSE(s.maybe_ready());
  EXPECT_FALSE(s.visible());
}

TEST(DelegationScheduler, ANestedCallerTakesTheNewest) {
  delegation_scheduler s({0}, 1);
  std::vector<task> t = fake_tasks(3);
  for (task& x : t) s.add(&x, 0);
  bool more = false;
  EXPECT_EQ(s.get(0, true, &more), &t[2]);
  EXPECT_EQ(s.get(0, false, &more), &t[0]);
  EXPECT_EQ(s.get(0, true, &more), &t[1]);
  EXPECT_EQ(s.get(0, false, &more), nullptr);
}

// Producers (as workers of two nodes and as outside threads) and consumers
// (one id each) at once: every task is taken exactly once. Consumers that
// arrive while another holds the lock are served by it or take the lock in
// their turn; the add-queues fill and are drained by producers too.
TEST(DelegationScheduler, ConcurrentProducersAndConsumersTakeEachTaskOnce) {
  const unsigned consumers = 4;
  const unsigned producers = 4;
  delegation_scheduler s({0, 1, 0, 1}, 2);
  const long per_producer = scaled(40000, 8);
  std::vector<task> tasks = fake_tasks(static_cast<std::size_t>(per_producer * producers));
  std::vector<std::atomic<int>> taken(tasks.size());
  std::atomic<long> total{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (unsigned c = 0; c < consumers; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937 rng(c);
      while (total.load(std::memory_order_relaxed) < per_producer * producers) {
        bool more = false;
        task* t = s.get(c, (rng() & 1) != 0, &more);
        if (t == nullptr) {
          std::this_thread::yield();
          continue;
        }
        const auto i = static_cast<std::size_t>(t - tasks.data());
        if (i >= tasks.size() || taken[i].fetch_add(1) != 0) wrong.fetch_add(1);
        total.fetch_add(1);
      }
    });
  }
  for (unsigned p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      // Producers 0 and 1 pose as workers 0 and 1 (nodes 0 and 1); the
      // others as outside threads.
      const unsigned as = p < 2 ? p : delegation_scheduler::kOutside;
      for (long i = 0; i < per_producer; ++i) {
        s.add(&tasks[static_cast<std::size_t>(p * per_producer + i)], as);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(total.load(), per_producer * producers);
  for (std::size_t i = 0; i < taken.size(); ++i) ASSERT_EQ(taken[i].load(), 1) << i;
  EXPECT_FALSE(s.visible());
}

// ---- Runtimes under delegation -----------------------------------------------

// A random tree: each node spawns children into its own group, some into the
// group of its parent (an enclosing frame's group), and joins a pair of
// subtrees now and then. The sum of the values equals the serial walk's.
struct tree {
  std::atomic<long> sum{0};
};

void random_node(mote::task_group* parent, tree& acc, std::uint64_t seed, int depth) {
  std::mt19937_64 rng(seed);
  acc.sum.fetch_add(static_cast<long>(rng() % 1000));
  if (depth == 0) return;
  const int children = static_cast<int>(rng() % 4);
  const int kind = static_cast<int>(rng() % 3);
  if (kind == 0 && depth > 1) {
    const std::uint64_t a = rng();
    const std::uint64_t b = rng();
    mote::join([&] { random_node(parent, acc, a, depth - 1); }, [&] { random_node(parent, acc, b, depth - 1); });
  }
  mote::task_group g;
  for (int c = 0; c < children; ++c) {
    const std::uint64_t child = rng();
    // Into the enclosing group a third of the time: it outlives this frame
    // (its owner waits for it after this task ends).
    const bool up = rng() % 3 == 0;
    mote::task_group* into = parent != nullptr && up ? parent : &g;
    into->spawn([into, &acc, child, depth] { random_node(into, acc, child, depth - 1); });
  }
  g.wait();
}

long random_serial(std::uint64_t seed, int depth) {
  std::mt19937_64 rng(seed);
  long sum = static_cast<long>(rng() % 1000);
  if (depth == 0) return sum;
  const int children = static_cast<int>(rng() % 4);
  const int kind = static_cast<int>(rng() % 3);
  if (kind == 0 && depth > 1) {
    const std::uint64_t a = rng();
    const std::uint64_t b = rng();
    sum += random_serial(a, depth - 1) + random_serial(b, depth - 1);
  }
  for (int c = 0; c < children; ++c) {
    const std::uint64_t child = rng();
    (void)rng();  // the choice of group, as above
    sum += random_serial(child, depth - 1);
  }
  return sum;
}

class DelegationOnWorkers : public ::testing::TestWithParam<unsigned> {};

TEST_P(DelegationOnWorkers, RandomizedGroupsMatchSerial) {
  mote::runtime rt(delegating(GetParam()));
  std::mt19937_64 rng(mote_test::test_seed());
  const int depth = mote_test::kSanitized ? 7 : 10;
  for (long round = 0; round < scaled(12, 4); ++round) {
    const std::uint64_t seed = rng();
    tree acc;
    rt.run([&] {
      mote::task_group root;
      root.spawn([&root, &acc, seed, depth] { random_node(&root, acc, seed, depth); });
      root.wait();
    });
    EXPECT_EQ(acc.sum.load(), random_serial(seed, depth)) << "seed " << seed;
  }
}

// Many tasks of random sizes in one group, each writing its own slot.
TEST_P(DelegationOnWorkers, EveryTaskRunsOnce) {
  mote::runtime rt(delegating(GetParam()));
  const int n = static_cast<int>(scaled(30000));
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  std::mt19937 rng(static_cast<unsigned>(mote_test::test_seed()));
  std::vector<int> work(static_cast<std::size_t>(n));
  for (int& w : work) w = static_cast<int>(rng() % 200);
  rt.run([&] {
    mote::task_group g;
    for (int i = 0; i < n; ++i) {
      g.spawn([&hits, &work, i] {
        volatile int sink = 0;
        for (int k = 0; k < work[static_cast<std::size_t>(i)]; ++k) sink = sink + k;
        hits[static_cast<std::size_t>(i)].fetch_add(1);
      });
    }
    g.wait();
  });
  for (int i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)].load(), 1) << i;
}

// Joins inside group tasks, groups inside join branches.
long fib_in_groups(int n) {
  if (n < 12) return mote_test::fib(n);
  long a = 0;
  long b = 0;
  mote::task_group g;
  g.spawn([&a, n] { a = fib_in_groups(n - 1); });
  auto [c, d] = mote::join([n] { return fib_in_groups(n - 2); }, [] { return 0L; });
  b = c + d;
  g.wait();
  return a + b;
}

TEST_P(DelegationOnWorkers, NestedGroupsAndJoins) {
  mote::runtime rt(delegating(GetParam()));
  const int n = mote_test::kSanitized ? 20 : 25;
  EXPECT_EQ(rt.run([n] { return fib_in_groups(n); }), mote_test::serial_fib(n));
}

// 1 and 2 workers on this 2-core machine; 4 and 8 oversubscribe it.
INSTANTIATE_TEST_SUITE_P(Workers, DelegationOnWorkers, ::testing::Values(1u, 2u, 4u, 8u));

// Oversubscribed with no spin window: every idle moment parks, and workers
// waiting in line for the delegation lock yield or sleep. It completes.
TEST(Delegation, OversubscribedWithoutSpinning) {
  for (unsigned n : {4u, 8u}) {
    mote::runtime rt(delegating(n, std::chrono::microseconds(0)));
    for (int round = 0; round < (mote_test::kSanitized ? 2 : 6); ++round) {
      tree acc;
      const std::uint64_t seed = 1000u + static_cast<unsigned>(round);
      rt.run([&] {
        mote::task_group root;
        root.spawn([&root, &acc, seed] { random_node(&root, acc, seed, 6); });
        root.wait();
      });
      EXPECT_EQ(acc.sum.load(), random_serial(seed, 6)) << n << " workers, round " << round;
    }
  }
}

// Threads outside the runtime spawn into groups of their own and into one
// group that a worker created; every task runs once.
TEST(Delegation, OutsideThreadsSpawnIntoGroups) {
  mote::runtime rt(delegating(2));
  const int threads = mote_test::kSanitized ? 4 : 12;
  const int per_thread = static_cast<int>(scaled(2000, 4));
  std::unique_ptr<mote::task_group> shared;
  rt.run([&] { shared = std::make_unique<mote::task_group>(mote::isolated); });
  std::atomic<long> shared_ran{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < threads; ++t) {
    callers.emplace_back([&, t] {
      mote::task_group own(rt);
      std::vector<int> out(static_cast<std::size_t>(per_thread), -1);
      for (int i = 0; i < per_thread; ++i) {
        own.spawn([&out, i, t] { out[static_cast<std::size_t>(i)] = i + t; });
        if (i % 4 == 0) shared->spawn([&shared_ran] { shared_ran.fetch_add(1); });
      }
      own.wait();
      for (int i = 0; i < per_thread; ++i) {
        if (out[static_cast<std::size_t>(i)] != i + t) wrong.fetch_add(1);
      }
    });
  }
  for (auto& c : callers) c.join();
  shared->wait();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(shared_ran.load(), static_cast<long>(threads) * ((per_thread + 3) / 4));
}

// Holds every worker of rt inside a task of `g` until release is set.
void occupy_workers(mote::runtime& rt, mote::task_group& g, std::atomic<unsigned>& started,
                    std::atomic<bool>& release) {
  for (unsigned i = 0; i < rt.num_workers(); ++i) {
    g.spawn([&] {
      started.fetch_add(1);
      while (!release.load()) std::this_thread::yield();
    });
  }
}

// Nobody consumes while an outside thread hands in three add-queues' worth:
// it drains the add-queues itself whenever its queue is full. Nothing is lost.
TEST(Delegation, OutsideProducerFillsItsQueue) {
  mote::runtime rt(delegating(2));
  mote::task_group blockers(rt);
  std::atomic<unsigned> started{0};
  std::atomic<bool> release{false};
  occupy_workers(rt, blockers, started, release);
  ASSERT_TRUE(eventually([&] { return started.load() == rt.num_workers(); }));
  mote::task_group g(rt);
  const long n = 3 * static_cast<long>(delegation_scheduler::kAddQueueCapacity) + 5;
  std::atomic<long> ran{0};
  for (long i = 0; i < n; ++i) g.spawn([&ran] { ran.fetch_add(1); });
  EXPECT_EQ(ran.load(), 0);  // every worker is still held
  release.store(true);
  g.wait();
  blockers.wait();
  EXPECT_EQ(ran.load(), n);
}

// The same from a worker: its node queue fills while the other worker is held.
TEST(Delegation, WorkerProducerFillsItsQueue) {
  mote::runtime rt(delegating(2));
  const long n = 3 * static_cast<long>(delegation_scheduler::kAddQueueCapacity) + 5;
  std::atomic<long> ran{0};
  rt.run([&] {
    mote::task_group blocker;
    std::atomic<unsigned> started{0};
    std::atomic<bool> release{false};
    blocker.spawn([&] {
      started.fetch_add(1);
      while (!release.load()) std::this_thread::yield();
    });
    // The other worker takes it (this one does not look for work here).
    EXPECT_TRUE(eventually([&] { return started.load() == 1; }));
    mote::task_group g;
    for (long i = 0; i < n; ++i) g.spawn([&ran] { ran.fetch_add(1); });
    release.store(true);
    g.wait();
    blocker.wait();
  });
  EXPECT_EQ(ran.load(), n);
}

// Idle workers park: after the work, every worker ends up asleep on its park
// word (a futex sleep costs no CPU), however long that takes on a busy
// machine. And new work from outside, and from run(), wakes them.
TEST(Delegation, IdleWorkersPark) {
  for (unsigned n : {2u, 4u}) {
    mote::runtime rt(delegating(n, std::chrono::microseconds(50)));
    mote::detail::runtime_impl& impl = mote::detail::runtime_access::impl(rt);
    auto all_asleep = [&] {
      for (unsigned i = 0; i < n; ++i) {
        if (!impl.worker_asleep(i)) return false;
      }
      return true;
    };
    for (int round = 0; round < 3; ++round) {
      EXPECT_EQ(rt.run([] { return fib_in_groups(16); }), mote_test::serial_fib(16));
      ASSERT_TRUE(eventually(all_asleep)) << n << " workers: some never parked (round " << round << ")";
      mote::task_group g(rt);
      std::atomic<int> ran{0};
      for (int i = 0; i < 64; ++i) g.spawn([&ran] { ran.fetch_add(1); });
      g.wait();  // not a worker: sleeps until the last task wakes it
      EXPECT_EQ(ran.load(), 64);
      ASSERT_TRUE(eventually(all_asleep)) << n << " workers: some never parked after outside spawns";
    }
  }
}

// Work that arrives just as the workers park is never lost: after each pause
// (the workers park, spin window 0), one outside spawn and a wait. A lost
// wake-up would leave the waiter asleep forever: a watchdog turns that into a
// failure.
TEST(Delegation, SpawnsAfterParkingAreNeverLost) {
  mote::runtime rt(delegating(2, std::chrono::microseconds(0)));
  std::atomic<bool> done{false};
  std::atomic<int> ran{0};
  const int rounds = mote_test::kSanitized ? 50 : 400;
  std::thread feeder([&] {
    for (int r = 0; r < rounds; ++r) {
      if (r % 8 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      mote::task_group g(rt);
      g.spawn([&ran] { ran.fetch_add(1); });
      g.wait();
    }
    done.store(true);
  });
  // On failure the joinable feeder ends the process: a hang made a failure.
  ASSERT_TRUE(eventually([&] { return done.load(); }))
      << "a spawn was never run after " << ran.load() << " of " << rounds;
  feeder.join();
  EXPECT_EQ(ran.load(), rounds);
}

}  // namespace
