// Nesting task groups: spawns into any group that has not finished waiting
// (the task's own, an enclosing frame's, a sibling's), the groups of one frame
// waited in any order, and groups mixed with mote::join. Fixed patterns from
// the issue, every wait order of a few groups, and random programs checked
// against a serial run of the same program, with and without exceptions.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <unistd.h>

#include "mote/mote.hpp"
#include "test_util.hpp"

namespace {

using mote_test::scaled;

using mote_test::workers;

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// ---- Naming what was running when a test crashed or hung ---------------------

// The program (or the run of a fixed pattern) in flight, so that a crash or a
// hang names it and it can be replayed.
struct in_flight {
  std::atomic<std::uint64_t> seed{0};
  std::atomic<int> depth{-1};  // -1: `seed` is the run number of a fixed pattern
  std::atomic<std::uint64_t> started{0};
};
in_flight current;

void begin(std::uint64_t seed, int depth) {
  current.seed.store(seed, std::memory_order_relaxed);
  current.depth.store(depth, std::memory_order_relaxed);
  current.started.fetch_add(1, std::memory_order_relaxed);
}

// Async-signal-safe: formats by hand and writes with write(2).
void write_in_flight(const char* what) {
  char text[160];
  std::size_t n = 0;
  auto put = [&](const char* s) {
    while (*s != '\0' && n < sizeof text - 1) text[n++] = *s++;
  };
  auto put_number = [&](std::uint64_t v) {
    char digits[24];
    int d = 0;
    do {
      digits[d++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (d > 0 && n < sizeof text - 1) text[n++] = digits[--d];
  };
  const int depth = current.depth.load(std::memory_order_relaxed);
  put("\nmote nesting: ");
  put(what);
  if (depth < 0) {
    put(" in run ");
    put_number(current.seed.load(std::memory_order_relaxed));
  } else {
    put(" in program MOTE_NESTING_PROGRAM=");
    put_number(current.seed.load(std::memory_order_relaxed));
    put(" MOTE_NESTING_DEPTH=");
    put_number(static_cast<std::uint64_t>(depth));
  }
  text[n++] = '\n';
  if (write(2, text, n) < 0) {
    // Nothing more to do on the way down.
  }
}

extern "C" void name_crash(int sig) {
  write_in_flight("crashed");
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// Installs the crash note, and for its lifetime aborts the test, naming the
// run in flight, when one run takes longer than any could (a lost task leaves
// a wait spinning forever).
class watchdog {
 public:
  watchdog() : thread_([this] { watch(); }) {
    static const bool installed = [] {
      // Under a sanitizer its own handlers report faults better; an abort
      // (how they end a run) still names the program.
      if (mote_test::kSanitized) {
        std::signal(SIGABRT, name_crash);
      } else {
        for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL}) std::signal(sig, name_crash);
      }
      return true;
    }();
    (void)installed;
  }
  ~watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;

 private:
  static constexpr std::chrono::seconds kStuck{mote_test::kSanitized ? 120 : 30};
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    std::uint64_t seen = current.started.load();
    while (!wake_.wait_for(lock, kStuck, [this] { return done_; })) {
      const std::uint64_t now = current.started.load();
      if (now == seen) {
        write_in_flight("no progress for 30 s (120 s under sanitizers)");
        std::signal(SIGABRT, SIG_DFL);
        std::abort();
      }
      seen = now;
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

// One group of a frame, created and destroyed at points of the frame's
// choosing. Unlike std::optional, whose reset() is noexcept, it lets
// ~task_group's mote::missing_wait reach the test as a failure.
template <class G>
class group_slot {
 public:
  // Children spawned into the group that have not finished: zero whenever
  // the group's wait has returned task_group_status::complete. (A wait that
  // returns canceled may leave children that were skipped: a failure in an
  // enclosing group cancelled this one through its binding.)
  std::atomic<long> open{0};

  group_slot() = default;
  group_slot(const group_slot&) = delete;
  group_slot& operator=(const group_slot&) = delete;
  ~group_slot() noexcept(false) { destroy(); }

  template <class... A>
  void emplace(A&&... args) {
    group_ = ::new (static_cast<void*>(storage_)) G(std::forward<A>(args)...);
  }
  void destroy() {
    if (G* g = std::exchange(group_, nullptr)) g->~G();
  }
  explicit operator bool() const { return group_ != nullptr; }
  G& operator*() const { return *group_; }
  G* operator->() const { return group_; }

 private:
  alignas(G) unsigned char storage_[sizeof(G)];
  G* group_ = nullptr;
};

// ---- The pattern from the issue --------------------------------------------

class IssuePattern : public ::testing::TestWithParam<unsigned> {};

// The pattern of the issue, `runs` times: an outer group with k tasks queued,
// an inner group whose k tasks each spawn into the outer one; the inner group
// is waited (and destroyed) first, the outer one after.
void issue_pattern(unsigned num_workers, int k, long runs) {
  mote::runtime rt(workers(num_workers));
  std::atomic<long> n{0};
  long threw = 0, early = 0;  // early: outer.wait() returned before all its units were done
  std::string first_error;
  for (long r = 0; r < runs; ++r) {
    begin(static_cast<std::uint64_t>(r), -1);
    try {
      rt.run([&] {
        const long before = n.load();
        mote::task_group outer;
        for (int i = 0; i < k; ++i) outer.spawn([&] { n++; });
        {
          mote::task_group inner;
          for (int i = 0; i < k; ++i) inner.spawn([&] { outer.spawn([&] { n++; }); });
          inner.wait();
        }
        outer.wait();
        if (n.load() != before + 2 * k) ++early;
      });
    } catch (const std::exception& e) {
      if (threw++ == 0) first_error = e.what();
    }
  }
  EXPECT_EQ(threw, 0) << threw << "/" << runs << " runs threw, first: " << first_error;
  EXPECT_EQ(early, 0) << "runs whose outer.wait() returned before all its units were done";
  EXPECT_EQ(n.load(), 2 * k * runs) << "units lost or run twice";
}

// One task per group, as the issue wrote it.
TEST_P(IssuePattern, InnerTaskSpawnsIntoOuter) {
  watchdog guard;
  issue_pattern(GetParam(), 1, scaled(2000, 2));
}

// Four tasks per group, so that some are stolen while others are still
// queued, repeated to catch the interleavings.
TEST_P(IssuePattern, FourTasksPerGroupRepeated) {
  watchdog guard;
  issue_pattern(GetParam(), 4, scaled(2000, 2));
}

INSTANTIATE_TEST_SUITE_P(Workers, IssuePattern, ::testing::Values(1u, 2u, 8u));

// ---- Every wait order of a few groups ---------------------------------------

class WaitOrder : public ::testing::TestWithParam<unsigned> {};

// k groups, created one after another with a unit spawned after each creation
// (so each new group starts above the tasks of the older ones), then fed from
// the frame, from both sides of a join, and from their own tasks: a chain
// task in the group waited p-th does a unit and spawns the next link into the
// group waited (p+1)-th. Three shapes, by repetition: round-robin feeding;
// one block per group, oldest first; one block per group, newest first (the
// issue's shape: a newer group's tasks right above an older group's last
// one, spawning into it). Every permutation of the waits. When a group's wait
// returns, every unit ever meant for it must be done.
TEST_P(WaitOrder, EveryPermutation) {
  watchdog guard;
  mote::runtime rt(workers(GetParam()));
  const long reps = scaled(30, 3);
  constexpr int kRounds = 3;
  long threw = 0, early = 0, wrong_total = 0, permutations = 0, runs = 0;
  std::string first_error;
  for (int k = 2; k <= 4; ++k) {
    std::vector<int> order(static_cast<std::size_t>(k));  // order[p]: the group waited p-th
    for (int i = 0; i < k; ++i) order[static_cast<std::size_t>(i)] = i;
    do {
      ++permutations;
      std::vector<int> pos(static_cast<std::size_t>(k));  // pos[g]: when group g is waited
      for (int p = 0; p < k; ++p) pos[static_cast<std::size_t>(order[static_cast<std::size_t>(p)])] = p;
      for (long rep = 0; rep < reps; ++rep) {
        begin(static_cast<std::uint64_t>(runs++), -1);
        std::array<std::atomic<long>, 4> done{};
        std::array<long, 4> expected{};
        try {
          rt.run([&] {
            std::array<group_slot<mote::task_group>, 4> groups;
            // A chain link for the group waited p-th; the next link goes to a
            // group whose wait starts after this one's has returned.
            auto link = [&](auto& self, int p) -> void {
              const int g = order[static_cast<std::size_t>(p)];
              done[static_cast<std::size_t>(g)].fetch_add(1);
              if (p + 1 < k) {
                groups[static_cast<std::size_t>(order[static_cast<std::size_t>(p + 1)])]->spawn(
                    [&self, p] { self(self, p + 1); });
              }
            };
            // A unit into group g, and a chain starting there once every
            // group exists. Counted in the frame, since the spawns may come
            // from both sides of a join.
            auto feed = [&](int g, bool chain) {
              const auto gi = static_cast<std::size_t>(g);
              groups[gi]->spawn([&done, gi] { done[gi].fetch_add(1); });
              if (chain) groups[gi]->spawn([&link, &pos, gi] { link(link, pos[gi]); });
            };
            auto expect = [&](int g, bool chain) {
              const auto gi = static_cast<std::size_t>(g);
              expected[gi] += 1;
              for (int p = pos[gi]; chain && p < k; ++p) expected[static_cast<std::size_t>(order[static_cast<std::size_t>(p)])] += 1;
            };
            const long shape = rep % 3;
            for (int g = 0; g < k; ++g) {
              groups[static_cast<std::size_t>(g)].emplace();
              for (int h = shape == 0 ? 0 : g; h <= g; ++h) {
                feed(h, false);
                expect(h, false);
              }
            }
            for (int i = 0; i < kRounds * k; ++i) {
              const int g = shape == 0 ? i % k : shape == 1 ? i / kRounds : k - 1 - i / kRounds;
              feed(g, true);
              expect(g, true);
            }
            for (int round = 0; round < kRounds; ++round) {
              expect(round % k, true);
              expect((round + 1) % k, true);
              mote::join([&] { feed(round % k, true); }, [&] { feed((round + 1) % k, true); });
            }
            // After a failed wait the others still run, in the same order, so
            // that no group goes away before a task that may spawn into it.
            std::exception_ptr first;
            for (int p = 0; p < k; ++p) {
              const auto gi = static_cast<std::size_t>(order[static_cast<std::size_t>(p)]);
              try {
                groups[gi]->wait();
                if (!first && done[gi].load() != expected[gi]) ++early;  // a failure cancels units
                groups[gi].destroy();
              } catch (...) {
                if (!first) first = std::current_exception();
                try {
                  groups[gi].destroy();
                } catch (...) {  // missing_wait, after the failure already recorded
                }
              }
            }
            if (first) std::rethrow_exception(first);
          });
        } catch (const std::exception& e) {
          if (threw++ == 0) first_error = e.what();
          continue;
        }
        for (int g = 0; g < k; ++g) {
          if (done[static_cast<std::size_t>(g)].load() != expected[static_cast<std::size_t>(g)]) ++wrong_total;
        }
      }
    } while (std::next_permutation(order.begin(), order.end()));
  }
  EXPECT_EQ(permutations, 2 + 6 + 24);
  EXPECT_EQ(threw, 0) << threw << "/" << runs << " runs threw, first: " << first_error;
  EXPECT_EQ(early, 0) << "waits that returned before their group's units were done";
  EXPECT_EQ(wrong_total, 0) << "groups whose units were lost or run twice";
}

INSTANTIATE_TEST_SUITE_P(Workers, WaitOrder, ::testing::Values(1u, 2u, 8u));

// ---- Random programs --------------------------------------------------------
//
// A node of a program is a seed and a depth. From its seed the node plans a
// sequence of actions: a unit of work, a join of two child nodes, creating a
// local group, spawning a child node into a live local group or into an
// enclosing group it was given, waiting a local group. At the end it waits
// the local groups still open, in an order that is part of the plan. The plan
// depends on nothing but the seed, the depth and how many enclosing groups the
// node was given, so the serial and the parallel run execute the same program.
//
// Legality: a child is given only groups whose wait is sure to start after the
// child has finished. Those are the local groups waited after the group the
// child goes into (after the join it is part of: every local group still
// open), followed by the node's own enclosing groups. A node's enclosing
// groups form a chain (each one's wait starts after the previous one's has
// returned), so a child spawned into the i-th of them may use those after it.

constexpr int kMaxGroups = 4;  // groups one frame creates in all
constexpr std::size_t kMaxLive = 3;
constexpr std::size_t kMaxEnclosing = 6;
constexpr int kUnitRounds = 16;  // a little work per unit, which is also its checksum

enum class op : std::uint8_t { unit, join, create, spawn_local, spawn_enclosing, wait };

struct action {
  op kind = op::unit;
  int target = 0;             // group (create, spawn_local, wait) or enclosing index
  std::uint64_t seed = 0;     // the unit's id or the child's seed
  std::uint64_t seed2 = 0;    // join's second child
  std::vector<int> pass;      // local groups handed to the child(ren), in wait order
  std::size_t pass_from = 0;  // then the node's own enclosing groups from here on
};

std::vector<action> make_plan(std::uint64_t seed, int depth, std::size_t enclosing) {
  std::mt19937_64 rng(seed);
  std::vector<action> plan;
  if (depth <= 0) {
    const int units = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < units; ++i) plan.push_back(action{op::unit, 0, rng(), 0, {}, 0});
    return plan;
  }
  std::vector<int> live;
  int created = 0;
  const int steps = 1 + static_cast<int>(rng() % 8);
  for (int s = 0; s < steps; ++s) {
    const unsigned roll = static_cast<unsigned>(rng() % 100);
    action a;
    const std::size_t targets = live.size() + enclosing;
    if (roll < 15) {
      a.kind = op::join;
      a.seed = rng();
      a.seed2 = rng();
      a.pass = live;  // put in wait order below
    } else if (roll < 35 && live.size() < kMaxLive && created < kMaxGroups) {
      a.kind = op::create;
      a.target = created++;
      live.push_back(a.target);
    } else if (roll < 75 && targets > 0) {
      const std::size_t t = static_cast<std::size_t>(rng() % targets);
      a.seed = rng();
      if (t < live.size()) {
        a.kind = op::spawn_local;
        a.target = live[t];
        a.pass = live;  // filtered below
      } else {
        a.kind = op::spawn_enclosing;
        a.target = static_cast<int>(t - live.size());
        a.pass_from = t - live.size() + 1;
      }
    } else if (roll < 85 && !live.empty()) {
      const std::size_t t = static_cast<std::size_t>(rng() % live.size());
      a.kind = op::wait;
      a.target = live[t];
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(t));
    } else {
      a.seed = rng();
    }
    plan.push_back(std::move(a));
  }
  std::shuffle(live.begin(), live.end(), rng);
  for (int g : live) plan.push_back(action{op::wait, g, 0, 0, {}, 0});

  // Now that every wait has its place, keep only the groups a child may use.
  std::array<std::size_t, kMaxGroups> waited_at{};
  for (std::size_t i = 0; i < plan.size(); ++i) {
    if (plan[i].kind == op::wait) waited_at[static_cast<std::size_t>(plan[i].target)] = i;
  }
  auto by_wait = [&](int a, int b) {
    return waited_at[static_cast<std::size_t>(a)] < waited_at[static_cast<std::size_t>(b)];
  };
  for (action& a : plan) {
    if (a.kind == op::spawn_local) {
      const std::size_t into = waited_at[static_cast<std::size_t>(a.target)];
      std::erase_if(a.pass, [&](int g) { return waited_at[static_cast<std::size_t>(g)] <= into; });
    }
    std::sort(a.pass.begin(), a.pass.end(), by_wait);
  }
  return plan;
}

// What the units of a run add up to.
struct tally {
  std::atomic<long> units{0};
  std::atomic<std::uint64_t> checksum{0};
  std::atomic<long> thrown{0};       // units that threw
  std::atomic<long> would_throw{0};  // serial runs: units chosen to throw
  std::atomic<long> early_waits{0};  // waits that returned while a child was still open
};

// Units chosen to throw: about per_mille in a thousand.
bool chosen_to_throw(std::uint64_t id, unsigned per_mille) {
  return per_mille != 0 && mix(id ^ 0x5bd1e995u) % 1000 < per_mille;
}

void do_unit(tally& t, std::uint64_t id) {
  std::uint64_t h = id;
  for (int i = 0; i < kUnitRounds; ++i) h = mix(h);
  t.units.fetch_add(1, std::memory_order_relaxed);
  t.checksum.fetch_add(h, std::memory_order_relaxed);
}

struct parallel_exec {
  using group = mote::task_group;
  tally& t;
  unsigned throw_per_mille = 0;

  void unit(std::uint64_t id) {
    do_unit(t, id);
    if (chosen_to_throw(id, throw_per_mille)) {
      t.thrown.fetch_add(1, std::memory_order_relaxed);
      throw std::runtime_error("unit " + std::to_string(id));
    }
  }
  template <class F, class G>
  void join(F&& f, G&& g) {
    mote::join(std::forward<F>(f), std::forward<G>(g));
  }
};

// The serial reading of a program: spawn runs the child at once, wait has
// nothing left to do, join runs f then g. Units never throw here.
struct serial_group {
  template <class F>
  void spawn(F&& f) {
    f();
  }
  mote::task_group_status wait() { return mote::task_group_status::complete; }
};

struct serial_exec {
  using group = serial_group;
  tally& t;
  unsigned throw_per_mille = 0;

  void unit(std::uint64_t id) {
    do_unit(t, id);
    if (chosen_to_throw(id, throw_per_mille)) t.would_throw.fetch_add(1, std::memory_order_relaxed);
  }
  template <class F, class G>
  void join(F&& f, G&& g) {
    f();
    g();
  }
};

template <class Exec>
using slot_of = group_slot<typename Exec::group>;

template <class Exec>
void run_node(Exec& ex, std::uint64_t seed, int depth, const std::vector<slot_of<Exec>*>& enclosing);

template <class Exec>
void spawn_node(Exec& ex, slot_of<Exec>& into, std::uint64_t seed, int depth, std::vector<slot_of<Exec>*> targets) {
  struct close_on_exit {
    slot_of<Exec>& slot;
    ~close_on_exit() { slot.open.fetch_sub(1, std::memory_order_release); }
  };
  into.open.fetch_add(1, std::memory_order_relaxed);
  // The token counts the closure's copies: each must be destroyed once,
  // whether the child ran or was skipped.
  into->spawn([&ex, &into, seed, depth, targets = std::move(targets), token = mote_test::lifetime(1)] {
    close_on_exit close{into};
    run_node(ex, seed, depth, targets);
  });
}

template <class Exec>
void run_node(Exec& ex, std::uint64_t seed, int depth, const std::vector<slot_of<Exec>*>& enclosing) {
  using slot_ptr = slot_of<Exec>*;
  const std::vector<action> plan = make_plan(seed, depth, enclosing.size());
  std::array<slot_of<Exec>, kMaxGroups> groups;
  auto child_targets = [&](const action& a) {
    std::vector<slot_ptr> v;
    for (int g : a.pass) v.push_back(&groups[static_cast<std::size_t>(g)]);
    for (std::size_t i = a.pass_from; i < enclosing.size(); ++i) v.push_back(enclosing[i]);
    if (v.size() > kMaxEnclosing) v.resize(kMaxEnclosing);  // a prefix of a chain is a chain
    return v;
  };
  // After the first failure only the waits still run, in their planned order,
  // so that no group goes away before a task that may spawn into it.
  std::exception_ptr first;
  for (const action& a : plan) {
    if (first && a.kind != op::wait) continue;
    // spawn_enclosing's target indexes the enclosing groups, not these.
    auto& slot = groups[a.kind == op::spawn_enclosing ? 0 : static_cast<std::size_t>(a.target)];
    try {
      switch (a.kind) {
        case op::unit:
          ex.unit(a.seed);
          break;
        case op::join: {
          const std::vector<slot_ptr> targets = child_targets(a);
          ex.join([&] { run_node(ex, a.seed, depth - 1, targets); },
                  [&] { run_node(ex, a.seed2, depth - 1, targets); });
          break;
        }
        case op::create:
          slot.emplace();
          break;
        case op::spawn_local:
          spawn_node(ex, slot, a.seed, depth - 1, child_targets(a));
          break;
        case op::spawn_enclosing:
          spawn_node(ex, *enclosing[static_cast<std::size_t>(a.target)], a.seed, depth - 1, child_targets(a));
          break;
        case op::wait:
          if (slot) {
            const mote::task_group_status status = slot->wait();
            if (status == mote::task_group_status::complete &&
                slot.open.load(std::memory_order_acquire) != 0) {
              ex.t.early_waits.fetch_add(1);
            }
            slot.destroy();
          }
          break;
      }
    } catch (...) {
      if (!first) first = std::current_exception();
      if (a.kind == op::wait) {
        try {
          slot.destroy();
        } catch (...) {  // missing_wait: the first exception already fails this frame
        }
      }
    }
  }
  if (first) std::rethrow_exception(first);
}

struct program {
  std::uint64_t seed;
  int depth;
};

// The programs of a test: from MOTE_TEST_SEED, or the one named by
// MOTE_NESTING_PROGRAM and MOTE_NESTING_DEPTH, to replay a failure.
std::vector<program> programs(long count) {
  if (const char* one = std::getenv("MOTE_NESTING_PROGRAM")) {
    const char* depth = std::getenv("MOTE_NESTING_DEPTH");
    return {program{std::strtoull(one, nullptr, 10), depth ? std::atoi(depth) : 5}};
  }
  std::mt19937_64 rng(mote_test::test_seed());
  std::vector<program> out;
  for (long i = 0; i < count; ++i) {
    const std::uint64_t seed = rng();
    // From a handful of units to about ten thousand.
    const int depth = 1 + static_cast<int>(rng() % (mote_test::kSanitized ? 6 : 7));
    out.push_back(program{seed, depth});
  }
  return out;
}

std::string describe(const program& p) {
  return "MOTE_NESTING_PROGRAM=" + std::to_string(p.seed) + " MOTE_NESTING_DEPTH=" + std::to_string(p.depth);
}

// A failed program may leave tasks behind that write into the next one's
// tallies, so only the first failure of a test is trustworthy.
constexpr long kMaxFailures = 1;

class RandomPrograms : public ::testing::TestWithParam<unsigned> {};

TEST_P(RandomPrograms, MatchSerial) {
  watchdog guard;
  mote::runtime rt(workers(GetParam()));
  const long live_before = mote_test::lifetime::live.load();
  const long doubles_before = mote_test::lifetime::double_destroyed.load();
  const std::vector<program> list = programs(scaled(2000, 4));
  long failed = 0, ran = 0, total_units = 0;
  for (const program& p : list) {
    tally want;
    serial_exec serial{want};
    run_node(serial, p.seed, p.depth, {});
    total_units += want.units.load();

    tally got;
    parallel_exec parallel{got};
    begin(p.seed, p.depth);
    ++ran;
    std::string error;
    try {
      rt.run([&] { run_node(parallel, p.seed, p.depth, {}); });
    } catch (const std::exception& e) {
      error = e.what();
    }
    if (!error.empty() || got.units.load() != want.units.load() || got.checksum.load() != want.checksum.load() ||
        got.early_waits.load() != 0) {
      ADD_FAILURE() << describe(p) << ": " << got.units.load() << " of " << want.units.load()
                    << " units, checksum " << (got.checksum.load() == want.checksum.load() ? "right" : "wrong")
                    << ", " << got.early_waits.load() << " waits returned before their children were done"
                    << (error.empty() ? "" : ", threw: " + error);
      if (++failed == kMaxFailures) break;
    }
  }
  EXPECT_EQ(failed, 0) << failed << " of the " << ran << " programs run (of " << list.size() << ") failed";
  EXPECT_GT(total_units, ran);  // the programs did something
  EXPECT_EQ(mote_test::lifetime::live.load(), live_before) << "spawned closures leaked";
  EXPECT_EQ(mote_test::lifetime::double_destroyed.load(), doubles_before) << "closures destroyed twice";
}

// Some units throw. Then the root must rethrow exactly when a unit threw, and
// throw that unit's exception (a runtime_error, not a complaint about misuse);
// nothing crashes; every closure is destroyed once. Counts are not exact,
// since cancellation skips work that had not started, but never exceed the
// program's; when no unit threw, nothing was cancelled and they are exact.
TEST_P(RandomPrograms, ThrowingUnits) {
  watchdog guard;
  mote::runtime rt(workers(GetParam()));
  const long live_before = mote_test::lifetime::live.load();
  const long doubles_before = mote_test::lifetime::double_destroyed.load();
  const std::vector<program> list = programs(scaled(1500, 4));
  std::mt19937_64 rates(mote_test::test_seed() + 1);
  long failed = 0, ran = 0, chosen = 0;
  for (const program& p : list) {
    const unsigned per_mille = std::array<unsigned, 4>{0, 2, 10, 50}[rates() % 4];
    tally want;
    serial_exec serial{want, per_mille};
    run_node(serial, p.seed, p.depth, {});
    if (want.would_throw.load() > 0) ++chosen;

    tally got;
    parallel_exec parallel{got, per_mille};
    begin(p.seed, p.depth);
    ++ran;
    bool threw = false;
    std::string wrong_error;
    try {
      rt.run([&] { run_node(parallel, p.seed, p.depth, {}); });
    } catch (const std::runtime_error& e) {
      threw = true;
      if (std::string(e.what()).rfind("unit ", 0) != 0) wrong_error = e.what();
    } catch (const std::exception& e) {
      threw = true;
      wrong_error = e.what();
    }
    std::string why;
    if (!wrong_error.empty()) {
      why = "threw something other than a unit's error: " + wrong_error;
    } else if (threw != (got.thrown.load() > 0)) {
      why = std::to_string(got.thrown.load()) + " units threw but the root " + (threw ? "threw" : "did not throw");
    } else if (got.units.load() > want.units.load()) {
      why = "more units than the program has";
    } else if (got.early_waits.load() != 0) {
      why = "a wait returned complete, without an exception, before its children were done";
    } else if (got.thrown.load() == 0 &&
               (got.units.load() != want.units.load() || got.checksum.load() != want.checksum.load())) {
      why = "no unit threw, yet units were lost or run twice";
    }
    if (!why.empty()) {
      ADD_FAILURE() << describe(p) << " at " << per_mille << "/1000 throwing: " << why << " ("
                    << got.units.load() << " of " << want.units.load() << " units)";
      if (++failed == kMaxFailures) break;
    }
  }
  EXPECT_EQ(failed, 0) << failed << " of the " << ran << " programs run (of " << list.size() << ") failed";
  // The mix of rates is meant to give both outcomes.
  EXPECT_GT(chosen, 0);
  EXPECT_LT(chosen, static_cast<long>(list.size()));
  EXPECT_EQ(mote_test::lifetime::live.load(), live_before) << "spawned closures leaked";
  EXPECT_EQ(mote_test::lifetime::double_destroyed.load(), doubles_before) << "closures destroyed twice";
}

INSTANTIATE_TEST_SUITE_P(Workers, RandomPrograms, ::testing::Values(1u, 2u, 8u));

// ---- Programs fed from outside the runtime ------------------------------------
//
// A group created on a thread that is not a worker, fed at once by one to
// three such threads (each spawning random programs, which spawn into it
// again), and waited by yet another thread; in a quarter of the runs a fifth
// thread cancels it once feeding has begun (and before the wait, which must
// then say canceled, and complete otherwise). A wait that returns complete
// matches the serial count exactly; a cancelled one never exceeds it; no
// unit runs after the wait has returned; every closure is destroyed once.
class FromOutside : public ::testing::TestWithParam<unsigned> {};

TEST_P(FromOutside, FeedersWaiterAndCanceller) {
  watchdog guard;
  mote::runtime rt(workers(GetParam()));
  const long live_before = mote_test::lifetime::live.load();
  const long doubles_before = mote_test::lifetime::double_destroyed.load();
  std::mt19937_64 rng(mote_test::test_seed() + 7);
  const long runs = scaled(400, 8);
  long failed = 0, complete = 0, canceled = 0;
  for (long r = 0; r < runs && failed == 0; ++r) {
    const int feeders = 1 + static_cast<int>(rng() % 3);
    const int per_feeder = 1 + static_cast<int>(rng() % 4);
    const int depth = 1 + static_cast<int>(rng() % 4);
    const bool cancel = rng() % 4 == 0;
    std::vector<std::uint64_t> seeds(static_cast<std::size_t>(feeders * per_feeder));
    for (std::uint64_t& seed : seeds) seed = rng();

    tally want;
    serial_exec serial{want};
    {
      slot_of<serial_exec> root;
      root.emplace();
      for (std::uint64_t seed : seeds) spawn_node(serial, root, seed, depth, {&root});
    }

    begin(seeds[0], depth);
    tally got;
    parallel_exec parallel{got};
    slot_of<parallel_exec> root;
    root.emplace(rt);  // on this thread, which is not a worker: the group has no owner
    std::atomic<int> fed{0};
    std::atomic<bool> cancelled{!cancel};
    std::vector<std::thread> threads;
    for (int f = 0; f < feeders; ++f) {
      threads.emplace_back([&, f] {
        for (int i = 0; i < per_feeder; ++i) {
          spawn_node(parallel, root, seeds[static_cast<std::size_t>(f * per_feeder + i)], depth, {&root});
        }
        fed.fetch_add(1);
      });
    }
    if (cancel) {
      threads.emplace_back([&] {
        while (fed.load() == 0) std::this_thread::yield();
        root->cancel();
        cancelled.store(true);
      });
    }
    mote::task_group_status status = mote::task_group_status::complete;
    std::string error;
    long units_at_return = -1, open_at_return = -1;
    threads.emplace_back([&] {
      while (fed.load() != feeders || !cancelled.load()) std::this_thread::yield();
      try {
        status = root->wait();
      } catch (const std::exception& e) {
        error = e.what();
      }
      units_at_return = got.units.load();
      open_at_return = root.open.load();
    });
    for (std::thread& t : threads) t.join();
    std::string why;
    if (!error.empty()) {
      why = "wait threw: " + error;
    } else if ((status == mote::task_group_status::canceled) != cancel) {
      why = cancel ? "cancelled before the wait, yet the wait said complete" : "canceled, yet nobody cancelled it";
    } else if (got.units.load() != units_at_return) {
      why = "units ran after the wait had returned";
    } else if (status == mote::task_group_status::complete) {
      ++complete;
      if (got.units.load() != want.units.load() || got.checksum.load() != want.checksum.load()) {
        why = "complete, yet units were lost or run twice";
      } else if (open_at_return != 0 || got.early_waits.load() != 0) {
        why = "a wait returned complete before its children were done";
      }
    } else {
      ++canceled;
      if (got.units.load() > want.units.load()) why = "more units than the program has";
    }
    try {
      root.destroy();
    } catch (const std::exception& e) {
      if (why.empty()) why = std::string("destroying the waited group threw: ") + e.what();
    }
    if (!why.empty()) {
      ADD_FAILURE() << "run " << r << " (MOTE_TEST_SEED=" << mote_test::test_seed() << ", " << feeders
                    << " feeders x " << per_feeder << ", depth " << depth << (cancel ? ", cancelled" : "")
                    << "): " << why << " (" << got.units.load() << " of " << want.units.load() << " units)";
      ++failed;
    }
  }
  EXPECT_EQ(failed, 0);
  EXPECT_GT(complete, 0);
  EXPECT_GT(canceled, 0);
  EXPECT_EQ(mote_test::lifetime::live.load(), live_before) << "spawned closures leaked";
  EXPECT_EQ(mote_test::lifetime::double_destroyed.load(), doubles_before) << "closures destroyed twice";
}

INSTANTIATE_TEST_SUITE_P(Workers, FromOutside, ::testing::Values(1u, 2u, 8u));

}  // namespace
