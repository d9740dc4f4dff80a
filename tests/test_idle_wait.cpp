// The spin policy every wait in mote uses (src/wait/idle.hpp), on a machine
// that is oversubscribed (more threads that spin-wait than CPUs): a wait
// there spins only a short, fixed number of looks and then parks, so that
// its CPU goes to a thread that can make progress. Nothing here is timed:
// the tests count the looks a wait takes before it decides to park.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "mote/topology.hpp"
#include "wait/idle.hpp"

namespace {

using mote::detail::idle_wait;

// Makes the registry see more spinners than CPUs for the scope (unpinned
// ones, as many as the CPUs this process may use, plus one).
class crowd {
 public:
  crowd() : cpus_(mote::topology::system().cpus.size() + 1, -1) { mote::detail::register_spinners(cpus_); }
  ~crowd() { mote::detail::unregister_spinners(cpus_); }
  crowd(const crowd&) = delete;
  crowd& operator=(const crowd&) = delete;

 private:
  std::vector<int> cpus_;
};

// The looks a wait with a window of spin_ns takes before it parks, up to cap.
unsigned looks_before_park(std::int64_t spin_ns, int pauses, unsigned cap) {
  idle_wait idle(spin_ns, pauses);
  unsigned looks = 0;
  while (looks < cap && idle.spin()) ++looks;
  return looks;
}

// A window of a second, on a crowded machine: the wait parks after the
// throttled number of looks, whatever its window (GNU's libgomp does the
// same with its spin count when it has more threads than CPUs).
TEST(IdleWait, CrowdedWaitParksAfterTheThrottledLooks) {
  crowd c;
  ASSERT_TRUE(mote::detail::machine_oversubscribed());
  constexpr std::int64_t kSecond = 1'000'000'000;
  for (int pauses : {1, 2, 4}) {
    const unsigned looks = looks_before_park(kSecond, pauses, 100'000);
    EXPECT_LE(looks, idle_wait::kCrowdedLooks) << pauses << " pauses per look";
  }
  // After a reset (it found work), a fresh throttled window.
  idle_wait idle(kSecond);
  unsigned first = 0;
  while (first < 100'000 && idle.spin()) ++first;
  idle.reset();
  unsigned second = 0;
  while (second < 100'000 && idle.spin()) ++second;
  EXPECT_LE(first, idle_wait::kCrowdedLooks);
  EXPECT_EQ(first, second);
}

// A wait that never parks (kNeverPark: it has nowhere to sleep) keeps
// spinning on a crowded machine too.
TEST(IdleWait, NeverParkWaitKeepsSpinningWhenCrowded) {
  crowd c;
  EXPECT_EQ(looks_before_park(idle_wait::kNeverPark, 1, 1000), 1000u);
}

// A wait whose looks steal probes at every look at first, then every 2nd,
// 4th, ... look after each probe that found nothing, up to every
// kMaxEvery-th; a probe that found work brings it back to every look.
TEST(ProbeBackoff, ProbesGetRarerWhileTheyFindNothing) {
  mote::detail::probe_backoff probe;
  std::vector<unsigned> gaps;  // looks from one probe to the next
  unsigned looks = 0;
  while (gaps.size() < 8) {
    ++looks;
    if (probe.due()) {
      gaps.push_back(looks);
      looks = 0;
      probe.failed();
    }
  }
  constexpr unsigned kMax = mote::detail::probe_backoff::kMaxEvery;
  EXPECT_EQ(gaps, (std::vector<unsigned>{1, 2, 4, 8, kMax, kMax, kMax, kMax}));
  probe.reset();
  EXPECT_TRUE(probe.due());
  EXPECT_EQ(probe.every(), 1u);
}

}  // namespace
