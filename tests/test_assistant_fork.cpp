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

#if defined(__SANITIZE_THREAD__)
constexpr bool kTsan = true;
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
constexpr bool kTsan = true;
#  else
constexpr bool kTsan = false;
#  endif
#else
constexpr bool kTsan = false;
#endif

// ThreadSanitizer cannot run a child that starts threads after a fork of a
// multi-threaded process ("not supported", it dies); the release and ASan
// builds run these tests.
#define SKIP_UNDER_TSAN() \
  if (kTsan) GTEST_SKIP() << "ThreadSanitizer does not support threads started after fork()"

long fib(int n) {
  if (n < 2) return n;
  auto [a, b] = mote::join([&] { return fib(n - 1); }, [&] { return fib(n - 2); });
  return a + b;
}

// Runs child() in a forked process; returns its exit status, or -1 when it
// did not end within the limit (a hang is a failure, not a stuck test).
template <class F>
int in_child(F child) {
  // Let the workers and assistants go idle (past their spin windows) first.
  // glibc's malloc is safe across fork() whatever other threads do, but the
  // AddressSanitizer allocator is not: a thread of ours caught inside free()
  // at the fork leaves its lock held in the child. Parked threads allocate
  // nothing.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const pid_t pid = fork();
  if (pid == 0) _exit(child());
  if (pid < 0) return -2;
  for (int i = 0; i < 6000; ++i) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

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

}  // namespace
