// Queue micro-benchmarks between the two cores: one producer thread pinned
// to CPU 0, one consumer thread pinned to CPU 1 (pthread_setaffinity_np,
// here), the same two threads for every measurement of the process. Built
// once per queue, named by MOTE_BENCH_QUEUE (its runtime name in suites.json):
//   boost_spsc          boost::lockfree::spsc_queue<T>(capacity) (run-time
//                       size); its push/pop never wait: the benchmark
//                       retries at once (`while (!q.push(v)) ;`)
//   mote_lamport        mote::detail::lamport_ring<T>
//   mote_cached         mote::cached_ring<T>
//   mote_batch          mote::batch_queue<T>
//   mote_mpmc           mote::mpmc_queue<T>
//   mote_channel_spsc   mote::channel<T>(capacity, channel_kind::spsc)
//   mote_channel_auto   mote::channel<T>(capacity, channel_kind::automatic)
//   mote_channel_mpmc   mote::channel<T>(capacity, channel_kind::mpmc)
// A new queue is one more class template in `queues` below, one entry in
// suites.json and one in MOTE_STREAMS_QUEUES (bench/CMakeLists.txt).
// mote's queues use their blocking push() / pop() (they spin, then sleep).
//
// Kernels (--kernel NAME; all of them without). A name is a test and
// modifiers separated by '_': a number is the item size in bytes (8 or 64),
// c<N> the capacity (default 512), flush a flush() after every push:
//   line             the one-way cache-line transfer: the two threads bounce
//                    one line (each waits for the other's store, then
//                    stores), round trip / 2, ns
//   comm_<S>         throughput, M items/s: the producer pushes --items
//                    items one at a time, the consumer pops them one at a
//                    time; timed from the producer's start to the
//                    consumer's last pop
//   block_<S>        the same in blocks of 64: Boost push(ptr, 64) /
//                    pop(ptr, 64), mote push_n / pop_n
//   matrix_<S>       the comm test with work between operations: each side
//                    has its own 24 KiB matrix (64 rows of 48 doubles) and
//                    updates one row per item (the whole matrix per 64
//                    items), so the queue competes with it for the L1
//   matrixblock_<S>  the same in blocks of 64 (the producer updates the
//                    whole matrix, then pushes 64 items)
//   latency_<S>      one-way latency, ns: the producer pushes an item on
//                    one queue and waits for it to come back on a second
//                    one, which the consumer pushes it to; round trip / 2
// Every record's extra has line_ns (the line transfer measured just before
// the kernel, median of 3) and line_ns_after, so every queue figure can be
// read against the transfer of the same process. The consumer checks the
// sum of what it received against the closed form (exit 1 on a mismatch).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../common/harness.hpp"
#include "kernels.hpp"

#ifndef MOTE_BENCH_QUEUE
#error "MOTE_BENCH_QUEUE names the queue under test, e.g. -DMOTE_BENCH_QUEUE=mote_batch (bench/CMakeLists.txt)"
#endif

// Each header is there only in the builds that can use it: Boost.Lockfree in
// bench_streams_qboost, mote's queues in the builds linked with mote.
#if __has_include(<boost/lockfree/spsc_queue.hpp>)
#include <boost/lockfree/spsc_queue.hpp>
#define MOTE_BENCH_HAVE_BOOST_LOCKFREE 1
#endif
#if __has_include(<mote/queues/batch_queue.hpp>)
#include <mote/channel.hpp>
#include <mote/queues/batch_queue.hpp>
#include <mote/queues/mpmc_queue.hpp>
#include <mote/queues/ring.hpp>
#define MOTE_BENCH_HAVE_MOTE 1
#endif

#define MOTE_BENCH_STRINGIZE2(x) #x
#define MOTE_BENCH_STRINGIZE(x) MOTE_BENCH_STRINGIZE2(x)

