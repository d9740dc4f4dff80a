// Runtime options: explicit options first, then MOTE_* environment variables,
// then defaults from the topology. A value that cannot be used is reported
// with the variable (or option) that held it and the value itself, because the
// person reading the message is usually looking at a job script, not our code.
#include "core/config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "mote/error.hpp"

namespace mote {
namespace {

// Larger than any kernel's NR_CPUS (8192 today); bounds the work a range such
// as 0-4000000000 could cause before the topology check rejects it.
constexpr long kMaxCpuIndex = (1 << 20) - 1;

constexpr unsigned kMaxWorkers = 4096;
constexpr long long kMaxSpinUs = 10'000'000;  // 10 s: longer is a unit mistake
constexpr std::uint32_t kMinDequeCapacity = 64;
constexpr std::uint32_t kMaxDequeCapacity = 1u << 24;

std::string_view trim(std::string_view s) {
  const auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// "NAME='value'", the prefix of every message about a value.
std::string quoted(std::string_view what, std::string_view value) {
  std::string s(what);
  s += "='";
  s += value;
  s += '\'';
  return s;
}

[[noreturn]] void fail(std::string_view what, std::string_view value, std::string_view problem) {
  throw config_error(quoted(what, value) + ": " + std::string(problem));
}

// Ascending runs collapse to ranges: {0,2,3,4,7} -> "0,2-4,7". Order is kept,
// so a binding list prints back the way it parses.
std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

// A plain decimal CPU number. Throws for a negative or huge one (the message
// is more useful than "not a number"); nullopt for anything else that is not
// digits, so the caller can quote the whole entry.
std::optional<long> parse_cpu_number(std::string_view token, std::string_view what,
                                     std::string_view text) {
  if (token.empty()) return std::nullopt;
  if (token.front() == '-') fail(what, text, "cpu numbers cannot be negative");
  long value = 0;
  const auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ptr != token.data() + token.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range || value > kMaxCpuIndex) {
    fail(what, text,
         "cpu " + std::string(token) + " is out of range (at most " + std::to_string(kMaxCpuIndex) +
             ")");
  }
  if (ec != std::errc{}) return std::nullopt;
  return value;
}

constexpr std::string_view kExpectedBinding =
    " (expected none, cores, threads, or a cpu list such as 0,2,4-7)";

// Built with appends rather than operator+ chains, which trip a GCC 12
// -Wrestrict false positive.
std::string not_a_cpu(std::string_view item) {
  std::string msg = "'";
  msg += item;
  msg += "' is not a cpu number or range";
  msg += kExpectedBinding;
  return msg;
}

std::vector<int> parse_cpu_list(std::string_view text, std::string_view what) {
  std::vector<int> cpus;
  std::vector<bool> seen;
  std::string_view rest = text;
  for (;;) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    if (item.empty()) {
      std::string msg = "empty entry in the cpu list";
      msg += kExpectedBinding;
      fail(what, text, msg);
    }
    // A leading '-' is a negative number, not a range with no start.
    const std::size_t dash = item.find('-', 1);
    const std::string_view first_text = trim(item.substr(0, dash));
    const auto first = parse_cpu_number(first_text, what, text);
    if (!first) {
      fail(what, text, not_a_cpu(item));
    }
    long last = *first;
    if (dash != std::string_view::npos) {
      const auto parsed_last = parse_cpu_number(trim(item.substr(dash + 1)), what, text);
      if (!parsed_last) {
        fail(what, text, not_a_cpu(item));
      }
      last = *parsed_last;
      if (last < *first) {
        fail(what, text, "range " + std::string(item) + " is reversed (write low-high)");
      }
    }
    for (long cpu = *first; cpu <= last; ++cpu) {
      if (seen.size() <= static_cast<std::size_t>(cpu)) seen.resize(static_cast<std::size_t>(cpu) + 1);
      // Listing a CPU twice would silently stack two workers on it.
      if (seen[static_cast<std::size_t>(cpu)]) {
        fail(what, text, "cpu " + std::to_string(cpu) + " is listed more than once");
      }
      seen[static_cast<std::size_t>(cpu)] = true;
      cpus.push_back(static_cast<int>(cpu));
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return cpus;
}

// The value of an environment variable, trimmed; nullopt when unset or blank,
// so that `MOTE_BIND= ./app` means "use the default" as shells users expect.
std::optional<std::string> read_env(const char* name) {
  const char* raw = std::getenv(name);
  if (raw == nullptr) return std::nullopt;
  const std::string_view value = trim(raw);
  if (value.empty()) return std::nullopt;
  return std::string(value);
}

// A decimal integer in [lo, hi]; the message names the variable, the value and
// the accepted range.
long long parse_integer(std::string_view text, std::string_view what, long long lo, long long hi,
                        std::string_view kind) {
  const std::string range = " (expected " + std::to_string(lo) + ".." + std::to_string(hi) + ")";
  long long value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  // from_chars accepts a leading '-' but not '+'; a '+' is harmless, so allow it.
  if (begin != end && *begin == '+') ++begin;
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (begin == end || ptr != end || (ec != std::errc{} && ec != std::errc::result_out_of_range)) {
    throw config_error(quoted(what, text) + " is not " + std::string(kind) + range);
  }
  if (ec == std::errc::result_out_of_range || value < lo || value > hi) {
    throw config_error(quoted(what, text) + " is out of range" + range);
  }
  return value;
}

}  // namespace

binding binding::parse(std::string_view text, std::string_view what) {
  const std::string_view value = trim(text);
  if (value.empty()) {
    std::string msg = quoted(what, text);
    msg += ": empty";
    msg += kExpectedBinding;
    throw config_error(msg);
  }
  binding b;
  if (iequals(value, "none")) {
    b.mode = kind::none;
  } else if (iequals(value, "cores")) {
    b.mode = kind::cores;
  } else if (iequals(value, "threads")) {
    b.mode = kind::threads;
  } else {
    b.mode = kind::list;
    b.cpus = parse_cpu_list(value, what);
  }
  return b;
}

std::string binding::to_string() const {
  switch (mode) {
    case kind::none: return "none";
    case kind::cores: return "cores";
    case kind::threads: return "threads";
    case kind::list: return format_cpu_list(cpus);
  }
  return "?";
}

namespace detail {

std::optional<bool> env_adaptive() {
  if (const auto env = read_env("MOTE_ADAPTIVE")) return parse_integer(*env, "MOTE_ADAPTIVE", 0, 1, "0 or 1") == 1;
  return std::nullopt;
}

std::optional<unsigned> env_num_threads() {
  if (const auto env = read_env("MOTE_NUM_THREADS")) {
    return static_cast<unsigned>(parse_integer(*env, "MOTE_NUM_THREADS", 1, kMaxWorkers, "a positive integer"));
  }
  return std::nullopt;
}

resolved_config resolve_config(const runtime_options& options, const topology& topo) {
  resolved_config cfg;
  cfg.machine = topo;

  // ---- Worker count ----
  std::string workers_from;  // where the count came from, for messages
  if (options.num_workers) {
    const unsigned n = *options.num_workers;
    if (n == 0 || n > kMaxWorkers) {
      throw config_error("runtime_options::num_workers=" + std::to_string(n) +
                         " is out of range (expected 1.." + std::to_string(kMaxWorkers) + ")");
    }
    cfg.num_workers = n;
    workers_from = "runtime_options::num_workers=" + std::to_string(n);
  } else if (const auto env = env_num_threads()) {
    // More workers than cores is legal: oversubscription is the user's call.
    cfg.num_workers = *env;
    workers_from = "MOTE_NUM_THREADS='" + *read_env("MOTE_NUM_THREADS") + "'";
  } else {
    cfg.num_workers = static_cast<unsigned>(std::clamp(topo.num_cores, 1, static_cast<int>(kMaxWorkers)));
    workers_from = "the machine's " + std::to_string(topo.num_cores) + (topo.num_cores == 1 ? " core" : " cores");
  }

  // ---- Binding ----
  binding bind;
  std::string bind_name;  // for messages
  std::string bind_text;
  if (options.bind) {
    bind = *options.bind;
    bind_name = "runtime_options::bind";
    cfg.bind_chosen = true;
    bind_text = bind.to_string();
  } else if (const auto env = read_env("MOTE_BIND")) {
    bind = binding::parse(*env, "MOTE_BIND");
    bind_name = "MOTE_BIND";
    cfg.bind_chosen = true;
    bind_text = *env;
  } else {
    bind.mode = binding::kind::cores;
  }
  if (bind.mode == binding::kind::list) {
    if (bind.cpus.empty()) fail(bind_name, bind_text, "the cpu list is empty");
    std::vector<int> available;
    for (const cpu_info& c : topo.cpus) available.push_back(c.os_index);
    std::sort(available.begin(), available.end());
    for (int cpu : bind.cpus) {
      if (topo.find(cpu) == nullptr) {
        fail(bind_name, bind_text,
             "cpu " + std::to_string(cpu) + " is not available to this process (available: " +
                 format_cpu_list(available) + ")");
      }
    }
  }

  std::vector<int> cycle;  // CPUs handed to workers in turn; empty = unpinned
  switch (bind.mode) {
    case binding::kind::none: break;
    case binding::kind::cores: cycle = topo.first_cpu_of_each_core(); break;
    case binding::kind::threads:
      for (const cpu_info& c : topo.cpus) cycle.push_back(c.os_index);
      break;
    case binding::kind::list: cycle = bind.cpus; break;
  }
  cfg.worker_cpus.resize(cfg.num_workers, -1);
  if (!cycle.empty()) {
    // With a caller seat, worker 0 is whichever thread enters it, unpinned:
    // the threads the runtime starts take the binding's CPUs in turn from the
    // second on (the first is usually where the caller runs).
    const unsigned first = options.caller_seat ? 1 : 0;
    for (unsigned i = first; i < cfg.num_workers; ++i) cfg.worker_cpus[i] = cycle[i % cycle.size()];
    if (options.caller_seat &&
        std::find(cfg.worker_cpus.begin() + 1, cfg.worker_cpus.end(), cycle[0]) == cfg.worker_cpus.end()) {
      cfg.seat_cpu = cycle[0];
    }
  }

  // ---- Spin window ----
  if (options.spin) {
    const long long us = options.spin->count();
    if (us < 0 || us > kMaxSpinUs) {
      throw config_error("runtime_options::spin=" + std::to_string(us) +
                         "us is out of range (expected 0.." + std::to_string(kMaxSpinUs) + " us)");
    }
    cfg.spin = std::chrono::microseconds(us);
  } else if (const auto env = read_env("MOTE_SPIN_US")) {
    cfg.spin = std::chrono::microseconds(
        parse_integer(*env, "MOTE_SPIN_US", 0, kMaxSpinUs, "an integer number of microseconds"));
  } else {
    cfg.spin = std::chrono::microseconds(100);
  }

  // ---- Scheduler policy ----
  if (options.scheduler) {
    const scheduler_policy p = *options.scheduler;
    if (p != scheduler_policy::work_stealing && p != scheduler_policy::delegation && p != scheduler_policy::mesh) {
      throw config_error("runtime_options::scheduler=" + std::to_string(static_cast<int>(p)) +
                         " is not a scheduler_policy (expected work_stealing, delegation or mesh)");
    }
    cfg.policy = p;
  } else if (const auto env = read_env("MOTE_SCHEDULER")) {
    if (iequals(*env, "steal")) {
      cfg.policy = scheduler_policy::work_stealing;
    } else if (iequals(*env, "delegation")) {
      cfg.policy = scheduler_policy::delegation;
    } else if (iequals(*env, "mesh")) {
      cfg.policy = scheduler_policy::mesh;
    } else {
      fail("MOTE_SCHEDULER", *env, "unknown scheduler (expected mesh, steal or delegation)");
    }
  } else {
    cfg.policy = scheduler_policy::work_stealing;
  }
  // The mesh's balancing protocols (read whatever the policy, so that a
  // misspelt value is reported rather than ignored).
  if (const auto env = read_env("MOTE_MESH_BALANCE")) {
    bool known = false;
    for (const mesh_balance b :
         {mesh_balance::none, mesh_balance::redirect, mesh_balance::steal, mesh_balance::both}) {
      if (iequals(*env, mesh_balance_name(b))) {
        cfg.balance = b;
        known = true;
      }
    }
    if (!known) fail("MOTE_MESH_BALANCE", *env, "unknown balancing (expected none, redirect, steal or both)");
  }

  // ---- NUMA node of each worker (the delegation scheduler's add-queues) ----
  cfg.num_nodes = static_cast<unsigned>(std::max(1, topo.num_numa_nodes));
  cfg.worker_nodes.resize(cfg.num_workers, 0);
  for (unsigned i = 0; i < cfg.num_workers; ++i) {
    const cpu_info* c = cfg.worker_cpus[i] >= 0 ? topo.find(cfg.worker_cpus[i]) : nullptr;
    const int node = c != nullptr ? std::max(0, c->numa_node) : static_cast<int>(i % cfg.num_nodes);
    cfg.worker_nodes[i] = static_cast<unsigned>(node) % cfg.num_nodes;  // dense already; a guard
  }

  // ---- Deque capacity ----
  if (options.deque_capacity) {
    const std::uint32_t cap = *options.deque_capacity;
    // A power of two so that slot indexing is a mask; the bounds keep a deque
    // from being uselessly small or from eating gigabytes per worker.
    const bool power_of_two = cap != 0 && (cap & (cap - 1)) == 0;
    if (!power_of_two || cap < kMinDequeCapacity || cap > kMaxDequeCapacity) {
      throw config_error("runtime_options::deque_capacity=" + std::to_string(cap) +
                         " is not a power of two between " + std::to_string(kMinDequeCapacity) +
                         " and " + std::to_string(kMaxDequeCapacity));
    }
    cfg.deque_capacity = cap;
  } else {
    cfg.deque_capacity = split_deque::kDefaultCapacity;
  }
  cfg.assistants = options.assistants;
  cfg.caller_seat = options.caller_seat;
  cfg.stack_size = options.stack_size;
  if (cfg.caller_seat && cfg.num_workers < 2) {
    // Worker 0 would be the seat alone: no worker of the runtime has a thread,
    // so work submitted from outside (run(), a task_group of the runtime)
    // would wait forever while nobody sits in the seat.
    throw config_error("runtime_options::caller_seat needs at least 2 workers, and " + workers_from +
                       " gives 1 (worker 0, the seat, has no thread of its own: nothing would run what "
                       "run() submits while nobody sits in it)");
  }
  if (cfg.caller_seat && cfg.assistants) {
    throw config_error("runtime_options::caller_seat and runtime_options::assistants cannot be combined "
                       "(worker 0 has no thread of its own to own an assistant)");
  }
  // Explicit, then MOTE_ADAPTIVE, for both; unset, join's is off and the
  // assistants' on.
  const std::optional<bool> adaptive = options.adaptive ? options.adaptive : env_adaptive();
  cfg.adaptive = adaptive.value_or(false);
  cfg.assistants_adaptive = adaptive.value_or(true);
  if (const auto env = read_env("MOTE_STATS")) {
    cfg.stats = parse_integer(*env, "MOTE_STATS", 0, 1, "0 or 1") == 1;
  }
  return cfg;
}

}  // namespace detail
}  // namespace mote
