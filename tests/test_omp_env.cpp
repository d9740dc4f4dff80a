// The OpenMP environment (src/omp/env.cpp): every variable with good and bad
// values and the exact text GNU's libgomp prints for the bad ones, the
// OMP_PLACES syntax and the places cut from a made-up sysfs, the
// OMP_DISPLAY_ENV text, the affinity format, the per-thread ICVs, and the
// depend arrays of the ABI (src/omp/gomp/abi.hpp).
//
// The expectations are GNU's answers (gcc 12); tools/omp/compare_gnu.py
// checks the same against GNU's library itself on the machine at hand.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "omp/gomp/abi.hpp"
#include "omp/icv.hpp"

namespace {

namespace omp = mote::omp;
using places_t = std::vector<omp::place>;

// A made-up machine: 2 sockets x 2 cores x 2 threads, numbered as Linux
// numbers them (CPU n and n+4 share a core), one last-level cache and one
// NUMA node per socket.
class fake_sysfs {
 public:
  fake_sysfs() {
    root_ = std::filesystem::temp_directory_path() /
            ("mote_omp_sysfs_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    for (int cpu = 0; cpu < 8; ++cpu) {
      const int core = cpu % 4;
      const std::string socket_list = core < 2 ? "0-1,4-5" : "2-3,6-7";
      const std::string dir = "cpu/cpu" + std::to_string(cpu);
      write(dir + "/topology/thread_siblings_list",
            std::to_string(core) + "," + std::to_string(core + 4));
      write(dir + "/topology/core_siblings_list", socket_list);
      write(dir + "/cache/index0/level", "1");
      write(dir + "/cache/index0/shared_cpu_list",
            std::to_string(core) + "," + std::to_string(core + 4));
      write(dir + "/cache/index1/level", "2");
      write(dir + "/cache/index1/shared_cpu_list",
            std::to_string(core) + "," + std::to_string(core + 4));
      write(dir + "/cache/index2/level", "3");
      write(dir + "/cache/index2/shared_cpu_list", socket_list);
    }
    write("node/online", "0-1");
    write("node/node0/cpulist", "0-1,4-5");
    write("node/node1/cpulist", "2-3,6-7");
  }
  ~fake_sysfs() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  fake_sysfs(const fake_sysfs&) = delete;
  fake_sysfs& operator=(const fake_sysfs&) = delete;

  std::string root() const { return root_.string(); }

 private:
  void write(const std::string& relative, const std::string& text) {
    const std::filesystem::path path = root_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text << "\n";
  }