namespace {

using mote_bench::streams::cpu_relax;
using mote_bench::streams::pin_to_cpu;

// ---------------------------------------------------------------- the queues, by name

// One class template per queue, named as its runtime in bench/suites.json;
// MOTE_BENCH_QUEUE picks one. Each has push / pop / flush, push_block /
// pop_block when kBlocks, its type's name (kType) and in_use(), the queue a
// channel chose.
namespace queues {

#if MOTE_BENCH_HAVE_BOOST_LOCKFREE
// Its push and pop never wait: the benchmark retries at once.
template <class T>
class boost_spsc {
 public:
  static constexpr const char* kType = "boost::lockfree::spsc_queue";
  explicit boost_spsc(std::size_t capacity) : q_(capacity) {}
  void push(const T& v) {
    while (!q_.push(v)) {
    }
  }
  T pop() {
    T v;
    while (!q_.pop(v)) {
    }
    return v;
  }
  void flush() {}
  static constexpr bool kBlocks = true;
  void push_block(const T* p, std::size_t n) {
    while (n != 0) {
      const std::size_t k = q_.push(p, n);
      p += k;
      n -= k;
    }
  }
  std::size_t pop_block(T* out, std::size_t max) {
    std::size_t k;
    while ((k = q_.pop(out, max)) == 0) {
    }
    return k;
  }
  const char* in_use() const { return kType; }

 private:
  boost::lockfree::spsc_queue<T> q_;
};
#endif

#if MOTE_BENCH_HAVE_MOTE
// mote's queues through their blocking push() / pop() (they spin, then sleep).
template <class Q, class T>
class mote_queue {
 public:
  template <class... A>
  explicit mote_queue(std::size_t capacity, A... a) : q_(capacity, a...) {}
  using value_type = T;
  void push(const value_type& v) { q_.push(v); }
  value_type pop() { return *q_.pop(); }  // never closed here: always a value
  void flush() { q_.flush(); }
  static constexpr bool kBlocks = requires(Q& q, const value_type* p, value_type* o, std::size_t n) {
    q.push_n(p, n);
    q.pop_n(o, n);
  };
  void push_block(const value_type* p, std::size_t n) {
    if constexpr (kBlocks) q_.push_n(p, n);
  }
  std::size_t pop_block(value_type* out, std::size_t max) {
    if constexpr (kBlocks) {
      return q_.pop_n(out, max);
    } else {
      return 0;
    }
  }

