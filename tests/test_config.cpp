// Option resolution: binding syntax, MOTE_* variables, precedence, worker
// placement and the wording of errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "mote/error.hpp"
#include "mote/runtime.hpp"
#include "mote/topology.hpp"
#include "core/config.hpp"

namespace {

using mote::binding;
using mote::config_error;
using mote::runtime_options;
using mote::topology;
using mote::detail::resolve_config;

// A made-up machine, so that placement results do not depend on the host:
// `cores` cores with `smt` hardware threads each, numbered the way Linux
// usually numbers them (the first thread of every core, then the second...).
topology fake_topology(int cores, int smt) {
  topology t;
  for (int core = 0; core < cores; ++core) {
    for (int rank = 0; rank < smt; ++rank) {
      mote::cpu_info c;
      c.os_index = core + rank * cores;
      c.core = core;
      c.smt_rank = rank;
      t.cpus.push_back(c);
    }
  }
  t.num_cores = cores;
  t.num_packages = 1;
  t.num_numa_nodes = 1;
  t.source = "test";
  return t;
}

// Expects f to throw config_error whose message contains every needle.
template <class F>
void expect_config_error(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "expected config_error";
  } catch (const config_error& e) {
    const std::string msg = e.what();
    for (const std::string& n : needles) {
      EXPECT_NE(msg.find(n), std::string::npos) << "message '" << msg << "' lacks '" << n << "'";
    }
  }
}

// ---- binding::parse --------------------------------------------------------

TEST(config_binding_parse, Keywords) {
  EXPECT_EQ(binding::parse("none").mode, binding::kind::none);
  EXPECT_EQ(binding::parse("cores").mode, binding::kind::cores);
  EXPECT_EQ(binding::parse("threads").mode, binding::kind::threads);
  EXPECT_EQ(binding::parse("  cores\t\n").mode, binding::kind::cores);
  EXPECT_TRUE(binding::parse("cores").cpus.empty());
}

TEST(config_binding_parse, CpuLists) {
  binding b = binding::parse("0,2,4-7");
  EXPECT_EQ(b.mode, binding::kind::list);
  EXPECT_EQ(b.cpus, (std::vector<int>{0, 2, 4, 5, 6, 7}));

  EXPECT_EQ(binding::parse(" 3 ").cpus, (std::vector<int>{3}));
  EXPECT_EQ(binding::parse("5 , 1 - 2").cpus, (std::vector<int>{5, 1, 2}));
  EXPECT_EQ(binding::parse("4-4").cpus, (std::vector<int>{4}));
  // Order is kept: workers take the CPUs in the order given.
  EXPECT_EQ(binding::parse("7,3,5").cpus, (std::vector<int>{7, 3, 5}));
}

TEST(config_binding_parse, ToStringRoundTrips) {
  EXPECT_EQ(binding::parse("none").to_string(), "none");
  EXPECT_EQ(binding::parse("cores").to_string(), "cores");
  EXPECT_EQ(binding::parse("threads").to_string(), "threads");
  EXPECT_EQ(binding::parse("0,2,4-7").to_string(), "0,2,4-7");
  EXPECT_EQ(binding::parse("7,3,5").to_string(), "7,3,5");
  for (const char* text : {"0,2,4-7", "9,1-3,5", "12"}) {
    const binding b = binding::parse(text);
    EXPECT_EQ(binding::parse(b.to_string()).cpus, b.cpus) << text;
  }
}

TEST(config_binding_parse, Empty) {
  expect_config_error([] { binding::parse(""); }, {"MOTE_BIND", "''"});
  expect_config_error([] { binding::parse("   "); }, {"MOTE_BIND"});
}

TEST(config_binding_parse, Negative) {
  expect_config_error([] { binding::parse("-1"); }, {"MOTE_BIND", "'-1'", "negative"});
  expect_config_error([] { binding::parse("0,-3"); }, {"MOTE_BIND", "'0,-3'", "negative"});
  expect_config_error([] { binding::parse("2--3"); }, {"MOTE_BIND", "'2--3'", "negative"});
}

TEST(config_binding_parse, ReversedRange) {
  expect_config_error([] { binding::parse("7-4"); }, {"MOTE_BIND", "'7-4'", "7-4", "reversed"});
}

TEST(config_binding_parse, Garbage) {
  for (const char* text : {"abc", "0,x", "1-", "-", "1-2-3", "0,,1", "0,", ",0", "1.5", "cores,1",
                           "0x3", "2 3"}) {
    expect_config_error([&] { binding::parse(text); },
                        {"MOTE_BIND", "'" + std::string(text) + "'"});
  }
}

