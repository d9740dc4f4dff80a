// The OpenMP environment variables, read as GNU's libgomp (gcc 12) reads them.
//
// Every variable follows GNU's syntax to the letter (its quirks included:
// case-insensitive keywords, spaces where strtoul allows them, a bad value
// reported and the default kept), because scripts and test suites match what
// libgomp prints. The order of the messages is GNU's order of parsing.
#include <sched.h>
#include <strings.h>
#include <unistd.h>

#include <pthread.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "omp/icv.hpp"

namespace mote::omp {

namespace {

// ---- Characters ---------------------------------------------------------------

const char* skip_space(const char* s) {
  while (std::isspace(static_cast<unsigned char>(*s)) != 0) ++s;
  return s;
}

// `s` starts with `word`, in any case (GNU compares with strncasecmp).
bool starts_with(const char* s, const char* word) {
  return ::strncasecmp(s, word, std::strlen(word)) == 0;
}

// ---- A CPU set of fixed capacity --------------------------------------------------

// GNU sizes its CPU sets to hold the highest CPU this process may use, in
// whole 64-bit words; a CPU number past that is "out of range".
class cpu_bits {
 public:
  explicit cpu_bits(std::size_t capacity) : words_((capacity + 63) / 64, 0) {}

  std::size_t capacity() const { return words_.size() * 64; }
  bool test(std::size_t cpu) const {
    return cpu < capacity() && ((words_[cpu / 64] >> (cpu % 64)) & 1U) != 0;
  }
  void set(std::size_t cpu) { words_[cpu / 64] |= std::uint64_t{1} << (cpu % 64); }
  void clear(std::size_t cpu) { words_[cpu / 64] &= ~(std::uint64_t{1} << (cpu % 64)); }
  bool empty() const {
    return std::all_of(words_.begin(), words_.end(), [](std::uint64_t w) { return w == 0; });
  }
  std::size_t count() const {
    std::size_t n = 0;
    for (const std::uint64_t w : words_) n += static_cast<std::size_t>(__builtin_popcountll(w));
    return n;
  }
  void intersect(const cpu_bits& other) {
    for (std::size_t i = 0; i < words_.size(); ++i) words_[i] &= other.words_[i];
  }
  bool operator==(const cpu_bits& other) const = default;

  place cpus() const {
    place out;
    for (std::size_t cpu = 0; cpu < capacity(); ++cpu) {
      if (test(cpu)) out.push_back(static_cast<int>(cpu));
    }
    return out;
  }

 private:
  std::vector<std::uint64_t> words_;
};

// ---- The parser -------------------------------------------------------------------

constexpr const char* kInvalid = "Invalid value for environment variable ";

class parser {
 public:
  parser(const environment& from, std::string& messages) : from_(from), messages_(messages) {}

  const char* get(const char* name) const {
    if (from_.getenv) return from_.getenv(name);
    return std::getenv(name);
  }
  void error(const std::string& text) { messages_ += "\nlibgomp: " + text + "\n"; }
  void invalid(const char* name) { error(std::string(kInvalid) + name); }

  // TRUE or FALSE (any case), with spaces around, into `value`. False when
  // unset or bad; as GNU's, a keyword followed by something else is bad and
  // counts all the same.
  bool boolean(const char* name, bool& value) {
    const char* text = get(name);
    if (text == nullptr) return false;
    const char* s = skip_space(text);
    if (starts_with(s, "true")) {
      value = true;
      s += 4;
    } else if (starts_with(s, "false")) {
      value = false;
      s += 5;
    } else {
      invalid(name);
      return false;
    }
    if (*skip_space(s) != '\0') {
      invalid(name);
      return false;
    }
    return true;
  }

  // A decimal number, positive (or zero when allowed), as strtoul reads it.
  std::optional<unsigned long> number(const char* name, bool allow_zero) {
    const char* value = get(name);
    if (value == nullptr) return std::nullopt;
    const char* s = skip_space(value);
    if (*s == '\0') {
      invalid(name);
      return std::nullopt;
    }
    errno = 0;
    char* end = nullptr;
    const unsigned long n = std::strtoul(s, &end, 10);
    // As a long, so that "-3" (which strtoul wraps round) is refused.
    if (errno != 0 || end == s || static_cast<long>(n) <= (allow_zero ? -1L : 0L) ||
        *skip_space(end) != '\0') {
      invalid(name);
      return std::nullopt;
    }
    return n;
  }

  std::optional<int> integer(const char* name, bool allow_zero) {
    const std::optional<unsigned long> n = number(name, allow_zero);
    if (!n) return std::nullopt;
    if (*n > static_cast<unsigned long>(INT_MAX)) {
      invalid(name);
      return std::nullopt;
    }
    return static_cast<int>(*n);
  }

  // OMP_NUM_THREADS: positive numbers separated by commas.
  std::optional<std::vector<unsigned long>> number_list(const char* name) {
    const char* value = get(name);
    if (value == nullptr) return std::nullopt;
    std::vector<unsigned long> list;
    const char* s = skip_space(value);
    if (*s == '\0') return invalid_list(name);
    for (;;) {
      errno = 0;
      char* end = nullptr;
      const unsigned long n = std::strtoul(s, &end, 10);
      if (errno != 0 || static_cast<long>(n) <= 0) return invalid_list(name);
      list.push_back(n);
      const char* after = skip_space(end);
      if (*after == '\0') return list;
      if (*after != ',') return invalid_list(name);
      s = skip_space(after + 1);
      if (*s == '\0') return invalid_list(name);
    }
  }

