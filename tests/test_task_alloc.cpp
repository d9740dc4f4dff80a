// The record allocator alone (include/mote/detail/task_alloc.hpp): the rule
// (size classes, alignment), round trips through a cache and through the
// system allocator, blocks given back by another thread or a thread with no
// cache, blocks that go home under concurrency, and the records task groups
// and data-flow scopes make, aligned as their types require.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <unordered_set>
#include <vector>

#include "mote/dataflow.hpp"
#include "mote/detail/task_alloc.hpp"
#include "mote/task_group.hpp"
#include "test_util.hpp"

namespace {

using mote::detail::give_record;
using mote::detail::give_record_home;
using mote::detail::homed_record;
using mote::detail::record_tag;
using mote::detail::take_record;
using mote::detail::take_record_with_home;
using mote::detail::task_cache;

constexpr bool kCacheOn = MOTE_TASK_CACHE != 0;

bool aligned_to(const void* p, std::size_t align) {
  return reinterpret_cast<std::uintptr_t>(p) % align == 0;
}

// Every byte of a block is the caller's (ASan sees a block that is too small).
void fill(void* p, std::size_t bytes, unsigned char v) { std::memset(p, v, bytes); }

TEST(TaskAlloc, RuleSizeClasses) {
  for (int c = 0; c < task_cache::kClasses; ++c) {
    const std::size_t size = task_cache::size_of(c);
    const std::size_t below = c == 0 ? 1 : task_cache::size_of(c - 1) + 1;
    for (std::size_t bytes : {below, size}) {
      const record_tag tag = record_tag::of(bytes, alignof(std::max_align_t));
      EXPECT_TRUE(tag.cached()) << bytes;
      EXPECT_EQ(tag.cache_class(), c) << bytes;
      EXPECT_FALSE(tag.over_aligned());
    }
  }
  const record_tag large = record_tag::of(task_cache::kLargest + 1, 8);
  EXPECT_FALSE(large.cached());
  EXPECT_FALSE(large.over_aligned());
  for (std::size_t align : {32, 64, 128, 4096}) {
    const record_tag tag = record_tag::of(64, align);
    EXPECT_FALSE(tag.cached()) << align;
    EXPECT_TRUE(tag.over_aligned()) << align;
    EXPECT_EQ(tag.alignment(), align);
  }
  // The system allocator on request, whatever the size.
  EXPECT_FALSE(record_tag::uncached(8).cached());
  EXPECT_FALSE(record_tag::uncached(8).over_aligned());
  EXPECT_EQ(record_tag::uncached(64).alignment(), 64u);
  EXPECT_EQ(record_tag::uncached(64), record_tag::of(100, 64));
}

TEST(TaskAlloc, EveryClassRoundTripsThroughACache) {
  task_cache cache;
  for (int c = 0; c < task_cache::kClasses; ++c) {
    const std::size_t bytes = task_cache::size_of(c);
    const record_tag tag = record_tag::of(bytes, 16);
    std::vector<void*> taken;
    for (int i = 0; i < 8; ++i) {
      void* p = take_record(tag, bytes, cache);
      ASSERT_NE(p, nullptr);
      fill(p, bytes, static_cast<unsigned char>(i));
      taken.push_back(p);
    }
    // Distinct live blocks.
    EXPECT_EQ(std::unordered_set<void*>(taken.begin(), taken.end()).size(), taken.size());
    for (void* p : taken) give_record(p, tag, cache);
    // The cache hands its blocks back, last given first.
    for (int i = 7; i >= 0; --i) {
      void* p = take_record(tag, bytes, cache);
      if (kCacheOn) EXPECT_EQ(p, taken[static_cast<std::size_t>(i)]) << "class " << c;
      fill(p, bytes, 0xab);
      taken[static_cast<std::size_t>(i)] = p;
    }
    for (void* p : taken) give_record(p, tag, cache);
  }
}

TEST(TaskAlloc, LargeAndOverAlignedRoundTrip) {
  task_cache cache;
  for (std::size_t align : {8, 16, 32, 64, 128, 256, 4096}) {
    for (std::size_t bytes :
         {std::size_t{24}, std::size_t{300}, task_cache::kLargest + 8, std::size_t{5000}}) {
      const record_tag tag = record_tag::of(bytes, align);
      for (task_cache* mine : {&cache, static_cast<task_cache*>(nullptr)}) {
        void* p = mine != nullptr ? take_record(tag, bytes, *mine) : take_record(tag, bytes);
        EXPECT_TRUE(aligned_to(p, align)) << bytes << " " << align;
        fill(p, bytes, 1);
        // ASan: freed as it was allocated.
        if (mine != nullptr) {
          give_record(p, tag, *mine);
        } else {
          give_record(p, tag);
        }
        homed_record h = take_record_with_home(tag, bytes, mine);
        EXPECT_TRUE(aligned_to(h.memory, align)) << bytes << " " << align;
        if (!tag.cached()) EXPECT_EQ(h.home, nullptr);
        fill(h.memory, bytes, 2);
        give_record_home(h.memory, tag, h.home, mine);
      }
    }
  }
}

// A block taken by a thread with no cache is of its class's full size, so a
// worker can keep it: the next take of that class on that worker returns it.
TEST(TaskAlloc, OutsideThreadBlocksJoinACache) {
  task_cache cache;
  for (int c = 0; c < task_cache::kClasses; ++c) {
    const std::size_t bytes = task_cache::size_of(c) / 2 + 1;
    const record_tag tag = record_tag::of(bytes, 8);
    void* p = nullptr;
    std::thread outside([&] {
      p = take_record(tag, bytes);
      fill(p, bytes, 3);
    });
    outside.join();
    give_record(p, tag, cache);
    void* q = take_record(tag, task_cache::size_of(c), cache);
    if (kCacheOn) EXPECT_EQ(q, p);
    fill(q, task_cache::size_of(c), 4);  // the whole class, not just `bytes`
    // And an outside thread frees what a cache gave out.
    std::thread freer([&] { give_record(q, tag); });
    freer.join();
  }
}

// Blocks freed by another thread's cache join that cache's list (task groups:
// a thief ends the task); going home, they return to the cache they came from.
TEST(TaskAlloc, FreedOnAnotherThread) {
  int domain = 0;
  task_cache a(&domain);
  const record_tag tag = record_tag::of(100, 8);
  std::vector<void*> plain;
  std::vector<void*> homed;
  for (int i = 0; i < 40; ++i) {
    plain.push_back(take_record(tag, 100, a));
    homed.push_back(take_record_with_home(tag, 100, &a).memory);
  }
  std::thread other([&] {
    task_cache b(&domain);
    for (void* p : plain) give_record(p, tag, b);
    for (void* p : homed) give_record_home(p, tag, &a, &b);
    // b keeps the plain ones: it hands them out again.
    std::unordered_set<void*> mine(plain.begin(), plain.end());
    for (std::size_t i = 0; i < plain.size(); ++i) {
      void* p = take_record(tag, 100, b);
      if (kCacheOn) EXPECT_TRUE(mine.count(p) == 1);
      give_record(p, tag, b);
    }
    // b's destructor frees its blocks; the homed ones it still holds in a
    // batch that is not full yet (40 = one batch of 32 sent, 8 kept) are a's,
    // freed with a's slabs.
  });
  other.join();
  // The full batch went home: once a's slab is full (its 63 blocks, 40 of
  // them taken above), a's next takes are those blocks, not new ones.
  std::unordered_set<void*> sent(homed.begin(), homed.end());
  std::vector<void*> again;
  int back = 0;
  for (int i = 0; i < 63 - 40 + 32; ++i) {
    void* p = take_record_with_home(tag, 100, &a).memory;
    back += static_cast<int>(sent.count(p));
    fill(p, 100, 5);
    again.push_back(p);
  }
  if (kCacheOn) EXPECT_EQ(back, 32);
  for (void* p : again) give_record_home(p, tag, &a, &a);
}

// A block that goes home is its home's, whoever frees it: a cache of another
// domain (another runtime, which may end before a batch would leave it), a
// cache of no domain, or a thread with no cache sends it home at once, alone;
// it never joins the freeing cache's list.
TEST(TaskAlloc, HomeIsReachedFromAnywhere) {
  int first = 0;
  int second = 0;
  task_cache home(&first);
  task_cache stranger(&second);
  task_cache nowhere;  // no domain: no batch goes to it, single blocks do
  const record_tag tag = record_tag::of(64, 8);
  for (task_cache* h : {&home, &nowhere}) {
    for (int freer = 0; freer < 2; ++freer) {
      std::vector<void*> blocks;
      for (int i = 0; i < 64; ++i) blocks.push_back(take_record_with_home(tag, 64, h).memory);
      std::unordered_set<void*> given(blocks.begin(), blocks.end());
      if (freer == 0) {
        for (void* p : blocks) give_record_home(p, tag, h, &stranger);
      } else {
        std::thread outside([&] {
          for (void* p : blocks) give_record_home(p, tag, h, nullptr);
        });
        outside.join();
      }
      // Nothing joined the stranger's list.
      void* q = take_record(tag, 64, stranger);
      if (kCacheOn) EXPECT_EQ(given.count(q), 0u) << "a block that goes home stayed with the cache that freed it";
      give_record(q, tag, stranger);
      // Home takes them back once its slabs are full: within its free
      // blocks (fewer than two slabs' worth) and the 64 sent back.
      std::vector<void*> again;
      int back = 0;
      for (int i = 0; i < 2 * 63 + 64 && back < 64; ++i) {
        void* p = take_record_with_home(tag, 64, h).memory;
        back += static_cast<int>(given.count(p));
        fill(p, 64, 6);
        again.push_back(p);
      }
      if (kCacheOn) EXPECT_EQ(back, 64);
      for (void* p : again) give_record_home(p, tag, h, h);
    }
  }
}

// Blocks that go home are handed out lowest first: whatever order they were
// freed in, the next takes return them in the order of the first takes
// (neighbours in memory, slab after slab), so that records spawned in a row
// lie in a row.
TEST(TaskAlloc, HomedBlocksAreTakenLowestFirst) {
  if (!kCacheOn) GTEST_SKIP() << "no cache in this build (MOTE_TASK_CACHE=0)";
  task_cache mine;
  std::mt19937_64 random(mote_test::test_seed());
  for (int c = 0; c < task_cache::kClasses; ++c) {
    const std::size_t bytes = task_cache::size_of(c);
    const record_tag tag = record_tag::of(bytes, 8);
    constexpr int kBlocks = 300;  // several slabs
    std::vector<void*> first;
    for (int i = 0; i < kBlocks; ++i) {
      first.push_back(take_record_with_home(tag, bytes, &mine).memory);
      fill(first.back(), bytes, 7);
    }
    // Within a slab, each block is the next one in memory.
    for (int i = 1; i < kBlocks; ++i) {
      const auto a = reinterpret_cast<std::uintptr_t>(first[static_cast<std::size_t>(i) - 1]);
      const auto b = reinterpret_cast<std::uintptr_t>(first[static_cast<std::size_t>(i)]);
      if (i % 63 != 0) EXPECT_EQ(b, a + bytes) << "class " << c << ", block " << i;
    }
    for (int round = 0; round < 3; ++round) {
      std::vector<void*> shuffled = first;
      std::shuffle(shuffled.begin(), shuffled.end(), random);
      for (void* p : shuffled) give_record_home(p, tag, &mine, &mine);
      for (int i = 0; i < kBlocks; ++i) {
        void* p = take_record_with_home(tag, bytes, &mine).memory;
        EXPECT_EQ(p, first[static_cast<std::size_t>(i)]) << "class " << c << ", block " << i;
      }
    }
    for (void* p : first) give_record_home(p, tag, &mine, &mine);
  }
}

// A peak of blocks that go home leaves at most kKeepBytes of each class
// behind: wholly free slabs above that are given back, and taken anew.
TEST(TaskAlloc, HomedPeakIsGivenBack) {
  if (!kCacheOn) GTEST_SKIP() << "no cache in this build (MOTE_TASK_CACHE=0)";
  task_cache mine;
  const int c = task_cache::kClasses - 1;
  const std::size_t bytes = task_cache::size_of(c);
  const record_tag tag = record_tag::of(bytes, 8);
  const std::size_t peak = task_cache::kKeepBytes / bytes * 3 / 2;  // 1.5 x what is kept
  std::vector<void*> blocks;
  for (std::size_t i = 0; i < peak; ++i) blocks.push_back(take_record_with_home(tag, bytes, &mine).memory);
  EXPECT_GE(mine.slab_bytes_held(c), peak * bytes);
  for (void* p : blocks) give_record_home(p, tag, &mine, &mine);
  EXPECT_LE(mine.slab_bytes_held(c), task_cache::kKeepBytes + task_cache::size_of(c) * 64);
  EXPECT_GE(mine.slab_bytes_held(c), task_cache::kKeepBytes / 2);
  // The next peak is served again, lowest first, from the slabs kept and new ones.
  blocks.clear();
  for (std::size_t i = 0; i < peak; ++i) blocks.push_back(take_record_with_home(tag, bytes, &mine).memory);
  std::unordered_set<void*> distinct(blocks.begin(), blocks.end());
  EXPECT_EQ(distinct.size(), peak);
  for (void* p : blocks) give_record_home(p, tag, &mine, &mine);
}

// A producer thread takes blocks that go home, a consumer frees them, and the
// only way back from consumer to producer is the cache's return stack (the
// hand-off below is one-way: the producer never acquires from the consumer).
// The producer keeps drawing on the same few blocks, and TSan sees the
// consumer's writes to a block (its links) ordered before the producer's
// reuse of it.
TEST(TaskAlloc, GoHomeUnderConcurrency) {
  constexpr std::size_t kRing = 64;
  const long n = mote_test::scaled(200000, 8);
  int domain = 0;
  struct slot {
    std::atomic<std::uint64_t*> block{nullptr};
  };
  std::vector<slot> ring(kRing);
  const record_tag tag = record_tag::of(200, 8);
  std::size_t distinct = 0;
  std::atomic<long> checked{0};

  std::thread producer([&] {
    task_cache mine(&domain);
    std::unordered_set<void*> seen;
    for (long i = 0; i < n; ++i) {
      homed_record h = take_record_with_home(tag, 200, &mine);
      EXPECT_EQ(h.home, &mine);
      seen.insert(h.memory);
      // The record: its home (as a data-flow task keeps it), then a payload.
      auto* words = static_cast<std::uint64_t*>(h.memory);
      words[0] = reinterpret_cast<std::uintptr_t>(h.home);
      for (int k = 1; k < 25; ++k) words[k] = static_cast<std::uint64_t>(i) + k;
      slot& s = ring[static_cast<std::size_t>(i) % kRing];
      // Relaxed: only that the slot is empty; the consumer's acquire below is
      // what orders the block, and this side learns nothing from it.
      while (s.block.load(std::memory_order_relaxed) != nullptr) std::this_thread::yield();
      // Release: the consumer's acquire load sees the block's words.
      s.block.store(words, std::memory_order_release);
    }
    distinct = seen.size();
    // Keep `mine` alive until the consumer has given everything back.
    while (checked.load(std::memory_order_acquire) != n) std::this_thread::yield();
  });
  std::thread consumer([&] {
    task_cache mine(&domain);
    for (long i = 0; i < n; ++i) {
      slot& s = ring[static_cast<std::size_t>(i) % kRing];
      std::uint64_t* words;
      // Acquire: pairs with the producer's release store.
      while ((words = s.block.load(std::memory_order_acquire)) == nullptr)
        std::this_thread::yield();
      s.block.store(nullptr, std::memory_order_relaxed);
      bool ok = true;
      for (int k = 1; k < 25; ++k) ok = ok && words[k] == static_cast<std::uint64_t>(i) + k;
      EXPECT_TRUE(ok) << i;
      auto* home = reinterpret_cast<task_cache*>(static_cast<std::uintptr_t>(words[0]));
      give_record_home(words, tag, home, &mine);
    }
    // Release: the producer may end its cache once everything is back.
    checked.store(n, std::memory_order_release);
  });
  producer.join();
  consumer.join();
  if (kCacheOn) {
    // The ring, one batch in the consumer, one on its way, and the looks that
    // missed a batch: a few hundred blocks at most, not one per take.
    EXPECT_LT(distinct, 1024u);
  }
}

// A cache whose lists are full sends what it is given to its pool in
// batches; a cache with nothing left takes them from there before it asks
// the system allocator.
TEST(TaskAlloc, SurplusBlocksSpillToThePoolAndBackToATaker) {
  if (!kCacheOn) GTEST_SKIP() << "no cache in this build (MOTE_TASK_CACHE=0)";
  int domain = 0;
  task_cache::spill_pool pool;
  const record_tag tag = record_tag::of(100, 8);
  constexpr std::uint32_t kBatches = 3;
  constexpr std::uint32_t kSurplus = kBatches * 32;  // task_cache's batch
  std::vector<void*> spilled;
  {
    task_cache giver(&domain, &pool);
    task_cache taker(&domain, &pool);
    // Fill the giver's list (kKeep blocks), then give it a surplus.
    for (std::uint32_t i = 0; i < task_cache::kKeep; ++i) give_record(take_record(tag, 100), tag, giver);
    for (std::uint32_t i = 0; i < kSurplus; ++i) {
      void* p = take_record(tag, 100);
      spilled.push_back(p);
      give_record(p, tag, giver);
    }
    std::sort(spilled.begin(), spilled.end());
    std::vector<void*> taken;
    for (std::uint32_t i = 0; i < kSurplus; ++i) {
      void* p = take_record(tag, 100, taker);
      fill(p, 100, 0x11);
      EXPECT_TRUE(std::binary_search(spilled.begin(), spilled.end(), p)) << i;
      taken.push_back(p);
    }
    // The pool is empty now: a fresh block, none of those still alive.
    void* fresh = take_record(tag, 100, taker);
    EXPECT_FALSE(std::binary_search(spilled.begin(), spilled.end(), fresh));
    std::sort(taken.begin(), taken.end());
    EXPECT_EQ(std::adjacent_find(taken.begin(), taken.end()), taken.end());
    give_record(fresh, tag, taker);
    for (void* p : taken) give_record(p, tag, taker);
  }  // the caches end before the pool, as a runtime's workers do
}

// A producer and a consumer on a pool (a thief running what a spawner makes):
// every record arrives whole while the blocks go round through the pool.
TEST(TaskAlloc, SpillUnderConcurrency) {
  constexpr std::size_t kRing = 64;
  const long n = mote_test::scaled(100000, 8);
  int domain = 0;
  task_cache::spill_pool pool;
  struct slot {
    std::atomic<std::uint64_t*> block{nullptr};
  };
  std::vector<slot> ring(kRing);
  const record_tag tag = record_tag::of(200, 8);
  std::thread producer([&] {
    task_cache mine(&domain, &pool);
    for (long i = 0; i < n; ++i) {
      auto* words = static_cast<std::uint64_t*>(take_record(tag, 200, mine));
      for (int k = 0; k < 25; ++k) words[k] = static_cast<std::uint64_t>(i) + k;
      slot& s = ring[static_cast<std::size_t>(i) % kRing];
      // Relaxed: only that the slot is empty (as in GoHomeUnderConcurrency).
      while (s.block.load(std::memory_order_relaxed) != nullptr) std::this_thread::yield();
      // Release: the consumer's acquire load sees the block's words.
      s.block.store(words, std::memory_order_release);
    }
  });
  std::thread consumer([&] {
    task_cache mine(&domain, &pool);
    for (long i = 0; i < n; ++i) {
      slot& s = ring[static_cast<std::size_t>(i) % kRing];
      std::uint64_t* words;
      // Acquire: pairs with the producer's release store.
      while ((words = s.block.load(std::memory_order_acquire)) == nullptr) std::this_thread::yield();
      s.block.store(nullptr, std::memory_order_relaxed);
      bool ok = true;
      for (int k = 0; k < 25; ++k) ok = ok && words[k] == static_cast<std::uint64_t>(i) + k;
      EXPECT_TRUE(ok) << i;
      give_record(words, tag, mine);
    }
  });
  producer.join();
  consumer.join();
}

// ---- The records the models make ------------------------------------------

template <std::size_t Align, std::size_t Size>
struct alignas(Align) payload {
  unsigned char bytes[Size];
};

// Spawns a task whose callable holds a payload<Align, Size>: its record is of
// the class (or the large or over-aligned path) that the pair selects. The
// task checks where its copy lies and that it arrived whole.
template <std::size_t Align, std::size_t Size>
void spawn_aligned(mote::task_group& g, std::atomic<int>& bad, std::atomic<int>& ran) {
  payload<Align, Size> p;
  std::memset(p.bytes, 0x5a, Size);
  g.spawn([p, &bad, &ran] {
    if (!aligned_to(&p, Align)) bad.fetch_add(1, std::memory_order_relaxed);
    for (unsigned char b : p.bytes) {
      if (b != 0x5a) {
        bad.fetch_add(1, std::memory_order_relaxed);
        break;
      }
    }
    ran.fetch_add(1, std::memory_order_relaxed);
  });
}

template <std::size_t Align, std::size_t Size>
void spawn_aligned(mote::dataflow& df, int& target, std::atomic<int>& bad, std::atomic<int>& ran) {
  payload<Align, Size> p;
  std::memset(p.bytes, 0x5a, Size);
  df.spawn(mote::inout(target), [p, &bad, &ran, &target] {
    if (!aligned_to(&p, Align)) bad.fetch_add(1, std::memory_order_relaxed);
    if (p.bytes[0] != 0x5a || p.bytes[Size - 1] != 0x5a)
      bad.fetch_add(1, std::memory_order_relaxed);
    ++target;
    ran.fetch_add(1, std::memory_order_relaxed);
  });
}

// Sizes that land in every class (64 to 1024 bytes with the record's own
// fields) and past the largest, at ordinary and over-aligned alignments.
template <class Spawn>
int spawn_every_shape(Spawn&& spawn) {
  int count = 0;
  auto at = [&]<std::size_t Align>(std::integral_constant<std::size_t, Align>) {
    spawn.template operator()<Align, 8>();
    spawn.template operator()<Align, 100>();
    spawn.template operator()<Align, 200>();
    spawn.template operator()<Align, 400>();
    spawn.template operator()<Align, 900>();
    spawn.template operator()<Align, 2000>();
    count += 6;
  };
  at(std::integral_constant<std::size_t, 8>{});
  at(std::integral_constant<std::size_t, 16>{});
  at(std::integral_constant<std::size_t, 32>{});
  at(std::integral_constant<std::size_t, 64>{});
  at(std::integral_constant<std::size_t, 128>{});
  return count;
}

TEST(TaskAlloc, GroupRecordsAreAlignedAsTheirTypes) {
  mote::runtime rt(mote_test::workers(2));
  std::atomic<int> bad{0};
  std::atomic<int> ran{0};
  int expected = 0;
  for (int round = 0; round < 3; ++round) {
    // From a worker (its cache), and from a thread that is not one.
    rt.run([&] {
      mote::task_group g;
      expected += spawn_every_shape(
          [&]<std::size_t A, std::size_t S>() { spawn_aligned<A, S>(g, bad, ran); });
      g.wait();
    });
    mote::task_group g(rt);
    expected += spawn_every_shape(
        [&]<std::size_t A, std::size_t S>() { spawn_aligned<A, S>(g, bad, ran); });
    g.wait();
  }
  EXPECT_EQ(ran.load(), expected);
  EXPECT_EQ(bad.load(), 0);
}

TEST(TaskAlloc, DataflowRecordsAreAlignedAsTheirTypes) {
  mote::runtime rt(mote_test::workers(2));
  std::atomic<int> bad{0};
  std::atomic<int> ran{0};
  int expected = 0;
  int target = 0;
  for (int round = 0; round < 3; ++round) {
    rt.run([&] {
      mote::dataflow df;
      expected += spawn_every_shape(
          [&]<std::size_t A, std::size_t S>() { spawn_aligned<A, S>(df, target, bad, ran); });
      df.wait();
    });
    mote::dataflow df(rt);
    expected += spawn_every_shape(
        [&]<std::size_t A, std::size_t S>() { spawn_aligned<A, S>(df, target, bad, ran); });
    df.wait();
  }
  EXPECT_EQ(ran.load(), expected);
  EXPECT_EQ(target, expected);  // in order: one inout chain
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
