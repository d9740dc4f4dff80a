// The C API (include/mote.h): status codes, the per-thread error message, and
// runtimes and task groups driven through it.

#include "mote.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mote/error.hpp"
#include "mote/runtime.hpp"
#include "test_util.hpp"

namespace {

std::string last_error() { return mote_last_error(); }

// A runtime with two unpinned workers, so the tests behave alike on any machine.
mote_runtime* make_runtime() {
  mote_options o;
  mote_options_init(&o);
  o.num_workers = 2;
  o.bind = "none";
  o.spin_us = 10;
  mote_runtime* rt = nullptr;
  const mote_status s = mote_init(&o, &rt);
  EXPECT_EQ(s, MOTE_OK) << mote_last_error();
  return rt;
}

void add_one(void* arg) { static_cast<std::atomic<long>*>(arg)->fetch_add(1); }

void throw_from_cpp(void*) { throw std::runtime_error("the callback gave up"); }
void throw_int(void*) { throw 17; }
// A task's own usage_error is the task's failure, not a misuse of the C API.
void throw_usage(void*) { throw mote::usage_error("the callback misused something"); }

using mote_test::scoped_env;

}  // namespace

TEST(capi, StrerrorNamesEveryStatus) {
  const mote_status all[] = {MOTE_OK,    MOTE_EINVAL,    MOTE_ECONFIG,   MOTE_ENOMEM, MOTE_ETASK,
                             MOTE_EBUSY, MOTE_EINTERNAL, MOTE_ENOTOWNER, MOTE_EUSAGE, MOTE_ECANCELED};
  std::vector<std::string> seen;
  for (mote_status s : all) {
    const char* text = mote_strerror(s);
    ASSERT_NE(text, nullptr);
    EXPECT_STRNE(text, "unknown status");
    for (const std::string& other : seen) EXPECT_NE(other, text);
    seen.emplace_back(text);
  }
  EXPECT_STREQ(mote_strerror(42), "unknown status");
  EXPECT_STREQ(mote_strerror(-1), "unknown status");
}

TEST(capi, LastErrorIsEmptyOnAFreshThread) {
  std::string seen = "not run";
  std::thread([&] { seen = mote_last_error(); }).join();
  EXPECT_EQ(seen, "");
}

TEST(capi, LastErrorIsPerThread) {
  EXPECT_EQ(mote_finalize(nullptr), MOTE_EINVAL);
  const std::string here = last_error();
  EXPECT_NE(here.find("mote_finalize"), std::string::npos) << here;
  std::string there = "not run";
  std::thread([&] { there = mote_last_error(); }).join();
  EXPECT_EQ(there, "");
  EXPECT_EQ(last_error(), here);
}

TEST(capi, OptionsInitMeansEverythingFromTheEnvironment) {
  mote_options o;
  o.num_workers = 7;
  o.bind = "cores";
  o.spin_us = 7;
  mote_options_init(&o);
  EXPECT_EQ(o.num_workers, 0u);
  EXPECT_EQ(o.bind, nullptr);
  EXPECT_LT(o.spin_us, 0);  // negative: "take MOTE_SPIN_US", not a duration
  mote_options_init(nullptr);  // harmless
}

TEST(capi, NullArgumentsAreInvalid) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  mote_task_group* g = nullptr;
  ASSERT_EQ(mote_task_group_create(rt, &g), MOTE_OK);

  EXPECT_EQ(mote_init(nullptr, nullptr), MOTE_EINVAL);
  EXPECT_NE(last_error().find("mote_init"), std::string::npos);
  EXPECT_EQ(mote_num_workers(nullptr), 0u);
  EXPECT_NE(last_error().find("mote_num_workers"), std::string::npos);

  mote_task_group* out = g;
  EXPECT_EQ(mote_task_group_create(nullptr, &out), MOTE_EINVAL);
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(mote_task_group_create(rt, nullptr), MOTE_EINVAL);

  EXPECT_EQ(mote_task_group_spawn(nullptr, add_one, nullptr), MOTE_EINVAL);
  EXPECT_EQ(mote_task_group_spawn(g, nullptr, nullptr), MOTE_EINVAL);
  EXPECT_NE(last_error().find("function is NULL"), std::string::npos) << last_error();
  EXPECT_EQ(mote_task_group_wait(nullptr), MOTE_EINVAL);
  EXPECT_EQ(mote_task_group_destroy(nullptr), MOTE_EINVAL);

  // The failed spawn left nothing pending.
  EXPECT_EQ(mote_task_group_destroy(g), MOTE_OK);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

TEST(capi, InitWithOptions) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(mote_num_workers(rt), 2u);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);

  mote_options o;
  mote_options_init(&o);
  o.num_workers = 1;
  o.spin_us = 0;  // zero is a value: park at once
  ASSERT_EQ(mote_init(&o, &rt), MOTE_OK) << mote_last_error();
  EXPECT_EQ(mote_num_workers(rt), 1u);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