  // OMP_PROC_BIND: TRUE, FALSE, or a list of primary/master, close, spread.
  std::optional<std::vector<int>> bind_list(const char* name) {
    struct kind {
      const char* word;
      int value;
    };
    // "master" before "primary", as GNU looks them up; false and true only
    // as the whole value.
    static constexpr kind kKinds[] = {{"false", bind_false},    {"true", bind_true},
                                      {"master", bind_primary}, {"primary", bind_primary},
                                      {"close", bind_close},    {"spread", bind_spread}};
    const auto match = [](const char*& s, std::size_t first) -> std::optional<int> {
      for (std::size_t i = first; i < std::size(kKinds); ++i) {
        if (starts_with(s, kKinds[i].word)) {
          s += std::strlen(kKinds[i].word);
          return kKinds[i].value;
        }
      }
      return std::nullopt;
    };
    const char* value = get(name);
    if (value == nullptr) return std::nullopt;
    const char* s = skip_space(value);
    std::vector<int> list;
    std::optional<int> kind = match(s, 0);
    if (!kind) return invalid_bind(name);  // nothing, or no keyword
    list.push_back(*kind);
    s = skip_space(s);
    if (*s == '\0') return list;
    if (*s != ',' || *kind == bind_false || *kind == bind_true) return invalid_bind(name);
    for (;;) {
      s = skip_space(s + 1);
      kind = match(s, 2);
      if (!kind) return invalid_bind(name);
      list.push_back(*kind);
      s = skip_space(s);
      if (*s == '\0') return list;
      if (*s != ',') return invalid_bind(name);
    }
  }

  // OMP_SCHEDULE: [monotonic:|nonmonotonic:]kind[,chunk], into icvs. As
  // GNU's, a kind once read stays even when what follows it is bad.
  void schedule(task_icvs& icvs) {
    const char* value = get("OMP_SCHEDULE");
    if (value == nullptr) return;
    const char* s = skip_space(value);
    int modifier = 0;  // 1 monotonic, -1 nonmonotonic
    if (starts_with(s, "monotonic")) {
      modifier = 1;
      s += 9;
    } else if (starts_with(s, "nonmonotonic")) {
      modifier = -1;
      s += 12;
    }
    if (modifier != 0) {
      s = skip_space(s);
      if (*s != ':') return unknown_schedule();
      s = skip_space(s + 1);
    }
    struct kind {
      const char* word;
      int value;
    };
    static constexpr kind kKinds[] = {{"static", sched_static},
                                      {"dynamic", sched_dynamic},
                                      {"guided", sched_guided},
                                      {"auto", sched_auto}};
    int kind_value = -1;
    for (const kind& k : kKinds) {
      if (starts_with(s, k.word)) {
        kind_value = k.value;
        s += std::strlen(k.word);
        break;
      }
    }
    if (kind_value < 0) return unknown_schedule();
    // Static is monotonic unless said otherwise; the others are not.
    unsigned sched = static_cast<unsigned>(kind_value);
    if (modifier == 1 || (modifier == 0 && kind_value == sched_static)) sched |= sched_monotonic;
    icvs.run_sched = static_cast<int>(sched);
    s = skip_space(s);
    if (*s == '\0') {
      icvs.run_chunk = kind_value == sched_static ? 0 : 1;
      return;
    }
    if (*s != ',') return unknown_schedule();
    s = skip_space(s + 1);
    if (*s == '\0') return invalid_chunk();
    errno = 0;
    char* end = nullptr;
    const unsigned long n = std::strtoul(s, &end, 10);
    if (errno != 0 || end == s || *skip_space(end) != '\0') return invalid_chunk();
    // What fits an int after the round trip: "-1" (which strtoul wraps to
    // ULONG_MAX) comes back as -1, and GNU keeps it.
    if (static_cast<unsigned long>(static_cast<int>(n)) != n) return invalid_chunk();
    int chunk = static_cast<int>(n);
    if (chunk == 0 && kind_value != sched_static) chunk = 1;
    icvs.run_chunk = chunk;
  }

  // OMP_STACKSIZE and GOMP_STACKSIZE: a number of kilobytes, or of B, K, M, G.
  std::optional<std::size_t> stacksize(const char* name) {
    const char* value = get(name);
    if (value == nullptr) return std::nullopt;
    const char* s = skip_space(value);
    if (*s == '\0') return invalid_size(name);
    errno = 0;
    char* end = nullptr;
    const unsigned long n = std::strtoul(s, &end, 10);
    if (errno != 0 || end == s) return invalid_size(name);
    const char* suffix = skip_space(end);
    unsigned shift = 10;
    if (*suffix != '\0') {
      switch (std::tolower(static_cast<unsigned char>(*suffix))) {
        case 'b':
          shift = 0;
          break;
        case 'k':
          shift = 10;
          break;
        case 'm':
          shift = 20;
          break;
        case 'g':
          shift = 30;
          break;
        default:
          return invalid_size(name);
      }
      if (*skip_space(suffix + 1) != '\0') return invalid_size(name);
    }
    if (((n << shift) >> shift) != n) return invalid_size(name);
    return static_cast<std::size_t>(n << shift);
  }

  // GOMP_SPINCOUNT: a number with an optional k, M, G or T (powers of 1000),
  // or INFINITE / INFINITY.
  std::optional<unsigned long long> spincount() {
    constexpr const char* name = "GOMP_SPINCOUNT";
    const char* value = get(name);
    if (value == nullptr) return std::nullopt;
    const char* s = skip_space(value);
    if (*s == '\0') return invalid_spin(name);
    constexpr unsigned long long kInfinite = ~0ULL;
    if (starts_with(s, "infinite") || starts_with(s, "infinity")) {
      if (*skip_space(s + 8) != '\0') return invalid_spin(name);
      return kInfinite;
    }
    errno = 0;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(s, &end, 10);
    if (errno != 0 || end == s) return invalid_spin(name);
    const char* suffix = skip_space(end);
    unsigned long long scale = 1;
    if (*suffix != '\0') {
      switch (std::tolower(static_cast<unsigned char>(*suffix))) {
        case 'k':
          scale = 1000ULL;
          break;
        case 'm':
          scale = 1000ULL * 1000ULL;
          break;
        case 'g':
          scale = 1000ULL * 1000ULL * 1000ULL;
          break;
        case 't':
          scale = 1000ULL * 1000ULL * 1000ULL * 1000ULL;
          break;
        default:
          return invalid_spin(name);
      }
      if (*skip_space(suffix + 1) != '\0') return invalid_spin(name);
    }
    return n > kInfinite / scale ? kInfinite : n * scale;
  }

