// Topology detection and thread pinning, checked against what the kernel says
// about this process (sched_getaffinity, sched_getcpu).
#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "mote/topology.hpp"

namespace {

using mote::topology;

std::set<int> affinity_of_this_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  std::set<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.insert(cpu);
  }
  return cpus;
}

bool built_with_hwloc() {
  try {
    (void)topology::detect(topology::source_kind::hwloc);
    return true;
  } catch (const std::runtime_error&) {
    return false;
  }
}

// The invariants every source must keep.
void check_consistent(const topology& t) {
  SCOPED_TRACE("source " + t.source);
  ASSERT_FALSE(t.cpus.empty());
  EXPECT_GE(t.num_cores, 1);
  EXPECT_GE(t.num_packages, 1);
  EXPECT_GE(t.num_numa_nodes, 1);
  EXPECT_LE(t.num_cores, static_cast<int>(t.cpus.size()));

  std::set<int> seen_os;
  std::set<int> seen_cores;
  for (std::size_t i = 0; i < t.cpus.size(); ++i) {
    const mote::cpu_info& c = t.cpus[i];
    EXPECT_TRUE(seen_os.insert(c.os_index).second) << "cpu " << c.os_index << " listed twice";
    EXPECT_GE(c.core, 0);
    EXPECT_LT(c.core, t.num_cores);
    EXPECT_GE(c.package, 0);
    EXPECT_LT(c.package, t.num_packages);
    EXPECT_GE(c.numa_node, 0);
    EXPECT_LT(c.numa_node, t.num_numa_nodes);
    seen_cores.insert(c.core);
    // Ordered by core, then smt_rank; ranks count up from 0 within a core.
    if (i == 0 || t.cpus[i - 1].core != c.core) {
      EXPECT_EQ(c.smt_rank, 0) << "cpu " << c.os_index;
      if (i > 0) EXPECT_LT(t.cpus[i - 1].core, c.core);
    } else {
      EXPECT_EQ(c.smt_rank, t.cpus[i - 1].smt_rank + 1) << "cpu " << c.os_index;
      EXPECT_EQ(c.package, t.cpus[i - 1].package) << "a core spans two packages";
    }
    EXPECT_EQ(t.find(c.os_index), &c);
  }
  // Dense core numbering: every number in 0..num_cores-1 is used.
  EXPECT_EQ(static_cast<int>(seen_cores.size()), t.num_cores);

  const std::vector<int> firsts = t.first_cpu_of_each_core();
  ASSERT_EQ(static_cast<int>(firsts.size()), t.num_cores);
  for (int core = 0; core < t.num_cores; ++core) {
    const mote::cpu_info* c = t.find(firsts[static_cast<std::size_t>(core)]);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->core, core);
    EXPECT_EQ(c->smt_rank, 0);
  }

  for (const mote::cpu_info& c : t.cpus) {
    for (int sibling : t.smt_siblings(c.os_index)) {
      EXPECT_NE(sibling, c.os_index);
      ASSERT_NE(t.find(sibling), nullptr);
      EXPECT_EQ(t.find(sibling)->core, c.core);
    }
    const int same_core = static_cast<int>(std::count_if(
        t.cpus.begin(), t.cpus.end(), [&](const mote::cpu_info& o) { return o.core == c.core; }));
    EXPECT_EQ(static_cast<int>(t.smt_siblings(c.os_index).size()), same_core - 1);
  }

  for (const mote::cache_info& cache : t.caches) {
    EXPECT_GE(cache.level, 1);
    EXPECT_FALSE(cache.cpus.empty());
    for (int cpu : cache.cpus) EXPECT_NE(t.find(cpu), nullptr) << "cache lists cpu " << cpu;
  }
  // One entry per cache instance: no CPU sits under two caches of one level.
  std::map<int, std::set<int>> cpus_by_level;
  for (const mote::cache_info& cache : t.caches) {
    for (int cpu : cache.cpus) {
      EXPECT_TRUE(cpus_by_level[cache.level].insert(cpu).second)
          << "cpu " << cpu << " is under two L" << cache.level << " caches";
    }
  }
}

// Which CPUs share a core, independent of how cores are numbered.
std::set<std::set<int>> core_groups(const topology& t) {
  std::map<int, std::set<int>> by_core;
  for (const mote::cpu_info& c : t.cpus) by_core[c.core].insert(c.os_index);
  std::set<std::set<int>> groups;
  for (auto& [core, cpus] : by_core) groups.insert(cpus);
  return groups;
}

