// The compiled side of a runtime: worker threads, the injection queue through
// which other threads hand in work, and the parking protocol.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "mote/detail/platform.hpp"
#include "mote/detail/worker.hpp"
#include "mote/runtime.hpp"
#include "runtime/config.hpp"

namespace mote::detail {

// The CPUs that the workers of live runtimes are pinned to (with repeats), so
// that an assistant can keep off them.
std::vector<int> cpus_with_workers();

// The number of fork()s this process descends from (0 in the original
// process); installs the fork handlers on first use. An object that owns
// threads records it, and knows itself orphaned in a child when it changed.
std::uint64_t current_fork_generation();

class runtime_impl {
 public:
  runtime_impl(const resolved_config& config, runtime* facade);
  ~runtime_impl();
  runtime_impl(const runtime_impl&) = delete;
  runtime_impl& operator=(const runtime_impl&) = delete;

  unsigned num_workers() const noexcept { return static_cast<unsigned>(workers_.size()); }
  const resolved_config& config() const noexcept { return config_; }
  runtime* facade() const noexcept { return facade_; }
  std::int64_t spin_ns() const noexcept { return spin_ns_; }
  worker& worker_at(unsigned i) const noexcept { return *workers_[i]; }

  // Hands t to the workers through the injection queue. Any thread. Throws
  // std::logic_error in a child process after fork() (see orphaned()).
  void submit(task* t);

  // True in a child process after fork(): this runtime's workers live in the
  // parent only. Its destructor then frees memory but joins nothing.
  bool orphaned() const noexcept;
  void check_not_orphaned() const;

  // A task for `self` to run: injected work first (it has waited longest),
  // then a steal from a random victim. nullptr when there is none. Worker only.
  task* find_work(worker& self) noexcept;

  // Wakes one parked idle worker, if any is parked. Called after work became
  // visible to thieves (grow_shared's CAS, a successful steal that left more,
  // an injection). The seq_cst load of idle_sleepers_ pairs with the seq_cst
  // increment in park(): either the parker sees the new work in its last look,
  // or this load sees the parker.
  void notify_one() noexcept {
    if (idle_sleepers_.load(std::memory_order_seq_cst) != 0) wake_one();
  }

  // Group completion: wakes threads parked in task_group::wait(). Touches only
  // the runtime, never the group, which its waiter may already have destroyed.
  void notify_group_waiters() noexcept {
    if (group_waiters_.load(std::memory_order_seq_cst) != 0) {
      group_epoch_.fetch_add(1, std::memory_order_seq_cst);
      futex_wake(&group_epoch_, -1);
    }
  }
  std::atomic<std::uint32_t> group_waiters_{0};
  std::atomic<std::uint32_t> group_epoch_{0};

 private:
  void worker_main(unsigned index);
  void print_stats() const;
  // Sleeps until notify_one(), unless work is visible or the runtime stops.
  void park(worker& self) noexcept;
  // Wakes one parked worker (each parks on its own word, worker::parked_).
  void wake_one() noexcept;
  // Wakes every parked worker; after stop_ is set.
  void wake_all() noexcept;
  bool work_visible(worker& self) noexcept;
  task* take_injected() noexcept;

  resolved_config config_;
  runtime* facade_;
  std::int64_t spin_ns_;
  std::uint64_t generation_;  // the fork generation it was created in
  std::vector<std::unique_ptr<worker>> workers_;
  std::vector<std::thread> threads_;

  // Injection queue: rare (one entry per external call or foreign spawn), so a
  // mutex is the right tool. inject_count_ lets workers skip the lock when the
  // queue is empty; it is written under the mutex, read without it.
  std::mutex inject_mutex_;
  std::deque<task*> inject_;
  std::atomic<std::size_t> inject_count_{0};

  alignas(cache_line) std::atomic<std::uint32_t> idle_sleepers_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace mote::detail
