// Topology detection: hwloc when mote was built with it, else Linux sysfs,
// else a flat list of the allowed CPUs. Every source is restricted to the CPUs
// in the process's affinity mask (sched_getaffinity), because that is where
// workers can run: taskset, cgroup cpusets and container limits all show up
// there and nowhere else.
#include "mote/topology.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#if defined(MOTE_HAVE_HWLOC)
#  include <hwloc.h>
#endif

namespace mote {
namespace {

// ---- The process's allowed CPUs --------------------------------------------

// sched_getaffinity with a mask large enough for the kernel's CPU count: the
// fixed cpu_set_t holds 1024 CPUs, and the call fails with EINVAL on machines
// configured for more, so grow until the kernel accepts the size.
std::vector<int> allowed_cpus() {
  std::vector<int> result;
  for (int ncpus = 1024; ncpus <= (1 << 22); ncpus *= 2) {
    cpu_set_t* set = CPU_ALLOC(ncpus);
    if (set == nullptr) break;
    const std::size_t bytes = CPU_ALLOC_SIZE(ncpus);
    CPU_ZERO_S(bytes, set);
    if (sched_getaffinity(0, bytes, set) == 0) {
      for (int cpu = 0; cpu < ncpus; ++cpu) {
        if (CPU_ISSET_S(cpu, bytes, set)) result.push_back(cpu);
      }
      CPU_FREE(set);
      return result;
    }
    CPU_FREE(set);
    if (errno != EINVAL) break;
  }
  // No mask at all (a seccomp filter, say): assume the online CPUs, which is
  // what the kernel would let an unrestricted process use.
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  for (long cpu = 0; cpu < std::max(online, 1L); ++cpu) result.push_back(static_cast<int>(cpu));
  return result;
}

// ---- Source-independent assembly -------------------------------------------

// What a source reports for one CPU, before dense numbering. The core key is
// (package_id, core_id, core_first_cpu): core_id alone repeats across packages
// and, on some multi-die parts, across dies of one package; the lowest CPU of
// the core's sibling set (allowed or not) tells such cores apart and is the
// same whichever source read it.
struct raw_cpu {
  int os_index = 0;
  long package_id = 0;
  long core_id = 0;
  int core_first_cpu = 0;
  long numa_id = 0;
};

// A cache as a source reports it; `key` identifies the instance, so that the
// copies seen from each CPU sharing it collapse into one entry.
struct raw_cache {
  int level = 0;
  std::size_t size_bytes = 0;
  std::size_t line_bytes = 0;
  std::vector<int> cpus;  // allowed CPUs only, ascending
};

// Dense numbers in ascending key order: 0 for the smallest key, and so on.
template <class Key>
std::map<Key, int> dense_numbers(const std::set<Key>& keys) {
  std::map<Key, int> numbers;
  int next = 0;
  for (const Key& k : keys) numbers.emplace(k, next++);
  return numbers;
}

topology assemble(const std::vector<raw_cpu>& raw, std::vector<raw_cache> raw_caches,
                  std::string source) {
  using core_key = std::tuple<long, long, int>;
  std::set<long> package_ids;
  std::set<long> numa_ids;
  std::set<core_key> core_keys;
  for (const raw_cpu& r : raw) {
    package_ids.insert(r.package_id);
    numa_ids.insert(r.numa_id);
    core_keys.insert({r.package_id, r.core_id, r.core_first_cpu});
  }
  const auto package_of = dense_numbers(package_ids);
  const auto numa_of = dense_numbers(numa_ids);
  const auto core_of = dense_numbers(core_keys);

  topology t;
  t.cpus.reserve(raw.size());
  for (const raw_cpu& r : raw) {
    cpu_info c;
    c.os_index = r.os_index;
    c.core = core_of.at({r.package_id, r.core_id, r.core_first_cpu});
    c.package = package_of.at(r.package_id);
    c.numa_node = numa_of.at(r.numa_id);
    t.cpus.push_back(c);
  }
  // smt_rank counts allowed hardware threads only, so that rank 0 is a CPU
  // this process can actually be pinned to even when the core's first sibling
  // is outside the mask.
  std::sort(t.cpus.begin(), t.cpus.end(), [](const cpu_info& a, const cpu_info& b) {
    return std::tie(a.core, a.os_index) < std::tie(b.core, b.os_index);
  });
  for (std::size_t i = 0; i < t.cpus.size(); ++i) {
    const bool same_core = i > 0 && t.cpus[i - 1].core == t.cpus[i].core;
    t.cpus[i].smt_rank = same_core ? t.cpus[i - 1].smt_rank + 1 : 0;
  }
  t.num_cores = static_cast<int>(core_keys.size());
  t.num_packages = static_cast<int>(package_ids.size());
  t.num_numa_nodes = static_cast<int>(numa_ids.size());

  std::sort(raw_caches.begin(), raw_caches.end(), [](const raw_cache& a, const raw_cache& b) {
    return std::tie(a.level, a.cpus) < std::tie(b.level, b.cpus);
  });
  for (raw_cache& rc : raw_caches) {
    if (rc.cpus.empty()) continue;
    cache_info c;
    c.level = rc.level;
    c.size_bytes = rc.size_bytes;
    c.line_bytes = rc.line_bytes;
    c.cpus = std::move(rc.cpus);
    t.caches.push_back(std::move(c));
  }
  t.source = std::move(source);
  return t;
}

// One core per allowed CPU, one package, one node, no caches: the shape to
// assume when nothing describes the machine.
topology flat_topology(const std::vector<int>& allowed) {
  std::vector<raw_cpu> raw;
  raw.reserve(allowed.size());
  for (int cpu : allowed) raw.push_back({cpu, 0, cpu, cpu, 0});
  return assemble(raw, {}, "fallback");
}

// ---- sysfs -----------------------------------------------------------------

std::optional<std::string> read_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ' || line.back() == '\r')) {
    line.pop_back();
  }
  return line;
}

