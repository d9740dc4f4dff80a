// The tree barrier (include/mote/tree_barrier.hpp): the tree, the waits (the
// runtime's spin policy, then the event count's waiter_slot) and the
// wake-ups. docs/design.md, "The tree barrier", has the whole argument.
//
// Each thread owns two lines. The first holds its own arrival (written by
// the thread, read by its parent) and its release (written by its parent,
// read by the thread): a parent reads one line per child while its children
// arrive, and each child spins on its own line while the release comes
// down. The two writers of a line take turns (a thread arrives only after
// its release from the barrier before, and its parent releases it only
// after it arrived), so no line is written from two caches at once.
// Arrivals packed on the parent's line (Mellor-Crummey and Scott's layout,
// a line one look can check) cost every child a transfer of a line that the
// parent spins on and its siblings write: with 2 threads on this project's
// 2-CPU machine a line per child took about half the time per barrier
// (medians of 0.6-0.85 us against 1.4-1.7 us packed). The second line
// holds the thread's waiter_slot word, written only when the thread sleeps
// or is woken, so that every notifier's look at it hits its own cache
// while nobody sleeps.
//
// Words carry barrier numbers (a thread's k-th wait is barrier k, modulo
// 2^32), never a flag that is set and reset: a word is written once per
// barrier, by one thread, and no word is written again before its reader has
// read it (a child arrives at k+1 only after its release from k, which comes
// after its parent saw every arrival at k; a parent releases k+1 only after
// the child arrived at k+1, after it read its release from k).
#include "mote/tree_barrier.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "mote/detail/queue_wait.hpp"  // publish_before_wait
#include "mote/error.hpp"
#include "wait/event_count.hpp"
#include "wait/idle.hpp"

namespace mote {

namespace detail {

struct barrier_node {
  // The thread's arrival and release.
  struct alignas(cache_line) flags_line {
    // The last barrier that the owner arrived at, with its whole subtree.
    // Written by the owner, read by its parent.
    std::atomic<std::uint32_t> arrived{0};
    // The last barrier the owner was released from. Written by its parent
    // (the root's: by the root), read by the owner.
    std::atomic<std::uint32_t> released{0};
  } flags;
  // The owner's waiter_slot word (wait/event_count.hpp).
  struct alignas(cache_line) park_line {
    std::atomic<std::uint32_t> word{waiter_slot::kAwake};
  } park;
};
static_assert(sizeof(barrier_node) == 2 * cache_line && alignof(barrier_node) == cache_line,
              "the flags and the park word on lines of their own");

}  // namespace detail

namespace {

using detail::barrier_hook;
using detail::barrier_node;
using detail::idle_wait;
using detail::waiter_slot;

// The notifier's half, after the seq_cst store of an arrival or a release
// to thread n's flags line: the event count's seq_cst form
// (wait/event_count.hpp), the Dekker pair
//
//   waiter (barrier_waiter::park)          notifier (here)
//   A: park word = announced               C: seq_cst store of the arrival
//   X: seq_cst fence (prepare)                or release
//   L: acquire loads of its flags          N: seq_cst load of the park word
//
// C and N are in the single total order S, C first; X precedes C unless L
// saw C, and N precedes X unless N saw A: so either the waiter's look finds
// the arrival (it cancels) or this load finds the announcement (it cancels
// it, or wakes the sleeper). On x86 C is an xchg and N a plain load of a
// line that stays in this cache while its owner is awake: the whole cost of
// a wake-up nobody needs.
//
// (A fence-free notifier against a waiter that runs membarrier(2) before
// its look, the queues' asymmetric form, lost wake-ups here: the
// oversubscribed tests hung with every thread asleep and a child's arrival
// unseen, on this project's 2-CPU virtual machine. The pair above needs no
// help from the kernel.)
void wake(barrier_node& n) noexcept {
  std::atomic<std::uint32_t>& word = n.park.word;
  const std::uint32_t seen = waiter_slot::state_seq_cst(word);
  if (MOTE_UNLIKELY(seen != waiter_slot::kAwake)) waiter_slot::cancel_or_wake(word, seen);
}

// One thread's wait inside one barrier: its looks, its calls to poll(), its
// spin window (one per barrier: a thread that spent it on its children's
// arrivals sleeps at once while it waits for its release, unless poll()
// found work) and its sleeps. With a poll(), a sleep is bounded (kFirstParkNs,
// doubling while sleeps end with nothing to run, up to kLastParkNs): work
// that poll() can reach only by looking again, such as another thread's
// private tasks that it takes after a while (the core's rescue), gets no
// wake-up when its owner computes on without another scheduling point.
class barrier_waiter {
 public:
  barrier_waiter(barrier_node& self, std::atomic<std::uint32_t>& sleepers, std::int64_t spin_ns,
                 barrier_hook poll) noexcept
      // Two pauses per look: a look is one line, and poll() if any.
      : self_(self), sleepers_(sleepers), poll_(poll), idle_(spin_ns, 2), spins_(spin_ns > 0) {}

