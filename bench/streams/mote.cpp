// The stream kernels on mote. Built twice:
//   MOTE_BENCH_STREAMS_THREADS=0 (mote)          mote::parallel_pipeline as
//       tasks of an N-worker runtime (started from a worker, runtime::run):
//       one stage per kernel stage (serial_in_order / parallel), the item is
//       its number, max_in_flight = --in-flight
//   MOTE_BENCH_STREAMS_THREADS=1 (mote_threads)  the same pipeline with
//       pipeline_options::dedicated_threads: every serial stage on a thread
//       of its own, a parallel stage on one thread per worker, pinned to the
//       runtime's CPUs in turn
// The template (a backward dependence from stage b of item i to stage a of
// item i + d) goes through a mote::channel of feedback values:
//   mote          with one worker, the pipeline with min(d, in-flight)
//                 items in flight (as oneTBB's variant); with two or more,
//                 two std::threads pinned to the runtime's first two CPUs, the
//                 first running stages s and a, the second b and c, with a
//                 channel of item numbers forward and one of feedback
//                 values back (channel_kind::automatic: each has one
//                 producer and one consumer, so both stay on BatchQueue)
//   mote_threads  the dedicated-threads pipeline, stage a popping the
//                 feedback channel (spsc) that stage b pushes
// With --flush 1 (the default) every push to those channels is followed by
// flush(), so the consumer sees it at once; with --flush 0 an item becomes
// visible when its batch fills or when its producer blocks in a channel
// operation (which is what keeps the loop from deadlocking).
#include <mote/channel.hpp>
#include <mote/mote.hpp>
#include <mote/pipeline.hpp>

#include <algorithm>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "driver.hpp"

#ifndef MOTE_BENCH_STREAMS_THREADS
#define MOTE_BENCH_STREAMS_THREADS 0
#endif

namespace {

constexpr bool kThreads = MOTE_BENCH_STREAMS_THREADS != 0;

using mote_bench::streams::feedback_value;
using mote_bench::streams::kMaxInFlight;
using mote_bench::streams::mode;
using mote_bench::streams::pin_to_cpu;

template <std::size_t I, std::size_t Last, class St>
auto make_mote_stage(St& s) {
  const auto m = s.m == mode::parallel ? mote::stage_mode::parallel : mote::stage_mode::serial_in_order;
  if constexpr (I == Last) {
    return mote::make_stage<std::size_t, void>(m, [&s](std::size_t i) { s.f(i); });
  } else {
    return mote::make_stage<std::size_t, std::size_t>(m, [&s](std::size_t i) {
      s.f(i);
      return i;
    });
  }
}

struct mote_par {
  mote::runtime& rt;
  bool flush = true;
  const char* feedback_queue = "";  // the template's feedback channel: the queue it ended on

  mote::pipeline_options options(std::size_t in_flight) {
    return mote::pipeline_options{.max_in_flight = in_flight, .dedicated_threads = kThreads, .rt = &rt};
  }

  template <class Chain>
  void run(std::size_t in_flight, Chain& chain) {
    if constexpr (kThreads) {
      mote::parallel_pipeline(options(in_flight), std::move(chain));
    } else {
      rt.run([&] { mote::parallel_pipeline(options(in_flight), std::move(chain)); });
    }
  }

  template <class S0, class... S>
  void pipeline(std::size_t items, std::size_t in_flight, S0& s0, S&... rest) {
    std::size_t next = 0;
    auto first = mote::make_stage<void, std::size_t>(mote::stage_mode::serial_in_order,
                                                     [&](mote::flow_control& fc) -> std::size_t {
                                                       if (next == items) {
                                                         fc.stop();
                                                         return 0;
                                                       }
                                                       s0.f(next);
                                                       return next++;
                                                     });
    chain(in_flight, std::move(first), std::forward_as_tuple(rest...), std::index_sequence_for<S...>{});
  }

  template <class First, class Tuple, std::size_t... I>
  void chain(std::size_t in_flight, First first, Tuple stages, std::index_sequence<I...>) {
    constexpr std::size_t last = sizeof...(I) - 1;
    auto c = (std::move(first) & ... & make_mote_stage<I, last>(std::get<I>(stages)));
    run(in_flight, c);
  }

  template <class FS, class FA, class FB, class FC>
  void feedback(std::size_t items, std::size_t d, std::size_t in_flight, FS& s, FA& a, FB& b, FC& c) {
    if constexpr (kThreads) {
      feedback_pipeline(items, d, in_flight, s, a, b, c);
    } else if (rt.num_workers() < 2) {
      feedback_tokens(items, d, in_flight, s, a, b, c);  // two threads on one CPU would only take turns
    } else {
      feedback_pair(items, d, s, a, b, c);
    }
  }

