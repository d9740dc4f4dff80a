// The stream kernels on oneTBB: tbb::parallel_pipeline with one filter per
// stage (serial_in_order / parallel as the kernel says; the item is its
// number), max_number_of_live_tokens = --in-flight, inside a task_arena of N
// threads.
//
// The template's backward dependency (a of item i needs b of item i - d)
// has no place in a parallel_pipeline: a filter that waited for it could
// hold the only thread that would produce it. It is kept by the token count
// instead: with min(d, in-flight) tokens and an in-order last filter, item i
// enters only after item i - d has left, so its feedback is ready (and at
// most d items overlap).
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/version.h>

#include <tuple>
#include <utility>
#include <vector>

#include "driver.hpp"

namespace {

using mote_bench::streams::feedback_value;
using mote_bench::streams::kRing;
using mote_bench::streams::mode;

template <std::size_t I, std::size_t Last, class St>
auto make_filter(St& s) {
  const auto m = s.m == mode::parallel ? tbb::filter_mode::parallel : tbb::filter_mode::serial_in_order;
  if constexpr (I == Last) {
    return tbb::make_filter<std::size_t, void>(m, [&s](std::size_t i) { s.f(i); });
  } else {
    return tbb::make_filter<std::size_t, std::size_t>(m, [&s](std::size_t i) {
      s.f(i);
      return i;
    });
  }
}

struct tbb_par {
  tbb::task_arena& arena;

  template <class S0, class... S>
  void pipeline(std::size_t items, std::size_t in_flight, S0& s0, S&... rest) {
    std::size_t next = 0;
    auto first = tbb::make_filter<void, std::size_t>(tbb::filter_mode::serial_in_order,
                                                     [&](tbb::flow_control& fc) -> std::size_t {
                                                       if (next == items) {
                                                         fc.stop();
                                                         return 0;
                                                       }
                                                       s0.f(next);
                                                       return next++;
                                                     });
    run(in_flight, std::move(first), std::forward_as_tuple(rest...), std::index_sequence_for<S...>{});
  }

  template <class First, class Tuple, std::size_t... I>
  void run(std::size_t in_flight, First first, Tuple stages, std::index_sequence<I...>) {
    constexpr std::size_t last = sizeof...(I) - 1;
    auto chain = (std::move(first) & ... & make_filter<I, last>(std::get<I>(stages)));
    arena.execute([&] { tbb::parallel_pipeline(in_flight, chain); });
  }

  template <class FS, class FA, class FB, class FC>
  void feedback(std::size_t items, std::size_t d, std::size_t in_flight, FS& s, FA& a, FB& b, FC& c) {
    std::vector<feedback_value> fb(kRing);
    std::size_t next = 0;
    const auto in_order = tbb::filter_mode::serial_in_order;
    auto chain = tbb::make_filter<void, std::size_t>(in_order,
                                                     [&](tbb::flow_control& fc) -> std::size_t {
                                                       if (next == items) {
                                                         fc.stop();
                                                         return 0;
                                                       }
                                                       s(next);
                                                       return next++;
                                                     }) &
                 tbb::make_filter<std::size_t, std::size_t>(in_order,
                                                            [&](std::size_t i) {
                                                              a(i, i >= d ? &fb[(i - d) % kRing] : nullptr);
                                                              return i;
                                                            }) &
                 tbb::make_filter<std::size_t, std::size_t>(in_order,
                                                            [&](std::size_t i) {
                                                              fb[i % kRing] = b(i);
                                                              return i;
                                                            }) &
                 tbb::make_filter<std::size_t, void>(in_order, [&](std::size_t i) { c(i); });
    const std::size_t tokens = std::min(d, in_flight);
    arena.execute([&] { tbb::parallel_pipeline(tokens, chain); });
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, o.workers);
  tbb::task_arena arena(static_cast<int>(o.workers));
  mote_bench::extras info;
  info.add("tbb_version", TBB_VERSION_STRING).add("tbb_runtime", TBB_runtime_version());
  tbb_par par{arena};
  return mote_bench::streams::run_suite(o, "onetbb", par, info);
}
