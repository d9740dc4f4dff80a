// Tracing (MOTE_TRACE) and statistics (MOTE_STATS): the files and the report
// they produce, checked against the work that was run.
//
// Tracing is configured once per process, so this program sets MOTE_TRACE for
// itself in main() (to a scratch file), and runs itself as a child process to
// see other settings: `test_trace --probe <mode>`.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mote/mote.hpp"
#include "test_util.hpp"

extern char** environ;

namespace {

std::string self_path;
std::string trace_path;

using mote_test::fib;

long named_fib(int n) {
  if (n < 2) return n;
  auto [a, b] = mote::join([&] { return named_fib(n - 1); },
                           mote::named("fib \"right\"\\", [&] { return named_fib(n - 2); }));
  return a + b;
}

// Joins made by fib(n): one per call with n >= 2, fib(n + 1) - 1 in all.
long joins_of_fib(int n) { return mote_test::serial_fib(n + 1) - 1; }

rapidjson::Document read_trace(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  rapidjson::Document d;
  d.Parse(text.str().c_str());
  EXPECT_FALSE(d.HasParseError()) << "trace file " << path << " is not valid JSON (error "
                                  << d.GetParseError() << " at " << d.GetErrorOffset() << ")";
  return d;
}

struct event_counts {
  long tasks = 0;
  long named = 0;
  long spawns = 0;
  long named_spawns = 0;
  long join_waits = 0;
  long group_waits = 0;
  long parks = 0;
  long steals = 0;
  std::map<std::string, int> threads;  // name -> tid
};

// Checks the structure of every event and counts them; spans must nest per
// thread (a child starts and ends inside its parent).
event_counts check_events(const rapidjson::Document& d, const char* task_name = nullptr) {
  event_counts c;
  EXPECT_TRUE(d.IsObject());
  if (!d.IsObject() || !d.HasMember("traceEvents") || !d["traceEvents"].IsArray()) {
    ADD_FAILURE() << "no traceEvents array";
    return c;
  }
  EXPECT_TRUE(d.HasMember("otherData"));
  std::map<int, std::vector<std::pair<double, double>>> spans;  // tid -> [ts, dur]
  for (const auto& e : d["traceEvents"].GetArray()) {
    EXPECT_TRUE(e.HasMember("ph") && e["ph"].IsString());
    EXPECT_TRUE(e.HasMember("name") && e["name"].IsString());
    EXPECT_TRUE(e.HasMember("pid") && e.HasMember("tid"));
    const std::string ph = e["ph"].GetString();
    const std::string name = e["name"].GetString();
    const int tid = e["tid"].GetInt();
    if (ph == "M") {
      if (name == "thread_name") c.threads[e["args"]["name"].GetString()] = tid;
      continue;
    }
    EXPECT_TRUE(e.HasMember("ts") && e["ts"].IsNumber());
    const std::string cat = e.HasMember("cat") ? e["cat"].GetString() : "";
    if (ph == "X") {
      const double ts = e["ts"].GetDouble();
      const double dur = e["dur"].GetDouble();
      EXPECT_GE(dur, 0.0);
      spans[tid].emplace_back(ts, dur);
      if (cat == "task") {
        ++c.tasks;
        if (task_name != nullptr && name == task_name) ++c.named;
      } else if (cat == "wait") {
        if (name == "join wait") ++c.join_waits;
        if (name == "group wait") ++c.group_waits;
      } else if (cat == "idle") {
        ++c.parks;
      }
    } else if (ph == "i") {
      if (cat == "spawn") {
        ++c.spawns;
        if (task_name != nullptr && std::string(e["args"]["task"].GetString()) == task_name) {
          ++c.named_spawns;
        }
      } else if (name == "steal") {
        ++c.steals;
        EXPECT_TRUE(e["args"]["victim"].IsInt());
      }
    }
  }
  // Spans nest per thread: sorted by start (longest first on ties), each one
  // ends within every span still open around it. Times are written rounded
  // to the nanosecond, hence the tolerance.
  for (auto& [tid, list] : spans) {
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<double> ends;
    for (const auto& [ts, dur] : list) {
      while (!ends.empty() && ts >= ends.back() - 0.003) ends.pop_back();
      if (!ends.empty()) {
        EXPECT_LE(ts + dur, ends.back() + 0.003) << "thread " << tid << ": a span at " << ts
                                                 << " us overlaps the one around it";
      }
      ends.push_back(ts + dur);
    }
  }
  return c;
}

// Runs `test_trace --probe mode` with extra environment variables; returns
// its exit status and what it wrote to stderr.
std::pair<int, std::string> run_probe(const std::string& mode, const std::vector<std::string>& env) {
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string v = *e;
    if (v.rfind("MOTE_", 0) != 0) vars.push_back(v);
  }
  for (const auto& v : env) vars.push_back(v);
  std::vector<char*> envp;
  for (auto& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  const std::string err_path = ::testing::TempDir() + "mote_probe_" + std::to_string(::getpid()) + ".txt";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::string arg0 = self_path;
  std::string arg1 = "--probe";
  std::string arg2 = mode;
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, self_path.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return {-1, "posix_spawn failed"};
  int status = 0;
  waitpid(pid, &status, 0);
  std::ifstream in(err_path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(err_path.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), text.str()};
}

// The child side of run_probe.
int probe(const std::string& mode) {
  if (mode == "runtime") {
    // Creating a runtime must fail with config_error naming the variable.
    try {
      mote::runtime rt(mote::runtime_options{.num_workers = 1});
    } catch (const mote::config_error& e) {
      std::fprintf(stderr, "config_error: %s\n", e.what());
      return 3;
    }
    return 0;
  }
  if (mode == "stats") {
    mote::runtime rt(mote::runtime_options{.num_workers = 2});
    const long r = rt.run([] { return fib(15); });
    return r == mote_test::serial_fib(15) ? 0 : 4;
  }
  if (mode == "channels") {
    // Two channels that stay one-to-one, one declared MPMC, and one that a
    // second producer switches.
    mote::channel<int> a(16), b(16, mote::channel_kind::spsc), c(16, mote::channel_kind::mpmc), d(16);
    a.push(1);
    b.push(2);
    c.push(3);
    d.push(4);
    std::thread([&] { d.push(5); }).join();
    return (a.pop() == 1 && b.pop() == 2 && c.pop() == 3 && d.pop() == 4 && d.pop() == 5) ? 0 : 4;
  }
  if (mode == "wrap") {
    mote::runtime rt(mote::runtime_options{.num_workers = 2});
    const long r = rt.run([] { return fib(16); });
    mote::trace::flush();
    return r == mote_test::serial_fib(16) ? 0 : 4;
  }
  if (mode == "adaptive") {
    // Sites of adaptive offloading: an assistant's and an adaptive join's.
    static mote::site leaf{"probe leaf"};
    static mote::site pair{"probe pair"};
    long sum = 0;
    {
      mote::assistant helper;  // adaptive by default
      for (int i = 0; i < 20000; ++i) {
        helper.submit(leaf, [&sum, i] { sum += i; });
        helper.wait();
      }
    }
    mote::runtime_options o;
    o.num_workers = 2;
    o.adaptive = true;
    long joined = 0;
    {
      mote::runtime rt(o);
      joined = rt.run([] {
        long s = 0;
        for (int i = 0; i < 5000; ++i) {
          auto [a, b] = mote::join(pair, [i] { return i; }, [i] { return i; });
          s += a + b;
        }
        return s;
      });
    }
    return sum == 20000L * 19999 / 2 && joined == 5000L * 4999 ? 0 : 4;
  }
  return 2;
}

// The trace's instant events of one name and category, by their args.site.
std::map<std::string, int> inlined_marks(const rapidjson::Document& d, const std::string& name) {
  std::map<std::string, int> out;
  for (const auto& e : d["traceEvents"].GetArray()) {
    if (!e.HasMember("ph") || std::string(e["ph"].GetString()) != "i") continue;
    if (std::string(e["name"].GetString()) != name) continue;
    EXPECT_EQ(std::string(e["cat"].GetString()), "adaptive");
    ++out[e["args"]["site"].GetString()];
  }
  return out;
}

TEST(Trace, MarksTasksThatAdaptiveOffloadingRanInPlace) {
  static mote::site leaf{"traced leaf"};
  static mote::site pair{"traced pair"};
  mote::trace::flush();
  const rapidjson::Document before = read_trace(trace_path);
  const auto submits_before = inlined_marks(before, "inlined submit");
  const auto joins_before = inlined_marks(before, "inlined join");
  {
    // A new site's first task runs in place, timed: at least that one is marked.
    mote::assistant helper;
    int ran = 0;
    for (int i = 0; i < 100; ++i) {
      helper.submit(leaf, [&ran] { ++ran; });
      helper.wait();
    }
    EXPECT_EQ(ran, 100);
  }
  mote::runtime_options o;
  o.num_workers = 2;
  o.adaptive = true;
  mote::runtime rt(o);
  EXPECT_EQ(rt.run([] {
    int s = 0;
    for (int i = 0; i < 100; ++i) {
      auto [a, b] = mote::join(pair, [] { return 1; }, [] { return 2; });
      s += a + b;
    }
    return s;
  }), 300);
  mote::trace::flush();
  const rapidjson::Document after = read_trace(trace_path);
  auto count = [](const std::map<std::string, int>& m, const char* site) {
    const auto it = m.find(site);
    return it == m.end() ? 0 : it->second;
  };
  const int submits = count(inlined_marks(after, "inlined submit"), "traced leaf") -
                      count(submits_before, "traced leaf");
  const int joins = count(inlined_marks(after, "inlined join"), "traced pair") - count(joins_before, "traced pair");
  EXPECT_GE(submits, 1);
  EXPECT_LE(submits, 100);
  EXPECT_GE(joins, 1);
  EXPECT_LE(joins, 100);
}

TEST(Trace, IsOnForThisProcess) { EXPECT_TRUE(mote::trace::enabled()); }

TEST(Trace, FibTraceHasEveryJoin) {
  const int n = static_cast<int>(mote_test::scaled(18, 2));
  mote::runtime rt(mote::runtime_options{.num_workers = 2});
  mote::trace::flush();  // events of earlier tests are in the file too: count the difference
  const event_counts before = check_events(read_trace(trace_path));
  EXPECT_EQ(rt.run([&] { return fib(n); }), mote_test::serial_fib(n));
  EXPECT_EQ(rt.run([&] { return named_fib(n); }), mote_test::serial_fib(n));
  mote::trace::flush();
  const rapidjson::Document d = read_trace(trace_path);
  EXPECT_FALSE(d["otherData"]["wrapped"].GetBool());
  EXPECT_EQ(d["otherData"]["producer"].GetString(), std::string("mote"));
  const event_counts after = check_events(d, "fib \"right\"\\");
  // Every join is one spawn and one task (its second callable, run here or
  // by a thief), for both runs.
  EXPECT_EQ(after.spawns - before.spawns, 2 * joins_of_fib(n));
  EXPECT_EQ(after.tasks - before.tasks, 2 * joins_of_fib(n) + 2 /* the two run() calls */);
  // The named run: its name survived escaping and parsing, on every spawn and task.
  EXPECT_EQ(after.named_spawns, joins_of_fib(n));
  EXPECT_EQ(after.named, joins_of_fib(n));
  int workers = 0;
  for (const auto& [name, tid] : after.threads) workers += name.find("worker ") != std::string::npos;
  EXPECT_GE(workers, 2);
}

TEST(Trace, TaskGroupTraceHasSpawnsWaitsAndOutsideThread) {
  const int n = static_cast<int>(mote_test::scaled(2000, 4));
  mote::runtime rt(mote::runtime_options{.num_workers = 2});
  mote::trace::flush();
  const event_counts before = check_events(read_trace(trace_path), "leaf");
  std::vector<long> out(static_cast<std::size_t>(n), 0);
  {
    // From outside the runtime: spawns go through the injection queue.
    mote::task_group g(rt);
    for (int i = 0; i < n; ++i) g.spawn(mote::named("leaf", [&out, i] { out[i] = i; }));
    g.wait();
  }
  // From a worker: local spawns, and a group wait on the worker.
  rt.run([&] {
    mote::task_group g;
    for (int i = 0; i < n; ++i) {
      g.spawn(mote::named("leaf", [&out, i] {
        out[i] += i;
        for (int k = 0; k < 200; ++k) {
          asm volatile("" ::: "memory");
        }
      }));
    }
    g.wait();
  });
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[static_cast<std::size_t>(i)], 2L * i);
  mote::trace::flush();
  const event_counts after = check_events(read_trace(trace_path), "leaf");
  EXPECT_EQ(after.named_spawns - before.named_spawns, 2L * n);
  EXPECT_EQ(after.named - before.named, 2L * n);
  bool outside = false;
  for (const auto& [name, tid] : after.threads) outside |= name.rfind("thread ", 0) == 0;
  EXPECT_TRUE(outside) << "spawns from the test's thread have no thread of their own";
}

