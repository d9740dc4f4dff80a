// The loop kernels on OpenMP worksharing loops: every loop is its own
// `#pragma omp parallel` region of N threads with one `omp for` inside.
// Built four times: g++ -fopenmp (GNU OpenMP) and clang++ -fopenmp=libomp
// (LLVM OpenMP), each with
//   MOTE_BENCH_LOOPS_DYNAMIC=0   schedule(static, g); automatic: schedule(static)
//   MOTE_BENCH_LOOPS_DYNAMIC=1   schedule(dynamic, g); automatic: schedule(guided)
// With a grain g the `omp for` runs over the n/g batches with chunk 1
// (schedule(static, 1) / (dynamic, 1)) and calls the body once per batch, as
// the other runtimes do: the same iterations go to the same threads, with the
// same claims, as schedule(static, g) / (dynamic, g) over the iterations.
// schedule(static) is one block per thread, the body called once for it.
// schedule(guided) hands out chunks the program cannot see, so there the body
// is called once per iteration (body(i, i + 1), inlined).
// Reductions keep one accumulator per thread, combined in thread order after
// the loop (what reduction(+:acc) does, for any type). Per-thread state is an
// array indexed by omp_get_thread_num(), read once per thread per loop. Nested
// loops are one `omp for` over the rows, each row's columns in one call:
// nested parallel regions would oversubscribe the cores, and collapse(2) would
// make every element an iteration of its own (no vectorized rows); with 2
// threads every shape has rows enough.
#include <omp.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

#include "../common/omp_info.hpp"
#include "driver.hpp"

#ifndef MOTE_BENCH_OMP_NAME
#define MOTE_BENCH_OMP_NAME "openmp"
#endif
#ifndef MOTE_BENCH_LOOPS_DYNAMIC
#define MOTE_BENCH_LOOPS_DYNAMIC 0
#endif

namespace {

constexpr bool kDynamic = MOTE_BENCH_LOOPS_DYNAMIC != 0;

// This thread's number in the current parallel region, set at its start.
thread_local int this_thread = 0;

template <class T>
class omp_locals {
 public:
  template <class Init>
  omp_locals(int threads, Init init)
      : slots_(static_cast<std::size_t>(threads)), make_([init]() mutable { return T(init()); }) {}
  // Inline and short: under schedule(guided) it runs once per iteration.
  T& local() {
    slot& s = slots_[static_cast<std::size_t>(this_thread)];
    if (s.value) [[likely]]
      return *s.value;
    return make(s);
  }
  template <class F>
  void for_each(F&& f) {
    for (slot& s : slots_) {
      if (s.value) f(*s.value);
    }
  }

 private:
  struct alignas(128) slot {
    std::optional<T> value;
  };
  [[gnu::noinline]] T& make(slot& s) { return s.value.emplace(make_()); }
  std::vector<slot> slots_;
  std::function<T()> make_;
};

template <class T>
struct alignas(128) partial {
  T value;
};

// The worksharing loop over [0, n), inside a parallel region: f(b, e) for
// each batch this thread gets. No barrier at its end (the region's has one).
template <class F>
void share(std::size_t n, std::size_t g, F&& f) {
  if (g == 0) {
    if constexpr (kDynamic) {
#pragma omp for schedule(guided) nowait
      for (std::size_t i = 0; i < n; ++i) f(i, i + 1);
    } else {
      const auto t = static_cast<std::size_t>(omp_get_num_threads());
#pragma omp for schedule(static) nowait
      for (std::size_t k = 0; k < t; ++k) {
        if (n * k / t < n * (k + 1) / t) f(n * k / t, n * (k + 1) / t);
      }
    }
  } else {
    const std::size_t batches = n / g + (n % g != 0 ? 1 : 0);
    if constexpr (kDynamic) {
#pragma omp for schedule(dynamic, 1) nowait
      for (std::size_t c = 0; c < batches; ++c) f(c * g, std::min(n, c * g + g));
    } else {
#pragma omp for schedule(static, 1) nowait
      for (std::size_t c = 0; c < batches; ++c) f(c * g, std::min(n, c * g + g));
    }
  }
}

struct omp_par {
  static constexpr bool concurrent = true;
  static constexpr bool has_auto = true;
  int threads;

  template <class Body>
  void region(Body&& body) {
    body();
  }

  template <class F>
  void loop(std::size_t n, std::size_t g, F&& body) {
#pragma omp parallel num_threads(threads)
    {
      this_thread = omp_get_thread_num();
      share(n, g, body);
    }
  }

  template <class T, class F, class C>
  T reduce(std::size_t n, std::size_t g, T identity, F&& body, C&& combine) {
    std::vector<partial<T>> parts(static_cast<std::size_t>(threads), partial<T>{identity});
#pragma omp parallel num_threads(threads)
    {
      this_thread = omp_get_thread_num();
      T acc = identity;
      share(n, g, [&](std::size_t b, std::size_t e) { acc = body(b, e, std::move(acc)); });
      parts[static_cast<std::size_t>(this_thread)].value = std::move(acc);
    }
    T result = std::move(identity);
    for (auto& p : parts) result = combine(std::move(result), std::move(p.value));
    return result;
  }

  template <class F>
  void nested(std::size_t rows, std::size_t cols, F&& body) {
#pragma omp parallel num_threads(threads)
    {
      this_thread = omp_get_thread_num();
      share(rows, 0, [&](std::size_t b, std::size_t e) {
        for (std::size_t r = b; r < e; ++r) body(r, std::size_t{0}, cols);
      });
    }
  }

  template <class T, class Init>
  omp_locals<T> locals(Init init) {
    return omp_locals<T>(threads, std::move(init));
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  omp_par par{static_cast<int>(o.workers)};
  mote_bench::extras info = mote_bench::omp_info();
  info.add("schedule", kDynamic ? "dynamic, g / guided" : "static, g / static");
  const char* name = kDynamic ? MOTE_BENCH_OMP_NAME "_dyn" : MOTE_BENCH_OMP_NAME;
  return mote_bench::loops::run_suite(o, name, par, info);
}
