// fork() in a process with a running assistant and runtime: the child cannot
// use the parent's (their threads do not exist there), is told so, and can
// make new ones. The child reports through its exit status.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "mote/mote.hpp"
#include "test_util.hpp"

namespace {

using mote_test::kTsan;

// ThreadSanitizer cannot run a child that starts threads after a fork of a
// multi-threaded process ("not supported", it dies); the release and ASan
// builds run these tests.
#define SKIP_UNDER_TSAN() \
  if (kTsan) GTEST_SKIP() << "ThreadSanitizer does not support threads started after fork()"

using mote_test::fib;

using mote_test::in_child;

TEST(AssistantFork, ChildIsToldAndCanStartAgain) {
  SKIP_UNDER_TSAN();
  mote::assistant parent_helper;
  int x = 0;
  parent_helper.submit([&x] { x = 1; });
  parent_helper.wait();
  ASSERT_EQ(x, 1);
  const int status = in_child([&] {
    int code = 0;
    // The parent's assistant: its thread is gone; wait() says so.
    try {
      parent_helper.submit([&x] { x = 2; });
      parent_helper.wait();
      code |= 1;
    } catch (const std::logic_error& e) {
      if (std::string(e.what()).find("fork") == std::string::npos) code |= 2;
    }
    // A new one works.
    mote::assistant mine;
    long sum = 0;
    mine.submit([&sum] { sum = 42; });
    mine.wait();
    if (sum != 42) code |= 4;
    return code;  // parent_helper's destructor runs in the parent only
  });
  EXPECT_EQ(status, 0);
  // The parent's assistant is unaffected.
  parent_helper.submit([&x] { x = 3; });
  parent_helper.wait();
  EXPECT_EQ(x, 3);
}

TEST(AssistantFork, WorkerAssistantsAndDefaultRuntimeInChild) {
  SKIP_UNDER_TSAN();
  mote::runtime rt(mote::runtime_options{.num_workers = 2, .assistants = true});
  EXPECT_EQ(rt.run([] { return fib(15); }), mote_test::serial_fib(15));
  const int status = in_child([&] {
    int code = 0;
    try {
      (void)rt.run([] { return 1; });
      code |= 1;
    } catch (const std::logic_error& e) {
      if (std::string(e.what()).find("fork") == std::string::npos) code |= 2;
    }
    // The default runtime is created afresh in the child.
    if (fib(15) != mote_test::serial_fib(15)) code |= 4;
    mote::runtime fresh(mote::runtime_options{.num_workers = 2, .assistants = true});
    const long r = fresh.run([] {
      mote::assistant* a = mote::this_worker_assistant();
      if (a == nullptr) return -1L;
      long half = 0;
      a->submit([&half] { half = fib(10); });
      const long other = fib(10);
      a->wait();
      return half + other;
    });
    if (r != 2 * mote_test::serial_fib(10)) code |= 8;
    return code;
  });
  EXPECT_EQ(status, 0);
  EXPECT_EQ(rt.run([] { return fib(15); }), mote_test::serial_fib(15));
}

// A spawn that cannot be handed in (the runtime was created before fork(),
// so submit refuses) adds nothing: the group's count is as before, so wait()
// and the destructor return instead of waiting forever, and the refused
// closure is destroyed. A group whose tasks were still pending in the parent
// cannot be waited in the child (usage_error), and is destroyed without a
// wait: nothing in the child can run or touch its tasks.
TEST(AssistantFork, GroupSpawnRefusedInChildLosesNothing) {
  SKIP_UNDER_TSAN();
  mote::runtime rt(mote::runtime_options{.num_workers = 2});
  mote::task_group pending(rt);
  std::atomic<bool> release{false};
  pending.spawn([&release] {
    while (!release.load()) std::this_thread::yield();
  });
  const int status = in_child([&] {
    int code = 0;
    {
      mote::task_group g(rt);  // of the parent's runtime
      const long before = mote_test::lifetime::live.load();
      try {
        mote_test::lifetime payload(1);
        g.spawn([payload] { (void)payload; });
        code |= 1;  // the spawn should have been refused
      } catch (const mote::usage_error&) {
      }
      if (mote_test::lifetime::live.load() != before) code |= 2;  // the closure leaked
      g.wait();  // nothing pending: returns
    }  // and the destructor returns too
    try {
      pending.wait();
      code |= 4;
    } catch (const mote::usage_error& e) {
      if (std::string(e.what()).find("fork") == std::string::npos) code |= 8;
    }
    return code;  // `pending` is destroyed by the parent only
  });
  EXPECT_EQ(status, 0);
  release.store(true);
  pending.wait();
}

}  // namespace
