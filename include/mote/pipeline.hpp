// Pipelines: stages connected by channels (the shape of oneTBB's
// parallel_pipeline), and streaming tasks (mote/stream_graph.hpp, included
// here: tasks whose inputs and outputs are channels).
//
//   mote::parallel_pipeline(16,
//       mote::make_stage<void, int>(mote::stage_mode::serial_in_order,
//                                   [&](mote::flow_control& fc) {
//                                     if (next == n) fc.stop();
//                                     return next++;
//                                   })
//     & mote::make_stage<int, double>(mote::stage_mode::parallel, [](int i) { return std::sqrt(i); })
//     & mote::make_stage<double, void>(mote::stage_mode::serial_in_order, [&](double x) { sum += x; }));
//
// Stage modes:
//   serial_in_order      one item at a time, in the order the first stage made them
//   serial_out_of_order  one item at a time, in any order
//   parallel             any number of items at once
// The first stage is called serially (flow_control::stop() ends the stream;
// the value returned with it is dropped). At most max_in_flight items are in
// the pipeline at once: that is the back-pressure, and it bounds memory.
//
// How it runs. On mote's workers (the default) an item travels with its task
// through as many stages as it can, and a serial stage moves on to the next
// item in a new task (oneTBB's scheme: the item's data stays in one core's
// cache; no worker ever blocks in a stage). With
// pipeline_options::dedicated_threads every stage instead runs on threads of
// its own (one per serial stage, one per worker for a parallel stage), pinned
// to the runtime's CPUs and connected by channels: channel_kind::spsc, that
// is BatchQueue, between two serial stages (a one-to-one stream, as the
// seed's runtime chooses automatically), MPMC elsewhere. See docs/streams.md.
//
// An exception thrown by a stage stops the first stage, the items in flight
// are dropped (destroyed, nothing leaks), and the exception reaches the
// caller of parallel_pipeline once everything has stopped.
//
// This header keeps what must be a template: the stages, the values an item
// carries, and each stage wrapped into an entry that runs it on one item
// (detail::pipeline_chain). The two engines (the scheduling of items, the
// gates of serial stages, the threads, the failures) are compiled in the
// library, src/pipeline/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include "mote/export.hpp"
#include "mote/flow_control.hpp"
#include "mote/runtime.hpp"
#include "mote/stream_graph.hpp"

namespace mote {

enum class stage_mode : std::uint8_t { serial_in_order, serial_out_of_order, parallel };

// One stage: its input and output types (void at the ends), its mode and its
// function. Made by make_stage, composed with operator&.
template <class In, class Out, class F>
struct stage {
  using input_type = In;
  using output_type = Out;
  stage_mode mode;
  F fn;
};

// A stage from a function: Out f(In) in the middle, Out f(flow_control&)
// first, void f(In) last.
//
//   auto square = mote::make_stage<int, int>(mote::stage_mode::parallel, [](int x) { return x * x; });
template <class In, class Out, class F>
stage<In, Out, std::decay_t<F>> make_stage(stage_mode mode, F&& f) {
  if constexpr (std::is_void_v<In>) {
    static_assert(std::is_invocable_v<std::decay_t<F>&, flow_control&>,
                  "the first stage is called as f(flow_control&)");
  } else {
    static_assert(std::is_invocable_v<std::decay_t<F>&, In&&>, "a stage is called as f(In)");
  }
  return {mode, std::forward<F>(f)};
}

// Stages in order.
template <class... S>
struct stage_chain {
  std::tuple<S...> stages;
};

namespace detail {
template <class T>
struct is_stage : std::false_type {};
template <class I, class O, class F>
struct is_stage<stage<I, O, F>> : std::true_type {};
template <class T>
struct is_chain : std::false_type {};
template <class... S>
struct is_chain<stage_chain<S...>> : std::true_type {};
template <class T>
concept stage_or_chain = is_stage<std::decay_t<T>>::value || is_chain<std::decay_t<T>>::value;

template <class T>
auto as_tuple(T&& t) {
  if constexpr (is_chain<std::decay_t<T>>::value) {
    return std::forward<T>(t).stages;
  } else {
    return std::tuple<std::decay_t<T>>(std::forward<T>(t));
  }
}
}  // namespace detail

// Joins stages (or chains) into one chain; the output type of the left
// must be the input type of the right.
//
//   auto chain = first & middle & last;
template <detail::stage_or_chain A, detail::stage_or_chain B>
auto operator&(A&& a, B&& b) {
  auto t = std::tuple_cat(detail::as_tuple(std::forward<A>(a)), detail::as_tuple(std::forward<B>(b)));
  return std::apply([](auto&&... s) { return stage_chain<std::decay_t<decltype(s)>...>{{std::move(s)...}}; },
                    std::move(t));
}

struct pipeline_options {
  // Items in the pipeline at once; 0: four per worker.
  std::size_t max_in_flight = 0;
  // Run every stage on threads of its own, pinned to the runtime's CPUs,
  // instead of as tasks on its workers.
  bool dedicated_threads = false;
  // The runtime whose workers (or CPUs) run the stages; null: the current
  // worker's runtime, else the default one.
  runtime* rt = nullptr;
};

namespace detail {

// ---- The chain as the engines see it -------------------------------------------
//
// An item is the values the stages made of it, in storage the engine keeps
// (one place per item in flight, made once per run: an item costs no
// allocation). The engine never looks inside; it runs stage i on an item
// through stages[i].run, and makes, and destroys, an item's storage.
struct pipeline_stage_entry {
  stage_mode mode;
  // Runs the stage on `item`: the first stage makes the item's first value
  // and returns false at the end of the stream; a later stage turns its
  // input value into its output value and returns true. May throw: the
  // item then holds what the stage left (dropped by the engine).
  bool (*run)(void* stages, void* item);
};

struct pipeline_chain {
  const pipeline_stage_entry* stages;
  std::size_t num_stages;
  void* context;  // the user's stages, passed to every run
  std::size_t item_size;
  std::size_t item_align;
  void (*make_item)(void* item) noexcept;     // empty values
  void (*destroy_item)(void* item) noexcept;  // destroys the values it still holds
};

// Runs the chain (src/pipeline/pipeline.cpp): resolves the options' runtime
// and max_in_flight, then runs the engine they choose. Throws
// std::invalid_argument for a max_in_flight over 2^30.
MOTE_API void run_pipeline(const pipeline_chain& chain, const pipeline_options& options);

template <class T>
using stored_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <class Stages>
struct typed_chain;

// The typed side of a chain: each stage's entry, and the item: one optional
// value per stage (a stage destroys its input as it makes its output).
template <class... S>
struct typed_chain<std::tuple<S...>> {
  static constexpr std::size_t N = sizeof...(S);
  using stages = std::tuple<S...>;
  template <std::size_t I>
  using stage_t = std::tuple_element_t<I, stages>;
  template <std::size_t I>
  using out_t = typename stage_t<I>::output_type;
  using item = std::tuple<std::optional<stored_t<typename S::output_type>>...>;

