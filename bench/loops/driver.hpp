// The main() body every loops variant shares: which kernels, what sizes, what
// is checked, what is timed. A variant supplies its backend (bench/backends/,
// or serial_par in kernels.hpp) as `Par` with, besides the loops,
//   template <class Body> void loop_region(Body&& body)
//       runs body (the whole repetition loop) where loops may be started: on a
//       worker (mote), inside the task_arena (oneTBB), or just here (serial,
//       OpenMP, whose every loop is its own parallel region)
//   static constexpr bool has_auto
//       false when the variant has no automatic grain (oneTBB with the
//       simple_partitioner): it runs only the kernels with a grain
//
// Kernels (--kernel NAME; all of them without):
//   update_<N>M_<g>   x[i] = a*x[i] + b over N million doubles, g = g64 | g256 |
//                     g1024 | g4096 (a batch of that many iterations) or auto
//   sum_<N>M_<g>      parallel_reduce of the same doubles (acc += x[i])
//   histogram         10M 32-bit keys into 256 bins by their top byte,
//                     per-thread bins, automatic grain
//   pr_<S>            PageRank (pull, 5 iterations) on a Kronecker graph of
//                     2^S vertices, edge factor 16
//   tc_<S>            ordered triangle counting on the same graph, vertices
//                     renumbered by degree
//   bc_<S>            betweenness centrality (Brandes) from 4 sources
//   nested_<R>x<C>    a loop over R rows, each a loop over C columns, body
//                     x = a*x + b
//   claim             one loop of 2^20 iterations at grain 1 with a near-empty
//                     body: ns per batch (time / 2^20)
//   empty_loop        loops of 2 * workers iterations at grain 1 with the same
//                     body, back to back: us per loop
// The graph kernels' data are made once per process, outside the timing.
// Every process checks its answer against a serial computation of its own
// (closed forms for update, sum, nested, claim and empty_loop).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../common/harness.hpp"
#include "kernels.hpp"

namespace mote_bench::loops {

inline const std::vector<std::string>& default_kernels() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const char* op : {"update", "sum"}) {
      for (const char* size : {"1M", "10M"}) {
        for (const char* g : {"g64", "g256", "g1024", "g4096", "auto"}) {
          v.push_back(std::string(op) + "_" + size + "_" + g);
        }
      }
    }
    for (const char* k :
         {"histogram", "pr_16", "pr_18", "pr_20", "tc_16", "bc_16", "bc_18", "nested_4x100000",
          "nested_64x4096", "nested_1024x256", "claim", "empty_loop"}) {
      v.emplace_back(k);
    }
    return v;
  }();
  return names;
}

[[noreturn]] inline void fail(std::string_view kernel, std::string_view runtime,
                              const std::string& why) {
  std::fprintf(stderr, "bench: %.*s on %.*s: %s\n", static_cast<int>(kernel.size()), kernel.data(),
               static_cast<int>(runtime.size()), runtime.data(), why.c_str());
  std::exit(1);
}

// How one kernel is timed: call() is one timed run and returns its checksum
// (or 0 when the problem checks at the end); every call must return
// `expected` (when it has no value, what the first call returned: the serial
// variant's graph kernels, whose own run is the serial computation);
// finish() checks the state the calls left and returns the record's result;
// per_call converts a call's seconds into the record's unit. `extra` becomes
// the record's extra (the variant's info and the kernel's parameters) once
// finish() has run (which may add to it).
struct timing {
  std::string_view unit = "ms";
  double per_call = 1e3;  // unit per second of one call
};

template <class Par, class Call, class Finish>
void run_timed(const options& o, std::string_view kernel, std::string_view runtime, Par& par,
               timing t, std::optional<std::int64_t> expected, Call&& call, Finish&& finish,
               const extras& extra) {
  record r{"loops", kernel, runtime, o.workers, t.unit, {}, 0, {}};
  std::string why;
  par.loop_region([&] {
    double warm_ms = 0;
    double spent_ms = 0;
    for (int i = 0; i < o.warmup + o.reps; ++i) {
      const bool warm = i < o.warmup;
      if (warm && o.budget_ms > 0 && warm_ms > o.budget_ms / 2) continue;
      auto t0 = clock::now();
      const std::int64_t got = call();
      const double s = seconds_between(t0, clock::now());
      if (!expected) expected = got;
      if (got != *expected) {
        why = "computed " + std::to_string(got) + ", expected " + std::to_string(*expected);
        return;
      }
      if (warm) {
        warm_ms += 1e3 * s;
        continue;
      }
      r.samples.push_back(s * t.per_call);
      spent_ms += 1e3 * s;
      if (o.budget_ms > 0 && spent_ms >= o.budget_ms) break;
    }
  });
  if (why.empty()) r.result = finish(why);
  if (!why.empty()) fail(kernel, runtime, why);
  r.extra = extra;  // after finish(), which may add to it
  emit(r);
}

