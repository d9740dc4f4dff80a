// The OpenMP backend: o.workers threads (num_threads); tasks and taskwait for
// fork-join and pairs, worksharing loops for loops. Built by g++ -fopenmp (GNU
// OpenMP, libgomp) and by clang++ -fopenmp=libomp (LLVM OpenMP); the runtime
// name (MOTE_BENCH_RUNTIME) says which. Named build option
// (bench/CMakeLists.txt):
//   MOTE_BENCH_WITH_DYNAMIC_SCHEDULE=1  loops with schedule(dynamic, g);
//       automatic: schedule(guided). Otherwise schedule(static, g); automatic:
//       schedule(static).
//
// Loops: every loop is its own `#pragma omp parallel` region of N threads with
// one `omp for` inside. With a grain g the `omp for` runs over the n/g batches
// with chunk 1 (schedule(static, 1) / (dynamic, 1)) and calls the body once
// per batch, as the other runtimes do: the same iterations go to the same
// threads, with the same claims, as schedule(static, g) / (dynamic, g) over
// the iterations. schedule(static) is one block per thread, the body called
// once for it. schedule(guided) hands out chunks the program cannot see, so
// there the body is called once per iteration (body(i, i + 1), inlined).
// Reductions keep one accumulator per thread, combined in thread order after
// the loop (what reduction(+:acc) does, for any type). Per-thread state is an
// array indexed by omp_get_thread_num(), read once per thread per loop. Nested
// loops are one `omp for` over the rows, each row's columns in one call:
// nested parallel regions would oversubscribe the cores, and collapse(2) would
// make every element an iteration of its own (no vectorized rows); with 2
// threads every shape has rows enough.
//
// Data flow: one persistent parallel region whose single thread spawns every
// task (the others run them). The accesses map to depend(in:) /
// depend(inout:) / depend(mutexinoutset:) on the first address, and dep::sum
// to in_reduction(+:) under a taskgroup task_reduction(+:) (OpenMP 5.0): that
// taskgroup waits for its tasks at its end, so heat's per-step reductions put
// a wait after every time step, where the other runtimes let the next step
// start on the blocks that are ready. OpenMP needs every depend clause written
// out, so flow::spawn below has one pragma per access pattern the kernels use.
//
// Streams: one `#pragma omp parallel` region of N threads per run, one thread
// (single) makes, item after item, one task per stage. Each task has
// depend(inout) on its item's place (so an item's stages run in order, and
// place i % in_flight is reused only when item i - in_flight is through: at
// most in_flight items at once); a serial stage's task also has depend(inout)
// on the stage's own token, which chains that stage's tasks in the order they
// were made (in order, one at a time); a parallel stage's task has no other
// dependence. The template adds its backward dependence: b of item i has
// depend(out) on feedback place i, a of item i + d depend(in) on it.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/omp_info.hpp"
#include "backend.hpp"
#include "dataflow_api.hpp"
#include "streams_api.hpp"

#ifndef MOTE_BENCH_WITH_DYNAMIC_SCHEDULE
#  define MOTE_BENCH_WITH_DYNAMIC_SCHEDULE 0
#endif

namespace mote_bench {
// Internal linkage, as in a single source file: the kernels instantiated on
// the backend stay local to the executable, and inline as they would there.
namespace {

namespace omp_backend_detail {

constexpr bool kDynamic = MOTE_BENCH_WITH_DYNAMIC_SCHEDULE != 0;

// This thread's number in the current parallel region, set at its start.
thread_local int this_thread = 0;

template <class T>
class locals {
 public:
  template <class Init>
  locals(int threads, Init init)
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

namespace dep = dataflow::dep;

#define DF_PRAGMA(...) _Pragma(#__VA_ARGS__)
// One deferred task running `call`, firstprivate copy of the callable fn.
#define DF_TASK(call, ...)                                  \
  {                                                         \
    DF_PRAGMA(omp task firstprivate(fn) __VA_ARGS__)        \
    call;                                                   \
  }

// The first address of each access, by kind, in order.
struct addresses {
  char* in[4];
  char* io[2];
  char* cm[1];
  double* sum[1];
  int nin = 0, nio = 0, ncm = 0, nsum = 0;

