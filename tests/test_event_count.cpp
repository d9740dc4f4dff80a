// The event count (src/wait/event_count.hpp): its three forms one by one, and
// a hunt for lost wake-ups with many waiters and notifiers.
//
// The same file builds a second executable, test_event_count_unfenced, with
// MOTE_EVENT_COUNT_UNFENCED: the event count's seq_cst fences become compiler
// fences, and there the hunt must find a lost wake-up. That shows that the
// hunt detects what the fences prevent (a hunt that passes with and without
// them would prove nothing).
//
// How the hunt tells a lost wake-up from a slow one, without a clock: a
// waiter that committed and came back (by its generous timeout) looks at the
// notifier's "round r notified" mark and then at its own futex word. If the
// notify for its round has returned and the word still shows no wake-up for
// it (the epoch it read before announcing; its slot still asleep), then that
// notify looked at the announcement and did not see it, while the waiter's
// look did not see the condition: exactly the outcome the fences exclude
// (the argument in event_count.hpp). A notifier that is merely late has not
// marked the round yet, so no timing can make a correct event count fail.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "mote/detail/platform.hpp"
#include "test_util.hpp"
#include "wait/event_count.hpp"

namespace {

using mote::detail::event_count;
using mote::detail::event_word;
using mote::detail::waiter_slot;
using clock_type = std::chrono::steady_clock;

// A waiter's sleep before it looks again by itself. Long against any
// wake-up (microseconds), short enough that a lost one is reported soon.
constexpr std::int64_t kCommitTimeoutNs = 50'000'000;

struct hunt_result {
  std::uint64_t rounds = 0;   // rounds that every waiter of a cell saw
  std::uint64_t commits = 0;  // sleeps (the path under test)
  std::uint64_t lost = 0;     // lost wake-ups
};

enum class form { shared, targeted };

// One condition (a round number), one notifier, `waiters` waiters. Each round
// the notifier waits until every waiter has seen the last one, waits a random
// while, publishes the next and notifies; the waiters go straight from the
// last round to prepare/look/commit, so that the two sides meet in every
// order.
struct alignas(mote::detail::cache_line) cell {
  alignas(mote::detail::cache_line) std::atomic<std::uint32_t> round{0};
  alignas(mote::detail::cache_line) std::atomic<std::uint32_t> epoch{0};  // shared form
  std::atomic<std::uint32_t> waiting{0};                                   // both forms' count
  alignas(mote::detail::cache_line) std::atomic<std::uint32_t> acks{0};
  std::atomic<std::uint32_t> notified{0};  // the last round whose notify returned
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<std::atomic<std::uint32_t>>> slots;  // targeted form
};

void random_delay(std::minstd_rand& rng, unsigned max_pauses) {
  const unsigned n = rng() % (max_pauses + 1);
  for (unsigned i = 0; i < n; ++i) mote::detail::cpu_pause();
}

void notifier(cell& c, form f, unsigned waiters, clock_type::time_point deadline, std::uint64_t seed,
              std::atomic<std::uint64_t>& lost) {
  std::minstd_rand rng(static_cast<std::minstd_rand::result_type>(seed));
  for (std::uint32_t r = 1;; ++r) {
    // Every waiter has seen round r - 1 (acquire: their counts are theirs).
    unsigned spins = 0;
    while (c.acks.load(std::memory_order_acquire) < waiters * (r - 1)) {
      if (++spins % 64 == 0) std::this_thread::yield();
      mote::detail::cpu_pause();
    }
    const bool last = clock_type::now() >= deadline || (lost.load(std::memory_order_relaxed) != 0);
    if (last) c.stop.store(true, std::memory_order_relaxed);
    // Mostly a few hundred nanoseconds, so that the publication meets the
    // waiters' announcements; now and then long enough for them to sleep.
    if (rng() % 16 == 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 50));
    } else {
      random_delay(rng, 8);
    }
    // Release: the stop flag above travels with the round.
    c.round.store(r, std::memory_order_release);
    if (f == form::shared) {
      event_count::notify_all(c.epoch, c.waiting);
    } else {
      for (auto& s : c.slots) waiter_slot::notify(*s);
    }
    // Release: a waiter that reads it also reads this notify's effects on
    // its futex word (the epoch's increment, its slot's CAS).
    c.notified.store(r, std::memory_order_release);
    if (last) return;
  }
}