  // A keyword from `words` (in order, by prefix), then nothing but spaces.
  // The index of the word, or -1 (and the message) when bad, -2 when unset.
  int keyword(const char* name, std::span<const char* const> words) {
    const char* value = get(name);
    if (value == nullptr) return -2;
    const char* s = skip_space(value);
    int index = 0;
    for (const char* word : words) {
      if (starts_with(s, word)) {
        if (*skip_space(s + std::strlen(word)) == '\0') return index;
        break;
      }
      ++index;
    }
    invalid(name);
    return -1;
  }

 private:
  std::optional<std::vector<unsigned long>> invalid_list(const char* name) {
    invalid(name);
    return std::nullopt;
  }
  std::optional<std::vector<int>> invalid_bind(const char* name) {
    invalid(name);
    return std::nullopt;
  }
  std::optional<std::size_t> invalid_size(const char* name) {
    invalid(name);
    return std::nullopt;
  }
  std::optional<unsigned long long> invalid_spin(const char* name) {
    invalid(name);
    return std::nullopt;
  }
  void unknown_schedule() { error("Unknown value for environment variable OMP_SCHEDULE"); }
  void invalid_chunk() {
    error("Invalid value for chunk size in environment variable OMP_SCHEDULE");
  }

  const environment& from_;
  std::string& messages_;
};

// ---- Places -------------------------------------------------------------------------

// The machine the places are cut from: the CPUs this process may use, and
// where sysfs describes them.
struct machine {
  cpu_bits allowed;
  std::string sysfs;
};

// A sysfs CPU list ("0-3,8,10-11\n"). nullopt when it cannot be read. A
// malformed entry ends the list (what came before it counts).
std::optional<std::vector<unsigned long>> read_cpu_list(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line.empty()) return std::nullopt;
  std::vector<unsigned long> cpus;
  const char* s = line.c_str();
  while (*s != '\0' && *s != '\n') {
    errno = 0;
    char* end = nullptr;
    unsigned long first = std::strtoul(s, &end, 10);
    if (errno != 0 || end == s) break;
    s = end;
    unsigned long last = first;
    if (*s == '-') {
      errno = 0;
      last = std::strtoul(s + 1, &end, 10);
      if (errno != 0 || end == s + 1 || last < first) break;
      s = end;
    }
    for (; first <= last; ++first) cpus.push_back(first);
    if (*s == ',') ++s;
  }
  return cpus;
}

// The index of cpu's last-level cache in sysfs (cache/index<i>, the highest
// level, the last index among equals), or -1.
int last_level_cache(const std::string& sysfs, std::size_t cpu) {
  int best = -1;
  unsigned long best_level = 0;
  for (int index = 0; index < 128; ++index) {
    std::ifstream in(sysfs + "/cpu/cpu" + std::to_string(cpu) + "/cache/index" +
                     std::to_string(index) + "/level");
    if (!in) break;
    unsigned long level = 0;
    if (in >> level && level >= best_level) {
      best = index;
      best_level = level;
    }
  }
  return best;
}

enum class place_level { threads = 1, cores = 2, sockets = 3, ll_caches = 4, numa_domains = 5 };

// Places of one level, cut from the CPUs still in `left`, in GNU's order:
// walk the CPUs upwards; each one not taken yet brings its group (its core's
// threads, its socket's, its last-level cache's). Threads and cores are
// walked per socket first (this_level sockets), which keeps that order.
void places_by_topology(place_level level, place_level this_level, std::size_t count,
                        cpu_bits& left, const std::string& sysfs, int& cache_index,
                        std::vector<cpu_bits>& out) {
  for (std::size_t cpu = 0; cpu < left.capacity() && out.size() < count; ++cpu) {
    if (!left.test(cpu)) continue;
    std::string path = sysfs + "/cpu/cpu" + std::to_string(cpu);
    if (level == place_level::ll_caches) {
      // One cache level for all CPUs: the first one's.
      if (cache_index < 0) cache_index = last_level_cache(sysfs, cpu);
      if (cache_index < 0) {
        left.clear(cpu);
        continue;
      }
      path += "/cache/index" + std::to_string(cache_index) + "/shared_cpu_list";
    } else {
      path += this_level == place_level::sockets ? "/topology/core_siblings_list"
                                                 : "/topology/thread_siblings_list";
    }
    const std::optional<std::vector<unsigned long>> group = read_cpu_list(path);
    if (!group) {
      left.clear(cpu);
      continue;
    }
    cpu_bits current(left.capacity());
    for (const unsigned long member : *group) {
      if (!left.test(member)) continue;
      if (this_level == place_level::sockets && level != place_level::sockets) {
        places_by_topology(level, place_level::cores, count, left, sysfs, cache_index, out);
      } else if (level == place_level::threads) {
        cpu_bits one(left.capacity());
        one.set(member);
        out.push_back(std::move(one));
        left.clear(member);
        if (out.size() >= count) return;
      } else {
        current.set(member);
        left.clear(member);
      }
    }
    // A group counts once the CPU that brought it is in it.
    if (level == this_level && !left.test(cpu) && !current.empty())
      out.push_back(std::move(current));
    left.clear(cpu);
  }
}

// numa_domains: one place per NUMA node (node/online, node<n>/cpulist).
void places_by_numa(std::size_t count, cpu_bits& left, const std::string& sysfs,
                    std::vector<cpu_bits>& out) {
  const std::optional<std::vector<unsigned long>> nodes = read_cpu_list(sysfs + "/node/online");
  if (!nodes) return;
  for (const unsigned long node : *nodes) {
    if (out.size() >= count) return;
    const std::optional<std::vector<unsigned long>> cpus =
        read_cpu_list(sysfs + "/node/node" + std::to_string(node) + "/cpulist");
    if (!cpus) continue;
    cpu_bits current(left.capacity());
    for (const unsigned long cpu : *cpus) {
      if (!left.test(cpu)) continue;
      current.set(cpu);
      left.clear(cpu);
    }
    if (!current.empty()) out.push_back(std::move(current));
  }
}

// The places of a level keyword (OMP_PLACES=cores(4)), at most `count`.
// Empty when sysfs tells nothing.
std::vector<cpu_bits> places_of_level(const machine& m, place_level level, unsigned long count) {
  count = std::min<unsigned long>(count, m.allowed.count());
  std::vector<cpu_bits> out;
  cpu_bits left = m.allowed;
  if (level == place_level::numa_domains) {
    places_by_numa(count, left, m.sysfs, out);
  } else {
    int cache_index = -1;
    const place_level this_level = level == place_level::ll_caches ? level : place_level::sockets;
    places_by_topology(level, this_level, count, left, m.sysfs, cache_index, out);
  }
  return out;
}

// Adds len CPUs from `first`, `stride` apart, to p; false (and GNU's message)
// when one falls outside the CPU set's capacity.
bool add_cpus(parser& p, cpu_bits& bits, unsigned long first, unsigned long len, long stride,
              bool quiet) {
  unsigned long cpu = first;
  for (;;) {
    if (cpu >= bits.capacity()) {
      if (!quiet) p.error("Logical CPU number " + std::to_string(cpu) + " out of range");
      return false;
    }
    bits.set(cpu);
    if (--len == 0) return true;
    const unsigned long next = cpu + static_cast<unsigned long>(stride);
    if ((stride < 0 && next > cpu) || (stride > 0 && next < cpu)) {
      if (!quiet)
        p.error("Logical CPU number " + std::to_string(cpu) + "+" + std::to_string(stride) +
                " out of range");
      return false;
    }
    cpu = next;
  }
}

bool remove_cpu(parser& p, cpu_bits& bits, unsigned long cpu) {
  if (cpu >= bits.capacity()) {
    p.error("Logical CPU number " + std::to_string(cpu) + " out of range");
    return false;
  }
  if (!bits.test(cpu)) {
    p.error("Logical CPU " + std::to_string(cpu) + " to be removed is not in the set");
    return false;
  }
  bits.clear(cpu);
  return true;
}

// `from` moved by `stride` CPUs.
std::optional<cpu_bits> shifted(parser& p, const cpu_bits& from, long stride) {
  cpu_bits to(from.capacity());
  for (std::size_t cpu = 0; cpu < from.capacity(); ++cpu) {
    if (!from.test(cpu)) continue;
    const std::size_t next = cpu + static_cast<std::size_t>(stride);
    if ((stride < 0 && next > cpu) || (stride > 0 && (next < cpu || next >= from.capacity()))) {
      p.error("Logical CPU number " + std::to_string(cpu) + "+" + std::to_string(stride) +
              " out of range");
      return std::nullopt;
    }
    to.set(next);
  }
  return to;
}

// One place of an explicit list, and what follows it:
//   [!] ( cpu | { [!]cpu[:len[:stride]], ... } ) [:count[:stride]]
struct place_item {
  bool negated = false;
  unsigned long count = 1;
  long stride = 1;
};

// Reads one place from `pos` (left after it). With `into`, adds its CPUs
// (inside braces, the negated entries are removed in a second pass, after
// the others are in); without, checks the syntax only.
bool read_place(parser& p, const char*& pos, cpu_bits* into, place_item& item) {
  item = place_item{};
  const char* s = skip_space(pos);
  if (*s == '!') {
    item.negated = true;
    s = skip_space(s + 1);
  }
  char* end = nullptr;
  if (*s != '{') {
    errno = 0;
    const unsigned long cpu = std::strtoul(s, &end, 10);
    if (errno != 0 || end == s) return false;
    if (into != nullptr && !add_cpus(p, *into, cpu, 1, 1, false)) return false;
    s = end;
  } else {
    const char* first_entry = skip_space(s + 1);
    int passes = 1;
    for (int pass = 0; pass < passes; ++pass) {
      s = first_entry;
      for (;;) {
        const bool negated = *s == '!';
        if (negated) {
          if (into != nullptr) passes = 2;
          s = skip_space(s + 1);
        }
        errno = 0;
        const unsigned long cpu = std::strtoul(s, &end, 10);
        if (errno != 0 || end == s) return false;
        s = skip_space(end);
        unsigned long len = 1;
        long stride = 1;
        if (*s == ':') {
          if (negated) return false;
          s = skip_space(s + 1);
          errno = 0;
          len = std::strtoul(s, &end, 10);
          s = skip_space(end);
          if (errno != 0 || len == 0) return false;
          if (*s == ':') {
            s = skip_space(s + 1);
            errno = 0;
            stride = std::strtol(s, &end, 10);
            if (errno != 0 || end == s) return false;
            s = skip_space(end);
          }
        }
        if (into != nullptr && pass == (negated ? 1 : 0)) {
          if (negated ? !remove_cpu(p, *into, cpu) : !add_cpus(p, *into, cpu, len, stride, false))
            return false;
        }
        if (*s == '}') break;
        if (*s != ',') return false;
        ++s;
      }
    }
    ++s;  // the closing brace
  }
  s = skip_space(s);
  if (*s == ':') {
    if (item.negated) return false;
    s = skip_space(s + 1);
    errno = 0;
    item.count = std::strtoul(s, &end, 10);
    s = skip_space(end);
    if (errno != 0 || item.count == 0 || item.count >= 65536) return false;
    if (*s == ':') {
      s = skip_space(s + 1);
      errno = 0;
      item.stride = std::strtol(s, &end, 10);
      if (errno != 0 || end == s) return false;
      s = skip_space(end);
    }
  }
  pos = s;
  return true;
}

// OMP_PLACES. With `syntax_only` (OMP_PROC_BIND=false), the value is checked
// and dropped. nullopt when unset, dropped or bad (bad says so).
std::optional<std::vector<cpu_bits>> parse_places(parser& p, const machine& m, bool syntax_only) {
  constexpr const char* name = "OMP_PLACES";
  const char* value = p.get(name);
  if (value == nullptr) return std::nullopt;
  const auto invalid = [&]() -> std::optional<std::vector<cpu_bits>> {
    p.invalid(name);
    return std::nullopt;
  };
  const char* s = skip_space(value);
  if (*s == '\0') return invalid();

  struct level_word {
    const char* word;
    place_level level;
  };
  static constexpr level_word kLevels[] = {{"threads", place_level::threads},
                                           {"cores", place_level::cores},
                                           {"sockets", place_level::sockets},
                                           {"ll_caches", place_level::ll_caches},
                                           {"numa_domains", place_level::numa_domains}};
  for (const level_word& l : kLevels) {
    if (!starts_with(s, l.word)) continue;
    s = skip_space(s + std::strlen(l.word));
    unsigned long count = ULONG_MAX;
    if (*s != '\0') {
      if (*s != '(') return invalid();
      s = skip_space(s + 1);
      errno = 0;
      char* end = nullptr;
      count = std::strtoul(s, &end, 10);
      if (errno != 0 || end == s) return invalid();
      s = skip_space(end);
      if (*s != ')') return invalid();
      if (*skip_space(s + 1) != '\0') return invalid();
    }
    if (syntax_only) return std::nullopt;
    std::vector<cpu_bits> places = places_of_level(m, l.level, count);
    if (places.empty()) {
      p.error("Error reading core/socket topology");
      return std::nullopt;
    }
    return places;
  }

  // An explicit list: the syntax first (and the number of places, bounded
  // as GNU bounds it), then the CPUs.
  std::size_t total = 0;
  bool any_negated = false;
  place_item item;
  for (const char* at = s;;) {
    if (!read_place(p, at, nullptr, item)) return invalid();
    if (item.negated) {
      if (!any_negated) ++total;
      any_negated = true;
    } else {
      total += item.count;
    }
    if (total > 65536) return invalid();
    if (*at == '\0') break;
    if (*at != ',') return invalid();
    ++at;
  }
  if (syntax_only) return std::nullopt;

  std::vector<cpu_bits> places;
  for (const char* at = s;;) {
    cpu_bits current(m.allowed.capacity());
    if (!read_place(p, at, &current, item)) return invalid();
    if (item.negated) {
      const auto same = std::find(places.begin(), places.end(), current);
      if (same == places.end()) {
        p.error("Trying to remove a non-existing place from list of places");
        return invalid();
      }
      places.erase(same);
    } else {
      places.push_back(current);
      for (unsigned long i = 1; i < item.count; ++i) {
        std::optional<cpu_bits> next = shifted(p, places.back(), item.stride);
        if (!next) return invalid();
        places.push_back(std::move(*next));
      }
    }
    if (*at == '\0') break;
    ++at;
  }
  if (places.empty()) {
    p.error("All places have been removed");
    return invalid();
  }
  // Only the CPUs this process may use; a place left with none goes.
  const std::size_t before = places.size();
  for (cpu_bits& pl : places) pl.intersect(m.allowed);
  places.erase(
      std::remove_if(places.begin(), places.end(), [](const cpu_bits& pl) { return pl.empty(); }),
      places.end());
  if (places.empty()) {
    p.error("None of the places contain usable logical CPUs");
    return invalid();
  }
  if (places.size() < before) {
    p.error("Number of places reduced from " + std::to_string(before) + " to " +
            std::to_string(places.size()) +
            " because some places didn't contain any usable logical CPUs");
  }
  return places;
}

// GOMP_CPU_AFFINITY: CPU numbers and ranges (a-b, a-b:stride; C bases),
// separated by commas or spaces; one place per CPU. nullopt when unset,
// dropped (`syntax_only`), bad, or naming no usable CPU.
std::optional<std::vector<cpu_bits>> parse_cpu_affinity(parser& p, const machine& m,
                                                        bool syntax_only) {
  const char* value = p.get("GOMP_CPU_AFFINITY");
  if (value == nullptr) return std::nullopt;
  struct range {
    unsigned long first, last, stride;
  };
  std::vector<range> ranges;
  const char* s = value;
  for (;;) {
    s = skip_space(s);
    char* end = nullptr;
    errno = 0;
    range r{std::strtoul(s, &end, 0), 0, 1};
    if (errno != 0 || end == s || r.first >= 65536) {
      // GNU's message, spelling included.
      p.error("Invalid value for enviroment variable GOMP_CPU_AFFINITY");
      return std::nullopt;
    }
    r.last = r.first;
    s = end;
    if (*s == '-') {
      errno = 0;
      r.last = std::strtoul(s + 1, &end, 0);
      if (errno != 0 || end == s + 1 || r.last >= 65536 || r.last < r.first) {
        p.error("Invalid value for enviroment variable GOMP_CPU_AFFINITY");
        return std::nullopt;
      }
      s = end;
      if (*s == ':') {
        errno = 0;
        r.stride = std::strtoul(s + 1, &end, 0);
        if (errno != 0 || r.stride == 0 || r.stride >= 65536) {
          p.error("Invalid value for enviroment variable GOMP_CPU_AFFINITY");
          return std::nullopt;
        }
        s = end;
      }
    }
    ranges.push_back(r);
    s = skip_space(s);
    if (*s == ',') {
      ++s;
    } else if (*s == '\0') {
      break;
    }
  }
  if (syntax_only) return std::nullopt;
  std::vector<cpu_bits> places;
  for (const range& r : ranges) {
    for (unsigned long cpu = r.first; cpu <= r.last; cpu += r.stride) {
      cpu_bits one(m.allowed.capacity());
      if (add_cpus(p, one, cpu, 1, 0, true)) places.push_back(std::move(one));
    }
  }
  if (places.empty()) return std::nullopt;
  return places;
}

// The CPUs this process may use (sched_getaffinity), ascending.
std::vector<int> process_cpus() {
  std::vector<int> cpus;
  for (std::size_t size = CPU_SETSIZE; size <= (std::size_t{1} << 20); size *= 2) {
    cpu_set_t* set = CPU_ALLOC(size);
    if (set == nullptr) break;
    const std::size_t bytes = CPU_ALLOC_SIZE(size);
    CPU_ZERO_S(bytes, set);
    if (::sched_getaffinity(0, bytes, set) == 0) {
      for (std::size_t cpu = 0; cpu < size; ++cpu) {
        if (CPU_ISSET_S(cpu, bytes, set)) cpus.push_back(static_cast<int>(cpu));
      }
      CPU_FREE(set);
      return cpus;
    }
    CPU_FREE(set);
    if (errno != EINVAL) break;
  }
  // Unknown: every online CPU.
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  for (long cpu = 0; cpu < std::max(online, 1L); ++cpu) cpus.push_back(static_cast<int>(cpu));
  return cpus;
}

const char* const kAllocatorNames[] = {"omp_default_mem_alloc", "omp_large_cap_mem_alloc",
                                       "omp_const_mem_alloc",   "omp_high_bw_mem_alloc",
                                       "omp_low_lat_mem_alloc", "omp_cgroup_mem_alloc",
                                       "omp_pteam_mem_alloc",   "omp_thread_mem_alloc"};

// The stack size GNU would refuse: pthread_attr_setstacksize's own test.
void check_stacksize(parser& p, std::size_t size) {
  pthread_attr_t attr;
  if (::pthread_attr_init(&attr) != 0) return;
  const int err = ::pthread_attr_setstacksize(&attr, size);
  ::pthread_attr_destroy(&attr);
  if (err == EINVAL) {
    const std::size_t minimum = PTHREAD_STACK_MIN;
    if (size < minimum) {
      p.error("Stack size less than minimum of " +
              std::to_string(minimum / 1024 + (minimum % 1024 != 0 ? 1 : 0)) + "k");
    } else {
      p.error("Stack size larger than system limit");
    }
  } else if (err != 0) {
    p.error(std::string("Stack size change failed: ") + std::strerror(err));
  }
}

// Points `icvs.initial`'s lists into the storage of `icvs`.
void link_lists(global_icvs& icvs) {
  task_icvs& t = icvs.initial;
  t.nthreads_rest = icvs.nthreads_list.size() > 1 ? icvs.nthreads_list.data() + 1 : nullptr;
  t.nthreads_rest_len =
      icvs.nthreads_list.size() > 1 ? static_cast<unsigned>(icvs.nthreads_list.size() - 1) : 0;
  t.bind_rest = icvs.bind_list.size() > 1 ? icvs.bind_list.data() + 1 : nullptr;
  t.bind_rest_len =
      icvs.bind_list.size() > 1 ? static_cast<unsigned>(icvs.bind_list.size() - 1) : 0;
}

}  // namespace

