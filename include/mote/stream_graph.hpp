// Streaming tasks: tasks whose inputs and outputs are channels, after the
// OpenMP stream-computing extension. The typed loop of each task is here; the
// threads that run the tasks (pinned, counted among the spinning threads) and
// the first error are kept by the library (src/pipeline/stream_graph.cpp).
// mote/pipeline.hpp includes this header.
//
//   mote::channel<int> xs(256);
//   mote::stream_graph g;
//   int next = 0;
//   g.task(mote::inputs(), mote::outputs(xs), [&](mote::flow_control& fc) {
//     if (next == 1000) fc.stop();
//     return next++;
//   });
//   g.task(mote::inputs(xs), mote::outputs(), [](int x) { use(x); });
//   g.wait();
#pragma once

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "mote/channel.hpp"
#include "mote/error.hpp"
#include "mote/export.hpp"
#include "mote/flow_control.hpp"
#include "mote/runtime.hpp"

namespace mote {

// The channels a streaming task reads (one value from each per call) and
// writes (one value to each per call).
template <class... T>
struct stream_inputs {
  std::tuple<channel<T>&...> ch;
};
template <class... T>
struct stream_outputs {
  std::tuple<channel<T>&...> ch;
};

// The inputs of a streaming task (none: a source).
//
//   g.task(mote::inputs(a, b), mote::outputs(sum), [](int x, int y) { return x + y; });
template <class... T>
stream_inputs<T...> inputs(channel<T>&... c) {
  return {std::tuple<channel<T>&...>(c...)};
}
// The outputs of a streaming task (none: a sink).
//
//   g.task(mote::inputs(xs), mote::outputs(ys), [](int x) { return 2 * x; });
template <class... T>
stream_outputs<T...> outputs(channel<T>&... c) {
  return {std::tuple<channel<T>&...>(c...)};
}

// Tasks whose inputs and outputs are streams, after the OpenMP
// stream-computing extension (`#pragma omp task input(state) output(x,
// state)`): each task is called once per set of input values, as they
// arrive, and its results go to its output channels. A task ends when one of
// its inputs is closed and drained, and then closes its outputs, so the end
// of a stream flows down the graph. A task with no inputs is a source: it is
// called with a flow_control until it calls stop(). A value a task both
// reads and writes (state carried from one call to the next) is a channel
// in both lists, primed with its first value.
//
// Every task runs on a thread of its own, pinned to the runtime's CPUs in
// turn (a streaming task waits on its channels, which a worker must not do).
// An exception in a task stops every task (each closes its channels, which
// wakes those waiting on them), and wait() rethrows it.
//
//   mote::channel<int> xs(256), ys(256);
//   mote::stream_graph g;
//   int next = 0;
//   g.task(mote::inputs(), mote::outputs(xs), [&](mote::flow_control& fc) {
//     if (next == 1000) fc.stop();
//     return next++;
//   });
//   g.task(mote::inputs(xs), mote::outputs(ys), [](int x) { return 2 * x; });
//   long sum = 0;
//   g.task(mote::inputs(ys), mote::outputs(), [&](int y) { sum += y; });
//   g.wait();
class MOTE_API stream_graph {
 public:
  // The tasks' threads are pinned to rt's CPUs (null: the default runtime's).
  //
  //   mote::stream_graph g(&rt);
  explicit stream_graph(runtime* rt = nullptr);
  stream_graph(const stream_graph&) = delete;
  stream_graph& operator=(const stream_graph&) = delete;
  // Waits for the tasks that are still running (an error they raised is
  // lost then: call wait() to see it).
  ~stream_graph();

  // Starts a task. fn takes one value of each input (or a flow_control& when
  // there are none) and returns nothing (no outputs), a value (one output)
  // or a std::tuple with one value per output.
  //
  //   g.task(mote::inputs(a, b), mote::outputs(sum), [](int x, int y) { return x + y; });
  template <class... I, class... O, class F>
  void task(stream_inputs<I...> in, stream_outputs<O...> out, F fn) {
    launch(std::make_unique<task_body<stream_inputs<I...>, stream_outputs<O...>, F>>(*this, in, out, std::move(fn)));
  }

