// The mote backend: a mote::runtime of o.workers workers; join and
// task_group for fork-join, parallel_for / parallel_reduce / per_worker for
// loops. Named build options (bench/CMakeLists.txt):
//   MOTE_BENCH_WITH_ADAPTIVE=1   the adaptive offload on (runtime_options::
//                                adaptive, assistant_options::adaptive); off
//                                otherwise, explicitly, so that MOTE_ADAPTIVE
//                                in the environment changes neither variant
//   MOTE_BENCH_WITH_ASSISTANT=1  no runtime: the caller (pinned) runs one task
//                                of a pair and a mote::assistant, pinned to the
//                                other CPU, the other; the assistant is woken
//                                before the pairs and let sleep after them, as
//                                a program would around a parallel section
//                                (pairs only)
//   MOTE_BENCH_WITH_DELEGATION=1 the delegation scheduler (MOTE_SCHEDULER=
//                                delegation, set in the process before the
//                                runtime starts; extra.env says so)
//   MOTE_BENCH_WITH_NO_POOLS=1   the data-flow records from the system
//                                allocator instead of mote's pools
//                                (MOTE_DATAFLOW_POOLS=0, likewise); linked
//                                with jemalloc, that allocator is jemalloc
//   MOTE_BENCH_WITH_DEDICATED_THREADS=1
//                                the streams pipelines with pipeline_options::
//                                dedicated_threads (below)
// Data flow: one mote::dataflow per repetition, its accesses mote::in /
// inout / commutative and mote::reduction(std::plus<>) for a sum;
// extra.allocator says which malloc the process really uses.
// Streams: mote::parallel_pipeline, one stage per kernel stage
// (serial_in_order / parallel), the item is its number, max_in_flight =
// --in-flight; as tasks of the runtime (started from a worker, runtime::run),
// or with DEDICATED_THREADS every serial stage on a thread of its own and a
// parallel stage on one thread per worker, pinned to the runtime's CPUs in
// turn. The template (a backward dependence from stage b of item i to stage a
// of item i + d) goes through a mote::channel of feedback values:
//   tasks         with one worker, the pipeline with min(d, in-flight)
//                 items in flight (as oneTBB's); with two or more, two
//                 std::threads pinned to the runtime's first two CPUs, the
//                 first running stages s and a, the second b and c, with a
//                 channel of item numbers forward and one of feedback
//                 values back (channel_kind::automatic: each has one
//                 producer and one consumer, so both stay on BatchQueue)
//   DEDICATED_THREADS  the dedicated-threads pipeline, stage a popping the
//                 feedback channel (spsc) that stage b pushes
// With --flush 1 (the default) every push to those channels is followed by
// flush(), so the consumer sees it at once; with --flush 0 an item becomes
// visible when its batch fills or when its producer blocks in a channel
// operation (which is what keeps the loop from deadlocking).
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mote/channel.hpp>
#include <mote/dataflow.hpp>
#include <mote/loops.hpp>
#include <mote/mote.hpp>
#include <mote/pipeline.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "backend.hpp"
#include "dataflow_api.hpp"
#include "streams_api.hpp"

#ifndef MOTE_BENCH_WITH_ADAPTIVE
#  define MOTE_BENCH_WITH_ADAPTIVE 0
#endif
#ifndef MOTE_BENCH_WITH_ASSISTANT
#  define MOTE_BENCH_WITH_ASSISTANT 0
#endif
#ifndef MOTE_BENCH_WITH_DELEGATION
#  define MOTE_BENCH_WITH_DELEGATION 0
#endif
#ifndef MOTE_BENCH_WITH_NO_POOLS
#  define MOTE_BENCH_WITH_NO_POOLS 0
#endif
#ifndef MOTE_BENCH_WITH_DEDICATED_THREADS
#  define MOTE_BENCH_WITH_DEDICATED_THREADS 0
#endif

namespace mote_bench {
// Internal linkage, as in a single source file: the kernels instantiated on
// the backend stay local to the executable, and inline as they would there.
namespace {

namespace mote_backend_detail {

constexpr bool kAdaptive = MOTE_BENCH_WITH_ADAPTIVE != 0;
constexpr bool kDedicatedThreads = MOTE_BENCH_WITH_DEDICATED_THREADS != 0;

template <class T>
class locals {
 public:
  template <class Init>
  locals(mote::runtime& rt, Init init) : slots_(rt, std::move(init)) {}
  T& local() { return slots_.local(); }
  template <class F>
  void for_each(F&& f) {
    slots_.for_each(f);
  }

