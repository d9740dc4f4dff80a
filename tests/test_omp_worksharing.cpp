// OpenMP's worksharing constructs (src/omp/worksharing.hpp), driven through
// mote::omp's C++ functions on teams made by mote::omp::parallel.
//
// Loops: every schedule (static with and without a chunk, dynamic,
// nonmonotonic dynamic, guided, auto, runtime through the ICV) x chunk x
// sign of the step x empty, short and long ranges, ranges at the limits of
// long and unsigned long long, x teams of 1 to 4 threads (more than this
// machine's CPUs): every iteration runs exactly once (a counter per
// iteration), and chunks of huge ranges tile them exactly. Ordered regions
// run in iteration order; single runs once per construct, through chains of
// nowait constructs long enough to wrap the ring of constructs many times;
// copyprivate hands the winner's data to every thread; sections run once
// each; doacross wavefronts compute what a serial run does; critical and
// atomic keep counters exact under contention; a cancelled loop hands out
// nothing more; constructs outside any region run alone.
//
// Nothing here depends on timing. Every wait is bounded by a hang_guard.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "omp/icv.hpp"
#include "omp/team.hpp"
#include "omp/worksharing.hpp"
#include "test_util.hpp"

namespace {

namespace omp = mote::omp;
using mote_test::hang_guard;
using mote_test::scaled;
using omp::loop_bounds;
using omp::loop_flavour;
using omp::monotonicity;
using omp::schedule_kind;
using omp::schedule_request;

constexpr unsigned kMaxThreads = 4;

// Runs body(id, n) on every thread of a team of n; returns the team's size
// as its threads saw it.
template <class F>
unsigned team_run(unsigned n, F&& body) {
  struct call {
    std::remove_reference_t<F>* body;
    std::atomic<unsigned> size{0};
  } c{&body};
  omp::parallel(
      [](void* p) {
        auto& cl = *static_cast<call*>(p);
        const omp::thread_state& st = omp::current();
        cl.size.store(st.tm->n, std::memory_order_relaxed);
        (*cl.body)(st.id, st.tm->n);
      },
      &c, n, 0);
  return c.size.load(std::memory_order_relaxed);
}

// A short spin that varies by thread and round, so threads reach the
// constructs in changing orders (no sleep: nothing depends on it).
void jitter(unsigned id, unsigned round) {
  const unsigned spins = ((id * 7919u + round * 104729u) % 13u) * 50u;
  for (unsigned i = 0; i < spins; ++i) mote::detail::cpu_pause();
}

std::vector<schedule_request> all_schedules() {
  return {
      {schedule_kind::static_, monotonicity::monotonic, 0},
      {schedule_kind::static_, monotonicity::monotonic, 1},
      {schedule_kind::static_, monotonicity::monotonic, 3},
      {schedule_kind::dynamic, monotonicity::monotonic, 1},
      {schedule_kind::dynamic, monotonicity::monotonic, 5},
      {schedule_kind::dynamic, monotonicity::nonmonotonic, 1},
      {schedule_kind::dynamic, monotonicity::nonmonotonic, 4},
      {schedule_kind::guided, monotonicity::monotonic, 1},
      {schedule_kind::guided, monotonicity::nonmonotonic, 3},
      {schedule_kind::auto_, monotonicity::nonmonotonic, 0},
      {schedule_kind::auto_, monotonicity::monotonic, 0},
  };
}

std::string name_of(schedule_request s) {
  static const char* const kinds[] = {"static", "dynamic", "guided", "auto", "runtime"};
  static const char* const monos[] = {"monotonic", "nonmonotonic", "unspecified"};
  return std::string(monos[static_cast<int>(s.mono)]) + ":" + kinds[static_cast<int>(s.kind)] +
         "," + std::to_string(s.chunk);
}

// ---- A loop case: bounds, its iterations counted serially, a counter each ----------

struct loop_case {
  loop_bounds b;
  std::uint64_t count = 0;  // iterations, from a serial count in 128-bit arithmetic
  std::vector<std::atomic<int>> hits;
  std::atomic<int> strays{0};  // values that are no iteration of the loop
  // Chunks against the schedule's promise: `chunk` iterations each for
  // dynamic and static with a chunk, at least `chunk` for guided (but the
  // loop's last chunk).
  std::atomic<int> bad_chunks{0};
  // Threads whose last chunk ended at the loop's end: gcc's lastprivate code
  // takes such a thread for the one that ran the last iteration, so there
  // must be exactly one (none for an empty loop).
  std::atomic<int> last_holders{0};

