// The oneTBB backend: a task_arena of o.workers threads (and a global_control
// limit); task_group for fork-join and pairs, parallel_for / parallel_reduce
// over a blocked_range with enumerable_thread_specific for loops. Named build
// option (bench/CMakeLists.txt):
//   MOTE_BENCH_WITH_SIMPLE_PARTITIONER=1  loops with simple_partitioner,
//       blocked_range grain g (chunks of g/2..g); it has no automatic grain and
//       runs only the kernels with one. Otherwise auto_partitioner, blocked_range
//       grain g (a minimum: the partitioner splits no further than g);
//       automatic: blocked_range grain 1
//
// Data flow: every kernel's task graph is known ahead, so it becomes a
// tbb::flow::graph of continue_nodes, one per task, built once per process
// outside the timed part (flow_prepare(), inside the task_arena) and run again
// for each repetition (execute(): try_put to the nodes without predecessors,
// wait_for_all). The edges come from the same accesses the other runtimes
// see, analysed at build time as a data-flow runtime would at spawn time: a
// read waits for the last write, a write for the last write and the reads
// since. oneTBB has no commutative access: nbody's force tasks on one block
// run in program order. Reductions (dot, heat) go to an
// enumerable_thread_specific per target, combined after wait_for_all (a
// reduction's target is read only after the wait in these kernels). So the
// timed part pays neither for creating tasks nor for resolving dependencies:
// it is the lower bound of what a prebuilt graph costs; extra.build_ms has
// the build time.
//
// Streams: tbb::parallel_pipeline with one filter per stage (serial_in_order
// / parallel as the kernel says; the item is its number),
// max_number_of_live_tokens = --in-flight, inside the task_arena. The
// template's backward dependency (a of item i needs b of item i - d) has no
// place in a parallel_pipeline: a filter that waited for it could hold the
// only thread that would produce it. It is kept by the token count instead:
// with min(d, in-flight) tokens and an in-order last filter, item i enters
// only after item i - d has left, so its feedback is ready (and at most d
// items overlap).
#pragma once

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_reduce.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#include <oneapi/tbb/version.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend.hpp"
#include "dataflow_api.hpp"
#include "streams_api.hpp"

#ifndef MOTE_BENCH_WITH_SIMPLE_PARTITIONER
#  define MOTE_BENCH_WITH_SIMPLE_PARTITIONER 0
#endif

namespace mote_bench {
// Internal linkage, as in a single source file: the kernels instantiated on
// the backend stay local to the executable, and inline as they would there.
namespace {

namespace tbb_backend_detail {

constexpr bool kSimple = MOTE_BENCH_WITH_SIMPLE_PARTITIONER != 0;
using range = tbb::blocked_range<std::size_t>;

template <class T>
class locals {
 public:
  template <class Init>
  explicit locals(Init init) : slots_([init]() mutable { return T(init()); }) {}
  T& local() { return slots_.local(); }
  template <class F>
  void for_each(F&& f) {
    for (T& v : slots_) f(v);
  }

 private:
  tbb::enumerable_thread_specific<T> slots_;
};

// The variant's partitioner, with the range it splits.
template <class F>
void for_range(range r, F&& f) {
  if constexpr (kSimple) {
    tbb::parallel_for(r, f, tbb::simple_partitioner());
  } else {
    tbb::parallel_for(r, f, tbb::auto_partitioner());
  }
}

namespace dep = dataflow::dep;
namespace flow = tbb::flow;

// A data-flow kernel's task graph, built once and run again.
class flow_program {
 public:
  using node = flow::continue_node<flow::continue_msg>;

  // Building: one node per spawn, edges from the accesses.
  template <class F, class... A>
  void spawn(F&& f, const A&... a) {
    constexpr std::size_t sums = dep::count_sums<A...>;
    std::array<reduction*, sums> reds{};
    {
      const auto targets = dep::sum_targets(a...);
      for (std::size_t i = 0; i < sums; ++i) reds[i] = reduction_for(targets[i]);
    }
    auto body = [fn = std::decay_t<F>(std::forward<F>(f)), reds](const flow::continue_msg&) mutable {
      dep::call_with_sums<sums>(fn, [&](std::size_t i) -> double& { return reds[i]->local.local(); });
    };
    auto n = std::make_unique<node>(graph_, std::move(body));
    preds_.clear();
    (add_predecessors(a), ...);
    std::sort(preds_.begin(), preds_.end());
    preds_.erase(std::unique(preds_.begin(), preds_.end()), preds_.end());
    for (node* p : preds_) flow::make_edge(*p, *n);
    if (preds_.empty()) sources_.push_back(n.get());
    (record(a, n.get()), ...);
    nodes_.push_back(std::move(n));
  }
  template <class Body>
  void reduction_scope(double&, Body&& body) {
    body();
  }
  void wait() {}  // nothing runs while building

  void finish_building() { last_.clear(); }