void waiter(cell& c, form f, unsigned index, std::uint64_t seed, std::atomic<std::uint64_t>& lost,
            std::atomic<std::uint64_t>& commits) {
  std::minstd_rand rng(static_cast<std::minstd_rand::result_type>(seed));
  std::atomic<std::uint32_t>* slot = f == form::targeted ? c.slots[index].get() : nullptr;
  for (std::uint32_t r = 1;; ++r) {
    // Up to longer than the notifier's delay: it starts a cache miss later
    // (when it sees this waiter's ack).
    random_delay(rng, 32);
    // Acquire: pairs with the notifier's release store of the round.
    while (c.round.load(std::memory_order_acquire) < r) {
      if (f == form::shared) {
        const std::uint32_t key = event_count::prepare_wait(c.epoch, c.waiting);
        if (c.round.load(std::memory_order_acquire) >= r) {
          event_count::cancel_wait(c.waiting);
          break;
        }
        commits.fetch_add(1, std::memory_order_relaxed);
        if (event_count::commit_wait_for(c.epoch, c.waiting, key, kCommitTimeoutNs)) continue;
        // Not notified since prepare_wait. Acquire both: see the top.
        if (c.notified.load(std::memory_order_acquire) >= r && c.epoch.load(std::memory_order_acquire) == key) {
          lost.fetch_add(1, std::memory_order_relaxed);
        }
      } else {
        waiter_slot::prepare(*slot, &c.waiting);
        if (c.round.load(std::memory_order_acquire) >= r) {
          waiter_slot::retire(*slot, &c.waiting);
          break;
        }
        commits.fetch_add(1, std::memory_order_relaxed);
        const bool slept = waiter_slot::commit_for(*slot, kCommitTimeoutNs);
        if (slept && c.notified.load(std::memory_order_acquire) >= r &&
            slot->load(std::memory_order_acquire) == waiter_slot::kSleeping) {
          lost.fetch_add(1, std::memory_order_relaxed);
        }
        waiter_slot::retire(*slot, &c.waiting);
      }
    }
    const bool stop = c.stop.load(std::memory_order_relaxed);
    c.acks.fetch_add(1, std::memory_order_release);
    if (stop) return;
  }
}

hunt_result hunt(form f, unsigned cells, unsigned waiters_per_cell, std::chrono::milliseconds length) {
  std::vector<std::unique_ptr<cell>> cs;
  for (unsigned i = 0; i < cells; ++i) {
    cs.push_back(std::make_unique<cell>());
    for (unsigned k = 0; k < waiters_per_cell; ++k) {
      cs.back()->slots.push_back(std::make_unique<std::atomic<std::uint32_t>>(waiter_slot::kAwake));
    }
  }
  std::atomic<std::uint64_t> lost{0};
  std::atomic<std::uint64_t> commits{0};
  const auto deadline = clock_type::now() + length;
  const std::uint64_t seed = mote_test::test_seed();
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < cells; ++i) {
    threads.emplace_back(notifier, std::ref(*cs[i]), f, waiters_per_cell, deadline, seed + i, std::ref(lost));
    for (unsigned k = 0; k < waiters_per_cell; ++k) {
      threads.emplace_back(waiter, std::ref(*cs[i]), f, k, seed * 31 + i * 7 + k, std::ref(lost), std::ref(commits));
    }
  }
  for (auto& t : threads) t.join();
  hunt_result res;
  res.lost = lost.load();
  res.commits = commits.load();
  for (auto& c : cs) res.rounds += c->round.load();
  return res;
}

#if !defined(MOTE_EVENT_COUNT_UNFENCED)

