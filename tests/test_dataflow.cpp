// Data-flow tasks: fixed patterns of every access type, reductions, nesting,
// exceptions and misuse, spawns that throw part-way (fault injection), and
// random task graphs (random accesses of every kind over a few dozen
// objects, random nesting, random failures, random faults in spawn) checked
// against running the same tasks serially in program order.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <ostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/runtime_impl.hpp"
#include "dataflow/locality.hpp"
#include "mote/dataflow.hpp"
#include "mote/mote.hpp"
#include "test_util.hpp"

// ---- Fault injection ----------------------------------------------------------------
//
// A test arms a countdown on its thread around one spawn: every allocation
// (operator new, replaced for this binary below, so it covers the library's
// allocations too) and every copy of a `fallible` or `fragile` object counts
// down, and the one that finds it at zero throws (std::bad_alloc, or
// injected_fault for a copy) and disarms it. -1: disarmed.
namespace {
constinit thread_local long fault_countdown = -1;

bool fault_due() noexcept {
  if (fault_countdown < 0) return false;
  return fault_countdown-- == 0;
}

void* allocate(std::size_t n, std::size_t align, bool nothrow) {
  if (fault_due()) {
    if (nothrow) return nullptr;
    throw std::bad_alloc();
  }
  void* p = nullptr;
  if (align <= alignof(std::max_align_t)) {
    p = std::malloc(n != 0 ? n : 1);
  } else if (posix_memalign(&p, align, n != 0 ? n : 1) != 0) {
    p = nullptr;
  }
  if (p == nullptr && !nothrow) throw std::bad_alloc();
  return p;
}
}  // namespace

// Every form, so that each allocation and its release meet in malloc/free
// whatever the sanitizer runtime would otherwise supply for some of them.
void* operator new(std::size_t n) { return allocate(n, 0, false); }
void* operator new[](std::size_t n) { return allocate(n, 0, false); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate(n, 0, true); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate(n, 0, true); }
void* operator new(std::size_t n, std::align_val_t a) {
  return allocate(n, static_cast<std::size_t>(a), false);
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return allocate(n, static_cast<std::size_t>(a), false);
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(n, static_cast<std::size_t>(a), true);
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(n, static_cast<std::size_t>(a), true);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

using mote_test::scaled;
using mote_test::workers;

struct injected_fault : std::runtime_error {
  injected_fault() : std::runtime_error("injected fault") {}
};

void copy_fault_point() {
  if (fault_due()) throw injected_fault();
}

// Captured by a callable: copying the callable is a fault point.
struct fallible {
  fallible() = default;
  fallible(const fallible&) { copy_fault_point(); }
  fallible(fallible&&) noexcept = default;
  fallible& operator=(const fallible&) = delete;
  fallible& operator=(fallible&&) = delete;
  ~fallible() = default;
};

// A reduction value whose copies are fault points (the identity is copied
// when a reduction begins, and into each private copy).
struct fragile {
  std::uint64_t v = 0;
  fragile() = default;
  explicit fragile(std::uint64_t x) : v(x) {}
  fragile(const fragile& o) : v(o.v) { copy_fault_point(); }
  fragile(fragile&& o) noexcept : v(o.v) {}
  fragile& operator=(const fragile& o) {
    copy_fault_point();
    v = o.v;
    return *this;
  }
  fragile& operator=(fragile&& o) noexcept {
    v = o.v;
    return *this;
  }
  ~fragile() = default;
  friend fragile operator+(fragile a, const fragile& b) {
    a.v += b.v;
    return a;
  }
  friend bool operator==(const fragile& a, const fragile& b) { return a.v == b.v; }
  friend std::ostream& operator<<(std::ostream& out, const fragile& f) { return out << f.v; }
};

// Calls spawn with its k-th fault point armed (none for k < 0); true when it
// threw the injected fault (its effect must then be nil), false when it went
// through (k was past its last fault point). Anything else it throws passes.
template <class Spawn>
bool spawn_with_fault(long k, Spawn&& spawn) {
  struct disarm {
    disarm(const disarm&) = delete;
    disarm& operator=(const disarm&) = delete;
    explicit disarm(long at) { fault_countdown = at; }
    ~disarm() { fault_countdown = -1; }
  } armed(k);
  try {
    spawn();
  } catch (const std::bad_alloc&) {
    return true;
  } catch (const injected_fault&) {
    return true;
  }
  return false;
}

using mote_test::hang_guard;

// ---- Fixed patterns ---------------------------------------------------------------

TEST(Dataflow, OutThenInThenInout) {
  mote::runtime rt(workers(2));
  rt.run([] {
    for (int rep = 0; rep < 200; ++rep) {
      mote::dataflow df;
      long a = 0, b = 1, c = 0;
      df.spawn(mote::out(a), [&] { a = 2; });
      df.spawn(mote::in(a), mote::inout(b), [&] { b += a; });
      df.spawn(mote::in(a), mote::in(b), mote::out(c), [&] { c = a * b; });
      df.spawn(mote::inout(a), [&] { a = 100; });
      df.wait();
      ASSERT_EQ(b, 3);
      ASSERT_EQ(c, 6);
      ASSERT_EQ(a, 100);
    }
  });
}

TEST(Dataflow, LongChainRunsInOrder) {
  mote::runtime rt(workers(2));
  const long n = scaled(20000, 4);
  std::vector<long> order;
  order.reserve(static_cast<std::size_t>(n));
  rt.run([&] {
    mote::dataflow df;
    unsigned long x = 0;
    for (long i = 0; i < n; ++i) {
      df.spawn(mote::inout(x), [&, i] {
        order.push_back(i);  // no lock: the chain excludes
        x = x * 3 + static_cast<unsigned long>(i);
      });
    }
    df.wait();
  });
  ASSERT_EQ(static_cast<long>(order.size()), n);
  for (long i = 0; i < n; ++i) ASSERT_EQ(order[static_cast<std::size_t>(i)], i);
}

TEST(Dataflow, ManyReadersThenOneWriter) {
  // A long run of `in`s is one group: readied by a cascade of messages (the
  // mailbox, not recursion); the writer waits for all of them.
  mote::runtime rt(workers(2));
  const long n = scaled(50000, 5);
  rt.run([&] {
    mote::dataflow df;
    long x = 0;
    std::atomic<long> reads{0};
    std::atomic<long> wrong{0};
    df.spawn(mote::out(x), [&] { x = 7; });
    for (long i = 0; i < n; ++i) {
      df.spawn(mote::in(x), [&] {
        if (x != 7) wrong.fetch_add(1);
        reads.fetch_add(1, std::memory_order_relaxed);
      });
    }
    long seen_reads = -1;
    df.spawn(mote::out(x), [&] {
      seen_reads = reads.load();
      x = 8;
    });
    df.wait();
    EXPECT_EQ(wrong.load(), 0);
    EXPECT_EQ(seen_reads, n);
    EXPECT_EQ(x, 8);
  });
}

TEST(Dataflow, RangesAndTheSameRegionTwiceInOneTask) {
  mote::runtime rt(workers(2));
  rt.run([] {
    std::vector<int> v(64, 1), w(64, 0);
    mote::dataflow df;
    df.spawn(mote::inout(v.data(), v.size()), [&] {
      for (int& x : v) x *= 2;
    });
    // in and out of one region in one task: one inout access (no self-wait).
    df.spawn(mote::in(v.data(), v.size()), mote::out(v.data(), v.size()), mote::out(w.data(), w.size()), [&] {
      for (std::size_t i = 0; i < v.size(); ++i) w[i] = v[i] + 1;
      v[0] = -1;
    });
    df.wait();
    EXPECT_EQ(w[5], 3);
    EXPECT_EQ(v[0], -1);
  });
}

TEST(Dataflow, CommutativeExcludesAndKeepsOrderAgainstOthers) {
  mote::runtime rt(workers(2));
  const int n = static_cast<int>(scaled(2000, 4));
  rt.run([&] {
    mote::dataflow df;
    long a = 0, b = 0;  // plain longs: commutative tasks must exclude each other
    std::atomic<int> inside_a{0};
    std::atomic<int> overlaps{0};
    df.spawn(mote::out(a), mote::out(b), [&] { a = b = 5; });
    for (int i = 0; i < n; ++i) {
      // Alternate the order of the two regions: tokens are taken in one
      // global order, so neither task waits for the other's.
      auto body = [&, i] {
        if (inside_a.fetch_add(1) != 0) overlaps.fetch_add(1);
        a += i;
        b += 2 * i;
        inside_a.fetch_sub(1);
      };
      if (i % 2 == 0) {
        df.spawn(mote::commutative(a), mote::commutative(b), body);
      } else {
        df.spawn(mote::commutative(b), mote::commutative(a), body);
      }
    }
    long seen_a = -1;
    df.spawn(mote::in(a), [&] { seen_a = a; });
    df.wait();
    const long sum = static_cast<long>(n) * (n - 1) / 2;
    EXPECT_EQ(overlaps.load(), 0);
    EXPECT_EQ(seen_a, 5 + sum);
    EXPECT_EQ(b, 5 + 2 * sum);
  });
}

TEST(Dataflow, ConcurrentRunsTogetherOrderedAgainstWrites) {
  mote::runtime rt(workers(2));
  rt.run([] {
    mote::dataflow df;
    std::atomic<long> hits{0};
    long plain = 0;
    df.spawn(mote::out(hits), [&] { hits.store(10); });
    for (int i = 0; i < 500; ++i) df.spawn(mote::concurrent(hits), [&] { hits.fetch_add(1); });
    df.spawn(mote::in(hits), mote::out(plain), [&] { plain = hits.load(); });
    df.wait();
    EXPECT_EQ(plain, 510);
  });
}

TEST(Dataflow, ReductionCombinesWhenALaterAccessNeedsIt) {
  mote::runtime rt(workers(2));
  rt.run([] {
    const int blocks = 300;
    std::vector<double> x(blocks * 16), y(blocks * 16);
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = static_cast<double>(i % 7);
      y[i] = static_cast<double>(i % 5);
    }
    double serial = 0;
    for (std::size_t i = 0; i < x.size(); ++i) serial += x[i] * y[i];
    mote::dataflow df;
    double sum = 1;  // the reduction starts from the target's value
    long product = 1;
    double seen = 0;
    for (int b = 0; b < blocks; ++b) {
      df.spawn(mote::in(&x[b * 16], 16), mote::reduction(std::plus<>{}, sum), [&, b](double& s) {
        for (int i = 0; i < 16; ++i) s += x[b * 16 + i] * y[b * 16 + i];
      });
    }
    df.spawn(mote::in(sum), [&] { seen = sum; });  // needs the combined value
    for (int k = 1; k <= 10; ++k) {
      df.spawn(mote::reduction(std::multiplies<>{}, product), [k](long& p) { p *= (k % 3) + 1; });
    }
    df.wait();  // ends the product's reduction
    EXPECT_DOUBLE_EQ(seen, serial + 1);
    EXPECT_EQ(product, 1L * 2 * 3 * 1 * 2 * 3 * 1 * 2 * 3 * 1 * 2);
  });
}