  void execute() {
    for (auto& r : reductions_) r->local.clear();
    for (node* s : sources_) s->try_put(flow::continue_msg());
    graph_.wait_for_all();
    for (auto& r : reductions_) {
      double total = 0;
      r->local.combine_each([&](double v) { total += v; });
      *r->target += total;
    }
  }

 private:
  struct reduction {
    double* target;
    tbb::enumerable_thread_specific<double> local{0.0};
  };
  struct history {
    node* writer = nullptr;
    std::vector<node*> readers;  // since the last write
  };

  reduction* reduction_for(double* target) {
    auto [it, fresh] = reduction_index_.try_emplace(target, nullptr);
    if (fresh) {
      reductions_.push_back(std::make_unique<reduction>());
      reductions_.back()->target = target;
      it->second = reductions_.back().get();
    }
    return it->second;
  }

  template <class T>
  void add_predecessors(const dep::in_t<T>& a) {
    if (node* w = last_[a.p].writer) preds_.push_back(w);
  }
  template <class T>
  void add_write_predecessors(const T* p) {
    history& h = last_[p];
    if (h.writer != nullptr) preds_.push_back(h.writer);
    preds_.insert(preds_.end(), h.readers.begin(), h.readers.end());
  }
  template <class T>
  void add_predecessors(const dep::inout_t<T>& a) {
    add_write_predecessors(a.p);
  }
  template <class T>
  void add_predecessors(const dep::commutative_t<T>& a) {
    add_write_predecessors(a.p);
  }
  void add_predecessors(const dep::sum_t&) {}

  template <class T>
  void record(const dep::in_t<T>& a, node* n) {
    last_[a.p].readers.push_back(n);
  }
  template <class T>
  void record_write(const T* p, node* n) {
    history& h = last_[p];
    h.writer = n;
    h.readers.clear();
  }
  template <class T>
  void record(const dep::inout_t<T>& a, node* n) {
    record_write(a.p, n);
  }
  template <class T>
  void record(const dep::commutative_t<T>& a, node* n) {
    record_write(a.p, n);
  }
  void record(const dep::sum_t&, node*) {}

  flow::graph graph_;
  std::vector<std::unique_ptr<node>> nodes_;
  std::vector<node*> sources_;
  std::vector<node*> preds_;
  std::unordered_map<const void*, history> last_;
  std::vector<std::unique_ptr<reduction>> reductions_;
  std::unordered_map<double*, reduction*> reduction_index_;
};

// flow_prepare's result.
struct flow_run {
  std::unique_ptr<flow_program> program;
  void execute() { program->execute(); }
};

// A streams stage as a filter passing the item number on (none from the last).
template <std::size_t I, std::size_t Last, class St>
auto make_filter(St& s) {
  const auto m =
      s.m == streams::mode::parallel ? tbb::filter_mode::parallel : tbb::filter_mode::serial_in_order;
  if constexpr (I == Last) {
    return tbb::make_filter<std::size_t, void>(m, [&s](std::size_t i) { s.f(i); });
  } else {
    return tbb::make_filter<std::size_t, std::size_t>(m, [&s](std::size_t i) {
      s.f(i);
      return i;
    });
  }
}

}  // namespace tbb_backend_detail

class backend {
 public:
  static constexpr bool concurrent = true;
  static constexpr bool runs_on_caller = false;

  explicit backend(options& o)
      : limit_(tbb::global_control::max_allowed_parallelism, o.workers), arena_(static_cast<int>(o.workers)) {
    info_.add("tbb_version", TBB_VERSION_STRING).add("tbb_runtime", TBB_runtime_version());
    info_.add("partitioner", tbb_backend_detail::kSimple ? "simple_partitioner" : "auto_partitioner");
  }
  std::string_view name() const { return MOTE_BENCH_STRINGIZE(MOTE_BENCH_RUNTIME); }
  const extras& info() const { return info_; }

  // ---- fork-join
  template <class F>
  auto run(F&& f) {
    return arena_.execute(f);
  }
  template <class F, class G>
  static void fork2(F&& f, G&& g) {
    tbb::task_group group;
    group.run(g);
    f();
    group.wait();
  }
  template <class F>
  static void spawn_each(int n, F&& f) {
    tbb::task_group group;
    for (int i = 0; i < n; ++i) group.run([&f, i] { f(i); });
    group.wait();
  }