 private:
  mote::per_worker<T> slots_;
};

// The variant's environment settings, as "NAME=value" separated by spaces
// (extra.env); empty for none.
inline std::string settings() {
  std::string out;
  if (MOTE_BENCH_WITH_DELEGATION) out += "MOTE_SCHEDULER=delegation";
  if (MOTE_BENCH_WITH_NO_POOLS) out += std::string(out.empty() ? "" : " ") + "MOTE_DATAFLOW_POOLS=0";
  return out;
}

// Puts them in the process environment, before the runtime reads them.
inline void apply_settings() {
  if (MOTE_BENCH_WITH_DELEGATION) setenv("MOTE_SCHEDULER", "delegation", 1);
  if (MOTE_BENCH_WITH_NO_POOLS) setenv("MOTE_DATAFLOW_POOLS", "0", 1);
}

namespace dep = dataflow::dep;

template <class T>
mote::access to_mote(const dep::in_t<T>& a) {
  return a.n == 0 ? mote::in(*a.p) : mote::in(a.p, a.n);
}
template <class T>
mote::access to_mote(const dep::inout_t<T>& a) {
  return a.n == 0 ? mote::inout(*a.p) : mote::inout(a.p, a.n);
}
template <class T>
mote::access to_mote(const dep::commutative_t<T>& a) {
  return a.n == 0 ? mote::commutative(*a.p) : mote::commutative(a.p, a.n);
}
inline auto to_mote(const dep::sum_t& a) { return mote::reduction(std::plus<>{}, *a.target); }

// A data-flow kernel's tasks on one mote::dataflow.
struct flow {
  mote::dataflow& df;
  template <class F, class... A>
  void spawn(F&& f, const A&... a) {
    df.spawn(to_mote(a)..., std::forward<F>(f));
  }
  template <class Body>
  void reduction_scope(double&, Body&& body) {
    body();
  }
  void wait() { df.wait(); }
};

// A kernel's program: a fresh mote::dataflow for every run.
template <class P>
struct flow_program {
  mote::runtime& rt;
  P& p;
  void execute() {
    mote::dataflow df(rt);
    flow w{df};
    p.graph(w);
    w.wait();
  }
};

// A streams stage as a pipeline stage passing the item number on (none from
// the last).
template <std::size_t I, std::size_t Last, class St>
auto make_stage(St& s) {
  const auto m =
      s.m == streams::mode::parallel ? mote::stage_mode::parallel : mote::stage_mode::serial_in_order;
  if constexpr (I == Last) {
    return mote::make_stage<std::size_t, void>(m, [&s](std::size_t i) { s.f(i); });
  } else {
    return mote::make_stage<std::size_t, std::size_t>(m, [&s](std::size_t i) {
      s.f(i);
      return i;
    });
  }
}

}  // namespace mote_backend_detail

#if MOTE_BENCH_WITH_ASSISTANT

class backend {
 public:
  static constexpr bool concurrent = true;
  static constexpr bool runs_on_caller = true;

  explicit backend(options&) : helper_(make_options()) {
    info_.add("assistant_cpu", static_cast<std::int64_t>(helper_.cpu()));
    info_.add("adaptive", std::int64_t{mote_backend_detail::kAdaptive ? 1 : 0});
  }
  std::string_view name() const { return MOTE_BENCH_STRINGIZE(MOTE_BENCH_RUNTIME); }
  const extras& info() const { return info_; }

  // ---- two tasks at a time
  template <class Body>
  void pair_region(Body&& body) {
    helper_.wake_up_hint();
    body();
    helper_.sleep_hint();
  }
  template <class F, class G>
  void pair(F& f, G& g) {
    helper_.submit([&g] { g(); });
    f();
    helper_.wait();
  }

 private:
  static mote::assistant_options make_options() {
    mote::assistant_options options;
    options.adaptive = mote_backend_detail::kAdaptive;
    return options;
  }
  mote::assistant helper_;
  extras info_;
};

#else

class backend {
 public:
  static constexpr bool concurrent = true;
  static constexpr bool runs_on_caller = false;

  explicit backend(options& o) : rt_(make_options(o)), flush_(option_value(o, "--flush", 1) != 0) {
    if (const std::string env = mote_backend_detail::settings(); !env.empty()) info_.add("env", env);
    // jemalloc exports mallctl.
    info_.add("allocator", dlsym(RTLD_DEFAULT, "mallctl") != nullptr ? "jemalloc" : "system");
    info_.add("spin_us", static_cast<std::int64_t>(rt_.spin().count()));
    info_.add("adaptive", std::int64_t{mote_backend_detail::kAdaptive ? 1 : 0});
  }
  std::string_view name() const { return MOTE_BENCH_STRINGIZE(MOTE_BENCH_RUNTIME); }
  const extras& info() const { return info_; }