TEST(Dataflow, NestedScopesAreChildrenOfTheirTask) {
  mote::runtime rt(workers(2));
  rt.run([] {
    std::vector<long> v(8, 0);
    long total = 0;
    mote::dataflow df;
    df.spawn(mote::inout(v.data(), v.size()), [&] {
      mote::dataflow inner;  // its destructor waits
      for (std::size_t i = 0; i < v.size(); ++i) {
        inner.spawn(mote::inout(v[i]), [&, i] { v[i] = static_cast<long>(i) + 1; });
      }
      inner.spawn(mote::inout(v[0]), [&] { v[0] *= 10; });
    });
    df.spawn(mote::in(v.data(), v.size()), mote::out(total), [&] {
      for (long x : v) total += x;
    });
    df.wait();
    EXPECT_EQ(total, 10 + 2 + 3 + 4 + 5 + 6 + 7 + 8);
  });
}

// A task of another group that a data-flow body's wait runs on the body's
// worker is not inside the body: a scope it makes is top-level there, as it
// is on any other worker (on one worker it always runs there).
TEST(Dataflow, AScopeMadeInATaskRunDuringABodysWaitIsTopLevel) {
  for (unsigned n : {1u, 2u}) {
    mote::runtime rt(workers(n));
    rt.run([n] {
      long a = 0, b = 0;
      int top_level = 0;
      const int rounds = 20;
      mote::dataflow df;
      for (int r = 0; r < rounds; ++r) {
        df.spawn(mote::inout(a), [&] {
          mote::task_group g;
          g.spawn([&] {
            mote::dataflow other;  // b is no access of the body's: fine only at top level
            try {
              other.spawn(mote::inout(b), [&] { ++b; });
              other.wait();
              ++top_level;  // under the body's inout(a): only the group's tasks touch it
            } catch (const mote::usage_error&) {
            }
          });
          g.wait();
          ++a;
        });
      }
      df.wait();
      EXPECT_EQ(a, rounds) << n << " workers";
      EXPECT_EQ(top_level, rounds) << n << " workers";
      EXPECT_EQ(b, rounds) << n << " workers";
    });
  }
}

TEST(Dataflow, ANestedAccessOutsideItsParentIsReported) {
  mote::runtime rt(workers(2));
  rt.run([] {
    long a = 0, b = 0;
    bool out_of_region = false, writes_a_read = false;
    mote::dataflow df;
    df.spawn(mote::in(a), [&] {
      mote::dataflow inner;
      try {
        inner.spawn(mote::inout(b), [] {});
      } catch (const mote::usage_error&) {
        out_of_region = true;
      }
      try {
        inner.spawn(mote::out(a), [] {});
      } catch (const mote::usage_error&) {
        writes_a_read = true;
      }
      inner.spawn(mote::in(a), [] {});  // allowed
    });
    df.wait();
    EXPECT_TRUE(out_of_region);
    EXPECT_TRUE(writes_a_read);
  });
}

TEST(Dataflow, ExceptionSkipsDependentsOnlyAndWaitRethrows) {
  mote::runtime rt(workers(2));
  rt.run([] {
    for (int rep = 0; rep < 50; ++rep) {
      mote_test::lifetime::live.store(0);
      long a = 0, b = 0, c = 0, d = 0;
      std::atomic<int> ran{0};
      mote::dataflow df;
      df.spawn(mote::out(a), [&, keep = mote_test::lifetime(1)] {
        (void)keep;
        throw std::runtime_error("boom");
      });
      df.spawn(mote::in(a), mote::out(b), [&] { b = 1; ran.fetch_add(1); });        // depends: skipped
      df.spawn(mote::in(b), mote::out(c), [&] { c = 1; ran.fetch_add(1); });        // through b: skipped
      df.spawn(mote::out(d), [&, keep = mote_test::lifetime(2)] { d = 1; ran.fetch_add(1); });  // runs
      df.spawn(mote::inout(d), [&] { d += 1; ran.fetch_add(1); });                  // runs
      bool thrown = false;
      try {
        df.wait();
      } catch (const std::runtime_error& e) {
        thrown = std::string(e.what()) == "boom";
      }
      ASSERT_TRUE(thrown);
      ASSERT_EQ(ran.load(), 2);
      ASSERT_EQ(b, 0);
      ASSERT_EQ(c, 0);
      ASSERT_EQ(d, 2);
      ASSERT_EQ(mote_test::lifetime::live.load(), 0);  // closures destroyed
      // Reusable after the failure.
      df.spawn(mote::inout(a), [&] { a = 3; });
      df.wait();
      ASSERT_EQ(a, 3);
    }
  });
}

TEST(Dataflow, CancelSkipsWhatHasNotStartedAndTheScopeIsReusable) {
  mote::runtime rt(workers(2));
  rt.run([] {
    for (int rep = 0; rep < 20; ++rep) {
      mote_test::lifetime::live.store(0);
      long x = 0;
      std::atomic<int> ran{0};
      mote::dataflow df;
      // A chain: task 10 cancels the scope, so 11.. have not started and never run.
      for (int i = 0; i < 100; ++i) {
        df.spawn(mote::inout(x), [&, i, keep = mote_test::lifetime(i)] {
          (void)keep;
          ++x;
          ran.fetch_add(1);
          if (i == 10) df.cancel();
        });
      }
      ASSERT_EQ(df.wait(), mote::task_group_status::canceled);
      ASSERT_EQ(ran.load(), 11);
      ASSERT_EQ(x, 11);
      ASSERT_EQ(mote_test::lifetime::live.load(), 0);  // skipped closures destroyed too
      df.spawn(mote::inout(x), [&] { x = 0; });          // the cancellation ended at the wait
      ASSERT_EQ(df.wait(), mote::task_group_status::complete);
      ASSERT_EQ(x, 0);
    }
  });
}

TEST(Dataflow, AScopeInAGroupTaskIsCancelledWithTheGroup) {
  mote::runtime rt(workers(2));
  std::atomic<int> ran{0};
  std::atomic<bool> started{false};
  // The group is fed from this thread (outside the runtime), which then waits
  // for the scope's first task to start and cancels the group.
  mote::task_group g(rt);
  g.spawn([&] {
    long x = 0;
    mote::dataflow df;  // created in a task of g: bound to it
    df.spawn(mote::inout(x), [&] {
      started.store(true);
      while (!df.is_cancelled()) std::this_thread::yield();
    });
    for (int i = 0; i < 50; ++i) df.spawn(mote::inout(x), [&] { ran.fetch_add(1); });
    EXPECT_EQ(df.wait(), mote::task_group_status::canceled);
  });
  while (!started.load()) std::this_thread::yield();
  g.cancel();
  EXPECT_EQ(g.wait(), mote::task_group_status::canceled);
  EXPECT_EQ(ran.load(), 0);
}

TEST(Dataflow, SpawnFromAnotherThreadIsReported) {
  mote::runtime rt(workers(2));
  mote::dataflow df(rt);
  long a = 0;
  df.spawn(mote::out(a), [&] { a = 1; });
  bool reported = false;
  std::thread other([&] {
    try {
      df.spawn(mote::inout(a), [&] { a = 2; });
    } catch (const mote::usage_error&) {
      reported = true;
    }
  });
  other.join();
  bool wait_reported = false;
  std::thread waiter([&] {
    try {
      df.wait();
    } catch (const mote::usage_error&) {
      wait_reported = true;
    }
  });
  waiter.join();
  df.wait();
  EXPECT_TRUE(reported);
  EXPECT_TRUE(wait_reported);
  EXPECT_EQ(a, 1);
}

TEST(Dataflow, ScopeDestroyedWithTasksPendingWaitsForThem) {
  mote::runtime rt(workers(2));
  std::atomic<long> done{0};
  long x = 0;
  {
    mote::dataflow df(rt);
    for (int i = 0; i < 1000; ++i) df.spawn(mote::inout(x), [&] { ++x; done.fetch_add(1); });
  }  // no wait(): the destructor waits
  EXPECT_EQ(done.load(), 1000);
  EXPECT_EQ(x, 1000);
}

TEST(Dataflow, ADuplicateReductionIsReported) {
  mote::runtime rt(workers(1));
  mote::dataflow df(rt);
  long s = 0;
  EXPECT_THROW(df.spawn(mote::reduction(std::plus<>{}, s), mote::in(s), [](long&) {}), mote::usage_error);
  df.wait();
}

TEST(Dataflow, DumpDotWritesTheGraph) {
  mote::runtime rt(workers(2));
  mote::dataflow df(rt);
  df.record_graph();
  long a = 0, b = 0;
  df.spawn(mote::out(a), mote::named("make_a", [&] { a = 1; }));
  df.spawn(mote::in(a), mote::out(b), mote::named("a_to_b", [&] { b = a; }));
  df.spawn(mote::in(a), [] {});
  df.wait();
  std::ostringstream dot;
  df.dump_dot(dot);
  const std::string s = dot.str();
  EXPECT_NE(s.find("digraph"), std::string::npos);
  EXPECT_NE(s.find("make_a"), std::string::npos);
  EXPECT_NE(s.find("a_to_b"), std::string::npos);
  EXPECT_NE(s.find("t1 -> t2"), std::string::npos);
  EXPECT_NE(s.find("t1 -> t3"), std::string::npos);
  EXPECT_EQ(s.find("t2 -> t3"), std::string::npos);  // two readers: no edge
  EXPECT_EQ(b, 1);
}

TEST(Dataflow, SpawnAccessesWithARunTimeList) {
  mote::runtime rt(workers(2));
  rt.run([] {
    std::vector<long> v(10, 1);
    long sum = 0;
    mote::dataflow df;
    std::vector<mote::access> all;
    for (auto& x : v) all.push_back(mote::in(x));
    all.push_back(mote::out(sum));
    for (auto& x : v) df.spawn(mote::inout(x), [&x] { x += 1; });
    df.spawn_accesses(all, [&] {
      for (long x : v) sum += x;
    });
    df.wait();
    EXPECT_EQ(sum, 20);
  });
}

