// mote::parallel_pipeline and mote::stream_graph: every stage kind, on tasks
// and on dedicated threads, checked against a serial run; back-pressure, the
// end of the stream, exceptions and what becomes of each item when a stage
// throws, nesting, move-only values.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "mote/loops.hpp"
#include "mote/pipeline.hpp"
#include "mote/runtime.hpp"
#include "mote/task_group.hpp"
#include "test_util.hpp"

namespace {

using mote::stage_mode;
using mote_test::scaled;

struct counted {
  static inline std::atomic<long> live{0};
  long v;
  explicit counted(long x) : v(x) { live.fetch_add(1); }
  counted(counted&& o) noexcept : v(o.v) { live.fetch_add(1); }
  counted(const counted&) = delete;
  ~counted() { live.fetch_sub(1); }
};

long work(long x) { return (x * 2654435761L) % 1000003L; }

struct config {
  stage_mode middle;
  stage_mode last;
  bool threads;
  std::size_t max_in_flight;
};

std::string name_of(const config& c) {
  auto m = [](stage_mode s) {
    switch (s) {
      case stage_mode::serial_in_order: return std::string("InOrder");
      case stage_mode::serial_out_of_order: return std::string("OutOfOrder");
      default: return std::string("Parallel");
    }
  };
  return m(c.middle) + "Then" + m(c.last) + (c.threads ? "OnThreads" : "OnTasks") + "Max" +
         std::to_string(c.max_in_flight);
}

class Pipeline : public ::testing::TestWithParam<config> {};

std::vector<config> configs() {
  std::vector<config> out;
  for (bool threads : {false, true}) {
    for (stage_mode m : {stage_mode::serial_in_order, stage_mode::serial_out_of_order, stage_mode::parallel}) {
      for (stage_mode l : {stage_mode::serial_in_order, stage_mode::serial_out_of_order, stage_mode::parallel}) {
        out.push_back({m, l, threads, 4});
      }
    }
    out.push_back({stage_mode::parallel, stage_mode::serial_in_order, threads, 1});
    out.push_back({stage_mode::serial_in_order, stage_mode::serial_in_order, threads, 64});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Stages, Pipeline, ::testing::ValuesIn(configs()),
                         [](const auto& info) { return name_of(info.param); });

// Source -> f -> g -> sink, with move-only values that count themselves:
// the results match a serial run, in order when the last stage is
// serial_in_order, and at most max_in_flight items are ever in the pipeline.
TEST_P(Pipeline, MatchesSerialAndRespectsTheBound) {
  const config c = GetParam();
  const long n = scaled(20000, 8);
  mote::runtime rt(mote_test::workers(2));
  const long live_before = counted::live.load();
  std::atomic<long> in_flight{0}, most{0};
  std::vector<long> out;
  std::mutex out_lock;
  long next = 0;
  std::atomic<int> in_last{0}, overlap{0};
  auto chain =
      mote::make_stage<void, std::unique_ptr<counted>>(stage_mode::serial_in_order,
                                                       [&](mote::flow_control& fc) -> std::unique_ptr<counted> {
                                                         if (next == n) {
                                                           fc.stop();
                                                           return nullptr;
                                                         }
                                                         const long now = in_flight.fetch_add(1) + 1;
                                                         long m = most.load();
                                                         while (now > m && !most.compare_exchange_weak(m, now)) {
                                                         }
                                                         return std::make_unique<counted>(next++);
                                                       }) &
      mote::make_stage<std::unique_ptr<counted>, counted>(
          c.middle, [](std::unique_ptr<counted> p) { return counted(work(p->v) * 1000003L + p->v); }) &
      mote::make_stage<counted, void>(c.last, [&](counted x) {
        if (c.last != stage_mode::parallel && in_last.fetch_add(1) != 0) overlap.fetch_add(1);
        {
          std::lock_guard<std::mutex> g(out_lock);
          out.push_back(x.v);
        }
        if (c.last != stage_mode::parallel) in_last.fetch_sub(1);
        in_flight.fetch_sub(1);
      });
  mote::parallel_pipeline(
      mote::pipeline_options{.max_in_flight = c.max_in_flight, .dedicated_threads = c.threads, .rt = &rt},
      std::move(chain));
  ASSERT_EQ(static_cast<long>(out.size()), n);
  EXPECT_EQ(overlap.load(), 0) << "a serial stage ran two items at once";
  EXPECT_LE(most.load(), static_cast<long>(c.max_in_flight));
  std::vector<long> expect(n);
  for (long i = 0; i < n; ++i) expect[i] = work(i) * 1000003L + i;
  if (c.last == stage_mode::serial_in_order) {
    EXPECT_EQ(out, expect);
  } else {
    std::sort(out.begin(), out.end(), [](long a, long b) { return a % 1000003L < b % 1000003L; });
    EXPECT_EQ(out, expect);
  }
  EXPECT_EQ(counted::live.load(), live_before);
}

// An exception in any stage reaches the caller; nothing leaks; the first
// stage stops (it does not run through the whole stream).
TEST_P(Pipeline, AnExceptionStopsEverythingAndReachesTheCaller) {
  const config c = GetParam();
  mote::runtime rt(mote_test::workers(2));
  const long live_before = counted::live.load();
  for (int where : {0, 1, 2}) {
    const long n = 1'000'000;
    const long bad = 500;
    long next = 0;
    auto chain = mote::make_stage<void, counted>(stage_mode::serial_in_order,
                                                 [&](mote::flow_control& fc) {
                                                   if (next == n) fc.stop();
                                                   if (where == 0 && next == bad) throw std::runtime_error("source");
                                                   return counted(next++);
                                                 }) &
                 mote::make_stage<counted, counted>(c.middle,
                                                    [&](counted x) {
                                                      if (where == 1 && x.v == bad) throw std::runtime_error("middle");
                                                      return counted(x.v + 1);
                                                    }) &
                 mote::make_stage<counted, void>(c.last, [&](counted x) {
                   if (where == 2 && x.v == bad + 1) throw std::runtime_error("last");
                 });
    try {
      mote::parallel_pipeline(
          mote::pipeline_options{.max_in_flight = c.max_in_flight, .dedicated_threads = c.threads, .rt = &rt},
          std::move(chain));
      ADD_FAILURE() << "no exception, stage " << where;
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), where == 0 ? "source" : where == 1 ? "middle" : "last");
    }
    EXPECT_LT(next, n) << "the source ran to the end after a failure";
    EXPECT_EQ(counted::live.load(), live_before);
  }
  // The runtime is fine afterwards.
  long sum = 0, next = 0;
  mote::parallel_pipeline(mote::pipeline_options{.max_in_flight = 4, .dedicated_threads = c.threads, .rt = &rt},
                          mote::make_stage<void, long>(stage_mode::serial_in_order,
                                                       [&](mote::flow_control& fc) {
                                                         if (next == 100) fc.stop();
                                                         return next++;
                                                       }) &
                              mote::make_stage<long, void>(stage_mode::serial_in_order, [&](long x) { sum += x; }));
  EXPECT_EQ(sum, 4950);
}

