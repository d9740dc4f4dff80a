// Shared helpers for the tests: sizes that shrink under sanitizers, a seeded
// random source, a type that counts its own lifetime, fib with mote::join
// and its serial twin, an environment variable set for one scope, and a guard
// that turns a hang into a failure.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>

#include "mote/join.hpp"
#include "mote/runtime.hpp"

namespace mote_test {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#  else
inline constexpr bool kSanitized = false;
#  endif
#else
inline constexpr bool kSanitized = false;
#endif

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kTsan = true;
#elif defined(__has_feature)
#  if __has_feature(thread_sanitizer)
inline constexpr bool kTsan = true;
#  else
inline constexpr bool kTsan = false;
#  endif
#else
inline constexpr bool kTsan = false;
#endif

// Options for a test runtime: n workers and a short spin window, so that
// the park paths run too.
inline mote::runtime_options workers(unsigned n,
                                     std::chrono::microseconds spin = std::chrono::microseconds(20)) {
  mote::runtime_options o;
  o.num_workers = n;
  o.spin = spin;
  return o;
}

// n in a release build, n / divisor (at least 1) under a sanitizer, which
// slows the concurrent code 5-15x; the sanitizer stages also repeat each test.
inline long scaled(long n, long divisor = 2) {
  if (!kSanitized) return n;
  const long v = n / divisor;
  return v > 0 ? v : 1;
}

// Seed from MOTE_TEST_SEED when set (to replay a failure), else fixed.
inline std::uint64_t test_seed() {
  const char* s = std::getenv("MOTE_TEST_SEED");
  return s ? std::strtoull(s, nullptr, 10) : 20261122u;
}

// Counts live instances, to catch leaks and double destruction of results and
// closures that cross threads.
struct lifetime {
  static inline std::atomic<long> live{0};
  static inline std::atomic<long> double_destroyed{0};
  long value = 0;
  bool alive = true;
  explicit lifetime(long v = 0) : value(v) { live.fetch_add(1); }
  lifetime(const lifetime& o) : value(o.value) { live.fetch_add(1); }
  lifetime(lifetime&& o) noexcept : value(o.value) { live.fetch_add(1); }
  lifetime& operator=(const lifetime&) = default;
  ~lifetime() {
    if (!alive) double_destroyed.fetch_add(1);
    alive = false;
    live.fetch_sub(1);
  }
};

inline long serial_fib(int n) { return n < 2 ? n : serial_fib(n - 1) + serial_fib(n - 2); }

// The kernel's id of the calling thread (for /proc/self/task/<id>).
inline long this_thread_id() { return static_cast<long>(::syscall(SYS_gettid)); }

// How often thread `tid` of this process has gone to sleep (futex waits
// included; a yield or a preemption does not count): the kernel's count,
// which moves only when the thread blocks. -1 when /proc does not say.
inline long voluntary_switches(long tid) {
  std::ifstream f("/proc/self/task/" + std::to_string(tid) + "/status");
  std::string key;
  while (f >> key) {
    if (key == "voluntary_ctxt_switches:") {
      long n = 0;
      f >> n;
      return n;
    }
  }
  return -1;
}

// The recursion that every fork-join test leans on: one join per call.
inline long fib(int n) {
  if (n < 2) return n;
  auto [a, b] = mote::join([&] { return fib(n - 1); }, [&] { return fib(n - 2); });
  return a + b;
}

// Runs child() in a forked process and returns its exit status, or -1 when it
// did not end within a minute (a hang is a failure, not a stuck test).
// ThreadSanitizer cannot run a child that starts threads after a fork of a
// multi-threaded process: callers skip under it (kTsan).
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
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

// Sets (or, with nullptr, unsets) an environment variable for one scope.
class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~scoped_env() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  scoped_env(const scoped_env&) = delete;
  scoped_env& operator=(const scoped_env&) = delete;

 private:
  std::string name_;
  std::string old_;
  bool had_ = false;
};

// Ends the process with a message naming `what` if it is not dismissed
// (destroyed) within `limit`: a wait that never returns is a failure, not a
// stuck run. Give a limit orders of magnitude above what the guarded code
// takes, even under a sanitizer on a loaded machine; it measures no speed.
//
//   { mote_test::hang_guard guard("the pipeline's wait", std::chrono::seconds(240)); p.wait(); }
class hang_guard {
 public:
  explicit hang_guard(std::string what, std::chrono::seconds limit = std::chrono::seconds(240))
      : what_(std::move(what)), watcher_([this, limit] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "hang: %s did not return within %lld s\n", what_.c_str(),
                         static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  ~hang_guard() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_one();
    watcher_.join();
  }
  hang_guard(const hang_guard&) = delete;
  hang_guard& operator=(const hang_guard&) = delete;

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread watcher_;
};

}  // namespace mote_test