// A region at address nullptr (an empty vector's data(), a null pointer in an
// OpenMP depend clause) is a region like any other: its accesses are ordered,
// and their records freed at the wait (LeakSanitizer sees those in the ASan
// build). On one worker a task that nothing holds back runs newest first, so
// an unordered chain comes out reversed.
TEST(Dataflow, ANullRegionIsOrderedLikeAnyOther) {
  mote::runtime one(workers(1));
  one.run([] {
    std::vector<int> empty;
    ASSERT_EQ(empty.data(), nullptr);
    for (int rep = 0; rep < 3; ++rep) {
      mote::dataflow df;
      std::vector<int> order;
      for (int i = 0; i < 8; ++i) {
        df.spawn(mote::inout(empty.data(), empty.size()), [&order, i] { order.push_back(i); });
      }
      // Readers together, then a writer after all of them.
      for (int i = 8; i < 11; ++i) df.spawn(mote::in(empty.data(), 0), [&order, i] { order.push_back(i); });
      df.spawn(mote::out(empty.data(), 0), [&order] { order.push_back(11); });
      df.wait();
      ASSERT_EQ(order.size(), 12u);
      for (int i = 0; i < 8; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i) << "rep " << rep;
      EXPECT_EQ(order[11], 11) << "the writer ran before a reader of the null region";
    }
  });
  // Among many other regions (the table grows and rehashes around it), from
  // outside the runtime and on two workers: a chain on the null region that
  // checks its own order, beside chains on the others.
  mote::runtime two(workers(2));
  for (int rep = 0; rep < 20; ++rep) {
    mote::dataflow df(two);
    long seen = 0;  // plain: the chain excludes
    long errors = 0;
    std::vector<long> others(64, 0);
    const long n = scaled(200, 4);
    for (long i = 0; i < n; ++i) {
      df.spawn(mote::inout(static_cast<long*>(nullptr), 0), [&seen, &errors, i] {
        if (seen != i) ++errors;
        seen = i + 1;
      });
      long& x = others[static_cast<std::size_t>(i) % others.size()];
      df.spawn(mote::inout(x), [&x] { ++x; });
    }
    df.wait();
    EXPECT_EQ(errors, 0) << "rep " << rep;
    EXPECT_EQ(seen, n);
    long total = 0;
    for (long x : others) total += x;
    EXPECT_EQ(total, n);
  }
}

// A scope of runtime B made and spawned into on a worker of runtime A, then
// destroyed on B's worker after A has ended: its wait frees the records that
// were made on A's worker. Freeing one must not touch A's freed caches (a use
// after free that the ASan build reports) nor lose the block (LeakSanitizer).
TEST(Dataflow, RecordsMadeOnAnotherRuntimesWorkerAreFreedAfterItEnds) {
  mote::runtime b(workers(2));
  for (int rep = 0; rep < 5; ++rep) {
    std::optional<mote::dataflow> df;
    long x = 0, y = 0;
    const long n = scaled(200, 4);
    {
      mote::runtime a(workers(2));
      a.run([&] {
        df.emplace(b);
        for (long i = 0; i < n; ++i) {
          df->spawn(mote::inout(x), [&x] { ++x; });
          df->spawn(mote::in(x), mote::inout(y), [&y] { ++y; });
        }
        // No wait here: the chains' last records stay until the scope's wait.
      });
    }  // A's workers, and their record caches, are gone
    b.run([&] { df.reset(); });  // the implicit wait, on B's worker: seals, frees
    EXPECT_EQ(x, n);
    EXPECT_EQ(y, n);
  }
}

// ---- Spawns that throw ------------------------------------------------------------------

// The replaced operator new sees the library's own allocations: a spawn from
// outside the runtime allocates its record inside the library first.
TEST(DataflowFaults, TheLibrarysAllocationsAreFaultPoints) {
  mote::runtime rt(workers(2));
  mote::dataflow df(rt);
  long x = 0;
  bool threw = false;
  fault_countdown = 0;
  try {
    df.spawn(mote::commutative(x), [&] { ++x; });
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  fault_countdown = -1;
  EXPECT_TRUE(threw);
  df.spawn(mote::commutative(x), [&] { ++x; });
  df.wait();
  EXPECT_EQ(x, 1);
}

// What the tasks under test touch. Each spawns one task that reads `a`
// (whose writer is pending) and does one kind of thing that makes the spawn
// allocate or copy after its first access could have been linked.
struct sweep_state {
  long a = 0;
  fragile x;                                      // a reduction whose identity's copy may throw
  std::vector<long> v = std::vector<long>(4, 0);  // a reduction whose identity allocates
  long c = 0;                                     // a commutative access (its token is allocated)
  long regions[20] = {};                          // enough regions to grow the scope's table
  std::vector<mote::access> many;  // in(a) and out(regions[i]), built before the spawn
  std::atomic<int> ran{0};
};

struct add_each {
  std::vector<long> operator()(std::vector<long> acc, const std::vector<long>& part) const {
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] += part[i];
    return acc;
  }
};

struct sweep_case {
  const char* name;
  bool graph;  // record_graph() on: its allocations are fault points too
  void (*spawn)(mote::dataflow& df, sweep_state& st);
  void (*check)(sweep_state& st, bool spawned);
};

// The callables are lvalues, so that the spawn copies them (a fault point).
const sweep_case kSweepCases[] = {
    {"a reduction whose identity copy throws", false,
     [](mote::dataflow& df, sweep_state& st) {
       auto f = [&st, probe = fallible{}](fragile& s) {
         s.v += 5;
         st.ran.fetch_add(1);
       };
       df.spawn(mote::in(st.a), mote::reduction(std::plus<>{}, st.x, fragile(0)), f);
     },
     [](sweep_state& st, bool spawned) { EXPECT_EQ(st.x.v, spawned ? 5u : 0u); }},
    {"a reduction over a vector", false,
     [](mote::dataflow& df, sweep_state& st) {
       auto f = [&st, probe = fallible{}](std::vector<long>& s) {
         for (long& e : s) e += 1;
         st.ran.fetch_add(1);
       };
       df.spawn(mote::in(st.a), mote::reduction(add_each{}, st.v, std::vector<long>(4, 0)), f);
     },
     [](sweep_state& st, bool spawned) { EXPECT_EQ(st.v, std::vector<long>(4, spawned ? 1 : 0)); }},
    {"a commutative access", false,
     [](mote::dataflow& df, sweep_state& st) {
       auto f = [&st, probe = fallible{}] {
         st.c += 1;
         st.ran.fetch_add(1);
       };
       df.spawn(mote::in(st.a), mote::commutative(st.c), f);
     },
     [](sweep_state& st, bool spawned) { EXPECT_EQ(st.c, spawned ? 1 : 0); }},
    {"twenty-one regions", false,
     [](mote::dataflow& df, sweep_state& st) {
       auto f = [&st, probe = fallible{}] {
         for (long& r : st.regions) r = 1;
         st.ran.fetch_add(1);
       };
       df.spawn_accesses(st.many, f);
     },
     [](sweep_state& st, bool spawned) {
       for (long r : st.regions) EXPECT_EQ(r, spawned ? 1 : 0);
     }},
    {"a recorded graph", true,
     [](mote::dataflow& df, sweep_state& st) {
       auto f = [&st, probe = fallible{}] {
         st.c = 7;
         st.ran.fetch_add(1);
       };
       df.spawn(mote::in(st.a), mote::out(st.c), mote::in(st.regions[0]), f);
     },
     [](sweep_state& st, bool spawned) { EXPECT_EQ(st.c, spawned ? 7 : 0); }},
};

// Counts the nodes of a dump_dot() output.
int dot_nodes(const std::string& dot) {
  int n = 0;
  for (std::size_t at = dot.find("[label=\"task "); at != std::string::npos;
       at = dot.find("[label=\"task ", at + 1))
    ++n;
  return n;
}

// Spawns the case's task with its k-th fault point armed, for k = 0, 1, ...
// until the spawn goes through, each time while a writer of `a` is pending, and
// checks that a spawn that threw left the scope as if it had not been made:
// the next access to `a` follows the writer, wait() returns, the task never
// ran and its effects are absent, the graph holds no trace of it.
void sweep_spawn_faults(mote::runtime& rt, const sweep_case& c, bool inside) {
  const std::string where =
      std::string(c.name) + (inside ? ", spawned on a worker" : ", spawned from outside");
  int faults = 0;
  bool went_through = false;
  for (long k = 0; k < 200 && !went_through; ++k) {
    sweep_state st;
    st.many.push_back(mote::in(st.a));
    for (long& r : st.regions) st.many.push_back(mote::out(r));
    long seen_by_next = -1;
    std::string dot;
    auto scenario = [&] {
      mote::dataflow df(rt);
      if (c.graph) df.record_graph();
      // The writer cannot finish before the spawn under test is over (its
      // thread may not have taken it yet: either way the task under test is
      // linked behind it).
      std::atomic<bool> go{false};
      df.spawn(mote::out(st.a), [&] {
        while (!go.load()) std::this_thread::yield();
        st.a = 1;
      });
      went_through = !spawn_with_fault(k, [&] { c.spawn(df, st); });
      df.spawn(mote::inout(st.a), [&] {
        seen_by_next = st.a;
        st.a = 2;
      });
      go.store(true);
      hang_guard guard(where + ": wait() after a failed spawn");
      df.wait();
      std::ostringstream out;
      df.dump_dot(out);
      dot = out.str();
    };
    if (inside) {
      rt.run(scenario);
    } else {
      scenario();
    }
    if (!went_through) ++faults;
    SCOPED_TRACE(where + ", fault point " + std::to_string(k));
    EXPECT_EQ(seen_by_next, 1);
    EXPECT_EQ(st.a, 2);
    EXPECT_EQ(st.ran.load(), went_through ? 1 : 0);
    c.check(st, went_through);
    if (c.graph) EXPECT_EQ(dot_nodes(dot), went_through ? 3 : 2);
  }
  EXPECT_TRUE(went_through) << where;
  EXPECT_GT(faults, 0) << where;
}

TEST(DataflowFaults, ASpawnThatThrowsLeavesTheScopeAsBefore) {
  for (const mote::scheduler_policy policy :
       {mote::scheduler_policy::work_stealing, mote::scheduler_policy::delegation}) {
    mote::runtime_options options = workers(2);
    options.scheduler = policy;
    mote::runtime rt(options);
    for (const sweep_case& c : kSweepCases) {
      sweep_spawn_faults(rt, c, true);
      sweep_spawn_faults(rt, c, false);
    }
  }
}

// ---- Nesting under a reduction, spawns from inside the scope, minus ----------------

