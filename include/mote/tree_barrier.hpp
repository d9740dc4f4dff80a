// mote::tree_barrier: a reusable barrier for a fixed team of n threads, each
// with its own id in 0..n-1, whose waits can run work (an OpenMP team's
// tasks) and hold the release until a condition holds.
//
// Arrival climbs a tree of fan-in 4 (the thread with id i is the parent of
// 4i+1..4i+4, id 0 is the root): a thread waits until each of its children
// has marked its arrival on the child's own cache line, then marks its own.
// The root, once every thread has arrived (and ready() holds, below),
// starts the release, which goes back down the same tree: a parent writes
// each child's release word, on that child's line, where the child spins.
// No two threads write a line at once, a barrier that nobody sleeps in
// takes no lock and no read-modify-write, and each word carries the number
// of the barrier it belongs to, so the barrier is ready again as soon as a
// thread has left it. (Mellor-Crummey and Scott's tree barrier; XGOMP puts
// one of this kind in place of GNU OpenMP's centralized barrier.)
//
// A waiting thread spins (pause, and briefly on a crowded machine) for the
// spin window, then sleeps on the runtime's event count, so an idle team, or
// a team of more threads than CPUs, costs no CPU. Every thread that writes
// what another one waits for wakes it if it sleeps: its write is a seq_cst
// store, then one load of a word that stays in its cache while nobody
// sleeps.
//
//   mote::tree_barrier barrier(4);
//   std::vector<std::thread> team;
//   for (std::size_t id = 0; id < 4; ++id) {
//     team.emplace_back([&barrier, id] {
//       for (int step = 0; step < 100; ++step) {
//         // ... this thread's share of the step ...
//         barrier.wait(id);  // everything written before is visible after
//       }
//     });
//   }
//   for (auto& t : team) t.join();
//
// With work to run while waiting (OpenMP's task scheduling point at a
// barrier, where the team runs the tasks it made before anyone leaves):
//
//   barrier.wait(id, [&] { return run_one_task(); },   // true: it ran one
//                [&] { return tasks_left.load(std::memory_order_acquire) == 0; });
//   // and whoever makes a task (or finishes the last one) calls
//   barrier.notify_waiters();
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "mote/detail/platform.hpp"
#include "mote/export.hpp"

namespace mote {

namespace detail {
struct barrier_node;  // a thread's two lines: src/sync/tree_barrier.cpp
// A callable, type-erased without allocation: it lives in the caller's frame
// for the whole wait.
struct barrier_hook {
  bool (*call)(void*) = nullptr;
  void* target = nullptr;
};
}  // namespace detail

class MOTE_API tree_barrier {
 public:
  // Children per parent in the arrival tree (and the release tree).
  static constexpr std::size_t fan_in = 4;
  // The runtime's spin window (runtime_options::spin's default).
  static constexpr std::chrono::nanoseconds default_spin{100'000};

  // A team of n threads (n >= 1; mote::usage_error otherwise). spin: how
  // long a waiter spins before it sleeps; 0 sleeps at once. A team of more
  // threads than `cpus` spins 2 us at most. cpus: the CPUs the team's
  // threads may spread over; 0, the default, counts the constructing
  // thread's affinity mask. A thread pinned to one CPU that builds a barrier
  // for threads placed elsewhere passes the team's count:
  //
  //   // this thread is pinned; the team's 4 threads run on 4 CPUs
  //   mote::tree_barrier barrier(4, mote::tree_barrier::default_spin, 4);
  explicit tree_barrier(std::size_t n, std::chrono::nanoseconds spin = default_spin, std::size_t cpus = 0);
  // Only once no thread is inside wait() or notify_waiters().
  ~tree_barrier();
  tree_barrier(const tree_barrier&) = delete;
  tree_barrier& operator=(const tree_barrier&) = delete;

  // Thread `id` (0 <= id < size(), one thread per id, each id once per
  // barrier) arrives and waits until all n have arrived. What every thread
  // did before its wait happens before what any thread does after its wait
  // returns. An id out of range is misuse: a one-line message naming the id
  // and size() on stderr, then abort (every form of wait).
  void wait(std::size_t id) noexcept { wait_erased(id, hook{}, hook{}); }

  // As wait(id), calling poll() between looks while it waits: poll runs some
  // work (a task) and returns true when it did, which restarts the spin
  // window. It may not throw (wait is noexcept), nor wait in this barrier.
  // A waiter with a poll() sleeps at most 50 us, doubling up to 4 ms while
  // it wakes to nothing, so that work poll() finds only by looking again is
  // found without a notify_waiters().
  template <class Poll>
    requires std::is_invocable_r_v<bool, Poll&>
  void wait(std::size_t id, Poll&& poll) noexcept {
    wait_erased(id, make_hook(poll), hook{});
  }

  // As wait(id, poll), and the release waits for ready() as well: the thread
  // with id 0 (the root of the tree), once every thread has arrived, calls
  // poll() and ready() in turn until ready() returns true, then lets the
  // team go; the others keep polling meanwhile. Only id 0 calls ready();
  // the others may pass the same callable, or any. A change that can make
  // ready() true, or give poll() work, must be followed by notify_waiters()
  // (a thread asleep here does not look otherwise).
  template <class Poll, class Ready>
    requires std::is_invocable_r_v<bool, Poll&> && std::is_invocable_r_v<bool, Ready&>
  void wait(std::size_t id, Poll&& poll, Ready&& ready) noexcept {
    wait_erased(id, make_hook(poll), make_hook(ready));
  }

  // Any thread, after the store that gives a waiter's poll() work or makes
  // ready() true: wakes the threads asleep in this barrier, so they look
  // again. A fence and one load when nobody sleeps.
  void notify_waiters() noexcept;

  // The number of threads in the team.
  std::size_t size() const noexcept { return size_; }
  // More threads than the CPUs they may use (the constructor's `cpus`): its
  // waits spin 2 us at most before they sleep.
  //
  //   if (mote::tree_barrier(8, mote::tree_barrier::default_spin, 2).crowded()) { /* true */ }
  bool crowded() const noexcept { return crowded_; }

 private:
  using hook = detail::barrier_hook;
  template <class F>
  static hook make_hook(F& f) noexcept {
    return hook{[](void* p) -> bool { return static_cast<bool>((*static_cast<F*>(p))()); },
                const_cast<void*>(static_cast<const void*>(std::addressof(f)))};
  }

  void wait_erased(std::size_t id, hook poll, hook ready) noexcept;

  std::size_t size_;
  std::int64_t spin_ns_;
  // More threads than the CPUs they may use: a waiter spins briefly, then
  // sleeps, since the thread it waits for may need its CPU.
  bool crowded_;
  std::unique_ptr<detail::barrier_node[]> nodes_;
  // Threads announced or asleep in this barrier (the event count's waiter
  // count). Written only by threads about to sleep and by them on waking,
  // so that notify_waiters()' load hits its cache while nobody sleeps. A
  // line of its own: the class's alignment pads the object's end.
  alignas(detail::cache_line) std::atomic<std::uint32_t> sleepers_{0};
};

}  // namespace mote