std::chrono::milliseconds hunt_length() {
  return std::chrono::milliseconds(mote_test::kSanitized ? 700 : 1500);
}

TEST(EventCount, HuntSharedFormLosesNoWakeUp) {
  mote_test::hang_guard guard("the shared form's hunt", std::chrono::seconds(120));
  const hunt_result r = hunt(form::shared, 3, 3, hunt_length());
  std::printf("%llu rounds, %llu sleeps\n", static_cast<unsigned long long>(r.rounds),
              static_cast<unsigned long long>(r.commits));
  EXPECT_EQ(r.lost, 0u) << "rounds " << r.rounds << ", sleeps " << r.commits;
  EXPECT_GT(r.rounds, 3u);
  EXPECT_GT(r.commits, 0u) << "the hunt never reached the sleep it tests";
}

TEST(EventCount, HuntTargetedFormLosesNoWakeUp) {
  mote_test::hang_guard guard("the targeted form's hunt", std::chrono::seconds(120));
  const hunt_result r = hunt(form::targeted, 3, 3, hunt_length());
  std::printf("%llu rounds, %llu sleeps\n", static_cast<unsigned long long>(r.rounds),
              static_cast<unsigned long long>(r.commits));
  EXPECT_EQ(r.lost, 0u) << "rounds " << r.rounds << ", sleeps " << r.commits;
  EXPECT_GT(r.rounds, 3u);
  EXPECT_GT(r.commits, 0u) << "the hunt never reached the sleep it tests";
}

// Sleeps until `flag`, with the shared form's whole loop.
void wait_for_flag(event_count& ec, const std::atomic<bool>& flag) {
  while (!flag.load(std::memory_order_acquire)) {
    const std::uint32_t key = ec.prepare_wait();
    if (flag.load(std::memory_order_acquire)) {
      ec.cancel_wait();
      break;
    }
    ec.commit_wait(key);
  }
}

TEST(EventCount, NotifyAllWakesEverySleeper) {
  mote_test::hang_guard guard("notify_all's sleepers", std::chrono::seconds(60));
  event_count ec;
  std::atomic<bool> flag{false};
  std::atomic<unsigned> done{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      wait_for_flag(ec, flag);
      done.fetch_add(1);
    });
  }
  // Let them sleep (commit_wait has no timeout: only the notify ends it).
  while (!ec.has_waiters()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(done.load(), 0u);
  flag.store(true, std::memory_order_release);
  ec.notify_all();
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), 6u);
  EXPECT_FALSE(ec.has_waiters());
}

TEST(EventCount, NotifyOneHandsEveryTokenToASleeper) {
  // A semaphore: each notify_one follows one token; every token is taken
  // and every waiter leaves, though each wakes at most one sleeper.
  mote_test::hang_guard guard("notify_one's sleepers", std::chrono::seconds(60));
  event_count ec;
  std::atomic<int> tokens{0};
  constexpr int kWaiters = 4;
  constexpr int kPerWaiter = 200;
  std::atomic<int> taken{0};
  auto take = [&] {
    int t = tokens.load(std::memory_order_acquire);
    while (t > 0) {
      if (tokens.compare_exchange_weak(t, t - 1, std::memory_order_acq_rel)) return true;
    }
    return false;
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < kPerWaiter; ++k) {
        for (;;) {
          if (take()) break;
          const std::uint32_t key = ec.prepare_wait();
          if (take()) {
            ec.cancel_wait();
            break;
          }
          ec.commit_wait(key);
        }
        taken.fetch_add(1);
      }
    });
  }
  std::minstd_rand rng(static_cast<std::minstd_rand::result_type>(mote_test::test_seed()));
  for (int k = 0; k < kWaiters * kPerWaiter; ++k) {
    if (rng() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 100));
    tokens.fetch_add(1, std::memory_order_release);
    ec.notify_one();
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(taken.load(), kWaiters * kPerWaiter);
  EXPECT_EQ(tokens.load(), 0);
}

