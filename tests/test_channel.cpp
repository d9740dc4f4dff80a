// mote::channel: one interface over the queues, BatchQueue for one producer
// and one consumer (declared or seen), the MPMC queue otherwise, and the
// run-time switch between them.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

// channel::close()'s test seam (see mote/channel.hpp): what a test sets here
// runs inside close(), where another thread's push or pop may interleave.
// Set and cleared by the thread that closes.
namespace close_seam {
std::function<void()> run;
}  // namespace close_seam
#define MOTE_CHANNEL_CLOSE_TEST_POINT() \
  do {                                  \
    if (::close_seam::run) ::close_seam::run(); \
  } while (false)

#include "mote/channel.hpp"
#include "mote/error.hpp"
#include "mote/runtime.hpp"
#include "mote/task_group.hpp"
#include "test_util.hpp"

namespace {

using mote::channel_kind;
using mote_test::scaled;

// Move-only, no default constructor, counts itself.
struct token {
  static inline std::atomic<long> live{0};
  int producer;
  long seq;
  token(int p, long s) : producer(p), seq(s) { live.fetch_add(1, std::memory_order_relaxed); }
  token(token&& o) noexcept : producer(o.producer), seq(std::exchange(o.seq, -1)) {
    live.fetch_add(1, std::memory_order_relaxed);
  }
  token& operator=(token&& o) noexcept {
    producer = o.producer;
    seq = std::exchange(o.seq, -1);
    return *this;
  }
  token(const token&) = delete;
  ~token() { live.fetch_sub(1, std::memory_order_relaxed); }
};

struct no_leak {
  long before = token::live.load();
  ~no_leak() { EXPECT_EQ(token::live.load(), before); }
};

class Kinds : public ::testing::TestWithParam<channel_kind> {};

INSTANTIATE_TEST_SUITE_P(Channel, Kinds,
                         ::testing::Values(channel_kind::automatic, channel_kind::spsc, channel_kind::mpmc),
                         [](const auto& info) {
                           switch (info.param) {
                             case channel_kind::automatic: return std::string("automatic");
                             case channel_kind::spsc: return std::string("spsc");
                             default: return std::string("mpmc");
                           }
                         });

TEST_P(Kinds, OneToOneKeepsOrderAndTheQueueItChose) {
  no_leak nl;
  mote::channel<token> ch(8, GetParam());
  const long n = scaled(100000, 8);
  std::thread consumer([&] {
    long expect = 0;
    std::mt19937 rng(3);
    for (;;) {
      std::optional<token> v;
      if (rng() % 4 == 0) {
        v = ch.try_pop();
        if (!v) continue;  // closed and drained shows in pop() below
      } else {
        v = ch.pop();
        if (!v) break;
      }
      ASSERT_EQ(v->seq, expect++);
    }
    EXPECT_EQ(expect, n);
  });
  std::mt19937 rng(4);
  for (long i = 0; i < n; ++i) {
    if (rng() % 3 == 0) {
      while (!ch.try_emplace(0, i)) std::this_thread::yield();
    } else {
      ch.emplace(0, i);
    }
  }
  ch.close();
  consumer.join();
  EXPECT_TRUE(ch.closed());
  EXPECT_EQ(ch.kind(), GetParam());
  // One producer and one consumer: an automatic channel stayed on BatchQueue.
  EXPECT_EQ(ch.queue_in_use(), GetParam() == channel_kind::mpmc ? channel_kind::mpmc : channel_kind::spsc);
}

TEST_P(Kinds, CloseThenDrainThenEmpty) {
  no_leak nl;
  mote::channel<token> ch(16, GetParam());
  for (long i = 0; i < 5; ++i) ch.push(token(0, i));
  ch.close();
  EXPECT_THROW(ch.push(token(0, 9)), mote::usage_error);
  for (long i = 0; i < 5; ++i) EXPECT_EQ(ch.pop()->seq, i);
  EXPECT_FALSE(ch.pop().has_value());
  EXPECT_FALSE(ch.try_pop().has_value());
}

TEST_P(Kinds, LeftoversAreDestroyed) {
  no_leak nl;
  mote::channel<token> ch(16, GetParam());
  for (long i = 0; i < 7; ++i) ch.push(token(0, i));
}

TEST_P(Kinds, BulkPushAndPop) {
  no_leak nl;
  mote::channel<token> ch(32, GetParam());
  const long n = scaled(50000, 8);
  std::thread consumer([&] {
    std::vector<token> buf;
    for (int i = 0; i < 17; ++i) buf.emplace_back(-1, -1);
    long expect = 0;
    while (std::size_t k = ch.pop_n(buf.begin(), buf.size())) {
      for (std::size_t i = 0; i < k; ++i) ASSERT_EQ(buf[i].seq, expect++);
    }
    EXPECT_EQ(expect, n);
  });
  long next = 0;
  while (next < n) {
    std::vector<token> block;
    for (long i = 0; i < 23 && next < n; ++i) block.emplace_back(0, next++);
    ch.push_n(block.begin(), block.size());
  }
  ch.close();
  consumer.join();
}

// Ping-pong with no flush: each side's item is published when it waits.
TEST_P(Kinds, PingPongWithoutFlush) {
  mote::channel<long> ping(64, GetParam()), pong(64, GetParam());
  const long rounds = scaled(5000, 4);
  std::thread other([&] {
    while (std::optional<long> v = ping.pop()) pong.push(*v + 1);
    pong.close();
  });
  long x = 0;
  for (long r = 0; r < rounds; ++r) {
    ping.push(x);
    x = *pong.pop();
  }
  EXPECT_EQ(x, rounds);
  ping.close();
  other.join();
}

// A producer task on a worker pushes and ends; the worker going idle
// publishes its batch.
TEST_P(Kinds, AWorkerGoingIdlePublishes) {
  mote::runtime rt(mote_test::workers(1));
  mote::channel<long> ch(64, GetParam());
  mote::task_group g(rt);
  g.spawn([&] { ch.push(42); });
  EXPECT_EQ(*ch.pop(), 42);
  g.wait();
}

// ---- The automatic choice ----------------------------------------------------

// Producers join one after another while a consumer runs: the channel
// switches to MPMC once, loses nothing, and keeps each producer's order.
TEST(ChannelAutomatic, ASecondProducerSwitchesAndKeepsEveryItem) {
  no_leak nl;
  for (int round = 0; round < 3; ++round) {
    mote::channel<token> ch(8);
    const int producers = 1 + 2 * round;
    const long per = scaled(30000, 8);
    std::atomic<long> total{0}, disorder{0};
    std::thread consumer([&] {
      std::vector<long> last(producers, -1);
      while (std::optional<token> v = ch.pop()) {
        if (v->seq <= last[v->producer]) disorder.fetch_add(1);
        last[v->producer] = v->seq;
        total.fetch_add(1);
      }
    });
    std::vector<std::thread> ps;
    std::atomic<int> left{producers};
    for (int p = 0; p < producers; ++p) {
      ps.emplace_back([&, p] {
        for (long i = 0; i < per; ++i) {
          if (i % 7 == 0) {
            while (!ch.try_emplace(p, i)) std::this_thread::yield();
          } else {
            ch.emplace(p, i);
          }
        }
        if (left.fetch_sub(1) == 1) ch.close();
      });
    }
    for (auto& t : ps) t.join();
    consumer.join();
    EXPECT_EQ(total.load(), producers * per);
    EXPECT_EQ(disorder.load(), 0);
    EXPECT_EQ(ch.queue_in_use(), producers > 1 ? channel_kind::mpmc : channel_kind::spsc);
  }
}

// A second consumer switches the channel while the bound producer holds a
// partial batch: the newcomer gets those items first, then sleeps in pop()
// until a third thread's push wakes it.
TEST(ChannelAutomatic, SwitchWithAPartialBatchThenSleep) {
  no_leak nl;
  mote::channel<token> ch(64);
  ch.push(token(0, 0));
  EXPECT_EQ(ch.pop()->seq, 0);  // this thread is now the bound producer and consumer
  for (long i = 1; i <= 3; ++i) ch.push(token(0, i));  // a partial batch, not published
  std::vector<long> got;
  std::thread consumer([&] {
    while (std::optional<token> v = ch.pop()) got.push_back(v->producer * 100 + v->seq);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(3));  // the consumer is asleep by now
  std::thread([&] { ch.push(token(1, 0)); }).join();
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  ch.close();
  consumer.join();
  EXPECT_EQ(got, (std::vector<long>{1, 2, 3, 100}));
  EXPECT_EQ(ch.queue_in_use(), channel_kind::mpmc);
}

// Close from a thread that is not the producer: the channel switches, and
// the producer's pushes after it throw; what came before is all there.
TEST(ChannelAutomatic, CloseFromAnotherThread) {
  no_leak nl;
  mote::channel<token> ch(16);
  for (long i = 0; i < 5; ++i) ch.push(token(0, i));  // a partial batch
  std::thread([&] { ch.close(); }).join();
  EXPECT_TRUE(ch.closed());
  EXPECT_THROW(ch.push(token(0, 5)), mote::usage_error);
  for (long i = 0; i < 5; ++i) EXPECT_EQ(ch.pop()->seq, i);
  EXPECT_FALSE(ch.pop().has_value());
}

// Many of everything, more threads than cores, switch under load.
TEST(ChannelAutomatic, ManyProducersAndConsumersUnderLoad) {
  no_leak nl;
  mote::channel<token> ch(16);
  const int producers = 5, consumers = 4;
  const long per = scaled(20000, 8);
  std::vector<std::vector<std::uint8_t>> seen(producers, std::vector<std::uint8_t>(per, 0));
  std::atomic<long> dup{0}, total{0};
  std::vector<std::thread> ts;
  std::atomic<int> left{producers};
  for (int c = 0; c < consumers; ++c) {
    ts.emplace_back([&] {
      std::array<token, 8> buf{token(-1, -1), token(-1, -1), token(-1, -1), token(-1, -1),
                               token(-1, -1), token(-1, -1), token(-1, -1), token(-1, -1)};
      while (std::size_t k = ch.pop_n(buf.begin(), buf.size())) {
        for (std::size_t i = 0; i < k; ++i) {
          if (std::atomic_ref<std::uint8_t>(seen[buf[i].producer][buf[i].seq]).exchange(1) != 0) dup.fetch_add(1);
          total.fetch_add(1);
        }
      }
    });
  }
  for (int p = 0; p < producers; ++p) {
    ts.emplace_back([&, p] {
      for (long i = 0; i < per; ++i) ch.emplace(p, i);
      if (left.fetch_sub(1) == 1) ch.close();
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(dup.load(), 0);
  EXPECT_EQ(total.load(), producers * per);
}

// ---- Close racing pushes and pops -------------------------------------------

// Waits for flag, or for `limit` to pass.
void wait_a_while(const std::atomic<bool>& flag, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!flag.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// A push from a third thread while the bound producer closes an automatic
// channel that runs on BatchQueue, with the close held at its seam until the
// bound consumer has ended (or 50 ms have passed), then until the push has
// returned or thrown (or 50 ms more): the push lands and is popped before
// the end of the stream, or it throws; and it throws if closed() said true
// before it began.
TEST(ChannelClose, APushRacingTheBoundProducersCloseLandsOrThrows) {
  no_leak nl;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(::testing::Message() << "round " << round);
    mote::channel<token> ch(64);
    constexpr long kItems = 5;
    std::vector<long> got;
    std::atomic<long> popped{0};
    std::atomic<bool> ended{false};
    std::thread consumer([&] {
      while (std::optional<token> v = ch.pop()) {
        got.push_back(v->producer * 1000 + v->seq);
        popped.fetch_add(1);
      }
      ended.store(true);
    });
    for (long i = 0; i < kItems; ++i) ch.push(token(0, i));  // this thread: the bound producer
    ch.flush();
    for (int i = 0; i < 10000 && popped.load() < kItems; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_EQ(popped.load(), kItems);  // the consumer is bound, and waits

    std::atomic<bool> go{false}, done{false}, saw_closed{false}, landed{false};
    std::thread third([&] {
      while (!go.load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
      saw_closed.store(ch.closed());
      try {
        ch.push(token(1, 0));
        landed.store(true);
      } catch (const mote::usage_error&) {
      }
      done.store(true);
    });
    close_seam::run = [&] {
      wait_a_while(ended, std::chrono::milliseconds(50));
      go.store(true);
      wait_a_while(done, std::chrono::milliseconds(50));
    };
    ch.close();
    close_seam::run = nullptr;
    EXPECT_TRUE(go.load()) << "close() did not pass its seam";
    go.store(true);
    third.join();
    consumer.join();

    if (landed.load()) {
      EXPECT_FALSE(saw_closed.load()) << "a push that began after closed() said true returned";
      EXPECT_EQ(popped.load(), kItems + 1) << "a push that returned was not popped";
      EXPECT_NE(std::find(got.begin(), got.end(), 1000L), got.end());
    } else {
      EXPECT_EQ(popped.load(), kItems);
    }
    EXPECT_THROW(ch.push(token(0, kItems)), mote::usage_error);
    EXPECT_FALSE(ch.pop().has_value());
  }
}

// close() racing pushes from several threads and pops from one or two,
// through an automatic channel (on BatchQueue, switching as a second
// producer, a second consumer or a closing thread comes) and an MPMC one,
// closed by the first producer or by a thread of its own, at random points:
// every push that returned is popped exactly once, each producer's items in
// its order; a push that began after closed() said true throws; and after a
// consumer's end of the stream, nothing more comes out.
TEST(ChannelClose, RacingPushesPopsAndCloseLoseNothing) {
  no_leak nl;
  const std::uint64_t seed = mote_test::test_seed();
  std::mt19937_64 rng(seed);
  const int rounds = static_cast<int>(scaled(150, 5));
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(::testing::Message() << "MOTE_TEST_SEED=" << seed << ", round " << round);
    const channel_kind kind = rng() % 3 != 0 ? channel_kind::automatic : channel_kind::mpmc;
    const int producers = 1 + static_cast<int>(rng() % 3);
    const int consumers = 1 + static_cast<int>(rng() % 2);
    const std::size_t capacity = std::array<std::size_t, 3>{2, 8, 64}[rng() % 3];
    const bool producer_closes = rng() % 2 != 0;
    const long close_after = static_cast<long>(rng() % 300);
    mote::channel<token> ch(capacity, kind);

    std::vector<std::atomic<long>> landed(producers);
    std::atomic<long> late{0}, first_pushed{0}, after_end{0}, disorder{0};
    std::vector<std::vector<std::vector<long>>> got(consumers, std::vector<std::vector<long>>(producers));
    std::vector<std::thread> ts;
    for (int c = 0; c < consumers; ++c) {
      ts.emplace_back([&, c, r = rng()] {
        std::mt19937_64 my(r);
        auto record = [&](const token& t) {
          std::vector<long>& mine = got[c][t.producer];
          if (!mine.empty() && t.seq <= mine.back()) disorder.fetch_add(1);
          mine.push_back(t.seq);
        };
        std::array<token, 4> buf{token(-1, -1), token(-1, -1), token(-1, -1), token(-1, -1)};
        for (;;) {
          const unsigned how = my() % 3;
          if (how == 0) {
            std::optional<token> v = ch.pop();
            if (!v) break;
            record(*v);
          } else if (how == 1) {
            std::optional<token> v = ch.try_pop();
            if (v) {
              record(*v);
            } else {
              std::this_thread::yield();
            }
          } else {
            const std::size_t k = ch.pop_n(buf.begin(), 1 + my() % buf.size());
            if (k == 0) break;
            for (std::size_t i = 0; i < k; ++i) record(buf[i]);
          }
        }
        if (ch.pop().has_value() || ch.try_pop().has_value()) after_end.fetch_add(1);
      });
    }
    for (int p = 0; p < producers; ++p) {
      ts.emplace_back([&, p, r = rng()] {
        std::mt19937_64 my(r);
        long next = 0;
        for (;;) {
          if (p == 0 && producer_closes && next >= close_after) ch.close();
          const bool was_closed = ch.closed();
          try {
            const unsigned how = my() % 3;
            if (how == 0) {
              ch.push(token(p, next));
              ++next;
            } else if (how == 1) {
              while (!ch.try_emplace(p, next)) std::this_thread::yield();
              ++next;
            } else {
              std::vector<token> block;
              const long b = 1 + static_cast<long>(my() % 4);
              for (long i = 0; i < b; ++i) block.emplace_back(p, next + i);
              std::size_t pushed = 0;
              try {
                ch.push_n(block.begin(), block.size(), &pushed);
              } catch (const mote::usage_error&) {
                next += static_cast<long>(pushed);
                landed[p].store(next);
                if (was_closed && pushed != 0) late.fetch_add(1);
                throw;
              }
              next += b;
            }
          } catch (const mote::usage_error&) {
            break;
          }
          landed[p].store(next);
          if (was_closed) late.fetch_add(1);
          if (p == 0) first_pushed.store(next);
        }
      });
    }
    if (!producer_closes) {
      ts.emplace_back([&] {
        while (first_pushed.load() < close_after) std::this_thread::yield();
        ch.close();
      });
    }
    for (auto& t : ts) t.join();

    EXPECT_EQ(late.load(), 0) << "pushes that began after closed() said true returned";
    EXPECT_EQ(after_end.load(), 0) << "items after a consumer's end of the stream";
    EXPECT_EQ(disorder.load(), 0);
    for (int p = 0; p < producers; ++p) {
      std::vector<long> all;
      for (int c = 0; c < consumers; ++c) all.insert(all.end(), got[c][p].begin(), got[c][p].end());
      std::sort(all.begin(), all.end());
      std::vector<long> expect(static_cast<std::size_t>(landed[p].load()));
      std::iota(expect.begin(), expect.end(), 0L);
      EXPECT_EQ(all, expect) << "producer " << p << ": every push that returned, popped exactly once";
    }
    if (HasFailure()) break;
  }
}

// ---- Spans -----------------------------------------------------------------

TEST(ChannelSpans, OnlyOnSpscAndInOrder) {
  mote::channel<int> automatic(16);
  EXPECT_THROW(automatic.read_span(), mote::usage_error);
  EXPECT_THROW(automatic.write_span(), mote::usage_error);

  mote::channel<int> ch(64, channel_kind::spsc);
  const int n = static_cast<int>(scaled(50000, 4));
  std::thread producer([&] {
    int next = 0;
    while (next < n) {
      std::span<int> s = ch.write_span();
      if (s.empty()) {
        ch.flush();
        std::this_thread::yield();
        continue;
      }
      const std::size_t k = std::min<std::size_t>(s.size(), static_cast<std::size_t>(n - next));
      for (std::size_t i = 0; i < k; ++i) s[i] = next++;
      ch.commit(k);
    }
    ch.close();
  });
  int expect = 0;
  for (;;) {
    std::span<int> s = ch.read_span();
    if (s.empty()) {
      if (ch.closed() && ch.read_span().empty()) break;
      std::this_thread::yield();
      continue;
    }
    for (int v : s) ASSERT_EQ(v, expect++);
    ch.consume(s.size());
  }
  EXPECT_EQ(expect, n);
  producer.join();
}

}  // namespace