// ---- What becomes of each item when stages fail ----------------------------------

// An item's value that records its own lifetime: a payload on the heap (ASan
// sees a use after the pipeline destroyed it) and a magic word that a use
// after destruction, or a second destruction, finds broken.
struct tracked {
  static constexpr std::uint64_t kAlive = 0x7a11'ed00'a11e'0001;
  static constexpr std::uint64_t kDestroyed = 0xdead'0000'dead'0002;
  // Relaxed: read once the pipeline has returned, which orders every update
  // before (its threads are joined, its tasks waited for).
  static inline std::atomic<long> live{0};
  static inline std::atomic<long> misused{0};  // moved from or destroyed after its destruction

  static std::string payload_of(long item, int stage) {
    return "item " + std::to_string(item) + " out of stage " + std::to_string(stage) +
           ", kept on the heap";
  }

  tracked(long k, int stage) : item(k), payload(payload_of(k, stage)) {
    live.fetch_add(1, std::memory_order_relaxed);
  }
  tracked(tracked&& o) noexcept : item(o.item), payload(std::move(o.payload)) {
    if (o.magic != kAlive) misused.fetch_add(1, std::memory_order_relaxed);
    live.fetch_add(1, std::memory_order_relaxed);
  }
  tracked(const tracked&) = delete;
  tracked& operator=(const tracked&) = delete;
  tracked& operator=(tracked&&) = delete;
  ~tracked() {
    if (magic != kAlive) misused.fetch_add(1, std::memory_order_relaxed);
    // Volatile: a store to an object whose life ends here is otherwise dropped.
    static_cast<volatile std::uint64_t&>(magic) = kDestroyed;
    live.fetch_sub(1, std::memory_order_relaxed);
  }

