// The queues of include/mote/queues/: lamport_ring, cached_ring,
// batch_queue (single producer, single consumer) and mpmc_queue, with an
// element type that counts its own constructions and destructions, cannot
// be copied and has no default constructor; and moves that throw, through
// those queues and every kind of mote::channel.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "mote/channel.hpp"
#include "mote/error.hpp"
#include "mote/queues/batch_queue.hpp"
#include "mote/queues/mpmc_queue.hpp"
#include "mote/queues/ring.hpp"
#include "mote/task_group.hpp"
#include "test_util.hpp"

namespace {

using mote_test::scaled;

// Move-only, not default-constructible, counts itself; a moved-from item
// reads -1 so that a double hand-out shows.
struct item {
  static inline std::atomic<long> live{0};
  static inline std::atomic<long> bad_destroy{0};
  long v;
  std::uint32_t magic = kAlive;
  static constexpr std::uint32_t kAlive = 0x600dcafe;

  explicit item(long x) : v(x) { live.fetch_add(1, std::memory_order_relaxed); }
  item(item&& o) noexcept : v(std::exchange(o.v, -1)) { live.fetch_add(1, std::memory_order_relaxed); }
  item& operator=(item&& o) noexcept {
    v = std::exchange(o.v, -1);
    return *this;
  }
  item(const item&) = delete;
  item& operator=(const item&) = delete;
  ~item() {
    if (magic != kAlive) bad_destroy.fetch_add(1, std::memory_order_relaxed);
    magic = 0;
    live.fetch_sub(1, std::memory_order_relaxed);
  }
};

struct lifetime_check {
  long before = item::live.load();
  ~lifetime_check() {
    EXPECT_EQ(item::live.load(), before) << "items leaked or destroyed twice";
    EXPECT_EQ(item::bad_destroy.load(), 0);
  }
};


// Move-only, counts its constructions and destructions, and, when armed,
// throws from the n-th move (construction or assignment) from then on,
// before that move changes anything. A moved-from value reads -1.
struct fragile {
  static inline long constructed = 0;
  static inline long destroyed = 0;
  static inline long bad_destroy = 0;
  static inline long countdown = 0;  // > 0: moves left until the one that throws
  long v;
  std::uint32_t magic = kAlive;
  static constexpr std::uint32_t kAlive = 0x600dcafe;

  explicit fragile(long x) : v(x) { ++constructed; }
  fragile(fragile&& o) : v(o.v) {
    maybe_throw();
    o.v = -1;
    ++constructed;
  }
  fragile& operator=(fragile&& o) {
    maybe_throw();
    v = std::exchange(o.v, -1);
    return *this;
  }
  fragile(const fragile&) = delete;
  fragile& operator=(const fragile&) = delete;
  ~fragile() {
    if (magic != kAlive) ++bad_destroy;
    magic = 0;
    ++destroyed;
  }