  // Returns once done() is true. done() reads what other threads publish
  // with acquire loads (it is the look L above).
  template <class Done>
  void until(Done&& done) noexcept {
    for (;;) {
      if (done()) return;
      // poll() (it steals, under OpenMP) at every look at first, spaced out
      // while it finds nothing; done() at every look.
      if (probe_.due()) {
        if (polled()) {
          idle_.reset();
          probe_.reset();
          sleep_ns_ = idle_wait::kFirstParkNs;
          continue;
        }
        probe_.failed();
      }
      // A crowded team (more threads than CPUs) spins its short window
      // with pauses only, then sleeps: a yield at every look handed the CPU
      // to other processes' busy threads for whole time slices (1000
      // barriers of 4 threads on 2 CPUs beside two busy loops: 15.8 s with
      // yields, 0.24 s without; docs/design.md, "One way to wait").
      if (spins_ && idle_.spin()) continue;
      if (park(done)) return;
    }
  }

 private:
  bool polled() noexcept { return poll_.call != nullptr && poll_.call(poll_.target); }

  // The event count's four steps on this thread's waiter_slot: announce
  // (counted in sleepers_, for notify_waiters), look, then cancel or sleep.
  // True when the look found done().
  template <class Done>
  bool park(Done& done) noexcept {
    // About to sleep: the partial batches this thread produced become
    // visible first (idle_wait::spin does it too, when this thread spun).
    detail::publish_before_wait();
    std::atomic<std::uint32_t>& word = self_.park.word;
    waiter_slot::prepare(word, &sleepers_);  // A, then X
    const bool found = done();               // L
    if (!found && polled()) {
      // Work appeared (its notify_waiters() may have seen us, and cancelled
      // the announcement or not): run it and spin again, awake.
      waiter_slot::retire(word, &sleepers_);
      idle_.reset();
      probe_.reset();
      return false;
    }
    if (!found) {
      if (poll_.call == nullptr) {
        waiter_slot::commit(word);
      } else {
        waiter_slot::commit_for(word, sleep_ns_);
        sleep_ns_ = std::min(2 * sleep_ns_, idle_wait::kLastParkNs);
      }
    }
    // Cancel, or back from a sleep (woken, cancelled before it began, timed
    // out or spurious): the caller looks again.
    waiter_slot::retire(word, &sleepers_);
    return found;
  }

  barrier_node& self_;
  std::atomic<std::uint32_t>& sleepers_;
  barrier_hook poll_;
  idle_wait idle_;
  detail::probe_backoff probe_;
  bool spins_;
  std::int64_t sleep_ns_ = idle_wait::kFirstParkNs;  // the next sleep's bound, with a poll()
};

// The spin window of a team with more threads than CPUs.
constexpr std::int64_t kCrowdedSpinNs = 2'000;

// The CPUs the calling thread may run on (its affinity mask; the online
// CPUs when the mask is larger than cpu_set_t or unreadable).
std::size_t thread_cpus() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return static_cast<std::size_t>(CPU_COUNT(&set));
  const unsigned online = std::thread::hardware_concurrency();
  return online == 0 ? 1 : online;
}

}  // namespace