  template <class T>
  void add(const dep::in_t<T>& a) {
    in[nin++] = reinterpret_cast<char*>(const_cast<std::remove_const_t<T>*>(a.p));
  }
  template <class T>
  void add(const dep::inout_t<T>& a) {
    io[nio++] = reinterpret_cast<char*>(a.p);
  }
  template <class T>
  void add(const dep::commutative_t<T>& a) {
    cm[ncm++] = reinterpret_cast<char*>(a.p);
  }
  void add(const dep::sum_t& a) { sum[nsum++] = a.target; }
};

template <class... A>
struct pattern {
  static constexpr int in = (0 + ... + dep::kind<A>::in);
  static constexpr int inout = (0 + ... + dep::kind<A>::inout);
  static constexpr int commutative = (0 + ... + dep::kind<A>::commutative);
  static constexpr int sum = (0 + ... + dep::kind<A>::sum);
};

// A data-flow kernel's tasks as OpenMP tasks with depend clauses.
struct flow {
  template <class F, class... A>
  void spawn(F&& f, const A&... a) {
    using P = pattern<A...>;
    static_assert(P::in <= 4 && P::inout <= 2 && P::commutative <= 1 && P::sum <= 1);
    addresses d;
    (d.add(a), ...);
    std::decay_t<F> fn(std::forward<F>(f));
    [[maybe_unused]] char** in = d.in;
    [[maybe_unused]] char** io = d.io;
    [[maybe_unused]] char** cm = d.cm;
    if constexpr (P::sum == 0 && P::commutative == 0) {
      if constexpr (P::inout == 1 && P::in == 0) {
        DF_TASK(fn(), depend(inout : io[0][0]))
      } else if constexpr (P::inout == 1 && P::in == 1) {
        DF_TASK(fn(), depend(inout : io[0][0]) depend(in : in[0][0]))
      } else if constexpr (P::inout == 1 && P::in == 2) {
        DF_TASK(fn(), depend(inout : io[0][0]) depend(in : in[0][0], in[1][0]))
      } else if constexpr (P::inout == 1 && P::in == 3) {
        DF_TASK(fn(), depend(inout : io[0][0]) depend(in : in[0][0], in[1][0], in[2][0]))
      } else if constexpr (P::inout == 1 && P::in == 4) {
        DF_TASK(fn(), depend(inout : io[0][0]) depend(in : in[0][0], in[1][0], in[2][0], in[3][0]))
      } else if constexpr (P::inout == 2 && P::in == 0) {
        DF_TASK(fn(), depend(inout : io[0][0], io[1][0]))
      } else {
        static_assert(sizeof(F) == 0, "access pattern not written out");
      }
    } else if constexpr (P::sum == 0 && P::commutative == 1 && P::inout == 0) {
      if constexpr (P::in == 1) {
        DF_TASK(fn(), depend(mutexinoutset : cm[0][0]) depend(in : in[0][0]))
      } else if constexpr (P::in == 2) {
        DF_TASK(fn(), depend(mutexinoutset : cm[0][0]) depend(in : in[0][0], in[1][0]))
      } else {
        static_assert(sizeof(F) == 0, "access pattern not written out");
      }
    } else if constexpr (P::sum == 1 && P::commutative == 0) {
      double& r = *d.sum[0];
      if constexpr (P::inout == 0 && P::in == 2) {
        DF_TASK(fn(r), depend(in : in[0][0], in[1][0]) in_reduction(+ : r))
      } else if constexpr (P::inout == 1 && P::in == 0) {
        DF_TASK(fn(r), depend(inout : io[0][0]) in_reduction(+ : r))
      } else if constexpr (P::inout == 1 && P::in == 1) {
        DF_TASK(fn(r), depend(inout : io[0][0]) depend(in : in[0][0]) in_reduction(+ : r))
      } else if constexpr (P::inout == 1 && P::in == 2) {
        DF_TASK(fn(r), depend(inout : io[0][0]) depend(in : in[0][0], in[1][0]) in_reduction(+ : r))
      } else if constexpr (P::inout == 1 && P::in == 3) {
        DF_TASK(fn(r), depend(inout : io[0][0]) depend(in : in[0][0], in[1][0], in[2][0]) in_reduction(+ : r))
      } else if constexpr (P::inout == 1 && P::in == 4) {
        DF_TASK(fn(r),
                depend(inout : io[0][0]) depend(in : in[0][0], in[1][0], in[2][0], in[3][0]) in_reduction(+ : r))
      } else {
        static_assert(sizeof(F) == 0, "access pattern not written out");
      }
    } else {
      static_assert(sizeof(F) == 0, "access pattern not written out");
    }
  }