// A reduction task's target belongs to the reduction, whose other tasks run
// (and may combine into it) meanwhile: a nested scope may not touch it, not
// even to read. The task's other accesses nest as usual, and a nested
// reduction under a parent that writes the region is fine.
TEST(Dataflow, ANestedAccessToTheParentsReductionTargetIsRefused) {
  mote::runtime rt(workers(2));
  rt.run([] {
    for (int round = 0; round < 20; ++round) {
      long sum = 0;
      long parts[8] = {};
      std::atomic<int> refused{0}, accepted{0};
      mote::dataflow df;
      for (int p = 0; p < 8; ++p) {
        df.spawn(mote::reduction(std::plus<>{}, sum), mote::inout(parts[p]), [&, p](long& s) {
          s += 1;
          mote::dataflow inner;
          auto attempt = [&](auto&& spawn) {
            try {
              spawn();
              accepted.fetch_add(1);
            } catch (const mote::usage_error&) {
              refused.fetch_add(1);
            }
          };
          attempt([&] { inner.spawn(mote::inout(sum), [&] { sum = sum + 1; }); });
          attempt([&] { inner.spawn(mote::in(sum), [] {}); });
          attempt(
              [&] { inner.spawn(mote::reduction(std::plus<>{}, sum), [](long& t) { t += 1; }); });
          inner.spawn(mote::inout(parts[p]), [&, p] { parts[p] = p + 1; });
        });
      }
      long total = 0;
      std::vector<mote::access> reads = {mote::in(sum), mote::out(total)};
      for (long& part : parts) reads.push_back(mote::in(part));
      df.spawn_accesses(reads, [&] {
        total = sum;
        for (long part : parts) total += part;
      });
      df.wait();
      ASSERT_EQ(accepted.load(), 0) << "round " << round;
      ASSERT_EQ(refused.load(), 24) << "round " << round;
      ASSERT_EQ(sum, 8) << "round " << round;
      ASSERT_EQ(total, 8 + 36) << "round " << round;
    }
    long acc = 5;
    mote::dataflow df;
    df.spawn(mote::inout(acc), [&] {
      mote::dataflow inner;
      for (long i = 1; i <= 10; ++i)
        inner.spawn(mote::reduction(std::plus<>{}, acc), [i](long& s) { s += i; });
      inner.spawn(mote::inout(acc), [&] { acc *= 2; });
    });
    df.wait();
    EXPECT_EQ(acc, (5 + 55) * 2);
  });
}

// A task of a scope cannot spawn into that scope, whichever thread runs it,
// including the scope's own thread (a worker runs the scope's tasks while it
// waits): refused at the spawn, every time. The frame that created the scope
// still spawns.
TEST(Dataflow, ASpawnFromOneOfTheScopesTasksIsRefusedOnEveryThread) {
  for (const unsigned n : {1u, 2u}) {
    mote::runtime rt(workers(n));
    auto check = [n](mote::dataflow& df, const char* where) {
      constexpr int kTasks = 100;
      long x = 0;
      std::atomic<int> refused{0}, continued{0};
      for (int i = 0; i < kTasks; ++i) {
        df.spawn(mote::inout(x), [&] {
          ++x;
          try {
            df.spawn(mote::inout(x), [&] { continued.fetch_add(1); });
          } catch (const mote::usage_error&) {
            refused.fetch_add(1);
          }
        });
      }
      df.wait();
      EXPECT_EQ(refused.load(), kTasks) << where << ", " << n << " workers";
      EXPECT_EQ(continued.load(), 0) << where << ", " << n << " workers";
      EXPECT_EQ(x, kTasks) << where << ", " << n << " workers";
      df.spawn(mote::inout(x), [&] { ++x; });
      df.wait();
      EXPECT_EQ(x, kTasks + 1) << where << ", " << n << " workers";
    };
    {
      mote::dataflow df(rt);
      check(df, "scope made outside the runtime");
    }
    rt.run([&] {
      mote::dataflow df;
      check(df, "scope made on a worker");
    });
  }
}

// Nor can a loop body or a task of another group, though the scope's own
// thread runs them (one worker: every one of them runs there).
TEST(Dataflow, ASpawnFromALoopBodyOrAnotherGroupsTaskIsRefused) {
  for (const unsigned n : {1u, 2u}) {
    mote::runtime rt(workers(n));
    rt.run([n] {
      long x = 0;
      std::atomic<int> refused{0};
      mote::dataflow df;
      auto attempt = [&] {
        try {
          df.spawn(mote::inout(x), [&] { ++x; });
        } catch (const mote::usage_error&) {
          refused.fetch_add(1);
        }
      };
      mote::parallel_for(0, 16, [&](int) { attempt(); });
      mote::task_group g;
      for (int i = 0; i < 8; ++i) g.spawn(attempt);
      g.wait();
      df.wait();
      EXPECT_EQ(refused.load(), 24) << n << " workers";
      EXPECT_EQ(x, 0) << n << " workers";
    });
  }
}

// With std::minus the copies start at 0, the tasks subtract from them, and
// the copies are added to the target, as OpenMP's `-` reduction has it.
TEST(Dataflow, AMinusReductionSubtractsFromTheTarget) {
  mote::runtime rt(workers(2));
  rt.run([] {
    mote::dataflow df;
    long s = 100;
    for (long i = 1; i <= 4; ++i)
      df.spawn(mote::reduction(std::minus<>{}, s), [i](long& p) { p -= i; });
    long seen = 0;
    df.spawn(mote::in(s), [&] { seen = s; });
    long t = 1000;
    for (long i = 1; i <= 100; ++i)
      df.spawn(mote::reduction(std::minus<long>{}, t), [i](long& p) { p -= i; });
    df.wait();
    EXPECT_EQ(seen, 90);
    EXPECT_EQ(t, 1000 - 5050);
  });
}

// A reduction operator whose combine throws: the scope's wait delivers the
// exception, and only what depends on the reduction's result is skipped, as
// after a failed task. Its combine runs where the reduction ends: at the
// wait (no later access), in the spawn of a later access (every reduction
// task has ended), or at the end of the last reduction task (the later
// access came first). Before, each of these ended the process.
struct combine_failure : std::runtime_error {
  combine_failure() : std::runtime_error("combine failed") {}
};
struct failing_plus {
  long operator()(long, long) const { throw combine_failure(); }
};

enum class combine_site { wait, spawn, task_end };

