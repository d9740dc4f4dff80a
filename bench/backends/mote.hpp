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
// Data flow: one mote::dataflow per repetition, its accesses mote::in /
// inout / commutative and mote::reduction(std::plus<>) for a sum;
// extra.allocator says which malloc the process really uses.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mote/dataflow.hpp>
#include <mote/loops.hpp>
#include <mote/mote.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "backend.hpp"
#include "dataflow_api.hpp"

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

namespace mote_bench {
// Internal linkage, as in a single source file: the kernels instantiated on
// the backend stay local to the executable, and inline as they would there.
namespace {

namespace mote_backend_detail {

constexpr bool kAdaptive = MOTE_BENCH_WITH_ADAPTIVE != 0;

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

  explicit backend(options& o) : rt_(make_options(o)) {
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

 private:
  static mote::runtime_options make_options(const options& o) {
    mote_backend_detail::apply_settings();
    mote::runtime_options options;
    options.num_workers = o.workers;
    options.adaptive = mote_backend_detail::kAdaptive;
    return options;
  }
  mote::runtime rt_;
  extras info_;
};

#endif

}  // namespace
}  // namespace mote_bench