TEST(Trace, DataflowTasksAreNamedAndDependenciesAreFlowArrows) {
  mote::runtime rt(mote::runtime_options{.num_workers = 2});
  const int n = 200;
  rt.run([&] {
    long x = 0;
    mote::dataflow df;
    for (int i = 0; i < n; ++i) df.spawn(mote::inout(x), mote::named("df link", [&x] { ++x; }));
    df.wait();
    EXPECT_EQ(x, n);
  });
  mote::trace::flush();
  const rapidjson::Document d = read_trace(trace_path);
  // A chain of n tasks: n - 1 satisfied dependencies, each an arrow that
  // starts ("s") and ends ("f") with the same id; every task named.
  std::map<std::uint64_t, int> starts, ends;
  long named = 0;
  for (const auto& e : d["traceEvents"].GetArray()) {
    const std::string ph = e["ph"].GetString();
    if ((ph == "s" || ph == "f") && std::string(e["cat"].GetString()) == "dependency") {
      (ph == "s" ? starts : ends)[e["id"].GetUint64()]++;
    }
    if (ph == "X" && std::string(e["name"].GetString()) == "df link") ++named;
  }
  EXPECT_EQ(named, n);
  long paired = 0;
  for (const auto& [id, count] : ends) {
    EXPECT_EQ(count, 1);
    if (starts.count(id) != 0) ++paired;
  }
  EXPECT_GE(paired, n - 1);
}