TEST(capi, BadBindIsAConfigErrorNamingTheField) {
  mote_options o;
  mote_options_init(&o);
  o.num_workers = 1;
  o.bind = "sideways";
  mote_runtime* rt = reinterpret_cast<mote_runtime*>(&o);  // must be overwritten
  EXPECT_EQ(mote_init(&o, &rt), MOTE_ECONFIG);
  EXPECT_EQ(rt, nullptr);
  EXPECT_NE(last_error().find("mote_options.bind"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("sideways"), std::string::npos) << last_error();
}

TEST(capi, BadEnvironmentIsAConfigErrorNamingTheVariable) {
  scoped_env env("MOTE_NUM_THREADS", "lots");
  mote_runtime* rt = nullptr;
  EXPECT_EQ(mote_init(nullptr, &rt), MOTE_ECONFIG);
  EXPECT_EQ(rt, nullptr);
  EXPECT_NE(last_error().find("MOTE_NUM_THREADS"), std::string::npos) << last_error();
}

TEST(capi, OptionsOverrideTheEnvironment) {
  scoped_env env("MOTE_NUM_THREADS", "lots");
  mote_options o;
  mote_options_init(&o);
  o.num_workers = 2;
  o.bind = "none";
  mote_runtime* rt = nullptr;
  ASSERT_EQ(mote_init(&o, &rt), MOTE_OK) << mote_last_error();
  EXPECT_EQ(mote_num_workers(rt), 2u);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

TEST(capi, SpawnAndWait) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  mote_task_group* g = nullptr;
  ASSERT_EQ(mote_task_group_create(rt, &g), MOTE_OK);

  const long n = mote_test::scaled(10000);
  std::atomic<long> count{0};
  for (long i = 0; i < n; ++i) ASSERT_EQ(mote_task_group_spawn(g, add_one, &count), MOTE_OK);
  ASSERT_EQ(mote_task_group_wait(g), MOTE_OK) << mote_last_error();
  EXPECT_EQ(count.load(), n);

  // The group is reusable after a wait, and waiting on an idle group is fine.
  for (long i = 0; i < n; ++i) ASSERT_EQ(mote_task_group_spawn(g, add_one, &count), MOTE_OK);
  ASSERT_EQ(mote_task_group_wait(g), MOTE_OK);
  EXPECT_EQ(count.load(), 2 * n);
  EXPECT_EQ(mote_task_group_wait(g), MOTE_OK);

  EXPECT_EQ(mote_task_group_destroy(g), MOTE_OK);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

namespace {

// A binary tree of tasks spawned from inside tasks of the same group.
struct tree_node {
  mote_task_group* group;
  int depth;
  std::atomic<long>* leaves;
};

void grow(void* arg) {
  auto* node = static_cast<tree_node*>(arg);
  if (node->depth == 0) {
    node->leaves->fetch_add(1);
    delete node;
    return;
  }
  for (int i = 0; i < 2; ++i) {
    auto* child = new tree_node{node->group, node->depth - 1, node->leaves};
    if (mote_task_group_spawn(node->group, grow, child) != MOTE_OK) std::abort();
  }
  delete node;
}

}  // namespace

TEST(capi, SpawnFromInsideTasks) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  mote_task_group* g = nullptr;
  ASSERT_EQ(mote_task_group_create(rt, &g), MOTE_OK);
  const int depth = mote_test::kSanitized ? 8 : 12;
  std::atomic<long> leaves{0};
  ASSERT_EQ(mote_task_group_spawn(g, grow, new tree_node{g, depth, &leaves}), MOTE_OK);
  ASSERT_EQ(mote_task_group_wait(g), MOTE_OK) << mote_last_error();
  EXPECT_EQ(leaves.load(), 1L << depth);
  EXPECT_EQ(mote_task_group_destroy(g), MOTE_OK);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

TEST(capi, ThrowingCallbackIsATaskError) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  mote_task_group* g = nullptr;
  ASSERT_EQ(mote_task_group_create(rt, &g), MOTE_OK);

  std::atomic<long> count{0};
  ASSERT_EQ(mote_task_group_spawn(g, add_one, &count), MOTE_OK);
  ASSERT_EQ(mote_task_group_spawn(g, throw_from_cpp, nullptr), MOTE_OK);
  EXPECT_EQ(mote_task_group_wait(g), MOTE_ETASK);
  EXPECT_NE(last_error().find("the callback gave up"), std::string::npos) << last_error();

  ASSERT_EQ(mote_task_group_spawn(g, throw_int, nullptr), MOTE_OK);
  EXPECT_EQ(mote_task_group_wait(g), MOTE_ETASK);
  EXPECT_FALSE(last_error().empty());

  // After a failed wait the group is empty and usable again.
  count = 0;
  ASSERT_EQ(mote_task_group_spawn(g, add_one, &count), MOTE_OK);
  ASSERT_EQ(mote_task_group_wait(g), MOTE_OK);
  EXPECT_EQ(count.load(), 1);
  EXPECT_EQ(mote_task_group_destroy(g), MOTE_OK);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

TEST(capi, DestroyWithPendingTasksIsBusy) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  mote_task_group* g = nullptr;
  ASSERT_EQ(mote_task_group_create(rt, &g), MOTE_OK);
  std::atomic<long> count{0};
  ASSERT_EQ(mote_task_group_spawn(g, add_one, &count), MOTE_OK);

  EXPECT_EQ(mote_task_group_destroy(g), MOTE_EBUSY);
  EXPECT_NE(last_error().find("wait"), std::string::npos) << last_error();
  // Nothing was freed: the group still works.
  EXPECT_EQ(mote_finalize(rt), MOTE_EBUSY);
  ASSERT_EQ(mote_task_group_wait(g), MOTE_OK);
  EXPECT_EQ(count.load(), 1);
  EXPECT_EQ(mote_task_group_destroy(g), MOTE_OK);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

TEST(capi, FinalizeWithALiveGroupIsBusy) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  mote_task_group* g = nullptr;
  ASSERT_EQ(mote_task_group_create(rt, &g), MOTE_OK);
  EXPECT_EQ(mote_finalize(rt), MOTE_EBUSY);
  EXPECT_EQ(mote_num_workers(rt), 2u);  // still alive
  EXPECT_EQ(mote_task_group_destroy(g), MOTE_OK);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

TEST(capi, TwoRuntimesAtOnce) {
  mote_runtime* a = make_runtime();
  mote_runtime* b = make_runtime();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  mote_task_group* ga = nullptr;
  mote_task_group* gb = nullptr;
  ASSERT_EQ(mote_task_group_create(a, &ga), MOTE_OK);
  ASSERT_EQ(mote_task_group_create(b, &gb), MOTE_OK);
  std::atomic<long> ca{0};
  std::atomic<long> cb{0};
  const long n = mote_test::scaled(1000);
  for (long i = 0; i < n; ++i) {
    ASSERT_EQ(mote_task_group_spawn(ga, add_one, &ca), MOTE_OK);
    ASSERT_EQ(mote_task_group_spawn(gb, add_one, &cb), MOTE_OK);
  }
  ASSERT_EQ(mote_task_group_wait(ga), MOTE_OK);
  ASSERT_EQ(mote_task_group_wait(gb), MOTE_OK);
  EXPECT_EQ(ca.load(), n);
  EXPECT_EQ(cb.load(), n);
  EXPECT_EQ(mote_task_group_destroy(ga), MOTE_OK);
  EXPECT_EQ(mote_task_group_destroy(gb), MOTE_OK);
  EXPECT_EQ(mote_finalize(a), MOTE_OK);
  EXPECT_EQ(mote_finalize(b), MOTE_OK);
}

TEST(capi, GroupsFromSeveralThreads) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  const int threads = 3;
  const long n = mote_test::scaled(2000);
  std::vector<std::atomic<long>> counts(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      mote_task_group* g = nullptr;
      if (mote_task_group_create(rt, &g) != MOTE_OK) return;
      for (long i = 0; i < n; ++i) mote_task_group_spawn(g, add_one, &counts[t]);
      mote_task_group_wait(g);
      mote_task_group_destroy(g);
    });
  }
  for (std::thread& th : pool) th.join();
  for (int t = 0; t < threads; ++t) EXPECT_EQ(counts[t].load(), n) << "thread " << t;
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

// ---- Spawning from inside tasks ---------------------------------------------

namespace {

// One task spawns a task per slot; each task counts its own slot.
struct fan_out {
  mote_runtime* rt;
  mote_task_group* group;
  std::vector<std::atomic<int>>* hits;
  mote_status spawn_status = MOTE_OK;  // the first spawn failure
  mote_status wait_status = MOTE_OK;
};

void hit(void* arg) {
  static_cast<std::atomic<int>*>(arg)->fetch_add(1, std::memory_order_relaxed);
}

void spawn_all(void* arg) {
  auto* f = static_cast<fan_out*>(arg);
  for (std::atomic<int>& slot : *f->hits) {
    const mote_status s = mote_task_group_spawn(f->group, hit, &slot);
    if (s != MOTE_OK && f->spawn_status == MOTE_OK) f->spawn_status = s;
  }
}

// The same with a group created on the worker (which then owns it: its
// spawns are counted privately), waited for there.
void spawn_all_into_own_group(void* arg) {
  auto* f = static_cast<fan_out*>(arg);
  if (mote_task_group_create(f->rt, &f->group) != MOTE_OK) {
    f->spawn_status = MOTE_EINTERNAL;
    return;
  }
  spawn_all(f);
  f->wait_status = mote_task_group_wait(f->group);
  if (mote_task_group_destroy(f->group) != MOTE_OK) f->wait_status = MOTE_EINTERNAL;
  f->group = nullptr;
}

long count_not_once(const std::vector<std::atomic<int>>& hits) {
  long bad = 0;
  for (const std::atomic<int>& h : hits) bad += h.load() != 1 ? 1 : 0;
  return bad;
}

}  // namespace

