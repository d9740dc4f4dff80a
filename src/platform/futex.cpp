#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

#include "mote/detail/platform.hpp"
#include "mote/detail/queue_wait.hpp"

namespace mote::detail {

namespace {
// std::atomic<uint32_t> is layout-compatible with uint32_t on every platform
// we build for; the static_asserts pin that claim.
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

long futex(std::atomic<std::uint32_t>* word, int op, std::uint32_t val, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), op | FUTEX_PRIVATE_FLAG, val,
                 timeout, nullptr, 0);
}
}  // namespace

void thread_yield() noexcept { sched_yield(); }

// Every sleep of a mote thread comes through here: before it, the partial
// batches the thread produced on mote's queues become visible, so that an
// item never sits unseen while its producer sleeps (queues/batch_queue.hpp),
// and so do a worker's private tasks (split_deque::publish).
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept {
  publish_before_wait();
  futex(word, FUTEX_WAIT, expected, nullptr);
}

void futex_wait_for(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                    std::int64_t timeout_ns) noexcept {
  if (timeout_ns <= 0) return;
  publish_before_wait();
  timespec ts{static_cast<time_t>(timeout_ns / 1000000000), static_cast<long>(timeout_ns % 1000000000)};
  futex(word, FUTEX_WAIT, expected, &ts);
}

void futex_wake(std::atomic<std::uint32_t>* word, int count) noexcept {
  futex(word, FUTEX_WAKE, static_cast<std::uint32_t>(count < 0 ? INT_MAX : count), nullptr);
}

std::int64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace mote::detail