  static void arm(long nth_move) { countdown = nth_move; }
  static void maybe_throw() {
    if (countdown > 0 && --countdown == 0) throw std::runtime_error("fragile: move refused");
  }
};

// Checks at the end of its scope that every fragile built in it was
// destroyed exactly once.
struct fragile_balance {
  long constructed = fragile::constructed;
  long destroyed = fragile::destroyed;
  ~fragile_balance() {
    fragile::arm(0);
    EXPECT_EQ(fragile::constructed - constructed, fragile::destroyed - destroyed) << "leaked or destroyed twice";
    EXPECT_EQ(fragile::bad_destroy, 0);
  }
};

template <class Q>
struct is_mpmc : std::false_type {};
template <class T>
struct is_mpmc<mote::mpmc_queue<T>> : std::true_type {};

template <class Q>
class Queues : public ::testing::Test {};

template <class T>
using lamport = mote::detail::lamport_ring<T>;
template <class T>
using cached = mote::cached_ring<T>;
template <class T>
using batch = mote::batch_queue<T>;
template <class T>
using mpmc = mote::mpmc_queue<T>;

template <template <class> class Q>
struct queue_of {
  template <class T>
  using type = Q<T>;
};

using Kinds = ::testing::Types<queue_of<lamport>, queue_of<cached>, queue_of<batch>, queue_of<mpmc>>;

class Names {
 public:
  template <class K>
  static std::string GetName(int i) {
    static const char* const names[] = {"lamport_ring", "cached_ring", "batch_queue", "mpmc_queue"};
    return names[i];
  }
};

TYPED_TEST_SUITE(Queues, Kinds, Names);

template <class K, class T>
using Q = typename K::template type<T>;

TYPED_TEST(Queues, HoldsItsCapacityInOrder) {
  lifetime_check lc;
  Q<TypeParam, item> q(16);
  ASSERT_GE(q.capacity(), 16U);
  std::size_t n = 0;
  while (q.try_emplace(static_cast<long>(n))) ++n;
  EXPECT_EQ(n, q.capacity()) << "a full queue refuses, an empty slot accepts";
  q.flush();
  for (std::size_t i = 0; i < n; ++i) {
    std::optional<item> v = q.try_pop();
    ASSERT_TRUE(v.has_value()) << i;
    EXPECT_EQ(v->v, static_cast<long>(i));
  }
  EXPECT_FALSE(q.try_pop().has_value());
  // And again, across the wrap.
  for (long i = 0; i < 11; ++i) q.push(item(100 + i));
  q.flush();
  for (long i = 0; i < 11; ++i) EXPECT_EQ(q.pop()->v, 100 + i);
}

// A flush publishes in place: flushing after every push still fills the
// whole capacity, and the consumer can take items while the producer keeps
// filling the same half.
TYPED_TEST(Queues, FlushingEveryPushKeepsTheCapacity) {
  lifetime_check lc;
  Q<TypeParam, item> q(16);
  std::size_t n = 0;
  while (q.try_emplace(static_cast<long>(n))) {
    q.flush();
    ++n;
    if (n == 3) {
      EXPECT_EQ(q.try_pop()->v, 0);  // taken from the half being filled
      q.push(item(1000));            // and the producer fills on
      q.flush();
      ++n;
    }
  }
  // Full at capacity; a ring reuses the slot taken early at once, BatchQueue
  // once the consumer is through the whole half.
  constexpr bool halves = std::is_same_v<Q<TypeParam, item>, mote::batch_queue<item>>;
  EXPECT_EQ(n, q.capacity() + (halves ? 0 : 1));
  EXPECT_EQ(q.try_pop()->v, 1);
  EXPECT_EQ(q.try_pop()->v, 2);
  EXPECT_EQ(q.try_pop()->v, 1000);
  for (std::size_t i = 4; i < n; ++i) EXPECT_EQ(q.try_pop()->v, static_cast<long>(i));
  EXPECT_FALSE(q.try_pop().has_value());
}

TYPED_TEST(Queues, CloseEndsTheStreamAfterItsItems) {
  lifetime_check lc;
  Q<TypeParam, item> q(8);
  for (long i = 0; i < 5; ++i) q.push(item(i));
  q.close();
  EXPECT_TRUE(q.closed());
  EXPECT_THROW(q.push(item(9)), mote::usage_error);
  EXPECT_THROW(q.try_push(item(9)), mote::usage_error);
  for (long i = 0; i < 5; ++i) {
    std::optional<item> v = q.pop();
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(v->v, i);
  }
  EXPECT_FALSE(q.pop().has_value());
  EXPECT_FALSE(q.pop().has_value());
}

TYPED_TEST(Queues, DestructionDestroysWhatIsLeft) {
  lifetime_check lc;
  {
    Q<TypeParam, item> q(16);
    for (long i = 0; i < 11; ++i) q.push(item(i));  // a partial batch too
    EXPECT_EQ(q.pop()->v, 0);
  }
  {
    Q<TypeParam, item> q(4);
    q.push(item(1));  // never published
  }
}

TYPED_TEST(Queues, BulkPushAndPopKeepOrder) {
  lifetime_check lc;
  Q<TypeParam, item> q(8);
  const long n = scaled(20000);
  std::thread consumer([&] {
    std::vector<item> buf;
    long expect = 0;
    std::mt19937 rng(7);
    for (;;) {
      buf.clear();
      const std::size_t want = 1 + rng() % 13;
      // pop_n writes through an iterator into constructed items
      for (std::size_t i = 0; i < want; ++i) buf.emplace_back(-2);
      const std::size_t k = q.pop_n(buf.begin(), want);
      if (k == 0) break;
      for (std::size_t i = 0; i < k; ++i) EXPECT_EQ(buf[i].v, expect++);
    }
    EXPECT_EQ(expect, n);
  });
  std::mt19937 rng(8);
  long next = 0;
  while (next < n) {
    std::vector<item> block;
    const long k = std::min<long>(n - next, 1 + static_cast<long>(rng() % 21));
    for (long i = 0; i < k; ++i) block.emplace_back(next + i);
    q.push_n(block.begin(), block.size());
    next += k;
  }
  q.close();
  consumer.join();
}

// One producer, one consumer, a small queue, every way in and out: the
// consumer sees exactly 0..n-1 in order.
TYPED_TEST(Queues, StreamBetweenTwoThreadsKeepsEveryItemInOrder) {
  lifetime_check lc;
  for (std::size_t cap : {2U, 8U, 256U}) {
    Q<TypeParam, item> q(cap);
    const long n = scaled(cap == 2 ? 20000 : 100000, 8);
    std::thread producer([&] {
      std::mt19937 rng(1);
      for (long i = 0; i < n; ++i) {
        switch (rng() % 4) {
          case 0:
            while (!q.try_emplace(i)) std::this_thread::yield();
            break;
          case 1: q.emplace(i); break;
          case 2: q.push(item(i)); break;
          default:
            q.push(item(i));
            q.flush();
        }
      }
      q.close();
    });
    long expect = 0;
    std::mt19937 rng(2);
    for (;;) {
      std::optional<item> v;
      if (rng() % 3 == 0) {
        v = q.try_pop();
        if (!v) {
          if (q.closed()) {
            v = q.pop();
            if (!v) break;
          } else {
            continue;
          }
        }
      } else {
        v = q.pop();
        if (!v) break;
      }
      ASSERT_EQ(v->v, expect) << "capacity " << cap;
      ++expect;
    }
    EXPECT_EQ(expect, n);
    producer.join();
  }
}

// The latency bound: an item pushed without flush() becomes visible when its
// producer waits. Two threads play ping-pong through two queues; each push is
// followed by a blocking pop on the other queue, never by a flush. A partial
// batch left unseen would hang here.
TYPED_TEST(Queues, AnItemIsSeenWhenItsProducerWaits) {
  lifetime_check lc;
  Q<TypeParam, item> ping(64), pong(64);
  const long rounds = scaled(3000, 4);
  std::thread other([&] {
    while (std::optional<item> v = ping.pop()) pong.push(item(v->v + 1));
    pong.close();
  });
  long x = 0;
  for (long r = 0; r < rounds; ++r) {
    ping.push(item(x));
    std::optional<item> v = pong.pop();
    ASSERT_TRUE(v.has_value());
    ASSERT_EQ(v->v, x + 1);
    x = v->v;
  }
  ping.close();
  EXPECT_FALSE(pong.pop().has_value());
  other.join();
}

// ... also when the producer waits in a task group, and when it ends.
TYPED_TEST(Queues, AnItemIsSeenWhenItsProducerWaitsForATaskGroupOrEnds) {
  lifetime_check lc;
  Q<TypeParam, item> q(64);
  std::atomic<bool> taken{false};
  std::thread consumer([&] {
    EXPECT_EQ(q.pop()->v, 1);
    taken.store(true);
    EXPECT_EQ(q.pop()->v, 2);
  });
  {
    mote::runtime rt(mote_test::workers(1));
    mote::task_group g(rt);
    q.push(item(1));
    g.spawn([&] {
      while (!taken.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    });
    g.wait();  // hangs if item 1 stays in a partial batch
  }
  q.flush();  // the producer role moves to another thread
  std::thread producer([&] { q.push(item(2)); });  // and ends
  producer.join();
  consumer.join();
}

// Waits that sleep: a consumer that waits far past the spin window wakes for
// an item and for the close; a producer waits for room.
TYPED_TEST(Queues, SleepingSidesWakeUp) {
  lifetime_check lc;
  Q<TypeParam, item> q(4);
  std::thread consumer([&] {
    EXPECT_EQ(q.pop()->v, 7);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the producer fills it and waits
    long expect = 0;
    while (std::optional<item> v = q.pop()) EXPECT_EQ(v->v, expect++);
    EXPECT_EQ(expect, 100);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  q.push(item(7));
  q.flush();
  for (long i = 0; i < 100; ++i) q.push(item(i));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  q.close();
  consumer.join();
}

// More pairs than cores: four streams at once, eight threads on two CPUs,
// through the spin-then-sleep paths.
TYPED_TEST(Queues, MorePairsThanCores) {
  lifetime_check lc;
  constexpr int kPairs = 4;
  const long n = scaled(40000, 8);
  std::vector<std::unique_ptr<Q<TypeParam, item>>> qs;
  for (int p = 0; p < kPairs; ++p) qs.push_back(std::make_unique<Q<TypeParam, item>>(16));
  std::vector<std::thread> threads;
  std::atomic<long> bad{0};
  for (int p = 0; p < kPairs; ++p) {
    auto& q = *qs[p];
    threads.emplace_back([&q, n] {
      for (long i = 0; i < n; ++i) q.push(item(i));
      q.close();
    });
    threads.emplace_back([&q, &bad, n] {
      long expect = 0;
      while (std::optional<item> v = q.pop()) {
        if (v->v != expect++) bad.fetch_add(1);
      }
      if (expect != n) bad.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// ---- Moves that throw, through every queue and every kind of channel --------

// The channels, seen as queues of the same interface: declared one-to-one,
// declared many-to-many, automatic (BatchQueue while one thread is on each
// side), automatic switched to the MPMC queue before the first item, and
// automatic with its consumer bound to another thread, so that the test
// thread's first pop switches it with the items still in BatchQueue.
template <class T>
struct spsc_channel : mote::channel<T> {
  explicit spsc_channel(std::size_t capacity) : mote::channel<T>(capacity, mote::channel_kind::spsc) {}
};
template <class T>
struct mpmc_channel : mote::channel<T> {
  explicit mpmc_channel(std::size_t capacity) : mote::channel<T>(capacity, mote::channel_kind::mpmc) {}
};
template <class T>
struct automatic_channel : mote::channel<T> {
  explicit automatic_channel(std::size_t capacity) : mote::channel<T>(capacity) {}
};
template <class T>
struct switching_channel : mote::channel<T> {
  explicit switching_channel(std::size_t capacity) : mote::channel<T>(capacity) {
    std::thread([this] { (void)this->try_pop(); }).join();
  }
};
template <class T>
struct switched_channel : switching_channel<T> {
  explicit switched_channel(std::size_t capacity) : switching_channel<T>(capacity) { (void)this->try_pop(); }
};

template <class Q>
class Throwing : public ::testing::Test {};

using AllKinds = ::testing::Types<queue_of<lamport>, queue_of<cached>, queue_of<batch>, queue_of<mpmc>,
                                  queue_of<spsc_channel>, queue_of<mpmc_channel>, queue_of<automatic_channel>,
                                  queue_of<switching_channel>, queue_of<switched_channel>>;

class AllNames {
 public:
  template <class K>
  static std::string GetName(int i) {
    static const char* const names[] = {"lamport_ring",      "cached_ring",    "batch_queue",
                                        "mpmc_queue",        "channel_spsc",   "channel_mpmc",
                                        "channel_automatic", "channel_switching", "channel_switched"};
    return names[i];
  }
};

TYPED_TEST_SUITE(Throwing, AllKinds, AllNames);

// pop_n whose move-assignment to the output throws, at random places: the
// items before it are handed over (counted in `moved`), the one that threw
// stays in the queue, whole, and comes out next; every item comes out exactly
// once, in order, and every item built is destroyed once. (Closed first, so
// that a pop finds the end rather than waits when an item is lost.)
TYPED_TEST(Throwing, PopNHandsEachItemOverOnce) {
  const std::uint64_t seed = mote_test::test_seed();
  std::mt19937_64 rng(seed);
  int throws = 0;
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE(::testing::Message() << "MOTE_TEST_SEED=" << seed << ", round " << round);
    fragile_balance balance;
    Q<TypeParam, fragile> q(std::size_t{2} << (rng() % 6));
    const long n = static_cast<long>(rng() % (q.capacity() + 1));
    for (long i = 0; i < n; ++i) q.push(fragile(i));
    q.close();
    std::vector<fragile> out;
    for (int i = 0; i < 8; ++i) out.emplace_back(-2);
    long next = 0;
    while (next < n) {
      for (fragile& f : out) f.v = -2;
      const std::size_t max = 1 + rng() % out.size();
      fragile::arm(static_cast<long>(1 + rng() % (max + 1)));  // max + 1: no throw
      std::size_t moved = 1000;
      std::size_t k = 0;
      bool threw = false;
      try {
        k = q.pop_n(out.begin(), max, &moved);
      } catch (const std::runtime_error&) {
        threw = true;
        ++throws;
        k = moved;
      }
      fragile::arm(0);
      ASSERT_EQ(moved, k) << "the count reported";
      ASSERT_TRUE(threw || k != 0) << "the stream ended at item " << next;
      for (std::size_t i = 0; i < out.size(); ++i) {
        if (i < k) {
          ASSERT_EQ(out[i].v, next++) << "slot " << i;
        } else {
          ASSERT_EQ(out[i].v, -2) << "slot " << i << " written but not counted";
        }
      }
    }
    EXPECT_EQ(q.pop_n(out.begin(), out.size()), 0U);
  }
  EXPECT_GT(throws, 0);
}

// push_n whose move into the queue throws, at random places: the items
// before it are pushed (counted in `pushed`), the one that threw and the
// rest stay with the caller, whole; pushing the rest again delivers every
// item exactly once, in order.
TYPED_TEST(Throwing, PushNKeepsTheRestWithTheCaller) {
  const std::uint64_t seed = mote_test::test_seed();
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE(::testing::Message() << "MOTE_TEST_SEED=" << seed << ", round " << round);
    fragile_balance balance;
    Q<TypeParam, fragile> q(std::size_t{2} << (rng() % 6));
    const long n = static_cast<long>(rng() % (q.capacity() + 1));
    std::vector<fragile> in;
    for (long i = 0; i < n; ++i) in.emplace_back(i);
    // Taking what is in after each call also passes the positions that the
    // MPMC queue gave up (its holes).
    std::vector<long> seen;
    auto take_all = [&] {
      q.flush();
      while (std::optional<fragile> v = q.try_pop()) seen.push_back(v->v);
    };
    std::size_t done = 0;
    while (done < in.size()) {
      const std::size_t left = in.size() - done;
      fragile::arm(static_cast<long>(1 + rng() % (left + 1)));  // left + 1: no throw
      std::size_t pushed = 1000;
      bool threw = false;
      try {
        q.push_n(in.begin() + static_cast<long>(done), left, &pushed);
      } catch (const std::runtime_error&) {
        threw = true;
      }
      fragile::arm(0);
      ASSERT_LE(pushed, left);
      if (!threw) ASSERT_EQ(pushed, left);
      done += pushed;
      if (threw) ASSERT_EQ(in[done].v, static_cast<long>(done)) << "the item whose move threw is intact";
      take_all();
    }
    std::vector<long> expect(static_cast<std::size_t>(n));
    std::iota(expect.begin(), expect.end(), 0L);
    EXPECT_EQ(seen, expect);
  }
}

// A pop whose move into the returned optional throws leaves the item where
// it was: the next pop returns it. (Closed first, so that a pop finds the
// end rather than waits when an item is lost.)
TYPED_TEST(Throwing, APopLeavesTheItem) {
  const std::uint64_t seed = mote_test::test_seed();
  std::mt19937_64 rng(seed);
  fragile_balance balance;
  for (int round = 0; round < 50; ++round) {
    SCOPED_TRACE(::testing::Message() << "MOTE_TEST_SEED=" << seed << ", round " << round);
    Q<TypeParam, fragile> q(16);
    const long n = static_cast<long>(1 + rng() % q.capacity());
    for (long i = 0; i < n; ++i) q.push(fragile(i));
    q.close();
    long next = 0;
    while (next < n) {
      const bool wait = rng() % 2 != 0;
      fragile::arm(static_cast<long>(1 + rng() % 3));
      try {
        std::optional<fragile> v = wait ? q.pop() : q.try_pop();
        fragile::arm(0);
        ASSERT_TRUE(v.has_value());
        ASSERT_EQ(v->v, next++);
      } catch (const std::runtime_error&) {
        fragile::arm(0);
      }
    }
    ASSERT_FALSE(q.pop().has_value());
  }
}

TEST(Queues, CapacityIsChecked) {
  EXPECT_THROW(mote::batch_queue<int>(1), std::invalid_argument);
  EXPECT_THROW(mote::detail::lamport_ring<int>(0), std::invalid_argument);
  EXPECT_THROW(mote::cached_ring<int>(1), std::invalid_argument);
  EXPECT_THROW(mote::mpmc_queue<int>(1), std::invalid_argument);
  EXPECT_EQ(mote::mpmc_queue<int>(100).capacity(), 128U);
  EXPECT_EQ(mote::cached_ring<int>(5).capacity(), 8U);
  EXPECT_EQ(mote::batch_queue<int>(7).capacity(), 8U);
}

// batch_queue's zero-copy spans.
TEST(BatchQueue, SpansWriteAndReadInPlace) {
  mote::batch_queue<std::uint64_t> q(64);
  const std::uint64_t n = static_cast<std::uint64_t>(scaled(100000, 8));
  std::thread producer([&] {
    std::uint64_t next = 0;
    while (next < n) {
      std::span<std::uint64_t> s = q.write_span();
      if (s.empty()) {
        std::this_thread::yield();
        continue;
      }
      const std::size_t k = std::min<std::uint64_t>(s.size(), std::min<std::uint64_t>(n - next, 1 + next % 37));
      for (std::size_t i = 0; i < k; ++i) s[i] = next++;
      q.commit(k);
    }
    q.close();
  });
  std::uint64_t expect = 0;
  for (;;) {
    std::span<std::uint64_t> s = q.read_span();
    if (s.empty()) {
      if (q.closed() && q.read_span().empty()) break;
      std::this_thread::yield();
      continue;
    }
    const std::size_t k = std::max<std::size_t>(1, s.size() / 2);
    for (std::size_t i = 0; i < k; ++i) ASSERT_EQ(s[i], expect++);
    q.consume(k);
  }
  EXPECT_EQ(expect, n);
  producer.join();
}

// ---- MPMC ------------------------------------------------------------------

struct tagged {
  int producer;
  long seq;
  item body;
  tagged(int p, long s) : producer(p), seq(s), body(s) {}
};

// Many producers and consumers: every item comes out exactly once, and each
// consumer sees each producer's items in that producer's order.
void many_to_many(int producers, int consumers, std::size_t cap, long per_producer) {
  lifetime_check lc;
  mote::mpmc_queue<tagged> q(cap);
  std::vector<std::vector<std::uint8_t>> seen(producers, std::vector<std::uint8_t>(per_producer, 0));
  std::atomic<long> dup{0}, disorder{0}, total{0};
  std::vector<std::thread> ts;
  std::atomic<int> producing{producers};
  for (int p = 0; p < producers; ++p) {
    ts.emplace_back([&, p] {
      std::mt19937 rng(p);
      for (long i = 0; i < per_producer; ++i) {
        if (rng() % 2) {
          q.emplace(p, i);
        } else {
          while (!q.try_emplace(p, i)) std::this_thread::yield();
        }
      }
      if (producing.fetch_sub(1) == 1) q.close();
    });
  }
  for (int c = 0; c < consumers; ++c) {
    ts.emplace_back([&, c] {
      std::vector<long> last(producers, -1);
      std::mt19937 rng(100 + c);
      std::vector<tagged> buf;
      for (;;) {
        std::optional<tagged> v;
        if (rng() % 4 == 0) {
          v = q.try_pop();
          if (!v) {
            v = q.pop();
            if (!v) break;
          }
        } else {
          v = q.pop();
          if (!v) break;
        }
        if (v->seq <= last[v->producer] || v->body.v != v->seq) disorder.fetch_add(1);
        last[v->producer] = v->seq;
        // Each (producer, seq) cell is written by one consumer at most once.
        std::uint8_t& s = seen[v->producer][v->seq];
        if (std::atomic_ref<std::uint8_t>(s).exchange(1) != 0) dup.fetch_add(1);
        total.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(dup.load(), 0);
  EXPECT_EQ(disorder.load(), 0);
  EXPECT_EQ(total.load(), producers * per_producer);
  for (auto& row : seen) {
    EXPECT_EQ(std::count(row.begin(), row.end(), 1), per_producer);
  }
}

TEST(MpmcQueue, FourProducersFourConsumers) { many_to_many(4, 4, 64, scaled(30000, 8)); }
TEST(MpmcQueue, EightByEightOnASmallQueue) { many_to_many(8, 8, 4, scaled(8000, 8)); }
TEST(MpmcQueue, OneProducerManyConsumersAndBack) {
  many_to_many(1, 6, 16, scaled(30000, 8));
  many_to_many(6, 1, 16, scaled(10000, 8));
}

// close() from a third thread wakes producers waiting for room (they throw)
// and consumers waiting for items (they end); the items pushed before it
// all come out.
TEST(MpmcQueue, CloseWakesBothSides) {
  lifetime_check lc;
  mote::mpmc_queue<item> q(2);
  q.push(item(1));
  q.push(item(2));
  std::atomic<int> refused{0};
  std::vector<std::thread> producers;
  for (int i = 0; i < 3; ++i) {
    producers.emplace_back([&] {
      try {
        q.push(item(3));  // full: waits, past the spin window
      } catch (const mote::usage_error&) {
        refused.fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  q.close();
  for (auto& t : producers) t.join();
  EXPECT_EQ(refused.load(), 3);
  EXPECT_EQ(q.pop()->v, 1);
  EXPECT_EQ(q.pop()->v, 2);
  EXPECT_FALSE(q.pop().has_value());

  mote::mpmc_queue<item> empty(8);
  std::vector<std::thread> consumers;
  std::atomic<int> ended{0};
  for (int i = 0; i < 3; ++i) {
    consumers.emplace_back([&] {
      if (!empty.pop().has_value()) ended.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  empty.close();
  for (auto& t : consumers) t.join();
  EXPECT_EQ(ended.load(), 3);
}

// An item whose constructor holds its producer until a gate opens: a push
// that claimed its position and is still building the item.
struct held {
  long v;
  held(long x, std::atomic<int>& building, const std::atomic<bool>& gate) : v(x) {
    building.fetch_add(1);
    while (!gate.load()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  held(held&&) noexcept = default;
  held& operator=(held&&) noexcept = default;
};

// Pops after close() while the producers that claimed positions before it
// are still building their items, with more threads than cores: the
// consumers wait for those items as for any other (spin, then sleep) instead
// of spinning without end, and every item comes out exactly once. The gate
// opens once every consumer has gone to sleep (the kernel's count of its
// voluntary switches moved), or after 5 s, and the counts then say what
// happened.
TEST(MpmcQueue, PopAfterCloseSleepsWhileAClaimedItemIsBuilt) {
  mote_test::hang_guard guard(::testing::UnitTest::GetInstance()->current_test_info()->name(),
                              std::chrono::seconds(mote_test::kSanitized ? 240 : 60));
  const int cpus = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  const int producers = cpus + 1;
  const int consumers = cpus + 1;
  for (int rep = 0; rep < 3; ++rep) {
    SCOPED_TRACE(::testing::Message() << "repetition " << rep);
    mote::mpmc_queue<held> q(64);
    std::atomic<int> building{0};
    std::atomic<bool> gate{false};
    std::vector<std::thread> ts;
    for (int p = 0; p < producers; ++p) ts.emplace_back([&, p] { q.emplace(p, building, gate); });
    while (building.load() < producers) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    q.close();  // every position is claimed; no item is built yet

    std::vector<std::atomic<long>> tid(consumers), before(consumers);
    std::vector<std::vector<long>> got(consumers);
    std::vector<int> ends(consumers, 0);
    for (int c = 0; c < consumers; ++c) {
      ts.emplace_back([&, c] {
        // Its own count, read before it pops: nothing else blocks it until
        // the pop waits.
        before[c].store(mote_test::voluntary_switches(mote_test::this_thread_id()));
        tid[c].store(mote_test::this_thread_id());
        while (std::optional<held> v = q.pop()) got[c].push_back(v->v);
        if (!q.pop().has_value()) ++ends[c];
      });
    }
    auto slept = [&](int c) {
      const long t = tid[c].load();
      return t != 0 && mote_test::voluntary_switches(t) > before[c].load();
    };
    for (int i = 0; i < 500; ++i) {
      int asleep = 0;
      for (int c = 0; c < consumers; ++c) asleep += slept(c) ? 1 : 0;
      if (asleep == consumers) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    int asleep = 0;
    for (int c = 0; c < consumers; ++c) asleep += slept(c) ? 1 : 0;
    gate.store(true);
    for (auto& t : ts) t.join();

    EXPECT_EQ(asleep, consumers) << "consumers spun on a closed queue instead of sleeping";
    std::vector<long> all;
    for (int c = 0; c < consumers; ++c) {
      all.insert(all.end(), got[c].begin(), got[c].end());
      EXPECT_EQ(ends[c], 1) << "consumer " << c;
    }
    std::sort(all.begin(), all.end());
    std::vector<long> expect(static_cast<std::size_t>(producers));
    std::iota(expect.begin(), expect.end(), 0L);
    EXPECT_EQ(all, expect) << "every item exactly once";
    if (HasFailure()) break;
  }
}

struct picky {
  static inline std::atomic<long> live{0};
  long v;
  explicit picky(long x) : v(x) {
    if (x < 0) throw std::runtime_error("refused");
    live.fetch_add(1);
  }
  picky(picky&& o) : v(o.v) { live.fetch_add(1); }  // may throw, as far as the queue knows
  ~picky() { live.fetch_sub(1); }
};

// An item whose constructor throws: the exception reaches the pusher, the
// claimed cell is skipped, and the queue goes on.
TEST(MpmcQueue, AThrowingConstructorLeavesNoHoleBehind) {
  {
    mote::mpmc_queue<picky> q(16);
    q.emplace(1L);
    EXPECT_THROW(q.emplace(-1L), std::runtime_error);
    q.emplace(2L);
    for (int lap = 0; lap < 5; ++lap) {  // the skipped cell is reused
      EXPECT_THROW(q.emplace(-1L), std::runtime_error);
      q.emplace(3L + lap);
      EXPECT_EQ(q.pop()->v, 1 + lap);
    }
    q.close();
    EXPECT_EQ(q.pop()->v, 6);
    EXPECT_EQ(q.pop()->v, 7);
    EXPECT_FALSE(q.pop().has_value());
  }
  EXPECT_EQ(picky::live.load(), 0);
}

}  // namespace
