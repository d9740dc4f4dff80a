// The serial backend: every task is a plain call on the calling thread, in
// order (the baseline the suites divide by). Runs with 1 worker.
#pragma once

#include <cstddef>
#include <string_view>

#include "backend.hpp"
#include "dataflow_api.hpp"
#include "streams_api.hpp"

namespace mote_bench {
// Internal linkage, as in a single source file: the kernels instantiated on
// the backend stay local to the executable, and inline as they would there.
namespace {

class backend {
 public:
  static constexpr bool concurrent = false;
  static constexpr bool runs_on_caller = true;

  explicit backend(options& o) { o.workers = 1; }
  std::string_view name() const { return MOTE_BENCH_STRINGIZE(MOTE_BENCH_RUNTIME); }
  const extras& info() const { return info_; }

  // ---- fork-join
  template <class F>
  auto run(F&& f) {
    return f();
  }
  template <class F, class G>
  static void fork2(F&& f, G&& g) {
    f();
    g();
  }
  template <class F>
  static void spawn_each(int n, F&& f) {
    for (int i = 0; i < n; ++i) f(i);
  }

  // ---- two tasks at a time
  template <class Body>
  void pair_region(Body&& body) {
    body();
  }
  template <class F, class G>
  void pair(F& f, G& g) {
    f();
    g();
  }

  // ---- data flow: every spawn a plain call, in program order
  template <class Body>
  void flow_region(Body&& body) {
    body();
  }
  template <class P>
  struct flow_program {
    P& p;
    void execute() {
      dataflow::serial_flow w;
      p.graph(w);
      w.wait();
    }
  };
  template <class P>
  flow_program<P> flow_prepare(P& p) {
    return {p};
  }

  // ---- streams: every stage of an item in turn, item after item
  template <class... S>
  void pipeline(std::size_t items, std::size_t in_flight, S&... s) {
    streams::serial_par().pipeline(items, in_flight, s...);
  }
  template <class S, class A, class B, class C>
  void feedback(std::size_t items, std::size_t d, std::size_t in_flight, S& s, A& a, B& b, C& c) {
    streams::serial_par().feedback(items, d, in_flight, s, a, b, c);
  }

 private:
  extras info_;
};

}  // namespace
}  // namespace mote_bench