// Each channel's queue is marked in the trace, and so is a switch.
TEST(Trace, ChannelsShowTheirQueue) {
  mote::channel<int> one(16);
  mote::channel<int> many(16, mote::channel_kind::mpmc);
  mote::channel<int> switched(16);
  switched.push(1);
  std::thread([&] { switched.push(2); }).join();
  EXPECT_EQ(switched.queue_in_use(), mote::channel_kind::mpmc);
  mote::trace::flush();
  const rapidjson::Document d = read_trace(trace_path);
  std::map<std::string, std::map<std::string, int>> by_channel;  // channel -> queue -> count
  for (const auto& e : d["traceEvents"].GetArray()) {
    if (std::string(e["ph"].GetString()) != "i" || std::string(e["name"].GetString()) != "channel") continue;
    by_channel[e["args"]["channel"].GetString()][e["args"]["queue"].GetString()]++;
  }
  auto queues_of = [&](const void* ch) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", ch);
    return by_channel[buf];
  };
  EXPECT_EQ(queues_of(&one), (std::map<std::string, int>{{"BatchQueue", 1}}));
  EXPECT_EQ(queues_of(&many), (std::map<std::string, int>{{"MPMC", 1}}));
  EXPECT_EQ(queues_of(&switched), (std::map<std::string, int>{{"BatchQueue", 1}, {"switched to MPMC", 1}}));
}