void a_combine_that_throws(combine_site site) {
  using namespace std::chrono_literals;
  mote::runtime rt(workers(2));
  for (int rep = 0; rep < 20; ++rep) {
    mote_test::lifetime::live.store(0);
    long sum = 0, other = 0, seen = -1;
    std::atomic<bool> go{site != combine_site::task_end};
    std::atomic<int> bodies{0}, skipped_ran{0};
    mote::dataflow df(rt);
    for (long k = 1; k <= 4; ++k) {
      df.spawn(mote::reduction(failing_plus{}, sum, 0L), [&, k, keep = mote_test::lifetime(k)](long& s) {
        (void)keep;
        const auto limit = std::chrono::steady_clock::now() + 60s;
        while (!go.load() && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
        s += k;
        bodies.fetch_add(1);
      });
    }
    df.spawn(mote::inout(other), [&] { other += 1; });  // independent: runs
    if (site == combine_site::spawn) {
      const auto limit = std::chrono::steady_clock::now() + 60s;
      while (bodies.load() < 4 && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
      ASSERT_EQ(bodies.load(), 4);
      // Only widens the window for the reduction tasks' ends to pass (the
      // test holds without it: the combine then runs at the last task's end).
      std::this_thread::sleep_for(1ms);
    }
    if (site != combine_site::wait) {
      // Need the combined value: skipped, and what follows them through sum too.
      df.spawn(mote::in(sum), [&, keep = mote_test::lifetime(10)] {
        (void)keep;
        seen = sum;
        skipped_ran.fetch_add(1);
      });
      df.spawn(mote::inout(sum), mote::inout(other), [&] { skipped_ran.fetch_add(1); });
    }
    go.store(true);
    df.spawn(mote::inout(other), [&] { other += 10; });  // after a skipped task on `other` (task_end, spawn)
    bool thrown = false;
    try {
      df.wait();
    } catch (const combine_failure&) {
      thrown = true;
    }
    ASSERT_TRUE(thrown) << "site " << static_cast<int>(site) << ", rep " << rep;
    EXPECT_EQ(bodies.load(), 4);
    EXPECT_EQ(skipped_ran.load(), 0);
    EXPECT_EQ(seen, -1);
    // The second task on `other` follows one that was skipped: skipped too.
    EXPECT_EQ(other, site == combine_site::wait ? 11 : 1);
    EXPECT_EQ(mote_test::lifetime::live.load(), 0);  // every closure destroyed
    // The scope goes on: a reduction that works, and the failure is not reported twice.
    sum = 5;
    for (long k = 1; k <= 3; ++k) df.spawn(mote::reduction(std::plus<>{}, sum), [k](long& s) { s += k; });
    EXPECT_NO_THROW(df.wait());
    EXPECT_EQ(sum, 11);
  }
}

TEST(DataflowReductionFailure, ACombineThatThrowsAtTheWait) { a_combine_that_throws(combine_site::wait); }
TEST(DataflowReductionFailure, ACombineThatThrowsInALaterSpawn) { a_combine_that_throws(combine_site::spawn); }
TEST(DataflowReductionFailure, ACombineThatThrowsAtTheLastTasksEnd) { a_combine_that_throws(combine_site::task_end); }

// ---- Random task graphs against a serial run ------------------------------------------

struct rtask {
  struct acc {
    int obj;
    mote::access_type type;
  };
  int id = 0;
  std::vector<acc> accs;  // at most one reduction
  bool throws = false;
  bool refused = false;  // touches a region its parent task reduces: its spawn throws usage_error
  long fault = -1;       // >= 0: the fault point of its spawn that is armed
  std::vector<rtask> children;  // a nested scope inside the body
};

constexpr int kObjects = 24;

// What became of each spawn.
enum class fate : char { not_reached, spawned, refused, faulted };

std::ostream& operator<<(std::ostream& out, fate f) {
  static const char* names[] = {"not reached", "spawned", "refused", "faulted"};
  return out << names[static_cast<int>(f)];
}

std::uint64_t step(std::uint64_t h, std::uint64_t v) {
  return (h ^ v) * 0x100000001b3ull;
}

struct generator {
  std::mt19937_64 rng;
  int next_id = 0;
  double throw_rate;
  double fault_rate = 0;

  mote::access_type any_type() {
    static const mote::access_type all[] = {mote::access_type::in, mote::access_type::out,
                                            mote::access_type::inout, mote::access_type::commutative,
                                            mote::access_type::concurrent, mote::access_type::reduction};
    return all[rng() % 6];
  }

  // parent: the accesses of the task whose nested scope this is; top level
  // (nullptr): anything.
  std::vector<rtask> make(int count, const std::vector<rtask::acc>* parent, int depth) {
    std::vector<rtask> out;
    for (int k = 0; k < count; ++k) {
      rtask t;
      t.id = next_id++;
      t.throws = std::uniform_real_distribution<double>(0, 1)(rng) < throw_rate;
      const int want = 1 + static_cast<int>(rng() % 3);
      bool has_red = false;
      for (int a = 0; a < want; ++a) {
        rtask::acc x{};
        bool off_limits = false;
        if (parent == nullptr) {
          x.obj = static_cast<int>(rng() % kObjects);
          x.type = any_type();
        } else {
          const rtask::acc& p = (*parent)[rng() % parent->size()];
          x.obj = p.obj;
          switch (p.type) {
            case mote::access_type::in: x.type = mote::access_type::in; break;
            case mote::access_type::concurrent: x.type = mote::access_type::concurrent; break;
            case mote::access_type::commutative:
              // The parent's group adds in any order: its children may only add too.
              x.type = rng() % 2 ? mote::access_type::commutative : mote::access_type::concurrent;
              break;
            case mote::access_type::reduction:
              // The reduction's target is off limits to the parent's children.
              x.type = any_type();
              off_limits = true;
              break;
            default:  // out, inout: anything, a nested reduction included
              x.type = any_type();
          }
        }
        bool repeat = false;
        for (const auto& y : t.accs) repeat = repeat || y.obj == x.obj;
        if (repeat) continue;  // one access per object per task (the merging has its own test)
        if (x.type == mote::access_type::reduction && has_red) continue;  // one reduction per task
        has_red = has_red || x.type == mote::access_type::reduction;
        t.refused = t.refused || off_limits;
        t.accs.push_back(x);
      }
      if (!t.refused && depth < 2 && rng() % 6 == 0) {
        t.children = make(1 + static_cast<int>(rng() % 5), &t.accs, depth + 1);
      }
      if (!t.refused && std::uniform_real_distribution<double>(0, 1)(rng) < fault_rate) {
        t.fault = static_cast<long>(rng() % 12);
      }
      out.push_back(std::move(t));
    }
    return out;
  }
};

struct world {
  // fragile: a copy of a reduction's identity is a fault point.
  std::vector<fragile> obj = std::vector<fragile>(kObjects);
  std::vector<std::uint64_t> seen;  // per task id: what its `in`s read
  std::vector<int> ran;             // per task id
  std::vector<fate> fates;          // per task id: what its spawn did (the parallel run's)
};

// The task's own work, the same in both runs. Reductions go through `red`.
void body(world& w, const rtask& t, std::uint64_t* red) {
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& a : t.accs) {
    std::uint64_t& x = w.obj[static_cast<std::size_t>(a.obj)].v;
    switch (a.type) {
      case mote::access_type::in: h = step(h, x); break;
      case mote::access_type::out: x = static_cast<std::uint64_t>(t.id) * 7 + 1; break;
      case mote::access_type::inout: x = x * 31 + static_cast<std::uint64_t>(t.id); break;
      case mote::access_type::commutative: x += static_cast<std::uint64_t>(t.id) + 1; break;  // excluded: plain
      case mote::access_type::concurrent:
        std::atomic_ref<std::uint64_t>(x).fetch_add(static_cast<std::uint64_t>(t.id) + 1, std::memory_order_relaxed);
        break;
      case mote::access_type::reduction: *red += static_cast<std::uint64_t>(t.id) + 1; break;
    }
  }
  w.seen[static_cast<std::size_t>(t.id)] = h;
  w.ran[static_cast<std::size_t>(t.id)] = 1;
}

// The serial model: program order, with the runtime's failure rule (a task
// is skipped when a task of an earlier group on any of its regions failed or
// was skipped), over the spawns that went through in the parallel run
// (`fates`: the others never happened). Sets *threw when any task threw.
struct model_chain {
  mote::access_type type;
  bool open = false;        // a group is open
  bool poison_before = false;  // failure in an earlier group
  bool fail_in_group = false;
};

bool same_group(mote::access_type a, mote::access_type b) {
  return a == b && a != mote::access_type::out && a != mote::access_type::inout;
}

void run_serial(world& w, const std::vector<fate>& fates, const std::vector<rtask>& tasks,
                bool* threw) {
  std::vector<model_chain> chain(kObjects);
  bool any_throw = false;
  for (const auto& t : tasks) {
    if (fates[static_cast<std::size_t>(t.id)] != fate::spawned) continue;
    bool poisoned = false;
    for (const auto& a : t.accs) {
      model_chain& c = chain[static_cast<std::size_t>(a.obj)];
      if (c.open && same_group(c.type, a.type)) {
        poisoned = poisoned || c.poison_before;
      } else {
        if (c.open) c.poison_before = c.poison_before || c.fail_in_group;
        c.open = true;
        c.type = a.type;
        c.fail_in_group = false;
        poisoned = poisoned || c.poison_before;
      }
    }
    bool failed = poisoned;
    if (!poisoned) {
      if (t.throws) {
        failed = true;
        any_throw = true;
      } else {
        std::uint64_t red = 0;
        body(w, t, &red);
        for (const auto& a : t.accs) {
          if (a.type == mote::access_type::reduction)
            w.obj[static_cast<std::size_t>(a.obj)].v += red;
        }
        bool child_threw = false;
        run_serial(w, fates, t.children, &child_threw);
        if (child_threw) {
          failed = true;
          any_throw = true;
        }
      }
    }
    if (failed) {
      for (const auto& a : t.accs) chain[static_cast<std::size_t>(a.obj)].fail_in_group = true;
    }
  }
  *threw = any_throw;
}

mote::access make_access(world& w, const rtask::acc& a) {
  fragile& x = w.obj[static_cast<std::size_t>(a.obj)];
  switch (a.type) {
    case mote::access_type::in: return mote::in(x);
    case mote::access_type::out: return mote::out(x);
    case mote::access_type::inout: return mote::inout(x);
    case mote::access_type::commutative: return mote::commutative(x);
    default: return mote::concurrent(x);
  }
}

void spawn_all(mote::dataflow& df, world& w, const std::vector<rtask>& tasks);

// The callable of t; a copy of it is a fault point. red: the reduction's
// private copy, or nullptr.
struct rtask_fn {
  world* w;
  const rtask* t;
  fallible probe;
  void run(std::uint64_t* red) const {
    if (t->throws) throw std::runtime_error("task " + std::to_string(t->id));
    body(*w, *t, red);
    if (!t->children.empty()) {
      mote::dataflow inner;
      spawn_all(inner, *w, t->children);
    }  // waits; rethrows a child's exception
  }
};

// Spawns t, the callable last (copied, not moved: a fault point), with its
// fault point armed; records what became of the spawn.
void spawn_one(mote::dataflow& df, world& w, const rtask& t) {
  const rtask_fn fn{&w, &t, {}};
  const auto plain = [fn] { fn.run(nullptr); };
  const auto reducing = [fn](fragile& s) { fn.run(&s.v); };
  fragile* target = nullptr;
  std::vector<mote::access> others;
  for (const auto& a : t.accs) {
    if (a.type == mote::access_type::reduction) {
      target = &w.obj[static_cast<std::size_t>(a.obj)];
    } else {
      others.push_back(make_access(w, a));
    }
  }
  auto spawn = [&] {
    if (target == nullptr) {
      df.spawn_accesses(others, plain);
      return;
    }
    const auto r = mote::reduction(std::plus<>{}, *target);
    switch (others.size()) {
      case 0:
        df.spawn(r, reducing);
        break;
      case 1:
        df.spawn(r, others[0], reducing);
        break;
      default:
        df.spawn(r, others[0], others[1], reducing);
        break;
    }
  };
  fate& result = w.fates[static_cast<std::size_t>(t.id)];
  try {
    result = spawn_with_fault(t.fault, spawn) ? fate::faulted : fate::spawned;
  } catch (const mote::usage_error&) {
    result = fate::refused;
  }
}

void spawn_all(mote::dataflow& df, world& w, const std::vector<rtask>& tasks) {
  for (const auto& t : tasks) spawn_one(df, w, t);
}

// On a mismatch: the first task whose reads differ, and every task before it
// that touched one of its objects (flattened, nested tasks indented).
void flatten(const std::vector<rtask>& tasks, int depth, std::vector<std::pair<const rtask*, int>>& out) {
  for (const auto& t : tasks) {
    out.emplace_back(&t, depth);
    flatten(t.children, depth + 1, out);
  }
}

std::string explain(const std::vector<rtask>& program, const world& expect, const world& got) {
  std::vector<std::pair<const rtask*, int>> all;
  flatten(program, 0, all);
  static const char* names[] = {"in", "out", "inout", "commutative", "concurrent", "reduction"};
  std::ostringstream s;
  for (const auto& [t, depth] : all) {
    const auto id = static_cast<std::size_t>(t->id);
    if (got.seen[id] == expect.seen[id]) continue;
    s << "task " << t->id << " read differently; history of its objects:\n";
    for (const auto& [u, d] : all) {
      bool touches = false;
      for (const auto& a : u->accs) {
        for (const auto& b : t->accs) touches = touches || a.obj == b.obj;
      }
      if (!touches) continue;
      const fate f = got.fates[static_cast<std::size_t>(u->id)];
      s << std::string(static_cast<std::size_t>(2 * d), ' ') << "task " << u->id
        << (u->throws ? " throws" : "");
      if (f != fate::spawned) s << " " << f;
      s << ":";
      for (const auto& a : u->accs) s << " " << names[static_cast<int>(a.type)] << "(" << a.obj << ")";
      s << "\n";
      if (u == t) break;
    }
    break;
  }
  for (int o = 0; o < kObjects; ++o) {
    if (got.obj[static_cast<std::size_t>(o)] != expect.obj[static_cast<std::size_t>(o)]) s << "object " << o << " differs\n";
  }
  return s.str();
}

// Checks each spawn's fate against what the program says it must be: a
// refused task was refused, a task without an armed fault went through,
// one with a fault either threw it or went through (the fault point was
// past its last). Counts the refusals and the faults.
void check_fates(const std::vector<rtask>& tasks, const world& got, std::uint64_t seed,
                 long* refused, long* faulted) {
  for (const auto& t : tasks) {
    const fate f = got.fates[static_cast<std::size_t>(t.id)];
    if (f == fate::not_reached) continue;  // its parent did not run
    if (t.refused) {
      EXPECT_EQ(f, fate::refused) << "task " << t.id << ", seed " << seed;
    } else if (t.fault < 0) {
      EXPECT_EQ(f, fate::spawned) << "task " << t.id << ", seed " << seed;
    } else {
      EXPECT_NE(f, fate::refused) << "task " << t.id << ", seed " << seed;
    }
    *refused += f == fate::refused ? 1 : 0;
    *faulted += f == fate::faulted ? 1 : 0;
    check_fates(t.children, got, seed, refused, faulted);
  }
}

// Random programs: the final state, and every value every task read, must
// equal a serial run of the spawns that went through, in program order.
// fault_rate: the share of spawns with a fault point armed.
void random_graphs(unsigned num_workers, double throw_rate, bool from_outside, int rounds,
                   mote::scheduler_policy policy = mote::scheduler_policy::work_stealing,
                   double fault_rate = 0,
                   mote::dataflow_locality locality = mote::dataflow_locality::automatic) {
  mote::runtime_options options = workers(num_workers);
  options.scheduler = policy;
  mote::runtime rt(options);
  std::mt19937_64 seeds(mote_test::test_seed() + num_workers * 7 + (from_outside ? 1 : 0) +
                        static_cast<std::uint64_t>(throw_rate * 1000) +
                        static_cast<std::uint64_t>(fault_rate * 100));
  long refused = 0, faulted = 0;
  for (int round = 0; round < rounds; ++round) {
    const std::uint64_t seed = seeds();
    generator gen{std::mt19937_64(seed), 0, throw_rate, fault_rate};
    const auto program = gen.make(static_cast<int>(scaled(300, 3)), nullptr, 0);
    const auto tasks = static_cast<std::size_t>(gen.next_id);
    world got;
    got.seen.assign(tasks, 0);
    got.ran.assign(tasks, 0);
    got.fates.assign(tasks, fate::not_reached);

    bool got_throw = false;
    auto run = [&] {
      mote::dataflow df(rt);
      df.set_locality(locality);
      spawn_all(df, got, program);
      hang_guard guard("the wait of a random program, seed " + std::to_string(seed));
      try {
        df.wait();
      } catch (const std::runtime_error&) {
        got_throw = true;
      }
    };
    if (from_outside) {
      run();
    } else {
      rt.run(run);
    }

    world expect;
    expect.seen.assign(tasks, 0);
    expect.ran.assign(tasks, 0);
    bool expect_throw = false;
    run_serial(expect, got.fates, program, &expect_throw);

    check_fates(program, got, seed, &refused, &faulted);
    if (got.seen != expect.seen || got.obj != expect.obj) ADD_FAILURE() << explain(program, expect, got);
    ASSERT_EQ(got_throw, expect_throw) << "seed " << seed;
    ASSERT_EQ(got.ran, expect.ran) << "seed " << seed;
    ASSERT_EQ(got.obj, expect.obj) << "seed " << seed;
    ASSERT_EQ(got.seen, expect.seen) << "seed " << seed;
  }
  // The programs exercise what they are meant to: refused nested accesses,
  // and faults when armed.
  EXPECT_GT(refused, 0);
  if (fault_rate > 0) EXPECT_GT(faulted, 0);
}

TEST(DataflowRandom, TwoWorkers) { random_graphs(2, 0.0, false, static_cast<int>(scaled(300, 6))); }
TEST(DataflowRandom, FromAThreadOutsideTheRuntime) { random_graphs(2, 0.01, true, static_cast<int>(scaled(100, 5))); }
TEST(DataflowRandom, OversubscribedFourWorkers) { random_graphs(4, 0.01, false, static_cast<int>(scaled(100, 5))); }
TEST(DataflowRandom, WithFailures) { random_graphs(2, 0.03, false, static_cast<int>(scaled(300, 6))); }
TEST(DataflowRandom, OneWorker) { random_graphs(1, 0.02, false, static_cast<int>(scaled(100, 5))); }
// A fifth of the spawns throw at a random fault point (an allocation, the
// callable's copy, a reduction identity's copy). From a thread outside the
// runtime a task ready at its spawn goes into the injection queue, which
// links it in without allocating.
TEST(DataflowRandom, FaultsInSpawn) {
  random_graphs(2, 0.01, false, static_cast<int>(scaled(150, 6)),
                mote::scheduler_policy::work_stealing, 0.2);
}
TEST(DataflowRandom, FaultsInSpawnFromAThreadOutsideTheRuntime) {
  random_graphs(2, 0.01, true, static_cast<int>(scaled(60, 5)),
                mote::scheduler_policy::work_stealing, 0.2);
}

// Ready tasks kept on the worker that readied them (no thief sees them), and
// always shared: the same programs, the same answers.
constexpr auto kKeep = mote::dataflow_locality::keep;
constexpr auto kShare = mote::dataflow_locality::share;
constexpr auto kStealing = mote::scheduler_policy::work_stealing;
TEST(DataflowRandom, KeptLocal) { random_graphs(2, 0.0, false, static_cast<int>(scaled(200, 5)), kStealing, 0, kKeep); }
TEST(DataflowRandom, KeptLocalFromAThreadOutsideTheRuntime) {
  random_graphs(2, 0.01, true, static_cast<int>(scaled(60, 4)), kStealing, 0, kKeep);
}
TEST(DataflowRandom, KeptLocalOversubscribedWithFailures) {
  random_graphs(4, 0.03, false, static_cast<int>(scaled(60, 4)), kStealing, 0, kKeep);
}
TEST(DataflowRandom, KeptLocalFaultsInSpawn) {
  random_graphs(2, 0.01, false, static_cast<int>(scaled(60, 4)), kStealing, 0.2, kKeep);
}
TEST(DataflowRandom, Shared) { random_graphs(2, 0.01, false, static_cast<int>(scaled(200, 5)), kStealing, 0, kShare); }

// The same under the delegation scheduler (SPSC add-queues, one ready queue
// behind a delegation lock).
constexpr auto kDelegation = mote::scheduler_policy::delegation;
TEST(DataflowRandomDelegation, TwoWorkers) {
  random_graphs(2, 0.0, false, static_cast<int>(scaled(150, 6)), kDelegation);
}
TEST(DataflowRandomDelegation, FromAThreadOutsideTheRuntime) {
  random_graphs(2, 0.01, true, static_cast<int>(scaled(60, 5)), kDelegation);
}
TEST(DataflowRandomDelegation, OversubscribedFourWorkers) {
  random_graphs(4, 0.01, false, static_cast<int>(scaled(60, 5)), kDelegation);
}
TEST(DataflowRandomDelegation, WithFailures) {
  random_graphs(2, 0.03, false, static_cast<int>(scaled(150, 6)), kDelegation);
}
TEST(DataflowRandomDelegation, FaultsInSpawn) {
  random_graphs(2, 0.01, false, static_cast<int>(scaled(100, 6)), kDelegation, 0.2);
}
TEST(DataflowRandomDelegation, FaultsInSpawnFromAThreadOutsideTheRuntime) {
  random_graphs(2, 0.01, true, static_cast<int>(scaled(60, 5)), kDelegation, 0.2);
}
TEST(DataflowRandomDelegation, KeptLocal) {
  random_graphs(2, 0.01, false, static_cast<int>(scaled(100, 4)), kDelegation, 0, kKeep);
}
TEST(DataflowRandomDelegation, KeptLocalFromAThreadOutsideTheRuntime) {
  random_graphs(2, 0.01, true, static_cast<int>(scaled(60, 4)), kDelegation, 0, kKeep);
}

// And under the mesh (XQueue's N x N SPSC cells, round-robin, steal requests).
constexpr auto kMesh = mote::scheduler_policy::mesh;
TEST(DataflowRandomMesh, TwoWorkers) { random_graphs(2, 0.0, false, static_cast<int>(scaled(150, 6)), kMesh); }
TEST(DataflowRandomMesh, FromAThreadOutsideTheRuntime) {
  random_graphs(2, 0.01, true, static_cast<int>(scaled(60, 5)), kMesh);
}
TEST(DataflowRandomMesh, OversubscribedFourWorkers) {
  random_graphs(4, 0.01, false, static_cast<int>(scaled(60, 5)), kMesh);
}
TEST(DataflowRandomMesh, FaultsInSpawn) { random_graphs(2, 0.01, false, static_cast<int>(scaled(100, 6)), kMesh, 0.2); }
TEST(DataflowRandomMesh, KeptLocal) {
  random_graphs(2, 0.01, false, static_cast<int>(scaled(100, 4)), kMesh, 0, kKeep);
}

}  // namespace