TEST(capi, TenThousandSpawnsFromInsideATaskEachRunOnce) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  mote_task_group* g = nullptr;
  ASSERT_EQ(mote_task_group_create(rt, &g), MOTE_OK);

  // Spawned by a task of the same group, on a worker: pushes on its pool.
  std::vector<std::atomic<int>> hits(10000);
  fan_out f{rt, g, &hits};
  ASSERT_EQ(mote_task_group_spawn(g, spawn_all, &f), MOTE_OK);
  ASSERT_EQ(mote_task_group_wait(g), MOTE_OK) << mote_last_error();
  EXPECT_EQ(f.spawn_status, MOTE_OK);
  EXPECT_EQ(count_not_once(hits), 0);
  EXPECT_EQ(mote_task_group_destroy(g), MOTE_OK);

  // A group made, filled and waited for on the worker.
  std::vector<std::atomic<int>> own_hits(10000);
  fan_out own{rt, nullptr, &own_hits};
  ASSERT_EQ(mote_run(rt, spawn_all_into_own_group, &own), MOTE_OK) << mote_last_error();
  EXPECT_EQ(own.spawn_status, MOTE_OK);
  EXPECT_EQ(own.wait_status, MOTE_OK);
  EXPECT_EQ(count_not_once(own_hits), 0);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

// ---- mote_run ------------------------------------------------------------------

namespace {

// Where a callback ran.
struct where {
  int worker_index = -2;
  std::thread::id thread;
  mote::runtime* runtime = nullptr;
  void record() {
    worker_index = mote::runtime::current_worker_index();
    thread = std::this_thread::get_id();
    runtime = mote::runtime::current();
  }
};

void record_where(void* arg) { static_cast<where*>(arg)->record(); }

// Set while nested_run's caller is on the stack of this thread: a callback
// that sees it was called from inside that frame.
thread_local bool inside_outer = false;

struct nested_run {
  mote_runtime* rt;
  where outer;
  where inner;
  bool inner_saw_outer = false;
  mote_status status = MOTE_EINTERNAL;
};

void inner_of_nested(void* arg) {
  auto* n = static_cast<nested_run*>(arg);
  n->inner.record();
  n->inner_saw_outer = inside_outer;
}

void outer_of_nested(void* arg) {
  auto* n = static_cast<nested_run*>(arg);
  n->outer.record();
  inside_outer = true;
  n->status = mote_run(n->rt, inner_of_nested, n);
  inside_outer = false;
}

}  // namespace

TEST(capi, RunRunsOnAWorkerAndReturnsWhenDone) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  where w;
  ASSERT_EQ(mote_run(rt, record_where, &w), MOTE_OK) << mote_last_error();
  EXPECT_GE(w.worker_index, 0);
  EXPECT_LT(w.worker_index, 2);
  EXPECT_NE(w.thread, std::this_thread::get_id());
  EXPECT_NE(w.runtime, nullptr);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

TEST(capi, RunFromInsideATaskCallsTheFunctionDirectly) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  mote_task_group* g = nullptr;
  ASSERT_EQ(mote_task_group_create(rt, &g), MOTE_OK);
  nested_run n{rt};
  ASSERT_EQ(mote_task_group_spawn(g, outer_of_nested, &n), MOTE_OK);
  ASSERT_EQ(mote_task_group_wait(g), MOTE_OK) << mote_last_error();
  EXPECT_EQ(n.status, MOTE_OK);
  EXPECT_GE(n.outer.worker_index, 0);
  // Called from the outer frame, on its thread: not handed to another worker.
  EXPECT_TRUE(n.inner_saw_outer);
  EXPECT_EQ(n.inner.thread, n.outer.thread);
  EXPECT_EQ(n.inner.runtime, n.outer.runtime);
  EXPECT_EQ(mote_task_group_destroy(g), MOTE_OK);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

TEST(capi, RunFromAWorkerOfAnotherRuntimeRunsThere) {
  mote_runtime* a = make_runtime();
  mote_runtime* b = make_runtime();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  nested_run n{b};  // the outer part on a, the inner part on b
  ASSERT_EQ(mote_run(a, outer_of_nested, &n), MOTE_OK) << mote_last_error();
  EXPECT_EQ(n.status, MOTE_OK);
  EXPECT_NE(n.outer.runtime, nullptr);
  EXPECT_NE(n.inner.runtime, nullptr);
  EXPECT_NE(n.inner.runtime, n.outer.runtime);
  EXPECT_FALSE(n.inner_saw_outer);
  EXPECT_EQ(mote_finalize(a), MOTE_OK);
  EXPECT_EQ(mote_finalize(b), MOTE_OK);
}

namespace {

struct failing_run {
  mote_runtime* rt;
  mote_status status = MOTE_OK;
  std::string message;
};

void run_a_thrower(void* arg) {
  auto* f = static_cast<failing_run*>(arg);
  f->status = mote_run(f->rt, throw_from_cpp, nullptr);
  f->message = mote_last_error();  // this worker's own message
}
}  // namespace

TEST(capi, RunReportsAnExceptionAsATaskFailure) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(mote_run(rt, throw_from_cpp, nullptr), MOTE_ETASK);
  EXPECT_NE(last_error().find("the callback gave up"), std::string::npos) << last_error();
  EXPECT_EQ(mote_run(rt, throw_int, nullptr), MOTE_ETASK);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(mote_run(rt, throw_usage, nullptr), MOTE_ETASK);
  EXPECT_NE(last_error().find("misused"), std::string::npos) << last_error();

  // Nested in a task: the inner call reports it, the outer one succeeds.
  failing_run f{rt};
  ASSERT_EQ(mote_run(rt, run_a_thrower, &f), MOTE_OK) << mote_last_error();
  EXPECT_EQ(f.status, MOTE_ETASK);
  EXPECT_NE(f.message.find("the callback gave up"), std::string::npos) << f.message;

  EXPECT_EQ(mote_run(nullptr, add_one, nullptr), MOTE_EINVAL);
  EXPECT_NE(last_error().find("mote_run"), std::string::npos) << last_error();
  EXPECT_EQ(mote_run(rt, nullptr, nullptr), MOTE_EINVAL);

  // The runtime is unharmed.
  std::atomic<long> count{0};
  EXPECT_EQ(mote_run(rt, add_one, &count), MOTE_OK);
  EXPECT_EQ(count.load(), 1);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

namespace {
void finalize_from_inside(void* arg) {
  auto* f = static_cast<failing_run*>(arg);
  f->status = mote_finalize(f->rt);
}
}  // namespace

TEST(capi, FinalizeFromATaskOfTheRuntimeIsAUsageError) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  failing_run f{rt};
  ASSERT_EQ(mote_run(rt, finalize_from_inside, &f), MOTE_OK);
  EXPECT_EQ(f.status, MOTE_EUSAGE);
  EXPECT_EQ(mote_num_workers(rt), 2u);  // still alive
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