  // Waits for every task; rethrows the first exception one threw.
  //
  //   g.wait();
  void wait();

 private:
  // What a task's thread runs.
  struct body {
    virtual ~body() = default;
    virtual void run() = 0;
  };
  template <class In, class Out, class F>
  struct task_body final : body {
    task_body(stream_graph& g, In i, Out o, F f) : graph(g), in(i), out(o), fn(std::move(f)) {}
    void run() override { graph.run_task(in, out, fn); }
    stream_graph& graph;
    In in;
    Out out;
    F fn;
  };

  // Starts a thread for b, pinned to the next of the runtime's CPUs.
  void launch(std::unique_ptr<body> b);
  // Keeps the first error and stops every task.
  void record(std::exception_ptr e);
  bool failed() const noexcept {
    // Relaxed: a hint that makes the tasks stop; see failed_.
    return failed_.load(std::memory_order_relaxed);
  }

  template <class... I, class... O, class F>
  void run_task(stream_inputs<I...>& in, stream_outputs<O...>& out, F& fn) {
    bool failed_here = false;
    try {
      for (;;) {
        if (failed()) break;
        if constexpr (sizeof...(I) == 0) {
          flow_control fc;
          if constexpr (sizeof...(O) == 0) {
            fn(fc);
            if (fc.stopped()) break;
          } else {
            auto r = fn(fc);
            if (fc.stopped()) break;
            push_all(out, std::move(r));
          }
        } else {
          std::optional<std::tuple<I...>> args = pop_all(in, std::index_sequence_for<I...>{});
          if (!args) break;
          if constexpr (sizeof...(O) == 0) {
            std::apply(fn, std::move(*args));
          } else {
            push_all(out, std::apply(fn, std::move(*args)));
          }
        }
      }
    } catch (const usage_error&) {
      // A push to a channel that a failing task closed: stop quietly.
      if (!failed()) {
        record(std::current_exception());
        failed_here = true;
      }
    } catch (...) {
      record(std::current_exception());
      failed_here = true;
    }
    // Our outputs end here. After a failure our inputs are drained (not
    // closed: only a producer may close a channel_kind::spsc channel), so
    // that producers waiting for room go on, see the failure and stop; each
    // then closes its outputs, which ends the drain.
    std::apply([](auto&... c) { (close_quietly(c), ...); }, out.ch);
    if (failed_here || failed()) {
      std::apply([](auto&... c) { (drain_quietly(c), ...); }, in.ch);
    }
  }

  template <class T>
  static void drain_quietly(channel<T>& c) noexcept {
    try {
      while (c.pop()) {
      }
    } catch (...) {
      // a value's move threw: it is gone, and so is the stream
    }
  }

  template <class... I, std::size_t... K>
  static std::optional<std::tuple<I...>> pop_all(stream_inputs<I...>& in, std::index_sequence<K...>) {
    std::tuple<std::optional<I>...> got;
    bool ok = true;
    // One value from each input, in order; stop at the first that has ended.
    ((ok = ok && (std::get<K>(got) = std::get<K>(in.ch).pop()).has_value()), ...);
    if (!ok) return std::nullopt;
    return std::tuple<I...>(std::move(*std::get<K>(got))...);
  }

  template <class... O, class R>
  static void push_all(stream_outputs<O...>& out, R&& r) {
    if constexpr (sizeof...(O) == 1) {
      std::get<0>(out.ch).push(std::forward<R>(r));
    } else {
      std::apply([&](auto&... c) { std::apply([&](auto&&... v) { (c.push(std::move(v)), ...); }, r); }, out.ch);
    }
  }

  template <class T>
  static void close_quietly(channel<T>& c) noexcept {
    try {
      c.close();
    } catch (...) {
      // closing cannot fail but for memory in a switch; nothing more to do
    }
  }

  std::vector<int> cpus_;
  std::vector<std::thread> threads_;
  // Relaxed: a hint that makes the tasks stop; the exception itself goes
  // through error_lock_, and wait() reads it after joining every thread.
  std::atomic<bool> failed_{false};
  std::mutex error_lock_;
  std::exception_ptr error_;
};

}  // namespace mote
