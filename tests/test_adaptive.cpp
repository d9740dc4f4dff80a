// Adaptive offloading (docs/adaptive.md). The decision logic is driven with
// made-up tick counts (the model reads no clock), and the assistant with a
// fake cycle counter whose hand-off cost the test sets; results are checked
// against serial runs. Nothing here depends on how fast the machine is: a
// test that waits for the model to reach a state allows many rounds.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mote/detail/adaptive.hpp"
#include "mote/mote.hpp"
#include "core/config.hpp"
#include "test_util.hpp"

namespace {

using mote::detail::offload_model;
using choice = offload_model::choice;

offload_model::params small_params() {
  offload_model::params p;
  p.sample_here = 4;
  p.sample_away = 8;
  p.probe_ticks = 10'000;
  p.discard_ticks = 1'000'000;
  p.short_ticks = 0;
  p.retry = 5;
  p.burst = 3;
  p.min_probe_calls = 10;
  p.max_probe_calls = 1000;
  return p;
}

// ---- The model, driven by tick counts ---------------------------------------

// s's entry after its first call, timed in place at `work` ticks.
offload_model::entry& sized(offload_model& m, mote::site& s, std::uint64_t work) {
  auto& e = m.find(&s);
  EXPECT_EQ(m.decide(e), choice::here_timed);
  m.note_work(e, work);
  return e;
}

TEST(AdaptiveModel, NewSiteIsTimedInPlaceThenOffloadsWhileTheHandOffIsUnknown) {
  static mote::site s{"new site"};
  offload_model m(small_params());
  auto& e = m.find(&s);
  EXPECT_EQ(m.decide(e), choice::here_timed);
  m.note_work(e, 500);
  EXPECT_EQ(e.work, 500u);
  // No hand-off measured yet: offload, the first one timed (a probe), then
  // one in sample_away.
  EXPECT_EQ(m.decide(e), choice::away_timed);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(m.decide(e), choice::away) << i;
  EXPECT_EQ(m.decide(e), choice::away_timed);
}

TEST(AdaptiveModel, ShortAgainstTheHandOffRunsInPlaceAndReprobesInBursts) {
  static mote::site s{"short site"};
  const auto p = small_params();
  offload_model m(p);
  m.set_handoff(1000);
  auto& e = m.find(&s);
  ASSERT_EQ(m.decide(e), choice::here_timed);
  m.note_work(e, 100);  // 100 ticks against a hand-off of 1000: in place
  // At least probe_ticks of work between bursts; more (up to the bound) when
  // a probe costs much more than the task: here (1000 - 100) * 3 * 100 ticks.
  const std::uint32_t interval = m.probe_interval(100);
  EXPECT_EQ(interval, 1000u);
  m.set_handoff(150);
  EXPECT_EQ(m.probe_interval(100), 150u);  // (150 - 100) * 3 * 100 / 100
  m.set_handoff(100);
  EXPECT_EQ(m.probe_interval(100), 100u);  // probe_ticks / work
  m.set_handoff(1000);
  // In place, timed one in sample_here, until the probe interval runs out.
  std::vector<choice> seen;
  for (std::uint32_t i = 0; i + 1 < interval; ++i) seen.push_back(m.decide(e));
  for (std::size_t i = 0; i < seen.size(); ++i) {
    const choice want = (i + 1) % p.sample_here == 0 ? choice::here_timed : choice::here;
    ASSERT_EQ(seen[i], want) << "call " << i;
  }
  // A burst of probes, in a row.
  for (std::uint32_t b = 0; b < p.burst; ++b) ASSERT_EQ(m.decide(e), choice::away_timed) << b;
  EXPECT_NE(m.decide(e), choice::away_timed);  // back in place
  // The burst's first hand-off is not counted; the others move the estimate.
  EXPECT_TRUE(m.note_handoff(e, 50));
  EXPECT_EQ(m.handoff(), 1000u);
  EXPECT_EQ(m.cold_samples(), 1u);
  EXPECT_TRUE(m.note_handoff(e, 50));
  EXPECT_LT(m.handoff(), 1000u);
  EXPECT_EQ(m.handoff_samples(), 1u);
}

TEST(AdaptiveModel, AFallingHandOffTurnsTheSiteToOffloading) {
  static mote::site s{"turning site"};
  offload_model m(small_params());
  m.set_handoff(1000);
  auto& e = sized(m, s, 400);
  EXPECT_EQ(m.decide(e), choice::here);
  // The host got faster: samples of 100 ticks bring the estimate under the
  // task, with the 1/8 margin.
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(m.note_handoff(e, 100));
  EXPECT_LT(m.handoff() + m.handoff() / 8, 400u);
  bool offloads = false;
  for (int i = 0; i < 8 && !offloads; ++i) {
    const choice c = m.decide(e);
    offloads = c == choice::away || c == choice::away_timed;
  }
  EXPECT_TRUE(offloads);
  // And slower again: back in place.
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(m.note_handoff(e, 4000));
  EXPECT_EQ(m.decide(e), choice::here);
}

TEST(AdaptiveModel, ATaskAboutAsLongAsTheHandOffStaysInPlace) {
  static mote::site s{"margin site"};
  offload_model m(small_params());
  m.set_handoff(1000);
  auto& e = sized(m, s, 1100);  // longer than the hand-off, within the 1/8 margin
  EXPECT_EQ(m.decide(e), choice::here);
  auto& f = m.find(&s);
  m.note_work(f, 1200);  // past the margin (moving average: 1125)
  const choice c = m.decide(f);
  EXPECT_TRUE(c == choice::away || c == choice::away_timed);
}

TEST(AdaptiveModel, SleepsAreDroppedAndProbedAgainSoon) {
  static mote::site s{"sleepy site"};
  const auto p = small_params();
  offload_model m(p);
  m.set_handoff(1000);
  auto& e = sized(m, s, 100);
  EXPECT_FALSE(m.note_handoff(e, p.discard_ticks + 1));
  EXPECT_EQ(m.handoff(), 1000u);
  EXPECT_EQ(m.discarded_samples(), 1u);
  EXPECT_EQ(e.until_probe, p.retry);
  // A probe that measured nothing (not taken, or the owner not waiting).
  e.until_probe = 77;
  m.no_handoff(e);
  EXPECT_EQ(e.until_probe, p.retry);
}

TEST(AdaptiveModel, HandOffsThatAreSlowEveryTimeCountAfterAll) {
  static mote::site s{"shared core site"};
  const auto p = small_params();
  offload_model m(p);
  auto& e = sized(m, s, 100);
  // Unknown hand-off: the site offloads. Every sample is slow (the other
  // side shares the core): dropped at first, then taken as what it costs.
  for (std::uint32_t i = 1; i < p.slow_run; ++i) EXPECT_FALSE(m.note_handoff(e, p.discard_ticks * 2)) << i;
  EXPECT_EQ(m.handoff(), 0u);
  EXPECT_TRUE(m.note_handoff(e, p.discard_ticks * 2));
  EXPECT_EQ(m.handoff(), p.discard_ticks * 2);
  const choice c = m.decide(e);
  EXPECT_TRUE(c == choice::here || c == choice::here_timed);
  // One fast sample resets the run.
  EXPECT_TRUE(m.note_handoff(e, 50));
  EXPECT_FALSE(m.note_handoff(e, p.discard_ticks * 2));
}

TEST(AdaptiveModel, OneSlowSampleMovesAnEstimateAtMostFourfold) {
  static mote::site s{"capped site"};
  offload_model m(small_params());
  auto& e = sized(m, s, 100);
  m.note_work(e, 1'000'000);  // a preemption inside a timed run
  EXPECT_LE(e.work, 100u + (400u - 100u) / 4 + 1);
  m.set_handoff(100);
  EXPECT_TRUE(m.note_handoff(e, 900'000));
  EXPECT_LE(m.handoff(), 100u + (400u - 100u) / 4 + 1);
}

TEST(AdaptiveModel, SitesAndDepthsHaveTheirOwnEntries) {
  static mote::site a{"site a"}, b{"site b"};
  offload_model m(small_params());
  auto& ea = m.find(&a);
  ea.work = 11;
  EXPECT_EQ(m.find(&a).work, 11u);
  EXPECT_EQ(m.find(&a, 1).work, 0u);  // another depth: another entry
  EXPECT_EQ(m.find(&b).work, 0u);
}

TEST(AdaptiveModel, CountsReachTheSitesThroughCollisionsAndFlushes) {
  // More sites than entries: some collide, and a site that takes an entry
  // flushes the counts of the one it replaces.
  // Static storage (never freed): a site with counts is on the MOTE_STATS list.
  static auto* const sites = [] {
    auto* d = new std::deque<mote::site>();
    for (unsigned i = 0; i < 3 * offload_model::kEntries; ++i) d->emplace_back("colliding");
    return d;
  }();
  constexpr int kSites = 3 * offload_model::kEntries;
  auto site_at = [](int i) -> mote::site& { return (*sites)[static_cast<std::size_t>(i)]; };
  std::vector<std::uint64_t> here(kSites, 0), away(kSites, 0), before_off(kSites), before_in(kSites);
  for (int i = 0; i < kSites; ++i) {
    before_off[static_cast<std::size_t>(i)] = site_at(i).offloaded();
    before_in[static_cast<std::size_t>(i)] = site_at(i).inlined();
  }
  {
    offload_model m(small_params());
    m.set_handoff(1000);
    std::mt19937 rng(mote_test::test_seed());
    for (int call = 0; call < 200'000; ++call) {
      const int k = static_cast<int>(rng() % kSites);
      auto& e = m.find(&site_at(k));
      const choice c = m.decide(e);
      const bool in_place = c == choice::here || c == choice::here_timed;
      (in_place ? here : away)[static_cast<std::size_t>(k)]++;
      if (c == choice::here_timed || c == choice::away_timed) m.note_work(e, k % 2 == 0 ? 100 : 5000);
    }
  }  // the destructor flushes the rest
  for (int i = 0; i < kSites; ++i) {
    const auto u = static_cast<std::size_t>(i);
    ASSERT_EQ(site_at(i).offloaded() - before_off[u], away[u]) << "site " << i;
    ASSERT_EQ(site_at(i).inlined() - before_in[u], here[u]) << "site " << i;
  }
}

// ---- The assistant, with a fake cycle counter --------------------------------

// The cycle counter seen by the code under test: it moves by one tick per
// read, by what a task declares as its work, and by `handoff` ticks on the
// first of each pair of reads an assistant thread makes (a probe's start):
// a probe measures a hand-off of about `handoff` ticks.
std::atomic<std::uint64_t> fake_now{1};
std::atomic<std::uint64_t> fake_handoff{0};
thread_local bool fake_pair_open = false;

std::uint64_t fake_clock() noexcept {
  std::uint64_t step = 1;
  if (mote::detail::on_assistant_thread()) {
    fake_pair_open = !fake_pair_open;
    if (fake_pair_open) step = fake_handoff.load(std::memory_order_relaxed);
  }
  return fake_now.fetch_add(step, std::memory_order_relaxed) + step;
}

void fake_work(std::uint64_t ticks) { fake_now.fetch_add(ticks, std::memory_order_relaxed); }

// Installs the fake counter for one test (before the assistant starts).
struct fake_clock_scope {
  explicit fake_clock_scope(std::uint64_t handoff) {
    fake_handoff.store(handoff);
    mote::detail::cycle_clock_override = &fake_clock;
  }
  ~fake_clock_scope() { mote::detail::cycle_clock_override = nullptr; }
};

mote::assistant_options adaptive_on() {
  mote::assistant_options o;
  o.adaptive = true;
  o.idle_park = std::chrono::microseconds(0);  // only after a sleep hint: it stays awake for the probes
  return o;
}

// One task of `work` fake ticks, submitted and waited for; true when it ran
// on the assistant.
template <class Site>
bool one_task(mote::assistant& a, Site& s, std::uint64_t work, long* sum) {
  std::atomic<bool> there{false};
  a.submit(s, [&there, work, sum] {
    there.store(mote::detail::on_assistant_thread(), std::memory_order_relaxed);
    fake_work(work);
    *sum += static_cast<long>(work);
  });
  a.wait();
  return there.load(std::memory_order_relaxed);
}

// A hand-off of 5 us in fake ticks: slow against short tasks, and well under
// the 20 us over which a sample counts as a sleep.
std::uint64_t slow_handoff() { return 5 * mote::detail::ticks_per_us(); }

TEST(AdaptiveAssistant, ShortTasksAgainstASlowHandOffRunOnTheOwner) {
  fake_clock_scope clock(slow_handoff());
  mote::assistant a(adaptive_on());
  static mote::site s{"short tasks"};
  long sum = 0;
  long calls = 0;
  // Until a probe has measured the hand-off (the constructor's, or a later
  // one: a probe counts only when the owner was already waiting for it).
  while (a.handoff_ns() == 0.0) {
    ASSERT_LT(calls, 1'000'000) << "no hand-off measured";
    one_task(a, s, 10, &sum);
    ++calls;
  }
  // The fake hand-off, converted back to nanoseconds (5 us, give or take
  // the few ticks of the counter's own reads).
  EXPECT_NEAR(a.handoff_ns(), 5000.0, 250.0);
  // From now on only the probes go there: a burst of a few per probe
  // interval (at least 64 calls).
  const int n = static_cast<int>(mote_test::scaled(20000));
  int there = 0;
  for (int i = 0; i < n; ++i, ++calls) there += one_task(a, s, 10, &sum);
  EXPECT_EQ(sum, 10L * calls);
  EXPECT_LT(there, n / 8) << "of " << n;
}

TEST(AdaptiveAssistant, LongTasksAgainstAFastHandOffRunOnTheAssistant) {
  fake_clock_scope clock(5);
  mote::assistant a(adaptive_on());
  static mote::site s{"long tasks"};
  long sum = 0;
  const int n = static_cast<int>(mote_test::scaled(4000));
  int there_late = 0;
  const std::uint64_t work = 3 * slow_handoff();
  for (int i = 0; i < n; ++i) {
    const bool t = one_task(a, s, work, &sum);
    if (i >= n / 2) there_late += t;
  }
  EXPECT_EQ(sum, static_cast<long>(work) * n);
  EXPECT_EQ(there_late, n - n / 2);  // each one, once its size is known
}

TEST(AdaptiveAssistant, AChangeOfTheHostIsNoticedByTheProbes) {
  fake_clock_scope clock(slow_handoff());
  mote::assistant a(adaptive_on());
  static mote::site s{"changing host"};
  long sum = 0;
  long calls = 0;
  // Slow hand-offs: the site settles in place.
  int run_here = 0;
  for (int i = 0; i < 2000 || run_here < 200; ++i, ++calls) {
    ASSERT_LT(i, 1'000'000) << "never ran in place";
    run_here = one_task(a, s, 1000, &sum) ? 0 : run_here + 1;
  }
  // The host gets faster: a probe burst measures it and the site offloads.
  fake_handoff.store(5);
  int run_there = 0;
  for (int i = 0; run_there < 200; ++i, ++calls) {
    ASSERT_LT(i, 10'000'000) << "never went back to the assistant";
    run_there = one_task(a, s, 1000, &sum) ? run_there + 1 : 0;
  }
  // And slower again: back in place.
  fake_handoff.store(slow_handoff());
  run_here = 0;
  for (int i = 0; run_here < 200; ++i, ++calls) {
    ASSERT_LT(i, 10'000'000) << "never came back in place";
    run_here = one_task(a, s, 1000, &sum) ? 0 : run_here + 1;
  }
  EXPECT_EQ(sum, 1000L * calls);
}

// Tasks of random sizes, some of them throwing, from several sites: every
// task runs exactly once, and a throwing task's exception reaches wait()
// whether it ran here or there.
TEST(AdaptiveAssistant, RandomTasksRunOnceAndExceptionsReachWait) {
  fake_clock_scope clock(slow_handoff());
  mote::assistant a(adaptive_on());
  static mote::site sites[3] = {mote::site{"r0"}, mote::site{"r1"}, mote::site{"r2"}};
  const std::uint64_t sizes[3] = {10, slow_handoff(), 4 * slow_handoff()};
  std::mt19937 rng(mote_test::test_seed());
  const int rounds = static_cast<int>(mote_test::scaled(2000));
  std::vector<std::atomic<int>> runs(static_cast<std::size_t>(rounds) * 8);
  for (int r = 0; r < rounds; ++r) {
    const int tasks = 1 + static_cast<int>(rng() % 8);
    const int thrower = rng() % 4 == 0 ? static_cast<int>(rng() % static_cast<unsigned>(tasks)) : -1;
    for (int t = 0; t < tasks; ++t) {
      const int k = static_cast<int>(rng() % 3);
      std::atomic<int>* slot = &runs[static_cast<std::size_t>(r * 8 + t)];
      const bool throws = t == thrower;
      const std::uint64_t work = sizes[k];
      a.submit(sites[k], [slot, throws, work] {
        slot->fetch_add(1, std::memory_order_relaxed);
        fake_work(work);
        if (throws) throw std::runtime_error("task failed");
      });
    }
    if (thrower >= 0) {
      EXPECT_THROW(a.wait(), std::runtime_error) << "round " << r;
    } else {
      EXPECT_NO_THROW(a.wait()) << "round " << r;
    }
    for (int t = 0; t < tasks; ++t) {
      ASSERT_EQ(runs[static_cast<std::size_t>(r * 8 + t)].load(), 1) << "round " << r << " task " << t;
    }
  }
}

// Tasks run in place submit more tasks to the same assistant (nested
// submits, which may evict the outer site's table entry), some throw, and
// another thread tries to submit and wait (misuse, reported, nothing lost):
// every task runs once, the right exceptions reach wait().
TEST(AdaptiveAssistant, NestedSubmitsAndMisuseFromOtherThreadsLoseNothing) {
  fake_clock_scope clock(slow_handoff());
  mote::assistant a(adaptive_on());
  // More sites than the table has entries, so nested submits collide.
  static auto* const sites = [] {
    auto* d = new std::deque<mote::site>();
    for (unsigned i = 0; i < 2 * offload_model::kEntries; ++i) d->emplace_back("nested");
    return d;
  }();
  std::mt19937 rng(mote_test::test_seed());
  std::atomic<long> ran{0};
  long submitted = 0;
  std::atomic<int> refused{0};
  const int rounds = static_cast<int>(mote_test::scaled(3000));
  for (int r = 0; r < rounds; ++r) {
    const int tasks = 1 + static_cast<int>(rng() % 6);
    const bool fail = rng() % 5 == 0;
    for (int t = 0; t < tasks; ++t) {
      mote::site& outer = (*sites)[rng() % sites->size()];
      mote::site& inner = (*sites)[rng() % sites->size()];
      const std::uint64_t work = rng() % 2 == 0 ? 10 : 3 * slow_handoff();
      const bool throws = fail && t == 0;
      ++submitted;
      a.submit(outer, [&a, &inner, &ran, &submitted, work, throws] {
        ran.fetch_add(1, std::memory_order_relaxed);
        fake_work(work);
        // Run in place (on the owner): submit more from inside the task.
        if (a.is_owner()) {
          ++submitted;
          a.submit(inner, [&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
        }
        if (throws) throw std::runtime_error("nested round failed");
      });
    }
    if (r % 100 == 0) {
      std::thread([&] {
        try {
          a.submit([] {});
        } catch (const mote::usage_error&) {
          refused.fetch_add(1);
        }
        try {
          a.wait();
        } catch (const mote::usage_error&) {
          refused.fetch_add(1);
        }
      }).join();
    }
    if (fail) {
      EXPECT_THROW(a.wait(), std::runtime_error) << "round " << r;
    } else {
      EXPECT_NO_THROW(a.wait()) << "round " << r;
    }
    ASSERT_EQ(ran.load(), submitted) << "round " << r;
  }
  EXPECT_EQ(refused.load(), 2 * ((rounds + 99) / 100));
}

TEST(AdaptiveAssistant, TheClosureTypeIsTheDefaultSite) {
  fake_clock_scope clock(slow_handoff());
  mote::site& site = mote::detail::type_site<int>;  // a type no test submits
  EXPECT_EQ(&site, &mote::detail::type_site<int>);
  EXPECT_NE(std::string(site.name()).find("int"), std::string::npos) << site.name();
  auto task = [] { fake_work(3); };
  auto& own = mote::detail::type_site<decltype(task)>;
  const std::uint64_t before = own.offloaded() + own.inlined();
  const int n = 500;
  {
    mote::assistant a(adaptive_on());
    for (int i = 0; i < n; ++i) {
      a.submit(task);
      a.wait();
    }
  }  // the destructor flushes the counts
  EXPECT_EQ(own.offloaded() + own.inlined() - before, static_cast<std::uint64_t>(n));
  EXPECT_GT(own.inlined(), 0u);
}

TEST(AdaptiveAssistant, OffRunsEverythingThroughTheRing) {
  fake_clock_scope clock(slow_handoff());
  mote::assistant_options o = adaptive_on();
  o.adaptive = false;
  mote::assistant a(o);
  EXPECT_FALSE(a.adaptive());
  EXPECT_EQ(a.handoff_ns(), 0.0);
  static mote::site s{"off"};
  long sum = 0;
  for (int i = 0; i < 200; ++i) EXPECT_TRUE(one_task(a, s, 1, &sum));
}

TEST(AdaptiveConfig, MoteAdaptiveSetsBothAndABadValueNamesItself) {
  {
    mote_test::scoped_env env("MOTE_ADAPTIVE", "0");
    mote::assistant a;
    EXPECT_FALSE(a.adaptive());
    mote::assistant_options o;
    o.adaptive = true;  // explicit wins
    mote::assistant b(o);
    EXPECT_TRUE(b.adaptive());
  }
  {
    mote::assistant a;
    EXPECT_TRUE(a.adaptive());  // the default
  }
  for (const char* bad : {"2", "yes", "-1"}) {
    mote_test::scoped_env env("MOTE_ADAPTIVE", bad);
    try {
      mote::runtime rt(mote::runtime_options{.num_workers = 1});
      ADD_FAILURE() << "runtime accepted MOTE_ADAPTIVE=" << bad;
    } catch (const mote::config_error& e) {
      EXPECT_NE(std::string(e.what()).find("MOTE_ADAPTIVE"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
    try {
      mote::assistant a;
      ADD_FAILURE() << "assistant accepted MOTE_ADAPTIVE=" << bad;
    } catch (const mote::config_error& e) {
      EXPECT_NE(std::string(e.what()).find("MOTE_ADAPTIVE"), std::string::npos) << e.what();
    }
  }
  const auto topo = mote::topology::system();
  {
    mote_test::scoped_env env("MOTE_ADAPTIVE", "1");
    const auto cfg = mote::detail::resolve_config(mote::runtime_options{}, topo);
    EXPECT_TRUE(cfg.adaptive);
    EXPECT_TRUE(cfg.assistants_adaptive);
    mote::runtime_options off;
    off.adaptive = false;
    const auto cfg2 = mote::detail::resolve_config(off, topo);
    EXPECT_FALSE(cfg2.adaptive);
    EXPECT_FALSE(cfg2.assistants_adaptive);
  }
  const auto plain = mote::detail::resolve_config(mote::runtime_options{}, topo);
  EXPECT_FALSE(plain.adaptive);            // join: off by default
  EXPECT_TRUE(plain.assistants_adaptive);  // the workers' assistants: on
}

// ---- join under runtime_options::adaptive ------------------------------------

long adaptive_fib(int n) {
  if (n < 2) return n;
  auto [a, b] = mote::join([&] { return adaptive_fib(n - 1); }, [&] { return adaptive_fib(n - 2); });
  return a + b;
}

mote::runtime_options adaptive_workers(unsigned n) {
  mote::runtime_options o = mote_test::workers(n);
  o.adaptive = true;
  return o;
}

TEST(AdaptiveJoin, FibMatchesSerialOnAnyNumberOfWorkers) {
  const int n = static_cast<int>(mote_test::scaled(24, 2));
  for (unsigned w : {1u, 2u, 4u}) {
    mote::runtime rt(adaptive_workers(w));
    for (int rep = 0; rep < 3; ++rep) {
      EXPECT_EQ(rt.run([n] { return adaptive_fib(n); }), mote_test::serial_fib(n)) << w << " workers";
    }
  }
}

// Random trees of joins with void and value callables, named sites and
// leaves of random sizes: every leaf runs once, the sums match.
long random_tree(std::uint64_t seed, int depth, std::atomic<long>& leaves) {
  static mote::site named{"tree"};
  std::uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  if (depth == 0 || (x >> 60) == 0) {
    leaves.fetch_add(1, std::memory_order_relaxed);
    std::uint64_t v = 0;
    for (std::uint64_t i = 0; i < (x >> 56) % 64; ++i) v += i ^ seed;
    return static_cast<long>(v & 0xFFFF);
  }
  if ((x >> 40) % 3 == 0) {
    long a = 0, b = 0;
    mote::join([&] { a = random_tree(x + 1, depth - 1, leaves); },
               [&] { b = random_tree(x + 2, depth - 1, leaves); });
    return a + b;
  }
  if ((x >> 40) % 3 == 1) {
    auto [a, b] = mote::join(named, [&] { return random_tree(x + 3, depth - 1, leaves); },
                             [&] { return random_tree(x + 4, depth - 1, leaves); });
    return a + b;
  }
  auto [a, b] = mote::join([&] { return random_tree(x + 5, depth - 1, leaves); },
                           [&] { return random_tree(x + 6, depth - 1, leaves); });
  return a + b;
}

long serial_tree(std::uint64_t seed, int depth, long& leaves) {
  std::uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  if (depth == 0 || (x >> 60) == 0) {
    ++leaves;
    std::uint64_t v = 0;
    for (std::uint64_t i = 0; i < (x >> 56) % 64; ++i) v += i ^ seed;
    return static_cast<long>(v & 0xFFFF);
  }
  const std::uint64_t k = (x >> 40) % 3;
  const std::uint64_t off = k == 0 ? 1 : (k == 1 ? 3 : 5);
  return serial_tree(x + off, depth - 1, leaves) + serial_tree(x + off + 1, depth - 1, leaves);
}

TEST(AdaptiveJoin, RandomTreesMatchSerial) {
  std::mt19937_64 rng(mote_test::test_seed());
  mote::runtime rt(adaptive_workers(2));
  const int trees = static_cast<int>(mote_test::scaled(30, 3));
  for (int t = 0; t < trees; ++t) {
    const std::uint64_t seed = rng();
    long want_leaves = 0;
    const long want = serial_tree(seed, 16, want_leaves);
    std::atomic<long> leaves{0};
    EXPECT_EQ(rt.run([&] { return random_tree(seed, 16, leaves); }), want) << "seed " << seed;
    EXPECT_EQ(leaves.load(), want_leaves) << "seed " << seed;
  }
}

TEST(AdaptiveJoin, ExceptionsReachTheJoinAndGDoesNotRunAfterAFailedF) {
  mote::runtime rt(adaptive_workers(2));
  static mote::site tiny{"tiny failing pair"};
  const int n = static_cast<int>(mote_test::scaled(20000));
  int f_failed = 0, g_failed = 0;
  rt.run([&] {
    for (int i = 0; i < n; ++i) {
      std::atomic<bool> g_ran{false};
      const int mode = i % 3;  // 0: f throws, 1: g throws, 2: neither
      try {
        auto [a, b] = mote::join(
            tiny,
            [&] {
              if (mode == 0) throw std::runtime_error("f");
              return 1;
            },
            [&] {
              g_ran.store(true);
              if (mode == 1) throw std::logic_error("g");
              return 2;
            });
        EXPECT_EQ(mode, 2);
        EXPECT_EQ(a + b, 3);
      } catch (const std::runtime_error&) {
        EXPECT_EQ(mode, 0);
        ++f_failed;
      } catch (const std::logic_error&) {
        EXPECT_EQ(mode, 1);
        EXPECT_TRUE(g_ran.load());
        ++g_failed;
      }
    }
  });
  EXPECT_EQ(f_failed, (n + 2) / 3);
  EXPECT_EQ(g_failed, (n + 1) / 3);
}

TEST(AdaptiveJoin, EveryPairIsCountedAtItsSite) {
  static mote::site pairs{"counted pairs"};
  const std::uint64_t before = pairs.offloaded() + pairs.inlined();
  const int n = static_cast<int>(mote_test::scaled(50000));
  long sum = 0;
  {
    mote::runtime rt(adaptive_workers(2));
    sum = rt.run([&] {
      long s = 0;
      for (int i = 0; i < n; ++i) {
        auto [a, b] = mote::join(pairs, [i] { return i; }, [i] { return 2 * i; });
        s += a + b;
      }
      return s;
    });
  }  // the workers' models flush when the runtime ends
  EXPECT_EQ(sum, 3L * (static_cast<long>(n) * (n - 1) / 2));
  EXPECT_EQ(pairs.offloaded() + pairs.inlined() - before, static_cast<std::uint64_t>(n));
  EXPECT_GT(pairs.inlined(), 0u);  // a new site's first pair runs in place, timed
}

// join offers parallelism and never promises it: a new site's first pair runs
// in place, f then g on the calling worker, however many workers are idle
// (docs/adaptive.md, "A new site's first pair runs in place"). A pair whose f
// waited for g would hang here at once; this holds the rule in place.
TEST(AdaptiveJoin, ANewSitesFirstPairRunsInPlaceFThenG) {
  constexpr int kSites = 8;
  // Sites are static objects (site.hpp): these outlive the runtime, whose
  // workers' models flush their counts into them when it ends.
  static mote::site fresh[kSites] = {mote::site{"first pair 0"}, mote::site{"first pair 1"},
                                     mote::site{"first pair 2"}, mote::site{"first pair 3"},
                                     mote::site{"first pair 4"}, mote::site{"first pair 5"},
                                     mote::site{"first pair 6"}, mote::site{"first pair 7"}};
  std::uint64_t before = 0;
  for (const auto& s : fresh) before += s.inlined() + s.offloaded();
  {
    mote::runtime rt(adaptive_workers(2));
    for (auto& site : fresh) {
      struct seen {
        const void* thread = nullptr;
        bool other_done = false;
      };
      seen f_saw, g_saw;
      std::atomic<bool> f_done{false}, g_done{false};
      rt.run([&] {
        const void* me = mote::detail::thread_token();
        mote::join(
            site,
            [&] {
              f_saw = {mote::detail::thread_token(), g_done.load()};
              f_done.store(true);
            },
            [&] {
              g_saw = {mote::detail::thread_token(), f_done.load()};
              g_done.store(true);
            });
        EXPECT_EQ(f_saw.thread, me);
        EXPECT_EQ(g_saw.thread, me);  // g ran here ...
        EXPECT_FALSE(f_saw.other_done);
        EXPECT_TRUE(g_saw.other_done);  // ... after f returned
      });
    }
  }
  std::uint64_t inlined = 0, total = 0;
  for (const auto& s : fresh) {
    inlined += s.inlined();
    total += s.inlined() + s.offloaded();
  }
  EXPECT_EQ(total - before, static_cast<std::uint64_t>(kSites));
  EXPECT_EQ(inlined, total);  // one pair each, every one in place
}

// Without adaptive mode, too, g may run after f on f's thread: on one worker
// nobody else can take it.
TEST(AdaptiveJoin, PlainJoinOnOneWorkerRunsFThenGInPlace) {
  mote::runtime rt(mote_test::workers(1));
  std::atomic<bool> f_done{false};
  bool g_saw_f_done = false;
  rt.run([&] {
    mote::join([&] { f_done.store(true); }, [&] { g_saw_f_done = f_done.load(); });
  });
  EXPECT_TRUE(g_saw_f_done);
}

TEST(AdaptiveJoin, OffTakesThePlainPath) {
  static mote::site off_site{"off pairs"};
  mote::runtime_options o = mote_test::workers(2);
  o.adaptive = false;
  mote::runtime rt(o);
  const long r = rt.run([] {
    long s = 0;
    for (int i = 0; i < 1000; ++i) {
      auto [a, b] = mote::join(off_site, [] { return 1; }, [] { return 2; });
      s += a + b;
    }
    return s;
  });
  EXPECT_EQ(r, 3000);
  EXPECT_EQ(off_site.offloaded() + off_site.inlined(), 0u);  // no model, no counts
}

}  // namespace