// ---- mote_join ---------------------------------------------------------------

namespace {

struct fib_arg {
  int n;
  long result;
};

// Calls that ran anywhere but on a worker, and joins that failed.
std::atomic<long> fib_off_worker{0};
std::atomic<long> fib_join_failures{0};

void c_fib(void* p) {
  auto* a = static_cast<fib_arg*>(p);
  if (mote::runtime::current_worker_index() < 0) fib_off_worker.fetch_add(1);
  if (a->n < 2) {
    a->result = a->n;
    return;
  }
  fib_arg x{a->n - 1, 0};
  fib_arg y{a->n - 2, 0};
  if (mote_join(c_fib, &x, c_fib, &y) != MOTE_OK) fib_join_failures.fetch_add(1);
  a->result = x.result + y.result;
}

}  // namespace

TEST(capi, JoinComputesFibInsideRun) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  fib_off_worker = 0;
  fib_join_failures = 0;
  fib_arg top{20, 0};
  ASSERT_EQ(mote_run(rt, c_fib, &top), MOTE_OK) << mote_last_error();
  EXPECT_EQ(top.result, mote_test::serial_fib(20));
  EXPECT_EQ(fib_off_worker.load(), 0);
  EXPECT_EQ(fib_join_failures.load(), 0);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

TEST(capi, JoinOutsideAWorkerUsesTheDefaultRuntime) {
  where f;
  where g;
  ASSERT_EQ(mote_join(record_where, &f, record_where, &g), MOTE_OK) << mote_last_error();
  mote::runtime* def = &mote::runtime::default_runtime();
  EXPECT_EQ(f.runtime, def);
  EXPECT_EQ(g.runtime, def);
  EXPECT_NE(f.thread, std::this_thread::get_id());

  // A recursion started here: both halves, and all below, on its workers.
  fib_off_worker = 0;
  fib_join_failures = 0;
  fib_arg x{14, 0};
  fib_arg y{13, 0};
  ASSERT_EQ(mote_join(c_fib, &x, c_fib, &y), MOTE_OK) << mote_last_error();
  EXPECT_EQ(x.result + y.result, mote_test::serial_fib(15));
  EXPECT_EQ(fib_off_worker.load(), 0);
  EXPECT_EQ(fib_join_failures.load(), 0);
}

TEST(capi, JoinReportsAnExceptionFromEitherSide) {
  // g may have been taken by another worker before f threw, so it may run.
  std::atomic<long> maybe{0};
  EXPECT_EQ(mote_join(throw_from_cpp, nullptr, add_one, &maybe), MOTE_ETASK);
  EXPECT_NE(last_error().find("the callback gave up"), std::string::npos) << last_error();
  EXPECT_LE(maybe.load(), 1);
  std::atomic<long> count{0};
  EXPECT_EQ(mote_join(add_one, &count, throw_from_cpp, nullptr), MOTE_ETASK);
  EXPECT_NE(last_error().find("the callback gave up"), std::string::npos) << last_error();
  EXPECT_EQ(count.load(), 1);  // f ran, whatever g did
  EXPECT_EQ(mote_join(add_one, &count, throw_int, nullptr), MOTE_ETASK);
  EXPECT_EQ(count.load(), 2);
  EXPECT_EQ(mote_join(nullptr, nullptr, add_one, &count), MOTE_EINVAL);
  EXPECT_NE(last_error().find("mote_join"), std::string::npos) << last_error();
  EXPECT_EQ(mote_join(add_one, &count, nullptr, nullptr), MOTE_EINVAL);
}

namespace {
struct failing_join {
  mote_status g_fails = MOTE_OK;
  mote_status f_fails = MOTE_OK;
  std::string g_message;
  std::string f_message;
  std::atomic<long> count{0};
};

void joins_that_fail(void* arg) {
  auto* j = static_cast<failing_join*>(arg);
  j->g_fails = mote_join(add_one, &j->count, throw_from_cpp, nullptr);
  j->g_message = mote_last_error();
  j->f_fails = mote_join(throw_usage, nullptr, add_one, &j->count);
  j->f_message = mote_last_error();
}
}  // namespace

TEST(capi, JoinOnAWorkerReportsAnExceptionFromEitherSide) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  failing_join j;
  ASSERT_EQ(mote_run(rt, joins_that_fail, &j), MOTE_OK) << mote_last_error();
  EXPECT_EQ(j.g_fails, MOTE_ETASK);
  EXPECT_NE(j.g_message.find("the callback gave up"), std::string::npos) << j.g_message;
  // A task's usage_error is still the task's failure.
  EXPECT_EQ(j.f_fails, MOTE_ETASK);
  EXPECT_NE(j.f_message.find("misused"), std::string::npos) << j.f_message;
  EXPECT_GE(j.count.load(), 1);  // the first join's f ran; the second's g may not have
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

namespace {
struct on_assistant {
  where task;
  where f;
  where g;
  std::atomic<int> order{0};
  int f_turn = -1;
  int g_turn = -1;
  mote_status status = MOTE_EINTERNAL;
};
void join_f(void* arg) {
  auto* o = static_cast<on_assistant*>(arg);
  o->f.record();
  o->f_turn = o->order.fetch_add(1);
}
void join_g(void* arg) {
  auto* o = static_cast<on_assistant*>(arg);
  o->g.record();
  o->g_turn = o->order.fetch_add(1);
}
void join_on_assistant(void* arg) {
  auto* o = static_cast<on_assistant*>(arg);
  o->task.record();
  o->status = mote_join(join_f, o, join_g, o);
}
}  // namespace

TEST(capi, JoinOnAnAssistantRunsBothInPlace) {
  mote_assistant* a = nullptr;
  mote_assistant_options ao;
  mote_assistant_options_init(&ao);
  ao.adaptive = 0;  // the task must run on the assistant
  ASSERT_EQ(mote_assistant_create(&ao, &a), MOTE_OK) << mote_last_error();
  on_assistant o;
  ASSERT_EQ(mote_assistant_submit(a, join_on_assistant, &o), MOTE_OK);
  ASSERT_EQ(mote_assistant_wait(a), MOTE_OK) << mote_last_error();
  EXPECT_EQ(o.status, MOTE_OK);
  EXPECT_NE(o.task.thread, std::this_thread::get_id());
  EXPECT_EQ(o.f.thread, o.task.thread);
  EXPECT_EQ(o.g.thread, o.task.thread);
  EXPECT_EQ(o.f_turn, 0);
  EXPECT_EQ(o.g_turn, 1);
  EXPECT_EQ(mote_assistant_destroy(a), MOTE_OK);
}

TEST(capi, AssistantTaskFailureIsATaskError) {
  mote_assistant* a = nullptr;
  ASSERT_EQ(mote_assistant_create(nullptr, &a), MOTE_OK) << mote_last_error();
  ASSERT_EQ(mote_assistant_submit(a, throw_usage, nullptr), MOTE_OK);
  // The task's own usage_error: a task failure, not a misuse of the assistant.
  EXPECT_EQ(mote_assistant_wait(a), MOTE_ETASK);
  EXPECT_NE(last_error().find("misused"), std::string::npos) << last_error();
  ASSERT_EQ(mote_assistant_submit(a, throw_from_cpp, nullptr), MOTE_OK);
  EXPECT_EQ(mote_assistant_wait(a), MOTE_ETASK);
  EXPECT_NE(last_error().find("the callback gave up"), std::string::npos) << last_error();
  EXPECT_EQ(mote_assistant_wait(a), MOTE_OK);
  EXPECT_EQ(mote_assistant_destroy(a), MOTE_OK);
}

