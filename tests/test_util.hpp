// Shared helpers for the tests: sizes that shrink under sanitizers, a seeded
// random source, and a type that counts its own lifetime.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <random>

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

}  // namespace mote_test