// ---- Events: a task's end waits for what its body started ---------------------------

namespace {

// Fulfils events on a thread of its own, in the order they arrive, after a
// pause each: the successors must wait for every one.
class fulfiller {
 public:
  fulfiller() : thread_([this] { loop(); }) {}
  ~fulfiller() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  fulfiller(const fulfiller&) = delete;
  fulfiller& operator=(const fulfiller&) = delete;
  void hand(mote::dataflow_event ev, std::function<void()> before) {
    {
      std::lock_guard<std::mutex> lock(m_);
      q_.push_back({std::move(ev), std::move(before)});
    }
    cv_.notify_all();
  }

 private:
  struct item {
    mote::dataflow_event ev;
    std::function<void()> before;
  };
  void loop() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !q_.empty(); });
      if (q_.empty()) return;
      item it = std::move(q_.front());
      q_.erase(q_.begin());
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (it.before) it.before();
      it.ev.fulfill();
      lock.lock();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<item> q_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

TEST(DataflowEvents, SuccessorsWaitForTheEventNotTheBody) {
  mote::runtime rt(workers(2));
  for (int round = 0; round < static_cast<int>(scaled(20, 3)); ++round) {
    fulfiller outside;
    std::vector<long> cells(8, 0);
    std::atomic<int> delivered{0};
    {
      mote::dataflow df(rt);
      for (int step = 0; step < 20; ++step) {
        for (std::size_t c = 0; c < cells.size(); ++c) {
          long* cell = &cells[c];
          df.spawn(mote::inout(*cell), [&, cell, step] {
            // The previous step's value arrived through an event.
            if (*cell != step) throw std::logic_error("ran before its predecessor's event");
            if (step % 2 == 0) {
              // The "transfer" writes the cell; the task returns at once.
              outside.hand(mote::dataflow_event::open(), [cell, &delivered] {
                ++*cell;
                delivered.fetch_add(1, std::memory_order_relaxed);
              });
            } else {
              ++*cell;
            }
          });
        }
      }
      df.wait();
    }
    for (long v : cells) EXPECT_EQ(v, 20);
    EXPECT_EQ(delivered.load(), 8 * 10);
  }
}

TEST(DataflowEvents, FulfilledInsideTheBodyOrManyPerTask) {
  mote::runtime rt(workers(2));
  fulfiller outside;
  long x = 0;
  mote::dataflow df(rt);
  df.spawn(mote::inout(x), [&] {
    auto ev = mote::dataflow_event::open();
    x = 1;
    ev.fulfill();  // before the body returns: the body's return ends the task
    EXPECT_THROW(ev.fulfill(), mote::usage_error);  // empty now
  });
  df.spawn(mote::inout(x), [&] {
    EXPECT_EQ(x, 1);
    for (int k = 0; k < 5; ++k) outside.hand(mote::dataflow_event::open(), [&x] { ++x; });
  });
  df.spawn(mote::in(x), [&] { EXPECT_EQ(x, 6); });
  df.wait();
  EXPECT_EQ(x, 6);
}