  static inline int counter_ = 0;
  std::filesystem::path root_;
};

// Parses `vars` as the environment of a process that may use `cpus`.
struct parsed {
  omp::global_icvs icvs;
  std::string messages;
};

parsed parse(const std::map<std::string, std::string>& vars,
             std::vector<int> cpus = {0, 1, 2, 3, 4, 5, 6, 7},
             const std::string& sysfs = "/nonexistent") {
  omp::environment env;
  env.getenv = [vars](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  env.allowed_cpus = std::move(cpus);
  env.sysfs = sysfs;
  parsed p;
  p.icvs = omp::parse_environment(env, p.messages);
  return p;
}

// GNU's line for a bad value.
std::string invalid(const std::string& name) {
  return "\nlibgomp: Invalid value for environment variable " + name + "\n";
}
std::string error(const std::string& text) { return "\nlibgomp: " + text + "\n"; }

constexpr int kStaticMonotonic = static_cast<int>(omp::sched_monotonic | omp::sched_static);
constexpr int kGuidedMonotonic = static_cast<int>(omp::sched_monotonic | omp::sched_guided);

// ---- Defaults -----------------------------------------------------------------------

TEST(OmpEnv, DefaultsAreGnus) {
  const parsed p = parse({}, {0, 1, 2});
  const omp::task_icvs& t = p.icvs.initial;
  EXPECT_EQ(p.messages, "");
  EXPECT_EQ(t.nthreads, 3U);  // one per CPU the process may use
  EXPECT_EQ(t.nthreads_rest_len, 0U);
  EXPECT_FALSE(t.dyn);
  EXPECT_EQ(t.run_sched, omp::sched_dynamic);
  EXPECT_EQ(t.run_chunk, 1);
  EXPECT_EQ(t.bind, omp::bind_false);
  EXPECT_EQ(t.thread_limit, 0xffffffffU);
  EXPECT_EQ(t.max_active_levels, 1U);
  EXPECT_EQ(t.default_device, 0);
  EXPECT_FALSE(p.icvs.cancellation);
  EXPECT_EQ(p.icvs.max_task_priority, 0);
  EXPECT_EQ(p.icvs.stacksize, 0U);
  EXPECT_EQ(p.icvs.wait_policy, -1);
  EXPECT_EQ(p.icvs.spincount, 300000ULL);
  EXPECT_FALSE(p.icvs.spincount_set);
  EXPECT_TRUE(p.icvs.places.empty());
  EXPECT_EQ(p.icvs.num_procs, 3U);
  EXPECT_EQ(p.icvs.display_env, 0);
  EXPECT_EQ(p.icvs.affinity_format, "level %L thread %i affinity %A");
  EXPECT_EQ(p.icvs.default_allocator, 1U);
}

// ---- OMP_NUM_THREADS -------------------------------------------------------------------

TEST(OmpEnv, NumThreadsList) {
  const parsed p = parse({{"OMP_NUM_THREADS", " 4 , 3,2 "}});
  EXPECT_EQ(p.messages, "");
  const omp::task_icvs& t = p.icvs.initial;
  EXPECT_EQ(t.nthreads, 4U);
  ASSERT_EQ(t.nthreads_rest_len, 2U);
  EXPECT_EQ(t.nthreads_rest[0], 3U);
  EXPECT_EQ(t.nthreads_rest[1], 2U);
  // A list of more than one level asks for nesting.
  EXPECT_EQ(t.max_active_levels, omp::supported_active_levels);
}

TEST(OmpEnv, NumThreadsBadValuesKeepTheDefault) {
  for (const char* bad : {"0", "-3", "two", "", "4,", "4,,2", "4,0", "3 x", " "}) {
    const parsed p = parse({{"OMP_NUM_THREADS", bad}}, {0, 1});
    EXPECT_EQ(p.messages, invalid("OMP_NUM_THREADS")) << "OMP_NUM_THREADS='" << bad << "'";
    EXPECT_EQ(p.icvs.initial.nthreads, 2U) << bad;
    EXPECT_EQ(p.icvs.initial.nthreads_rest_len, 0U) << bad;
  }
}

// ---- OMP_SCHEDULE ----------------------------------------------------------------------

TEST(OmpEnv, Schedule) {
  struct expectation {
    const char* value;
    int sched;
    int chunk;
  };
  const expectation cases[] = {
      {"static", kStaticMonotonic, 0},
      {"STATIC,4", kStaticMonotonic, 4},
      {"dynamic", omp::sched_dynamic, 1},
      {"dynamic,0", omp::sched_dynamic, 1},
      {" guided , 7 ", omp::sched_guided, 7},
      {"auto", omp::sched_auto, 1},
      {"auto,5", omp::sched_auto, 5},
      {"monotonic:guided,7", kGuidedMonotonic, 7},
      {"nonmonotonic : static", omp::sched_static, 0},
      {"static,-1", kStaticMonotonic, -1},  // strtoul's wrap-round, kept as GNU keeps it
  };
  for (const expectation& c : cases) {
    const parsed p = parse({{"OMP_SCHEDULE", c.value}});
    EXPECT_EQ(p.messages, "") << c.value;
    EXPECT_EQ(p.icvs.initial.run_sched, c.sched) << c.value;
    EXPECT_EQ(p.icvs.initial.run_chunk, c.chunk) << c.value;
  }
}

TEST(OmpEnv, ScheduleBadValues) {
  const std::string unknown = error("Unknown value for environment variable OMP_SCHEDULE");
  const std::string bad_chunk =
      error("Invalid value for chunk size in environment variable OMP_SCHEDULE");
  struct expectation {
    const char* value;
    std::string message;
    int sched;  // what stays: a kind once read is kept
  };
  const expectation cases[] = {
      {"fast", unknown, omp::sched_dynamic},
      {"monotonic dynamic", unknown, omp::sched_dynamic},
      {"static 4", unknown, kStaticMonotonic},
      {"static,x", bad_chunk, kStaticMonotonic},
      {"static,", bad_chunk, kStaticMonotonic},
      {"guided,3x", bad_chunk, omp::sched_guided},
      {"dynamic,99999999999", bad_chunk, omp::sched_dynamic},
  };
  for (const expectation& c : cases) {
    const parsed p = parse({{"OMP_SCHEDULE", c.value}});
    EXPECT_EQ(p.messages, c.message) << c.value;
    EXPECT_EQ(p.icvs.initial.run_sched, c.sched) << c.value;
    EXPECT_EQ(p.icvs.initial.run_chunk, 1) << c.value;  // the default chunk stays
  }
}

// ---- Booleans, numbers, keywords -----------------------------------------------------------

TEST(OmpEnv, Booleans) {
  EXPECT_TRUE(parse({{"OMP_DYNAMIC", " TRUE "}}).icvs.initial.dyn);
  EXPECT_TRUE(parse({{"OMP_CANCELLATION", "true"}}).icvs.cancellation);
  EXPECT_TRUE(parse({{"OMP_DISPLAY_AFFINITY", "True"}}).icvs.display_affinity);
  EXPECT_FALSE(parse({{"OMP_DYNAMIC", "false"}}).icvs.initial.dyn);
  for (const char* bad : {"yes", "1", "", "maybe"}) {
    const parsed p = parse({{"OMP_DYNAMIC", bad}});
    EXPECT_EQ(p.messages, invalid("OMP_DYNAMIC")) << bad;
    EXPECT_FALSE(p.icvs.initial.dyn) << bad;
  }
  // A keyword with something after it is reported, and counts all the same.
  const parsed p = parse({{"OMP_DYNAMIC", "truex"}});
  EXPECT_EQ(p.messages, invalid("OMP_DYNAMIC"));
  EXPECT_TRUE(p.icvs.initial.dyn);
}

TEST(OmpEnv, Numbers) {
  EXPECT_EQ(parse({{"OMP_THREAD_LIMIT", "8"}}).icvs.initial.thread_limit, 8U);
  EXPECT_EQ(parse({{"OMP_THREAD_LIMIT", "99999999999"}}).icvs.initial.thread_limit, 0xffffffffU);
  EXPECT_EQ(parse({{"OMP_THREAD_LIMIT", "0"}}).messages, invalid("OMP_THREAD_LIMIT"));
  EXPECT_EQ(parse({{"OMP_DEFAULT_DEVICE", "0"}}).icvs.initial.default_device, 0);
  EXPECT_EQ(parse({{"OMP_DEFAULT_DEVICE", " 5 "}}).icvs.initial.default_device, 5);
  EXPECT_EQ(parse({{"OMP_DEFAULT_DEVICE", "-1"}}).messages, invalid("OMP_DEFAULT_DEVICE"));
  EXPECT_EQ(parse({{"OMP_MAX_TASK_PRIORITY", "10"}}).icvs.max_task_priority, 10);
  const parsed big = parse({{"OMP_MAX_TASK_PRIORITY", "3000000000"}});
  EXPECT_EQ(big.messages, invalid("OMP_MAX_TASK_PRIORITY"));
  EXPECT_EQ(big.icvs.max_task_priority, 0);
  EXPECT_EQ(parse({{"OMP_NUM_TEAMS", "4"}}).icvs.num_teams, 4);
  EXPECT_EQ(parse({{"OMP_NUM_TEAMS", "0"}}).messages, invalid("OMP_NUM_TEAMS"));
  EXPECT_EQ(parse({{"OMP_TEAMS_THREAD_LIMIT", "2"}}).icvs.teams_thread_limit, 2);
  EXPECT_EQ(parse({{"GOMP_DEBUG", "x"}}).messages, invalid("GOMP_DEBUG"));
}

TEST(OmpEnv, Nesting) {
  EXPECT_EQ(parse({{"OMP_NESTED", "true"}}).icvs.initial.max_active_levels, 255U);
  EXPECT_EQ(parse({{"OMP_NESTED", "false"}}).icvs.initial.max_active_levels, 1U);
  EXPECT_EQ(parse({{"OMP_MAX_ACTIVE_LEVELS", "3"}}).icvs.initial.max_active_levels, 3U);
  EXPECT_EQ(parse({{"OMP_MAX_ACTIVE_LEVELS", "0"}}).icvs.initial.max_active_levels, 0U);
  EXPECT_EQ(parse({{"OMP_MAX_ACTIVE_LEVELS", "1000"}}).icvs.initial.max_active_levels, 255U);
  // OMP_MAX_ACTIVE_LEVELS wins over OMP_NESTED, which wins over the lists.
  EXPECT_EQ(parse({{"OMP_MAX_ACTIVE_LEVELS", "2"}, {"OMP_NESTED", "true"}})
                .icvs.initial.max_active_levels,
            2U);
  EXPECT_EQ(
      parse({{"OMP_NUM_THREADS", "2,2"}, {"OMP_NESTED", "false"}}).icvs.initial.max_active_levels,
      1U);
  const parsed bad = parse({{"OMP_MAX_ACTIVE_LEVELS", "x"}, {"OMP_NESTED", "true"}});
  EXPECT_EQ(bad.messages, invalid("OMP_MAX_ACTIVE_LEVELS"));
  EXPECT_EQ(bad.icvs.initial.max_active_levels, 255U);
  EXPECT_EQ(parse({{"OMP_PROC_BIND", "spread,close"}}).icvs.initial.max_active_levels, 255U);
}

TEST(OmpEnv, Keywords) {
  EXPECT_EQ(parse({{"OMP_WAIT_POLICY", "active"}}).icvs.wait_policy, 1);
  EXPECT_EQ(parse({{"OMP_WAIT_POLICY", " PASSIVE "}}).icvs.wait_policy, 0);
  const parsed lazy = parse({{"OMP_WAIT_POLICY", "lazy"}});
  EXPECT_EQ(lazy.messages, invalid("OMP_WAIT_POLICY"));
  EXPECT_EQ(lazy.icvs.wait_policy, -1);
  EXPECT_EQ(parse({{"OMP_ALLOCATOR", " OMP_THREAD_MEM_ALLOC "}}).icvs.default_allocator, 8U);
  EXPECT_EQ(parse({{"OMP_ALLOCATOR", "omp_large_cap_mem_alloc"}}).icvs.default_allocator, 2U);
  const parsed bad = parse({{"OMP_ALLOCATOR", "omp_default_mem_allocx"}});
  EXPECT_EQ(bad.messages, invalid("OMP_ALLOCATOR"));
  EXPECT_EQ(bad.icvs.default_allocator, 1U);
  EXPECT_EQ(parse({{"OMP_TARGET_OFFLOAD", "MANDATORY"}}).icvs.target_offload, 1);
  EXPECT_EQ(parse({{"OMP_TARGET_OFFLOAD", "sometimes"}}).messages, invalid("OMP_TARGET_OFFLOAD"));
  EXPECT_EQ(parse({{"OMP_AFFINITY_FORMAT", "T%n"}}).icvs.affinity_format, "T%n");
}

TEST(OmpEnv, SpinCount) {
  EXPECT_EQ(parse({{"GOMP_SPINCOUNT", "5k"}}).icvs.spincount, 5000ULL);
  EXPECT_EQ(parse({{"GOMP_SPINCOUNT", " 2 M "}}).icvs.spincount, 2000000ULL);
  EXPECT_EQ(parse({{"GOMP_SPINCOUNT", "3t"}}).icvs.spincount, 3000000000000ULL);
  EXPECT_EQ(parse({{"GOMP_SPINCOUNT", "99999999999999G"}}).icvs.spincount, ~0ULL);
  EXPECT_EQ(parse({{"GOMP_SPINCOUNT", "INFINITY"}}).icvs.spincount, ~0ULL);
  EXPECT_TRUE(parse({{"GOMP_SPINCOUNT", "infinite"}}).icvs.spincount_set);
  EXPECT_EQ(parse({{"GOMP_SPINCOUNT", "infinitex"}}).messages, invalid("GOMP_SPINCOUNT"));
  EXPECT_EQ(parse({{"GOMP_SPINCOUNT", "5x"}}).messages, invalid("GOMP_SPINCOUNT"));
  // Without it, the wait policy decides.
  EXPECT_EQ(parse({{"OMP_WAIT_POLICY", "active"}}).icvs.spincount, 30000000000ULL);
  EXPECT_EQ(parse({{"OMP_WAIT_POLICY", "passive"}}).icvs.spincount, 0ULL);
  EXPECT_EQ(parse({{"GOMP_SPINCOUNT", "x"}, {"OMP_WAIT_POLICY", "active"}}).icvs.spincount,
            30000000000ULL);
}

TEST(OmpEnv, StackSize) {
  EXPECT_EQ(parse({{"OMP_STACKSIZE", "512"}}).icvs.stacksize, 512U * 1024);
  EXPECT_EQ(parse({{"OMP_STACKSIZE", " 4 M "}}).icvs.stacksize, 4U << 20);
  EXPECT_EQ(parse({{"OMP_STACKSIZE", "1g"}}).icvs.stacksize, std::size_t{1} << 30);
  EXPECT_EQ(parse({{"GOMP_STACKSIZE", "2048"}}).icvs.stacksize, 2048U * 1024);
  // OMP_STACKSIZE first; GOMP_STACKSIZE only when it is absent or bad.
  const parsed both = parse({{"OMP_STACKSIZE", "4X"}, {"GOMP_STACKSIZE", "2m"}});
  EXPECT_EQ(both.messages, invalid("OMP_STACKSIZE"));
  EXPECT_EQ(both.icvs.stacksize, 2U << 20);
  EXPECT_EQ(parse({{"OMP_STACKSIZE", "1m"}, {"GOMP_STACKSIZE", "bad"}}).messages, "");
  EXPECT_EQ(parse({{"OMP_STACKSIZE", "99999999999999G"}}).messages, invalid("OMP_STACKSIZE"));
  // Below the system's minimum: said, and kept.
  const parsed tiny = parse({{"OMP_STACKSIZE", "1B"}});
  EXPECT_EQ(tiny.messages, error("Stack size less than minimum of 16k"));
  EXPECT_EQ(tiny.icvs.stacksize, 1U);
}

TEST(OmpEnv, DisplayEnvValue) {
  EXPECT_EQ(parse({{"OMP_DISPLAY_ENV", "true"}}).icvs.display_env, 1);
  EXPECT_EQ(parse({{"OMP_DISPLAY_ENV", "VERBOSE"}}).icvs.display_env, 2);
  EXPECT_EQ(parse({{"OMP_DISPLAY_ENV", "false"}}).icvs.display_env, 0);
  const parsed nope = parse({{"OMP_DISPLAY_ENV", "nope"}});
  EXPECT_EQ(nope.messages, invalid("OMP_DISPLAY_ENV"));
  EXPECT_EQ(nope.icvs.display_env, 0);
  // A keyword with a bad tail: reported, and displayed all the same.
  const parsed tail = parse({{"OMP_DISPLAY_ENV", "TRUEish"}});
  EXPECT_EQ(tail.messages, invalid("OMP_DISPLAY_ENV"));
  EXPECT_EQ(tail.icvs.display_env, 1);
}

// Every variable bad at once: one line each, in GNU's order.
TEST(OmpEnv, MessagesComeInGnusOrder) {
  std::map<std::string, std::string> vars;
  for (const char* name : {"OMP_NUM_THREADS",
                           "OMP_SCHEDULE",
                           "OMP_DYNAMIC",
                           "OMP_PROC_BIND",
                           "OMP_PLACES",
                           "OMP_STACKSIZE",
                           "OMP_WAIT_POLICY",
                           "GOMP_SPINCOUNT",
                           "OMP_THREAD_LIMIT",
                           "OMP_MAX_ACTIVE_LEVELS",
                           "OMP_CANCELLATION",
                           "OMP_DEFAULT_DEVICE",
                           "OMP_MAX_TASK_PRIORITY",
                           "OMP_ALLOCATOR",
                           "OMP_TARGET_OFFLOAD",
                           "OMP_NUM_TEAMS",
                           "OMP_TEAMS_THREAD_LIMIT",
                           "OMP_DISPLAY_AFFINITY",
                           "OMP_NESTED",
                           "GOMP_CPU_AFFINITY",
                           "GOMP_STACKSIZE",
                           "GOMP_DEBUG"}) {
    vars[name] = "x";
  }
  std::string expected = error("Unknown value for environment variable OMP_SCHEDULE");
  for (const char* name :
       {"OMP_DYNAMIC", "OMP_CANCELLATION", "OMP_DISPLAY_AFFINITY", "OMP_DEFAULT_DEVICE",
        "OMP_TARGET_OFFLOAD", "OMP_MAX_TASK_PRIORITY", "OMP_ALLOCATOR", "OMP_THREAD_LIMIT",
        "GOMP_DEBUG", "OMP_NUM_THREADS", "OMP_NUM_TEAMS", "OMP_TEAMS_THREAD_LIMIT", "OMP_PROC_BIND",
        "OMP_MAX_ACTIVE_LEVELS", "OMP_NESTED", "OMP_PLACES"}) {
    expected += invalid(name);
  }
  expected += error("Invalid value for enviroment variable GOMP_CPU_AFFINITY");  // sic
  for (const char* name :
       {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_STACKSIZE", "GOMP_STACKSIZE"}) {
    expected += invalid(name);
  }
  EXPECT_EQ(parse(vars).messages, expected);
}

// ---- OMP_PROC_BIND ----------------------------------------------------------------------

TEST(OmpEnv, ProcBind) {
  const parsed list = parse({{"OMP_PROC_BIND", "primary , spread,CLOSE,master"}});
  EXPECT_EQ(list.messages, "");
  EXPECT_EQ(list.icvs.initial.bind, omp::bind_primary);
  ASSERT_EQ(list.icvs.initial.bind_rest_len, 3U);
  EXPECT_EQ(list.icvs.initial.bind_rest[0], omp::bind_spread);
  EXPECT_EQ(list.icvs.initial.bind_rest[1], omp::bind_close);
  EXPECT_EQ(list.icvs.initial.bind_rest[2], omp::bind_primary);
  for (const char* bad :
       {"true,close", "false,spread", "close,", "close,true", "nope", "", "close x"}) {
    const parsed p = parse({{"OMP_PROC_BIND", bad}});
    EXPECT_EQ(p.messages, invalid("OMP_PROC_BIND")) << bad;
    EXPECT_EQ(p.icvs.initial.bind, omp::bind_false) << bad;
  }
}

TEST(OmpEnv, BindingWithoutPlacesMakesOnePlacePerThread) {
  fake_sysfs sys;
  const parsed p = parse({{"OMP_PROC_BIND", "true"}}, {0, 1, 2, 3, 4, 5, 6, 7}, sys.root());
  EXPECT_EQ(p.icvs.initial.bind, omp::bind_true);
  EXPECT_EQ(p.icvs.places, (places_t{{0}, {4}, {1}, {5}, {2}, {6}, {3}, {7}}));
  // Without a readable sysfs: no places, quietly.
  const parsed none = parse({{"OMP_PROC_BIND", "close"}});
  EXPECT_EQ(none.messages, "");
  EXPECT_TRUE(none.icvs.places.empty());
}

// ---- OMP_PLACES: the level keywords over a made-up machine ---------------------------------

TEST(OmpEnv, PlacesOfLevels) {
  fake_sysfs sys;
  const std::vector<int> all = {0, 1, 2, 3, 4, 5, 6, 7};
  const auto places = [&](const char* value, std::vector<int> cpus) {
    const parsed p = parse({{"OMP_PLACES", value}}, std::move(cpus), sys.root());
    EXPECT_EQ(p.messages, "") << value;
    EXPECT_EQ(p.icvs.initial.bind, omp::bind_true) << value;  // places bind
    return p.icvs.places;
  };
  // SMT siblings side by side, cores in the order of their first CPU.
  EXPECT_EQ(places("threads", all), (places_t{{0}, {4}, {1}, {5}, {2}, {6}, {3}, {7}}));
  EXPECT_EQ(places("cores", all), (places_t{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(places("sockets", all), (places_t{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(places("ll_caches", all), (places_t{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(places("numa_domains", all), (places_t{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(places(" Threads ( 3 ) ", all), (places_t{{0}, {4}, {1}}));
  EXPECT_EQ(places("cores(9)", all), (places_t{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // Only the CPUs the process may use.
  EXPECT_EQ(places("threads", {1, 2, 5}), (places_t{{1}, {5}, {2}}));
  EXPECT_EQ(places("cores", {1, 2, 5}), (places_t{{1, 5}, {2}}));
  EXPECT_EQ(places("sockets", {2, 7}), (places_t{{2, 7}}));
}

TEST(OmpEnv, PlacesOfLevelsBadValues) {
  fake_sysfs sys;
  for (const char* bad :
       {"threads(2", "cores x", "sockets()", "ll_caches(-)", "numa_domains(2)x"}) {
    const parsed p = parse({{"OMP_PLACES", bad}}, {0, 1}, sys.root());
    EXPECT_EQ(p.messages, invalid("OMP_PLACES")) << bad;
    EXPECT_TRUE(p.icvs.places.empty()) << bad;
    EXPECT_EQ(p.icvs.initial.bind, omp::bind_false) << bad;
  }
  // A level with nothing in it: GNU's own words, without "Invalid value".
  const parsed zero = parse({{"OMP_PLACES", "threads(0)"}}, {0, 1}, sys.root());
  EXPECT_EQ(zero.messages, error("Error reading core/socket topology"));
  const parsed nosys = parse({{"OMP_PLACES", "cores"}}, {0, 1}, "/nonexistent");
  EXPECT_EQ(nosys.messages, error("Error reading core/socket topology"));
  EXPECT_EQ(nosys.icvs.initial.bind, omp::bind_false);
}

// ---- OMP_PLACES: explicit lists ------------------------------------------------------------

TEST(OmpEnv, PlacesLists) {
  const auto places = [](const char* value) {
    const parsed p = parse({{"OMP_PLACES", value}});
    EXPECT_EQ(p.messages, "") << value;
    return p.icvs.places;
  };
  EXPECT_EQ(places("{0}"), (places_t{{0}}));
  EXPECT_EQ(places("{0},{1}"), (places_t{{0}, {1}}));
  EXPECT_EQ(places("0,1"), (places_t{{0}, {1}}));
  EXPECT_EQ(places("{0:4}"), (places_t{{0, 1, 2, 3}}));
  EXPECT_EQ(places("{0:4:2}"), (places_t{{0, 2, 4, 6}}));
  EXPECT_EQ(places("{ 0 : 2 : 3 , 7 }"), (places_t{{0, 3, 7}}));
  EXPECT_EQ(places("{0,1}:4:2"), (places_t{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(places("{6}:3:-2"), (places_t{{6}, {4}, {2}}));
  EXPECT_EQ(places("{0}:2"), (places_t{{0}, {1}}));
  EXPECT_EQ(places("{0:4,!1}"), (places_t{{0, 2, 3}}));
  EXPECT_EQ(places("{!1,0:4}"), (places_t{{0, 2, 3}}));  // removals after additions
  EXPECT_EQ(places("{0,1},{2},!{0,1}"), (places_t{{2}}));
  EXPECT_EQ(places("{0},{1},!1"), (places_t{{0}}));
}

TEST(OmpEnv, PlacesListsBadValues) {
  struct expectation {
    const char* value;
    std::string messages;
  };
  const expectation cases[] = {
      {"", invalid("OMP_PLACES")},
      {"bogus", invalid("OMP_PLACES")},
      {"{0", invalid("OMP_PLACES")},
      {"{0},", invalid("OMP_PLACES")},
      {"{0:2, !1}", invalid("OMP_PLACES")},  // no space before '!'
      {"{0}:70000", invalid("OMP_PLACES")},
      {"{0}:0", invalid("OMP_PLACES")},
      {"!{0}:2", invalid("OMP_PLACES")},
      {"{!0:2}", invalid("OMP_PLACES")},
      {"{0}:40000,{1}:40000", invalid("OMP_PLACES")},  // more than 65536 places
      {"{100}", error("Logical CPU number 100 out of range") + invalid("OMP_PLACES")},
      {"{0:2:-1}", error("Logical CPU number 0+-1 out of range") + invalid("OMP_PLACES")},
      {"{60}:2:8", error("Logical CPU number 60+8 out of range") + invalid("OMP_PLACES")},
      {"{0:2,!5}", error("Logical CPU 5 to be removed is not in the set") + invalid("OMP_PLACES")},
      {"{0},!{1}",
       error("Trying to remove a non-existing place from list of places") + invalid("OMP_PLACES")},
      {"{0,1},!{0,1}", error("All places have been removed") + invalid("OMP_PLACES")},
      {"{20}", error("None of the places contain usable logical CPUs") + invalid("OMP_PLACES")},
  };
  for (const expectation& c : cases) {
    const parsed p = parse({{"OMP_PLACES", c.value}});
    EXPECT_EQ(p.messages, c.messages) << "OMP_PLACES='" << c.value << "'";
    EXPECT_TRUE(p.icvs.places.empty()) << c.value;
    EXPECT_EQ(p.icvs.initial.bind, omp::bind_false) << c.value;
  }
  // Places without a usable CPU go, and the rest stay.
  const parsed reduced = parse({{"OMP_PLACES", "{6}:4:1"}});
  EXPECT_EQ(reduced.messages,
            error("Number of places reduced from 4 to 2 because some places didn't contain any "
                  "usable logical CPUs"));
  EXPECT_EQ(reduced.icvs.places, (places_t{{6}, {7}}));
}

TEST(OmpEnv, ProcBindFalseDropsThePlaces) {
  const parsed good = parse({{"OMP_PLACES", "{0},{1}"}, {"OMP_PROC_BIND", "false"}});
  EXPECT_EQ(good.messages, "");
  EXPECT_TRUE(good.icvs.places.empty());
  EXPECT_EQ(good.icvs.initial.bind, omp::bind_false);
  // The syntax is still checked.
  EXPECT_EQ(parse({{"OMP_PLACES", "bogus"}, {"OMP_PROC_BIND", "false"}}).messages,
            invalid("OMP_PLACES"));
  // A binding other than false keeps the places, and its own kind.
  const parsed spread = parse({{"OMP_PLACES", "{0},{1}"}, {"OMP_PROC_BIND", "spread"}});
  EXPECT_EQ(spread.icvs.places, (places_t{{0}, {1}}));
  EXPECT_EQ(spread.icvs.initial.bind, omp::bind_spread);
}

TEST(OmpEnv, GompCpuAffinity) {
  EXPECT_EQ(parse({{"GOMP_CPU_AFFINITY", "0 3 1"}}).icvs.places, (places_t{{0}, {3}, {1}}));
  EXPECT_EQ(parse({{"GOMP_CPU_AFFINITY", "0-6:3,0x7"}}).icvs.places,
            (places_t{{0}, {3}, {6}, {7}}));
  EXPECT_EQ(parse({{"GOMP_CPU_AFFINITY", "1"}}).icvs.initial.bind, omp::bind_true);
  for (const char* bad : {"x", "2-1", "0-3:0", "70000"}) {
    EXPECT_EQ(parse({{"GOMP_CPU_AFFINITY", bad}}).messages,
              error("Invalid value for enviroment variable GOMP_CPU_AFFINITY"))
        << bad;
  }
  // OMP_PLACES wins; GOMP_CPU_AFFINITY is then read for its syntax only.
  EXPECT_EQ(parse({{"GOMP_CPU_AFFINITY", "0"}, {"OMP_PLACES", "{1}"}}).icvs.places,
            (places_t{{1}}));
}

// ---- OMP_DISPLAY_ENV --------------------------------------------------------------------

TEST(OmpEnv, DisplayEnvText) {
  const parsed p = parse({{"OMP_NUM_THREADS", "4,2"},
                          {"OMP_SCHEDULE", "guided,7"},
                          {"OMP_PROC_BIND", "spread,master"},
                          {"OMP_PLACES", "{0:2},{2:2},{5},{7}"},
                          {"OMP_STACKSIZE", "2M"},
                          {"OMP_WAIT_POLICY", "active"},
                          {"OMP_ALLOCATOR", "omp_pteam_mem_alloc"},
                          {"OMP_CANCELLATION", "true"}});
  EXPECT_EQ(p.messages, "");
  const std::string common =
      "\nOPENMP DISPLAY ENVIRONMENT BEGIN\n"
      "  _OPENMP = '201511'\n"
      "  OMP_DYNAMIC = 'FALSE'\n"
      "  OMP_NESTED = 'TRUE'\n"
      "  OMP_NUM_THREADS = '4,2'\n"
      "  OMP_SCHEDULE = 'GUIDED,7'\n"
      "  OMP_PROC_BIND = 'SPREAD,MASTER'\n"
      "  OMP_PLACES = '{0:2},{2:2},{5},{7}'\n"
      "  OMP_STACKSIZE = '2097152'\n"
      "  OMP_WAIT_POLICY = 'ACTIVE'\n"
      "  OMP_THREAD_LIMIT = '4294967295'\n"
      "  OMP_MAX_ACTIVE_LEVELS = '255'\n"
      "  OMP_NUM_TEAMS = '0'\n"
      "  OMP_TEAMS_THREAD_LIMIT = '0'\n"
      "  OMP_CANCELLATION = 'TRUE'\n"
      "  OMP_DEFAULT_DEVICE = '0'\n"
      "  OMP_MAX_TASK_PRIORITY = '0'\n"
      "  OMP_DISPLAY_AFFINITY = 'FALSE'\n"
      "  OMP_AFFINITY_FORMAT = 'level %L thread %i affinity %A'\n"
      "  OMP_ALLOCATOR = 'omp_pteam_mem_alloc'\n"
      "  OMP_TARGET_OFFLOAD = 'DEFAULT'\n";
  EXPECT_EQ(omp::display_env_text(p.icvs, false), common + "OPENMP DISPLAY ENVIRONMENT END\n");
  EXPECT_EQ(omp::display_env_text(p.icvs, true), common +
                                                     "  GOMP_CPU_AFFINITY = ''\n"
                                                     "  GOMP_STACKSIZE = '2097152'\n"
                                                     "  GOMP_SPINCOUNT = '30000000000'\n"
                                                     "OPENMP DISPLAY ENVIRONMENT END\n");
}

TEST(OmpEnv, DisplayEnvSchedules) {
  const auto shown = [](const char* value) {
    const std::string text = omp::display_env_text(parse({{"OMP_SCHEDULE", value}}).icvs, false);
    const std::size_t at = text.find("OMP_SCHEDULE = '") + 16;
    return text.substr(at, text.find('\'', at) - at);
  };
  EXPECT_EQ(shown("static"), "STATIC");
  EXPECT_EQ(shown("static,3"), "STATIC,3");
  EXPECT_EQ(shown("nonmonotonic:static,3"), "NONMONOTONIC:STATIC,3");
  EXPECT_EQ(shown("monotonic:static"), "STATIC");
  EXPECT_EQ(shown("monotonic:dynamic,3"), "MONOTONIC:DYNAMIC,3");
  EXPECT_EQ(shown("dynamic,1"), "DYNAMIC");
  EXPECT_EQ(shown("auto,5"), "AUTO");
  EXPECT_EQ(shown("static,x"), "STATIC,1");
}

// ---- Per-thread ICVs ------------------------------------------------------------------------

TEST(OmpEnv, TaskIcvsAreCopiesOfTheInitialOnes) {
  const omp::global_icvs& g = omp::globals();
  EXPECT_EQ(omp::current_icvs().nthreads, g.initial.nthreads);
  omp::task_icvs& mine = omp::writable_icvs();  // the initial task's own copy
  EXPECT_EQ(mine.nthreads, g.initial.nthreads);
  EXPECT_EQ(&omp::writable_icvs(), &mine);  // the same object on every call
  const unsigned before = mine.nthreads;
  mine.nthreads = before + 7;
  EXPECT_EQ(omp::current_icvs().nthreads, before + 7);
  EXPECT_EQ(g.initial.nthreads, before);  // the initial values stay
  unsigned seen_by_other = 0;
  std::thread other([&] { seen_by_other = omp::current_icvs().nthreads; });
  other.join();
  EXPECT_EQ(seen_by_other, g.initial.nthreads);  // another thread's initial task
  EXPECT_EQ(omp::current_icvs().nthreads, before + 7);
  mine.nthreads = before;
}

// ---- The affinity format ---------------------------------------------------------------------

std::string expand(const char* format) {
  std::string out;
  std::string err;
  const bool ok = omp::expand_affinity_format(
      format,
      [](char c) -> std::string {
        switch (c) {
          case 'n':
            return "3";
          case 'a':
            return "-1";
          case 'i':
            return "0x7f";
          case 'H':
            return "host";
          case 'A':
            return "0-3,8";
          default:
            return std::string(1, c);
        }
      },
      out, err);
  return ok ? out : "error: " + err;
}

TEST(OmpEnv, AffinityFormat) {
  EXPECT_EQ(expand("thread %n on %A"), "thread 3 on 0-3,8");
  EXPECT_EQ(expand("%{thread_num}|%{thread_affinity}|%{host}"), "3|0-3,8|host");
  EXPECT_EQ(expand("[%5n][%.5n][%0.5n][%0.5a][%0.6i][%.6H][%3A]"),
            "[3    ][    3][00003][-0001][0x007f][  host][0-3,8]");
  EXPECT_EQ(expand("100%%"), "100%");
  EXPECT_EQ(expand("%t%T%L%N%P"), "tTLNP");
  EXPECT_EQ(expand("%05n"), "error: leading zero not followed by dot in affinity format");
  EXPECT_EQ(expand("%.n"),
            "error: leading zero or right justification in affinity format requires size");
  EXPECT_EQ(expand("%{bogus}"), "error: unsupported long type name 'bogus' in affinity format");
  EXPECT_EQ(expand("%{thread_num"),
            "error: unterminated long type name 'thread_num' in affinity format");
  EXPECT_EQ(expand("%q"), "error: unsupported type q in affinity format");
}

TEST(OmpEnv, CpuRanges) {
  EXPECT_EQ(omp::cpu_ranges({}), "");
  EXPECT_EQ(omp::cpu_ranges({3}), "3");
  EXPECT_EQ(omp::cpu_ranges({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
}

// ---- The depend arrays gcc passes ---------------------------------------------------------

TEST(OmpAbi, DependShortForm) {
  int a = 0;
  int b = 0;
  int c = 0;
  // 3 dependences, the first 2 out/inout.
  void* depend[] = {reinterpret_cast<void*>(std::uintptr_t{3}),
                    reinterpret_cast<void*>(std::uintptr_t{2}), &a, &b, &c};
  std::vector<std::pair<void*, int>> seen;
  EXPECT_EQ(mote::omp::abi::for_each_depend(
                depend, [&](void* addr, int kind) { seen.emplace_back(addr, kind); }),
            3U);
  EXPECT_EQ(seen, (std::vector<std::pair<void*, int>>{
                      {&a, GOMP_DEPEND_OUT}, {&b, GOMP_DEPEND_OUT}, {&c, GOMP_DEPEND_IN}}));
}

TEST(OmpAbi, DependLongFormWithDepobjs) {
  int a = 0;
  int b = 0;
  int c = 0;
  int d = 0;
  int e = 0;
  mote_omp_depend_t obj_in{&d, GOMP_DEPEND_IN};
  mote_omp_depend_t obj_inout{&e, GOMP_DEPEND_INOUT};
  const auto n = [](std::uintptr_t v) { return reinterpret_cast<void*>(v); };
  // 0, 5 in all: 1 out, 1 mutexinoutset, 1 in, then 2 depobjs.
  void* depend[] = {n(0), n(5), n(1), n(1), n(1), &a, &b, &c, &obj_in, &obj_inout};
  std::vector<std::pair<void*, int>> seen;
  EXPECT_EQ(mote::omp::abi::for_each_depend(
                depend, [&](void* addr, int kind) { seen.emplace_back(addr, kind); }),
            5U);
  EXPECT_EQ(seen, (std::vector<std::pair<void*, int>>{{&a, GOMP_DEPEND_OUT},
                                                      {&b, GOMP_DEPEND_MUTEXINOUTSET},
                                                      {&c, GOMP_DEPEND_IN},
                                                      {&d, GOMP_DEPEND_IN},
                                                      {&e, GOMP_DEPEND_INOUT}}));
}

}  // namespace