TEST(Stats, CountsChannelsByQueue) {
  const auto [status, err] = run_probe("channels", {"MOTE_STATS=1"});
  ASSERT_EQ(status, 0) << err;
  EXPECT_NE(err.find("3 on BatchQueue, 1 on the MPMC queue, 1 switched to MPMC at run time"), std::string::npos)
      << err;
}

TEST(Trace, FlushWhileWorkersRunGivesValidFiles) {
  mote::runtime rt(mote::runtime_options{.num_workers = 2});
  std::atomic<bool> done{false};
  std::thread writer([&] {
    int flushes = 0;
    while (!done.load() || flushes < 2) {
      mote::trace::flush();
      ++flushes;
      check_events(read_trace(trace_path));
    }
  });
  const int n = static_cast<int>(mote_test::scaled(20, 2));
  for (int rep = 0; rep < 3; ++rep) EXPECT_EQ(rt.run([&] { return fib(n); }), mote_test::serial_fib(n));
  done.store(true);
  writer.join();
}

TEST(Trace, SmallBufferWrapsAndSaysSo) {
  const auto [status, err] = run_probe("wrap", {"MOTE_TRACE=" + trace_path + ".wrap", "MOTE_TRACE_EVENTS=1024"});
  ASSERT_EQ(status, 0) << err;
  const rapidjson::Document d = read_trace(trace_path + ".wrap");
  EXPECT_TRUE(d["otherData"]["wrapped"].GetBool());
  EXPECT_GT(d["otherData"]["events_lost"].GetUint64(), 0u);
  check_events(d);
  bool notice = false;
  for (const auto& e : d["traceEvents"].GetArray()) {
    if (std::string(e["name"].GetString()).find("wrapped") != std::string::npos) notice = true;
  }
  EXPECT_TRUE(notice);
  std::remove((trace_path + ".wrap").c_str());
}