TEST(EventCount, CancelTakesTheAnnouncementBack) {
  event_count ec;
  EXPECT_FALSE(ec.has_waiters());
  const std::uint32_t key = ec.prepare_wait();
  EXPECT_TRUE(ec.has_waiters());
  ec.cancel_wait();
  EXPECT_FALSE(ec.has_waiters());
  // Nobody counted: a notify moves nothing, so the old key still sleeps
  // (until its timeout) and reports that no notify came.
  ec.notify_all();
  ec.prepare_wait();
  EXPECT_FALSE(ec.commit_wait_for(key, 1'000'000));
  EXPECT_FALSE(ec.has_waiters());
}

TEST(EventCount, NotifyAfterPrepareEndsTheCommitAtOnce) {
  event_count ec;
  const std::uint32_t key = ec.prepare_wait();
  ec.notify_one();  // sees the announcement: the epoch moves
  const auto t0 = clock_type::now();
  EXPECT_TRUE(ec.commit_wait_for(key, 10'000'000'000));
  EXPECT_LT(clock_type::now() - t0, std::chrono::seconds(5));
  // And the untimed commit returns too.
  const std::uint32_t key2 = ec.prepare_wait();
  ec.notify_all();
  ec.commit_wait(key2);
  EXPECT_FALSE(ec.has_waiters());
}

TEST(EventCount, TimedCommitReturnsAfterItsTimeout) {
  event_count ec;
  const std::uint32_t key = ec.prepare_wait();
  const auto t0 = clock_type::now();
  EXPECT_FALSE(ec.commit_wait_for(key, 20'000'000));
  EXPECT_GE(clock_type::now() - t0, std::chrono::milliseconds(19));
  EXPECT_FALSE(ec.has_waiters());

  std::atomic<std::uint32_t> slot{waiter_slot::kAwake};
  waiter_slot::prepare(slot, nullptr);
  const auto t1 = clock_type::now();
  EXPECT_TRUE(waiter_slot::commit_for(slot, 20'000'000));  // slept
  EXPECT_GE(clock_type::now() - t1, std::chrono::milliseconds(19));
  EXPECT_EQ(slot.load(), waiter_slot::kSleeping);  // nobody woke it
  waiter_slot::retire(slot, nullptr);
  EXPECT_EQ(slot.load(), waiter_slot::kAwake);
}

TEST(EventCount, SlotNotifyCancelsAnAnnouncement) {
  std::atomic<std::uint32_t> slot{waiter_slot::kAwake};
  std::atomic<std::uint32_t> count{0};
  // Awake: nothing to do, nothing spent.
  EXPECT_FALSE(waiter_slot::notify(slot));
  waiter_slot::prepare(slot, &count);
  EXPECT_EQ(count.load(), 1u);
  EXPECT_TRUE(waiter_slot::notify(slot));  // cancels it
  EXPECT_FALSE(waiter_slot::notify(slot));  // not twice
  EXPECT_FALSE(waiter_slot::commit(slot));  // the commit fails at once: look again
  waiter_slot::retire(slot, &count);
  EXPECT_EQ(count.load(), 0u);
  EXPECT_EQ(slot.load(), waiter_slot::kAwake);
}

TEST(EventCount, SlotWakesOnlyItsSleeper) {
  // Two waiters with a slot each; the notifier wakes one by its word, and
  // the other sleeps on.
  mote_test::hang_guard guard("the slots' sleepers", std::chrono::seconds(60));
  std::atomic<std::uint32_t> count{0};
  std::atomic<std::uint32_t> a{waiter_slot::kAwake};
  std::atomic<std::uint32_t> b{waiter_slot::kAwake};
  std::atomic<bool> a_flag{false};
  std::atomic<bool> b_flag{false};
  std::atomic<int> a_done{0};
  std::atomic<int> b_done{0};
  auto sleeper = [&](std::atomic<std::uint32_t>& w, std::atomic<bool>& flag, std::atomic<int>& done) {
    for (;;) {
      waiter_slot::prepare(w, &count);
      if (flag.load(std::memory_order_acquire)) {
        waiter_slot::retire(w, &count);
        break;
      }
      waiter_slot::commit(w);
      waiter_slot::retire(w, &count);
    }
    done.store(1);
  };
  std::thread ta(sleeper, std::ref(a), std::ref(a_flag), std::ref(a_done));
  std::thread tb(sleeper, std::ref(b), std::ref(b_flag), std::ref(b_done));
  while (a.load() != waiter_slot::kSleeping || b.load() != waiter_slot::kSleeping) std::this_thread::yield();
  a_flag.store(true, std::memory_order_release);
  const std::uint32_t seen = waiter_slot::state(a);
  EXPECT_EQ(seen, waiter_slot::kSleeping);
  EXPECT_TRUE(waiter_slot::wake_sleeper(a, seen));
  EXPECT_FALSE(waiter_slot::wake_sleeper(a, seen));  // a wake-up is not spent twice
  ta.join();
  EXPECT_EQ(a_done.load(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(b_done.load(), 0);
  EXPECT_EQ(b.load(), waiter_slot::kSleeping);
  b_flag.store(true, std::memory_order_release);
  waiter_slot::notify_always(b);
  tb.join();
  EXPECT_EQ(b_done.load(), 1);
  EXPECT_EQ(count.load(), 0u);
}

TEST(EventCount, OneWordFormSleepsWhileTheWordIsParked) {
  // The word is the condition: 0 running, 1 parked, 2 done (as a task's
  // state). The waiter parks by CAS; the finisher's exchange sees it.
  mote_test::hang_guard guard("the one-word sleeper", std::chrono::seconds(60));
  for (int round = 0; round < 200; ++round) {
    std::atomic<std::uint32_t> word{0};
    std::thread waiter_thread([&] {
      std::uint32_t expected = 0;
      if (word.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
        while (word.load(std::memory_order_acquire) == 1) event_word::commit(&word, 1);
      }
      EXPECT_EQ(word.load(std::memory_order_acquire), 2u);
    });
    if (round % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (word.exchange(2, std::memory_order_acq_rel) == 1) event_word::notify(&word, 1);
    waiter_thread.join();
  }
  // A timed commit on a word that nobody changes returns by itself.
  std::atomic<std::uint32_t> still{7};
  const auto t0 = clock_type::now();
  event_word::commit_for(&still, 7, 10'000'000);
  EXPECT_GE(clock_type::now() - t0, std::chrono::milliseconds(9));
}

#else  // MOTE_EVENT_COUNT_UNFENCED

// Without the fences the processor may move each side's load above its
// store (x86's store buffer does), and the hunt must see it: it stops at the
// first lost wake-up, and gives up (and fails) after 120 s per form. Each
// form finds one within 0.1 to 4 s on an idle 2-CPU machine; much longer
// when other processes hold a CPU, since it takes both at once.
TEST(EventCountUnfenced, HuntFindsTheLostWakeUpsOfAMissingFence) {
  for (form f : {form::targeted, form::shared}) {
    const auto start = clock_type::now();
    const auto give_up = start + std::chrono::seconds(120);
    std::uint64_t found = 0;
    std::uint64_t rounds = 0;
    while (found == 0 && clock_type::now() < give_up) {
      // One notifier and one waiter per cell: the two cores meet most often.
      const hunt_result r = hunt(f, 1, 1, std::chrono::milliseconds(500));
      found += r.lost;
      rounds += r.rounds;
    }
    std::printf("%s form: %llu lost in %llu rounds, %.1f s\n", f == form::shared ? "shared" : "targeted",
                static_cast<unsigned long long>(found), static_cast<unsigned long long>(rounds),
                std::chrono::duration<double>(clock_type::now() - start).count());
    EXPECT_GT(found, 0u) << (f == form::shared ? "shared" : "targeted") << " form: no lost wake-up in "
                         << rounds << " rounds without the fences";
  }
}

#endif

}  // namespace