std::optional<long> read_long(const std::filesystem::path& path) {
  const auto line = read_line(path);
  if (!line) return std::nullopt;
  long value = 0;
  const char* end = line->data() + line->size();
  const auto [ptr, ec] = std::from_chars(line->data(), end, value);
  if (ec != std::errc{} || ptr != end) return std::nullopt;
  return value;
}

// The kernel's cpulist format ("0-3,8,10-11"); an empty string is an empty
// list (a memory-only NUMA node). nullopt when malformed.
std::optional<std::vector<int>> parse_kernel_cpu_list(std::string_view text) {
  std::vector<int> cpus;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const std::size_t dash = item.find('-');
    int first = 0;
    int last = 0;
    const std::string_view a = item.substr(0, dash);
    if (std::from_chars(a.data(), a.data() + a.size(), first).ptr != a.data() + a.size() ||
        a.empty()) {
      return std::nullopt;
    }
    last = first;
    if (dash != std::string_view::npos) {
      const std::string_view b = item.substr(dash + 1);
      if (std::from_chars(b.data(), b.data() + b.size(), last).ptr != b.data() + b.size() ||
          b.empty()) {
        return std::nullopt;
      }
    }
    if (first < 0 || last < first) return std::nullopt;
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
  }
  return cpus;
}

// "32K", "1024K", "32M", or a plain byte count.
std::size_t parse_cache_size(const std::string& text) {
  std::size_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{}) return 0;
  if (ptr == end) return value;
  switch (*ptr) {
    case 'K': return value << 10;
    case 'M': return value << 20;
    case 'G': return value << 30;
    default: return 0;
  }
}

std::vector<int> intersect(const std::vector<int>& sorted_a, const std::vector<int>& sorted_b) {
  std::vector<int> out;
  std::set_intersection(sorted_a.begin(), sorted_a.end(), sorted_b.begin(), sorted_b.end(),
                        std::back_inserter(out));
  return out;
}

