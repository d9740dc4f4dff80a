// The machine as mote sees it: cores, SMT siblings, NUMA nodes and caches,
// restricted to the CPUs this process may run on.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "mote/export.hpp"

namespace mote {

struct cpu_info {
  int os_index = 0;    // the kernel's CPU number (as in taskset, sched_setaffinity)
  int core = 0;        // dense core number, 0..num_cores-1
  int package = 0;     // socket
  int numa_node = 0;   // dense NUMA node number
  int smt_rank = 0;    // 0 for the first hardware thread of its core, 1 for the next...
};

struct cache_info {
  int level = 0;                 // 1, 2, 3...
  std::size_t size_bytes = 0;
  std::size_t line_bytes = 0;
  std::vector<int> cpus;         // os indices of the allowed CPUs that share it
};

// Topology of the allowed CPUs. `system()` detects once per affinity mask of
// the calling thread (hwloc when mote was built with it, else sysfs) and
// caches the result: a thread whose mask was narrowed (mote::mpi places an
// MPI rank on its share of the node) sees the narrower machine.
//
//   const mote::topology& t = mote::topology::system();
//   std::printf("%d cores, %zu cpus, from %s\n", t.num_cores, t.cpus.size(), t.source.c_str());
class MOTE_API topology {
 public:
  enum class source_kind { automatic, hwloc, sysfs };

  static const topology& system();
  // Fresh detection from one source; throws std::runtime_error when the source
  // is unavailable (hwloc not built in, /sys not mounted).
  static topology detect(source_kind source = source_kind::automatic);

  std::vector<cpu_info> cpus;    // ordered by core, then smt_rank
  std::vector<cache_info> caches;
  int num_cores = 0;
  int num_packages = 0;
  int num_numa_nodes = 0;
  std::string source;            // "hwloc" or "sysfs"

  // One CPU per core (the first hardware thread of each), in core order.
  std::vector<int> first_cpu_of_each_core() const;
  // The other hardware threads of cpu's core (empty when the core has no SMT).
  std::vector<int> smt_siblings(int os_index) const;
  // The entry for an os index, or nullptr when that CPU is not allowed.
  const cpu_info* find(int os_index) const;
};

// Pin the calling thread to one CPU. Returns false (and leaves the affinity
// unchanged) when the kernel refuses.
MOTE_API bool pin_current_thread(int os_index) noexcept;

}  // namespace mote