 protected:
  Q q_;
};

template <class T>
struct mote_lamport : mote_queue<mote::detail::lamport_ring<T>, T> {
  static constexpr const char* kType = "mote::detail::lamport_ring";
  explicit mote_lamport(std::size_t capacity) : mote_queue<mote::detail::lamport_ring<T>, T>(capacity) {}
  const char* in_use() const { return kType; }
};
template <class T>
struct mote_cached : mote_queue<mote::cached_ring<T>, T> {
  static constexpr const char* kType = "mote::cached_ring";
  explicit mote_cached(std::size_t capacity) : mote_queue<mote::cached_ring<T>, T>(capacity) {}
  const char* in_use() const { return kType; }
};
template <class T>
struct mote_batch : mote_queue<mote::batch_queue<T>, T> {
  static constexpr const char* kType = "mote::batch_queue";
  explicit mote_batch(std::size_t capacity) : mote_queue<mote::batch_queue<T>, T>(capacity) {}
  const char* in_use() const { return kType; }
};
template <class T>
struct mote_mpmc : mote_queue<mote::mpmc_queue<T>, T> {
  static constexpr const char* kType = "mote::mpmc_queue";
  explicit mote_mpmc(std::size_t capacity) : mote_queue<mote::mpmc_queue<T>, T>(capacity) {}
  const char* in_use() const { return kType; }
};

// A channel of the given kind; in_use() is the queue it chose.
template <class T, mote::channel_kind Kind>
struct mote_channel : mote_queue<mote::channel<T>, T> {
  explicit mote_channel(std::size_t capacity) : mote_queue<mote::channel<T>, T>(capacity, Kind) {}
  const char* in_use() const {
    return this->q_.queue_in_use() == mote::channel_kind::spsc ? "batch_queue" : "mpmc_queue";
  }
};
template <class T>
struct mote_channel_spsc : mote_channel<T, mote::channel_kind::spsc> {
  static constexpr const char* kType = "mote::channel(spsc)";
  using mote_channel<T, mote::channel_kind::spsc>::mote_channel;
};
template <class T>
struct mote_channel_auto : mote_channel<T, mote::channel_kind::automatic> {
  static constexpr const char* kType = "mote::channel(automatic)";
  using mote_channel<T, mote::channel_kind::automatic>::mote_channel;
};
template <class T>
struct mote_channel_mpmc : mote_channel<T, mote::channel_kind::mpmc> {
  static constexpr const char* kType = "mote::channel(mpmc)";
  using mote_channel<T, mote::channel_kind::mpmc>::mote_channel;
};
#endif

}  // namespace queues

template <class T>
using queue = queues::MOTE_BENCH_QUEUE<T>;
constexpr const char* kRuntime = MOTE_BENCH_STRINGIZE(MOTE_BENCH_QUEUE);

// ---------------------------------------------------------------- items

struct item64 {
  std::uint64_t w[8];
};

template <class T>
T make_item(std::uint64_t i) {
  if constexpr (sizeof(T) == 8) {
    return T{i};
  } else {
    T v;
    for (std::uint64_t k = 0; k < 8; ++k) v.w[k] = i + k;
    return v;
  }
}

// What the consumer adds up: i for an 8-byte item, w[0] + w[7] = 2i + 7 for
// a 64-byte one (so both ends of the item are read).
template <class T>
std::uint64_t item_key(const T& v) {
  if constexpr (sizeof(T) == 8) {
    return v;
  } else {
    return v.w[0] + v.w[7];
  }
}

template <class T>
std::uint64_t expected_sum(std::uint64_t n) {
  if constexpr (sizeof(T) == 8) {
    return n * (n - 1) / 2;
  } else {
    return n * (n - 1) + 7 * n;
  }
}

// Each side's 24 KiB: one row per item.
struct alignas(64) matrix {
  double m[64][48];
};

inline void touch_row(matrix& mx, std::uint64_t i) {
  double* row = mx.m[i & 63];
  const double x = static_cast<double>(i & 1023) * (1.0 / 1024);
  for (int j = 0; j < 48; ++j) row[j] = row[j] * 0.5 + x;
}

// ---------------------------------------------------------------- the two threads

enum class cmd : int { line, rep, stop };

struct shared_state {
  alignas(128) std::atomic<std::int64_t> seq{0};  // producer: command number
  cmd what = cmd::stop;
  alignas(128) std::atomic<std::int64_t> ack{0};  // consumer: command done
  std::int64_t end_ns = 0;                        // consumer: clock at its last pop
  std::uint64_t sum = 0;                          // consumer: what it received
  alignas(128) std::atomic<std::uint64_t> line{0};
  alignas(128) char pad[1];
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(mote_bench::clock::now().time_since_epoch()).count();
}

struct test {
  std::string kind;          // comm, block, matrix, matrixblock, latency, line
  std::size_t item = 8;      // bytes
  std::size_t capacity = 512;
  bool flush = false;
  std::uint64_t items = 0;   // items (throughput) or round trips (latency, line)
};

// One-way cache-line transfer: round trips / 2 on st.line.
double line_producer(shared_state& st, std::int64_t rounds) {
  const auto t0 = mote_bench::clock::now();
  for (std::uint64_t k = 1; k <= static_cast<std::uint64_t>(rounds); ++k) {
    st.line.store(2 * k - 1, std::memory_order_release);
    while (st.line.load(std::memory_order_acquire) != 2 * k) {
    }
  }
  return 1e9 * mote_bench::seconds_between(t0, mote_bench::clock::now()) / (2.0 * static_cast<double>(rounds));
}
void line_consumer(shared_state& st, std::int64_t rounds) {
  for (std::uint64_t k = 1; k <= static_cast<std::uint64_t>(rounds); ++k) {
    while (st.line.load(std::memory_order_acquire) != 2 * k - 1) {
    }
    st.line.store(2 * k, std::memory_order_release);
  }
}

constexpr std::int64_t kLineRounds = 20000;

template <class T>
void run_test(const mote_bench::options& o, const std::string& name, const test& t) {
  queue<T> q1(t.capacity);
  queue<T> q2(t.capacity);  // the way back of the latency test
  shared_state st;
  mote_bench::record r{"streams", name, kRuntime, o.workers, t.kind == "comm" || t.kind == "block" ||
                                                              t.kind == "matrix" || t.kind == "matrixblock"
                                                          ? "M items/s"
                                                          : "ns",
                       {}, 0, {}};
  std::atomic<int> pinned{0};
  std::string error;
  std::vector<double> line_before, line_after;
  const std::uint64_t n = t.items;
  constexpr std::size_t kBlock = 64;

  std::thread consumer([&] {
    if (pin_to_cpu(1)) pinned.fetch_add(1);
    auto mx = std::make_unique<matrix>();
    std::vector<T> buf(kBlock);
    std::int64_t seen = 0;
    for (;;) {
      std::int64_t s;
      while ((s = st.seq.load(std::memory_order_acquire)) == seen) {
        cpu_relax();
      }
      seen = s;
      if (st.what == cmd::stop) break;
      if (st.what == cmd::line) {
        line_consumer(st, kLineRounds);
      } else {
        std::uint64_t sum = 0;
        if (t.kind == "comm") {
          for (std::uint64_t i = 0; i < n; ++i) sum += item_key(q1.pop());
        } else if (t.kind == "matrix") {
          for (std::uint64_t i = 0; i < n; ++i) {
            const std::uint64_t k = item_key(q1.pop());
            touch_row(*mx, k);
            sum += k;
          }
        } else if (t.kind == "block" || t.kind == "matrixblock") {
          const bool work = t.kind == "matrixblock";
          for (std::uint64_t got = 0; got < n;) {
            const std::size_t k = q1.pop_block(buf.data(), kBlock);
            for (std::size_t j = 0; j < k; ++j) {
              const std::uint64_t key = item_key(buf[j]);
              if (work) touch_row(*mx, key);
              sum += key;
            }
            got += k;
          }
        } else {  // latency: send every item back
          for (std::uint64_t i = 0; i < n; ++i) {
            T v = q1.pop();
            sum += item_key(v);
            q2.push(v);
            if (t.flush) q2.flush();
          }
        }
        st.end_ns = now_ns();
        st.sum = sum;
        mote_bench::do_not_optimize(mx->m[7][7]);
      }
      st.ack.store(seen, std::memory_order_release);
    }
  });

  std::thread producer([&] {
    if (pin_to_cpu(0)) pinned.fetch_add(1);
    auto mx = std::make_unique<matrix>();
    std::vector<T> buf(kBlock);
    std::int64_t seq = 0;
    auto command = [&](cmd c) {
      st.what = c;
      st.seq.store(++seq, std::memory_order_release);
    };
    auto wait_ack = [&] {
      while (st.ack.load(std::memory_order_acquire) != seq) {
        cpu_relax();
      }
    };
    auto line = [&] {
      st.line.store(0, std::memory_order_relaxed);
      command(cmd::line);
      const double ns = line_producer(st, kLineRounds);
      wait_ack();
      return ns;
    };
    for (int i = 0; i < 3; ++i) line_before.push_back(line());

    // One repetition: the sample (M items/s or ns).
    auto rep = [&]() -> double {
      command(cmd::rep);
      const std::int64_t t0 = now_ns();
      double latency = 0;
      if (t.kind == "comm") {
        for (std::uint64_t i = 0; i < n; ++i) q1.push(make_item<T>(i));
        q1.flush();
      } else if (t.kind == "matrix") {
        for (std::uint64_t i = 0; i < n; ++i) {
          touch_row(*mx, i);
          q1.push(make_item<T>(i));
        }
        q1.flush();
      } else if (t.kind == "block" || t.kind == "matrixblock") {
        const bool work = t.kind == "matrixblock";
        for (std::uint64_t b = 0; b < n; b += kBlock) {
          for (std::size_t j = 0; j < kBlock; ++j) {
            if (work) touch_row(*mx, b + j);
            buf[j] = make_item<T>(b + j);
          }
          q1.push_block(buf.data(), kBlock);
        }
        q1.flush();
      } else {  // latency
        for (std::uint64_t i = 0; i < n; ++i) {
          q1.push(make_item<T>(i));
          if (t.flush) q1.flush();
          const T back = q2.pop();
          if (item_key(back) != item_key(make_item<T>(i)) && error.empty()) error = "latency: wrong item back";
        }
        latency = static_cast<double>(now_ns() - t0) / (2.0 * static_cast<double>(n));
      }
      wait_ack();
      if (st.sum != expected_sum<T>(n) && error.empty()) {
        error = "consumer received sum " + std::to_string(st.sum) + ", expected " +
                std::to_string(expected_sum<T>(n));
      }
      if (t.kind == "latency") return latency;
      return static_cast<double>(n) / static_cast<double>(st.end_ns - t0) * 1e3;  // items per us = M/s
    };

    if (t.kind == "line") {
      for (int i = 0; i < o.reps; ++i) r.samples.push_back(line());
    } else {
      double warm_ms = 0;
      double spent_ms = 0;
      for (int i = 0; i < o.warmup + o.reps && error.empty(); ++i) {
        const bool warm = i < o.warmup;
        if (warm && o.budget_ms > 0 && warm_ms > o.budget_ms / 2) continue;
        const auto t0 = mote_bench::clock::now();
        const double v = rep();
        const double ms = 1e3 * mote_bench::seconds_between(t0, mote_bench::clock::now());
        if (warm) {
          warm_ms += ms;
          continue;
        }
        r.samples.push_back(v);
        spent_ms += ms;
        if (o.budget_ms > 0 && spent_ms >= o.budget_ms) break;
      }
    }
    line_after.push_back(line());
    command(cmd::stop);
  });
  producer.join();
  consumer.join();
  if (!error.empty()) {
    std::fprintf(stderr, "bench: %s on %s: %s\n", name.c_str(), kRuntime, error.c_str());
    std::exit(1);
  }
  std::sort(line_before.begin(), line_before.end());
  r.result = t.kind == "line" ? 0 : static_cast<std::int64_t>(expected_sum<T>(n) & 0x7FFFFFFFFFFFFFFFull);
  r.extra.add("queue", queue<T>::kType)
      .add("queue_in_use", q1.in_use())
      .add("capacity", static_cast<std::int64_t>(t.capacity))
      .add("item_bytes", static_cast<std::int64_t>(t.item))
      .add(t.kind == "latency" || t.kind == "line" ? "round_trips" : "items", static_cast<std::int64_t>(n))
      .add("block", std::int64_t{t.kind == "block" || t.kind == "matrixblock" ? 64 : 1})
      .add("flush", std::int64_t{t.flush ? 1 : 0})
      .add("line_ns", line_before[1])
      .add("line_ns_after", line_after[0])
      .add("pinned", std::int64_t{pinned.load() == 2 ? 1 : 0});
  mote_bench::emit(r);
}

test parse_test(const mote_bench::options& o, const std::string& name) {
  test t;
  std::size_t at = 0;
  bool first = true;
  while (at <= name.size()) {
    const std::size_t cut = std::min(name.find('_', at), name.size());
    const std::string tok = name.substr(at, cut - at);
    at = cut + 1;
    if (first) {
      t.kind = tok;
      first = false;
    } else if (tok == "flush") {
      t.flush = true;
    } else if (!tok.empty() && tok[0] == 'c') {
      const long c = mote_bench::parse_long(tok.c_str() + 1, "--kernel capacity");
      if (c < 2 || c > (1L << 24)) mote_bench::usage_error("--kernel", name.c_str());
      t.capacity = static_cast<std::size_t>(c);
    } else {
      const long s = mote_bench::parse_long(tok.c_str(), "--kernel item size");
      if (s != 8 && s != 64) mote_bench::usage_error("--kernel (item size 8 or 64)", name.c_str());
      t.item = static_cast<std::size_t>(s);
    }
  }
  long items = 0;
  if (t.kind == "comm" || t.kind == "block") {
    items = t.item == 8 ? 1L << 21 : 1L << 20;
  } else if (t.kind == "matrix" || t.kind == "matrixblock") {
    items = 1L << 19;
  } else if (t.kind == "latency") {
    items = 1L << 15;
  } else if (t.kind == "line") {
    items = kLineRounds;
  } else {
    mote_bench::usage_error("--kernel", name.c_str());
  }
  if ((t.kind == "block" || t.kind == "matrixblock") && !queue<std::uint64_t>::kBlocks) {
    mote_bench::usage_error("--kernel (this queue has no block operations)", name.c_str());
  }
  items = mote_bench::option_value(o, "--items", items);
  if (items < 64) mote_bench::usage_error("--items", name.c_str());
  t.items = static_cast<std::uint64_t>(items) / 64 * 64;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  o.workers = 2;  // always the two pinned threads
  if (std::thread::hardware_concurrency() < 2) {
    std::fprintf(stderr, "bench: the queue benchmarks need two CPUs\n");
    return 2;
  }
  std::vector<std::string> names;
  if (!o.kernel.empty()) {
    names.push_back(o.kernel);
  } else {
    names = {"line", "comm_8", "comm_64", "matrix_8", "matrix_64", "latency_8", "latency_8_flush"};
    if (queue<std::uint64_t>::kBlocks) {
      for (const char* k : {"block_8", "block_64", "matrixblock_64"}) names.emplace_back(k);
    }
  }
  for (const std::string& name : names) {
    const test t = parse_test(o, name);
    if (t.item == 8) {
      run_test<std::uint64_t>(o, name, t);
    } else {
      run_test<item64>(o, name, t);
    }
  }
  return 0;
}
