// How every wait in mote spends its time: a worker with nothing to do, a join
// waiting for its thief, a group waiting for its tasks, a thread waiting in
// runtime::run, an assistant with an empty ring and its owner waiting for it.
//
// One policy for all of them:
//  - spin: look every few `pause`s (a sub-microsecond task should not wait
//    microseconds to be noticed), reading the clock every 16 looks;
//  - yield the CPU every 20 us of spinning, so that a busy machine moves on;
//  - while the machine is oversubscribed (more threads that spin-wait than
//    CPUs, or two of them pinned to one CPU), spin only kCrowdedLooks looks,
//    then park: the thread being waited for may be waiting for this CPU,
//    and a sleep hands it over where a yield may hand it to another
//    process's busy thread for a whole time slice (GNU's libgomp throttles
//    its spin count the same way when it has more threads than CPUs). A wait
//    that never parks (kNeverPark) yields at every look instead;
//  - after the spin window, park: sleep in the event count
//    (wait/event_count.hpp), the one primitive every wait sleeps in. A wait
//    whose wake-up does not cover everything it watches (new stealable work
//    wakes nobody who is in a join) parks with a timeout that doubles from
//    50 us to 4 ms (next_park_timeout, for the event count's timed commits).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "mote/detail/platform.hpp"
#include "mote/detail/queue_wait.hpp"

namespace mote::detail {

// True while the threads that spin-wait (the workers of every live runtime,
// and every assistant) outnumber the CPUs this process may use, or two of them
// are pinned to one CPU. Kept by cpu_registry.cpp; a relaxed load.
bool machine_oversubscribed() noexcept;

class idle_wait {
 public:
  static constexpr std::int64_t kNeverPark = std::numeric_limits<std::int64_t>::max();
  static constexpr std::int64_t kFirstParkNs = 50'000;
  static constexpr std::int64_t kLastParkNs = 4'000'000;
  static constexpr std::int64_t kYieldEveryNs = 20'000;
  // The looks a wait spins on a crowded machine before it parks.
  static constexpr unsigned kCrowdedLooks = 32;

  // spin_ns: the spin window (kNeverPark: spin, with yields, forever).
  // pauses: `pause`s between two looks; more for looks that cost more (a
  // worker's probe of every victim) than for a look at one word.
  // yield_every_ns: how often a spin that is not crowded yields anyway (a
  // thread we do not know of may share this CPU and be the one we wait for).
  explicit idle_wait(std::int64_t spin_ns, int pauses = 4, std::int64_t yield_every_ns = kYieldEveryNs) noexcept
      : spin_ns_(spin_ns), yield_every_ns_(yield_every_ns), pauses_(pauses), crowded_(machine_oversubscribed()) {}

  // One look that found nothing. Pauses (or yields), and returns false once
  // the spin window is over: park now.
  bool spin() noexcept {
    if (MOTE_UNLIKELY(!published_)) {
      // The first look that found nothing: this thread is about to wait, so
      // the partial batches it produced become visible now (a consumer may
      // be waiting for them; see queues/batch_queue.hpp), and so do the
      // tasks it holds privately, if it is a worker (an idle worker could
      // run them meanwhile).
      published_ = true;
      publish_before_wait();
    }
    if (crowded_ && spin_ns_ == kNeverPark) {
      thread_yield();
    } else {
      for (int i = 0; i < pauses_; ++i) cpu_pause();
    }
    if (crowded_ && spin_ns_ != kNeverPark && looks_ + 1 >= kCrowdedLooks) return false;
    if ((++looks_ & 15) != 0) return true;
    const std::int64_t now = now_ns();
    crowded_ = machine_oversubscribed();
    if (start_ == 0) {
      start_ = now;
      last_yield_ = now;
      return true;
    }
    if (now - last_yield_ >= yield_every_ns_) {
      thread_yield();
      last_yield_ = now;
    }
    return now - start_ < spin_ns_;
  }

  // Found something: the next idle stretch starts a fresh window.
  void reset() noexcept {
    published_ = false;
    start_ = 0;
    looks_ = 0;
    park_ns_ = kFirstParkNs;
  }

  // The timeout of the next timed park: 50 us, doubling up to 4 ms.
  std::int64_t next_park_timeout() noexcept {
    const std::int64_t t = park_ns_;
    if (park_ns_ < kLastParkNs) park_ns_ *= 2;
    return t;
  }

 private:
  std::int64_t spin_ns_;
  std::int64_t yield_every_ns_;
  std::int64_t start_ = 0;
  std::int64_t last_yield_ = 0;
  std::int64_t park_ns_ = kFirstParkNs;
  unsigned looks_ = 0;
  int pauses_;
  bool crowded_;
  bool published_ = false;
};

// How often a wait whose looks steal probes the other workers: at every
// look at first, then every 2nd, 4th, ... look after each probe that found
// nothing, up to every kMaxEvery-th (about a microsecond apart at 4 pauses a
// look), and at every look again once one found work. The wait's own words
// (its children's count, its barrier's arrivals) are still read at every
// look. A failed probe reads each victim's deque words, which a busy owner
// writes at every push and pop: a thief probing every few pauses cost such
// an owner a miss on its own line at each probe (docs/performance.md, "A
// waiting thread's probes and a busy owner").
class probe_backoff {
 public:
  static constexpr std::uint32_t kMaxEvery = 16;

  // Is this look's probe due?
  bool due() noexcept { return ++looks_ >= every_; }
  // The probe found nothing: the next one comes twice as many looks later.
  void failed() noexcept {
    looks_ = 0;
    if (every_ < kMaxEvery) every_ *= 2;
  }
  // Work was found: probe at every look again.
  void reset() noexcept {
    looks_ = 0;
    every_ = 1;
  }
  std::uint32_t every() const noexcept { return every_; }

 private:
  std::uint32_t looks_ = 0;
  std::uint32_t every_ = 1;
};

// The registry behind machine_oversubscribed() and the assistants' choice of
// CPU: every spinning thread registers itself (with its CPU, or -1 when it is
// not pinned) while it lives.
void register_spinners(const std::vector<int>& cpus);
void unregister_spinners(const std::vector<int>& cpus);
// The CPUs that the workers and assistants of this process are pinned to
// (with repeats), so that a new assistant can keep off them.
std::vector<int> cpus_with_spinners();

}  // namespace mote::detail