// ---- Cancellation --------------------------------------------------------------

namespace {
struct cancel_inside {
  mote_task_group* group;
  std::atomic<long>* count;
  mote_status spawn_status = MOTE_OK;
  int cancelled_before = -1;
  int cancelled_after_cancel = -1;
  int cancelled_after_wait = -1;
  mote_status cancel_status = MOTE_EINTERNAL;
  mote_status wait_status = MOTE_EINTERNAL;
};

// On the only worker, so none of the spawned tasks can start before the
// cancel: there is no other worker to take one.
void spawn_cancel_wait(void* arg) {
  auto* c = static_cast<cancel_inside*>(arg);
  c->cancelled_before = mote_task_group_is_cancelled(c->group);
  for (int i = 0; i < 100; ++i) {
    const mote_status s = mote_task_group_spawn(c->group, add_one, c->count);
    if (s != MOTE_OK) c->spawn_status = s;
  }
  c->cancel_status = mote_task_group_cancel(c->group);
  c->cancelled_after_cancel = mote_task_group_is_cancelled(c->group);
  c->wait_status = mote_task_group_wait(c->group);
  c->cancelled_after_wait = mote_task_group_is_cancelled(c->group);
}

mote_runtime* make_one_worker_runtime() {
  mote_options o;
  mote_options_init(&o);
  o.num_workers = 1;
  o.bind = "none";
  mote_runtime* rt = nullptr;
  EXPECT_EQ(mote_init(&o, &rt), MOTE_OK) << mote_last_error();
  return rt;
}
}  // namespace

TEST(capi, CancelSkipsTasksNotStartedAndTheGroupIsReusable) {
  mote_runtime* rt = make_one_worker_runtime();
  ASSERT_NE(rt, nullptr);
  mote_task_group* g = nullptr;
  ASSERT_EQ(mote_task_group_create(rt, &g), MOTE_OK);
  std::atomic<long> count{0};
  cancel_inside c{g, &count};
  ASSERT_EQ(mote_run(rt, spawn_cancel_wait, &c), MOTE_OK) << mote_last_error();
  EXPECT_EQ(c.spawn_status, MOTE_OK);
  EXPECT_EQ(c.cancel_status, MOTE_OK);
  EXPECT_EQ(c.wait_status, MOTE_ECANCELED);  // the wait says tasks were skipped
  EXPECT_EQ(c.cancelled_before, 0);
  EXPECT_EQ(c.cancelled_after_cancel, 1);
  EXPECT_EQ(c.cancelled_after_wait, 0);  // the wait ended the cancellation
  EXPECT_EQ(count.load(), 0);

  // Reusable: new tasks run.
  for (int i = 0; i < 100; ++i) ASSERT_EQ(mote_task_group_spawn(g, add_one, &count), MOTE_OK);
  ASSERT_EQ(mote_task_group_wait(g), MOTE_OK) << mote_last_error();
  EXPECT_EQ(count.load(), 100);
  EXPECT_EQ(mote_task_group_is_cancelled(g), 0);

  EXPECT_EQ(mote_task_group_cancel(nullptr), MOTE_EINVAL);
  EXPECT_EQ(mote_task_group_is_cancelled(nullptr), 0);
  EXPECT_NE(last_error().find("mote_task_group_is_cancelled"), std::string::npos) << last_error();
  EXPECT_EQ(mote_task_group_destroy(g), MOTE_OK);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

namespace {
// A task of `outer` that makes a group (bound to outer), fills it, cancels
// outer, and waits for its own group.
struct bound_cancel {
  mote_runtime* rt;
  mote_task_group* outer;
  std::atomic<long>* count;
  int inner_cancelled = -1;
  mote_status status = MOTE_EINTERNAL;
};

void cancel_through_parent(void* arg) {
  auto* b = static_cast<bound_cancel*>(arg);
  mote_task_group* inner = nullptr;
  if (mote_task_group_create(b->rt, &inner) != MOTE_OK) return;
  for (int i = 0; i < 100; ++i) {
    if (mote_task_group_spawn(inner, add_one, b->count) != MOTE_OK) return;
  }
  mote_task_group_cancel(b->outer);
  b->inner_cancelled = mote_task_group_is_cancelled(inner);
  b->status = mote_task_group_wait(inner);
  if (mote_task_group_destroy(inner) != MOTE_OK) b->status = MOTE_EINTERNAL;
}
}  // namespace

TEST(capi, CancelReachesTheGroupsBoundToIt) {
  mote_runtime* rt = make_one_worker_runtime();
  ASSERT_NE(rt, nullptr);
  mote_task_group* outer = nullptr;
  ASSERT_EQ(mote_task_group_create(rt, &outer), MOTE_OK);
  std::atomic<long> count{0};
  bound_cancel b{rt, outer, &count};
  ASSERT_EQ(mote_task_group_spawn(outer, cancel_through_parent, &b), MOTE_OK);
  EXPECT_EQ(mote_task_group_wait(outer), MOTE_ECANCELED) << mote_last_error();
  EXPECT_EQ(b.status, MOTE_ECANCELED);  // the inner wait: cancelled through outer
  EXPECT_EQ(b.inner_cancelled, 1);
  EXPECT_EQ(count.load(), 0);
  EXPECT_EQ(mote_task_group_is_cancelled(outer), 0);
  EXPECT_EQ(mote_task_group_destroy(outer), MOTE_OK);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

// ---- Usage errors ----------------------------------------------------------------

namespace {

// Two threads wait for one group at once. The group's one task holds it open
// until a waiter has come back with something other than MOTE_OK, so one
// waiter is inside its wait when the other arrives, whichever comes first.
struct wait_race {
  mote_task_group* group = nullptr;
  std::atomic<bool> release{false};
  std::atomic<bool> gave_up{false};
  std::atomic<int> ok{0};
  std::atomic<int> usage{0};
  std::atomic<int> other{0};
  // What the waiter that was refused saw, and got from destroy right after.
  std::string refused_message;
  mote_status destroy_after_refusal = MOTE_OK;
};

void hold_until_released(void* arg) {
  auto* r = static_cast<wait_race*>(arg);
  // Not part of any assertion: only turns a broken wait (both waiters let in,
  // nobody releasing) into a failure instead of a hang.
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!r->release.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() > limit) {
      r->gave_up.store(true);
      return;
    }
    std::this_thread::yield();
  }
}

void race_two_waiters(wait_race& r) {
  auto waiter = [&r] {
    const mote_status s = mote_task_group_wait(r.group);
    if (s == MOTE_OK) {
      r.ok.fetch_add(1);
      return;
    }
    (s == MOTE_EUSAGE ? r.usage : r.other).fetch_add(1);
    r.refused_message = mote_last_error();
    // This wait waited for nothing: the task still holds the group and the
    // other waiter is inside wait. Destroying now must be refused (the old
    // defect freed the group here).
    r.destroy_after_refusal = mote_task_group_destroy(r.group);
    r.release.store(true, std::memory_order_release);
  };
  std::thread a(waiter);
  std::thread b(waiter);
  a.join();
  b.join();
}

}  // namespace