  // ---- fork-join
  template <class F>
  auto run(F&& f) {
    return rt_.run(f);
  }
  template <class F, class G>
  static void fork2(F&& f, G&& g) {
    mote::join(f, g);
  }
  template <class F>
  static void spawn_each(int n, F&& f) {
    mote::task_group group;
    for (int i = 0; i < n; ++i) group.spawn([&f, i] { f(i); });
    group.wait();
  }

  // ---- runtime costs
  long micro_iters = 10'000'000;
  double spawn_loop(long iters) {
    return rt_.run([iters] {
      auto t0 = clock::now();
      for (long i = 0; i < iters; ++i) {
        mote::join([] { empty_task_body(); }, [] { empty_task_body(); });
      }
      return seconds_between(t0, clock::now());
    });
  }
  template <int GroupSize>
  double group_loop(long tasks) {
    return rt_.run([tasks] {
      auto t0 = clock::now();
      mote::task_group group;
      for (long done = 0; done < tasks; done += GroupSize) {
        for (int i = 0; i < GroupSize; ++i) {
          group.spawn([] { empty_task_body(); });
        }
        group.wait();
      }
      return seconds_between(t0, clock::now());
    });
  }
  double wake_once() {
    clock::time_point started;
    auto submitted = clock::now();
    rt_.run([&started] { started = clock::now(); });
    return seconds_between(submitted, started);
  }
  template <class Work>
  void warm(Work work) {
    rt_.run([work] {
      auto [a, b] = mote::join([work] { return work(); }, [work] { return work(); });
      do_not_optimize(a + b);
    });
  }

  // ---- two tasks at a time
  template <class Body>
  void pair_region(Body&& body) {
    rt_.run(body);
  }
  template <class F, class G>
  void pair(F& f, G& g) {
    mote::join(f, g);
  }

  // ---- loops
  static constexpr bool has_auto = true;
  template <class Body>
  void loop_region(Body&& body) {
    rt_.run([&] { body(); });
  }
  template <class F>
  void loop(std::size_t n, std::size_t grain, F&& body) {
    if (grain == 0) {
      mote::parallel_for(std::size_t{0}, n, body);
    } else {
      mote::parallel_for(std::size_t{0}, n, mote::grain(grain), body);
    }
  }
  template <class T, class F, class C>
  T reduce(std::size_t n, std::size_t grain, T identity, F&& body, C&& combine) {
    if (grain == 0)
      return mote::parallel_reduce(std::size_t{0}, n, std::move(identity), body, combine);
    return mote::parallel_reduce(std::size_t{0}, n, mote::grain(grain), std::move(identity), body,
                                 combine);
  }
  template <class F>
  void nested(std::size_t rows, std::size_t cols, F&& body) {
    mote::parallel_for(std::size_t{0}, rows, [&body, cols](std::size_t r) {
      mote::parallel_for(std::size_t{0}, cols,
                         [&body, r](std::size_t b, std::size_t e) { body(r, b, e); });
    });
  }
  template <class T, class Init>
  mote_backend_detail::locals<T> locals(Init init) {
    return mote_backend_detail::locals<T>(rt_, std::move(init));
  }

  // ---- data flow
  template <class Body>
  void flow_region(Body&& body) {
    rt_.run([&] { body(); });
  }
  template <class P>
  mote_backend_detail::flow_program<P> flow_prepare(P& p) {
    return {rt_, p};
  }

  // ---- streams
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
    chain_stages(in_flight, std::move(first), std::forward_as_tuple(rest...), std::index_sequence_for<S...>{});
  }
  template <class FS, class FA, class FB, class FC>
  void feedback(std::size_t items, std::size_t d, std::size_t in_flight, FS& s, FA& a, FB& b, FC& c) {
    if constexpr (mote_backend_detail::kDedicatedThreads) {
      feedback_pipeline(items, d, in_flight, s, a, b, c);
    } else if (rt_.num_workers() < 2) {
      feedback_tokens(items, d, in_flight, s, a, b, c);  // two threads on one CPU would only take turns
    } else {
      feedback_pair(items, d, s, a, b, c);
    }
  }
  // Added to each streams record after its runs.
  void streams_note(extras& ex) const {
    ex.add("dedicated_threads", std::int64_t{mote_backend_detail::kDedicatedThreads ? 1 : 0});
    if (*feedback_queue_ != '\0') {
      ex.add("flush", std::int64_t{flush_ ? 1 : 0}).add("feedback_queue", feedback_queue_);
    }
  }