  // One worker: the pipeline of four serial stages with min(d, in-flight)
  // items at once, which keeps the dependency as oneTBB's variant does.
  template <class FS, class FA, class FB, class FC>
  void feedback_tokens(std::size_t items, std::size_t d, std::size_t in_flight, FS& s, FA& a, FB& b, FC& c) {
    std::vector<feedback_value> fb(mote_bench::streams::kRing);
    feedback_stages(
        items, std::min(d, in_flight), s, [&](std::size_t i) { a(i, i >= d ? &fb[(i - d) % fb.size()] : nullptr); },
        [&](std::size_t i) { fb[i % fb.size()] = b(i); }, c);
    feedback_queue = "none (tokens)";
  }

  // Four serial stages: s, then a_step (a with its feedback), then b_step
  // (b, its result kept), then c.
  template <class FS, class AStep, class BStep, class FC>
  void feedback_stages(std::size_t items, std::size_t in_flight, FS& s, AStep a_step, BStep b_step, FC& c) {
    std::size_t next = 0;
    const auto in_order = mote::stage_mode::serial_in_order;
    auto step = [](auto f) {
      return mote::make_stage<std::size_t, std::size_t>(mote::stage_mode::serial_in_order, [f](std::size_t i) {
        f(i);
        return i;
      });
    };
    auto ch = mote::make_stage<void, std::size_t>(in_order,
                                                  [&](mote::flow_control& fc) -> std::size_t {
                                                    if (next == items) {
                                                      fc.stop();
                                                      return 0;
                                                    }
                                                    s(next);
                                                    return next++;
                                                  }) &
              step(a_step) & step(b_step) & mote::make_stage<std::size_t, void>(in_order, [&](std::size_t i) { c(i); });
    run(in_flight, ch);
  }

  // Two threads, a channel each way.
  template <class FS, class FA, class FB, class FC>
  void feedback_pair(std::size_t items, std::size_t d, FS& s, FA& a, FB& b, FC& c) {
    const std::vector<int> cpus = rt.worker_cpus();
    const int cpu0 = cpus.empty() ? 0 : cpus[0];
    const int cpu1 = cpus.size() < 2 ? cpu0 : cpus[1];
    mote::channel<std::uint32_t> forward(2 * kMaxInFlight);
    mote::channel<feedback_value> back(2 * kMaxInFlight);
    const bool fl = flush;
    std::thread second([&] {
      pin_to_cpu(cpu1);
      while (std::optional<std::uint32_t> i = forward.pop()) {
        back.push(b(*i));
        if (fl) back.flush();
        c(*i);
      }
    });
    std::thread first([&] {
      pin_to_cpu(cpu0);
      for (std::size_t i = 0; i < items; ++i) {
        s(i);
        if (i >= d) {
          const feedback_value f = *back.pop();
          a(i, &f);
        } else {
          a(i, nullptr);
        }
        forward.push(static_cast<std::uint32_t>(i));
        if (fl) forward.flush();
      }
      forward.close();
    });
    first.join();
    second.join();
    feedback_queue = forward.queue_in_use() == mote::channel_kind::spsc &&
                             back.queue_in_use() == mote::channel_kind::spsc
                         ? "batch_queue"
                         : "mpmc_queue";
  }

  // The dedicated-threads pipeline, a feedback channel from b to a.
  template <class FS, class FA, class FB, class FC>
  void feedback_pipeline(std::size_t items, std::size_t d, std::size_t in_flight, FS& s, FA& a, FB& b, FC& c) {
    mote::channel<feedback_value> back(2 * kMaxInFlight, mote::channel_kind::spsc);
    const bool fl = flush;
    feedback_stages(
        items, in_flight, s,
        [&](std::size_t i) {
          if (i >= d) {
            const feedback_value f = *back.pop();
            a(i, &f);
          } else {
            a(i, nullptr);
          }
        },
        [&](std::size_t i) {
          back.push(b(i));
          if (fl) back.flush();
        },
        c);
    feedback_queue = "batch_queue";
  }

  // Added to each record after the runs.
  void note(mote_bench::extras& ex) const {
    if (*feedback_queue != '\0') {
      ex.add("flush", std::int64_t{flush ? 1 : 0}).add("feedback_queue", feedback_queue);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  mote::runtime_options options;
  options.num_workers = o.workers;
  mote::runtime rt(options);
  mote_bench::extras info;
  info.add("spin_us", static_cast<std::int64_t>(rt.spin().count()));
  info.add("dedicated_threads", std::int64_t{kThreads ? 1 : 0});
  mote_par par{rt};
  par.flush = mote_bench::option_value(o, "--flush", 1) != 0;
  return mote_bench::streams::run_suite(o, kThreads ? "mote_threads" : "mote", par, info);
}