TEST(config_binding_parse, Duplicates) {
  expect_config_error([] { binding::parse("1,1"); }, {"MOTE_BIND", "'1,1'", "cpu 1"});
  expect_config_error([] { binding::parse("0-3,2"); }, {"MOTE_BIND", "'0-3,2'", "cpu 2"});
}

TEST(config_binding_parse, HugeNumbers) {
  expect_config_error([] { binding::parse("0-99999999999999999999"); },
                      {"MOTE_BIND", "99999999999999999999"});
  expect_config_error([] { binding::parse("0-4000000000"); }, {"MOTE_BIND", "4000000000"});
}

TEST(config_binding_parse, NamesTheCaller) {
  expect_config_error([] { binding::parse("zzz", "MY_SETTING"); }, {"MY_SETTING", "'zzz'"});
}

// ---- resolve_config with the environment ---------------------------------

// Saves the MOTE_* variables, clears them for the test, and puts them back.
class config_resolve : public ::testing::Test {
 protected:
  static constexpr const char* kVars[] = {"MOTE_NUM_THREADS", "MOTE_BIND", "MOTE_SPIN_US", "MOTE_SCHEDULER"};

  void SetUp() override {
    for (const char* name : kVars) {
      const char* v = std::getenv(name);
      saved_.push_back(v ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (std::size_t i = 0; i < saved_.size(); ++i) {
      if (saved_[i]) {
        setenv(kVars[i], saved_[i]->c_str(), 1);
      } else {
        unsetenv(kVars[i]);
      }
    }
  }
  static void set(const char* name, const char* value) { setenv(name, value, 1); }

  std::vector<std::optional<std::string>> saved_;
};

TEST_F(config_resolve, Defaults) {
  const topology t = fake_topology(4, 2);
  const auto cfg = resolve_config({}, t);
  EXPECT_EQ(cfg.num_workers, 4u);
  EXPECT_EQ(cfg.worker_cpus, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(cfg.spin, std::chrono::microseconds(100));
  EXPECT_EQ(cfg.deque_capacity, mote::detail::split_deque::kDefaultCapacity);
  EXPECT_EQ(cfg.policy, mote::scheduler_policy::work_stealing);
}

TEST_F(config_resolve, DefaultsOnTheRealMachine) {
  const topology& t = topology::system();
  const auto cfg = resolve_config({}, t);
  EXPECT_EQ(cfg.num_workers, static_cast<unsigned>(std::max(1, t.num_cores)));
  EXPECT_EQ(cfg.worker_cpus, t.first_cpu_of_each_core());
}

TEST_F(config_resolve, AtLeastOneWorkerOnAnEmptyTopology) {
  const topology empty;
  const auto cfg = resolve_config({}, empty);
  EXPECT_EQ(cfg.num_workers, 1u);
  EXPECT_EQ(cfg.worker_cpus, (std::vector<int>{-1}));
}

TEST_F(config_resolve, EnvironmentValues) {
  const topology t = fake_topology(4, 2);
  set("MOTE_NUM_THREADS", "3");
  set("MOTE_BIND", "threads");
  set("MOTE_SPIN_US", "0");
  const auto cfg = resolve_config({}, t);
  EXPECT_EQ(cfg.num_workers, 3u);
  EXPECT_EQ(cfg.worker_cpus, (std::vector<int>{0, 4, 1}));  // topo order: core 0's threads first
  EXPECT_EQ(cfg.spin, std::chrono::microseconds(0));
}

TEST_F(config_resolve, EnvironmentValuesAreTrimmed) {
  const topology t = fake_topology(2, 1);
  set("MOTE_NUM_THREADS", " 5 ");
  set("MOTE_SPIN_US", "\t250\n");
  const auto cfg = resolve_config({}, t);
  EXPECT_EQ(cfg.num_workers, 5u);
  EXPECT_EQ(cfg.spin, std::chrono::microseconds(250));
}

TEST_F(config_resolve, EmptyVariablesCountAsUnset) {
  const topology t = fake_topology(2, 2);
  set("MOTE_NUM_THREADS", "");
  set("MOTE_BIND", "");
  set("MOTE_SPIN_US", "");
  const auto cfg = resolve_config({}, t);
  EXPECT_EQ(cfg.num_workers, 2u);
  EXPECT_EQ(cfg.worker_cpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(cfg.spin, std::chrono::microseconds(100));
}

TEST_F(config_resolve, ExplicitOptionsBeatTheEnvironment) {
  const topology t = fake_topology(4, 1);
  set("MOTE_NUM_THREADS", "3");
  set("MOTE_BIND", "none");
  set("MOTE_SPIN_US", "7");
  runtime_options o;
  o.num_workers = 2;
  o.bind = binding::parse("3,1");
  o.spin = std::chrono::microseconds(42);
  o.deque_capacity = 256;
  const auto cfg = resolve_config(o, t);
  EXPECT_EQ(cfg.num_workers, 2u);
  EXPECT_EQ(cfg.worker_cpus, (std::vector<int>{3, 1}));
  EXPECT_EQ(cfg.spin, std::chrono::microseconds(42));
  EXPECT_EQ(cfg.deque_capacity, 256u);
}

TEST_F(config_resolve, ExplicitOptionsAreNotCheckedAgainstTheEnvironment) {
  // A broken variable that an explicit option overrides is never read.
  const topology t = fake_topology(2, 1);
  set("MOTE_NUM_THREADS", "abc");
  set("MOTE_BIND", "garbage");
  set("MOTE_SPIN_US", "-1");
  runtime_options o;
  o.num_workers = 1;
  o.bind = binding{};
  o.spin = std::chrono::microseconds(1);
  EXPECT_NO_THROW(resolve_config(o, t));
}

TEST_F(config_resolve, OversubscriptionIsAllowed) {
  const topology t = fake_topology(2, 1);
  set("MOTE_NUM_THREADS", "32");
  const auto cfg = resolve_config({}, t);
  EXPECT_EQ(cfg.num_workers, 32u);
  ASSERT_EQ(cfg.worker_cpus.size(), 32u);
}

TEST_F(config_resolve, RoundRobinWith32Workers) {
  const topology t = fake_topology(3, 2);  // cpus: core0 {0,3}, core1 {1,4}, core2 {2,5}
  runtime_options o;
  o.num_workers = 32;

  o.bind = binding::parse("cores");
  auto cfg = resolve_config(o, t);
  ASSERT_EQ(cfg.worker_cpus.size(), 32u);
  const std::vector<int> cores{0, 1, 2};
  for (std::size_t i = 0; i < 32; ++i) EXPECT_EQ(cfg.worker_cpus[i], cores[i % 3]) << i;

  o.bind = binding::parse("threads");
  cfg = resolve_config(o, t);
  ASSERT_EQ(cfg.worker_cpus.size(), 32u);
  const std::vector<int> threads{0, 3, 1, 4, 2, 5};
  for (std::size_t i = 0; i < 32; ++i) EXPECT_EQ(cfg.worker_cpus[i], threads[i % 6]) << i;

  o.bind = binding::parse("5,0-1");
  cfg = resolve_config(o, t);
  ASSERT_EQ(cfg.worker_cpus.size(), 32u);
  const std::vector<int> list{5, 0, 1};
  for (std::size_t i = 0; i < 32; ++i) EXPECT_EQ(cfg.worker_cpus[i], list[i % 3]) << i;

  o.bind = binding::parse("none");
  cfg = resolve_config(o, t);
  EXPECT_EQ(cfg.worker_cpus, std::vector<int>(32, -1));
}

TEST_F(config_resolve, NumThreadsErrors) {
  const topology t = fake_topology(2, 1);
  for (const char* bad : {"abc", "-3", "1.5", "4x", "0x10"}) {
    set("MOTE_NUM_THREADS", bad);
    expect_config_error([&] { resolve_config({}, t); },
                        {"MOTE_NUM_THREADS", "'" + std::string(bad) + "'", "1..4096"});
  }
  for (const char* bad : {"0", "4097", "99999999999999999999999"}) {
    set("MOTE_NUM_THREADS", bad);
    expect_config_error([&] { resolve_config({}, t); },
                        {"MOTE_NUM_THREADS", "'" + std::string(bad) + "'", "out of range"});
  }
  set("MOTE_NUM_THREADS", "abc");
  expect_config_error([&] { resolve_config({}, t); },
                      {"MOTE_NUM_THREADS='abc' is not a positive integer (expected 1..4096)"});
}

TEST_F(config_resolve, NumThreadsBounds) {
  const topology t = fake_topology(2, 1);
  set("MOTE_NUM_THREADS", "1");
  EXPECT_EQ(resolve_config({}, t).num_workers, 1u);
  set("MOTE_NUM_THREADS", "4096");
  EXPECT_EQ(resolve_config({}, t).num_workers, 4096u);
}

TEST_F(config_resolve, ExplicitZeroWorkers) {
  const topology t = fake_topology(2, 1);
  runtime_options o;
  o.num_workers = 0;
  expect_config_error([&] { resolve_config(o, t); }, {"runtime_options::num_workers", "0"});
}

TEST_F(config_resolve, SpinErrors) {
  const topology t = fake_topology(2, 1);
  for (const char* bad : {"fast", "-1", "10000001", "1e3"}) {
    set("MOTE_SPIN_US", bad);
    expect_config_error([&] { resolve_config({}, t); },
                        {"MOTE_SPIN_US", "'" + std::string(bad) + "'"});
  }
  set("MOTE_SPIN_US", "10000000");
  EXPECT_EQ(resolve_config({}, t).spin, std::chrono::seconds(10));

  unsetenv("MOTE_SPIN_US");
  runtime_options o;
  o.spin = std::chrono::microseconds(-5);
  expect_config_error([&] { resolve_config(o, t); }, {"runtime_options::spin", "-5"});
}

TEST_F(config_resolve, BindErrorsNameTheVariable) {
  const topology t = fake_topology(2, 1);
  set("MOTE_BIND", "2-1");
  expect_config_error([&] { resolve_config({}, t); }, {"MOTE_BIND", "'2-1'"});
  set("MOTE_BIND", "sockets");
  expect_config_error([&] { resolve_config({}, t); }, {"MOTE_BIND", "'sockets'"});
}

TEST_F(config_resolve, BindNamingAnUnavailableCpu) {
  const topology t = fake_topology(2, 1);  // cpus 0-1
  set("MOTE_BIND", "0,7");
  expect_config_error(
      [&] { resolve_config({}, t); },
      {"MOTE_BIND='0,7': cpu 7 is not available to this process (available: 0-1)"});

  // The same through an explicit option names the option.
  unsetenv("MOTE_BIND");
  runtime_options o;
  o.bind = binding::parse("1,5");
  expect_config_error([&] { resolve_config(o, t); }, {"runtime_options::bind", "1,5", "cpu 5"});
}

TEST_F(config_resolve, BindNamingANonexistentCpuOnTheRealMachine) {
  const topology& t = topology::system();
  set("MOTE_BIND", "100000");
  expect_config_error([&] { resolve_config({}, t); }, {"MOTE_BIND", "'100000'", "cpu 100000"});
}

TEST_F(config_resolve, ExplicitEmptyCpuList) {
  const topology t = fake_topology(2, 1);
  runtime_options o;
  o.bind = binding{binding::kind::list, {}};
  expect_config_error([&] { resolve_config(o, t); }, {"runtime_options::bind"});
}

// A caller seat with one worker leaves no worker with a thread: run(), and
// any task submitted from outside, would wait forever. Refused, naming the
// option and where the one worker came from; two workers are fine.
TEST_F(config_resolve, CallerSeatNeedsASecondWorker) {
  const topology t = fake_topology(4, 1);
  runtime_options o;
  o.caller_seat = true;
  o.num_workers = 1;
  expect_config_error([&] { resolve_config(o, t); },
                      {"runtime_options::caller_seat", "runtime_options::num_workers=1", "at least 2"});
  // The real runtime refuses it too (before the fix it started, and run() never returned).
  expect_config_error([&] { mote::runtime rt(o); }, {"runtime_options::caller_seat"});
  o.num_workers.reset();
  set("MOTE_NUM_THREADS", "1");
  expect_config_error([&] { resolve_config(o, t); }, {"runtime_options::caller_seat", "MOTE_NUM_THREADS='1'"});
  unsetenv("MOTE_NUM_THREADS");
  expect_config_error([&] { resolve_config(o, fake_topology(1, 1)); },
                      {"runtime_options::caller_seat", "1 core"});
  o.num_workers = 2;
  const auto cfg = resolve_config(o, t);
  EXPECT_TRUE(cfg.caller_seat);
  EXPECT_EQ(cfg.num_workers, 2u);
  // Without a seat, one worker is fine.
  o.caller_seat = false;
  o.num_workers = 1;
  EXPECT_EQ(resolve_config(o, t).num_workers, 1u);
}

TEST_F(config_resolve, DequeCapacity) {
  const topology t = fake_topology(1, 1);
  runtime_options o;
  for (std::uint32_t ok : {64u, 1024u, 1u << 24}) {
    o.deque_capacity = ok;
    EXPECT_EQ(resolve_config(o, t).deque_capacity, ok);
  }
  for (std::uint32_t bad : {0u, 32u, 100u, 1u << 25, 3000u}) {
    o.deque_capacity = bad;
    expect_config_error([&] { resolve_config(o, t); },
                        {"runtime_options::deque_capacity", std::to_string(bad)});
  }
}

}  // namespace
