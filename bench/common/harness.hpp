// The one benchmark harness every suite and every runtime shares.
//
// A benchmark executable measures one runtime (mote, oneTBB, GNU OpenMP, ...)
// and prints one JSON object per kernel on its own line (JSON Lines) to
// stdout:
//
//   {"suite":"fork_join","kernel":"fib","runtime":"mote","workers":2,
//    "unit":"ms","samples":[3.1,3.0],"result":2178309,"extra":{...}}
//
// tools/report.py runs the executables round by round, gathers the lines and
// draws the tables and plots; nothing else parses them. Anything that is not a
// record (diagnostics, errors) goes to stderr.
//
// Command line understood by every executable (parse_options):
//   --workers N     threads the runtime may use (default 1)
//   --reps R        timed repetitions (default 10)
//   --warmup W      untimed repetitions first (default 1)
//   --budget-ms B   stop repeating once the timed repetitions took B ms
//                   (at least one is always taken; default: no limit)
//   --kernel NAME   run only this kernel (default: every kernel)
//   --quick         smaller problem sizes where a kernel has them
// Suites may read more flags with option_value().
#pragma once

#include <pthread.h>
#include <sched.h>

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mote_bench {

struct options {
  unsigned workers = 1;
  int reps = 10;
  int warmup = 1;
  double budget_ms = 0;  // 0: no limit
  std::string kernel;    // empty: all
  bool quick = false;
  int argc = 0;
  char** argv = nullptr;

  bool wants(std::string_view name) const { return kernel.empty() || kernel == name; }
};

[[noreturn]] inline void usage_error(const char* what, const char* value) {
  std::fprintf(stderr, "bench: bad %s '%s'\n", what, value != nullptr ? value : "(missing)");
  std::exit(2);
}

inline long parse_long(const char* text, const char* what) {
  if (text == nullptr || *text == '\0') usage_error(what, text);
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*end != '\0') usage_error(what, text);
  return v;
}

inline options parse_options(int argc, char** argv) {
  options o;
  o.argc = argc;
  o.argv = argv;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--workers") {
      long v = parse_long(next, "--workers");
      if (v < 1) usage_error("--workers", next);
      o.workers = static_cast<unsigned>(v);
      ++i;
    } else if (a == "--reps") {
      long v = parse_long(next, "--reps");
      if (v < 1) usage_error("--reps", next);
      o.reps = static_cast<int>(v);
      ++i;
    } else if (a == "--warmup") {
      long v = parse_long(next, "--warmup");
      if (v < 0) usage_error("--warmup", next);
      o.warmup = static_cast<int>(v);
      ++i;
    } else if (a == "--budget-ms") {
      o.budget_ms = static_cast<double>(parse_long(next, "--budget-ms"));
      ++i;
    } else if (a == "--kernel") {
      if (next == nullptr) usage_error("--kernel", next);
      o.kernel = next;
      ++i;
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a.rfind("--", 0) == 0 && next != nullptr && std::strncmp(next, "--", 2) != 0) {
      ++i;  // a suite-specific flag with a value; read it with option_value()
    }
  }
  return o;
}

// The value of a suite-specific flag such as "--iters", or `fallback`.
inline long option_value(const options& o, std::string_view flag, long fallback) {
  for (int i = 1; i + 1 < o.argc; ++i) {
    if (flag == o.argv[i]) return parse_long(o.argv[i + 1], o.argv[i]);
  }
  return fallback;
}

using clock = std::chrono::steady_clock;

inline double seconds_between(clock::time_point a, clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Extra key/value pairs of a record ("extra":{...}), already JSON-encoded.
class extras {
 public:
  extras& add(std::string_view key, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return raw(key, buf);
  }
  extras& add(std::string_view key, std::int64_t v) { return raw(key, std::to_string(v)); }
  extras& add(std::string_view key, std::string_view v) { return raw(key, quote(v)); }
  const std::string& json() const { return body_; }
  bool empty() const { return body_.empty(); }

  static std::string quote(std::string_view s) {
    std::string out = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += c;
      }
    }
    return out + "\"";
  }

 private:
  extras& raw(std::string_view key, std::string_view json_value) {
    if (!body_.empty()) body_ += ',';
    body_ += quote(key);
    body_ += ':';
    body_ += json_value;
    return *this;
  }
  std::string body_;
};