topology detect_sysfs(const std::vector<int>& allowed) {
  namespace fs = std::filesystem;
  const fs::path cpu_root = "/sys/devices/system/cpu";
  const fs::path node_root = "/sys/devices/system/node";

  // CPU -> NUMA node. A kernel without NUMA support has no node directory;
  // then every CPU is on node 0.
  std::map<int, long> node_of_cpu;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(node_root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("node", 0) != 0) continue;
    long node = 0;
    const char* first = name.data() + 4;
    const char* last = name.data() + name.size();
    if (first == last || std::from_chars(first, last, node).ptr != last) continue;
    const auto list = read_line(entry.path() / "cpulist");
    if (!list) continue;
    if (const auto cpus = parse_kernel_cpu_list(*list)) {
      for (int cpu : *cpus) node_of_cpu.emplace(cpu, node);
    }
  }

  std::vector<raw_cpu> raw;
  // Cache instances keyed by (level, type, full sharing set): every CPU in the
  // set reports the same instance, and two instances never share a CPU set at
  // the same level and type.
  std::map<std::tuple<int, std::string, std::vector<int>>, raw_cache> caches;
  for (int cpu : allowed) {
    const fs::path dir = cpu_root / ("cpu" + std::to_string(cpu));
    const auto core_id = read_long(dir / "topology/core_id");
    const auto package_id = read_long(dir / "topology/physical_package_id");
    if (!core_id || !package_id) {
      throw std::runtime_error("mote: cannot read " + (dir / "topology").string() +
                               " (is /sys mounted?)");
    }
    std::optional<std::vector<int>> siblings;
    if (const auto text = read_line(dir / "topology/thread_siblings_list")) {
      siblings = parse_kernel_cpu_list(*text);
    }
    raw_cpu r;
    r.os_index = cpu;
    r.core_id = *core_id;
    // Some virtual machines report -1 for the package; that still names one package.
    r.package_id = *package_id;
    r.core_first_cpu = siblings && !siblings->empty() ? siblings->front() : cpu;
    const auto node = node_of_cpu.find(cpu);
    r.numa_id = node == node_of_cpu.end() ? 0 : node->second;
    raw.push_back(r);

    for (int index = 0;; ++index) {
      const fs::path cache_dir = dir / "cache" / ("index" + std::to_string(index));
      if (!fs::exists(cache_dir, ec)) break;
      const auto type = read_line(cache_dir / "type");
      const auto level = read_long(cache_dir / "level");
      const auto shared = read_line(cache_dir / "shared_cpu_list");
      if (!type || !level || !shared) continue;
      // Instruction caches do not hold the data workers share, so placement
      // decisions have no use for them.
      if (*type != "Data" && *type != "Unified") continue;
      auto sharing = parse_kernel_cpu_list(*shared);
      if (!sharing) continue;
      std::sort(sharing->begin(), sharing->end());
      auto key = std::make_tuple(static_cast<int>(*level), *type, *sharing);
      if (caches.count(key) != 0) continue;
      raw_cache c;
      c.level = static_cast<int>(*level);
      if (const auto size = read_line(cache_dir / "size")) c.size_bytes = parse_cache_size(*size);
      if (const auto line = read_long(cache_dir / "coherency_line_size"); line && *line > 0) {
        c.line_bytes = static_cast<std::size_t>(*line);
      }
      c.cpus = intersect(*sharing, allowed);
      caches.emplace(std::move(key), std::move(c));
    }
  }
  std::vector<raw_cache> cache_list;
  cache_list.reserve(caches.size());
  for (auto& [key, c] : caches) cache_list.push_back(std::move(c));
  return assemble(raw, std::move(cache_list), "sysfs");
}

// ---- hwloc -----------------------------------------------------------------

#if defined(MOTE_HAVE_HWLOC)

// Owns an hwloc topology so that every exit path destroys it.
class hwloc_handle {
 public:
  hwloc_handle() {
    if (hwloc_topology_init(&topo_) != 0) throw std::runtime_error("mote: hwloc_topology_init failed");
    if (hwloc_topology_load(topo_) != 0) {
      hwloc_topology_destroy(topo_);
      throw std::runtime_error("mote: hwloc_topology_load failed");
    }
  }
  ~hwloc_handle() { hwloc_topology_destroy(topo_); }
  hwloc_handle(const hwloc_handle&) = delete;
  hwloc_handle& operator=(const hwloc_handle&) = delete;
  hwloc_topology_t get() const noexcept { return topo_; }

 private:
  hwloc_topology_t topo_{};
};

// os_index when hwloc knows it, else the logical index (still unique per type).
long index_of(hwloc_obj_t obj) {
  return obj->os_index == HWLOC_UNKNOWN_INDEX ? static_cast<long>(obj->logical_index)
                                              : static_cast<long>(obj->os_index);
}

std::vector<int> allowed_in(hwloc_const_cpuset_t set, const std::vector<int>& allowed) {
  std::vector<int> out;
  for (int cpu : allowed) {
    if (hwloc_bitmap_isset(set, static_cast<unsigned>(cpu))) out.push_back(cpu);
  }
  return out;
}

