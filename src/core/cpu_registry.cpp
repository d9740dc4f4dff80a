// The threads of this process that spin-wait (workers and assistants) and the
// CPUs they are pinned to: whether the machine is oversubscribed, and where a
// new assistant should go.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

#include "mote/topology.hpp"
#include "wait/idle.hpp"
#include "core/runtime_impl.hpp"

namespace mote::detail {

namespace {
std::atomic<bool> oversubscribed{false};

// Every live spinner's CPU (-1: not pinned). Changes when runtimes and
// assistants come and go, so a mutex is the right tool.
std::vector<int>& spinner_cpus() {
  static std::vector<int> cpus;
  return cpus;
}

void recompute_locked() {
  const std::vector<int>& cpus = spinner_cpus();
  const std::size_t allowed = topology::system().cpus.size();
  bool crowded = allowed > 0 && cpus.size() > allowed;
  if (!crowded) {
    std::vector<int> pinned;
    for (int c : cpus) {
      if (c >= 0) pinned.push_back(c);
    }
    std::sort(pinned.begin(), pinned.end());
    crowded = std::adjacent_find(pinned.begin(), pinned.end()) != pinned.end();
  }
  // Relaxed: a hint for spinners, read every few looks; acting on it a little
  // late only costs a few pauses or yields.
  oversubscribed.store(crowded, std::memory_order_relaxed);
}
}  // namespace

std::mutex& spinner_registry_mutex() {
  static std::mutex m;
  return m;
}

bool machine_oversubscribed() noexcept { return oversubscribed.load(std::memory_order_relaxed); }

void register_spinners(const std::vector<int>& cpus) {
  std::lock_guard<std::mutex> lock(spinner_registry_mutex());
  spinner_cpus().insert(spinner_cpus().end(), cpus.begin(), cpus.end());
  recompute_locked();
}

void unregister_spinners(const std::vector<int>& cpus) {
  std::lock_guard<std::mutex> lock(spinner_registry_mutex());
  std::vector<int>& all = spinner_cpus();
  for (int c : cpus) {
    auto it = std::find(all.begin(), all.end(), c);
    if (it != all.end()) all.erase(it);
  }
  recompute_locked();
}

std::vector<int> cpus_with_spinners() {
  std::lock_guard<std::mutex> lock(spinner_registry_mutex());
  std::vector<int> pinned;
  for (int c : spinner_cpus()) {
    if (c >= 0) pinned.push_back(c);
  }
  return pinned;
}

void forget_spinners_in_child() noexcept {
  // The child of a fork() has none of the parent's threads. Called with the
  // mutex held by the prepare handler and not yet released (see fork.cpp).
  spinner_cpus().clear();
  oversubscribed.store(false, std::memory_order_relaxed);
}

}  // namespace mote::detail
