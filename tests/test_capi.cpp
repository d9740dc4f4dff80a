// The C API (include/mote.h): status codes, the per-thread error message, and
// runtimes and task groups driven through it.

#include "mote.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

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

// Unsets a variable for the test's lifetime and restores it afterwards.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
      had_ = true;
    }
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~scoped_env() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace

TEST(capi, StrerrorNamesEveryStatus) {
  const mote_status all[] = {MOTE_OK,    MOTE_EINVAL, MOTE_ECONFIG,  MOTE_ENOMEM,
                             MOTE_ETASK, MOTE_EBUSY,  MOTE_EINTERNAL};
  std::vector<std::string> seen;
  for (mote_status s : all) {
    const char* text = mote_strerror(s);
    ASSERT_NE(text, nullptr);
    EXPECT_STRNE(text, "unknown status");
    for (const std::string& other : seen) EXPECT_NE(other, text);
    seen.emplace_back(text);
  }
  EXPECT_STREQ(mote_strerror(static_cast<mote_status>(42)), "unknown status");
  EXPECT_STREQ(mote_strerror(static_cast<mote_status>(-1)), "unknown status");
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
  EXPECT_LT(o.spin_us, 0);
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

namespace {
void throw_from_cpp(void*) { throw std::runtime_error("the callback gave up"); }
void throw_int(void*) { throw 17; }
}  // namespace

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

// ---- The assistant through the C API -----------------------------------------

namespace {
void add_index(void* arg) { static_cast<std::atomic<long>*>(arg)->fetch_add(1, std::memory_order_relaxed); }
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
    for (long i = 0; i < n / 20; ++i) ASSERT_EQ(mote_assistant_submit(a, add_index, &count), MOTE_OK);
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
  EXPECT_NE(std::string(mote_last_error()).find("capacity=1000"), std::string::npos) << mote_last_error();
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