 private:
  // ---- streams, inside
  mote::pipeline_options pipeline_options_for(std::size_t in_flight) {
    return mote::pipeline_options{
        .max_in_flight = in_flight, .dedicated_threads = mote_backend_detail::kDedicatedThreads, .rt = &rt_};
  }
  template <class Chain>
  void run_pipeline(std::size_t in_flight, Chain& chain) {
    if constexpr (mote_backend_detail::kDedicatedThreads) {
      mote::parallel_pipeline(pipeline_options_for(in_flight), std::move(chain));
    } else {
      rt_.run([&] { mote::parallel_pipeline(pipeline_options_for(in_flight), std::move(chain)); });
    }
  }
  template <class First, class Tuple, std::size_t... I>
  void chain_stages(std::size_t in_flight, First first, Tuple stages, std::index_sequence<I...>) {
    constexpr std::size_t last = sizeof...(I) - 1;
    auto c = (std::move(first) & ... & mote_backend_detail::make_stage<I, last>(std::get<I>(stages)));
    run_pipeline(in_flight, c);
  }

  // One worker: the pipeline of four serial stages with min(d, in-flight)
  // items at once, which keeps the dependency as oneTBB's does.
  template <class FS, class FA, class FB, class FC>
  void feedback_tokens(std::size_t items, std::size_t d, std::size_t in_flight, FS& s, FA& a, FB& b, FC& c) {
    std::vector<streams::feedback_value> fb(streams::kRing);
    feedback_stages(
        items, std::min(d, in_flight), s, [&](std::size_t i) { a(i, i >= d ? &fb[(i - d) % fb.size()] : nullptr); },
        [&](std::size_t i) { fb[i % fb.size()] = b(i); }, c);
    feedback_queue_ = "none (tokens)";
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
    run_pipeline(in_flight, ch);
  }

  // Two threads, a channel each way.
  template <class FS, class FA, class FB, class FC>
  void feedback_pair(std::size_t items, std::size_t d, FS& s, FA& a, FB& b, FC& c) {
    const std::vector<int> cpus = rt_.worker_cpus();
    const int cpu0 = cpus.empty() ? 0 : cpus[0];
    const int cpu1 = cpus.size() < 2 ? cpu0 : cpus[1];
    mote::channel<std::uint32_t> forward(2 * streams::kMaxInFlight);
    mote::channel<streams::feedback_value> back(2 * streams::kMaxInFlight);
    const bool fl = flush_;
    std::thread second([&] {
      streams::pin_to_cpu(cpu1);
      while (std::optional<std::uint32_t> i = forward.pop()) {
        back.push(b(*i));
        if (fl) back.flush();
        c(*i);
      }
    });
    std::thread first([&] {
      streams::pin_to_cpu(cpu0);
      for (std::size_t i = 0; i < items; ++i) {
        s(i);
        if (i >= d) {
          const streams::feedback_value f = *back.pop();
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
    feedback_queue_ = forward.queue_in_use() == mote::channel_kind::spsc &&
                              back.queue_in_use() == mote::channel_kind::spsc
                          ? "batch_queue"
                          : "mpmc_queue";
  }

  // The dedicated-threads pipeline, a feedback channel from b to a.
  template <class FS, class FA, class FB, class FC>
  void feedback_pipeline(std::size_t items, std::size_t d, std::size_t in_flight, FS& s, FA& a, FB& b, FC& c) {
    mote::channel<streams::feedback_value> back(2 * streams::kMaxInFlight, mote::channel_kind::spsc);
    const bool fl = flush_;
    feedback_stages(
        items, in_flight, s,
        [&](std::size_t i) {
          if (i >= d) {
            const streams::feedback_value f = *back.pop();
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
    feedback_queue_ = "batch_queue";
  }

  static mote::runtime_options make_options(const options& o) {
    mote_backend_detail::apply_settings();
    mote::runtime_options options;
    options.num_workers = o.workers;
    options.adaptive = mote_backend_detail::kAdaptive;
    return options;
  }
  mote::runtime rt_;
  bool flush_;                      // streams: --flush
  const char* feedback_queue_ = "";  // streams: the queue the template's feedback ended on
  extras info_;
};

#endif

}  // namespace
}  // namespace mote_bench