TEST(topology_detect, SystemMatchesTheAffinityMask) {
  const topology& t = topology::system();
  check_consistent(t);
  std::set<int> listed;
  for (const mote::cpu_info& c : t.cpus) listed.insert(c.os_index);
  EXPECT_EQ(listed, affinity_of_this_thread());
  EXPECT_TRUE(t.source == "hwloc" || t.source == "sysfs" || t.source == "fallback") << t.source;
  // automatic prefers hwloc whenever it works.
  if (built_with_hwloc()) EXPECT_EQ(t.source, "hwloc");
}

TEST(topology_detect, SystemIsDetectedOnce) {
  const topology* first = &topology::system();
  const topology* from_thread = nullptr;
  std::thread([&] { from_thread = &topology::system(); }).join();
  EXPECT_EQ(first, from_thread);
  EXPECT_EQ(first, &topology::system());
}

TEST(topology_detect, FindRejectsCpusOutsideTheMask) {
  const topology& t = topology::system();
  EXPECT_EQ(t.find(-1), nullptr);
  EXPECT_EQ(t.find(100000), nullptr);
  EXPECT_TRUE(t.smt_siblings(100000).empty());
}

TEST(topology_detect, SysfsIsConsistent) {
  const topology t = topology::detect(topology::source_kind::sysfs);
  EXPECT_EQ(t.source, "sysfs");
  check_consistent(t);
}

TEST(topology_detect, HwlocAndSysfsAgree) {
  if (!built_with_hwloc()) GTEST_SKIP() << "mote was built without hwloc";
  const topology h = topology::detect(topology::source_kind::hwloc);
  const topology s = topology::detect(topology::source_kind::sysfs);
  EXPECT_EQ(h.source, "hwloc");
  check_consistent(h);
  EXPECT_EQ(h.cpus.size(), s.cpus.size());
  EXPECT_EQ(h.num_cores, s.num_cores);
  EXPECT_EQ(h.num_packages, s.num_packages);
  EXPECT_EQ(core_groups(h), core_groups(s));
  // Both number cores in (package, core id) order, so the numbers match too.
  for (const mote::cpu_info& c : h.cpus) {
    const mote::cpu_info* other = s.find(c.os_index);
    ASSERT_NE(other, nullptr) << "cpu " << c.os_index;
    EXPECT_EQ(other->core, c.core) << "cpu " << c.os_index;
    EXPECT_EQ(other->smt_rank, c.smt_rank) << "cpu " << c.os_index;
  }
  EXPECT_EQ(h.first_cpu_of_each_core(), s.first_cpu_of_each_core());
}

TEST(topology_detect, HwlocWithoutHwlocThrows) {
  if (built_with_hwloc()) GTEST_SKIP() << "mote was built with hwloc";
  EXPECT_THROW(topology::detect(topology::source_kind::hwloc), std::runtime_error);
}

TEST(topology_pin, PinToEachAllowedCpu) {
  const topology& t = topology::system();
  for (const mote::cpu_info& c : t.cpus) {
    bool pinned = false;
    int ran_on = -1;
    std::set<int> mask_after;
    // A fresh thread per CPU, so the test thread keeps its own affinity.
    std::thread([&] {
      pinned = mote::pin_current_thread(c.os_index);
      // The kernel migrates the caller before sched_setaffinity returns.
      ran_on = sched_getcpu();
      mask_after = affinity_of_this_thread();
    }).join();
    EXPECT_TRUE(pinned) << "cpu " << c.os_index;
    EXPECT_EQ(ran_on, c.os_index);
    EXPECT_EQ(mask_after, std::set<int>{c.os_index});
  }
}

TEST(topology_pin, PinToAnImpossibleCpuFailsAndChangesNothing) {
  std::set<int> before;
  std::set<int> after;
  bool pinned_far = true;
  bool pinned_negative = true;
  std::thread([&] {
    before = affinity_of_this_thread();
    pinned_far = mote::pin_current_thread(100000);
    pinned_negative = mote::pin_current_thread(-1);
    after = affinity_of_this_thread();
  }).join();
  EXPECT_FALSE(pinned_far);
  EXPECT_FALSE(pinned_negative);
  EXPECT_EQ(before, after);
}

}  // namespace
