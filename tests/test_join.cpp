// mote::join and mote::parallel_invoke: results against serial runs, random
// trees on 1 to 16 workers (oversubscribed on small machines), exceptions,
// result lifetimes, a full deque, and callers from outside the runtime.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "mote/mote.hpp"
#include "core/runtime_impl.hpp"
#include "test_util.hpp"

namespace {

using mote_test::scaled;
using mote_test::serial_fib;

using mote_test::fib;

using mote_test::workers;

class JoinOnWorkers : public ::testing::TestWithParam<unsigned> {};

TEST_P(JoinOnWorkers, FibMatchesSerial) {
  mote::runtime rt(workers(GetParam()));
  const int n = mote_test::kSanitized ? 21 : 25;
  for (int rep = 0; rep < 3; ++rep) EXPECT_EQ(rt.run([&] { return fib(n); }), serial_fib(n));
}

// A random tree: each node does a little work, then joins two random
// subtrees. The checksum folds node ids in an order-independent way.
struct tree_spec {
  std::uint64_t seed;
  int depth;
};

std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

std::uint64_t tree_serial(std::uint64_t id, int depth) {
  std::uint64_t h = mix(id);
  if (depth <= 0 || (h % 7) == 0) return h;
  return h + tree_serial(id * 2 + 1, depth - 1) + tree_serial(id * 2 + 2, depth - 1 - (h % 3 == 0));
}

std::uint64_t tree_parallel(std::uint64_t id, int depth) {
  std::uint64_t h = mix(id);
  if (depth <= 0 || (h % 7) == 0) {
    volatile std::uint64_t spin = 0;  // a few ns to a few hundred ns of work
    for (std::uint64_t i = 0; i < (h % 64); ++i) spin = spin + i;
    return h;
  }
  auto [a, b] = mote::join([&] { return tree_parallel(id * 2 + 1, depth - 1); },
                           [&] { return tree_parallel(id * 2 + 2, depth - 1 - (h % 3 == 0)); });
  return h + a + b;
}

TEST_P(JoinOnWorkers, RandomTreesMatchSerial) {
  mote::runtime rt(workers(GetParam()));
  std::mt19937_64 rng(mote_test::test_seed() + GetParam());
  const long trees = scaled(40, 4);
  for (long t = 0; t < trees; ++t) {
    const std::uint64_t root = rng();
    const int depth = 8 + static_cast<int>(rng() % (mote_test::kSanitized ? 6 : 10));
    EXPECT_EQ(rt.run([&] { return tree_parallel(root, depth); }), tree_serial(root, depth))
        << "root " << root << " depth " << depth;
  }
}

INSTANTIATE_TEST_SUITE_P(Workers, JoinOnWorkers, ::testing::Values(1u, 2u, 3u, 4u, 8u, 16u));

TEST(Join, VoidAndValueCombinations) {
  mote::runtime rt(workers(2));
  rt.run([] {
    int x = 0, y = 0;
    mote::join([&] { x = 1; }, [&] { y = 2; });
    EXPECT_EQ(x + y, 3);
    auto [a, b] = mote::join([] { return std::string("left"); }, [] {});
    EXPECT_EQ(a, "left");
    (void)b;
    auto [c, d] = mote::join([] {}, [] { return 7; });
    (void)c;
    EXPECT_EQ(d, 7);
    auto [p, q] = mote::join([] { return std::make_unique<int>(5); },
                             [] { return std::make_unique<int>(6); });
    EXPECT_EQ(*p + *q, 11);
  });
}

TEST(Join, FromOutsideUsesDefaultRuntime) {
  EXPECT_EQ(mote::runtime::current(), nullptr);
  auto [a, b] = mote::join([] { return mote::runtime::current_worker_index(); },
                           [] { return 40 + 2; });
  EXPECT_GE(a, 0);  // ran on a worker of the default runtime
  EXPECT_EQ(b, 42);
  EXPECT_EQ(fib(15), serial_fib(15));
}

TEST(Join, FirstExceptionReachesTheJoin) {
  mote::runtime rt(workers(2));
  EXPECT_THROW(rt.run([] { mote::join([] { throw std::runtime_error("f"); }, [] {}); }),
               std::runtime_error);
  EXPECT_THROW(rt.run([] { mote::join([] {}, [] { throw std::logic_error("g"); }); }),
               std::logic_error);
  // Both throw: f's exception wins (g is cancelled or its exception dropped).
  try {
    rt.run([] {
      mote::join([] { throw std::runtime_error("f"); }, [] { throw std::logic_error("g"); });
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "f");
  }
}

// Throws from random leaves of big trees on several workers: the exception
// arrives at the root, and every result object that was built is destroyed
// exactly once.
long throwing_tree(std::uint64_t id, int depth, std::uint64_t throw_mod) {
  if (depth == 0) {
    if (throw_mod != 0 && mix(id) % throw_mod == 0) throw std::runtime_error("leaf");
    return 1;
  }
  auto [a, b] = mote::join(
      [&] { return mote_test::lifetime(throwing_tree(id * 2 + 1, depth - 1, throw_mod)); },
      [&] { return mote_test::lifetime(throwing_tree(id * 2 + 2, depth - 1, throw_mod)); });
  return a.value + b.value;
}

TEST(Join, ExceptionsFromRandomLeavesLeakNothing) {
  for (unsigned n : {2u, 4u}) {
    mote::runtime rt(workers(n));
    const int depth = mote_test::kSanitized ? 12 : 14;
    for (std::uint64_t mod : {0ull, 3ull, 50ull, 1000ull}) {
      for (std::uint64_t seed = 0; seed < 4; ++seed) {
        bool threw = false;
        long v = 0;
        try {
          v = rt.run([&] { return throwing_tree(seed << 40, depth, mod); });
        } catch (const std::runtime_error&) {
          threw = true;
        }
        if (mod == 0) {
          EXPECT_FALSE(threw);
          EXPECT_EQ(v, 1L << depth);
        }
        EXPECT_EQ(mote_test::lifetime::live.load(), 0);
      }
    }
  }
  EXPECT_EQ(mote_test::lifetime::double_destroyed.load(), 0);
}

TEST(Join, FullDequeRunsInline) {
  mote::runtime_options o = workers(2);
  o.deque_capacity = 64;  // fib(30) nests 29 deep; trees below nest deeper
  mote::runtime rt(o);
  EXPECT_EQ(rt.run([] { return fib(mote_test::kSanitized ? 16 : 22); }),
            serial_fib(mote_test::kSanitized ? 16 : 22));
  // A chain 500 deep: the deque fills at 64 and the rest runs inline.
  std::function<long(int)> chain = [&](int d) -> long {
    if (d == 0) return 0;
    auto [a, b] = mote::join([&] { return chain(d - 1); }, [] { return 1L; });
    return a + b;
  };
  EXPECT_EQ(rt.run([&] { return chain(500); }), 500);
}

TEST(Join, ParallelInvokeRunsEveryCallable) {
  mote::runtime rt(workers(2));
  rt.run([] {
    std::atomic<int> mask{0};
    mote::parallel_invoke([&] { mask |= 1; });
    mote::parallel_invoke([&] { mask |= 2; }, [&] { mask |= 4; }, [&] { mask |= 8; },
                          [&] { mask |= 16; }, [&] { mask |= 32; });
    EXPECT_EQ(mask.load(), 63);
    EXPECT_THROW(mote::parallel_invoke([] {}, [] { throw std::runtime_error("x"); }, [] {}),
                 std::runtime_error);
  });
  std::atomic<int> outside{0};
  mote::parallel_invoke([&] { ++outside; }, [&] { ++outside; }, [&] { ++outside; });
  EXPECT_EQ(outside.load(), 3);
}

TEST(Join, ConcurrentCallersFromOutside) {
  mote::runtime rt(workers(2));
  const int threads = mote_test::kSanitized ? 4 : 16;
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int i = 0; i < threads; ++i) {
    callers.emplace_back([&, i] {
      for (int rep = 0; rep < 5; ++rep) {
        const int n = 12 + (i + rep) % 8;
        if (rt.run([&] { return fib(n); }) != serial_fib(n)) wrong.fetch_add(1);
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// Makes g run on another worker: f keeps making tiny joins, and each of
// their pushes answers an idle thief's request to share, which shares g (the
// older task) and lets the thief take it. f returns once g has started.
template <class G>
auto join_with_g_stolen(G&& g) {
  std::atomic<bool> started{false};
  const int me = mote::runtime::current_worker_index();
  std::atomic<int> where{-1};
  auto result = mote::join(
      [&] {
        while (!started.load()) mote::join([] {}, [] {});
        return 0;
      },
      [&]() -> decltype(auto) {
        where.store(mote::runtime::current_worker_index());
        started.store(true);
        return g();
      });
  EXPECT_NE(where.load(), me) << "g ran on the joining worker";
  return result;
}

TEST(Join, ReferencesComeBackAsReferences) {
  mote::runtime rt(workers(2));
  rt.run([] {
    int x = 1, y = 2;
    auto [a, b] = mote::join([&]() -> int& { return x; }, [&]() -> int& { return y; });
    static_assert(std::is_same_v<decltype(mote::join([&]() -> int& { return x; }, [] {})),
                                 std::pair<int&, mote::empty>>);
    EXPECT_EQ(&a, &x);
    EXPECT_EQ(&b, &y);
    // A stolen g hands its reference back through the thief.
    auto [c, d] = join_with_g_stolen([&]() -> int& { return y; });
    (void)c;
    EXPECT_EQ(&d, &y);
  });
  int z = 5;
  int& r = rt.run([&]() -> int& { return z; });  // from outside: through the injection queue
  EXPECT_EQ(&r, &z);
  const std::string s = "text";
  const std::string& cr = rt.run([&]() -> const std::string& { return s; });
  EXPECT_EQ(&cr, &s);
}

// A join whose partner was stolen and runs longer than the spin window parks,
// and the thief's finish() wakes it with the result. The join's worker counts
// the sleep (wait_parks), so the test knows the park path ran. The partner
// runs until the joining thread has gone to sleep (the kernel's count of its
// voluntary switches moves), and 20 ms more, so that a loaded machine that
// keeps the joiner off its CPU for a while cannot make the partner finish
// first; after 10 s it gives up, and the count then says what happened.
TEST(Join, StolenPartnerLongerThanTheSpinWindowParksAndWakes) {
  mote::runtime rt(workers(2));  // spin: 20 us
  for (int rep = 0; rep < 3; ++rep) {
    const int joiner = rt.run([] {
      // The joiner's own count, read before the join: until it parks it
      // only spins, so the first move of the count is the park.
      const long joiner_tid = mote_test::this_thread_id();
      const long before = mote_test::voluntary_switches(joiner_tid);
      auto [a, b] = join_with_g_stolen([joiner_tid, before] {
        for (int i = 0; i < 1000 && mote_test::voluntary_switches(joiner_tid) == before; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return 42;
      });
      EXPECT_EQ(a, 0);
      EXPECT_EQ(b, 42);
      return mote::runtime::current_worker_index();
    });
    ASSERT_GE(joiner, 0);
  }
  std::uint64_t parks = 0;
  auto& impl = mote::detail::runtime_access::impl(rt);
  for (unsigned i = 0; i < impl.num_workers(); ++i) parks += impl.worker_at(i).stats().wait_parks;
  EXPECT_GE(parks, 3u) << "the joins never parked";
}

// MOTE_STATS' steals are tasks taken, a batch (split_deque::steal_batch)
// counting each of its tasks: every task of the group that ran on the other
// worker got there by a steal (its own, or one whose batch it pushed on its
// pool), so the steals are at least as many.
TEST(Join, StatsCountEveryTaskABatchStealTakes) {
  mote::runtime rt(workers(2));
  std::atomic<std::uint64_t> elsewhere{0};
  rt.run([&] {
    const int home = mote::runtime::current_worker_index();
    mote::task_group g;
    for (int i = 0; i < 512; ++i) {
      g.spawn([&elsewhere, home] {
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(5);
        while (std::chrono::steady_clock::now() < until) {
        }
        if (mote::runtime::current_worker_index() != home) elsewhere.fetch_add(1, std::memory_order_relaxed);
      });
    }
    g.wait();
  });
  std::uint64_t steals = 0;
  auto& impl = mote::detail::runtime_access::impl(rt);
  for (unsigned i = 0; i < impl.num_workers(); ++i) steals += impl.worker_at(i).stats().steals;
  EXPECT_GE(steals, elsewhere.load());
}

// On an assistant thread, join and parallel_invoke run their callables in
// place, one after the other: handing them to a runtime would add a round
// trip to the wait of the assistant's owner, and with a one-worker runtime
// whose worker is that owner, never finish.
TEST(Join, OnAnAssistantThreadRunsInPlace) {
  mote::runtime_options o = workers(1);
  o.assistants = true;
  o.adaptive = false;  // the task must run on the assistant
  mote::runtime rt(o);
  std::thread::id assistant_thread, f_thread, g_thread, h_thread;
  int sum = 0;
  const bool had_assistant = rt.run([&] {
    mote::assistant* a = mote::this_worker_assistant();
    if (a == nullptr) return false;
    a->submit([&] {
      assistant_thread = std::this_thread::get_id();
      auto [x, y] = mote::join([&] { f_thread = std::this_thread::get_id(); return 1; },
                               [&] { g_thread = std::this_thread::get_id(); return 2; });
      mote::parallel_invoke([&] { h_thread = std::this_thread::get_id(); }, [] {}, [] {});
      sum = x + y;
    });
    a->wait();
    return true;
  });
  if (!had_assistant) GTEST_SKIP() << "the worker's assistant could not start here";
  EXPECT_EQ(sum, 3);
  EXPECT_EQ(f_thread, assistant_thread);
  EXPECT_EQ(g_thread, assistant_thread);
  EXPECT_EQ(h_thread, assistant_thread);
}

}  // namespace