  template <class Body>
  void reduction_scope(double& target, Body&& body) {
    double& r = target;
#pragma omp taskgroup task_reduction(+ : r)
    { body(); }
  }

  void wait() {
#pragma omp taskwait
  }
};

#undef DF_TASK
#undef DF_PRAGMA

// A kernel's program: its tasks spawned again for every run.
template <class P>
struct flow_program {
  P& p;
  void execute() {
    flow w;
    p.graph(w);
    w.wait();
  }
};

// Streams: dependence objects, one byte each, on lines of their own.
struct alignas(64) stream_dep {
  char c;
};

// One stage of item i as a task.
template <class St>
void stage_task(St* s, std::size_t i, stream_dep* token, stream_dep* place) {
  if (s->m == streams::mode::parallel) {
#pragma omp task firstprivate(s, i) depend(inout : place->c)
    s->f(i);
  } else {
#pragma omp task firstprivate(s, i) depend(inout : place->c) depend(inout : token->c)
    s->f(i);
  }
}

}  // namespace omp_backend_detail

class backend {
 public:
  static constexpr bool concurrent = true;
  static constexpr bool runs_on_caller = false;

  explicit backend(options& o) : threads_(static_cast<int>(o.workers)), info_(omp_info()) {
    info_.add("schedule", omp_backend_detail::kDynamic ? "dynamic, g / guided" : "static, g / static");
  }
  std::string_view name() const { return MOTE_BENCH_STRINGIZE(MOTE_BENCH_RUNTIME); }
  const extras& info() const { return info_; }

  // ---- fork-join: the kernel runs in the single thread of one parallel region
  template <class F>
  auto run(F&& f) {
    decltype(f()) result{};
    const int threads = threads_;
#pragma omp parallel num_threads(threads) shared(result, f)
#pragma omp single
    result = f();
    return result;
  }
  template <class F, class G>
  static void fork2(F&& f, G&& g) {
#pragma omp task shared(g)
    g();
    f();
#pragma omp taskwait
  }
  template <class F>
  static void spawn_each(int n, F&& f) {
    for (int i = 0; i < n; ++i) {
#pragma omp task shared(f) firstprivate(i)
      f(i);
    }
#pragma omp taskwait
  }

  // ---- runtime costs
  long micro_iters = 1'000'000;
  double spawn_loop(long iters) {
    double seconds = 0;
#pragma omp parallel num_threads(threads_) shared(seconds)
#pragma omp single
    {
      auto t0 = clock::now();
      for (long i = 0; i < iters; ++i) {
#pragma omp task
        empty_task_body();
        empty_task_body();
#pragma omp taskwait
      }
      seconds = seconds_between(t0, clock::now());
    }
    return seconds;
  }
  template <int GroupSize>
  double group_loop(long tasks) {
    double seconds = 0;
#pragma omp parallel num_threads(threads_) shared(seconds)
#pragma omp single
    {
      auto t0 = clock::now();
      for (long done = 0; done < tasks; done += GroupSize) {
        for (int i = 0; i < GroupSize; ++i) {
#pragma omp task
          empty_task_body();
        }
#pragma omp taskwait
      }
      seconds = seconds_between(t0, clock::now());
    }
    return seconds;
  }
  // From just before the parallel construct to the first statement of a
  // thread other than the master.
  double wake_once() {
    clock::time_point started;
    auto submitted = clock::now();
#pragma omp parallel num_threads(threads_) shared(started)
    {
      if (omp_get_thread_num() == 1) started = clock::now();
    }
    return seconds_between(submitted, started);
  }
  template <class Work>
  void warm(Work work) {
    std::int64_t sum = 0;
#pragma omp parallel num_threads(threads_) reduction(+ : sum)
    sum += work();
    do_not_optimize(sum);
  }

  // ---- two tasks at a time: one persistent parallel region around the pairs
  template <class Body>
  void pair_region(Body&& body) {
    const int threads = threads_;
#pragma omp parallel num_threads(threads) shared(body)
#pragma omp single
    body();
  }
  template <class F, class G>
  void pair(F& f, G& g) {
#pragma omp task shared(g)
    g();
    f();
#pragma omp taskwait
  }

