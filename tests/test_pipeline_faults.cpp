// The pipeline engines when they fail themselves, not a stage: a stage thread
// of the thread engine that cannot start (at each stage, with and without a
// stage that failed before), and memory that runs out inside the task engine.
// The faults come through the engines' test seams (src/pipeline/engine.hpp),
// hence the internal build of the sources. Each run must end (no hang, no
// std::terminate from a thread), rethrow the first failure, stop the first
// stage, and destroy every value it made.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include "mote/pipeline.hpp"
#include "mote/runtime.hpp"
#include "pipeline/engine.hpp"
#include "test_util.hpp"

namespace {

namespace pl = mote::detail::pipeline;
using mote::stage_mode;
using mote_test::scaled;
using mote_test::workers;

struct counted {
  static inline std::atomic<long> live{0};
  long v;
  explicit counted(long x) : v(x) { live.fetch_add(1); }
  counted(counted&& o) noexcept : v(o.v) { live.fetch_add(1); }
  counted(const counted&) = delete;
  ~counted() { live.fetch_sub(1); }
};

struct stage_failure : std::runtime_error {
  std::uint32_t stage;
  explicit stage_failure(std::uint32_t s)
      : std::runtime_error("stage " + std::to_string(s) + " failed"), stage(s) {}
};

// Spins (yielding) until pred() holds, for a minute at most: only turns a
// hang into a failure.
template <class Pred>
bool eventually(Pred pred) {
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > limit) return false;
    std::this_thread::yield();
  }
  return true;
}

// ---- A stage thread that cannot start ------------------------------------------------

// Four stages on a runtime of two workers: the source (serial), a parallel
// stage (two threads), an in-order stage and an out-of-order sink (one
// thread each; the channel between them is an SPSC one).
constexpr std::uint32_t kStages = 4;
constexpr unsigned kWorkers = 2;
std::size_t copies_of(std::uint32_t stage) { return stage == 1 ? kWorkers : 1; }

// What the seam does in one run: which start fails, and what it waits for first.
struct start_plan {
  std::uint32_t fail_stage = 0;
  std::size_t fail_copy = 0;
  // < kStages: this stage throws at its first item, and the failing start
  // waits until its threads have all ended (their failure is recorded).
  // Otherwise the failing start waits for items in flight (when the source
  // has a thread).
  std::uint32_t earlier = kStages;
  std::atomic<std::size_t> started[kStages] = {};
  std::atomic<std::size_t> ended[kStages] = {};
  std::atomic<long> made{0};
  std::atomic<bool> waited_in_vain{false};
};
start_plan* plan = nullptr;

std::thread start_or_fail(std::uint32_t stage, std::function<void()> body) {
  start_plan& p = *plan;
  const std::size_t copy = p.started[stage].load();
  if (stage == p.fail_stage && copy == p.fail_copy) {
    bool ok = true;
    if (p.earlier < kStages) {
      ok = eventually([&] { return p.ended[p.earlier].load() == copies_of(p.earlier); });
    } else if (stage > 0) {
      ok = eventually([&] { return p.made.load() >= 4; });
    }
    if (!ok) p.waited_in_vain.store(true);
    throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                            "injected: stage thread start");
  }
  p.started[stage].fetch_add(1);
  return std::thread([&p, stage, body = std::move(body)] {
    body();
    p.ended[stage].fetch_add(1);
  });
}

struct seam_guard {
  explicit seam_guard(start_plan& p) {
    plan = &p;
    pl::start_stage_thread = &start_or_fail;
  }
  ~seam_guard() {
    pl::start_stage_thread = nullptr;
    plan = nullptr;
  }
  seam_guard(const seam_guard&) = delete;
  seam_guard& operator=(const seam_guard&) = delete;
};

