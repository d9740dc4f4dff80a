// The one platform header: cache-line size, pause, yield and futex wrappers.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "mote/export.hpp"

#if defined(__x86_64__) || defined(__i386__)
#  include <immintrin.h>
#endif

namespace mote::detail {

// The destructive-interference size used to keep independently written data
// apart. 128 rather than 64 on x86: the L2 adjacent-line prefetcher pulls cache
// lines in 128-byte pairs, so two hot fields 64 bytes apart still ping-pong.
inline constexpr std::size_t cache_line = 128;

// Spin-wait hint. On x86 `pause` lowers the cost of leaving a spin loop and
// gives the core's resources to its SMT sibling while we wait.
inline void cpu_pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

// Give the rest of this time slice to another runnable thread.
MOTE_API void thread_yield() noexcept;

// Block while *word == expected (or until woken, or spuriously). Returns at
// once if the value differs. Linux futex on a private mapping.
MOTE_API void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept;
// Same, but gives up after timeout_ns nanoseconds.
MOTE_API void futex_wait_for(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                             std::int64_t timeout_ns) noexcept;
// Wake up to `count` threads blocked on word (all of them when count < 0).
// Reads no memory at `word`: a private futex is keyed by its address alone, so
// a thread may wake waiters on a word whose object another thread has just
// destroyed (a finished task, a finished group); a stray wake-up of whatever
// lives there now is harmless, because every futex waiter looks again.
MOTE_API void futex_wake(std::atomic<std::uint32_t>* word, int count) noexcept;

// The low 32 bits of a 64-bit atomic word, as a futex word. Waiters sleep on
// it while those bits are unchanged; the word's writers keep every change a
// waiter cares about inside them. Only its address is used (by the futex
// calls), never a load or store through it.
inline std::atomic<std::uint32_t>* futex_low_half(std::atomic<std::uint64_t>* word) noexcept {
  static_assert(std::endian::native == std::endian::little, "the low half lies first in memory");
  static_assert(sizeof(std::atomic<std::uint64_t>) == 8 && alignof(std::atomic<std::uint64_t>) == 8);
  return reinterpret_cast<std::atomic<std::uint32_t>*>(word);
}

// Monotonic nanoseconds, for spin windows and statistics.
MOTE_API std::int64_t now_ns() noexcept;

// Exponential backoff for contended retries: pause doubling up to a bound,
// then yield the time slice so that an oversubscribed machine makes progress.
class backoff {
 public:
  void pause() noexcept {
    if (count_ <= kPauseLimit) {
      for (int i = 0; i < count_; ++i) cpu_pause();
      count_ *= 2;
    } else {
      thread_yield();
    }
  }
  bool bounded_pause() noexcept {  // false once past the pause phase
    if (count_ > kPauseLimit) return false;
    pause();
    return true;
  }
  void reset() noexcept { count_ = 1; }

 private:
  static constexpr int kPauseLimit = 16;
  int count_ = 1;
};

}  // namespace mote::detail

// Task records are recycled through per-worker caches (task_alloc.hpp), which
// would hide a use-after-free of a record from AddressSanitizer: a freed block
// is reused, never poisoned. ASan builds give every record back to the
// allocator instead. (Blocks of a class are interchangeable, and the blocks
// that go home are made by the library alone, task_cache::take_returnable:
// code built either way can share a runtime.)
#if defined(__SANITIZE_ADDRESS__)
#  define MOTE_TASK_CACHE 0
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer)
#    define MOTE_TASK_CACHE 0
#  endif
#endif
#ifndef MOTE_TASK_CACHE
#  define MOTE_TASK_CACHE 1
#endif

#if defined(__GNUC__)
#  define MOTE_LIKELY(x) __builtin_expect(!!(x), 1)
#  define MOTE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#  define MOTE_NOINLINE __attribute__((noinline))
#  define MOTE_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#  define MOTE_LIKELY(x) (x)
#  define MOTE_UNLIKELY(x) (x)
#  define MOTE_NOINLINE
#  define MOTE_ALWAYS_INLINE inline
#endif
