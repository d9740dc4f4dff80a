// The loop kernels on oneTBB: tbb::parallel_for / parallel_reduce over a
// blocked_range in a task_arena of N threads, per-thread state in a
// tbb::enumerable_thread_specific, nested loops as a parallel_for inside a
// parallel_for. Built twice:
//   MOTE_BENCH_LOOPS_SIMPLE=0 (onetbb)         auto_partitioner, blocked_range
//       grain g (a minimum: the partitioner splits no further than g);
//       automatic: blocked_range grain 1
//   MOTE_BENCH_LOOPS_SIMPLE=1 (onetbb_simple)  simple_partitioner, blocked_range
//       grain g (chunks of g/2..g); it has no automatic grain and runs only the
//       kernels with one
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_reduce.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/version.h>

#include "driver.hpp"

#ifndef MOTE_BENCH_LOOPS_SIMPLE
#define MOTE_BENCH_LOOPS_SIMPLE 0
#endif

namespace {

constexpr bool kSimple = MOTE_BENCH_LOOPS_SIMPLE != 0;
using range = tbb::blocked_range<std::size_t>;

template <class T>
class tbb_locals {
 public:
  template <class Init>
  explicit tbb_locals(Init init) : slots_([init]() mutable { return T(init()); }) {}
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

struct tbb_par {
  static constexpr bool concurrent = true;
  static constexpr bool has_auto = !kSimple;
  tbb::task_arena& arena;

  template <class Body>
  void region(Body&& body) {
    arena.execute([&] { body(); });
  }
  static range make_range(std::size_t n, std::size_t g) {
    if (kSimple && g == 0) mote_bench::usage_error("grain", "automatic (onetbb_simple has none)");
    return g == 0 ? range(0, n) : range(0, n, g);
  }
  template <class F>
  void loop(std::size_t n, std::size_t g, F&& body) {
    for_range(make_range(n, g), [&body](const range& r) { body(r.begin(), r.end()); });
  }
  template <class T, class F, class C>
  T reduce(std::size_t n, std::size_t g, T identity, F&& body, C&& combine) {
    auto leaf = [&body](const range& r, T acc) { return body(r.begin(), r.end(), std::move(acc)); };
    if constexpr (kSimple) {
      return tbb::parallel_reduce(make_range(n, g), identity, leaf, combine,
                                  tbb::simple_partitioner());
    } else {
      return tbb::parallel_reduce(make_range(n, g), identity, leaf, combine,
                                  tbb::auto_partitioner());
    }
  }
  template <class F>
  void nested(std::size_t rows, std::size_t cols, F&& body) {
    for_range(make_range(rows, 0), [&body, cols](const range& rr) {
      for (std::size_t r = rr.begin(); r != rr.end(); ++r) {
        for_range(make_range(cols, 0),
                  [&body, r](const range& cr) { body(r, cr.begin(), cr.end()); });
      }
    });
  }
  template <class T, class Init>
  tbb_locals<T> locals(Init init) {
    return tbb_locals<T>(std::move(init));
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, o.workers);
  tbb::task_arena arena(static_cast<int>(o.workers));
  mote_bench::extras info;
  info.add("tbb_version", TBB_VERSION_STRING).add("tbb_runtime", TBB_runtime_version());
  info.add("partitioner", kSimple ? "simple_partitioner" : "auto_partitioner");
  tbb_par par{arena};
  return mote_bench::loops::run_suite(o, kSimple ? "onetbb_simple" : "onetbb", par, info);
}