TEST(Trace, BadSettingsAreNamed) {
  {
    const auto [status, err] = run_probe("runtime", {"MOTE_TRACE=/nonexistent-dir/x/trace.json"});
    EXPECT_EQ(status, 3) << err;
    EXPECT_NE(err.find("MOTE_TRACE=\"/nonexistent-dir/x/trace.json\""), std::string::npos) << err;
  }
  {
    const auto [status, err] =
        run_probe("runtime", {"MOTE_TRACE=" + trace_path + ".bad", "MOTE_TRACE_EVENTS=lots"});
    EXPECT_EQ(status, 3) << err;
    EXPECT_NE(err.find("MOTE_TRACE_EVENTS=\"lots\""), std::string::npos) << err;
  }
  {
    const auto [status, err] = run_probe("runtime", {"MOTE_STATS=yes"});
    EXPECT_EQ(status, 3) << err;
    EXPECT_NE(err.find("MOTE_STATS"), std::string::npos) << err;
    EXPECT_NE(err.find("yes"), std::string::npos) << err;
  }
  std::remove((trace_path + ".bad").c_str());
}

TEST(Stats, PrintsPerWorkerCountersThatAddUp) {
  const auto [status, err] = run_probe("stats", {"MOTE_STATS=1"});
  ASSERT_EQ(status, 0) << err;
  // Header, two worker rows and the total row; the total spawns is the number
  // of joins fib(15) makes.
  EXPECT_NE(err.find("busy_ms"), std::string::npos) << err;
  EXPECT_NE(err.find("idle_ms"), std::string::npos) << err;
  std::istringstream lines(err);
  std::string line;
  int worker_rows = 0;
  long total_spawns = -1;
  long total_tasks = -1;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string first;
    f >> first;
    if (first == "0" || first == "1") ++worker_rows;
    if (first == "all") f >> total_tasks >> total_spawns;
  }
  EXPECT_EQ(worker_rows, 2) << err;
  EXPECT_EQ(total_spawns, joins_of_fib(15)) << err;
  EXPECT_EQ(total_tasks, joins_of_fib(15) + 1) << err;  // and the run() task itself
}

// MOTE_STATS=1: a line per site of adaptive offloading, whose counts add up
// to the tasks submitted there.
TEST(Stats, CountsOffloadedAndInlinedPerSite) {
  const auto [status, err] = run_probe("adaptive", {"MOTE_STATS=1"});
  ASSERT_EQ(status, 0) << err;
  EXPECT_NE(err.find("mote: adaptive offloading (MOTE_STATS)"), std::string::npos) << err;
  std::map<std::string, std::pair<long, long>> sites;
  std::istringstream lines(err);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    long offloaded = -1, inlined = -1;
    if (!(f >> offloaded >> inlined)) continue;
    std::string name;
    std::getline(f, name);
    const auto start = name.find_first_not_of(' ');
    if (start != std::string::npos) sites[name.substr(start)] = {offloaded, inlined};
  }
  ASSERT_EQ(sites.count("probe leaf"), 1u) << err;
  ASSERT_EQ(sites.count("probe pair"), 1u) << err;
  EXPECT_EQ(sites["probe leaf"].first + sites["probe leaf"].second, 20000) << err;
  EXPECT_EQ(sites["probe pair"].first + sites["probe pair"].second, 5000) << err;
  EXPECT_GE(sites["probe leaf"].second, 1) << err;  // a new site's first task runs in place
}

TEST(Stats, OffPrintsNothing) {
  const auto [status, err] = run_probe("stats", {});
  ASSERT_EQ(status, 0) << err;
  EXPECT_EQ(err.find("MOTE_STATS"), std::string::npos) << err;
}

}  // namespace

int main(int argc, char** argv) {
  self_path = argv[0];
  if (argc == 3 && std::string(argv[1]) == "--probe") return probe(argv[2]);
  trace_path = ::testing::TempDir() + "mote_test_trace_" + std::to_string(::getpid()) + ".json";
  setenv("MOTE_TRACE", trace_path.c_str(), 1);
  unsetenv("MOTE_TRACE_EVENTS");
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  std::remove(trace_path.c_str());
  return rc;
}