  // ---- runtime costs
  long micro_iters = 1'000'000;
  double spawn_loop(long iters) {
    return arena_.execute([iters] {
      tbb::task_group group;
      auto t0 = clock::now();
      for (long i = 0; i < iters; ++i) {
        group.run([] { empty_task_body(); });
        empty_task_body();
        group.wait();
      }
      return seconds_between(t0, clock::now());
    });
  }
  template <int GroupSize>
  double group_loop(long tasks) {
    return arena_.execute([tasks] {
      auto t0 = clock::now();
      tbb::task_group group;
      for (long done = 0; done < tasks; done += GroupSize) {
        for (int i = 0; i < GroupSize; ++i) {
          group.run([] { empty_task_body(); });
        }
        group.wait();
      }
      return seconds_between(t0, clock::now());
    });
  }
  // enqueue, not execute: execute would run the task on the calling thread.
  double wake_once() {
    clock::time_point started;
    std::atomic<int> done{0};
    auto submitted = clock::now();
    arena_.enqueue([&] {
      started = clock::now();
      done.store(1, std::memory_order_release);  // pairs with the acquire wait below
      done.notify_one();
    });
    done.wait(0, std::memory_order_acquire);  // pairs with the release store above: `started` is written
    return seconds_between(submitted, started);
  }
  template <class Work>
  void warm(Work work) {
    arena_.execute([work] {
      tbb::task_group group;
      std::int64_t a = 0;
      group.run([&a, work] { a = work(); });
      std::int64_t b = work();
      group.wait();
      do_not_optimize(a + b);
    });
  }

  // ---- two tasks at a time: one group reused for every pair
  template <class Body>
  void pair_region(Body&& body) {
    arena_.execute([&] {
      tbb::task_group g;
      group_ = &g;
      body();
      group_ = nullptr;
    });
  }
  template <class F, class G>
  void pair(F& f, G& g) {
    group_->run([&g] { g(); });
    f();
    group_->wait();
  }

  // ---- loops
  static constexpr bool has_auto = !tbb_backend_detail::kSimple;
  template <class Body>
  void loop_region(Body&& body) {
    arena_.execute([&] { body(); });
  }
  static tbb_backend_detail::range make_range(std::size_t n, std::size_t g) {
    if (tbb_backend_detail::kSimple && g == 0) usage_error("grain", "automatic (onetbb_simple has none)");
    return g == 0 ? tbb_backend_detail::range(0, n) : tbb_backend_detail::range(0, n, g);
  }
  template <class F>
  void loop(std::size_t n, std::size_t g, F&& body) {
    using tbb_backend_detail::range;
    tbb_backend_detail::for_range(make_range(n, g), [&body](const range& r) { body(r.begin(), r.end()); });
  }
  template <class T, class F, class C>
  T reduce(std::size_t n, std::size_t g, T identity, F&& body, C&& combine) {
    using tbb_backend_detail::range;
    auto leaf = [&body](const range& r, T acc) { return body(r.begin(), r.end(), std::move(acc)); };
    if constexpr (tbb_backend_detail::kSimple) {
      return tbb::parallel_reduce(make_range(n, g), identity, leaf, combine, tbb::simple_partitioner());
    } else {
      return tbb::parallel_reduce(make_range(n, g), identity, leaf, combine, tbb::auto_partitioner());
    }
  }
  template <class F>
  void nested(std::size_t rows, std::size_t cols, F&& body) {
    using tbb_backend_detail::for_range;
    using tbb_backend_detail::range;
    for_range(make_range(rows, 0), [&body, cols](const range& rr) {
      for (std::size_t r = rr.begin(); r != rr.end(); ++r) {
        for_range(make_range(cols, 0), [&body, r](const range& cr) { body(r, cr.begin(), cr.end()); });
      }
    });
  }
  template <class T, class Init>
  tbb_backend_detail::locals<T> locals(Init init) {
    return tbb_backend_detail::locals<T>(std::move(init));
  }

  // ---- data flow: a prebuilt flow graph
  static constexpr bool flow_builds_graph = true;
  template <class Body>
  void flow_region(Body&& body) {
    arena_.execute([&] { body(); });
  }
  template <class P>
  tbb_backend_detail::flow_run flow_prepare(P& p) {
    auto program = std::make_unique<tbb_backend_detail::flow_program>();
    p.graph(*program);
    program->finish_building();
    return {std::move(program)};
  }

  // ---- streams: tbb::parallel_pipeline in the arena
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
    run_pipeline(in_flight, std::move(first), std::forward_as_tuple(rest...), std::index_sequence_for<S...>{});
  }
  template <class FS, class FA, class FB, class FC>
  void feedback(std::size_t items, std::size_t d, std::size_t in_flight, FS& s, FA& a, FB& b, FC& c) {
    using streams::kRing;
    std::vector<streams::feedback_value> fb(kRing);
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
    arena_.execute([&] { tbb::parallel_pipeline(tokens, chain); });
  }

 private:
  template <class First, class Tuple, std::size_t... I>
  void run_pipeline(std::size_t in_flight, First first, Tuple stages, std::index_sequence<I...>) {
    constexpr std::size_t last = sizeof...(I) - 1;
    auto chain = (std::move(first) & ... & tbb_backend_detail::make_filter<I, last>(std::get<I>(stages)));
    arena_.execute([&] { tbb::parallel_pipeline(in_flight, chain); });
  }

  tbb::global_control limit_;
  tbb::task_arena arena_;
  tbb::task_group* group_ = nullptr;
  extras info_;
};

}  // namespace
}  // namespace mote_bench
