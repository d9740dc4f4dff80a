// scheduler_policy::mesh: XQueue's N x N mesh of SPSC cells. The mesh driven
// directly (round-robin placement, NA-RP redirects to an under-loaded worker,
// NA-WS steal requests answered by migration, the rescue of an owner that
// does not answer, nearest NUMA node first on a simulated topology, full
// cells never dropping a task, bounded rows, concurrent producers and
// consumers taking each task exactly once), MOTE_SCHEDULER=mesh and
// MOTE_MESH_BALANCE parsing, and runtimes under the mesh (randomized groups
// against a serial walk under every protocol, oversubscribed too; a task
// left in the cell of a worker that blocks is run by another; idle workers
// park; spawns just as workers park are never lost). Nothing here asserts a
// speed: waits for an event have generous deadlines so that a lost wake-up
// fails instead of hanging.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/config.hpp"
#include "core/runtime_impl.hpp"
#include "mote/mote.hpp"
#include "scheduler/mesh.hpp"
#include "test_util.hpp"

namespace {

using mote::config_error;
using mote::scheduler_policy;
using mote::detail::mesh_balance;
using mote::detail::mesh_queues;
using mote::detail::resolve_config;
using mote::detail::task;
using mote_test::scaled;
using mote_test::scoped_env;

constexpr auto kDeadline = std::chrono::seconds(120);
constexpr unsigned kNone = mesh_queues::kNone;

// Distinct task addresses that are never dereferenced.
struct fake_tasks {
  explicit fake_tasks(std::size_t n) : store(n) {}
  task* operator[](std::size_t i) { return reinterpret_cast<task*>(&store[i]); }
  std::size_t index_of(task* t) const {
    return static_cast<std::size_t>(reinterpret_cast<const std::max_align_t*>(t) - store.data());
  }
  std::vector<std::max_align_t> store;
};

task* pop(mesh_queues& m, unsigned c) {
  unsigned thief = kNone;
  std::size_t moved = 0;
  return m.pop(c, &thief, &moved);
}

unsigned push(mesh_queues& m, unsigned p, task* t) {
  bool redirected = false;
  return m.push(p, t, &redirected);
}

// ---- The mesh, driven directly -----------------------------------------------

TEST(MeshQueues, ProducersSpreadTasksRoundRobin) {
  mesh_queues m(std::vector<unsigned>(4, 0), mesh_balance::none, 64);
  fake_tasks t(16);
  // Producer 1 starts at its own row and goes round.
  for (unsigned i = 0; i < 8; ++i) EXPECT_EQ(push(m, 1, t[i]), (1 + i) % 4) << i;
  for (unsigned c = 0; c < 4; ++c) EXPECT_EQ(m.row_length(c), 2u) << c;
  // Each row gives back the tasks it got, in order.
  EXPECT_EQ(pop(m, 1), t[0]);
  EXPECT_EQ(pop(m, 1), t[4]);
  EXPECT_EQ(pop(m, 1), nullptr);
  EXPECT_EQ(pop(m, 0), t[3]);
  EXPECT_EQ(pop(m, 0), t[7]);
}

TEST(MeshQueues, AConsumerTakesTheCellsInTurn) {
  mesh_queues m(std::vector<unsigned>(3, 0), mesh_balance::none, 64);
  fake_tasks t(9);
  // Each producer puts three tasks in row 0 (its first, fourth... push).
  std::set<task*> got;
  for (unsigned p = 0; p < 3; ++p) {
    for (unsigned i = 0; i < 3; ++i) {
      const unsigned j = push(m, p, t[p * 3 + i]);
      if (j != 0) ASSERT_EQ(pop(m, j), t[p * 3 + i]);  // keep only row 0's
    }
  }
  // Row 0 holds one task from each producer; it takes one from each cell.
  std::vector<std::size_t> producers;
  while (task* x = pop(m, 0)) producers.push_back(t.index_of(x) / 3);
  EXPECT_EQ(producers, (std::vector<std::size_t>{0, 1, 2}));
}

TEST(MeshQueues, RedirectSteersToAnUnderloadedWorker) {
  mesh_queues m(std::vector<unsigned>(4, 0), mesh_balance::redirect, 64);
  fake_tasks t(8);
  EXPECT_EQ(pop(m, 2), nullptr);  // worker 2 finds its row empty: it reports under-loaded
  EXPECT_TRUE(m.hungry(2));
  bool redirected = false;
  // Producer 0's round-robin target is itself (not under-loaded): worker 2 gets it.
  EXPECT_EQ(m.push(0, t[0], &redirected), 2u);
  EXPECT_TRUE(redirected);
  EXPECT_FALSE(m.hungry(2));  // the push answered the report
  // Nobody reports under-loaded now: round-robin goes on.
  EXPECT_EQ(m.push(0, t[1], &redirected), 1u);
  EXPECT_FALSE(redirected);
  EXPECT_EQ(m.stats(0).redirects, 1u);
  // Without NA-RP the report is ignored.
  mesh_queues plain(std::vector<unsigned>(4, 0), mesh_balance::steal, 64);
  EXPECT_EQ(pop(plain, 2), nullptr);
  EXPECT_EQ(plain.push(0, t[2], &redirected), 0u);
  EXPECT_FALSE(redirected);
}

// A simulated topology: workers 0 and 3 on node 0, 1 and 2 on node 1.
TEST(MeshQueues, NearestNodeFirst) {
  const std::vector<unsigned> nodes{0, 1, 1, 0};
  {
    mesh_queues m(nodes, mesh_balance::both, 64);
    EXPECT_EQ(m.order(0), (std::vector<unsigned>{3, 1, 2}));
    EXPECT_EQ(m.order(1), (std::vector<unsigned>{2, 3, 0}));
  }
  {
    // NA-RP: workers 1 (other node) and 3 (same node) report under-loaded;
    // producer 0's task goes to 3, though 1 is nearer round the ring.
    mesh_queues m(nodes, mesh_balance::redirect, 64);
    fake_tasks t(4);
    EXPECT_EQ(pop(m, 1), nullptr);
    EXPECT_EQ(pop(m, 3), nullptr);
    EXPECT_EQ(push(m, 0, t[0]), 3u);
    EXPECT_EQ(push(m, 0, t[1]),
              1u);  // then the other under-loaded one (round-robin target 1 anyway)
  }
  {
    // NA-WS: workers 1 (other node) and 3 (same node) both have tasks; the
    // idle worker 0 asks 3.
    mesh_queues m(nodes, mesh_balance::steal, 64);
    fake_tasks t(8);
    ASSERT_EQ(push(m, 1, t[0]), 1u);
    ASSERT_EQ(push(m, 3, t[1]), 3u);
    EXPECT_EQ(pop(m, 0), nullptr);
    unsigned victim = kNone;
    std::size_t moved = 0;
    EXPECT_EQ(m.balance_step(0, 0, &victim, &moved), nullptr);
    EXPECT_EQ(m.stats(0).requests, 1u);
    // Worker 3 answers at its next take... with one task it keeps it.
    unsigned thief = kNone;
    EXPECT_EQ(m.pop(3, &thief, &moved), t[1]);
    EXPECT_EQ(moved, 0u);
  }
}

// Loads row 0 with `n` tasks (producer 0, and worker 1 drains its share).
void load_row0(mesh_queues& m, fake_tasks& t, unsigned n, std::set<task*>& taken) {
  for (unsigned i = 0; i < 2 * n; ++i) ASSERT_NE(push(m, 0, t[i]), kNone);
  for (unsigned i = 0; i < n; ++i) {
    task* x = pop(m, 1);
    ASSERT_NE(x, nullptr);
    taken.insert(x);
  }
  ASSERT_EQ(m.row_length(0), n);
  ASSERT_EQ(pop(m, 1), nullptr);
}

TEST(MeshQueues, AStealRequestMigratesHalfTheTasks) {
  mesh_queues m(std::vector<unsigned>(2, 0), mesh_balance::steal, 64);
  fake_tasks t(40);
  std::set<task*> taken;
  load_row0(m, t, 10, taken);
  unsigned victim = kNone;
  std::size_t moved = 0;
  EXPECT_EQ(m.balance_step(1, 0, &victim, &moved), nullptr);  // posts the request
  EXPECT_EQ(m.stats(1).requests, 1u);
  // A second step before the answer posts nothing more.
  EXPECT_EQ(m.balance_step(1, 10, &victim, &moved), nullptr);
  EXPECT_EQ(m.stats(1).requests, 1u);
  unsigned thief = kNone;
  task* x = m.pop(0, &thief, &moved);
  ASSERT_NE(x, nullptr);
  taken.insert(x);
  EXPECT_EQ(thief, 1u);
  EXPECT_EQ(moved, 5u);
  EXPECT_EQ(m.stats(0).migrated_out, 5u);
  EXPECT_EQ(m.row_length(0), 4u);
  EXPECT_EQ(m.row_length(1), 5u);
  // Everything is taken exactly once.
  while (task* y = pop(m, 1)) EXPECT_TRUE(taken.insert(y).second);
  while (task* y = pop(m, 0)) EXPECT_TRUE(taken.insert(y).second);
  EXPECT_EQ(taken.size(), 20u);
}

TEST(MeshQueues, WithoutStealingTheOwnerDoesNotAnswer) {
  mesh_queues m(std::vector<unsigned>(2, 0), mesh_balance::redirect, 64);
  fake_tasks t(40);
  std::set<task*> taken;
  load_row0(m, t, 10, taken);
  unsigned victim = kNone;
  std::size_t moved = 0;
  EXPECT_EQ(m.balance_step(1, 0, &victim, &moved), nullptr);
  unsigned thief = kNone;
  EXPECT_NE(m.pop(0, &thief, &moved), nullptr);
  EXPECT_EQ(moved, 0u);
  EXPECT_EQ(m.row_length(1), 0u);
}

TEST(MeshQueues, AnUnansweredRequestIsServedByTheThief) {
  for (mesh_balance b : {mesh_balance::none, mesh_balance::steal}) {
    mesh_queues m(std::vector<unsigned>(2, 0), b, 64);
    fake_tasks t(40);
    std::set<task*> taken;
    load_row0(m, t, 10, taken);
    unsigned victim = kNone;
    std::size_t moved = 0;
    EXPECT_EQ(m.balance_step(1, 1000, &victim, &moved), nullptr);  // request
    EXPECT_EQ(m.balance_step(1, 1000 + mesh_queues::kForceAfterNs - 1, &victim, &moved),
              nullptr);  // patience
    // The owner is busy for longer: the thief takes one task and half the rest.
    task* x = m.balance_step(1, 1000 + mesh_queues::kForceAfterNs, &victim, &moved);
    ASSERT_NE(x, nullptr);
    taken.insert(x);
    EXPECT_EQ(victim, 0u);
    EXPECT_EQ(moved, 1u + 4u);
    EXPECT_EQ(m.stats(1).forced, 1u);
    EXPECT_EQ(m.row_length(0), 5u);
    EXPECT_EQ(m.row_length(1), 4u);
    while (task* y = pop(m, 1)) EXPECT_TRUE(taken.insert(y).second);
    while (task* y = pop(m, 0)) EXPECT_TRUE(taken.insert(y).second);
    EXPECT_EQ(taken.size(), 20u);
  }
}

TEST(MeshQueues, ARowWhoseOwnerAndRequesterAreBothAwayIsRescued) {
  // Thief 1 posts a request on row 0 and then goes away (it found work
  // elsewhere, or blocks in a wait that runs no tasks) while row 0's owner
  // is away too. Thief 2 finds the request slot taken: it must still take
  // row 0's task after its own patience, not wait for thief 1 forever.
  for (mesh_balance b : {mesh_balance::none, mesh_balance::steal}) {
    mesh_queues m(std::vector<unsigned>(3, 0), b, 64);
    fake_tasks t(3);
    for (unsigned i = 0; i < 3; ++i) ASSERT_NE(push(m, 0, t[i]), kNone);  // rows 0, 1, 2
    std::set<task*> taken;
    for (unsigned c : {1u, 2u}) {
      task* x = pop(m, c);
      ASSERT_NE(x, nullptr);
      taken.insert(x);
      ASSERT_EQ(pop(m, c), nullptr);  // rows 1 and 2 empty (and reported so)
    }
    ASSERT_EQ(m.row_length(0), 1u);
    unsigned victim = kNone;
    std::size_t moved = 0;
    EXPECT_EQ(m.balance_step(1, 1000, &victim, &moved), nullptr);  // thief 1's request
    // Thief 1 never comes back. Thief 2:
    EXPECT_EQ(m.balance_step(2, 2000, &victim, &moved), nullptr);
    task* x = nullptr;
    for (std::int64_t now = 2000; x == nullptr && now <= 2000 + 4 * mesh_queues::kForceAfterNs;
         now += mesh_queues::kForceAfterNs / 4) {
      x = m.balance_step(2, now, &victim, &moved);
    }
    ASSERT_NE(x, nullptr) << "row 0's task was left behind thief 1's request";
    EXPECT_EQ(victim, 0u);
    EXPECT_TRUE(taken.insert(x).second);
    EXPECT_EQ(taken.size(), 3u);
    EXPECT_EQ(m.row_length(0), 0u);
  }
}

TEST(MeshQueues, FullCellsNeverDropATask) {
  for (mesh_balance b : {mesh_balance::none, mesh_balance::both}) {
    const unsigned n = 3;
    const std::size_t cap = 4;
    mesh_queues m(std::vector<unsigned>(n, 0), b, cap);
    fake_tasks t(64);
    // Producer 0 fills every cell of its column: n * cap tasks go in, the
    // next is refused (still the caller's), never lost.
    unsigned accepted = 0;
    for (unsigned i = 0; i < n * cap; ++i) {
      ASSERT_NE(push(m, 0, t[i]), kNone) << i;
      ++accepted;
      for (unsigned c = 0; c < n; ++c) ASSERT_LE(m.row_length(c), n * cap);  // bounded
    }
    EXPECT_EQ(push(m, 0, t[accepted]), kNone);
    // Another producer's cells are its own: it still has room.
    EXPECT_NE(push(m, 1, t[accepted]), kNone);
    std::set<task*> taken;
    for (unsigned c = 0; c < n; ++c) {
      while (task* x = pop(m, c)) EXPECT_TRUE(taken.insert(x).second);
    }
    EXPECT_EQ(taken.size(), accepted + 1);
  }
}

TEST(MeshQueues, MigrationStopsAtAFullCell) {
  // The thief's cell from the owner holds 2: an answer moves at most 2.
  mesh_queues m(std::vector<unsigned>(2, 0), mesh_balance::steal, 2);
  fake_tasks t(16);
  for (unsigned i = 0; i < 4; ++i) ASSERT_NE(push(m, 0, t[i]), kNone);      // 2 in each row
  for (unsigned i = 0; i < 2; ++i) ASSERT_NE(push(m, 1, t[4 + i]), kNone);  // 1 more in each row
  ASSERT_NE(pop(m, 1), nullptr);  // row 1: 2 left, its cell from 0 holds 1
  std::set<task*> taken;
  unsigned victim = kNone;
  std::size_t moved = 0;
  // Row 0 has 3: worker 1 asks it.
  EXPECT_EQ(m.balance_step(1, 0, &victim, &moved), nullptr);
  unsigned thief = kNone;
  task* x = m.pop(0, &thief, &moved);
  ASSERT_NE(x, nullptr);
  EXPECT_LE(moved, 1u);  // one slot of room in cell [1][0]
  std::size_t total = 1;
  while (pop(m, 0) != nullptr) ++total;
  while (pop(m, 1) != nullptr) ++total;
  EXPECT_EQ(total, 5u);  // 6 pushed, 1 taken before
}

// Threads playing workers: each produces tasks into the mesh and consumes
// its row, balancing when idle; every task is taken exactly once, and a push
// refused by full cells is kept by its producer and taken by it.
TEST(MeshQueues, ConcurrentWorkersTakeEachTaskOnce) {
  for (mesh_balance b :
       {mesh_balance::none, mesh_balance::redirect, mesh_balance::steal, mesh_balance::both}) {
    const unsigned n = 4;
    const unsigned per = static_cast<unsigned>(scaled(20000, 10));
    mesh_queues m(std::vector<unsigned>{0, 0, 1, 1}, b, 16);
    fake_tasks t(n * per);
    std::vector<std::atomic<int>> count(n * per);
    std::atomic<unsigned> ran{0};
    std::vector<std::thread> threads;
    for (unsigned w = 0; w < n; ++w) {
      threads.emplace_back([&, w] {
        std::vector<task*> kept;
        auto run = [&](task* x) {
          count[t.index_of(x)].fetch_add(1, std::memory_order_relaxed);
          ran.fetch_add(1, std::memory_order_relaxed);
        };
        unsigned made = 0;
        for (;;) {
          if (made < per) {
            task* x = t[w * per + made++];
            if (push(m, w, x) == kNone) kept.push_back(x);
          }
          if (!kept.empty() && made % 3 == 0) {
            run(kept.back());
            kept.pop_back();
          }
          if (task* x = pop(m, w)) {
            run(x);
            continue;
          }
          unsigned victim = kNone;
          std::size_t moved = 0;
          const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
          if (task* x = m.balance_step(w, now, &victim, &moved)) {
            run(x);
            continue;
          }
          if (made == per) {
            for (task* x : kept) run(x);
            kept.clear();
            // Every task ran (a migration in flight is still counted out).
            if (ran.load(std::memory_order_relaxed) >= n * per) break;
            std::this_thread::yield();
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    for (std::size_t i = 0; i < count.size(); ++i) ASSERT_EQ(count[i].load(), 1) << i;
    EXPECT_FALSE(m.visible());
  }
}

// ---- MOTE_SCHEDULER=mesh, MOTE_MESH_BALANCE -----------------------------------

TEST(MeshConfig, EnvironmentValues) {
  {
    scoped_env e("MOTE_SCHEDULER", " Mesh ");
    EXPECT_EQ(resolve_config({}, mote::topology::system()).policy, scheduler_policy::mesh);
  }
  scoped_env s("MOTE_SCHEDULER", "mesh");
  {
    scoped_env e("MOTE_MESH_BALANCE", nullptr);
    EXPECT_EQ(resolve_config({}, mote::topology::system()).balance, mesh_balance::both);
  }
  const std::pair<const char*, mesh_balance> values[] = {{"none", mesh_balance::none},
                                                         {"REDIRECT", mesh_balance::redirect},
                                                         {" steal", mesh_balance::steal},
                                                         {"both", mesh_balance::both}};
  for (const auto& [text, value] : values) {
    scoped_env e("MOTE_MESH_BALANCE", text);
    EXPECT_EQ(resolve_config({}, mote::topology::system()).balance, value) << text;
  }
}

TEST(MeshConfig, BadValueNamesTheVariable) {
  scoped_env s("MOTE_SCHEDULER", "mesh");
  for (const char* bad : {"all", "stealing", "1"}) {
    scoped_env e("MOTE_MESH_BALANCE", bad);
    try {
      (void)resolve_config({}, mote::topology::system());
      ADD_FAILURE() << "accepted MOTE_MESH_BALANCE=" << bad;
    } catch (const config_error& err) {
      const std::string what = err.what();
      EXPECT_NE(what.find("MOTE_MESH_BALANCE"), std::string::npos) << what;
      EXPECT_NE(what.find(std::string("'") + bad + "'"), std::string::npos) << what;
    }
    EXPECT_THROW(mote::runtime rt(mote_test::workers(1)), config_error);
  }
  scoped_env e("MOTE_SCHEDULER", "meshes");
  try {
    (void)resolve_config({}, mote::topology::system());
    ADD_FAILURE() << "accepted MOTE_SCHEDULER=meshes";
  } catch (const config_error& err) {
    EXPECT_NE(std::string(err.what()).find("mesh"), std::string::npos) << err.what();
  }
}

// ---- Runtimes under the mesh ---------------------------------------------------

mote::runtime_options meshed(unsigned n,
                             std::chrono::microseconds spin = std::chrono::microseconds(20)) {
  mote::runtime_options o = mote_test::workers(n, spin);
  o.scheduler = scheduler_policy::mesh;
  return o;
}

template <class P>
bool eventually(P pred) {
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

struct tree {
  std::atomic<long> sum{0};
};

// A random tree: children spawned into the node's group or its parent's,
// joins now and then; the sum equals the serial walk's.
void random_node(mote::task_group* parent, tree& acc, std::uint64_t seed, int depth) {
  std::mt19937_64 rng(seed);
  acc.sum.fetch_add(static_cast<long>(rng() % 1000));
  if (depth == 0) return;
  const int children = static_cast<int>(rng() % 4);
  const int kind = static_cast<int>(rng() % 3);
  if (kind == 0 && depth > 1) {
    const std::uint64_t a = rng();
    const std::uint64_t b = rng();
    mote::join([&] { random_node(parent, acc, a, depth - 1); },
               [&] { random_node(parent, acc, b, depth - 1); });
  }
  mote::task_group g;
  for (int c = 0; c < children; ++c) {
    const std::uint64_t child = rng();
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
    (void)rng();
    sum += random_serial(child, depth - 1);
  }
  return sum;
}

struct mesh_case {
  unsigned workers;
  mesh_balance balance;
};

const char* balance_name(mesh_balance b) {
  static const char* const names[] = {"none", "redirect", "steal", "both"};
  return names[static_cast<unsigned>(b)];
}

class MeshOnWorkers : public ::testing::TestWithParam<mesh_case> {};

TEST_P(MeshOnWorkers, RandomizedGroupsMatchSerial) {
  scoped_env e("MOTE_MESH_BALANCE", balance_name(GetParam().balance));
  mote::runtime rt(meshed(GetParam().workers));
  std::mt19937_64 rng(mote_test::test_seed());
  const int depth = mote_test::kSanitized ? 7 : 10;
  for (long round = 0; round < scaled(8, 4); ++round) {
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

// Many tasks of random sizes in one group from one producer, each writing its own slot.
TEST_P(MeshOnWorkers, EveryTaskRunsOnce) {
  scoped_env e("MOTE_MESH_BALANCE", balance_name(GetParam().balance));
  mote::runtime rt(meshed(GetParam().workers));
  const int n = static_cast<int>(scaled(20000, 8));
  std::vector<std::atomic<int>> ran(static_cast<std::size_t>(n));
  rt.run([&] {
    mote::task_group g;
    for (int i = 0; i < n; ++i) {
      g.spawn([&ran, i] {
        volatile int spin = (i * 7919) % 200;
        while (spin > 0) spin = spin - 1;
        ran[static_cast<std::size_t>(i)].fetch_add(1, std::memory_order_relaxed);
      });
    }
    g.wait();
  });
  for (int i = 0; i < n; ++i) ASSERT_EQ(ran[static_cast<std::size_t>(i)].load(), 1) << i;
}

// Every protocol on 2 and 4 workers; the default (and both) on 1 and 8.
std::vector<mesh_case> mesh_cases() {
  std::vector<mesh_case> v{{1, mesh_balance::steal}};
  for (unsigned w : {2u, 4u}) {
    for (mesh_balance b :
         {mesh_balance::none, mesh_balance::redirect, mesh_balance::steal, mesh_balance::both}) {
      v.push_back({w, b});
    }
  }
  v.push_back({8, mesh_balance::steal});
  v.push_back({8, mesh_balance::both});
  return v;
}

std::string case_name(const ::testing::TestParamInfo<mesh_case>& info) {
  return std::to_string(info.param.workers) + "_" + balance_name(info.param.balance);
}

INSTANTIATE_TEST_SUITE_P(Workers, MeshOnWorkers, ::testing::ValuesIn(mesh_cases()), case_name);

TEST(Mesh, TheWorkersFollowThePolicy) {
  mote::runtime rt(meshed(3));
  mote::detail::runtime_impl& impl = mote::detail::runtime_access::impl(rt);
  EXPECT_EQ(impl.config().policy, scheduler_policy::mesh);
  EXPECT_TRUE(impl.policy().takes_spawns());
  for (unsigned i = 0; i < rt.num_workers(); ++i) EXPECT_TRUE(impl.worker_at(i).delegating()) << i;
}

// A task spawned into the spawner's own cell, or any worker's, while the
// spawner then blocks in a wait that runs no tasks (a spin on a flag that
// only the task sets): another worker runs it (an answered request or a
// rescue). Without the rescue this hangs.
TEST(Mesh, ATaskBehindABlockedWorkerIsRun) {
  for (mesh_balance b : {mesh_balance::none, mesh_balance::steal}) {
    scoped_env e("MOTE_MESH_BALANCE", b == mesh_balance::none ? "none" : "steal");
    mote::runtime rt(meshed(2));
    for (int round = 0; round < (mote_test::kSanitized ? 20 : 200); ++round) {
      std::atomic<int> done{0};
      bool ok = rt.run([&] {
        mote::task_group g;
        // Two spawns: round-robin puts one in this worker's own row, and
        // both must run before the spin ends.
        g.spawn([&done] { done.fetch_add(1); });
        g.spawn([&done] { done.fetch_add(1); });
        const auto deadline = std::chrono::steady_clock::now() + kDeadline;
        while (done.load() != 2) {
          if (std::chrono::steady_clock::now() > deadline) return false;
          std::this_thread::yield();
        }
        g.wait();
        return true;
      });
      ASSERT_TRUE(ok) << "round " << round;
    }
  }
}

TEST(Mesh, OversubscribedWithoutSpinning) {
  for (unsigned n : {4u, 16u}) {
    mote::runtime rt(meshed(n, std::chrono::microseconds(0)));
    for (int round = 0; round < (mote_test::kSanitized ? 2 : 4); ++round) {
      tree acc;
      const std::uint64_t seed = 2000u + static_cast<unsigned>(round);
      rt.run([&] {
        mote::task_group root;
        root.spawn([&root, &acc, seed] { random_node(&root, acc, seed, 6); });
        root.wait();
      });
      EXPECT_EQ(acc.sum.load(), random_serial(seed, 6)) << n << " workers, round " << round;
    }
  }
}

TEST(Mesh, OutsideThreadsSpawnIntoGroups) {
  mote::runtime rt(meshed(2));
  const int threads = mote_test::kSanitized ? 3 : 8;
  const int per_thread = static_cast<int>(scaled(2000, 4));
  std::atomic<int> ran{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i) {
    ts.emplace_back([&] {
      mote::task_group g(rt);
      for (int k = 0; k < per_thread; ++k) {
        g.spawn([&ran, &g] {
          ran.fetch_add(1);
          (void)g;
        });
      }
      g.wait();
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ran.load(), threads * per_thread);
}

TEST(Mesh, IdleWorkersPark) {
  for (unsigned n : {2u, 4u}) {
    mote::runtime rt(meshed(n, std::chrono::microseconds(50)));
    mote::detail::runtime_impl& impl = mote::detail::runtime_access::impl(rt);
    auto all_asleep = [&] {
      for (unsigned i = 0; i < n; ++i) {
        if (!impl.worker_asleep(i)) return false;
      }
      return true;
    };
    for (int round = 0; round < 3; ++round) {
      tree acc;
      rt.run([&] {
        mote::task_group root;
        root.spawn([&root, &acc] { random_node(&root, acc, 77, 6); });
        root.wait();
      });
      EXPECT_EQ(acc.sum.load(), random_serial(77, 6));
      ASSERT_TRUE(eventually(all_asleep))
          << n << " workers: some never parked (round " << round << ")";
    }
  }
}

TEST(Mesh, SpawnsAfterParkingAreNeverLost) {
  mote::runtime rt(meshed(2, std::chrono::microseconds(0)));
  std::atomic<bool> done{false};
  std::atomic<int> ran{0};
  const int rounds = mote_test::kSanitized ? 50 : 400;
  std::thread feeder([&] {
    for (int r = 0; r < rounds; ++r) {
      // A worker spawns two (one into another worker's row), then the run ends.
      rt.run([&ran] {
        mote::task_group g;
        g.spawn([&ran] { ran.fetch_add(1); });
        g.spawn([&ran] { ran.fetch_add(1); });
        g.wait();
      });
    }
    done.store(true);
  });
  ASSERT_TRUE(eventually([&] { return done.load(); }))
      << "a spawn was never run after " << ran.load();
  feeder.join();
  EXPECT_EQ(ran.load(), 2 * rounds);
}

}  // namespace
