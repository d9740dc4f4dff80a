// The queues' waits (include/mote/detail/queue_wait.hpp): the heavy barrier,
// the sleep, and each thread's list of producers holding a partial batch.
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <new>
#include <vector>

#include "mote/detail/queue_wait.hpp"
#include "wait/idle.hpp"
#include "wait/event_count.hpp"

namespace mote::detail {

namespace {

long membarrier(int cmd) noexcept { return syscall(__NR_membarrier, cmd, 0U, 0); }

// Registers the process for private expedited membarrier once. Expedited:
// IPIs to the CPUs that run this process's threads, a few microseconds;
// only waiters about to sleep and channels changing mode pay it.
bool register_membarrier() noexcept {
  const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
  return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

bool membarrier_ready() noexcept {
  static const bool ok = register_membarrier();
  return ok;
}

}  // namespace

bool heavy_barrier_available() noexcept { return membarrier_ready(); }

bool heavy_barrier() noexcept {
  if (!membarrier_ready()) return false;
  return membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0;
}

void register_spinner(int cpu) { register_spinners({cpu}); }

void unregister_spinner(int cpu) noexcept {
  try {
    unregister_spinners({cpu});
  } catch (...) {
    // a vector of one int could not be built: the count stays one too high,
    // which only makes waits yield more
  }
}

void wake_waiters(wait_point& w) noexcept {
  // The event count's wake, after notify()'s asymmetric look saw a sleeper
  // (wait/event_count.hpp): moves the epoch, so that a waiter that read the
  // old one and has not slept yet does not sleep, and wakes every sleeper.
  event_count::wake(w.epoch, -1);
}

void wait_slow(wait_point& w, bool (*ready)(void*), void* ctx, std::int64_t spin_ns) noexcept {
  publish_before_wait();
  // Yields every 2 us while it spins: the threads at the two ends of a queue
  // are often the program's own, unknown to mote, and may share one CPU;
  // then the one we wait for runs only when we yield. (A look at the clock
  // comes every 16 looks; on a CPU of its own, a yield returns at once.)
  idle_wait idle(spin_ns, 1, 2'000);
  for (;;) {
    if (ready(ctx)) return;
    if (!idle.spin()) break;
  }
  for (;;) {
    // The event count, asymmetric (wait/event_count.hpp; the top of
    // queue_wait.hpp says why): announce, then look, then sleep. Without
    // membarrier the sleep has a timeout.
    bool fenced = false;
    const std::uint32_t key = event_count::prepare_wait_asymmetric(w.epoch, w.sleepers, &fenced);
    if (ready(ctx)) {
      event_count::cancel_wait(w.sleepers);
      return;
    }
    if (fenced) {
      event_count::commit_wait(w.epoch, w.sleepers, key);
    } else {
      event_count::commit_wait_for(w.epoch, w.sleepers, key, idle.next_park_timeout());
    }
    if (ready(ctx)) return;
  }
}

// ---- Partial batches -------------------------------------------------------

// A thread's producers with a partial batch. The owner walks it before each
// wait and changes it when a producer starts on this thread; another thread
// changes it only to take off a producer it destroys or takes over (rare).
// So the owner's side is fence-free (an asymmetric Dekker pair, as in
// channel.hpp): the owner stores busy = 1 and then loads `remote`; a remote
// thread stores remote = 1, runs heavy_barrier(), and waits for busy == 0.
// Either the owner sees the remote thread and steps aside to the mutex, or
// the remote thread waits for the owner's step to end. Without membarrier(2)
// every step takes the mutex.
//
// Lists are never freed: a thread that ends gives its list back to a pool
// for the next thread, so a producer destroyed on another thread can always
// reach the list it was on (and finds itself gone from it when the thread's
// end came first).
struct pending_list {
  alignas(cache_line) std::atomic<std::uint32_t> busy{0};  // the owner is in a step
  std::vector<pending_batch*> items;
  // items.size(), for a look without entering: only the owner raises it, so
  // its relaxed load sees its own raises; another thread only lowers it.
  std::atomic<std::size_t> count{0};
  pending_list* next_free = nullptr;
  alignas(cache_line) std::atomic<std::uint32_t> remote{0};  // a remote thread is in, or coming
  std::mutex lock;  // remote threads, and the owner when it meets one

  // Under enter/leave (owner) or lock + remote (others): takes p off.
  void remove(pending_batch* p) noexcept {
    for (std::size_t i = items.size(); i-- > 0;) {
      if (items[i] == p) {
        items[i] = items.back();
        items.pop_back();
        count.store(items.size(), std::memory_order_relaxed);
        return;
      }
    }
  }
};

namespace {

const bool asymmetric = heavy_barrier_available();

// The owner's step: runs f() with the list to itself.
template <class F>
void owner_step(pending_list* l, F&& f) {
  if (asymmetric) {
    l->busy.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    // Acquire (a plain load on x86): a remote thread's changes, published by
    // its release store of remote = 0, happen before what f reads.
    if (MOTE_LIKELY(l->remote.load(std::memory_order_acquire) == 0)) {
      f();
      // Release: f's changes happen before a remote thread's acquire load
      // that sees busy == 0.
      l->busy.store(0, std::memory_order_release);
      return;
    }
    l->busy.store(0, std::memory_order_release);
  }
  std::lock_guard<std::mutex> g(l->lock);
  f();
}

// Another thread's step on l.
template <class F>
void remote_step(pending_list* l, F&& f) {
  std::lock_guard<std::mutex> g(l->lock);
  if (asymmetric) {
    l->remote.store(1, std::memory_order_relaxed);
    heavy_barrier();
    backoff b;
    // Acquire: pairs with the owner's release store of busy = 0.
    while (l->busy.load(std::memory_order_acquire) != 0) b.pause();
  }
  f();
  // Release: our change happens before the owner's next step.
  if (asymmetric) l->remote.store(0, std::memory_order_release);
}

std::mutex pool_lock;
pending_list* pool = nullptr;

pending_list* take_list() {
  {
    std::lock_guard<std::mutex> g(pool_lock);
    if (pool != nullptr) {
      pending_list* l = pool;
      pool = l->next_free;
      return l;
    }
  }
  return new pending_list;  // lives as long as the process, in the pool after its thread
}

}  // namespace

struct pending_batch_access {
  // Release: the thread's last publication of p (publish_pending, just
  // before) happens before a delist() on another thread that reads null with
  // its acquire load and then reads p's producer fields (a channel taking
  // over the producer: batch_queue::take_over_flush).
  static void clear(pending_batch& p) noexcept { p.list_.store(nullptr, std::memory_order_release); }
};

namespace {

// Gives the list back when the thread ends, after publishing what is left.
struct pending_owner {
  ~pending_owner() {
    pending_list* l = this_thread_pending;
    if (l == nullptr) return;
    // As a remote step: after it, no producer points here.
    remote_step(l, [l] {
      for (pending_batch* p : l->items) {
        p->publish_pending();
        pending_batch_access::clear(*p);
      }
      l->items.clear();
      l->count.store(0, std::memory_order_relaxed);
    });
    this_thread_pending = nullptr;
    std::lock_guard<std::mutex> g(pool_lock);
    l->next_free = pool;
    pool = l;
  }
};

thread_local pending_owner tls_pending_owner;

}  // namespace

constinit thread_local pending_list* this_thread_pending = nullptr;

void pending_batch::enlist_slow() noexcept {
  pending_list* here = this_thread_pending;
  if (list_.load(std::memory_order_relaxed) != nullptr) delist_slow();  // on another thread's list
  try {
    if (here == nullptr) {
      here = take_list();
      (void)&tls_pending_owner;  // constructs it: its destructor runs at the thread's end
      this_thread_pending = here;
    }
    owner_step(here, [&] {
      here->items.push_back(this);
      here->count.store(here->items.size(), std::memory_order_relaxed);
      list_.store(here, std::memory_order_relaxed);
    });
  } catch (...) {
    // Out of memory: publish at once rather than lose track of the batch.
    publish_pending();
  }
}

void pending_batch::delist_slow() noexcept {
  pending_list* l = list_.load(std::memory_order_acquire);
  if (l == nullptr) return;
  auto off = [&] {
    // Inside the step: the thread's end may have taken it off meanwhile.
    if (list_.load(std::memory_order_relaxed) != l) return;
    l->remove(this);
    // Release, as pending_batch_access::clear: for a later delist() elsewhere
    // that reads null and goes on to the producer's fields.
    list_.store(nullptr, std::memory_order_release);
  };
  if (l == this_thread_pending) {
    owner_step(l, off);
  } else {
    remote_step(l, off);
  }
}

void publish_pending_slow(pending_list* l) noexcept {
  if (l->count.load(std::memory_order_relaxed) == 0) return;
  owner_step(l, [l] {
    for (pending_batch* p : l->items) p->publish_pending();
  });
}

}  // namespace mote::detail