global_icvs parse_environment(const environment& from, std::string& messages) {
  parser p(from, messages);
  global_icvs g;
  task_icvs& t = g.initial;

  g.allowed_cpus = from.allowed_cpus.empty() ? process_cpus() : from.allowed_cpus;
  std::sort(g.allowed_cpus.begin(), g.allowed_cpus.end());
  g.allowed_cpus.erase(std::unique(g.allowed_cpus.begin(), g.allowed_cpus.end()),
                       g.allowed_cpus.end());
  g.num_procs = static_cast<unsigned>(std::max<std::size_t>(g.allowed_cpus.size(), 1));
  machine m{
      cpu_bits(g.allowed_cpus.empty() ? 1 : static_cast<std::size_t>(g.allowed_cpus.back()) + 1),
      from.sysfs};
  for (const int cpu : g.allowed_cpus) m.allowed.set(static_cast<std::size_t>(cpu));

  // In GNU's order, so that the messages come in its order too.
  p.schedule(t);
  p.boolean("OMP_DYNAMIC", t.dyn);
  p.boolean("OMP_CANCELLATION", g.cancellation);
  p.boolean("OMP_DISPLAY_AFFINITY", g.display_affinity);
  if (auto v = p.integer("OMP_DEFAULT_DEVICE", true)) t.default_device = *v;
  static constexpr const char* kOffloads[] = {"default", "mandatory", "disabled"};
  if (const int k = p.keyword("OMP_TARGET_OFFLOAD", kOffloads); k >= 0) g.target_offload = k;
  if (auto v = p.integer("OMP_MAX_TASK_PRIORITY", true)) g.max_task_priority = *v;
  if (const int k = p.keyword("OMP_ALLOCATOR", kAllocatorNames); k >= 0) {
    g.default_allocator = static_cast<std::uintptr_t>(k) + 1;
  }
  if (auto v = p.number("OMP_THREAD_LIMIT", false)) {
    t.thread_limit =
        *v > static_cast<unsigned long>(INT_MAX) ? UINT_MAX : static_cast<unsigned>(*v);
  }
  if (auto v = p.integer("GOMP_DEBUG", true)) g.debug = *v;

  if (auto list = p.number_list("OMP_NUM_THREADS")) {
    g.nthreads_given = *list;
    for (const unsigned long n : *list) {
      g.nthreads_list.push_back(n > static_cast<unsigned long>(INT_MAX)
                                    ? static_cast<unsigned>(INT_MAX)
                                    : static_cast<unsigned>(n));
    }
    t.nthreads = g.nthreads_list.front();
  } else {
    t.nthreads = g.num_procs;
  }
  if (auto v = p.integer("OMP_NUM_TEAMS", false)) g.num_teams = *v;
  if (auto v = p.integer("OMP_TEAMS_THREAD_LIMIT", false)) g.teams_thread_limit = *v;

  // OMP_PROC_BIND=false drops the places, after checking their syntax.
  bool places_dropped = false;
  if (auto list = p.bind_list("OMP_PROC_BIND")) {
    g.bind_list = *list;
    t.bind = list->front();
    places_dropped = t.bind == bind_false;
  }
  if (auto v = p.number("OMP_MAX_ACTIVE_LEVELS", true)) {
    t.max_active_levels =
        static_cast<unsigned>(std::min<unsigned long>(*v, supported_active_levels));
  } else if (bool nested = true; p.boolean("OMP_NESTED", nested)) {
    // OMP_NESTED (deprecated) counts only when OMP_MAX_ACTIVE_LEVELS does not.
    t.max_active_levels = nested ? supported_active_levels : 1;
  } else if (g.nthreads_list.size() > 1 || g.bind_list.size() > 1) {
    // A list of more than one level asks for nesting.
    t.max_active_levels = supported_active_levels;
  }

  // OMP_PLACES, else GOMP_CPU_AFFINITY (read for its syntax all the same);
  // either binds (bind-var true) unless OMP_PROC_BIND said otherwise.
  std::vector<cpu_bits> places;
  if (auto list = parse_places(p, m, places_dropped)) {
    places = std::move(*list);
    if (t.bind == bind_false) t.bind = bind_true;
    places_dropped = true;
  }
  if (auto list = parse_cpu_affinity(p, m, places_dropped)) {
    places = std::move(*list);
    if (t.bind == bind_false) t.bind = bind_true;
  }
  // Binding without places: one place per hardware thread.
  if (t.bind != bind_false && places.empty())
    places = places_of_level(m, place_level::threads, ULONG_MAX);
  for (const cpu_bits& pl : places) g.places.push_back(pl.cpus());

  if (const char* format = p.get("OMP_AFFINITY_FORMAT")) g.affinity_format = format;

  static constexpr const char* kPolicies[] = {"active", "passive"};
  if (const int k = p.keyword("OMP_WAIT_POLICY", kPolicies); k >= 0) g.wait_policy = k == 0 ? 1 : 0;
  if (auto v = p.spincount()) {
    g.spincount = *v;
    g.spincount_set = true;
  } else if (g.wait_policy > 0) {
    g.spincount = 30000000000ULL;  // active: about 5 minutes of spinning
  } else if (g.wait_policy == 0) {
    g.spincount = 0;  // passive: sleep at once
  }

  std::optional<std::size_t> stack = p.stacksize("OMP_STACKSIZE");
  if (!stack) stack = p.stacksize("GOMP_STACKSIZE");
  if (stack) {
    g.stacksize = *stack;
    check_stacksize(p, *stack);
  }

  // OMP_DISPLAY_ENV: a keyword that starts well and ends badly both
  // complains and displays, as GNU's.
  if (const char* value = p.get("OMP_DISPLAY_ENV")) {
    const char* s = skip_space(value);
    int display = 0;
    if (starts_with(s, "true")) {
      display = 1;
      s += 4;
    } else if (starts_with(s, "false")) {
      s += 5;
    } else if (starts_with(s, "verbose")) {
      display = 2;
      s += 7;
    } else {
      s = "X";
    }
    if (*skip_space(s) != '\0') p.invalid("OMP_DISPLAY_ENV");
    g.display_env = display;
  }

  link_lists(g);
  return g;
}