TEST(DataflowEvents, MisuseIsReported) {
  EXPECT_THROW(mote::dataflow_event::open(), mote::usage_error);
  mote::dataflow_event empty;
  EXPECT_FALSE(empty);
  EXPECT_THROW(empty.fulfill(), mote::usage_error);
}

TEST(DataflowEvents, ATaskThatThrowsAfterOpeningAnEventFailsWhenItIsFulfilled) {
  mote::runtime rt(workers(2));
  fulfiller outside;
  long x = 0;
  bool successor_ran = false;
  bool other_ran = false;
  long y = 0;
  mote::dataflow df(rt);
  df.spawn(mote::out(x), [&] {
    outside.hand(mote::dataflow_event::open(), nullptr);
    throw std::runtime_error("after open");
  });
  df.spawn(mote::in(x), [&] { successor_ran = true; });  // skipped
  df.spawn(mote::out(y), [&] { other_ran = true; });
  EXPECT_THROW(df.wait(), std::runtime_error);
  EXPECT_FALSE(successor_ran);
  EXPECT_TRUE(other_ran);
}

// An event failed (a transfer that did not complete): its task fails as a
// task that throws does, whether the failure comes after the body returned
// or before.
TEST(DataflowEvents, AFailedEventFailsItsTask) {
  mote::runtime rt(workers(2));
  for (const bool inside : {false, true}) {
    long x = 0, y = 0;
    bool successor_ran = false, other_ran = false, body_went_on = false;
    std::thread late;
    mote::dataflow df(rt);
    df.spawn(mote::out(x), [&] {
      auto ev = mote::dataflow_event::open();
      if (inside) {
        ev.fail(std::make_exception_ptr(std::range_error("transfer failed")));
        body_went_on = true;  // the task fails when the body returns
      } else {
        late = std::thread([ev = std::move(ev)]() mutable {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));  // widens the window only
          // The exception made (and its temporary gone) before the event
          // fails, and handed over whole: this thread holds no share of it
          // once the waiter can see it. (libstdc++'s shared strings and
          // exception counts are atomics TSan does not see: a temporary
          // destroyed after the waiter's catch ended would look like a race.)
          auto failure = std::make_exception_ptr(std::range_error("transfer failed"));
          ev.fail(std::move(failure));
        });
      }
    });
    df.spawn(mote::in(x), [&] { successor_ran = true; });  // skipped
    df.spawn(mote::out(y), [&] { other_ran = true; });
    try {
      df.wait();
      ADD_FAILURE() << "the scope's wait did not throw";
    } catch (const std::range_error& e) {
      EXPECT_STREQ(e.what(), "transfer failed");
    }
    if (late.joinable()) late.join();
    EXPECT_FALSE(successor_ran) << (inside ? "inside" : "after");
    EXPECT_TRUE(other_ran);
    EXPECT_EQ(body_went_on, inside);
  }
  // Misuse: an empty handle, a null exception (the event stays open).
  mote::dataflow_event empty;
  EXPECT_THROW(empty.fail(std::make_exception_ptr(std::runtime_error("x"))), mote::usage_error);
  mote::dataflow df(rt);
  long z = 0;
  bool null_refused = false;
  df.spawn(mote::out(z), [&] {
    auto ev = mote::dataflow_event::open();
    try {
      ev.fail(nullptr);
    } catch (const mote::usage_error&) {
      null_refused = static_cast<bool>(ev);
    }
    ev.fulfill();
  });
  df.wait();
  EXPECT_TRUE(null_refused);
}

// ---- Priorities --------------------------------------------------------------------------

namespace {

// Where each task ran in a scope on one worker: the order of their starts.
struct start_order {
  std::atomic<int> next{0};
  int take() { return next.fetch_add(1, std::memory_order_relaxed); }
};

}  // namespace

// A ready task with a priority runs before ordinary tasks readied after it
// (which the worker's pool would run first, newest first), higher
// priorities first, equal ones in the order they became ready; under both
// scheduler policies.
TEST(DataflowPriority, ReadyTasksWithAPriorityRunFirstHighestFirst) {
  for (const auto policy : {mote::scheduler_policy::work_stealing, mote::scheduler_policy::delegation}) {
    mote::runtime_options o = workers(1);
    o.scheduler = policy;
    mote::runtime rt(o);
    constexpr int kPlain = 100;
    start_order order;
    int p1 = -1, p5 = -1, p3 = -1, p3b = -1;
    std::vector<int> plain(kPlain, -1);
    rt.run([&] {
      mote::dataflow df;
      df.spawn(mote::priority(1), [&] { p1 = order.take(); });
      df.spawn(mote::priority(5), [&] { p5 = order.take(); });
      df.spawn(mote::priority(3), [&] { p3 = order.take(); });
      for (int i = 0; i < kPlain; ++i) df.spawn([&, i] { plain[i] = order.take(); });
      df.spawn(mote::priority(3), [&] { p3b = order.take(); });
      df.wait();
    });
    const bool stealing = policy == mote::scheduler_policy::work_stealing;
    EXPECT_EQ(p5, 0) << (stealing ? "steal" : "delegation");
    EXPECT_EQ(p3, 1);
    EXPECT_EQ(p3b, 2);
    EXPECT_EQ(p1, 3);
    EXPECT_EQ(*std::min_element(plain.begin(), plain.end()), 4);
  }
}

// A task with a priority gives it to the tasks it directly depends on: the
// task that feeds it runs before the ordinary tasks readied with it.
TEST(DataflowPriority, WhatFeedsATaskWithAPriorityRunsFirstToo) {
  mote::runtime rt(workers(1));
  constexpr int kReaders = 200;
  start_order order;
  int x = 0, y = 0, feeder = -1, fed = -1;
  std::vector<int> readers(kReaders, -1);
  rt.run([&] {
    mote::dataflow df;
    df.spawn(mote::out(x), [&] { x = 1; });
    df.spawn(mote::in(x), mote::out(y), [&] {
      feeder = order.take();
      y = x + 1;
    });
    for (int i = 0; i < kReaders; ++i) df.spawn(mote::in(x), [&, i] { readers[i] = order.take(); });
    df.spawn(mote::priority(2), mote::in(y), [&] {
      fed = order.take();
      EXPECT_EQ(y, 2);
    });
    df.wait();
  });
  EXPECT_EQ(feeder, 0);
  EXPECT_EQ(fed, 1);
  EXPECT_EQ(*std::min_element(readers.begin(), readers.end()), 2);
}