// One run with the start of copy `copy` of stage `stage` failing; `earlier`:
// a stage before it fails first (kStages: none).
void start_fails(mote::runtime& rt, std::uint32_t stage, std::size_t copy, std::uint32_t earlier) {
  SCOPED_TRACE("start of stage " + std::to_string(stage) + " copy " + std::to_string(copy) +
               " fails, " +
               (earlier < kStages ? "stage " + std::to_string(earlier) + " failed before"
                                  : "no failure before"));
  counted::live.store(0);
  start_plan p;
  p.fail_stage = stage;
  p.fail_copy = copy;
  p.earlier = earlier;
  const long n = 100000;  // far more than get made before the failure stops the source
  std::atomic<long> sunk{0};
  bool start_error = false, stage_error = false;
  std::uint32_t failed_stage = kStages;
  {
    seam_guard seam(p);
    try {
      mote::parallel_pipeline(
          mote::pipeline_options{.max_in_flight = 8, .dedicated_threads = true, .rt = &rt},
          mote::make_stage<void, counted>(stage_mode::serial_in_order, [&](mote::flow_control& fc) {
            if (earlier == 0) throw stage_failure(0);
            const long i = p.made.fetch_add(1);
            if (i == n) fc.stop();
            return counted(i);
          }) & mote::make_stage<counted, counted>(stage_mode::parallel, [&](counted c) {
            if (earlier == 1) throw stage_failure(1);
            return counted(c.v + 1);
          }) & mote::make_stage<counted, counted>(stage_mode::serial_in_order, [&](counted c) {
            if (earlier == 2) throw stage_failure(2);
            return counted(c.v + 1);
          }) & mote::make_stage<counted, void>(stage_mode::serial_out_of_order, [&](counted c) {
            sunk.fetch_add(c.v >= 0 ? 1 : 0);
          }));
    } catch (const std::system_error& e) {
      start_error = std::string(e.what()).find("injected: stage thread start") != std::string::npos;
    } catch (const stage_failure& e) {
      stage_error = true;
      failed_stage = e.stage;
    }
  }
  EXPECT_FALSE(p.waited_in_vain.load());
  if (earlier < kStages) {
    // The stage's failure came first: it is the one the caller gets.
    EXPECT_TRUE(stage_error) << "the start's error was rethrown over the stage's earlier one";
    EXPECT_EQ(failed_stage, earlier);
  } else {
    EXPECT_TRUE(start_error);
  }
  EXPECT_LT(p.made.load(), n) << "the source did not stop";
  EXPECT_EQ(counted::live.load(), 0) << "values made and never destroyed";
  for (std::uint32_t i = 0; i < kStages; ++i)
    EXPECT_EQ(p.ended[i].load(), p.started[i].load()) << "stage " << i;
}

TEST(PipelineThreadStart, FailsAtEachStageAndCopy) {
  mote::runtime rt(workers(kWorkers));
  for (int rep = 0; rep < 5; ++rep) {
    for (std::uint32_t stage = 0; stage < kStages; ++stage) {
      for (std::size_t copy = 0; copy < copies_of(stage); ++copy)
        start_fails(rt, stage, copy, kStages);
    }
  }
}

TEST(PipelineThreadStart, FailsAfterAnEarlierStageFailed) {
  mote::runtime rt(workers(kWorkers));
  for (int rep = 0; rep < 5; ++rep) {
    for (std::uint32_t stage = 1; stage < kStages; ++stage) {
      for (std::size_t copy = 0; copy < copies_of(stage); ++copy) {
        for (std::uint32_t earlier = 0; earlier < stage; ++earlier)
          start_fails(rt, stage, copy, earlier);
      }
    }
  }
}

// Without the seam the engine starts its threads as before.
TEST(PipelineThreadStart, TheSeamUnsetStartsThreadsAsUsual) {
  mote::runtime rt(workers(kWorkers));
  counted::live.store(0);
  long next = 0, sum = 0;
  mote::parallel_pipeline(
      mote::pipeline_options{.max_in_flight = 8, .dedicated_threads = true, .rt = &rt},
      mote::make_stage<void, counted>(stage_mode::serial_in_order, [&](mote::flow_control& fc) {
        if (next == 1000) fc.stop();
        return counted(next++);
      }) & mote::make_stage<counted, counted>(stage_mode::parallel, [](counted c) {
        return counted(c.v * 2);
      }) & mote::make_stage<counted, void>(stage_mode::serial_in_order, [&](counted c) {
        sum += c.v;
      }));
  EXPECT_EQ(sum, 999L * 1000L);
  EXPECT_EQ(counted::live.load(), 0);
}

// ---- Memory that runs out inside the task engine ------------------------------------

std::atomic<int> alloc_faults_left{0};
pl::task_alloc_site alloc_fault_site = pl::task_alloc_site::gate_queue;  // set before each run
std::atomic<int> alloc_faults_thrown{0};
std::atomic<long> source_calls{0};
long fault_before = 0;  // faults only while the source has made fewer items (set before each run)

