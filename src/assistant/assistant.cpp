// The assistant thread: the consumer side of the ring, parking, hints, and
// the choice of CPU. docs/assistant.md has the protocol and its orderings.
#include "mote/assistant.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "mote/error.hpp"
#include "mote/topology.hpp"
#include "runtime/runtime_impl.hpp"

namespace mote {

struct assistant::state {
  std::thread thread;
  std::atomic<bool> stop{false};
  // The first exception a task threw since the last wait(). Written by the
  // assistant only while has_error_ is 0, then published by has_error_'s
  // release store; read and cleared by the owner in wait(), when no task is in
  // flight (tail_pub_ == head_), so the two never overlap.
  std::exception_ptr error;
  int cpu = -1;
  std::int64_t idle_park_ns = 0;

  static void main(assistant* a);
  static void park(assistant* a, std::uint64_t tail);
};

namespace {

// The CPU this thread runs on: its only allowed CPU when it is pinned, else
// where it is now.
int owner_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) return c;
    }
  }
  return sched_getcpu();
}

int choose_cpu(const assistant_options& options) {
  if (!options.pin) return -1;
  const topology& topo = topology::system();
  if (options.cpu >= 0) {
    if (topo.find(options.cpu) == nullptr) {
      throw config_error("assistant_options::cpu=" + std::to_string(options.cpu) + ": cpu " +
                         std::to_string(options.cpu) + " is not available to this process");
    }
    return options.cpu;
  }
  const int own = owner_cpu();
  const std::vector<int> siblings = topo.smt_siblings(own);
  if (!siblings.empty()) return siblings.front();
  const cpu_info* me = topo.find(own);
  const std::vector<int> busy = detail::cpus_with_workers();
  int best = -1;
  int best_distance = 0;
  bool best_free = false;
  for (const cpu_info& c : topo.cpus) {
    if (c.os_index == own) continue;
    const bool free = std::find(busy.begin(), busy.end(), c.os_index) == busy.end();
    const int distance = me ? std::abs(c.core - me->core) : 0;
    // Prefer CPUs without a worker, then the nearest core.
    if (best < 0 || (free && !best_free) || (free == best_free && distance < best_distance)) {
      best = c.os_index;
      best_distance = distance;
      best_free = free;
    }
  }
  return best >= 0 ? best : own;  // a one-CPU process shares its only CPU
}

}  // namespace

assistant::assistant() : assistant(assistant_options{}) {}

assistant::assistant(const assistant_options& options)
    : capacity_(options.capacity), owner_token_(detail::thread_token()) {
  if (options.capacity < 2 || options.capacity > 65536 ||
      (options.capacity & (options.capacity - 1)) != 0) {
    throw config_error("assistant_options::capacity=" + std::to_string(options.capacity) +
                       " is not a power of two from 2 to 65536");
  }
  if (options.idle_park.count() < 0) {
    throw config_error("assistant_options::idle_park=" + std::to_string(options.idle_park.count()) +
                       "us is negative");
  }
  mask_ = capacity_ - 1;
  const int cpu = choose_cpu(options);
  slots_ = new detail::assistant_slot[capacity_];
  state_ = new state;
  state_->cpu = cpu;
  state_->idle_park_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(options.idle_park).count();
  try {
    state_->thread = std::thread(&state::main, this);
  } catch (...) {
    delete state_;
    delete[] slots_;
    throw;
  }
}

assistant::~assistant() {
  try {
    if (owner_token_ == detail::thread_token()) wait();
  } catch (...) {
    // Destructors do not throw; wait() first to see a task's exception.
  }
  // Every entry has run (or the owner is gone and nothing more arrives): stop,
  // wake it if parked, and join.
  state_->stop.store(true, std::memory_order_release);
  wake();
  state_->thread.join();
  delete state_;
  delete[] slots_;
}

bool assistant::refresh_tail() noexcept {
  // Acquire: pairs with the assistant's release store of tail_pub_ after an
  // entry ran, so its closure is destroyed before we overwrite the slot.
  tail_cache_ = tail_pub_.load(std::memory_order_acquire);
  return head_ - tail_cache_ < capacity_;
}

void assistant::wake() noexcept {
  if (park_state_.exchange(kAwake, std::memory_order_acq_rel) == kParking) {
    detail::futex_wake(&park_state_, 1);
  }
}

void assistant::wake_up_hint() noexcept {
  sleep_requested_.store(0, std::memory_order_relaxed);
  if (park_state_.load(std::memory_order_relaxed) != kAwake) wake();
}