// The priority's range: negative is a usage_error naming it, above 255 is
// 255; spawn_accesses takes one too.
TEST(DataflowPriority, RangeAndSpawnAccesses) {
  try {
    (void)mote::priority(-1);
    ADD_FAILURE() << "a negative priority was accepted";
  } catch (const mote::usage_error& e) {
    EXPECT_NE(std::string(e.what()).find("mote::priority(-1)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(mote::priority(300).value, 255);
  EXPECT_EQ(mote::priority(0).value, 0);
  mote::runtime rt(workers(1));
  start_order order;
  int first = -1, a = 0;
  std::vector<int> plain(50, -1);
  rt.run([&] {
    mote::dataflow df;
    const std::vector<mote::access> acc = {mote::out(a)};
    df.spawn_accesses(mote::priority(1), acc, [&] { first = order.take(); });
    for (int i = 0; i < 50; ++i) df.spawn([&, i] { plain[i] = order.take(); });
    df.wait();
  });
  EXPECT_EQ(first, 0);
}

// ---- Locality and the throttle ---------------------------------------------------------

namespace {

// 64 chains of `length` inout tasks, spawned level by level (as the benchmark
// suite's chains do); each task checks that it finds its predecessor's value
// and records the worker it ran on.
struct chain_run {
  static constexpr int kChains = 64;
  struct alignas(64) cell {
    long value = 0;
  };
  std::vector<cell> cells = std::vector<cell>(kChains);
  std::vector<int> ran_on;
  std::atomic<long> out_of_order{0};
  std::atomic<long> ran_before_spawning_ended{0};
  std::atomic<bool> spawning{true};

  void spawn(mote::dataflow& df, int length) {
    ran_on.assign(static_cast<std::size_t>(kChains) * length, -2);
    for (int k = 0; k < length; ++k) {
      for (int c = 0; c < kChains; ++c) {
        cell* x = &cells[c];
        int* where = &ran_on[static_cast<std::size_t>(k) * kChains + c];
        df.spawn(mote::inout(*x), [this, x, k, where] {
          if (x->value != k) out_of_order.fetch_add(1, std::memory_order_relaxed);
          x->value = k + 1;
          *where = mote::runtime::current_worker_index();
          if (spawning.load(std::memory_order_relaxed)) ran_before_spawning_ended.fetch_add(1, std::memory_order_relaxed);
        });
      }
    }
    spawning.store(false, std::memory_order_relaxed);
  }
  bool complete(int length) const {
    for (const cell& c : cells) {
      if (c.value != length) return false;
    }
    return true;
  }
};

}  // namespace

// Shares that thieves forced on the deques of every worker of rt.
std::uint64_t forced_shares(mote::runtime& rt) {
  mote::detail::runtime_impl& impl = mote::detail::runtime_access::impl(rt);
  std::uint64_t n = 0;
  for (unsigned i = 0; i < impl.num_workers(); ++i) {
    mote::detail::worker& w = impl.worker_at(i);
    n += w.frames().forced_shares() + w.pool().forced_shares() + w.kept().forced_shares();
  }
  return n;
}

TEST(DataflowLocality, AScopeThatKeepsRunsEveryTaskOnTheSpawnersWorker) {
  mote::runtime rt(workers(2));
  for (int round = 0; round < 3; ++round) {
    chain_run run;
    int spawner = -1;
    const std::uint64_t forced_before = forced_shares(rt);
    rt.run([&] {
      spawner = mote::runtime::current_worker_index();
      mote::dataflow df;
      df.set_locality(mote::dataflow_locality::keep);
      run.spawn(df, 200);
      df.wait();
    });
    EXPECT_TRUE(run.complete(200));
    EXPECT_EQ(run.out_of_order.load(), 0);
    // Nothing was ever in a place another worker looks, unless the spawner
    // went quiet (preempted, say) long enough for a thief to force its kept
    // tasks out: then that thief's share is counted.
    const bool forced = forced_shares(rt) != forced_before;
    if (!forced) {
      for (int where : run.ran_on) ASSERT_EQ(where, spawner);
    }
  }
}

TEST(DataflowLocality, AChainMigratesToAWorkerThatAsksWhenTheScopeShares) {
  // One chain of tasks long enough (about 20 us each) that the idle worker
  // asks while it runs; under `share` the task that the end readies goes to
  // the asked pool, where the idle worker takes it. Links are added until a
  // task has run on the other worker, for at most about 20 s.
  mote::runtime rt(workers(2));
  long x = 0;
  std::atomic<int> elsewhere{0};
  int spawner = -1;
  long spawned = 0;
  rt.run([&] {
    spawner = mote::runtime::current_worker_index();
    mote::dataflow df;
    df.set_locality(mote::dataflow_locality::share);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (elsewhere.load() == 0 && std::chrono::steady_clock::now() < until) {
      for (int k = 0; k < 100; ++k, ++spawned) {
        df.spawn(mote::inout(x), [&, k] {
          const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
          while (std::chrono::steady_clock::now() < end) {
          }
          ++x;
          if (mote::runtime::current_worker_index() != spawner) elsewhere.fetch_add(1);
          (void)k;
        });
      }
      df.wait();
    }
  });
  EXPECT_EQ(x, spawned);
  EXPECT_GT(elsewhere.load(), 0) << "no task of the chain ran on the idle worker";
}

TEST(DataflowLocality, TheThrottleRunsTasksWhileTheSpawnerIsFarAhead) {
  // One worker: without the throttle nothing could run before the wait. 64
  // chains of 200 (12 800 tasks, more than the 4096 the throttle allows
  // pending) must run in order, some of them before the spawning ends; under
  // delegation too, where the ready tasks are in the policy's queue, not in
  // the worker's pool.
  for (const mote::scheduler_policy policy :
       {mote::scheduler_policy::work_stealing, mote::scheduler_policy::delegation}) {
    const char* where =
        policy == mote::scheduler_policy::delegation ? "delegation" : "work stealing";
    mote::runtime_options options = workers(1);
    options.scheduler = policy;
    mote::runtime rt(options);
    chain_run run;
    rt.run([&] {
      mote::dataflow df;
      run.spawn(df, 200);
      df.wait();
    });
    EXPECT_TRUE(run.complete(200)) << where;
    EXPECT_EQ(run.out_of_order.load(), 0) << where;
    EXPECT_GT(run.ran_before_spawning_ended.load(), 0) << where;
  }
}

// The throttle's limit (MOTE_DATAFLOW_THROTTLE, or 4096).
std::uint32_t throttle_limit() {
  const char* v = std::getenv("MOTE_DATAFLOW_THROTTLE");
  return v != nullptr && *v != '\0' ? static_cast<std::uint32_t>(std::strtoul(v, nullptr, 10)) : 4096;
}

TEST(DataflowLocality, TheThrottleHoldsBackASpawnerOutsideTheRuntime) {
  // A thread outside the runtime spawns twice the limit and 1000 more tasks
  // of 10 us into 16 chains: it spawns about ten times faster than a worker
  // runs them, and without the throttle it would be thousands of tasks past
  // the limit at the end. It sleeps past the limit (looked at every 64
  // spawns) until half is left.
  const std::uint32_t limit = throttle_limit();
  if (limit == 0) GTEST_SKIP() << "MOTE_DATAFLOW_THROTTLE=0";
  for (unsigned n : {1u, 2u}) {
    mote::runtime rt(workers(n));
    std::array<long, 16> cells{};
    std::atomic<long> finished{0};
    long most_ahead = 0;
    const long kTasks = 2 * static_cast<long>(limit) + 1000;
    {
      mote::dataflow df(rt);
      for (long i = 0; i < kTasks; ++i) {
        df.spawn(mote::inout(cells[static_cast<std::size_t>(i % 16)]), [&cells, &finished, i] {
          const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(10);
          while (std::chrono::steady_clock::now() < until) {
          }
          ++cells[static_cast<std::size_t>(i % 16)];
          finished.fetch_add(1, std::memory_order_relaxed);
        });
        most_ahead = std::max(most_ahead, i + 1 - finished.load(std::memory_order_relaxed));
      }
      df.wait();
    }
    EXPECT_EQ(finished.load(), kTasks) << n << " workers";
    for (std::size_t c = 0; c < cells.size(); ++c) {
      EXPECT_EQ(cells[c], kTasks / 16 + (static_cast<long>(c) < kTasks % 16 ? 1 : 0));
    }
    EXPECT_LE(most_ahead, static_cast<long>(limit) + 64) << n << " workers";
  }
}

TEST(DataflowLocality, AThrottledSpawnerOutsideGoesOnWhenItsTasksWaitForIt) {
  // The pending tasks all wait for an event that the spawning thread itself
  // fulfils after its last spawn: the throttle must not wait for them (a
  // nap in which no task ended, every worker asleep, lets the spawner go on).
  mote::runtime rt(workers(1));
  const std::uint32_t limit = throttle_limit();
  long x = 0;
  std::mutex m;
  mote::dataflow_event held;
  {
    mote::dataflow df(rt);
    df.spawn(mote::inout(x), [&] {
      std::lock_guard<std::mutex> lock(m);
      held = mote::dataflow_event::open();
    });
    const long tasks = 3 * static_cast<long>(limit) + 100;
    for (long i = 0; i < tasks; ++i) df.spawn(mote::inout(x), [&x] { ++x; });
    for (;;) {
      std::lock_guard<std::mutex> lock(m);
      if (held) break;
    }
    held.fulfill();
    df.wait();
    EXPECT_EQ(x, tasks);
  }
}

TEST(DataflowLocality, ChainsRunInOrderUnderEveryModeAndFromOutside) {
  for (unsigned n : {1u, 2u, 4u}) {
    mote::runtime rt(workers(n));
    for (auto l : {mote::dataflow_locality::automatic, kKeep, kShare}) {
      for (bool outside : {false, true}) {
        chain_run run;
        auto body = [&] {
          mote::dataflow df(rt);
          df.set_locality(l);
          run.spawn(df, 100);
          df.wait();
        };
        if (outside) {
          body();
        } else {
          rt.run(body);
        }
        EXPECT_TRUE(run.complete(100)) << n << " workers, mode " << static_cast<int>(l) << ", outside " << outside;
        EXPECT_EQ(run.out_of_order.load(), 0);
      }
    }
  }
}

TEST(DataflowLocalityDeathTest, BadSettingsNameTheirVariable) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto expect_error = [](const char* var, const char* value, const char* message) {
    EXPECT_EXIT(
        {
          setenv(var, value, 1);
          try {
            mote::runtime rt(workers(1));
            mote::dataflow df(rt);
          } catch (const mote::config_error& e) {
            std::fprintf(stderr, "%s\n", e.what());
            std::exit(std::string(e.what()).find(var) == 0 ? 0 : 2);
          }
          std::exit(1);
        },
        ::testing::ExitedWithCode(0), message);
  };
  expect_error("MOTE_DATAFLOW_THROTTLE", "lots", "MOTE_DATAFLOW_THROTTLE: expected a number of tasks");
  expect_error("MOTE_DATAFLOW_LOCALITY", "nearby", "MOTE_DATAFLOW_LOCALITY: expected auto, keep or share");
}

// The locality windows' decision (src/dataflow/locality.hpp), driven with
// made-up windows: ticks and pending counts as the scope's owner reads them.
namespace windows {
namespace w = mote::detail::df_windows;
constexpr std::uint64_t kKeepBelow = 1000;  // bodies of 100 ticks: keep is worth a window
bool keeps(const mote::detail::df_grain& g) { return g.keep_local.load(std::memory_order_relaxed); }
}  // namespace windows

TEST(DataflowWindows, AWindowThatFilledTheThrottleIsNotMeasured) {
  using namespace windows;
  mote::detail::df_grain g;  // share, nothing measured; the window began at 0 with 64 pending
  g.window_pending = 64;
  // The first window: 4 000 spawns, almost none finished yet (the spawner
  // filling its throttle). Scaled by the 64 finished it would read 64x a
  // steady window and make share look slow.
  EXPECT_FALSE(w::end_window(g, 1'000'000, 4000, 100, kKeepBelow));
  EXPECT_FALSE(keeps(g));
  EXPECT_EQ(g.cost[0], 0u);
  // A steady share window of 1M ticks: measured; keep's first window next.
  EXPECT_TRUE(w::end_window(g, 2'000'000, 4000, 100, kKeepBelow));
  EXPECT_EQ(g.cost[0], 1'000'000u);
  EXPECT_TRUE(keeps(g));
  EXPECT_FALSE(w::end_window(g, 3'000'000, 4000, 100, kKeepBelow));  // settling after the change
  // Keep takes 2M ticks a window: share wins.
  EXPECT_TRUE(w::end_window(g, 5'000'000, 4000, 100, kKeepBelow));
  EXPECT_EQ(g.cost[1], 2'000'000u);
  EXPECT_FALSE(keeps(g));
}

TEST(DataflowWindows, PendingThatNeverStopsGrowingIsMeasuredEveryOtherWindow) {
  using namespace windows;
  mote::detail::df_grain g;
  std::uint64_t now = 0;
  std::uint32_t pending = 0;
  int measured = 0;
  for (int i = 0; i < 8; ++i) {
    now += 1'000'000;
    pending += 3000;  // the throttle off: every window leaves most of its tasks pending
    measured += w::end_window(g, now, pending, 5000, kKeepBelow) ? 1 : 0;
  }
  EXPECT_EQ(measured, 4);
  EXPECT_NE(g.cost[0], 0u);
  EXPECT_FALSE(keeps(g));  // bodies of 5000 ticks: keep never tried
}

TEST(DataflowWindows, AProbeReplacesWhatItsModeMeasuredBefore) {
  using namespace windows;
  mote::detail::df_grain g;
  // Keep chosen on a bad share figure (50M ticks, one preempted window);
  // keep costs 2M; the next window is the probe's turn.
  g.cost[0] = 50'000'000;
  g.cost[1] = 2'000'000;
  g.keep_local.store(true);
  g.until_probe = 1;
  g.probe_every = 64;
  std::uint64_t now = 0;
  const auto window = [&](std::uint64_t ticks) {
    now += ticks;
    return w::end_window(g, now, 100, 100, kKeepBelow);
  };
  EXPECT_TRUE(window(2'000'000));  // keep, and the probe of share begins
  EXPECT_FALSE(keeps(g));
  EXPECT_FALSE(window(1'000'000));  // settling
  EXPECT_TRUE(window(1'000'000));   // the probe: share at 1M replaces the 50M
  EXPECT_EQ(g.cost[0], 1'000'000u);
  EXPECT_FALSE(keeps(g));  // share now, and probes of keep from every 16th window again
  EXPECT_EQ(g.probe_every, w::kProbeWindows);
  EXPECT_EQ(g.until_probe, w::kProbeWindows);
}
