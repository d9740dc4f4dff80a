// Data-flow tasks: fixed patterns of every access type, reductions, nesting,
// exceptions and misuse, and random task graphs (random accesses of every
// kind over a few dozen objects, random nesting, random failures) checked
// against running the same tasks serially in program order.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mote/dataflow.hpp"
#include "mote/mote.hpp"
#include "test_util.hpp"

namespace {

using mote_test::scaled;
using mote_test::workers;

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

// ---- Random task graphs against a serial run ------------------------------------------

struct rtask {
  struct acc {
    int obj;
    mote::access_type type;
  };
  int id = 0;
  std::vector<acc> accs;
  bool throws = false;
  std::vector<rtask> children;  // a nested scope inside the body
};

constexpr int kObjects = 24;

std::uint64_t step(std::uint64_t h, std::uint64_t v) {
  return (h ^ v) * 0x100000001b3ull;
}

struct generator {
  std::mt19937_64 rng;
  int next_id = 0;
  double throw_rate;

  mote::access_type any_type() {
    static const mote::access_type all[] = {mote::access_type::in, mote::access_type::out,
                                            mote::access_type::inout, mote::access_type::commutative,
                                            mote::access_type::concurrent, mote::access_type::reduction};
    return all[rng() % 6];
  }

  // allowed: the objects (and how) the task may touch; top level: anything.
  std::vector<rtask> make(int count, const std::vector<rtask::acc>* parent, int depth) {
    std::vector<rtask> out;
    for (int k = 0; k < count; ++k) {
      rtask t;
      t.id = next_id++;
      t.throws = std::uniform_real_distribution<double>(0, 1)(rng) < throw_rate;
      const int want = 1 + static_cast<int>(rng() % 3);
      for (int a = 0; a < want; ++a) {
        rtask::acc x{};
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
            default: {
              x.type = any_type();
              if (x.type == mote::access_type::reduction) x.type = mote::access_type::inout;
            }
          }
        }
        bool repeat = false;
        for (const auto& y : t.accs) repeat = repeat || y.obj == x.obj;
        if (repeat) continue;  // one access per object per task (the merging has its own test)
        t.accs.push_back(x);
      }
      // A reduction task has exactly one access, spawned with mote::reduction.
      bool has_red = false;
      for (const auto& y : t.accs) has_red = has_red || y.type == mote::access_type::reduction;
      if (has_red) {
        for (const auto& y : t.accs) {
          if (y.type == mote::access_type::reduction) {
            t.accs = {y};
            break;
          }
        }
      }
      if (!has_red && depth < 2 && rng() % 6 == 0) {
        t.children = make(1 + static_cast<int>(rng() % 5), &t.accs, depth + 1);
      }
      out.push_back(std::move(t));
    }
    return out;
  }
};

struct world {
  std::vector<std::uint64_t> obj = std::vector<std::uint64_t>(kObjects, 0);
  std::vector<std::uint64_t> seen;  // per task id: what its `in`s read
  std::vector<int> ran;             // per task id
};

