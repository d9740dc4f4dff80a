// Pinning the calling thread to one CPU.
#include <pthread.h>
#include <sched.h>

#include "mote/topology.hpp"

namespace mote {

bool pin_current_thread(int os_index) noexcept {
  // Far beyond any kernel's NR_CPUS; refusing here keeps a bogus index from
  // costing a large mask allocation before the kernel refuses it anyway.
  constexpr int kMaxCpuIndex = 1 << 22;
  if (os_index < 0 || os_index >= kMaxCpuIndex) return false;
  // A dynamically sized mask: the fixed cpu_set_t stops at CPU 1023.
  cpu_set_t* set = CPU_ALLOC(os_index + 1);
  if (set == nullptr) return false;
  const std::size_t bytes = CPU_ALLOC_SIZE(os_index + 1);
  CPU_ZERO_S(bytes, set);
  CPU_SET_S(os_index, bytes, set);
  // The kernel rejects a mask with no online, permitted CPU (EINVAL) and
  // leaves the old affinity in place. On success it migrates the thread before
  // returning, so the caller is already running on os_index.
  const bool pinned = pthread_setaffinity_np(pthread_self(), bytes, set) == 0;
  CPU_FREE(set);
  return pinned;
}

}  // namespace mote