  static_assert(std::is_void_v<typename stage_t<0>::input_type>, "the first stage takes no input (In = void)");
  static_assert(std::is_void_v<out_t<N - 1>>, "the last stage returns nothing (Out = void)");

  template <std::size_t... I>
  static constexpr bool linked(std::index_sequence<I...>) {
    return (std::is_same_v<out_t<I>, typename stage_t<I + 1>::input_type> && ...);
  }
  static_assert(linked(std::make_index_sequence<N - 1>{}),
                "each stage's output type must be the next stage's input type");

  template <std::size_t I>
  static bool run(void* context, void* place) {
    item& v = *static_cast<item*>(place);
    auto& fn = std::get<I>(*static_cast<stages*>(context)).fn;
    if constexpr (I == 0) {
      flow_control fc;
      if constexpr (std::is_void_v<out_t<0>>) {
        fn(fc);
      } else {
        auto& out = std::get<0>(v);
        out.emplace(fn(fc));
        if (fc.stopped()) out.reset();
      }
      return !fc.stopped();
    } else {
      auto& in = std::get<I - 1>(v);
      if constexpr (std::is_void_v<out_t<I>>) {
        fn(std::move(*in));
      } else {
        std::get<I>(v).emplace(fn(std::move(*in)));
      }
      in.reset();
      return true;
    }
  }

  static void make(void* place) noexcept { ::new (place) item(); }
  static void destroy(void* place) noexcept { static_cast<item*>(place)->~item(); }

  template <std::size_t... I>
  static void run_all(stages& s, const pipeline_options& options, std::index_sequence<I...>) {
    const pipeline_stage_entry entries[] = {{std::get<I>(s).mode, &run<I>}...};
    const pipeline_chain chain{.stages = entries,
                               .num_stages = N,
                               .context = &s,
                               .item_size = sizeof(item),
                               .item_align = alignof(item),
                               .make_item = &make,
                               .destroy_item = &destroy};
    run_pipeline(chain, options);
  }
};

}  // namespace detail

// Runs the chain of stages with at most max_in_flight items at once, as
// tasks of the current worker's runtime (else the default runtime's), and
// returns when the first stage has stopped and every item is through.
// Rethrows the first exception of a stage.
//
//   mote::parallel_pipeline(mote::pipeline_options{.max_in_flight = 8, .dedicated_threads = true},
//                           read & transform & write);
template <class Chain>
  requires detail::stage_or_chain<Chain>
void parallel_pipeline(const pipeline_options& options, Chain&& chain) {
  auto stages = detail::as_tuple(std::forward<Chain>(chain));
  using typed = detail::typed_chain<decltype(stages)>;
  typed::run_all(stages, options, std::make_index_sequence<typed::N>{});
}

// The same with max_in_flight items at once (at least 1).
//
//   mote::parallel_pipeline(8, read & transform & write);
template <class Chain>
  requires detail::stage_or_chain<Chain>
void parallel_pipeline(std::size_t max_in_flight, Chain&& chain) {
  if (max_in_flight == 0) throw std::invalid_argument("mote::parallel_pipeline: max_in_flight must be at least 1");
  parallel_pipeline(pipeline_options{.max_in_flight = max_in_flight}, std::forward<Chain>(chain));
}

}  // namespace mote