struct record {
  std::string_view suite, kernel, runtime;
  unsigned workers = 1;
  std::string_view unit;
  std::vector<double> samples;
  std::int64_t result = 0;  // a checksum of the computed answer
  extras extra;
};

// Prints one record as one line and flushes, so a crash later loses nothing.
inline void emit(const record& r) {
  std::string line = "{\"suite\":" + extras::quote(r.suite) + ",\"kernel\":" + extras::quote(r.kernel) +
                     ",\"runtime\":" + extras::quote(r.runtime) +
                     ",\"workers\":" + std::to_string(r.workers) + ",\"unit\":" + extras::quote(r.unit) +
                     ",\"samples\":[";
  for (std::size_t i = 0; i < r.samples.size(); ++i) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%.9g", i == 0 ? "" : ",", r.samples[i]);
    line += buf;
  }
  line += "],\"result\":" + std::to_string(r.result);
  if (!r.extra.empty()) line += ",\"extra\":{" + r.extra.json() + "}";
  line += "}\n";
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
}

// Stops the program with a nonzero status when a kernel computed the wrong
// answer: a wrong answer makes every time meaningless.
inline void check_result(std::string_view kernel, std::string_view runtime, std::int64_t got,
                         std::int64_t expected) {
  if (got == expected) return;
  std::fprintf(stderr, "bench: %.*s on %.*s computed %" PRId64 ", expected %" PRId64 "\n",
               static_cast<int>(kernel.size()), kernel.data(), static_cast<int>(runtime.size()),
               runtime.data(), got, expected);
  std::exit(1);
}

// Times `body` (which returns the checksum of its answer): o.warmup untimed
// calls, then up to o.reps timed ones, stopping early once o.budget_ms is
// spent. Each sample is the wall time of one call in `unit_scale` units per
// second (1e3: milliseconds). Every call's checksum must equal `expected`.
template <class Body>
record time_kernel(const options& o, std::string_view suite, std::string_view kernel,
                   std::string_view runtime, std::string_view unit, double unit_scale,
                   std::int64_t expected, Body&& body) {
  record r{suite, kernel, runtime, o.workers, unit, {}, 0, {}};
  double warm_spent_ms = 0;
  for (int i = 0; i < o.warmup; ++i) {
    auto t0 = clock::now();
    check_result(kernel, runtime, body(), expected);
    warm_spent_ms += 1e3 * seconds_between(t0, clock::now());
    // A slow kernel needs no second warm-up; its first call warmed everything.
    if (o.budget_ms > 0 && warm_spent_ms > o.budget_ms / 2) break;
  }
  double spent_ms = 0;
  for (int i = 0; i < o.reps; ++i) {
    auto t0 = clock::now();
    std::int64_t got = body();
    auto t1 = clock::now();
    check_result(kernel, runtime, got, expected);
    double s = seconds_between(t0, t1);
    r.samples.push_back(s * unit_scale);
    r.result = got;
    spent_ms += 1e3 * s;
    if (o.budget_ms > 0 && spent_ms >= o.budget_ms) break;
  }
  return r;
}

// The body of an "empty" task. It does nothing, but the compiler may not
// delete it, and with it the task: g++ removes an OpenMP task whose body is
// `{}` altogether, leaving only the taskwait.
// Pins the calling thread to one CPU; false when the system refuses (the
// tiny suite's round trip, the streams suite's queue threads and pipelines).
inline bool pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

inline void empty_task_body() { asm volatile(""); }

// Keeps the compiler from deleting a computation whose result is unused.
template <class T>
inline void do_not_optimize(T const& value) {
  asm volatile("" : : "r,m"(value) : "memory");
}

}  // namespace mote_bench