// ---- update_<N>M_<g>, sum_<N>M_<g>
inline std::size_t parse_millions(const std::string& s, const std::string& name) {
  if (s.size() < 2 || s.back() != 'M') usage_error("--kernel", name.c_str());
  const long m = parse_long(s.substr(0, s.size() - 1).c_str(), "--kernel size");
  if (m < 1 || m > 1000) usage_error("--kernel", name.c_str());
  return static_cast<std::size_t>(m) * 1000000;
}

inline std::size_t parse_grain(const std::string& s, const std::string& name) {
  if (s == "auto") return 0;
  if (s.size() < 2 || s[0] != 'g') usage_error("--kernel", name.c_str());
  const long g = parse_long(s.c_str() + 1, "--kernel grain");
  if (g < 1) usage_error("--kernel", name.c_str());
  return static_cast<std::size_t>(g);
}

template <class Par>
void run_kernel(const options& o, std::string_view runtime, Par& par, const extras& info,
                const std::string& name) {
  const auto cut = name.find('_');
  const std::string family = name.substr(0, cut);
  const std::string rest = cut == std::string::npos ? "" : name.substr(cut + 1);
  extras ex = info;

  if (family == "update" || family == "sum") {
    const auto cut2 = rest.find('_');
    if (cut2 == std::string::npos) usage_error("--kernel", name.c_str());
    const std::size_t n = parse_millions(rest.substr(0, cut2), name);
    const std::size_t grain = parse_grain(rest.substr(cut2 + 1), name);
    if (grain == 0 && !Par::has_auto)
      usage_error("--kernel (this variant needs a grain)", name.c_str());
    ex.add("n", static_cast<std::int64_t>(n)).add("grain", static_cast<std::int64_t>(grain));
    big_vector<double> x(n);
    if (family == "update") {
      for (std::size_t i = 0; i < n; ++i) x[i] = update_x0(i);
      std::int64_t calls = 0;
      run_timed(
          o, name, runtime, par, {}, 0,
          [&] {
            update(par, x.data(), n, grain);
            ++calls;
            return std::int64_t{0};
          },
          [&](std::string& why) {
            // After `calls` flips every element is x0 (even) or 1 - x0 (odd).
            std::int64_t digest = 0;
            for (std::size_t i = 0; i < n; ++i) {
              const double x0 = update_x0(i);
              const double want = calls % 2 == 0 ? x0 : 1.0 - x0;
              if (x[i] != want) {
                why = "x[" + std::to_string(i) + "] = " + std::to_string(x[i]) + " after " +
                      std::to_string(calls) + " calls, expected " + std::to_string(want);
                return std::int64_t{0};
              }
              digest += static_cast<std::int64_t>(x0 * 1048576.0);
            }
            return digest;
          },
          ex);
    } else {
      std::int64_t want = 0;  // the exact sum, times 4
      for (std::size_t i = 0; i < n; ++i) {
        x[i] = sum_value(i);
        want += static_cast<std::int64_t>(i & 1023);
      }
      run_timed(
          o, name, runtime, par, {}, want,
          [&] { return static_cast<std::int64_t>(sum(par, x.data(), n, grain) * 4.0); },
          [&](std::string&) { return want; }, ex);
    }
    return;
  }

  if (!Par::has_auto && family != "claim" && family != "empty") {
    usage_error("--kernel (this variant needs a grain)", name.c_str());
  }

  if (family == "histogram") {
    const std::size_t n = 10000000;
    big_vector<std::uint32_t> keys(n);
    bins want{};
    for (std::size_t i = 0; i < n; ++i) {
      keys[i] = histogram_key(i);
      ++want[keys[i] >> 24];
    }
    digest d;
    for (std::uint64_t c : want) d.add(c);
    ex.add("n", static_cast<std::int64_t>(n)).add("bins", std::int64_t{kBins});
    run_timed(
        o, name, runtime, par, {}, d.value(),
        [&] {
          const bins got = histogram(par, keys.data(), n);
          digest h;
          for (std::uint64_t c : got) h.add(c);
          return h.value();
        },
        [&](std::string&) { return d.value(); }, ex);
    return;
  }

  if (family == "pr" || family == "tc" || family == "bc") {
    const long scale = parse_long(rest.c_str(), "--kernel scale");
    if (scale < 4 || scale > 26) usage_error("--kernel", name.c_str());
    csr_graph g = make_kronecker(static_cast<int>(scale));
    if (family == "tc") g = relabel_by_degree(g, static_cast<int>(scale));
    ex.add("scale", std::int64_t{scale})
        .add("vertices", g.n)
        .add("directed_edges", g.directed_edges());
    // The serial answer, computed here; the serial variant's first timed run is that computation.
    serial_par serial;
    constexpr bool is_serial = std::is_same_v<Par, serial_par>;
    std::optional<std::int64_t> want;
    std::int64_t last = 0;
    auto result = [&](std::string&) { return last; };
    if (family == "pr") {
      constexpr int kIterations = 5;
      pr_state st;
      if (!is_serial) want = pagerank(serial, g, kIterations, st);
      ex.add("iterations", std::int64_t{kIterations});
      run_timed(
          o, name, runtime, par, {}, want, [&] { return last = pagerank(par, g, kIterations, st); },
          result, ex);
    } else if (family == "tc") {
      if (!is_serial) want = triangles(serial, g);
      run_timed(
          o, name, runtime, par, {}, want, [&] { return last = triangles(par, g); }, result, ex);
    } else {
      constexpr int kSources = 4;
      const std::vector<std::int32_t> sources = bc_sources(g, kSources);
      bc_state st;
      if (!is_serial) want = betweenness(serial, g, sources, st);
      ex.add("sources", std::int64_t{kSources});
      run_timed(
          o, name, runtime, par, {}, want, [&] { return last = betweenness(par, g, sources, st); },
          result, ex);
    }
    return;
  }

  if (family == "nested") {
    const auto x_at = rest.find('x');
    if (x_at == std::string::npos) usage_error("--kernel", name.c_str());
    const long rows = parse_long(rest.substr(0, x_at).c_str(), "--kernel rows");
    const long cols = parse_long(rest.substr(x_at + 1).c_str(), "--kernel columns");
    if (rows < 1 || cols < 1 || rows * cols > (1L << 28)) usage_error("--kernel", name.c_str());
    const auto r = static_cast<std::size_t>(rows);
    const auto c = static_cast<std::size_t>(cols);
    big_vector<double> x(r * c);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = update_x0(i);
    std::int64_t calls = 0;
    ex.add("rows", std::int64_t{rows})
        .add("cols", std::int64_t{cols})
        .add("n", static_cast<std::int64_t>(r * c));
    run_timed(
        o, name, runtime, par, {}, 0,
        [&] {
          nested_update(par, x.data(), r, c);
          ++calls;
          return std::int64_t{0};
        },
        [&](std::string& why) {
          std::int64_t digest = 0;
          for (std::size_t i = 0; i < x.size(); ++i) {
            const double x0 = update_x0(i);
            if (x[i] != (calls % 2 == 0 ? x0 : 1.0 - x0)) {
              why = "element " + std::to_string(i) + " wrong after " + std::to_string(calls) +
                    " calls";
              return std::int64_t{0};
            }
            digest += static_cast<std::int64_t>(x0 * 1048576.0);
          }
          return digest;
        },
        ex);
    return;
  }

  if (name == "claim") {
    const auto n = static_cast<std::size_t>(option_value(o, "--batches", 1L << 20));
    const auto want = static_cast<std::int64_t>(tally::expected(n));
    ex.add("n", static_cast<std::int64_t>(n)).add("grain", std::int64_t{1});
    std::uint64_t calls = 0;  // body calls of the last loop: the batches the runtime really made
    std::uint64_t own = 0;    // those run by the thread that started the loop
    tally::take();
    tally::take_calls(&own);
    run_timed(
        o, name, runtime, par, {"ns", 1e9 / static_cast<double>(n)}, want,
        [&] {
          claim_loop(par, n);
          calls = tally::take_calls(&own);
          return static_cast<std::int64_t>(tally::take());
        },
        [&](std::string&) {
          ex.add("batches", static_cast<std::int64_t>(calls));
          ex.add("other_thread_share",
                 calls ? 1.0 - static_cast<double>(own) / static_cast<double>(calls) : 0.0);
          return want;
        },
        ex);
    return;
  }

  if (name == "empty_loop") {
    const auto loops = static_cast<std::size_t>(option_value(o, "--loops", 10000));
    const std::size_t n = 2 * o.workers;
    const std::uint64_t per_loop = tally::expected(n);
    ex.add("loops", static_cast<std::int64_t>(loops))
        .add("iterations", static_cast<std::int64_t>(n));
    std::uint64_t calls = 0;  // body calls of the last repetition's loops
    std::uint64_t own = 0;    // those run by the thread that started the loops
    tally::take();
    tally::take_calls(&own);
    // result: the loops run, once the tally shows each ran all its iterations once.
    run_timed(
        o, name, runtime, par, {"us", 1e6 / static_cast<double>(loops)},
        static_cast<std::int64_t>(loops),
        [&] {
          for (std::size_t i = 0; i < loops; ++i) claim_loop(par, n);
          calls = tally::take_calls(&own);
          const std::uint64_t got = tally::take();
          return got == per_loop * loops ? static_cast<std::int64_t>(loops)
                                         : -static_cast<std::int64_t>(got);
        },
        [&](std::string&) {
          ex.add("batches", static_cast<double>(calls) / static_cast<double>(loops));
          ex.add("other_thread_share",
                 calls ? 1.0 - static_cast<double>(own) / static_cast<double>(calls) : 0.0);
          return static_cast<std::int64_t>(loops);
        },
        ex);
    return;
  }

  usage_error("--kernel", name.c_str());
}

template <class Par>
int run_suite(const options& o, std::string_view runtime, Par& par, const extras& info = {}) {
  if (!o.kernel.empty()) {
    run_kernel(o, runtime, par, info, o.kernel);
    return 0;
  }
  for (const std::string& name : default_kernels()) {
    if (!Par::has_auto && name.find("_g") == std::string::npos && name != "claim" &&
        name != "empty_loop")
      continue;
    run_kernel(o, runtime, par, info, name);
  }
  return 0;
}

}  // namespace mote_bench::loops