void assistant::sleep_hint() noexcept { sleep_requested_.store(1, std::memory_order_relaxed); }

void assistant::wait() {
  check_owner("wait");
  if (tail_pub_.load(std::memory_order_acquire) != head_) {
    // seq_cst fence, then look at park_state_: the Dekker pair of the fence in
    // state::park() between its store of kParking and its look at head_pub_.
    // Either the assistant saw our last publish, or we see it parking and wake
    // it. This closes the race that publish()'s relaxed look leaves open.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (park_state_.load(std::memory_order_relaxed) != kAwake) wake();
    // Spin (the tasks are meant to be tiny), then yield the core.
    const std::int64_t start = detail::now_ns();
    unsigned rounds = 0;
    while (tail_pub_.load(std::memory_order_acquire) != head_) {
      detail::cpu_pause();
      if ((++rounds & 1023) == 0 && detail::now_ns() - start > 50'000) detail::thread_yield();
    }
  }
  tail_cache_ = head_;
  // Acquire: pairs with the release store in state::main() after it kept the
  // exception.
  if (MOTE_UNLIKELY(has_error_.load(std::memory_order_acquire) != 0)) {
    std::exception_ptr e = std::move(state_->error);
    state_->error = nullptr;
    has_error_.store(0, std::memory_order_relaxed);
    std::rethrow_exception(e);
  }
}

int assistant::cpu() const noexcept { return state_->cpu; }
std::uint32_t assistant::capacity() const noexcept { return capacity_; }
bool assistant::is_owner() const noexcept { return owner_token_ == detail::thread_token(); }

void assistant::not_owner(const char* what) const {
  throw std::logic_error(std::string("mote::assistant::") + what +
                         ": called from a thread other than the assistant's owner");
}

void assistant::state::park(assistant* a, std::uint64_t tail) {
  a->park_state_.store(kParking, std::memory_order_relaxed);
  // seq_cst fence between the store above and the look at head_pub_ below:
  // the Dekker pair of the fence in wait() (see there).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (a->head_pub_.load(std::memory_order_relaxed) != tail ||
      a->state_->stop.load(std::memory_order_acquire)) {
    a->park_state_.store(kAwake, std::memory_order_relaxed);
    return;
  }
  // Sleep until wake() exchanges the state back to kAwake.
  while (a->park_state_.load(std::memory_order_acquire) == kParking) {
    detail::futex_wait(&a->park_state_, kParking);
  }
}

void assistant::state::main(assistant* a) {
  state* s = a->state_;
  if (s->cpu >= 0) pin_current_thread(s->cpu);
  const std::uint64_t mask = a->mask_;
  detail::assistant_slot* const slots = a->slots_;
  std::uint64_t tail = 0;
  std::uint64_t head_cache = 0;
  std::int64_t idle_since = 0;
  unsigned idle_rounds = 0;
  for (;;) {
    if (tail == head_cache) {
      // Acquire: pairs with publish()'s release store; the entry is complete.
      head_cache = a->head_pub_.load(std::memory_order_acquire);
      if (tail == head_cache) {
        if (s->stop.load(std::memory_order_acquire)) {
          // The owner stops us only after its last wait(): nothing is left.
          break;
        }
        if (a->sleep_requested_.load(std::memory_order_relaxed) != 0) {
          park(a, tail);
          idle_since = 0;
          continue;
        }
        detail::cpu_pause();
        if (s->idle_park_ns > 0 && (++idle_rounds & 255) == 0) {
          const std::int64_t now = detail::now_ns();
          if (idle_since == 0) {
            idle_since = now;
          } else if (now - idle_since >= s->idle_park_ns) {
            park(a, tail);
            idle_since = 0;
          }
        }
        continue;
      }
    }
    detail::assistant_slot* slot = &slots[tail & mask];
    try {
      slot->run(slot->closure);
    } catch (...) {
      if (a->has_error_.load(std::memory_order_relaxed) == 0) {
        s->error = std::current_exception();
        // Release: publishes s->error to wait()'s acquire load.
        a->has_error_.store(1, std::memory_order_release);
      }
    }
    ++tail;
    // Release: the entry has run and its closure is destroyed; the owner may
    // reuse the slot (refresh_tail) and sees the task's effects (wait).
    a->tail_pub_.store(tail, std::memory_order_release);
    idle_since = 0;
  }
}

assistant* this_worker_assistant() noexcept {
  detail::worker* w = detail::current_worker;
  return w ? w->assistant_ : nullptr;
}

}  // namespace mote
