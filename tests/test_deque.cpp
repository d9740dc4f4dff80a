// The split deque protocol, driven directly: one owner pushes and pops while
// thieves steal. Every task must be taken exactly once, by the owner's pop or
// by one thief, whatever the interleaving; a pop that fails names the thief
// that took the task.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "mote/detail/split_deque.hpp"
#include "mote/detail/worker.hpp"
#include "core/runtime_impl.hpp"
#include "test_util.hpp"

namespace {

using mote::detail::resolved_config;
using mote::detail::runtime_impl;
using mote::detail::split_deque;
using mote::detail::task;
using mote::detail::worker;

struct counted_task : task {
  std::uint32_t slot = 0;  // where the owner pushed it (written before the push)
  std::atomic<int> taken{0};
  std::atomic<worker*> taken_by{nullptr};
};

void no_op(task*, worker&) noexcept {}

// A runtime with no threads of its own: it only provides the parking state
// that the deque's slow paths notify.
std::unique_ptr<runtime_impl> bare_runtime() {
  resolved_config c;
  c.num_workers = 0;
  c.worker_cpus.clear();
  return std::make_unique<runtime_impl>(c, nullptr);
}

// A bare runtime, an owner's deque of 64 slots and a thief, with n tasks to
// push: `auto& [rt, owner, thief, tasks] = fixture;`.
struct owner_and_thief {
  std::unique_ptr<runtime_impl> rt = bare_runtime();
  split_deque owner{rt.get(), 64};
  worker thief{*rt, 1, 64};
  std::vector<counted_task> tasks;
  explicit owner_and_thief(std::size_t n) : tasks(n) {
    for (auto& t : tasks) t.init(&no_op);
  }
};

// With `forcing`, the thieves also share the owner's private tasks
// themselves (force_share, as a thief does when a request goes unanswered),
// at random moments, while the owner pushes and pops as fast as it can. With
// `batch` above 1 they take up to that many at once (steal_batch).
void run_protocol(int thieves, long rounds, std::uint32_t capacity, std::uint64_t seed, bool forcing = false,
                  std::uint32_t batch = 1) {
  auto rt = bare_runtime();
  split_deque deque(rt.get(), capacity);
  // Thieves mark the slots they empty with their worker's address.
  std::vector<std::unique_ptr<worker>> thief_workers;
  for (int i = 0; i < thieves; ++i) thief_workers.push_back(std::make_unique<worker>(*rt, i + 1, 64));

  const long certain_phase = thieves > 0 ? 32 : 0;
  const long max_tasks = rounds * 48 + certain_phase;
  std::vector<counted_task> tasks(static_cast<std::size_t>(max_tasks));
  for (auto& t : tasks) t.init(&no_op);
  std::atomic<bool> done{false};
  std::atomic<long> stolen{0};

  std::vector<std::thread> threads;
  for (int i = 0; i < thieves; ++i) {
    threads.emplace_back([&, i] {
      worker& me = *thief_workers[static_cast<std::size_t>(i)];
      std::mt19937_64 thief_rng(seed + 100 + static_cast<std::uint64_t>(i));
      std::int64_t clock = 0;
      while (!done.load(std::memory_order_acquire)) {
        if (forcing && thief_rng() % 8 == 0) {
          // A time far past any request: the force is always due.
          clock += split_deque::kForceAfterNs;
          deque.force_share(clock);
        }
        if (batch > 1) {
          task* out[8];
          const std::uint32_t k = deque.steal_batch(me, out, batch);  // batch <= 8
          EXPECT_LE(k, batch);
          for (std::uint32_t j = 0; j < k; ++j) {
            auto* c = static_cast<counted_task*>(out[j]);
            if (j > 0) {
              EXPECT_EQ(c->slot, static_cast<counted_task*>(out[j - 1])->slot + 1) << "a batch is consecutive";
            }
            c->taken.fetch_add(1);
            c->taken_by.store(&me);
            stolen.fetch_add(1);
          }
          continue;
        }
        std::uint32_t index = 0;
        if (task* t = deque.steal(me, &index)) {
          auto* c = static_cast<counted_task*>(t);
          EXPECT_EQ(c->slot, index) << "a steal reports the slot it took";
          c->taken.fetch_add(1);
          c->taken_by.store(&me);
          stolen.fetch_add(1);
        }
      }
    });
  }

  long next = 0;
  long popped = 0;
  long failed_pops = 0;
  // Takes the top task back and checks what pop() says about it: nullptr and
  // untaken, or the thief that really has it.
  auto take_back = [&](counted_task* top) {
    if (worker* thief = deque.pop()) {
      ++failed_pops;
      // The thief marked the slot before the pop could see it, and its
      // record of the steal follows: wait for that record, then compare.
      while (top->taken_by.load() == nullptr) std::this_thread::yield();
      EXPECT_EQ(top->taken_by.load(), thief) << "a failed pop names the thief";
    } else {
      top->taken.fetch_add(1);
      ++popped;
    }
  };

  // First, a phase that makes stealing certain: push, then answer share
  // requests (the thieves ask when they find nothing shared) until one task
  // is gone. Nothing here depends on timing; a broken share or steal path
  // hangs this loop, and the test's timeout reports it.
  if (thieves > 0) {
    std::vector<counted_task*> stack;
    for (long i = 0; i < certain_phase; ++i) {
      counted_task* t = &tasks[static_cast<std::size_t>(next++)];
      t->slot = deque.depth();
      ASSERT_TRUE(deque.push(t));
      stack.push_back(t);
    }
    while (stolen.load() == 0) {
      deque.share_if_asked();
      std::this_thread::yield();
    }
    while (!stack.empty()) {
      take_back(stack.back());
      stack.pop_back();
    }
    ASSERT_EQ(deque.depth(), 0u);
    EXPECT_GT(stolen.load(), 0) << "the thieves took nothing";
  }

  std::mt19937_64 rng(seed);
  for (long r = 0; r < rounds && next < max_tasks; ++r) {
    // Nested push/pop sequences of random depth, like a recursive join.
    const int depth = 1 + static_cast<int>(rng() % 47);
    std::vector<counted_task*> stack;
    for (int d = 0; d < depth && next < max_tasks; ++d) {
      counted_task* t = &tasks[static_cast<std::size_t>(next++)];
      t->slot = deque.depth();
      if (!deque.push(t)) {
        t->taken.fetch_add(1);  // full: the caller runs it itself
        continue;
      }
      stack.push_back(t);
      if (rng() % 4 == 0) {  // an inner join completes early
        take_back(stack.back());
        stack.pop_back();
      }
    }
    while (!stack.empty()) {
      take_back(stack.back());
      stack.pop_back();
    }
    ASSERT_EQ(deque.depth(), 0u);
  }
  done.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();

  EXPECT_EQ(failed_pops, stolen.load()) << "every failed pop is a steal, and only those";
  for (long i = 0; i < next; ++i) {
    ASSERT_EQ(tasks[static_cast<std::size_t>(i)].taken.load(), 1) << "task " << i;
  }
  if (thieves == 0) EXPECT_EQ(stolen.load(), 0);
  if (forcing) EXPECT_GT(deque.forced_shares(), 0u) << "no share was forced: the test tested nothing";
}

TEST(Deque, OwnerAloneTakesEverythingBack) { run_protocol(0, 2000, 1u << 10, mote_test::test_seed()); }

TEST(Deque, OneThiefEveryTaskOnce) {
  run_protocol(1, mote_test::scaled(20000), 1u << 10, mote_test::test_seed());
}

TEST(Deque, ThreeThievesEveryTaskOnce) {
  run_protocol(3, mote_test::scaled(20000), 1u << 10, mote_test::test_seed() + 1);
}

TEST(Deque, SmallCapacityNeverLosesWork) {
  run_protocol(2, mote_test::scaled(10000), 64, mote_test::test_seed() + 2);
}

// Forced shares against an owner that keeps pushing and popping: the
// asymmetric Dekker pair (force_share's membarrier against pop's plain
// store-then-load) must never let a task be taken twice or lost.
TEST(Deque, ForcedSharesEveryTaskOnce) {
  if (!mote::detail::heavy_barrier_available()) GTEST_SKIP() << "membarrier(2) is not available here";
  run_protocol(1, mote_test::scaled(20000), 1u << 10, mote_test::test_seed() + 3, true);
}

TEST(Deque, ForcedSharesThreeThievesEveryTaskOnce) {
  if (!mote::detail::heavy_barrier_available()) GTEST_SKIP() << "membarrier(2) is not available here";
  run_protocol(3, mote_test::scaled(10000), 64, mote_test::test_seed() + 4, true);
}

// An owner that pushed and then went quiet (a long leaf, a lock): its
// private tasks are out of a thief's reach until the request is overdue;
// then the thief shares them itself, all of them, oldest first, and the
// owner's pops afterwards name the thief.
TEST(Deque, OverdueRequestLetsTheThiefShareEverything) {
  if (!mote::detail::heavy_barrier_available()) GTEST_SKIP() << "membarrier(2) is not available here";
  owner_and_thief fixture(3);
  [[maybe_unused]] auto& [rt, owner, thief, tasks] = fixture;
  for (auto& t : tasks) ASSERT_TRUE(owner.push(&t));
  std::uint32_t index = 99;
  // The request's time lies between the two clock readings.
  const std::int64_t before = mote::detail::now_ns();
  EXPECT_EQ(owner.steal(thief, &index), nullptr);  // asks; the owner never answers
  const std::int64_t after = mote::detail::now_ns();
  EXPECT_FALSE(owner.request_overdue(before - 1));
  EXPECT_TRUE(owner.request_overdue(after + split_deque::kForceAfterNs));
  const std::int64_t forced_at = after + split_deque::kForceAfterNs;
  ASSERT_TRUE(owner.force_share(forced_at));
  EXPECT_EQ(owner.forced_shares(), 1u);
  // The clock restarts: not due again at once.
  EXPECT_FALSE(owner.request_overdue(forced_at + split_deque::kForceAfterNs / 2));
  for (std::uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(owner.steal(thief, &index), &tasks[i]);
    EXPECT_EQ(index, i);
  }
  EXPECT_EQ(owner.steal(thief, &index), nullptr);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(owner.pop(), &thief);
  EXPECT_EQ(owner.depth(), 0u);
  // Nothing private: nothing to force.
  EXPECT_FALSE(owner.force_share(forced_at + 4 * split_deque::kForceAfterNs));
}

// publish(): an owner about to block shares everything at once, kept tasks
// too, with no thief asking.
TEST(Deque, BatchStealsEveryTaskOnce) { run_protocol(1, 3000, 1u << 10, mote_test::test_seed(), false, 8); }

TEST(Deque, BatchStealsThreeThievesForcedEveryTaskOnce) {
  run_protocol(3, 2000, 1u << 10, mote_test::test_seed() + 1, true, 4);
}

// A batch is half of what is shared (once kBatchFrom are, at most the maximum),
// oldest first; the owner takes the rest back past the stolen slots.
TEST(Deque, BatchStealTakesTheOlderHalfOfTheShared) {
  owner_and_thief fixture(40);
  [[maybe_unused]] auto& [rt, owner, thief, tasks] = fixture;
  task* out[16] = {};
  EXPECT_EQ(owner.steal_batch(thief, out, 8), 0u);  // nothing: asks to share
  // Few shared (a recursive owner's handful): one.
  for (std::size_t i = 0; i < 10; ++i) ASSERT_TRUE(owner.push(&tasks[i]));
  owner.publish();
  ASSERT_EQ(owner.steal_batch(thief, out, 8), 1u);
  EXPECT_EQ(out[0], &tasks[0]);
  for (std::size_t i = 10; i-- > 1;) ASSERT_EQ(owner.pop_any(), &tasks[i]);
  EXPECT_EQ(owner.pop_any(), nullptr);
  // Twenty shared: half, capped at the maximum.
  for (std::size_t i = 0; i < 20; ++i) ASSERT_TRUE(owner.push(&tasks[i]));
  owner.publish();
  ASSERT_EQ(owner.steal_batch(thief, out, 16), 10u);
  for (std::size_t i = 0; i < 10; ++i) EXPECT_EQ(out[i], &tasks[i]) << i;
  for (std::size_t i = 20; i-- > 10;) ASSERT_EQ(owner.pop_any(), &tasks[i]);
  EXPECT_EQ(owner.pop_any(), nullptr);
  EXPECT_EQ(owner.depth(), 0u);
  // Forty shared: the maximum.
  for (std::size_t i = 0; i < 40; ++i) ASSERT_TRUE(owner.push(&tasks[i]));
  owner.publish();
  ASSERT_EQ(owner.steal_batch(thief, out, 8), 8u);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(out[i], &tasks[i]) << i;
  ASSERT_EQ(owner.steal_batch(thief, out, 1), 1u);  // one, as steal()
  EXPECT_EQ(out[0], &tasks[8]);
  for (std::size_t i = 40; i-- > 9;) ASSERT_EQ(owner.pop_any(), &tasks[i]);
  EXPECT_EQ(owner.pop_any(), nullptr);
}

TEST(Deque, PublishSharesEverythingKeptTasksToo) {
  auto rt = bare_runtime();
  split_deque owner(rt.get(), 64);
  split_deque kept(rt.get(), 64, split_deque::on_request::acknowledge);
  owner.set_kept(&kept);
  worker thief(*rt, 1, 64);
  std::vector<counted_task> tasks(4);
  for (auto& t : tasks) t.init(&no_op);
  ASSERT_TRUE(owner.push(&tasks[0]));
  ASSERT_TRUE(owner.push(&tasks[1]));
  ASSERT_TRUE(owner.keep(&tasks[2]));
  ASSERT_TRUE(owner.keep(&tasks[3]));
  EXPECT_TRUE(owner.has_private());
  owner.publish();
  EXPECT_FALSE(owner.has_private());
  std::uint32_t index = 0;
  EXPECT_EQ(owner.steal(thief, &index), &tasks[0]);
  EXPECT_EQ(owner.steal(thief, &index), &tasks[1]);
  EXPECT_EQ(owner.steal(thief, &index), nullptr);
  EXPECT_EQ(kept.steal(thief, &index), &tasks[2]);
  EXPECT_EQ(kept.steal(thief, &index), &tasks[3]);
  EXPECT_EQ(owner.pop_any(), nullptr);
  EXPECT_TRUE(owner.empty());
}

TEST(Deque, PushFailsOnlyWhenFull) {
  auto rt = bare_runtime();
  split_deque d(rt.get(), 64);
  std::vector<counted_task> tasks(65);
  for (auto& t : tasks) t.init(&no_op);
  for (int i = 0; i < 64; ++i) ASSERT_TRUE(d.push(&tasks[static_cast<std::size_t>(i)]));
  EXPECT_FALSE(d.push(&tasks[64]));
  EXPECT_EQ(d.depth(), 64u);
  for (int i = 63; i >= 0; --i) ASSERT_EQ(d.pop_any(), &tasks[static_cast<std::size_t>(i)]);
  EXPECT_EQ(d.pop_any(), nullptr);
  EXPECT_EQ(d.depth(), 0u);
}

TEST(Deque, StealTakesOldestAfterShareRequest) {
  owner_and_thief fixture(8);
  [[maybe_unused]] auto& [rt, owner, thief, tasks] = fixture;
  std::uint32_t index = 99;
  ASSERT_TRUE(owner.push(&tasks[0]));
  // Nothing shared yet: the steal fails and asks the owner to share.
  EXPECT_EQ(owner.steal(thief, &index), nullptr);
  // The next push answers the request by sharing the older half.
  ASSERT_TRUE(owner.push(&tasks[1]));
  EXPECT_EQ(owner.steal(thief, &index), &tasks[0]);
  EXPECT_EQ(index, 0u);
  EXPECT_EQ(owner.pop(), nullptr);  // tasks[1], private
  EXPECT_EQ(owner.pop(), &thief);   // tasks[0], stolen: the pop names the thief
  EXPECT_EQ(owner.depth(), 0u);
  EXPECT_EQ(owner.counts().stolen_pops, 1u);
}

// held() is what the owner still holds: a spawner that only pushes (one
// thread creating every task, the others stealing) must see its deque get
// shorter as thieves take its tasks, or it would take itself for "far ahead"
// for good (the OpenMP layer then runs every later task in place).
TEST(Deque, HeldCountsOnlyTasksNoThiefTook) {
  owner_and_thief fixture(10);
  [[maybe_unused]] auto& [rt, owner, thief, tasks] = fixture;
  std::uint32_t index = 0;
  ASSERT_TRUE(owner.push(&tasks[0]));
  EXPECT_EQ(owner.steal(thief, &index), nullptr);  // asks to share
  for (std::size_t i = 1; i < tasks.size(); ++i) ASSERT_TRUE(owner.push(&tasks[i]));
  EXPECT_EQ(owner.held(), 10u);
  // The first push after the request shared the older half of what was private then.
  ASSERT_EQ(owner.steal(thief, &index), &tasks[0]);
  EXPECT_EQ(owner.held(), 9u);
  owner.publish();
  for (std::size_t i = 1; i < 6; ++i) ASSERT_EQ(owner.steal(thief, &index), &tasks[i]);
  EXPECT_EQ(owner.held(), 4u);
  EXPECT_EQ(owner.depth(), 10u);  // the top's position: stolen slots below it still count
  for (std::size_t i = tasks.size(); i-- > 6;) ASSERT_EQ(owner.pop_any(), &tasks[i]);
  EXPECT_EQ(owner.held(), 0u);
}

TEST(Deque, PopAnySkipsStolenTasks) {
  owner_and_thief fixture(4);
  [[maybe_unused]] auto& [rt, owner, thief, tasks] = fixture;
  std::uint32_t index = 0;
  ASSERT_TRUE(owner.push(&tasks[0]));
  EXPECT_EQ(owner.steal(thief, &index), nullptr);  // asks to share
  ASSERT_TRUE(owner.push(&tasks[1]));               // shares tasks[0]
  ASSERT_EQ(owner.steal(thief, &index), &tasks[0]);
  // The owner takes what is left, newest first, past the stolen one.
  EXPECT_EQ(owner.pop_any(), &tasks[1]);
  EXPECT_EQ(owner.pop_any(), nullptr);
  EXPECT_EQ(owner.depth(), 0u);
}

TEST(Deque, KeptTasksReachAThiefOnlyWhenTheOwnerGoesQuiet) {
  auto rt = bare_runtime();
  split_deque owner(rt.get(), 64);
  split_deque kept(rt.get(), 64, split_deque::on_request::acknowledge);
  owner.set_kept(&kept);
  worker thief(*rt, 1, 64);
  std::vector<counted_task> held(3);
  std::vector<counted_task> pushed(2);
  for (auto& t : held) t.init(&no_op);
  for (auto& t : pushed) t.init(&no_op);
  for (auto& t : held) ASSERT_TRUE(owner.keep(&t));
  EXPECT_FALSE(owner.empty());
  EXPECT_EQ(owner.depth(), 0u);  // the deque's own count only
  std::uint32_t index = 0;
  // A thief asks both (the kept deque through its rescue's look, at most
  // once per kForceAfterNs), the owner pushes (and shares), the thief
  // steals: only the pushed task can reach it, whatever is kept.
  std::int64_t clock = mote::detail::now_ns();
  EXPECT_EQ(owner.steal(thief, &index), nullptr);
  EXPECT_FALSE(kept.request_overdue(clock));  // asks
  EXPECT_TRUE(kept.asked());
  EXPECT_EQ(kept.steal(thief, &index), nullptr);
  ASSERT_TRUE(owner.push(&pushed[0]));
  ASSERT_TRUE(owner.push(&pushed[1]));
  EXPECT_EQ(owner.steal(thief, &index), &pushed[0]);
  EXPECT_EQ(owner.steal(thief, &index), nullptr);
  EXPECT_EQ(kept.steal(thief, &index), nullptr);
  // The owner: the deque's own task first, then a kept one, newest first;
  // taking it answers the kept deque's request without sharing anything.
  EXPECT_EQ(owner.pop_any(), &pushed[1]);
  EXPECT_EQ(owner.pop_any(), &held[2]);
  EXPECT_FALSE(kept.asked());
  clock += split_deque::kForceKeptAfterNs;
  EXPECT_FALSE(kept.request_overdue(clock));  // not overdue: answered; asks again
  EXPECT_TRUE(kept.asked());
  // Then the owner goes quiet: once the request is overdue, the thief takes
  // what is left.
  clock += split_deque::kForceAfterNs;
  EXPECT_FALSE(kept.request_overdue(clock));  // a kept task's owner gets longer
  clock += split_deque::kForceKeptAfterNs;
  ASSERT_TRUE(kept.request_overdue(clock));
  if (mote::detail::heavy_barrier_available()) {
    ASSERT_TRUE(kept.force_share(clock));
    EXPECT_EQ(kept.steal(thief, &index), &held[0]);
    EXPECT_EQ(owner.pop_any(), &held[1]);
  } else {
    EXPECT_EQ(owner.pop_any(), &held[1]);
    EXPECT_EQ(owner.pop_any(), &held[0]);
  }
  EXPECT_EQ(owner.pop_any(), nullptr);
  EXPECT_TRUE(owner.empty());
}

}  // namespace