std::string display_env_text(const global_icvs& g, bool verbose) {
  const task_icvs& t = g.initial;
  std::string out = "\nOPENMP DISPLAY ENVIRONMENT BEGIN\n";
  const auto line = [&](const char* name, const std::string& value) {
    out += "  ";
    out += name;
    out += " = '";
    out += value;
    out += "'\n";
  };
  const auto truth = [](bool b) { return std::string(b ? "TRUE" : "FALSE"); };
  line("_OPENMP", "201511");
  line("OMP_DYNAMIC", truth(t.dyn));
  line("OMP_NESTED", truth(t.max_active_levels > 1));

  std::string threads =
      std::to_string(g.nthreads_given.empty() ? t.nthreads : g.nthreads_given.front());
  for (std::size_t i = 1; i < g.nthreads_given.size(); ++i) {
    threads += ',';
    threads += std::to_string(g.nthreads_given[i]);
  }
  line("OMP_NUM_THREADS", threads);

  const unsigned sched = static_cast<unsigned>(t.run_sched);
  const unsigned kind = sched & ~sched_monotonic;
  std::string schedule;
  if ((sched & sched_monotonic) != 0) {
    if (kind != static_cast<unsigned>(sched_static)) schedule = "MONOTONIC:";
  } else if (kind == static_cast<unsigned>(sched_static)) {
    schedule = "NONMONOTONIC:";
  }
  // The chunk is shown when it is not the kind's default.
  switch (kind) {
    case 0:
      schedule += "RUNTIME";
      break;
    case sched_static:
      schedule += "STATIC";
      break;
    case sched_dynamic:
      schedule += "DYNAMIC";
      break;
    case sched_guided:
      schedule += "GUIDED";
      break;
    case sched_auto:
      schedule += "AUTO";
      break;
    default:
      break;
  }
  if (kind != static_cast<unsigned>(sched_auto) &&
      t.run_chunk != (kind == static_cast<unsigned>(sched_static) ? 0 : 1)) {
    schedule += ',';
    schedule += std::to_string(t.run_chunk);
  }
  line("OMP_SCHEDULE", schedule);

  // GNU 12 still says MASTER for primary.
  const auto bind_word = [](int b) -> const char* {
    switch (b) {
      case bind_false:
        return "FALSE";
      case bind_true:
        return "TRUE";
      case bind_primary:
        return "MASTER";
      case bind_close:
        return "CLOSE";
      case bind_spread:
        return "SPREAD";
      default:
        return "";
    }
  };
  std::string bind = bind_word(t.bind);
  for (std::size_t i = 1; i < g.bind_list.size(); ++i) {
    if (g.bind_list[i] >= bind_primary) bind += std::string(",") + bind_word(g.bind_list[i]);
  }
  line("OMP_PROC_BIND", bind);

  // Places as runs: {0:4},{4:4} (first CPU, then how many follow it).
  std::string places;
  for (std::size_t i = 0; i < g.places.size(); ++i) {
    places += "{";
    const place& pl = g.places[i];
    for (std::size_t j = 0; j < pl.size();) {
      std::size_t run = 1;
      while (j + run < pl.size() && pl[j + run] == pl[j] + static_cast<int>(run)) ++run;
      if (j != 0) places += ",";
      places += std::to_string(pl[j]);
      if (run > 1) {
        places += ':';
        places += std::to_string(run);
      }
      j += run;
    }
    places += i + 1 == g.places.size() ? "}" : "},";
  }
  line("OMP_PLACES", places);

  line("OMP_STACKSIZE", std::to_string(g.stacksize));
  // GNU's default is neither active nor passive, and shows as passive.
  line("OMP_WAIT_POLICY", g.wait_policy > 0 ? "ACTIVE" : "PASSIVE");
  line("OMP_THREAD_LIMIT", std::to_string(t.thread_limit));
  line("OMP_MAX_ACTIVE_LEVELS", std::to_string(t.max_active_levels));
  line("OMP_NUM_TEAMS", std::to_string(static_cast<unsigned>(g.num_teams)));
  line("OMP_TEAMS_THREAD_LIMIT", std::to_string(static_cast<unsigned>(g.teams_thread_limit)));
  line("OMP_CANCELLATION", truth(g.cancellation));
  line("OMP_DEFAULT_DEVICE", std::to_string(t.default_device));
  line("OMP_MAX_TASK_PRIORITY", std::to_string(g.max_task_priority));
  line("OMP_DISPLAY_AFFINITY", truth(g.display_affinity));
  line("OMP_AFFINITY_FORMAT", g.affinity_format);
  const bool named = g.default_allocator >= 1 && g.default_allocator <= std::size(kAllocatorNames);
  line("OMP_ALLOCATOR", named ? kAllocatorNames[g.default_allocator - 1] : "");
  static constexpr const char* kOffload[] = {"DEFAULT", "MANDATORY", "DISABLED"};
  line("OMP_TARGET_OFFLOAD", kOffload[std::clamp(g.target_offload, 0, 2)]);
  if (verbose) {
    line("GOMP_CPU_AFFINITY", "");
    line("GOMP_STACKSIZE", std::to_string(g.stacksize));
    line("GOMP_SPINCOUNT", std::to_string(g.spincount));
  }
  out += "OPENMP DISPLAY ENVIRONMENT END\n";
  return out;
}