void fail_allocation(pl::task_alloc_site site) {
  if (site != alloc_fault_site || source_calls.load() >= fault_before) return;
  int left = alloc_faults_left.load();
  while (left > 0 && !alloc_faults_left.compare_exchange_weak(left, left - 1)) {
  }
  if (left > 0) {
    alloc_faults_thrown.fetch_add(1);
    throw std::bad_alloc();
  }
}

// Runs a task-engine pipeline of n items (two in flight) whose first
// allocation at `site` in the first half of the stream fails; returns whether
// it failed there (the site is reached only when two tasks meet at a serial
// stage, or one hands a stage on), and how many items the source made.
bool task_engine_fails(mote::runtime& rt, pl::task_alloc_site site, long n, long* made) {
  counted::live.store(0);
  alloc_fault_site = site;
  alloc_faults_thrown.store(0);
  alloc_faults_left.store(1);
  source_calls.store(0);
  fault_before = n / 2;
  pl::task_engine_allocates = &fail_allocation;
  bool bad_alloc = false;
  try {
    mote::parallel_pipeline(
        mote::pipeline_options{.max_in_flight = 2, .rt = &rt},
        mote::make_stage<void, counted>(stage_mode::serial_in_order,
                                        [&](mote::flow_control& fc) {
                                          const long i = source_calls.fetch_add(1);
                                          if (i == n) fc.stop();
                                          return counted(i);
                                        }) &
            mote::make_stage<counted, counted>(stage_mode::parallel,
                                               [](counted c) { return counted(c.v + 1); }) &
            mote::make_stage<counted, counted>(stage_mode::serial_out_of_order,
                                               [](counted c) {
                                                 volatile long spin =
                                                     0;  // a stage that takes a while
                                                 for (int k = 0; k < 200; ++k) spin = spin + k;
                                                 return counted(c.v + 1);
                                               }) &
            // Out of order: an item the engine loses holds nothing else up.
            mote::make_stage<counted, void>(stage_mode::serial_out_of_order, [](counted) {}));
  } catch (const std::bad_alloc&) {
    bad_alloc = true;
  }
  pl::task_engine_allocates = nullptr;
  const bool thrown = alloc_faults_thrown.load() != 0;
  EXPECT_EQ(bad_alloc, thrown)
      << "the engine's failure did not reach the caller (or one came from nowhere)";
  EXPECT_EQ(counted::live.load(), 0) << "values made and never destroyed";
  *made = source_calls.load();
  return thrown;
}

// A failed allocation where an item queues at a busy serial stage: the item
// is lost to the engine, which must fail as a stage's exception fails it and
// stop the source. With two slots, the lost one leaves one, whose task loops
// from the last stage back to the first without handing anything on: the
// group's cancellation (which skips tasks not started) cannot stop it, only
// the engine's failure flag can; before, it made the rest of the stream and
// the error came at the end. The fault comes in the stream's first half, and
// the second is long against what the source can make while the failing task
// unwinds to where it marks the failure.
TEST(PipelineTaskEngine, BadAllocQueueingAnItemStopsTheSource) {
  mote::runtime rt(workers(2));
  const long n = scaled(200000, 4);
  int failed_runs = 0;
  for (int attempt = 0; attempt < 50 && failed_runs < 3; ++attempt) {
    long made = 0;
    if (!task_engine_fails(rt, pl::task_alloc_site::gate_queue, n, &made))
      continue;  // no two tasks met
    ++failed_runs;
    EXPECT_LT(made, n) << "the source made the whole stream after the engine failed";
  }
  EXPECT_GT(failed_runs, 0) << "no run queued an item at the serial stage";
}

// A failed spawn of the task that takes a stage on: the run ends, rethrows
// std::bad_alloc, and destroys everything.
TEST(PipelineTaskEngine, BadAllocHandingAStageOnEndsTheRun) {
  mote::runtime rt(workers(2));
  const long n = scaled(200000, 4);
  int failed_runs = 0;
  for (int attempt = 0; attempt < 50 && failed_runs < 3; ++attempt) {
    long made = 0;
    if (task_engine_fails(rt, pl::task_alloc_site::hand_on, n, &made)) ++failed_runs;
  }
  EXPECT_GT(failed_runs, 0) << "no run handed a stage on";
}

}  // namespace
