// PLACEHOLDER (replaced by the real tree barrier): a central barrier with the
// same interface, so the OpenMP layer builds meanwhile.
#pragma once
#include <atomic>
#include <chrono>
#include <thread>
#include "mote/detail/platform.hpp"
namespace mote {
class tree_barrier {
 public:
  explicit tree_barrier(unsigned n, std::chrono::nanoseconds spin = std::chrono::microseconds(100)) : n_(n) { (void)spin; }
  unsigned size() const noexcept { return n_; }
  void wait(unsigned id) { wait(id, [] { return false; }, [] { return true; }); }
  template <class Poll>
  void wait(unsigned id, Poll&& poll) { wait(id, poll, [] { return true; }); }
  template <class Poll, class Ready>
  void wait(unsigned id, Poll&& poll, Ready&& ready) {
    (void)id;
    const unsigned gen = gen_.load(std::memory_order_acquire);
    if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      while (!ready()) { if (!poll()) std::this_thread::yield(); }
      count_.store(0, std::memory_order_relaxed);
      gen_.store(gen + 1, std::memory_order_release);
      return;
    }
    while (gen_.load(std::memory_order_acquire) == gen) { if (!poll()) std::this_thread::yield(); }
  }
  void notify_waiters() noexcept {}
 private:
  unsigned n_;
  std::atomic<unsigned> count_{0};
  std::atomic<unsigned> gen_{0};
};
}  // namespace mote