namespace {

// Writes all of `text` on stderr, unbuffered (as GNU's stderr output is,
// before a stdout the program may have buffered).
void write_stderr(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

const global_icvs& globals() noexcept {
  static const global_icvs parsed = [] {
    std::string messages;
    global_icvs g;
    try {
      g = parse_environment(environment{}, messages);
    } catch (const std::bad_alloc&) {
      messages += "\nlibgomp: Out of memory while reading the environment\n";
      link_lists(g);
    }
    write_stderr(messages);
    return g;
  }();
  return parsed;
}

void initialize() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    const global_icvs& g = globals();
    if (g.display_env != 0) display_env(g.display_env == 2);
  });
}

void display_env(bool verbose) noexcept {
  try {
    write_stderr(display_env_text(globals(), verbose));
  } catch (const std::bad_alloc&) {
    // Nothing to show it with.
  }
}

// ---- The affinity format --------------------------------------------------------------

std::string cpu_ranges(const place& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t run = 1;
    while (i + run < cpus.size() && cpus[i + run] == cpus[i] + static_cast<int>(run)) ++run;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (run > 1) {
      out += '-';
      out += std::to_string(cpus[i + run - 1]);
    }
    i += run;
  }
  return out;
}

bool expand_affinity_format(const char* format, const std::function<std::string(char)>& field,
                            std::string& out, std::string& error) {
  struct long_name {
    const char* name;
    char code;
  };
  static constexpr long_name kLongNames[] = {
      {"team_num", 't'},       {"num_teams", 'T'},   {"nesting_level", 'L'},
      {"thread_num", 'n'},     {"num_threads", 'N'}, {"ancestor_tnum", 'a'},
      {"host", 'H'},           {"process_id", 'P'},  {"native_thread_id", 'i'},
      {"thread_affinity", 'A'}};
  const char* s = format;
  while (*s != '\0') {
    if (*s != '%') {
      out += *s++;
      continue;
    }
    ++s;
    if (*s == '%') {
      out += '%';
      ++s;
      continue;
    }
    // %[0][.][width]type: 0 pads numbers with zeros (after a sign or 0x) and
    // must come with the dot; the dot right-justifies; no width, no padding.
    bool zero = false;
    bool right = false;
    std::size_t width = 0;
    if (*s == '0') {
      zero = true;
      ++s;
      if (*s != '.') {
        error = "leading zero not followed by dot in affinity format";
        return false;
      }
    }
    if (*s == '.') {
      right = true;
      ++s;
    }
    if (*s >= '1' && *s <= '9') {
      char* end = nullptr;
      width = std::strtoul(s, &end, 10);
      s = end;
    } else if (zero || right) {
      error = "leading zero or right justification in affinity format requires size";
      return false;
    }
    char code = *s;
    if (code == '{') {
      for (const long_name& l : kLongNames) {
        const std::size_t len = std::strlen(l.name);
        if (std::strncmp(s + 1, l.name, len) == 0 && s[len + 1] == '}') {
          code = l.code;
          s += len + 1;
          break;
        }
      }
      if (code == '{') {
        const char* close = std::strchr(s + 1, '}');
        if (close != nullptr) {
          error =
              "unsupported long type name '" + std::string(s + 1, close) + "' in affinity format";
        } else {
          error = "unterminated long type name '" + std::string(s + 1) + "' in affinity format";
        }
        return false;
      }
    }
    if (std::strchr("tTLnNaHPiA", code) == nullptr || code == '\0') {
      error = std::string("unsupported type ") + code + " in affinity format";
      return false;
    }
    const std::string text = field(code);
    const bool numeric = std::strchr("tTLnNaPi", code) != nullptr;
    if (width <= text.size()) {
      out += text;
    } else if (zero && numeric) {
      std::size_t sign = 0;
      if (!text.empty() && text[0] == '-') {
        sign = 1;
      } else if (text.size() >= 2 && text[0] == '0' && text[1] == 'x') {
        sign = 2;
      }
      out += text.substr(0, sign);
      out.append(width - text.size(), '0');
      out += text.substr(sign);
    } else if (right) {
      out.append(width - text.size(), ' ');
      out += text;
    } else {
      out += text;
      out.append(width - text.size(), ' ');
    }
    ++s;
  }
  return true;
}

}  // namespace mote::omp