  // ---- loops
  static constexpr bool has_auto = true;
  template <class Body>
  void loop_region(Body&& body) {
    body();
  }
  template <class F>
  void loop(std::size_t n, std::size_t g, F&& body) {
    const int threads = threads_;
#pragma omp parallel num_threads(threads)
    {
      omp_backend_detail::this_thread = omp_get_thread_num();
      omp_backend_detail::share(n, g, body);
    }
  }
  template <class T, class F, class C>
  T reduce(std::size_t n, std::size_t g, T identity, F&& body, C&& combine) {
    const int threads = threads_;
    std::vector<omp_backend_detail::partial<T>> parts(static_cast<std::size_t>(threads),
                                                      omp_backend_detail::partial<T>{identity});
#pragma omp parallel num_threads(threads)
    {
      omp_backend_detail::this_thread = omp_get_thread_num();
      T acc = identity;
      omp_backend_detail::share(n, g, [&](std::size_t b, std::size_t e) { acc = body(b, e, std::move(acc)); });
      parts[static_cast<std::size_t>(omp_backend_detail::this_thread)].value = std::move(acc);
    }
    T result = std::move(identity);
    for (auto& p : parts) result = combine(std::move(result), std::move(p.value));
    return result;
  }
  template <class F>
  void nested(std::size_t rows, std::size_t cols, F&& body) {
    const int threads = threads_;
#pragma omp parallel num_threads(threads)
    {
      omp_backend_detail::this_thread = omp_get_thread_num();
      omp_backend_detail::share(rows, 0, [&](std::size_t b, std::size_t e) {
        for (std::size_t r = b; r < e; ++r) body(r, std::size_t{0}, cols);
      });
    }
  }
  template <class T, class Init>
  omp_backend_detail::locals<T> locals(Init init) {
    return omp_backend_detail::locals<T>(threads_, std::move(init));
  }

  // ---- data flow: the spawning thread is the single thread of one region
  template <class Body>
  void flow_region(Body&& body) {
    const int threads = threads_;
#pragma omp parallel num_threads(threads) shared(body)
#pragma omp single
    body();
  }
  template <class P>
  omp_backend_detail::flow_program<P> flow_prepare(P& p) {
    return {p};
  }

  // ---- streams: tasks with dependences, made by the single thread of one region per run
  template <class... S>
  void pipeline(std::size_t items, std::size_t in_flight, S&... s) {
    using omp_backend_detail::stream_dep;
    std::vector<stream_dep> tokens(sizeof...(S));
    std::vector<stream_dep> places(in_flight);
    const int threads = threads_;
#pragma omp parallel num_threads(threads)
#pragma omp single
    {
      for (std::size_t i = 0; i < items; ++i) {
        stream_dep* place = &places[i % in_flight];
        std::size_t j = 0;
        (omp_backend_detail::stage_task(&s, i, &tokens[j++], place), ...);
      }
    }
  }
  template <class FS, class FA, class FB, class FC>
  void feedback(std::size_t items, std::size_t d, std::size_t in_flight, FS& s, FA& a, FB& b, FC& c) {
    using omp_backend_detail::stream_dep;
    using streams::feedback_value;
    using streams::kRing;
    std::vector<feedback_value> fb(kRing);
    std::vector<stream_dep> fbdep(kRing);
    std::vector<stream_dep> places(in_flight);
    stream_dep tok[4];
    const int threads = threads_;
#pragma omp parallel num_threads(threads)
#pragma omp single
    {
      for (std::size_t i = 0; i < items; ++i) {
        stream_dep* place = &places[i % in_flight];
#pragma omp task firstprivate(i) depend(inout : place->c) depend(inout : tok[0].c)
        s(i);
        if (i >= d) {
          stream_dep* in = &fbdep[(i - d) % kRing];
#pragma omp task firstprivate(i) depend(inout : place->c) depend(inout : tok[1].c) depend(in : in->c)
          a(i, &fb[(i - d) % kRing]);
        } else {
#pragma omp task firstprivate(i) depend(inout : place->c) depend(inout : tok[1].c)
          a(i, nullptr);
        }
        stream_dep* out = &fbdep[i % kRing];
#pragma omp task firstprivate(i) depend(inout : place->c) depend(inout : tok[2].c) depend(out : out->c)
        fb[i % kRing] = b(i);
#pragma omp task firstprivate(i) depend(inout : place->c) depend(inout : tok[3].c)
        c(i);
      }
    }
  }

 private:
  int threads_;
  extras info_;
};

}  // namespace
}  // namespace mote_bench