  // Alive, and what stage `stage` made of its item.
  bool is_output_of(int stage) const {
    return magic == kAlive && payload == payload_of(item, stage);
  }

  std::uint64_t magic = kAlive;
  long item;
  std::string payload;
};

// One run of a pipeline of `stages` stages over n items: what each stage does
// to each item, decided up front from the seed (whether it throws, how long it
// takes, so that items overtake each other), and what each stage saw.
class fate_run {
 public:
  // From item fail_from on, one item in fail_one_in (0: none) throws in
  // stage fail_stage. Often the item before it is slow in a stage before
  // that one (the failing item overtakes it and waits for it there, if the
  // stage is serial) and in a stage after it (it is still in use there when
  // the failure comes, which comes late in its stage).
  fate_run(std::uint64_t seed, long n, int stages, int fail_stage, long fail_from,
           unsigned fail_one_in)
      : n_(n), stages_(stages), plan_(n * stages), runs_(n * stages), failed_in_(n) {
    std::mt19937_64 rng(seed);
    for (step& p : plan_) {
      const std::uint64_t r = rng() % 16;
      p.spins = r < 4 ? static_cast<unsigned>(rng() % 4096) : 0;
      p.yields = r == 4;
      p.sleeps_us = r == 5 ? static_cast<unsigned>(20 + rng() % 100) : 0;
    }
    for (long k = fail_from; fail_one_in != 0 && k < n; ++k) {
      if (rng() % fail_one_in != 0) continue;
      plan_[k * stages + fail_stage].fails = true;
      if (k == 0 || fail_stage < 2 || rng() % 4 == 0) continue;
      step* before = &plan_[(k - 1) * stages];
      before[1 + rng() % (fail_stage - 1)].sleeps_us = 300;
      if (fail_stage + 1 < stages) {
        before[fail_stage + 1 + rng() % (stages - fail_stage - 1)].sleeps_us = 300;
      }
      plan_[k * stages + fail_stage].sleeps_us = 200;
    }
    for (std::atomic<int>& f : failed_in_) f.store(-1, std::memory_order_relaxed);
  }

  // The first stage (called serially).
  tracked source(mote::flow_control& fc) {
    const long k = made_;
    if (k == n_) {
      fc.stop();
      return tracked(k, 0);
    }
    const step& p = plan_[k * stages_];
    take_time(p, nullptr, 0);
    if (p.fails) fail(k, 0);
    ++made_;
    return tracked(k, 0);
  }

  // Stage s >= 1 is given x: checks it, counts the visit, takes its time
  // (checking that x stays intact, the stage's own while it runs), and
  // throws if the plan says so.
  void visit(const tracked& x, int s) {
    check_input(x, s);
    runs_[x.item * stages_ + s].fetch_add(1, std::memory_order_relaxed);
    const step& p = plan_[x.item * stages_ + s];
    take_time(p, &x, s);
    if (p.fails) fail(x.item, s);
  }

