// mote::parallel_pipeline and mote::stream_graph: every stage kind, on tasks
// and on dedicated threads, checked against a serial run; back-pressure, the
// end of the stream, exceptions, nesting, move-only values.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
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