TEST(capi, ConcurrentWaitIsAUsageErrorForOneWaiter) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  wait_race r;
  ASSERT_EQ(mote_task_group_create(rt, &r.group), MOTE_OK);
  ASSERT_EQ(mote_task_group_spawn(r.group, hold_until_released, &r), MOTE_OK);
  race_two_waiters(r);
  EXPECT_FALSE(r.gave_up.load());
  EXPECT_EQ(r.ok.load(), 1);
  EXPECT_EQ(r.usage.load(), 1);
  EXPECT_EQ(r.other.load(), 0);
  EXPECT_NE(r.refused_message.find("mote_task_group_wait"), std::string::npos) << r.refused_message;
  EXPECT_NE(r.refused_message.find("another thread"), std::string::npos) << r.refused_message;
  EXPECT_STRNE(mote_strerror(MOTE_EUSAGE), "unknown status");

  // The successful wait finished the group; a new spawn makes it busy again
  // until the next wait.
  std::atomic<long> count{0};
  ASSERT_EQ(mote_task_group_spawn(r.group, add_one, &count), MOTE_OK);
  EXPECT_EQ(mote_task_group_destroy(r.group), MOTE_EBUSY);
  ASSERT_EQ(mote_task_group_wait(r.group), MOTE_OK);
  EXPECT_EQ(count.load(), 1);
  EXPECT_EQ(mote_task_group_destroy(r.group), MOTE_OK);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

// Regression: a refused wait used to be reported as MOTE_ETASK and to clear
// the group's pending mark, so that destroy freed a group whose task was
// still running and whose other waiter was still inside wait.
TEST(capi, RefusedWaitLeavesTheGroupBusy) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  wait_race r;
  ASSERT_EQ(mote_task_group_create(rt, &r.group), MOTE_OK);
  ASSERT_EQ(mote_task_group_spawn(r.group, hold_until_released, &r), MOTE_OK);
  race_two_waiters(r);
  EXPECT_FALSE(r.gave_up.load());
  EXPECT_EQ(r.usage.load(), 1);
  EXPECT_EQ(r.destroy_after_refusal, MOTE_EBUSY);
  // Nothing was freed: the group still counts against its runtime and works.
  EXPECT_EQ(mote_finalize(rt), MOTE_EBUSY);
  std::atomic<long> count{0};
  ASSERT_EQ(mote_task_group_spawn(r.group, add_one, &count), MOTE_OK);
  ASSERT_EQ(mote_task_group_wait(r.group), MOTE_OK);
  EXPECT_EQ(count.load(), 1);
  EXPECT_EQ(mote_task_group_destroy(r.group), MOTE_OK);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

// ---- fork() ------------------------------------------------------------------------

namespace {

using mote_test::kTsan;

using mote_test::in_child;

void hold_flag(void* arg) {
  auto* flag = static_cast<std::atomic<bool>*>(arg);
  while (!flag->load(std::memory_order_acquire)) std::this_thread::yield();
}

}  // namespace