  // After the run, with the stages' modes and the message of the exception
  // the run delivered (empty: none): the first thing wrong, or an empty
  // string. Each item the first stage made either ran once through every
  // later stage, or ran once through the stages up to one (the one that
  // threw on it, if one did) and was never seen again. A serial stage runs
  // nothing after it throws. The exception delivered is one a stage threw:
  // when a serial stage fails, the one and only.
  std::string check(const std::array<stage_mode, 4>& modes, const std::string& delivered) const {
    if (bad_inputs_.load(std::memory_order_relaxed) != 0) {
      return "a stage was given a dropped item, or another stage's";
    }
    long failures = 0;
    std::array<long, 4> failures_in{};
    for (const std::atomic<int>& f : failed_in_) {
      const int s = f.load(std::memory_order_relaxed);
      if (s >= 0) {
        ++failures;
        ++failures_in[s];
      }
    }
    for (int s = 0; s < stages_; ++s) {
      if (failures_in[s] > 1 && (s == 0 || modes[s] != stage_mode::parallel)) {
        return "serial stage " + std::to_string(s) + " threw " + std::to_string(failures_in[s]) +
               " times: it ran on after it failed";
      }
    }
    for (long k = 0; k < n_; ++k) {
      const int f = failed_in_[k].load(std::memory_order_relaxed);
      const std::string item = "item " + std::to_string(k) + ": ";
      int reached = 0;  // the stages after the first it ran through, in a row
      for (int s = 1; s < stages_; ++s) {
        const int r = runs_[k * stages_ + s].load(std::memory_order_relaxed);
        if (r > 1) {
          return item + "ran " + std::to_string(r) + " times in stage " + std::to_string(s);
        }
        if (r == 1 && reached != s - 1) {
          return item + "skipped a stage before stage " + std::to_string(s);
        }
        if (r == 1) reached = s;
      }
      if (k >= made_) {
        if (reached != 0) return item + "was never made, yet a stage ran it";
        if (f >= 0 && !(f == 0 && k == made_)) return item + "threw in a stage it never reached";
        continue;
      }
      if (f == 0) return item + "was made, yet the first stage threw on it";
      if (f > 0 && reached != f) {
        return item + "failed in stage " + std::to_string(f) + " but ran through stage " +
               std::to_string(reached);
      }
      if (f < 0 && reached != stages_ - 1 && failures == 0) {
        return item + "was dropped after stage " + std::to_string(reached) + ", yet nothing failed";
      }
    }
    if (failures == 0) {
      if (!delivered.empty()) return "nothing failed, yet the pipeline threw: " + delivered;
      if (made_ != n_) return "nothing failed, yet the first stage stopped early";
      return "";
    }
    int s = -1;
    long k = -1;
    if (std::sscanf(delivered.c_str(), "stage %d item %ld", &s, &k) != 2 || k < 0 || k >= n_ ||
        failed_in_[k].load(std::memory_order_relaxed) != s) {
      return "the exception delivered is not one a stage threw: '" + delivered + "'";
    }
    return "";
  }

 private:
  struct step {
    bool fails = false;
    bool yields = false;
    unsigned spins = 0;
    unsigned sleeps_us = 0;  // long enough for items to overtake
  };

  void check_input(const tracked& x, int s) {
    if (!x.is_output_of(s - 1) || x.item < 0 || x.item >= n_) {
      bad_inputs_.fetch_add(1, std::memory_order_relaxed);
      throw std::logic_error("a stage was given what the stage before did not make");
    }
  }

  // Takes the time the plan says, looking at x (unless null) every 50 us.
  void take_time(const step& p, const tracked* x, int s) {
    for (unsigned i = 0; i < p.spins; ++i) {
      // Seq_cst signal fence: a compiler barrier only, so that the spin stays.
      std::atomic_signal_fence(std::memory_order_seq_cst);
    }
    if (p.yields) std::this_thread::yield();
    for (unsigned us = 0; us < p.sleeps_us; us += 50) {
      std::this_thread::sleep_for(std::chrono::microseconds(std::min(50U, p.sleeps_us - us)));
      if (x != nullptr) check_input(*x, s);
    }
    if (x != nullptr) check_input(*x, s);
  }

  [[noreturn]] void fail(long k, int s) {
    failed_in_[k].store(s, std::memory_order_relaxed);
    throw std::runtime_error("stage " + std::to_string(s) + " item " + std::to_string(k));
  }