topology detect_hwloc(const std::vector<int>& allowed) {
  hwloc_handle handle;
  hwloc_topology_t topo = handle.get();

  // hwloc 2 hangs NUMA nodes off the side of the tree as memory children, so
  // they are not ancestors of a PU; look each CPU up in the nodes' cpusets.
  std::vector<hwloc_obj_t> nodes;
  for (hwloc_obj_t n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, nullptr); n != nullptr;
       n = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, n)) {
    nodes.push_back(n);
  }

  std::vector<raw_cpu> raw;
  for (int cpu : allowed) {
    hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(topo, static_cast<unsigned>(cpu));
    // A CPU in our mask that hwloc does not list (hwloc restricts itself to the
    // cgroup's cpuset, which the affinity mask should lie within): not usable.
    if (pu == nullptr) continue;
    raw_cpu r;
    r.os_index = cpu;
    if (hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu)) {
      r.core_id = index_of(core);
      r.core_first_cpu = hwloc_bitmap_first(core->cpuset);
    } else {
      // No core level (some virtual machines): each PU is its own core.
      r.core_id = cpu;
      r.core_first_cpu = cpu;
    }
    if (hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pu)) {
      r.package_id = index_of(package);
    }
    for (hwloc_obj_t n : nodes) {
      if (n->cpuset != nullptr && hwloc_bitmap_isset(n->cpuset, static_cast<unsigned>(cpu))) {
        r.numa_id = index_of(n);
        break;
      }
    }
    raw.push_back(r);
  }
  if (raw.empty()) throw std::runtime_error("mote: hwloc lists none of the allowed CPUs");

  std::vector<raw_cache> caches;
  const int depth_count = hwloc_topology_get_depth(topo);
  for (int depth = 0; depth < depth_count; ++depth) {
    // Data and unified caches only (hwloc_obj_type_is_dcache excludes the
    // instruction caches), one hwloc object per cache instance.
    if (!hwloc_obj_type_is_dcache(hwloc_get_depth_type(topo, depth))) continue;
    const unsigned count = hwloc_get_nbobjs_by_depth(topo, depth);
    for (unsigned i = 0; i < count; ++i) {
      hwloc_obj_t obj = hwloc_get_obj_by_depth(topo, depth, i);
      raw_cache c;
      c.level = static_cast<int>(obj->attr->cache.depth);
      c.size_bytes = static_cast<std::size_t>(obj->attr->cache.size);
      c.line_bytes = obj->attr->cache.linesize;
      c.cpus = allowed_in(obj->cpuset, allowed);
      if (!c.cpus.empty()) caches.push_back(std::move(c));
    }
  }
  return assemble(raw, std::move(caches), "hwloc");
}

#endif  // MOTE_HAVE_HWLOC

topology detect_for(topology::source_kind source, const std::vector<int>& allowed) {
  switch (source) {
    case topology::source_kind::hwloc:
#if defined(MOTE_HAVE_HWLOC)
      return detect_hwloc(allowed);
#else
      throw std::runtime_error("mote: topology source hwloc requested, but mote was built without hwloc");
#endif
    case topology::source_kind::sysfs:
      return detect_sysfs(allowed);
    case topology::source_kind::automatic:
      break;
  }
  // Each source is tried in turn; a failure here only costs precision (the
  // fallback still lists every CPU we may use), so it is not an error.
#if defined(MOTE_HAVE_HWLOC)
  try {
    return detect_hwloc(allowed);
  } catch (const std::exception&) {
  }
#endif
  try {
    return detect_sysfs(allowed);
  } catch (const std::exception&) {
  }
  return flat_topology(allowed);
}

}  // namespace

topology topology::detect(source_kind source) { return detect_for(source, allowed_cpus()); }

const topology& topology::system() {
  // Detected once per affinity mask of the calling thread: a process whose
  // mask changes (an MPI rank that mote::mpi placed on its share of a node)
  // sees its new CPUs in what it creates afterwards. Every result is kept
  // for the life of the process (callers hold references), one per mask
  // seen; leaked on purpose, so that no static destructor frees one that a
  // thread still reads.
  struct seen_mask {
    std::vector<int> allowed;
    std::unique_ptr<topology> topo;
  };
  static std::mutex* const mutex = new std::mutex;
  static std::vector<seen_mask>* const seen = new std::vector<seen_mask>;
  std::vector<int> allowed = allowed_cpus();
  std::lock_guard<std::mutex> lock(*mutex);
  for (const seen_mask& s : *seen) {
    if (s.allowed == allowed) return *s.topo;
  }
  auto topo = std::make_unique<topology>(detect_for(source_kind::automatic, allowed));
  seen->push_back({std::move(allowed), std::move(topo)});
  return *seen->back().topo;
}

std::vector<int> topology::first_cpu_of_each_core() const {
  std::vector<int> out;
  out.reserve(static_cast<std::size_t>(num_cores));
  // cpus is ordered by core, then smt_rank, so rank 0 entries come in core order.
  for (const cpu_info& c : cpus) {
    if (c.smt_rank == 0) out.push_back(c.os_index);
  }
  return out;
}

std::vector<int> topology::smt_siblings(int os_index) const {
  std::vector<int> out;
  const cpu_info* self = find(os_index);
  if (self == nullptr) return out;
  for (const cpu_info& c : cpus) {
    if (c.core == self->core && c.os_index != os_index) out.push_back(c.os_index);
  }
  return out;
}

const cpu_info* topology::find(int os_index) const {
  for (const cpu_info& c : cpus) {
    if (c.os_index == os_index) return &c;
  }
  return nullptr;
}

}  // namespace mote