TEST(capi, ARuntimeFromBeforeForkIsAUsageErrorInTheChild) {
  if (kTsan) GTEST_SKIP() << "ThreadSanitizer does not support threads started after fork()";
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  mote_task_group* busy = nullptr;  // a task pending at the fork
  mote_task_group* idle = nullptr;
  ASSERT_EQ(mote_task_group_create(rt, &busy), MOTE_OK);
  ASSERT_EQ(mote_task_group_create(rt, &idle), MOTE_OK);
  std::atomic<bool> release{false};
  ASSERT_EQ(mote_task_group_spawn(busy, hold_flag, &release), MOTE_OK);

  const int status = in_child([&] {
    int code = 0;
    std::atomic<long> count{0};
    if (mote_run(rt, add_one, &count) != MOTE_EUSAGE) code |= 1;
    if (std::string(mote_last_error()).find("fork") == std::string::npos) code |= 2;
    // Nothing was added: the idle group is still idle.
    if (mote_task_group_spawn(idle, add_one, &count) != MOTE_EUSAGE) code |= 4;
    if (mote_task_group_wait(idle) != MOTE_OK) code |= 8;
    // The pending task will never run here: waiting is refused, destroying is fine.
    if (mote_task_group_wait(busy) != MOTE_EUSAGE) code |= 16;
    if (mote_task_group_destroy(busy) != MOTE_OK) code |= 32;
    if (mote_task_group_destroy(idle) != MOTE_OK) code |= 64;
    if (mote_finalize(rt) != MOTE_OK) code |= 128;
    if (count.load() != 0) code |= 1;
    // A runtime made in the child works.
    mote_runtime* mine = nullptr;
    mote_options o;
    mote_options_init(&o);
    o.num_workers = 1;
    o.bind = "none";
    if (mote_init(&o, &mine) != MOTE_OK) return code | 2;
    if (mote_run(mine, add_one, &count) != MOTE_OK || count.load() != 1) code |= 4;
    if (mote_finalize(mine) != MOTE_OK) code |= 8;
    return code;
  });
  EXPECT_EQ(status, 0);

  // In the parent all of it is still there.
  release.store(true, std::memory_order_release);
  EXPECT_EQ(mote_task_group_destroy(busy), MOTE_EBUSY);
  ASSERT_EQ(mote_task_group_wait(busy), MOTE_OK);
  EXPECT_EQ(mote_task_group_destroy(busy), MOTE_OK);
  EXPECT_EQ(mote_task_group_destroy(idle), MOTE_OK);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

// ---- The assistant through the C API -----------------------------------------

namespace {
void add_index(void* arg) {
  static_cast<std::atomic<long>*>(arg)->fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

TEST(capi, AssistantRunsEverythingItIsGiven) {
  mote_assistant_options o;
  mote_assistant_options_init(&o);
  EXPECT_EQ(o.capacity, 128u);
  EXPECT_EQ(o.cpu, -1);
  o.capacity = 4;  // small: the full-ring path runs tasks on the owner
  mote_assistant* a = nullptr;
  ASSERT_EQ(mote_assistant_create(&o, &a), MOTE_OK);
  std::atomic<long> count{0};
  const long n = mote_test::scaled(20000);
  for (long round = 0; round < 20; ++round) {
    for (long i = 0; i < n / 20; ++i)
      ASSERT_EQ(mote_assistant_submit(a, add_index, &count), MOTE_OK);
    if (round % 3 == 0) EXPECT_EQ(mote_assistant_sleep_hint(a), MOTE_OK);
    if (round % 3 == 1) EXPECT_EQ(mote_assistant_wake_up_hint(a), MOTE_OK);
    ASSERT_EQ(mote_assistant_wait(a), MOTE_OK);
    EXPECT_EQ(count.load(), (round + 1) * (n / 20));
  }
  EXPECT_EQ(mote_assistant_destroy(a), MOTE_OK);
}

TEST(capi, AssistantMisuseIsAnErrorCode) {
  mote_assistant* a = nullptr;
  EXPECT_EQ(mote_assistant_create(nullptr, nullptr), MOTE_EINVAL);
  mote_assistant_options o;
  mote_assistant_options_init(&o);
  o.capacity = 1000;
  EXPECT_EQ(mote_assistant_create(&o, &a), MOTE_ECONFIG);
  EXPECT_EQ(a, nullptr);
  EXPECT_NE(std::string(mote_last_error()).find("capacity=1000"), std::string::npos)
      << mote_last_error();
  o.capacity = 8;
  o.idle_park_us = -1;
  EXPECT_EQ(mote_assistant_create(&o, &a), MOTE_ECONFIG);
  ASSERT_EQ(mote_assistant_create(nullptr, &a), MOTE_OK);
  EXPECT_EQ(mote_assistant_submit(a, nullptr, nullptr), MOTE_EINVAL);
  EXPECT_EQ(mote_assistant_submit(nullptr, add_index, nullptr), MOTE_EINVAL);
  EXPECT_EQ(mote_assistant_wait(nullptr), MOTE_EINVAL);
  EXPECT_EQ(mote_assistant_wake_up_hint(nullptr), MOTE_EINVAL);
  EXPECT_EQ(mote_assistant_sleep_hint(nullptr), MOTE_EINVAL);
  EXPECT_EQ(mote_assistant_destroy(nullptr), MOTE_EINVAL);
  EXPECT_EQ(mote_assistant_cpu(nullptr), -1);
  // Another thread may hint, but not submit, wait or destroy.
  std::atomic<long> count{0};
  mote_status submit_status = MOTE_OK, wait_status = MOTE_OK, destroy_status = MOTE_OK,
              hint_status = MOTE_EINVAL;
  std::thread other([&] {
    submit_status = mote_assistant_submit(a, add_index, &count);
    wait_status = mote_assistant_wait(a);
    destroy_status = mote_assistant_destroy(a);
    hint_status = mote_assistant_wake_up_hint(a);
  });
  other.join();
  EXPECT_EQ(submit_status, MOTE_ENOTOWNER);
  EXPECT_EQ(wait_status, MOTE_ENOTOWNER);
  EXPECT_EQ(destroy_status, MOTE_ENOTOWNER);
  EXPECT_EQ(hint_status, MOTE_OK);
  EXPECT_STRNE(mote_strerror(MOTE_ENOTOWNER), "unknown status");
  EXPECT_EQ(count.load(), 0);
  EXPECT_EQ(mote_assistant_destroy(a), MOTE_OK);
}

namespace {
struct df_state {
  long a = 0, b = 0;
};
}  // namespace

TEST(capi, DataflowOrdersByAccessesAndReportsAFailedTask) {
  mote_runtime* rt = make_runtime();
  mote_dataflow* df = nullptr;
  ASSERT_EQ(mote_dataflow_create(rt, &df), MOTE_OK);
  df_state s;
  mote_access write_a{&s.a, sizeof s.a, MOTE_OUT};
  mote_access read_a_write_b[2] = {{&s.a, sizeof s.a, MOTE_IN}, {&s.b, sizeof s.b, MOTE_INOUT}};
  ASSERT_EQ(mote_dataflow_spawn(df, &write_a, 1, [](void* p) { static_cast<df_state*>(p)->a = 5; }, &s), MOTE_OK);
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(mote_dataflow_spawn(
                  df, read_a_write_b, 2,
                  [](void* p) {
                    auto* q = static_cast<df_state*>(p);
                    q->b = q->b * 2 + q->a;
                  },
                  &s),
              MOTE_OK);
  }
  ASSERT_EQ(mote_dataflow_wait(df), MOTE_OK);
  long expect = 0;
  for (int i = 0; i < 10; ++i) expect = expect * 2 + 5;
  EXPECT_EQ(s.b, expect);
  // A C++ callback that throws: MOTE_ETASK with its message; its dependent skipped.
  ASSERT_EQ(mote_dataflow_spawn(df, &write_a, 1, [](void*) { throw std::runtime_error("no a"); }, &s), MOTE_OK);
  ASSERT_EQ(mote_dataflow_spawn(df, read_a_write_b, 2, [](void* p) { static_cast<df_state*>(p)->b = -1; }, &s),
            MOTE_OK);
  EXPECT_EQ(mote_dataflow_wait(df), MOTE_ETASK);
  EXPECT_NE(std::string(mote_last_error()).find("no a"), std::string::npos);
  EXPECT_EQ(s.b, expect);
  EXPECT_EQ(mote_dataflow_spawn(df, nullptr, 1, [](void*) {}, nullptr), MOTE_EINVAL);
  EXPECT_EQ(mote_finalize(rt), MOTE_EBUSY);  // a scope lives
  ASSERT_EQ(mote_dataflow_destroy(df), MOTE_OK);
  ASSERT_EQ(mote_finalize(rt), MOTE_OK);
}

// ---- mote_parallel_for --------------------------------------------------------

namespace {

// What the bodies of one mote_parallel_for did.
struct pf_ledger {
  pf_ledger(long long f, long long l, long long g)
      : first(f),
        last(l),
        grain(g),
        visits(f < l ? static_cast<std::size_t>(static_cast<unsigned long long>(l) -
                                                static_cast<unsigned long long>(f))
                     : 0) {}
  long long first;
  long long last;
  long long grain;
  std::vector<std::atomic<unsigned>> visits;
  std::atomic<long> calls{0};
  std::atomic<long> bad{0};  // an empty sub-range, one outside [first, last), or one past the grain
  std::atomic<long> off_worker{0};  // a call on a thread that is no worker
  mote_runtime* rt = nullptr;
  mote_status status = MOTE_EINTERNAL;  // of a call made from inside mote_run
};

void pf_count(void* ctx, long long begin, long long end) {
  auto* l = static_cast<pf_ledger*>(ctx);
  l->calls.fetch_add(1);
  if (mote::runtime::current_worker_index() < 0) l->off_worker.fetch_add(1);
  if (!(begin < end) || begin < l->first || end > l->last ||
      (l->grain > 0 && end - begin > l->grain)) {
    l->bad.fetch_add(1);
    return;
  }
  for (long long i = begin; i < end; ++i) {
    l->visits[static_cast<unsigned long long>(i) - static_cast<unsigned long long>(l->first)]
        .fetch_add(1);
  }
}

void pf_from_a_worker(void* ctx) {
  auto* l = static_cast<pf_ledger*>(ctx);
  l->status = mote_parallel_for(l->rt, l->first, l->last, l->grain, pf_count, l);
}

::testing::AssertionResult pf_covered(const pf_ledger& l) {
  if (l.bad.load() != 0) return ::testing::AssertionFailure() << l.bad.load() << " bad sub-ranges";
  if (l.off_worker.load() != 0)
    return ::testing::AssertionFailure() << l.off_worker.load() << " calls off the workers";
  if (!l.visits.empty() && l.calls.load() == 0) return ::testing::AssertionFailure() << "no calls";
  for (std::size_t k = 0; k < l.visits.size(); ++k) {
    if (l.visits[k].load() != 1) {
      return ::testing::AssertionFailure()
             << "iteration " << k << " ran " << l.visits[k].load() << " times";
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace

TEST(capi, ParallelForCoversTheRangeOnce) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  const long long ranges[][2] = {{0, 1000},
                                 {-5000, 3001},
                                 {-1, 0},
                                 {7, 8},
                                 {LLONG_MAX - 1000, LLONG_MAX},
                                 {LLONG_MIN, LLONG_MIN + 1000}};
  for (const auto& r : ranges) {
    for (long long grain : {0LL, 1LL, 3LL, 64LL, 1000LL, 5000LL, LLONG_MAX}) {
      pf_ledger outside(r[0], r[1], grain);  // from this thread: the caller blocks
      ASSERT_EQ(mote_parallel_for(rt, r[0], r[1], grain, pf_count, &outside), MOTE_OK)
          << mote_last_error();
      EXPECT_TRUE(pf_covered(outside)) << "[" << r[0] << ", " << r[1] << "), grain " << grain;
      pf_ledger inside(r[0], r[1], grain);  // from a worker of rt: a loop there
      inside.rt = rt;
      ASSERT_EQ(mote_run(rt, pf_from_a_worker, &inside), MOTE_OK) << mote_last_error();
      EXPECT_EQ(inside.status, MOTE_OK);
      EXPECT_TRUE(pf_covered(inside))
          << "[" << r[0] << ", " << r[1] << "), grain " << grain << ", from a worker";
    }
  }
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

TEST(capi, ParallelForRejectsBadArgumentsAndCallsNothingForAnEmptyRange) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  pf_ledger l(0, 10, 0);
  EXPECT_EQ(mote_parallel_for(nullptr, 0, 10, 0, pf_count, &l), MOTE_EINVAL);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(mote_parallel_for(rt, 0, 10, 0, nullptr, &l), MOTE_EINVAL);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(mote_parallel_for(rt, 0, 10, -1, pf_count, &l), MOTE_EINVAL);
  EXPECT_FALSE(last_error().empty());
  EXPECT_EQ(mote_parallel_for(rt, 0, 10, LLONG_MIN, pf_count, &l), MOTE_EINVAL);
  EXPECT_EQ(l.calls.load(), 0);
  const long long empty[][2] = {
      {5, 5}, {5, 4}, {0, -1000}, {LLONG_MAX, LLONG_MIN}, {LLONG_MIN, LLONG_MIN}};
  for (const auto& r : empty) {
    for (long long grain : {0LL, 3LL}) {
      EXPECT_EQ(mote_parallel_for(rt, r[0], r[1], grain, pf_count, &l), MOTE_OK)
          << mote_last_error();
    }
  }
  EXPECT_EQ(l.calls.load(), 0);
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

namespace {

struct pf_nested {
  mote_runtime* rt;
  long long inner;
  std::vector<std::atomic<unsigned>> visits;
  std::atomic<long> failed{0};
};

struct pf_inner_ctx {
  pf_nested* n;
  long long i;
};

void pf_inner(void* ctx, long long begin, long long end) {
  auto* c = static_cast<pf_inner_ctx*>(ctx);
  for (long long j = begin; j < end; ++j) {
    c->n->visits[static_cast<std::size_t>(c->i * c->n->inner + j)].fetch_add(1);
  }
}

void pf_outer(void* ctx, long long begin, long long end) {
  auto* n = static_cast<pf_nested*>(ctx);
  for (long long i = begin; i < end; ++i) {
    pf_inner_ctx c{n, i};
    if (mote_parallel_for(n->rt, 0, n->inner, i % 3, pf_inner, &c) != MOTE_OK)
      n->failed.fetch_add(1);
  }
}

void pf_throw_at_777(void* ctx, long long begin, long long end) {
  static_cast<std::atomic<long>*>(ctx)->fetch_add(1);
  for (long long i = begin; i < end; ++i) {
    if (i == 777) throw std::runtime_error("loop body gave up at 777");
  }
}

void pf_always_throw(void* ctx, long long, long long) {
  static_cast<std::atomic<long>*>(ctx)->fetch_add(1);
  throw std::runtime_error("every call throws");
}

void pf_throw_int(void*, long long, long long) { throw 17; }

struct pf_failing_run {
  mote_runtime* rt = nullptr;
  mote_status status = MOTE_OK;
  std::string message;
};

void pf_throw_from_a_worker(void* arg) {
  auto* f = static_cast<pf_failing_run*>(arg);
  std::atomic<long> calls{0};
  f->status = mote_parallel_for(f->rt, 0, 100000, 0, pf_throw_at_777, &calls);
  f->message = mote_last_error();  // this worker's own message
}

}  // namespace

TEST(capi, ParallelForNestedInsideABody) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  pf_nested n{rt, 300, std::vector<std::atomic<unsigned>>(100 * 300), {}};
  ASSERT_EQ(mote_parallel_for(rt, 0, 100, 0, pf_outer, &n), MOTE_OK) << mote_last_error();
  ASSERT_EQ(mote_parallel_for(rt, 0, 100, 1, pf_outer, &n), MOTE_OK) << mote_last_error();
  EXPECT_EQ(n.failed.load(), 0);
  for (std::size_t k = 0; k < n.visits.size(); ++k)
    ASSERT_EQ(n.visits[k].load(), 2u) << "iteration " << k;
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}

TEST(capi, ParallelForReportsAThrowingBody) {
  mote_runtime* rt = make_runtime();
  ASSERT_NE(rt, nullptr);
  std::atomic<long> calls{0};
  for (long long grain : {0LL, 1LL, 100LL}) {
    EXPECT_EQ(mote_parallel_for(rt, 0, 100000, grain, pf_throw_at_777, &calls), MOTE_ETASK)
        << "grain " << grain;
    EXPECT_NE(last_error().find("loop body gave up at 777"), std::string::npos) << last_error();
  }
  EXPECT_EQ(mote_parallel_for(rt, -10, 10, 0, pf_throw_int, nullptr), MOTE_ETASK);
  EXPECT_FALSE(last_error().empty());
  // A huge range whose body throws on every call: claiming stops, each
  // participant calls the body once at most.
  for (long long grain : {0LL, 1LL, LLONG_MAX}) {
    calls.store(0);
    EXPECT_EQ(mote_parallel_for(rt, LLONG_MIN, LLONG_MAX, grain, pf_always_throw, &calls),
              MOTE_ETASK)
        << "grain " << grain;
    EXPECT_NE(last_error().find("every call throws"), std::string::npos) << last_error();
    EXPECT_GE(calls.load(), 1);
    EXPECT_LE(calls.load(), 3) << "grain " << grain;  // 2 workers, and the caller at most
  }
  // From a worker: the status and the message there.
  pf_failing_run f;
  f.rt = rt;
  ASSERT_EQ(mote_run(rt, pf_throw_from_a_worker, &f), MOTE_OK) << mote_last_error();
  EXPECT_EQ(f.status, MOTE_ETASK);
  EXPECT_NE(f.message.find("loop body gave up at 777"), std::string::npos) << f.message;
  // The runtime is unharmed.
  pf_ledger l(-300, 3000, 0);
  ASSERT_EQ(mote_parallel_for(rt, l.first, l.last, l.grain, pf_count, &l), MOTE_OK)
      << mote_last_error();
  EXPECT_TRUE(pf_covered(l));
  EXPECT_EQ(mote_finalize(rt), MOTE_OK);
}