  long n_;
  int stages_;
  std::vector<step> plan_;  // [item * stages + stage]
  long made_ = 0;           // the first stage's own
  // Relaxed: read by check() after the run, which orders every update before.
  std::vector<std::atomic<int>> runs_;       // [item * stages + stage]: calls that got the item
  std::vector<std::atomic<int>> failed_in_;  // the stage that threw on the item, or -1
  std::atomic<long> bad_inputs_{0};
};

// Runs a pipeline of S stages with the given modes over the run's items; the
// message of the exception it delivered, or an empty string.
template <int S>
std::string run_fates(mote::runtime& rt, bool threads, const std::array<stage_mode, 4>& modes,
                      std::size_t max_in_flight, fate_run& run) {
  auto first = mote::make_stage<void, tracked>(
      modes[0], [&run](mote::flow_control& fc) { return run.source(fc); });
  auto middle = [&](int s) {
    return mote::make_stage<tracked, tracked>(modes[s], [&run, s](tracked&& x) {
      run.visit(x, s);
      return tracked(x.item, s);
    });
  };
  auto last =
      mote::make_stage<tracked, void>(modes[S - 1], [&run](tracked&& x) { run.visit(x, S - 1); });
  const mote::pipeline_options o{
      .max_in_flight = max_in_flight, .dedicated_threads = threads, .rt = &rt};
  try {
    if constexpr (S == 2) {
      mote::parallel_pipeline(o, first & last);
    } else if constexpr (S == 3) {
      mote::parallel_pipeline(o, first & middle(1) & last);
    } else {
      mote::parallel_pipeline(o, first & middle(1) & middle(2) & last);
    }
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

struct fate_case {
  bool threads;
  int stages;
};

void PrintTo(const fate_case& c, std::ostream* os) {
  *os << (c.threads ? "on dedicated threads, " : "as tasks, ") << c.stages << " stages";
}

class PipelineFates : public ::testing::TestWithParam<fate_case> {};

INSTANTIATE_TEST_SUITE_P(Stages, PipelineFates,
                         ::testing::Values(fate_case{false, 2}, fate_case{false, 3},
                                           fate_case{false, 4}, fate_case{true, 2},
                                           fate_case{true, 3}, fate_case{true, 4}),
                         [](const auto& info) {
                           return std::string(info.param.threads ? "OnThreads" : "OnTasks") +
                                  std::to_string(info.param.stages) + "Stages";
                         });

// Every combination of modes after the first stage (whose own mode is drawn:
// it is called serially whatever it says), each with no failures, then with
// failures in each stage in turn, the first included (every item from one
// on, one in four, or rare ones); random delays make items overtake each
// other. Each item's fate is checked (fate_run::check), nothing leaks, and
// nothing is used or destroyed after its destruction. A failing run prints
// its seed; MOTE_TEST_SEED replays the sequence.
TEST_P(PipelineFates, EachItemRunsThroughOrIsDroppedOnceAfterItsLastStage) {
  const fate_case c = GetParam();
  mote::runtime rt(mote_test::workers(2));
  const long n = scaled(100, 2);
  const std::uint64_t base = mote_test::test_seed();
  constexpr stage_mode kModes[] = {stage_mode::serial_in_order, stage_mode::serial_out_of_order,
                                   stage_mode::parallel};
  constexpr std::size_t kMaxInFlight[] = {1, 2, 3, 4, 6, 8, 16};
  int combos = 1;
  for (int s = 1; s < c.stages; ++s) combos *= 3;
  for (int combo = 0; combo < combos; ++combo) {
    for (int round = 0; round <= 3 * c.stages; ++round) {
      const std::uint64_t seed = base + 64 * static_cast<std::uint64_t>(combo) + round;
      std::mt19937_64 rng(seed);
      std::array<stage_mode, 4> modes{};
      modes[0] = kModes[rng() % 3];
      for (int s = 1, rest = combo; s < c.stages; ++s, rest /= 3) modes[s] = kModes[rest % 3];
      const std::size_t max_in_flight = kMaxInFlight[rng() % std::size(kMaxInFlight)];
      // No failures, then in each stage in turn: every item, some, and rare
      // ones (often none), from an item on: the items before it fill the
      // pipeline and overtake each other.
      const int fail_stage = (round + c.stages - 1) % c.stages;
      const unsigned fail_one_in = round == 0              ? 0u
                                   : round <= c.stages     ? 1u
                                   : round <= 2 * c.stages ? 4u
                                                           : static_cast<unsigned>(n);
      const long fail_from = static_cast<long>(rng() % n);
      std::string modes_text;
      for (int s = 0; s < c.stages; ++s) {
        modes_text += s == 0 ? "" : " ";
        modes_text += modes[s] == stage_mode::serial_in_order       ? "in_order"
                      : modes[s] == stage_mode::serial_out_of_order ? "out_of_order"
                                                                    : "parallel";
      }
      SCOPED_TRACE("seed " + std::to_string(seed) + " (MOTE_TEST_SEED=" + std::to_string(base) +
                   "), stages " + modes_text + ", max_in_flight " + std::to_string(max_in_flight) +
                   ", in stage " + std::to_string(fail_stage) + " from item " +
                   std::to_string(fail_from) + " one failure in " + std::to_string(fail_one_in));
      const long live_before = tracked::live.load(std::memory_order_relaxed);
      const long misused_before = tracked::misused.load(std::memory_order_relaxed);
      fate_run run(rng(), n, c.stages, fail_stage, fail_from, fail_one_in);
      std::string delivered;
      switch (c.stages) {
        case 2: delivered = run_fates<2>(rt, c.threads, modes, max_in_flight, run); break;
        case 3: delivered = run_fates<3>(rt, c.threads, modes, max_in_flight, run); break;
        default: delivered = run_fates<4>(rt, c.threads, modes, max_in_flight, run); break;
      }
      ASSERT_EQ(run.check(modes, delivered), "");
      ASSERT_EQ(tracked::live.load(std::memory_order_relaxed), live_before) << "items leaked";
      ASSERT_EQ(tracked::misused.load(std::memory_order_relaxed), misused_before)
          << "an item was used or destroyed after its destruction";
    }
  }
}

// Waits until flag is set, or for 5 seconds: when the timing does not bring
// about the scenario a test sets up, the test is weaker, never stuck.
void wait_until(const std::atomic<bool>& flag) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  // Acquire: pairs with the release store that sets the flag.
  while (!flag.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
}

// A serial_in_order stage that runs an item it held back right after the one
// that came in its turn: item 0 comes late to it, so item 1 waits there; item
// 0 runs and goes on to the last stage, then item 1 runs and throws. Item 1 is
// the one dropped: item 0, which the last stage is reading, is left alone.
TEST(PipelineFailures, AHeldBackItemThatThrowsIsTheOneDropped) {
  mote::runtime rt(mote_test::workers(2));
  for (bool threads : {true, false}) {
    SCOPED_TRACE(threads ? "on dedicated threads" : "as tasks");
    auto text = [](long k) { return "item " + std::to_string(k) + ", a payload kept on the heap"; };
    const long n = 4;
    long next = 0;
    // Release stores, acquire loads (wait_until): the waits only order the stages.
    std::atomic<bool> one_passed{false}, zero_in_last{false}, one_threw{false};
    // Relaxed: read after the pipeline has returned.
    std::atomic<int> last_runs[n] = {};
    std::atomic<bool> zero_intact{false};
    try {
      mote::parallel_pipeline(
          mote::pipeline_options{.max_in_flight = n, .dedicated_threads = threads, .rt = &rt},
          mote::make_stage<void, std::string>(stage_mode::serial_in_order,
                                              [&](mote::flow_control& fc) {
                                                if (next == n) fc.stop();
                                                return text(next++);
                                              }) &
              mote::make_stage<std::string, std::string>(
                  stage_mode::parallel,
                  [&](std::string s) {
                    if (s == text(0)) {
                      wait_until(one_passed);
                      std::this_thread::sleep_for(std::chrono::milliseconds(20));
                    }
                    if (s == text(1)) one_passed.store(true, std::memory_order_release);
                    return s;
                  }) &
              mote::make_stage<std::string, std::string>(
                  stage_mode::serial_in_order,
                  [&](std::string s) {
                    if (s == text(1)) {
                      wait_until(zero_in_last);
                      one_threw.store(true, std::memory_order_release);
                      throw std::runtime_error("item 1");
                    }
                    return s;
                  }) &
              mote::make_stage<std::string, void>(stage_mode::parallel, [&](std::string&& s) {
                const long k = s[5] - '0';
                last_runs[k].fetch_add(1, std::memory_order_relaxed);
                if (k != 0) return;
                zero_in_last.store(true, std::memory_order_release);
                wait_until(one_threw);
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                zero_intact.store(s == text(0), std::memory_order_relaxed);
              }));
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "item 1");
    }
    EXPECT_EQ(last_runs[1].load(std::memory_order_relaxed), 0) << "the item that threw went on";
    for (long k = 0; k < n; ++k) EXPECT_LE(last_runs[k].load(std::memory_order_relaxed), 1) << k;
    if (last_runs[0].load(std::memory_order_relaxed) == 1) {
      EXPECT_TRUE(zero_intact.load(std::memory_order_relaxed))
          << "item 0 changed under the last stage";
    }
  }
}

TEST(PipelineEdges, EmptyStreamAndSingleItem) {
  mote::runtime rt(mote_test::workers(2));
  for (bool threads : {false, true}) {
    for (long n : {0L, 1L}) {
      long next = 0, got = 0;
      mote::parallel_pipeline(mote::pipeline_options{.max_in_flight = 3, .dedicated_threads = threads, .rt = &rt},
                              mote::make_stage<void, long>(stage_mode::serial_in_order,
                                                           [&](mote::flow_control& fc) {
                                                             if (next == n) fc.stop();
                                                             return next++;
                                                           }) &
                                  mote::make_stage<long, void>(stage_mode::parallel, [&](long) { ++got; }));
      EXPECT_EQ(got, n);
    }
  }
  EXPECT_THROW(mote::parallel_pipeline(0, mote::make_stage<void, void>(stage_mode::serial_in_order,
                                                                       [](mote::flow_control& fc) { fc.stop(); })),
               std::invalid_argument);
}

// A two-stage pipeline with no values (the first stage only counts), and a
// long chain of serial stages (one-to-one streams on BatchQueue).
TEST(PipelineEdges, VoidValuesAndLongSerialChains) {
  mote::runtime rt(mote_test::workers(2));
  int calls = 0;
  mote::parallel_pipeline(mote::pipeline_options{.max_in_flight = 2, .rt = &rt},
                          mote::make_stage<void, void>(stage_mode::serial_in_order, [&](mote::flow_control& fc) {
                            if (++calls == 10) fc.stop();
                          }));
  EXPECT_EQ(calls, 10);
  for (bool threads : {false, true}) {
    const long n = scaled(5000, 4);
    long next = 0;
    std::vector<long> out;
    auto inc = [](long x) { return x + 1; };
    mote::parallel_pipeline(
        mote::pipeline_options{.max_in_flight = 8, .dedicated_threads = threads, .rt = &rt},
        mote::make_stage<void, long>(stage_mode::serial_in_order,
                                     [&](mote::flow_control& fc) {
                                       if (next == n) fc.stop();
                                       return next++;
                                     }) &
            mote::make_stage<long, long>(stage_mode::serial_in_order, inc) &
            mote::make_stage<long, long>(stage_mode::serial_in_order, inc) &
            mote::make_stage<long, long>(stage_mode::serial_out_of_order, inc) &
            mote::make_stage<long, long>(stage_mode::serial_in_order, inc) &
            mote::make_stage<long, void>(stage_mode::serial_in_order, [&](long x) { out.push_back(x); }));
    ASSERT_EQ(static_cast<long>(out.size()), n);
    for (long i = 0; i < n; ++i) ASSERT_EQ(out[i], i + 4);
  }
}

// Pipelines inside tasks, loops inside stages, two pipelines at once.
TEST(PipelineEdges, NestsWithTasksAndLoops) {
  mote::runtime rt(mote_test::workers(2));
  const long n = scaled(2000, 4);
  auto one = [&](long salt) {
    long next = 0, sum = 0;
    mote::parallel_pipeline(mote::pipeline_options{.max_in_flight = 6, .rt = &rt},
                            mote::make_stage<void, long>(stage_mode::serial_in_order,
                                                         [&](mote::flow_control& fc) {
                                                           if (next == n) fc.stop();
                                                           return next++;
                                                         }) &
                                mote::make_stage<long, long>(stage_mode::parallel,
                                                             [&](long x) {
                                                               std::atomic<long> s{0};
                                                               mote::parallel_for(0L, 16L, [&](long i) {
                                                                 s.fetch_add(i + x + salt);
                                                               });
                                                               return s.load();
                                                             }) &
                                mote::make_stage<long, void>(stage_mode::serial_out_of_order, [&](long v) { sum += v; }));
    return sum;
  };
  auto expect = [&](long salt) {
    long s = 0;
    for (long x = 0; x < n; ++x) s += 120 + 16 * (x + salt);
    return s;
  };
  long a = 0, b = 0;
  rt.run([&] {
    mote::task_group g;
    g.spawn([&] { a = one(1); });
    g.spawn([&] { b = one(2); });
    g.wait();
  });
  EXPECT_EQ(a, expect(1));
  EXPECT_EQ(b, expect(2));
}

// ---- Streaming tasks -------------------------------------------------------

TEST(StreamGraph, ChainSumsLikeSerial) {
  mote::channel<long> xs(64), ys(64);
  mote::stream_graph g;
  const long n = scaled(20000, 4);
  long next = 0, sum = 0;
  g.task(mote::inputs(), mote::outputs(xs), [&](mote::flow_control& fc) {
    if (next == n) fc.stop();
    return next++;
  });
  g.task(mote::inputs(xs), mote::outputs(ys), [](long x) { return 3 * x; });
  g.task(mote::inputs(ys), mote::outputs(), [&](long y) { sum += y; });
  g.wait();
  EXPECT_EQ(sum, 3 * n * (n - 1) / 2);
}

// Fan-out and fan-in with tuples, and state carried in a channel that a task
// both reads and writes (primed with the first value): a running sum.
TEST(StreamGraph, TuplesAndCarriedState) {
  mote::channel<long> src(16), a(16), b(16), state(4, mote::channel_kind::spsc), out(16);
  const long n = scaled(5000, 4);
  long next = 0;
  std::vector<long> got;
  mote::stream_graph g;
  g.task(mote::inputs(), mote::outputs(src), [&](mote::flow_control& fc) {
    if (next == n) fc.stop();
    return next++;
  });
  g.task(mote::inputs(src), mote::outputs(a, b), [](long x) { return std::tuple<long, long>(x, 2 * x); });
  state.push(0);
  state.flush();
  g.task(mote::inputs(a, b, state), mote::outputs(out, state), [](long x, long y, long acc) {
    const long s = acc + x + y;
    return std::tuple<long, long>(s, s);
  });
  g.task(mote::inputs(out), mote::outputs(), [&](long v) { got.push_back(v); });
  g.wait();
  ASSERT_EQ(static_cast<long>(got.size()), n);
  long acc = 0;
  for (long i = 0; i < n; ++i) {
    acc += 3 * i;
    ASSERT_EQ(got[i], acc);
  }
}

TEST(StreamGraph, AnExceptionStopsEveryTaskAndReachesWait) {
  for (mote::channel_kind kind : {mote::channel_kind::automatic, mote::channel_kind::spsc}) {
    mote::channel<long> xs(8, kind), ys(8, kind);
    std::atomic<long> next{0};
    mote::stream_graph g;
    g.task(mote::inputs(), mote::outputs(xs), [&](mote::flow_control&) { return next.fetch_add(1); });  // endless
    g.task(mote::inputs(xs), mote::outputs(ys), [](long x) {
      if (x == 1000) throw std::runtime_error("bad item");
      return x;
    });
    g.task(mote::inputs(ys), mote::outputs(), [](long) {});
    EXPECT_THROW(g.wait(), std::runtime_error);
  }
}

}  // namespace