  explicit loop_case(loop_bounds bounds) : b(bounds) {
    const __int128 start = value(b.start), end = value(b.end), incr = step();
    if (incr > 0 && start < end)
      count = static_cast<std::uint64_t>((end - start + incr - 1) / incr);
    if (incr < 0 && start > end)
      count = static_cast<std::uint64_t>((start - end - incr - 1) / -incr);
    hits = std::vector<std::atomic<int>>(count);
  }
  __int128 value(std::uint64_t v) const {
    return b.is_signed ? static_cast<__int128>(static_cast<std::int64_t>(v))
                       : static_cast<__int128>(v);
  }
  __int128 step() const {
    if (b.is_signed) return static_cast<std::int64_t>(b.incr);
    return b.up ? static_cast<__int128>(b.incr) : -static_cast<__int128>(0 - b.incr);
  }
  // Runs a chunk [lo, hi) as gcc's code does: from lo while below hi (above,
  // downward), counting each value's iteration.
  std::uint64_t run_chunk(std::uint64_t lo, std::uint64_t hi) {
    const __int128 start = value(b.start), incr = step(), end = value(hi);
    std::uint64_t ran = 0;
    for (__int128 v = value(lo); incr > 0 ? v < end : v > end; v += incr, ++ran) {
      const __int128 off = v - start;
      if (off % incr != 0 || off / incr < 0 || off / incr >= static_cast<__int128>(count)) {
        strays.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      hits[static_cast<std::size_t>(off / incr)].fetch_add(1, std::memory_order_relaxed);
    }
    return ran;
  }
  void check_chunk(schedule_request s, std::uint64_t ran, std::uint64_t hi) {
    if (hi == b.end || s.chunk == 0) return;  // the last chunk may be short
    const bool exact = s.kind == schedule_kind::dynamic || s.kind == schedule_kind::static_;
    if (exact ? ran != s.chunk : (s.kind == schedule_kind::guided && ran < s.chunk)) {
      bad_chunks.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // Every thread of the team: the whole loop.
  void run(schedule_request s, bool nowait) {
    std::uint64_t lo = 0;
    std::uint64_t hi = 0;
    if (omp::loop_start(b, s, loop_flavour::plain, &lo, &hi, nullptr)) {
      std::uint64_t last_end = 0;
      do {
        check_chunk(s, run_chunk(lo, hi), hi);
        last_end = hi;
      } while (omp::loop_next(&lo, &hi));
      if (last_end == b.end) last_holders.fetch_add(1, std::memory_order_relaxed);
    }
    if (nowait) {
      omp::loop_end_nowait();
    } else {
      omp::loop_end();
    }
  }
  // After the region: each iteration once; then reset for the next run.
  void check(const std::string& what) {
    EXPECT_EQ(strays.load(), 0) << what;
    EXPECT_EQ(bad_chunks.exchange(0), 0) << what << ": chunks of the wrong size";
    EXPECT_EQ(last_holders.exchange(0), count > 0 ? 1 : 0)
        << what << ": threads whose last chunk ended at the loop's end";
    std::uint64_t wrong = 0;
    std::uint64_t first = count;
    for (std::uint64_t i = 0; i < count; ++i) {
      if (hits[i].load() != 1) {
        if (wrong++ == 0) first = i;
      }
      hits[i].store(0);
    }
    EXPECT_EQ(wrong, 0u) << what << ": " << wrong << " iterations not run exactly once, the first "
                         << first << " of " << count;
    strays.store(0);
  }
};

std::vector<loop_bounds> long_bounds() {
  constexpr long kMax = std::numeric_limits<long>::max();
  constexpr long kMin = std::numeric_limits<long>::min();
  return {
      loop_bounds::of_long(0, 0, 1),
      loop_bounds::of_long(5, 2, 1),
      loop_bounds::of_long(10, 10, -1),
      loop_bounds::of_long(-3, 7, -2),
      loop_bounds::of_long(0, 1, 1),
      loop_bounds::of_long(0, 1000, 1),
      loop_bounds::of_long(-50, 51, 3),
      loop_bounds::of_long(100, -100, -7),
      loop_bounds::of_long(7, 0, -1),
      loop_bounds::of_long(kMax - 100, kMax, 7),
      loop_bounds::of_long(kMin + 100, kMin, -9),
      loop_bounds::of_long(kMin, kMin + 300, 31),
      loop_bounds::of_long(-1000, 1000, 1000),
  };
}

std::vector<loop_bounds> ull_bounds() {
  constexpr unsigned long long kMax = std::numeric_limits<unsigned long long>::max();
  const auto down = [](unsigned long long step) { return 0 - step; };
  return {
      loop_bounds::of_ull(true, 0, 1000, 1),
      loop_bounds::of_ull(true, kMax - 1000, kMax, 13),
      loop_bounds::of_ull(false, 1000, 0, down(3)),
      loop_bounds::of_ull(false, kMax, kMax - 500, down(1)),
      loop_bounds::of_ull(true, 5, 5, 1),
      loop_bounds::of_ull(false, 5, 10, down(1)),
      loop_bounds::of_ull(true, 1ull << 63, (1ull << 63) + 77, 2),
  };
}

// Every schedule x every range, one team per size, every loop in one region
// (alternately with and without the end barrier: nowait loops overlap).
void coverage(const std::vector<loop_bounds>& bounds, const char* what) {
  hang_guard guard(std::string("loop coverage over ") + what);
  std::vector<std::unique_ptr<loop_case>> cases;
  for (const loop_bounds& b : bounds) cases.push_back(std::make_unique<loop_case>(b));
  const std::vector<schedule_request> schedules = all_schedules();
  for (unsigned n = 1; n <= kMaxThreads; ++n) {
    for (const schedule_request& s : schedules) {
      const unsigned size = team_run(n, [&](unsigned id, unsigned) {
        for (std::size_t c = 0; c < cases.size(); ++c) {
          jitter(id, static_cast<unsigned>(c));
          cases[c]->run(s, c % 2 == 1);
        }
      });
      ASSERT_EQ(size, n);
      for (std::size_t c = 0; c < cases.size(); ++c) {
        cases[c]->check(std::string(what) + " case " + std::to_string(c) + ", " + name_of(s) +
                        ", " + std::to_string(n) + " threads");
      }
    }
  }
}

TEST(OmpLoop, EveryIterationOnceOverLong) { coverage(long_bounds(), "long"); }

TEST(OmpLoop, EveryIterationOnceOverUnsignedLongLong) {
  coverage(ull_bounds(), "unsigned long long");
}

// schedule(runtime): the run-sched-var ICV of the encountering task, which
// the team inherits, with each modifier.
TEST(OmpLoop, RuntimeScheduleFollowsTheIcv) {
  hang_guard guard("runtime schedules");
  loop_case c(loop_bounds::of_long(-7, 500, 2));
  omp::task_icvs& icv = omp::writable_icvs();
  const omp::task_icvs saved = icv;
  const std::pair<unsigned, int> settings[] = {
      {omp::kSchedStatic, 0},  {omp::kSchedStatic, 4},
      {omp::kSchedDynamic, 0}, {omp::kSchedDynamic | omp::kSchedMonotonic, 3},
      {omp::kSchedGuided, 2},  {omp::kSchedAuto, 0},
  };
  for (const auto& [code, chunk] : settings) {
    icv.run_sched = static_cast<int>(code);
    icv.run_chunk = chunk;
    for (const monotonicity m :
         {monotonicity::monotonic, monotonicity::nonmonotonic, monotonicity::unspecified}) {
      for (unsigned n = 1; n <= kMaxThreads; ++n) {
        team_run(n, [&](unsigned, unsigned) { c.run({schedule_kind::runtime, m, 0}, false); });
        c.check("runtime " + std::to_string(code) + "," + std::to_string(chunk) + ", " +
                std::to_string(n) + " threads");
      }
    }
  }
  icv = saved;
}

// Chunks of ranges far too long to run: each thread records its chunks, and
// together they must tile [start, end) exactly, in order once sorted. Covers
// the claims that cannot use fetch-and-add (counts near 2^64).
TEST(OmpLoop, ChunksTileHugeRanges) {
  hang_guard guard("huge ranges");
  constexpr unsigned long long kMax = std::numeric_limits<unsigned long long>::max();
  struct huge {
    loop_bounds b;
    schedule_request s;
  };
  const huge cases[] = {
      {loop_bounds::of_ull(true, 0, kMax, 1),
       {schedule_kind::dynamic, monotonicity::monotonic, 1ull << 60}},
      {loop_bounds::of_ull(true, 0, kMax, 1),
       {schedule_kind::dynamic, monotonicity::nonmonotonic, 1ull << 61}},
      {loop_bounds::of_ull(true, 3, kMax, 1), {schedule_kind::static_, monotonicity::monotonic, 0}},
      {loop_bounds::of_ull(true, 3, kMax, 1),
       {schedule_kind::static_, monotonicity::monotonic, 1ull << 62}},
      {loop_bounds::of_ull(true, 0, kMax, 1),
       {schedule_kind::guided, monotonicity::monotonic, 1ull << 59}},
      {loop_bounds::of_long(std::numeric_limits<long>::min(), std::numeric_limits<long>::max(), 1),
       {schedule_kind::dynamic, monotonicity::monotonic, 1l << 61}},
      {loop_bounds::of_long(std::numeric_limits<long>::max(), std::numeric_limits<long>::min(), -1),
       {schedule_kind::guided, monotonicity::monotonic, 1l << 60}},
  };
  for (const huge& h : cases) {
    for (unsigned n = 1; n <= kMaxThreads; ++n) {
      std::mutex m;
      std::vector<std::pair<std::uint64_t, std::uint64_t>> chunks;
      team_run(n, [&](unsigned, unsigned) {
        std::uint64_t lo = 0;
        std::uint64_t hi = 0;
        if (omp::loop_start(h.b, h.s, loop_flavour::plain, &lo, &hi, nullptr)) {
          do {
            const std::lock_guard<std::mutex> hold(m);
            chunks.emplace_back(lo, hi);
          } while (omp::loop_next(&lo, &hi));
        }
        omp::loop_end();
      });
      // In loop order: upward by value, downward by value reversed (as signed
      // for the long loop).
      const bool up = h.b.up;
      const bool sgn = h.b.is_signed;
      const auto before = [&](std::uint64_t a, std::uint64_t b) {
        if (sgn)
          return up ? static_cast<std::int64_t>(a) < static_cast<std::int64_t>(b)
                    : static_cast<std::int64_t>(a) > static_cast<std::int64_t>(b);
        return up ? a < b : a > b;
      };
      std::sort(chunks.begin(), chunks.end(),
                [&](const auto& x, const auto& y) { return before(x.first, y.first); });
      ASSERT_FALSE(chunks.empty());
      EXPECT_EQ(chunks.front().first, h.b.start) << name_of(h.s) << ", " << n << " threads";
      EXPECT_EQ(chunks.back().second, h.b.end) << name_of(h.s) << ", " << n << " threads";
      for (std::size_t i = 0; i < chunks.size(); ++i) {
        EXPECT_TRUE(before(chunks[i].first, chunks[i].second)) << "an empty or reversed chunk";
        if (i + 1 < chunks.size())
          EXPECT_EQ(chunks[i].second, chunks[i + 1].first) << "a gap or an overlap";
      }
    }
  }
}

// The parallel region of GOMP_parallel_loop_*: the loop is entered before fn,
// which goes straight to loop_next.
TEST(OmpLoop, ParallelLoopStartsWithTheLoopEntered) {
  hang_guard guard("parallel_loop");
  static loop_case* current_case = nullptr;
  loop_case c(loop_bounds::of_long(3, 4000, 3));
  current_case = &c;
  for (const schedule_request& s : all_schedules()) {
    for (unsigned n = 1; n <= kMaxThreads; ++n) {
      omp::parallel_loop(
          [](void*) {
            std::uint64_t lo = 0;
            std::uint64_t hi = 0;
            std::uint64_t last_end = 0;
            while (omp::loop_next(&lo, &hi)) {
              current_case->run_chunk(lo, hi);
              last_end = hi;
            }
            if (last_end == current_case->b.end) current_case->last_holders.fetch_add(1);
            omp::loop_end_nowait();
          },
          nullptr, n, 0, c.b, s);
      c.check("parallel_loop " + name_of(s) + ", " + std::to_string(n) + " threads");
    }
  }
}

// GOMP_loop_start's `mem`: memory shared by the loop's threads, zeroed for
// each loop (the ring's slots are reused many times over here).
TEST(OmpLoop, SharedMemoryIsZeroedAndShared) {
  hang_guard guard("loop memory");
  for (unsigned n = 1; n <= kMaxThreads; ++n) {
    std::atomic<int> bad{0};
    team_run(n, [&](unsigned id, unsigned size) {
      for (unsigned round = 0; round < 3 * omp::kWsRing; ++round) {
        void* mem = reinterpret_cast<void*>(static_cast<std::uintptr_t>(size * sizeof(long)));
        omp::loop_start(loop_bounds::of_long(0, 1, 1), {}, loop_flavour::plain, nullptr, nullptr,
                        &mem);
        auto* words = static_cast<long*>(mem);
        if (words[id] != 0) bad.fetch_add(1);
        omp::barrier();
        words[id] = static_cast<long>(round * 100 + id + 1);
        omp::barrier();
        for (unsigned t = 0; t < size; ++t) {
          if (words[t] != static_cast<long>(round * 100 + t + 1)) bad.fetch_add(1);
        }
        omp::loop_end();
      }
    });
    EXPECT_EQ(bad.load(), 0) << n << " threads";
  }
}

// ---- Ordered -----------------------------------------------------------------------

TEST(OmpOrdered, RegionsRunInIterationOrder) {
  hang_guard guard("ordered");
  const long count = scaled(240, 2);
  std::vector<schedule_request> schedules = all_schedules();
  schedules.push_back({schedule_kind::runtime, monotonicity::unspecified, 0});
  for (const schedule_request& s : schedules) {
    for (unsigned n = 1; n <= kMaxThreads; ++n) {
      for (const bool every : {true, false}) {
        // Written inside ordered regions only: regions that overlap or run
        // out of order show as a wrong sequence (and as a race under TSan).
        std::vector<long> seen(static_cast<std::size_t>(count), -1);
        std::size_t used = 0;
        team_run(n, [&](unsigned id, unsigned) {
          std::uint64_t lo = 0;
          std::uint64_t hi = 0;
          if (omp::loop_start(loop_bounds::of_long(count - 1, -1, -1), s, loop_flavour::ordered,
                              &lo, &hi, nullptr)) {
            do {
              for (long i = static_cast<long>(lo); i > static_cast<long>(hi); --i) {
                jitter(id, static_cast<unsigned>(i));
                if (!every && i % 3 != 0) continue;  // iterations without an ordered region
                omp::ordered_start();
                if (used < seen.size()) seen[used] = i;
                ++used;
                omp::ordered_end();
              }
            } while (omp::loop_next(&lo, &hi));
          }
          omp::loop_end();
        });
        seen.resize(std::min(used, seen.size()));
        std::vector<long> expected;
        for (long i = count - 1; i > -1; --i) {
          if (every || i % 3 == 0) expected.push_back(i);
        }
        EXPECT_EQ(seen, expected) << name_of(s) << ", " << n << " threads";
      }
    }
  }
}

// ---- Single, copyprivate, the ring -------------------------------------------------

// 100 nowait single constructs, then 100 nowait loops and scopes between
// singles: the ring of kWsRing slots wraps many times while threads run ahead of each
// other (the jitter), and each construct still runs once.
TEST(OmpSingle, OncePerConstructThroughNowaitChains) {
  hang_guard guard("single chains");
  constexpr unsigned kChain = 100;
  for (unsigned n = 1; n <= kMaxThreads; ++n) {
    std::vector<std::atomic<int>> singles(2 * kChain);
    std::vector<std::unique_ptr<loop_case>> loops;
    for (unsigned k = 0; k < kChain; ++k)
      loops.push_back(std::make_unique<loop_case>(loop_bounds::of_long(0, 37, 1)));
    team_run(n, [&](unsigned id, unsigned) {
      for (unsigned k = 0; k < kChain; ++k) {
        jitter(id, k);
        if (omp::single_start()) singles[k].fetch_add(1);
      }
      for (unsigned k = 0; k < kChain; ++k) {
        // One thread lags now and then: the others run up to the ring's size ahead.
        if (id == k % 3) jitter(id, k + 1);
        loops[k]->run({schedule_kind::dynamic, monotonicity::monotonic, 2}, true);
        omp::scope_start(nullptr);  // a construct of the ring with nothing to hand out
        if (omp::single_start()) singles[kChain + k].fetch_add(1);
      }
    });
    for (unsigned k = 0; k < 2 * kChain; ++k)
      EXPECT_EQ(singles[k].load(), 1) << "single " << k << ", " << n;
    for (unsigned k = 0; k < kChain; ++k)
      loops[k]->check("loop " + std::to_string(k) + " of the chain");
  }
}

TEST(OmpSingle, CopyPrivateHandsTheWinnersData) {
  hang_guard guard("copyprivate");
  constexpr unsigned kRounds = 50;
  for (unsigned n = 1; n <= kMaxThreads; ++n) {
    std::vector<std::atomic<int>> winners(kRounds);
    std::vector<std::vector<long>> got(kMaxThreads, std::vector<long>(kRounds, -1));
    std::vector<long> chosen(kRounds, -2);
    team_run(n, [&](unsigned id, unsigned) {
      for (unsigned r = 0; r < kRounds; ++r) {
        jitter(id, r);
        long mine = -1;  // the copyprivate variable
        void* data = omp::single_copy_start();
        if (data == nullptr) {
          winners[r].fetch_add(1);
          mine = static_cast<long>(r * 1000 + id);
          chosen[r] = mine;
          omp::single_copy_end(&mine);
        } else {
          mine = *static_cast<long*>(data);
        }
        got[id][r] = mine;
        omp::barrier();  // gcc's barrier after the copy: the winner's variable lives until here
      }
    });
    for (unsigned r = 0; r < kRounds; ++r) {
      EXPECT_EQ(winners[r].load(), 1) << "round " << r;
      for (unsigned t = 0; t < n; ++t)
        EXPECT_EQ(got[t][r], chosen[r]) << "round " << r << ", thread " << t;
    }
  }
}

// ---- Sections ----------------------------------------------------------------------

TEST(OmpSections, EachSectionOnce) {
  hang_guard guard("sections");
  for (unsigned n = 1; n <= kMaxThreads; ++n) {
    for (const unsigned count : {0u, 1u, 3u, 17u}) {
      std::vector<std::atomic<int>> ran(count + 1);
      std::atomic<int> strays{0};
      team_run(n, [&](unsigned id, unsigned) {
        for (unsigned round = 0; round < 3; ++round) {
          jitter(id, round);
          for (unsigned s = omp::sections_start(count, nullptr); s != 0; s = omp::sections_next()) {
            if (s > count) {
              strays.fetch_add(1);
            } else {
              ran[s].fetch_add(1);
            }
          }
          if (round == 1) {
            omp::loop_end_nowait();
          } else {
            omp::loop_end();
          }
        }
      });
      EXPECT_EQ(strays.load(), 0);
      for (unsigned s = 1; s <= count; ++s)
        EXPECT_EQ(ran[s].load(), 3) << "section " << s << " of " << count;
    }
  }
}

TEST(OmpSections, ParallelSectionsStartWithTheConstructEntered) {
  hang_guard guard("parallel_sections");
  static std::vector<std::atomic<int>>* ran = nullptr;
  std::vector<std::atomic<int>> counts(10);
  ran = &counts;
  for (unsigned n = 1; n <= kMaxThreads; ++n) {
    omp::parallel_sections(
        [](void*) {
          for (unsigned s = omp::sections_next(); s != 0; s = omp::sections_next())
            (*ran)[s].fetch_add(1);
          omp::loop_end_nowait();
        },
        nullptr, n, 0, 9);
    for (unsigned s = 1; s <= 9; ++s)
      EXPECT_EQ(counts[s].exchange(0), 1) << "section " << s << ", " << n;
    EXPECT_EQ(counts[0].load(), 0);
  }
}

// ---- Doacross ----------------------------------------------------------------------

// a[i][j] = f(a[i-1][j], a[i][j-1]): the outer loop worksharing, the inner
// one ordered, depend(sink: i-1, j) depend(sink: i, j-1), depend(source).
TEST(OmpDoacross, WavefrontEqualsSerial) {
  hang_guard guard("doacross");
  const std::uint64_t rows = static_cast<std::uint64_t>(scaled(60, 3));
  const std::uint64_t cols = 37;
  const auto f = [](std::uint64_t up, std::uint64_t left, std::uint64_t i, std::uint64_t j) {
    return (up * 31 + left * 17 + i * 7 + j) % 1000003;
  };
  std::vector<std::uint64_t> serial(rows * cols);
  for (std::uint64_t i = 0; i < rows; ++i) {
    for (std::uint64_t j = 0; j < cols; ++j) {
      serial[i * cols + j] =
          f(i > 0 ? serial[(i - 1) * cols + j] : 1, j > 0 ? serial[i * cols + j - 1] : 1, i, j);
    }
  }
  std::vector<schedule_request> schedules = {
      {schedule_kind::static_, monotonicity::monotonic, 0},
      {schedule_kind::static_, monotonicity::monotonic, 1},
      {schedule_kind::static_, monotonicity::monotonic, 4},
      {schedule_kind::dynamic, monotonicity::monotonic, 1},
      {schedule_kind::dynamic, monotonicity::monotonic, 3},
      {schedule_kind::dynamic, monotonicity::nonmonotonic, 2},
      {schedule_kind::guided, monotonicity::monotonic, 1},
      {schedule_kind::auto_, monotonicity::nonmonotonic, 0},
      {schedule_kind::runtime, monotonicity::unspecified, 0},
  };
  for (const schedule_request& s : schedules) {
    for (unsigned n = 1; n <= kMaxThreads; ++n) {
      // Atomic cells, relaxed: only the doacross waits order them, and a
      // missing wait shows as a wrong value (and as a race under TSan with
      // the plain reads of `serial` below, never here).
      std::vector<std::atomic<std::uint64_t>> a(rows * cols);
      std::atomic<int> dims_seen{0};
      team_run(n, [&](unsigned id, unsigned size) {
        const std::uint64_t counts[2] = {rows, cols};
        std::uint64_t lo = 0;
        std::uint64_t hi = 0;
        if (omp::loop_doacross_start(2, counts, s, &lo, &hi, nullptr)) {
          if (omp::doacross_dims() != (size > 1 ? 2u : 0u)) dims_seen.fetch_add(1);
          do {
            for (std::uint64_t i = lo; i < hi; ++i) {
              for (std::uint64_t j = 0; j < cols; ++j) {
                jitter(id, static_cast<unsigned>(i * cols + j));
                if (i > 0) {
                  const std::uint64_t v[2] = {i - 1, j};
                  omp::doacross_wait(v);
                }
                if (j > 0) {
                  const std::uint64_t v[2] = {i, j - 1};
                  omp::doacross_wait(v);
                }
                const std::uint64_t up =
                    i > 0 ? a[(i - 1) * cols + j].load(std::memory_order_relaxed) : 1;
                const std::uint64_t left =
                    j > 0 ? a[i * cols + j - 1].load(std::memory_order_relaxed) : 1;
                a[i * cols + j].store(f(up, left, i, j), std::memory_order_relaxed);
                const std::uint64_t here[2] = {i, j};
                omp::doacross_post(here);
              }
            }
          } while (omp::loop_next(&lo, &hi));
        }
        omp::loop_end();
      });
      EXPECT_EQ(dims_seen.load(), 0);
      std::uint64_t wrong = 0;
      for (std::uint64_t k = 0; k < rows * cols; ++k) wrong += a[k].load() != serial[k] ? 1 : 0;
      EXPECT_EQ(wrong, 0u) << name_of(s) << ", " << n << " threads";
    }
  }
}

// A chain through one dimension: x[i] = g(x[i-1]) with depend(sink: i-1).
TEST(OmpDoacross, ChainEqualsSerial) {
  hang_guard guard("doacross chain");
  const std::uint64_t count = static_cast<std::uint64_t>(scaled(3000, 4));
  std::vector<std::uint64_t> serial(count);
  for (std::uint64_t i = 0; i < count; ++i)
    serial[i] = ((i > 0 ? serial[i - 1] : 5) * 3 + i) % 999983;
  for (const schedule_request& s : all_schedules()) {
    for (unsigned n = 2; n <= kMaxThreads; ++n) {
      std::vector<std::uint64_t> x(count);  // plain: a missing wait is a race
      team_run(n, [&](unsigned, unsigned) {
        std::uint64_t lo = 0;
        std::uint64_t hi = 0;
        if (omp::loop_doacross_start(1, &count, s, &lo, &hi, nullptr)) {
          do {
            for (std::uint64_t i = lo; i < hi; ++i) {
              if (i > 0) {
                const std::uint64_t v = i - 1;
                omp::doacross_wait(&v);
              }
              x[i] = ((i > 0 ? x[i - 1] : 5) * 3 + i) % 999983;
              omp::doacross_post(&i);
            }
          } while (omp::loop_next(&lo, &hi));
        }
        omp::loop_end_nowait();
      });
      EXPECT_EQ(x, serial) << name_of(s) << ", " << n << " threads";
    }
  }
}

// ---- Critical sections -------------------------------------------------------------

TEST(OmpCritical, CountersStayExactUnderContention) {
  hang_guard guard("critical");
  const long rounds = scaled(5000, 5);
  // gcc's .gomp_critical_user_<name> slots: static storage, as gcc's (the
  // locks made in them live as long as the program).
  static void* name_a = nullptr;
  static void* name_b = nullptr;
  long unnamed = 0;
  long named_a = 0;
  long named_b = 0;
  long atomic = 0;
  team_run(kMaxThreads, [&](unsigned, unsigned) {
    for (long r = 0; r < rounds; ++r) {
      omp::critical_start();
      ++unnamed;
      omp::critical_end();
      omp::critical_name_start(&name_a);
      ++named_a;
      omp::critical_name_end(&name_a);
      omp::critical_name_start(&name_b);
      named_b += 2;
      omp::critical_name_end(&name_b);
      omp::atomic_start();
      atomic += 3;
      omp::atomic_end();
    }
  });
  EXPECT_EQ(unnamed, rounds * kMaxThreads);
  EXPECT_EQ(named_a, rounds * kMaxThreads);
  EXPECT_EQ(named_b, 2 * rounds * kMaxThreads);
  EXPECT_EQ(atomic, 3 * rounds * kMaxThreads);
  EXPECT_NE(name_a, nullptr);
  EXPECT_NE(name_a, name_b);  // one lock per name
}

// ---- Cancellation ------------------------------------------------------------------

// Every thread takes its first chunk, then thread 0 cancels the loop while
// the others wait for it: after that nobody gets another chunk, and the end
// reports no cancelled region.
TEST(OmpCancel, ACancelledLoopHandsOutNothingMore) {
  hang_guard guard("cancel");
  for (unsigned n = 1; n <= kMaxThreads; ++n) {
    std::atomic<unsigned> started{0};
    std::atomic<bool> cancelled{false};
    std::atomic<int> after{0};
    std::atomic<int> seen{0};
    std::atomic<int> region_cancelled{0};
    team_run(n, [&](unsigned id, unsigned size) {
      std::uint64_t lo = 0;
      std::uint64_t hi = 0;
      const bool got = omp::loop_start(loop_bounds::of_long(0, 100000, 1),
                                       {schedule_kind::dynamic, monotonicity::monotonic, 1},
                                       loop_flavour::plain, &lo, &hi, nullptr);
      if (got) started.fetch_add(1);
      if (id == 0) {
        while (started.load() < size) std::this_thread::yield();
        EXPECT_TRUE(omp::cancel_construct());
        cancelled.store(true);
      } else {
        while (!cancelled.load()) std::this_thread::yield();
      }
      if (omp::construct_cancelled()) seen.fetch_add(1);
      while (omp::loop_next(&lo, &hi)) after.fetch_add(1);
      if (omp::loop_end_cancel()) region_cancelled.fetch_add(1);
      EXPECT_FALSE(omp::construct_cancelled());  // no construct now
    });
    EXPECT_EQ(started.load(), n);
    EXPECT_EQ(after.load(), 0);
    EXPECT_EQ(seen.load(), static_cast<int>(n));
    EXPECT_EQ(region_cancelled.load(), 0);
  }
}

// ---- A team kept for the next region ------------------------------------------------

// A cancelled region's threads may skip constructs the others entered (they
// leave for the region's end at a cancellation point), so the ring no longer
// agrees with their counts. reset_worksharing starts a kept team afresh: the
// next region on it runs every construct once. (Here thread 0 alone enters
// three constructs, as a thread does that the cancellation reaches last.)
TEST(OmpTeamReuse, ResetAfterThreadsMetDifferentConstructs) {
  hang_guard guard("a kept team after a reset");
  for (unsigned n = 2; n <= kMaxThreads; ++n) {
    omp::team* first = nullptr;
    team_run(n, [&](unsigned id, unsigned) {
      if (id != 0) return;
      first = omp::current().tm;
      for (int k = 0; k < 3; ++k) {
        for (unsigned s = omp::sections_start(5, nullptr); s != 0; s = omp::sections_next()) {
        }
        omp::loop_end_nowait();
      }
    });
    ASSERT_NE(first, nullptr);
    omp::reset_worksharing(*first);
    std::vector<std::unique_ptr<loop_case>> loops;
    for (unsigned k = 0; k < 3 * omp::kWsRing; ++k) {
      loops.push_back(std::make_unique<loop_case>(loop_bounds::of_long(0, 50, 1)));
    }
    std::vector<std::atomic<int>> singles(loops.size());
    team_run(n, [&](unsigned id, unsigned) {
      for (std::size_t k = 0; k < loops.size(); ++k) {
        jitter(id, static_cast<unsigned>(k));
        loops[k]->run({schedule_kind::dynamic, monotonicity::monotonic, 3}, true);
        if (omp::single_start()) singles[k].fetch_add(1);
      }
    });
    for (std::size_t k = 0; k < loops.size(); ++k) {
      loops[k]->check("loop " + std::to_string(k) + " after the reset, " + std::to_string(n));
      EXPECT_EQ(singles[k].load(), 1) << "single " << k << " after the reset";
    }
  }
}

// ---- Outside any parallel region ---------------------------------------------------

TEST(OmpOrphaned, ConstructsRunAloneOutsideRegions) {
  hang_guard guard("orphaned constructs");
  loop_case c(loop_bounds::of_long(-10, 300, 7));
  for (const schedule_request& s : all_schedules()) {
    c.run(s, false);
    c.check("orphaned " + name_of(s));
  }
  EXPECT_TRUE(omp::single_start());
  EXPECT_EQ(omp::single_copy_start(), nullptr);
  long v = 7;
  omp::single_copy_end(&v);
  unsigned total = 0;
  for (unsigned s = omp::sections_start(5, nullptr); s != 0; s = omp::sections_next()) total += s;
  omp::loop_end();
  EXPECT_EQ(total, 15u);
  std::vector<long> seen;
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  if (omp::loop_start(loop_bounds::of_long(0, 50, 1),
                      {schedule_kind::dynamic, monotonicity::monotonic, 3}, loop_flavour::ordered,
                      &lo, &hi, nullptr)) {
    do {
      for (long i = static_cast<long>(lo); i < static_cast<long>(hi); ++i) {
        omp::ordered_start();
        seen.push_back(i);
        omp::ordered_end();
      }
    } while (omp::loop_next(&lo, &hi));
  }
  omp::loop_end();
  ASSERT_EQ(seen.size(), 50u);
  for (long i = 0; i < 50; ++i) EXPECT_EQ(seen[static_cast<std::size_t>(i)], i);
}

}  // namespace
