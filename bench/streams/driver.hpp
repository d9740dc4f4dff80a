// The main() body every streams application executable shares: which
// kernels, what sizes, what is checked, what is timed. It runs on the backend
// CMake names (bench/backends/), whose streams part is `par`: pipeline() and
// feedback() (bench/backends/streams_api.hpp), and optionally
// streams_note(extras&), which adds what the backend saw while running to
// each record.
//
// Kernels (--kernel NAME; all of them without):
//   fmradio_<B>        FM radio on 3 x 2^18 output samples in blocks of B output
//                      samples (4B input samples): B = 64 (fine, a few us per
//                      item) and 1024 (coarse)
//   trellis_<F>        Viterbi decoding of 2^20 information bits in frames of
//                      F bits (K = 7, rate 1/2), each frame's trellis split
//                      into 4 column ranges: F = 256 (fine) and 4096 (coarse)
//   template_d<d>_<W>  the pipeline template on 2^21 words in blocks of W
//                      words, feedback distance d: W = 128 (fine) and 4096
//                      (coarse), d = 1 and 4
// Flags: --in-flight N (items in the pipeline at once, default 16, at most
// 32); --flush 0|1 (the mote variants' template: flush the channels after
// each push, default 1).
//
// Every process first runs the kernel with serial_par (outside the
// timing; the serial variant's own runs are that computation) and checks
// that every timed run's checksum equals it.
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

namespace mote_bench::streams {

inline const std::vector<std::string>& default_kernels() {
  static const std::vector<std::string> names = {
      "fmradio_64",  "fmradio_1024",   "trellis_256",    "trellis_4096",
      "template_d1_128", "template_d4_128", "template_d1_4096", "template_d4_4096"};
  return names;
}

[[noreturn]] inline void fail(std::string_view kernel, std::string_view runtime, const std::string& why) {
  std::fprintf(stderr, "bench: %.*s on %.*s: %s\n", static_cast<int>(kernel.size()), kernel.data(),
               static_cast<int>(runtime.size()), runtime.data(), why.c_str());
  std::exit(1);
}

constexpr std::size_t kFmOutputs = std::size_t{3} << 18;
constexpr std::size_t kTrellisBits = std::size_t{1} << 20;
constexpr std::size_t kTemplateWords = std::size_t{1} << 21;

// Times kernel k on par: warm-up and timed runs (ms per whole stream), each
// checked against the serial checksum.
template <class Par, class Kernel>
void time_stream(const options& o, const std::string& name, std::string_view runtime, Par& par, Kernel& k,
                 std::size_t in_flight, extras ex) {
  constexpr bool is_serial = !Par::concurrent;
  std::optional<std::int64_t> want;
  double serial_ms = 0;
  if (!is_serial) {
    serial_par sp;
    const auto t0 = clock::now();
    want = k.run(sp, in_flight);
    serial_ms = 1e3 * seconds_between(t0, clock::now());
  }
  record r{"streams", name, runtime, o.workers, "ms", {}, 0, {}};
  double warm_ms = 0;
  double spent_ms = 0;
  for (int i = 0; i < o.warmup + o.reps; ++i) {
    const bool warm = i < o.warmup;
    if (warm && o.budget_ms > 0 && warm_ms > o.budget_ms / 2) continue;
    const auto t0 = clock::now();
    const std::int64_t got = k.run(par, in_flight);
    const double s = seconds_between(t0, clock::now());
    if (!want) want = got;
    if (got != *want) {
      fail(name, runtime, "checksum " + std::to_string(got) + ", serial " + std::to_string(*want));
    }
    if (warm) {
      warm_ms += 1e3 * s;
      continue;
    }
    r.samples.push_back(1e3 * s);
    spent_ms += 1e3 * s;
    if (o.budget_ms > 0 && spent_ms >= o.budget_ms) break;
  }
  r.result = *want;
  ex.add("items", static_cast<std::int64_t>(k.items()))
      .add("item_size", static_cast<std::int64_t>(k.block()))
      .add("stages", std::int64_t{Kernel::stages})
      .add("in_flight", static_cast<std::int64_t>(in_flight));
  if (!is_serial) ex.add("serial_check_ms", serial_ms);
  if constexpr (requires { par.streams_note(ex); }) par.streams_note(ex);  // what the backend saw while running
  r.extra = ex;
  emit(r);
}

inline std::size_t parse_size(const std::string& s, const std::string& name) {
  const long v = parse_long(s.c_str(), "--kernel size");
  if (v < 1 || v > (1L << 20)) usage_error("--kernel", name.c_str());
  return static_cast<std::size_t>(v);
}

template <class Par>
void run_kernel(const options& o, std::string_view runtime, Par& par, const extras& info, const std::string& name) {
  const auto cut = name.find('_');
  if (cut == std::string::npos) usage_error("--kernel", name.c_str());
  const std::string family = name.substr(0, cut);
  const std::string rest = name.substr(cut + 1);
  const long in_flight_opt = option_value(o, "--in-flight", 16);
  if (in_flight_opt < 1 || in_flight_opt > static_cast<long>(kMaxInFlight)) usage_error("--in-flight", "");
  const auto in_flight = static_cast<std::size_t>(in_flight_opt);
  extras ex = info;

  if (family == "fmradio") {
    const std::size_t b = parse_size(rest, name);
    if (kFmOutputs % b != 0) usage_error("--kernel", name.c_str());
    fmradio k(b, kFmOutputs);
    ex.add("bands", static_cast<std::int64_t>(fmradio::kBands)).add("taps", static_cast<std::int64_t>(fmradio::kTaps));
    time_stream(o, name, runtime, par, k, in_flight, ex);
    return;
  }
  if (family == "trellis") {
    const std::size_t f = parse_size(rest, name);
    if (kTrellisBits % f != 0) usage_error("--kernel", name.c_str());
    trellis k(f, kTrellisBits);
    time_stream(o, name, runtime, par, k, in_flight, ex);
    return;
  }
  if (family == "template") {
    const auto cut2 = rest.find('_');
    if (rest.empty() || rest[0] != 'd' || cut2 == std::string::npos) usage_error("--kernel", name.c_str());
    const std::size_t d = parse_size(rest.substr(1, cut2 - 1), name);
    const std::size_t w = parse_size(rest.substr(cut2 + 1), name);
    if (d > kMaxInFlight || kTemplateWords % w != 0) usage_error("--kernel", name.c_str());
    pipeline_template k(w, kTemplateWords, d);
    ex.add("distance", static_cast<std::int64_t>(d));
    time_stream(o, name, runtime, par, k, in_flight, ex);
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
  for (const std::string& name : default_kernels()) run_kernel(o, runtime, par, info, name);
  return 0;
}

}  // namespace mote_bench::streams