tree_barrier::tree_barrier(std::size_t n, std::chrono::nanoseconds spin, std::size_t cpus)
    : size_(n), spin_ns_(std::max<std::int64_t>(spin.count(), 0)), crowded_(n > (cpus != 0 ? cpus : thread_cpus())) {
  // A crowded team spins briefly: most of the threads it waits for are not
  // running, and a waiter that sleeps gives its CPU to one of them. (On a
  // loaded 2-CPU machine, teams of 8 and 16 threads took 60-80% of the time
  // per barrier with a 2 us window than with 100 us, and less than with
  // none.)
  if (crowded_) spin_ns_ = std::min(spin_ns_, kCrowdedSpinNs);
  if (n == 0) throw usage_error("mote::tree_barrier: a team of 0 threads");
  nodes_ = std::make_unique<detail::barrier_node[]>(n);
}

tree_barrier::~tree_barrier() = default;

void tree_barrier::wait_erased(std::size_t id, hook poll, hook ready) noexcept {
  if (MOTE_UNLIKELY(id >= size_)) {
    // Misuse that wait() cannot throw for: a node past the array would be
    // written, and the tree would wait for a thread that never comes.
    std::fprintf(stderr, "mote::tree_barrier::wait: id %zu is out of range for a team of %zu threads (ids 0..%zu)\n",
                 id, size_, size_ - 1);
    std::abort();
  }
  barrier_node& self = nodes_[id];
  // Relaxed: this thread (or the one that held `id` before it, through
  // whatever handed the id over) read this value when it left the last
  // barrier, and nobody writes it again before this thread arrives.
  const std::uint32_t barrier = self.flags.released.load(std::memory_order_relaxed) + 1;
  barrier_waiter waiter(self, sleepers_, spin_ns_, poll);

  // Up: every child has arrived, with its subtree.
  const std::size_t first_child = id * fan_in + 1;
  const std::size_t children = first_child < size_ ? std::min(fan_in, size_ - first_child) : 0;
  std::size_t seen = 0;
  waiter.until([&] {
    // Acquire: pairs with the child's release store of its arrival, so the
    // work of its whole subtree before this barrier happens before ours
    // after it.
    while (seen < children && nodes_[first_child + seen].flags.arrived.load(std::memory_order_acquire) == barrier) {
      ++seen;
    }
    return seen == children;
  });

  if (id != 0) {
    // Arrive (the parent reads this line), then wait for the release.
    // seq_cst: C of wake()'s Dekker pair; as a release, it publishes this
    // subtree's work before the barrier (received by this thread through the
    // acquire loads above) to the parent.
    self.flags.arrived.store(barrier, std::memory_order_seq_cst);
    wake(nodes_[(id - 1) / fan_in]);
    // Acquire: pairs with the parent's release store below, which carries
    // every thread's arrival down from the root.
    waiter.until([&] { return self.flags.released.load(std::memory_order_acquire) == barrier; });
  } else {
    // The root: everyone has arrived. Hold the release until ready().
    if (ready.call != nullptr) waiter.until([&] { return ready.call(ready.target); });
    // Relaxed: only the root reads its own release word.
    self.flags.released.store(barrier, std::memory_order_relaxed);
  }

  // Down: release the children, each on its own line.
  for (std::size_t k = 0; k < children; ++k) {
    barrier_node& child = nodes_[first_child + k];
    // seq_cst: C of wake()'s Dekker pair; as a release, the child's acquire
    // load above pairs with it: with the chain of arrivals up to the root
    // and releases down from it, every thread's work before the barrier
    // happens before the child's after it.
    child.flags.released.store(barrier, std::memory_order_seq_cst);
    wake(child);
  }
}

void tree_barrier::notify_waiters() noexcept {
  // Y, then one load: the caller's store is C, and a waiter's announcement
  // counts it in sleepers_ before its X (the event count's shared form).
  if (MOTE_LIKELY(!detail::event_count::has_waiters(sleepers_))) return;
  // Some thread has announced: look at every word. Relaxed: Y above orders
  // these loads after the caller's store too, so each waiter whose look may
  // have missed that store is seen announced or asleep here (its word is
  // written before its X).
  for (std::size_t i = 0; i < size_; ++i) {
    std::atomic<std::uint32_t>& word = nodes_[i].park.word;
    const std::uint32_t seen = word.load(std::memory_order_relaxed);
    if (seen != waiter_slot::kAwake) waiter_slot::cancel_or_wake(word, seen);
  }
}

}  // namespace mote