// The task's own work, the same in both runs. Reductions go through `red`.
void body(world& w, const rtask& t, std::uint64_t* red) {
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& a : t.accs) {
    std::uint64_t& x = w.obj[static_cast<std::size_t>(a.obj)];
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
// was skipped). Returns whether any task threw.
struct model_chain {
  mote::access_type type;
  bool open = false;        // a group is open
  bool poison_before = false;  // failure in an earlier group
  bool fail_in_group = false;
};

bool same_group(mote::access_type a, mote::access_type b) {
  return a == b && a != mote::access_type::out && a != mote::access_type::inout;
}

bool run_serial(world& w, const std::vector<rtask>& tasks, bool* threw) {
  std::vector<model_chain> chain(kObjects);
  bool any_throw = false;
  for (const auto& t : tasks) {
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
          if (a.type == mote::access_type::reduction) w.obj[static_cast<std::size_t>(a.obj)] += red;
        }
        bool child_threw = false;
        run_serial(w, t.children, &child_threw);
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
  return true;
}

mote::access make_access(world& w, const rtask::acc& a) {
  std::uint64_t& x = w.obj[static_cast<std::size_t>(a.obj)];
  switch (a.type) {
    case mote::access_type::in: return mote::in(x);
    case mote::access_type::out: return mote::out(x);
    case mote::access_type::inout: return mote::inout(x);
    case mote::access_type::commutative: return mote::commutative(x);
    default: return mote::concurrent(x);
  }
}

void spawn_all(mote::dataflow& df, world& w, const std::vector<rtask>& tasks) {
  for (const auto& t : tasks) {
    if (t.accs.size() == 1 && t.accs[0].type == mote::access_type::reduction) {
      df.spawn(mote::reduction(std::plus<>{}, w.obj[static_cast<std::size_t>(t.accs[0].obj)]),
               [&w, &t](std::uint64_t& s) {
                 if (t.throws) throw std::runtime_error("task " + std::to_string(t.id));
                 body(w, t, &s);
               });
      continue;
    }
    std::vector<mote::access> accs;
    for (const auto& a : t.accs) accs.push_back(make_access(w, a));
    df.spawn_accesses(accs, [&w, &t] {
      if (t.throws) throw std::runtime_error("task " + std::to_string(t.id));
      body(w, t, nullptr);
      if (!t.children.empty()) {
        mote::dataflow inner;
        spawn_all(inner, w, t.children);
      }  // waits; rethrows a child's exception
    });
  }
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
      s << std::string(static_cast<std::size_t>(2 * d), ' ') << "task " << u->id << (u->throws ? " throws" : "")
        << ":";
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

void random_graphs(unsigned num_workers, double throw_rate, bool from_outside, int rounds,
                   mote::scheduler_policy policy = mote::scheduler_policy::work_stealing) {
  mote::runtime_options options = workers(num_workers);
  options.scheduler = policy;
  mote::runtime rt(options);
  std::mt19937_64 seeds(mote_test::test_seed() + num_workers * 7 + (from_outside ? 1 : 0) +
                        static_cast<std::uint64_t>(throw_rate * 1000));
  for (int round = 0; round < rounds; ++round) {
    const std::uint64_t seed = seeds();
    generator gen{std::mt19937_64(seed), 0, throw_rate};
    const auto program = gen.make(static_cast<int>(scaled(300, 3)), nullptr, 0);
    world expect, got;
    expect.seen.assign(static_cast<std::size_t>(gen.next_id), 0);
    expect.ran.assign(static_cast<std::size_t>(gen.next_id), 0);
    got.seen = expect.seen;
    got.ran = expect.ran;
    bool expect_throw = false;
    run_serial(expect, program, &expect_throw);

    bool got_throw = false;
    auto run = [&] {
      mote::dataflow df;
      spawn_all(df, got, program);
      try {
        df.wait();
      } catch (const std::runtime_error&) {
        got_throw = true;
      }
    };
    if (from_outside) {
      mote::dataflow df(rt);
      spawn_all(df, got, program);
      try {
        df.wait();
      } catch (const std::runtime_error&) {
        got_throw = true;
      }
    } else {
      rt.run(run);
    }
    if (got.seen != expect.seen || got.obj != expect.obj) ADD_FAILURE() << explain(program, expect, got);
    ASSERT_EQ(got_throw, expect_throw) << "seed " << seed;
    ASSERT_EQ(got.ran, expect.ran) << "seed " << seed;
    ASSERT_EQ(got.obj, expect.obj) << "seed " << seed;
    ASSERT_EQ(got.seen, expect.seen) << "seed " << seed;
  }
}

TEST(DataflowRandom, TwoWorkers) { random_graphs(2, 0.0, false, static_cast<int>(scaled(300, 6))); }
TEST(DataflowRandom, FromAThreadOutsideTheRuntime) { random_graphs(2, 0.01, true, static_cast<int>(scaled(100, 5))); }
TEST(DataflowRandom, OversubscribedFourWorkers) { random_graphs(4, 0.01, false, static_cast<int>(scaled(100, 5))); }
TEST(DataflowRandom, WithFailures) { random_graphs(2, 0.03, false, static_cast<int>(scaled(300, 6))); }
TEST(DataflowRandom, OneWorker) { random_graphs(1, 0.02, false, static_cast<int>(scaled(100, 5))); }

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

}  // namespace
