// Parallel loops (include/mote/loops.hpp): mote::parallel_for in both body
// forms, mote::parallel_reduce and mote::per_worker.
//
// Every loop is checked against a serial run: each iteration visited exactly
// once (a counter per index), what the body computed, the sub-ranges it was
// given (never empty, never past the grain, never outside the range), the
// runtime whose workers ran it. Index types: every integer width, signed and
// unsigned, near their limits, and random-access iterators (vector, deque,
// raw pointers). Then empty and huge ranges, exceptions, nesting (to depth 3,
// past the depth limit, in task_group tasks and join branches, from threads
// outside the runtime), fake machine shapes (packages x cores x hardware
// threads), per_worker, and random loops checked against serial runs. Then
// bodies that wait for tasks their loop's starter spawned before the loop
// (a deadlock unless the starter keeps them available while it waits for its
// loop's end), the starter's context in every body (group binding, data-flow
// nesting), and loops whose group is cancelled (no chunk starts on a worker
// that has seen it).
//
// A random round's seed is printed on failure; MOTE_TEST_SEED replays a test.
// Nothing here depends on timing: a loop that should stop early (a body that
// throws) is only asserted to stop where stopping is certain.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <concepts>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "mote/loops.hpp"
#include "mote/mote.hpp"
#include "test_util.hpp"

namespace {

using mote_test::scaled;
using mote_test::workers;

constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// ---- Naming what was running when a test hung ---------------------------------
//
// note() records the loop in flight; a watchdog thread (started by the first
// note) prints it and aborts when no note has come for minutes (or for the
// note's own limit: a scenario that ends in milliseconds unless it
// deadlocks), so that a loop that never ends is a failure that names itself,
// not a silent timeout.

// The last note, for the crash handler, which must not lock: a plain array.
char crash_text[600];
struct sigaction previous_action[3];
constexpr int kCrashSignals[3] = {SIGFPE, SIGSEGV, SIGBUS};

// Names the loop in flight, then puts the previous handler back (a
// sanitizer's, or the default) and returns: the fault recurs under it.
void on_crash(int sig) {
  const char head[] = "\ntest_loops: crashed while running: ";
  (void)!::write(2, head, sizeof head - 1);
  (void)!::write(2, crash_text, ::strnlen(crash_text, sizeof crash_text));
  (void)!::write(2, "\n", 1);
  for (int k = 0; k < 3; ++k) {
    if (kCrashSignals[k] == sig) ::sigaction(sig, &previous_action[k], nullptr);
  }
}

class watchdog {
 public:
  static watchdog& get() {
    static watchdog w;  // destroyed at exit: stops and joins its thread
    return w;
  }
  // limit_s > 0: the next note must come within limit_s seconds.
  void note(const std::string& what, int limit_s) {
    std::lock_guard<std::mutex> lock(mutex_);
    text_ = what;
    std::snprintf(crash_text, sizeof crash_text, "%s", what.c_str());
    limit_s_ = limit_s > 0 ? limit_s : kDefaultLimit;
    ++progress_;
  }
  ~watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  watchdog() : thread_([this] { watch(); }) {
    struct sigaction action {};
    action.sa_handler = on_crash;
    sigemptyset(&action.sa_mask);
    for (int k = 0; k < 3; ++k) ::sigaction(kCrashSignals[k], &action, &previous_action[k]);
  }
  static constexpr int kDefaultLimit = mote_test::kSanitized ? 240 : 120;

  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    std::uint64_t last = progress_;
    int quiet = 0;
    while (!stop_) {
      wake_.wait_for(lock, std::chrono::seconds(1));
      if (stop_) return;
      if (progress_ != last) {
        last = progress_;
        quiet = 0;
      } else if (++quiet >= limit_s_) {
        std::fprintf(stderr, "test_loops: no progress for %d s; in flight: %s\n", limit_s_,
                     text_.c_str());
        std::fflush(stderr);
        std::abort();
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::uint64_t progress_ = 0;
  int limit_s_ = kDefaultLimit;
  std::string text_;
  std::thread thread_;  // last: starts once the rest is made
};

void note(const std::string& what, int limit_s = 0) { watchdog::get().note(what, limit_s); }

// ---- The test's own index arithmetic (independent of the library's) -----------

template <class I>
std::uint64_t distance_of(const I& first, const I& i) {
  if constexpr (std::integral<I>) {
    using U = std::make_unsigned_t<I>;
    return static_cast<std::uint64_t>(static_cast<U>(static_cast<U>(i) - static_cast<U>(first)));
  } else {
    return static_cast<std::uint64_t>(i - first);
  }
}

template <class I>
I advanced(const I& first, std::uint64_t k) {
  if constexpr (std::integral<I>) {
    using U = std::make_unsigned_t<I>;
    return static_cast<I>(static_cast<U>(static_cast<U>(first) + static_cast<U>(k)));
  } else {
    return first + static_cast<std::iter_difference_t<I>>(k);
  }
}

template <class I>
std::uint64_t size_of(const I& first, const I& last) {
  return first < last ? distance_of(first, last) : 0;
}

// What index i stands for: its own bits (integers), what it points at (iterators).
template <class I>
std::uint64_t value_at(const I& i) {
  if constexpr (std::integral<I>) {
    return static_cast<std::uint64_t>(static_cast<std::make_unsigned_t<I>>(i));
  } else {
    return static_cast<std::uint64_t>(*i);
  }
}

template <class I>
std::string show(const I& first, const I& i) {
  if constexpr (std::integral<I>) {
    if constexpr (std::is_signed_v<I>)
      return std::to_string(static_cast<long long>(i));
    else
      return std::to_string(static_cast<unsigned long long>(i));
  } else {
    return "first+" + std::to_string(static_cast<long long>(i - first));
  }
}

// The two entry points with an optional grain (0: none, the adaptive batch).
template <class I, class F>
void pfor(I first, I last, std::uint64_t g, F&& body) {
  if (g == 0) {
    mote::parallel_for(first, last, std::forward<F>(body));
  } else {
    mote::parallel_for(first, last, mote::grain(g), std::forward<F>(body));
  }
}

template <class I, class T, class B, class C>
T preduce(I first, I last, std::uint64_t g, T identity, B&& body, C&& combine) {
  if (g == 0)
    return mote::parallel_reduce(first, last, std::move(identity), std::forward<B>(body),
                                 std::forward<C>(combine));
  return mote::parallel_reduce(first, last, mote::grain(g), std::move(identity),
                               std::forward<B>(body), std::forward<C>(combine));
}

std::string grain_name(std::uint64_t g) { return g == 0 ? std::string("none") : std::to_string(g); }

enum class form { each, ranges, reduce };
const char* form_name(form f) {
  switch (f) {
    case form::each:
      return "parallel_for body(i)";
    case form::ranges:
      return "parallel_for body(b,e)";
    case form::reduce:
      return "parallel_reduce";
  }
  return "?";
}

// ---- One loop against its serial run ------------------------------------------

// What the bodies of one loop over n iterations did.
struct ledger {
  explicit ledger(std::uint64_t n) : visits(n), out(n) {}
  std::vector<std::atomic<std::uint32_t>> visits;
  std::vector<std::uint64_t> out;  // written by the first visit of an index only
  std::atomic<long> calls{0};
  std::atomic<long> outside{0};      // an index or sub-range outside [first, last)
  std::atomic<long> empty_range{0};  // a sub-range with begin >= end
  std::atomic<long> over_grain{0};   // a sub-range longer than the grain
  std::atomic<long> off_runtime{
      0};  // a body run by a thread that is not a worker of the expected runtime
  std::atomic<long> not_identity{0};  // parallel_reduce: a block not started from the identity

  void visit(std::uint64_t k, std::uint64_t value) {
    if (k >= visits.size()) {
      outside.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (visits[k].fetch_add(1, std::memory_order_relaxed) == 0) out[k] = mix(value);
  }
  void check_runtime(const mote::runtime* expect) {
    if (expect != nullptr && mote::runtime::current() != expect)
      off_runtime.fetch_add(1, std::memory_order_relaxed);
  }
};

template <class I>
testing::AssertionResult verify(const ledger& l, const I& first, std::uint64_t n) {
  auto fail = [&] { return testing::AssertionFailure(); };
  if (l.outside.load() != 0)
    return fail() << l.outside.load() << " indices or sub-ranges outside the range";
  if (l.empty_range.load() != 0)
    return fail() << l.empty_range.load() << " empty or reversed sub-ranges";
  if (l.over_grain.load() != 0)
    return fail() << l.over_grain.load() << " sub-ranges longer than the grain";
  if (l.off_runtime.load() != 0)
    return fail() << l.off_runtime.load() << " bodies ran off the runtime's workers";
  if (l.not_identity.load() != 0)
    return fail() << l.not_identity.load() << " blocks not started from the identity";
  for (std::uint64_t k = 0; k < n; ++k) {
    const std::uint32_t v = l.visits[k].load(std::memory_order_relaxed);
    if (v != 1) {
      return fail() << "iteration " << k << " (index " << show(first, advanced(first, k))
                    << ") ran " << v << " times";
    }
    if (l.out[k] != mix(value_at(advanced(first, k)))) {
      return fail() << "iteration " << k << " computed the wrong value";
    }
  }
  return testing::AssertionSuccess();
}

// Runs one parallel_for on the calling thread and checks it. expect: the
// runtime whose workers must run the bodies (nullptr: any).
template <class I>
testing::AssertionResult check_for(I first, I last, std::uint64_t g, bool ranges,
                                   const mote::runtime* expect) {
  const std::uint64_t n = size_of(first, last);
  ledger l(n);
  if (ranges) {
    pfor(first, last, g, [&](I b, I e) {
      l.calls.fetch_add(1, std::memory_order_relaxed);
      l.check_runtime(expect);
      if (!(b < e)) {
        l.empty_range.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      if (b < first || last < e) {
        l.outside.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      const std::uint64_t kb = distance_of(first, b);
      const std::uint64_t ke = distance_of(first, e);
      if (g != 0 && ke - kb > g) l.over_grain.fetch_add(1, std::memory_order_relaxed);
      std::uint64_t k = kb;
      for (I i = b; i != e; ++i, ++k) l.visit(k, value_at(i));
    });
  } else {
    pfor(first, last, g, [&](I i) {
      l.check_runtime(expect);
      if (i < first || !(i < last)) {
        l.outside.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      l.visit(distance_of(first, i), value_at(i));
    });
  }
  if (n == 0 && l.calls.load() != 0)
    return testing::AssertionFailure() << "an empty range called its body";
  return verify(l, first, n);
}

// The value of the test reductions: an affine map x -> a*x + b modulo 2^64
// (composition is associative but not commutative, so the result shows the
// order of the blocks) and a plain sum.
struct fold {
  std::uint64_t a = 1;
  std::uint64_t b = 0;
  std::uint64_t sum = 0;
  bool operator==(const fold&) const = default;
};
fold then(const fold& x, const fold& y) { return fold{y.a * x.a, y.a * x.b + y.b, x.sum + y.sum}; }
fold step(const fold& acc, std::uint64_t v) {
  return then(acc, fold{mix(v) | 1, mix(v ^ 0x5555), v});
}

template <class I>
testing::AssertionResult check_reduce(I first, I last, std::uint64_t g,
                                      const mote::runtime* expect) {
  const std::uint64_t n = size_of(first, last);
  ledger l(n);
  std::vector<std::atomic<std::uint64_t>> block_at(n);  // the length of the block that starts at k
  const fold r = preduce(
      first, last, g, fold{},
      [&](I b, I e, fold acc) {
        l.calls.fetch_add(1, std::memory_order_relaxed);
        l.check_runtime(expect);
        if (!(acc == fold{})) l.not_identity.fetch_add(1, std::memory_order_relaxed);
        if (!(b < e)) {
          l.empty_range.fetch_add(1, std::memory_order_relaxed);
          return acc;
        }
        if (b < first || last < e) {
          l.outside.fetch_add(1, std::memory_order_relaxed);
          return acc;
        }
        const std::uint64_t kb = distance_of(first, b);
        const std::uint64_t ke = distance_of(first, e);
        if (g != 0 && ke - kb > g) l.over_grain.fetch_add(1, std::memory_order_relaxed);
        block_at[kb].fetch_add(ke - kb, std::memory_order_relaxed);
        std::uint64_t k = kb;
        for (I i = b; i != e; ++i, ++k) {
          l.visit(k, value_at(i));
          acc = step(acc, value_at(i));
        }
        return acc;
      },
      [](fold x, fold y) { return then(x, y); });
  testing::AssertionResult v = verify(l, first, n);
  if (!v) return v;
  if (n == 0) {
    if (l.calls.load() != 0) return testing::AssertionFailure() << "an empty range called its body";
    if (!(r == fold{}))
      return testing::AssertionFailure() << "an empty range did not return the identity";
    return testing::AssertionSuccess();
  }
  fold serial;
  for (std::uint64_t k = 0; k < n; ++k) serial = step(serial, value_at(advanced(first, k)));
  if (r.sum != serial.sum)
    return testing::AssertionFailure() << "sum " << r.sum << ", serially " << serial.sum;
  if (!(r == serial))
    return testing::AssertionFailure() << "the blocks were not combined in range order";
  // The blocks tile the range: all of one length (the grain when given)
  // but the last.
  const std::uint64_t len = block_at[0].load();
  if (len == 0)
    return testing::AssertionFailure() << "no block starts at the range's first iteration";
  if (g != 0 && len != std::min(g, n)) {
    return testing::AssertionFailure() << "blocks of " << len << " iterations with grain " << g;
  }
  for (std::uint64_t k = 0; k < n; ++k) {
    const std::uint64_t want = k % len == 0 ? std::min(len, n - k) : 0;
    if (block_at[k].load() != want) {
      return testing::AssertionFailure() << "a block of " << block_at[k].load() << " iterations at "
                                         << k << " (blocks of " << len << ")";
    }
  }
  return testing::AssertionSuccess();
}

template <class I>
testing::AssertionResult check_loop(form f, I first, I last, std::uint64_t g,
                                    const mote::runtime* expect) {
  if (f == form::reduce) return check_reduce(first, last, g, expect);
  return check_for(first, last, g, f == form::ranges, expect);
}

template <class I>
std::string describe(const char* type, form f, const I& first, const I& last, std::uint64_t g) {
  std::ostringstream s;
  s << form_name(f) << " over " << type << " [" << show(first, first) << ", " << show(first, last)
    << ") (" << size_of(first, last) << " iterations), grain " << grain_name(g);
  return s.str();
}

// ---- Random ranges ----------------------------------------------------------------

// 0..max, small values far more likely than large ones (log-uniform), with
// 0, 1 and max themselves often.
std::uint64_t log_uniform(std::mt19937_64& rng, std::uint64_t max) {
  switch (rng() % 16) {
    case 0:
      return 0;
    case 1:
      return std::min<std::uint64_t>(1, max);
    case 2:
      return max;
    default:
      break;
  }
  const int bits = static_cast<int>(rng() % static_cast<std::uint64_t>(std::bit_width(max) + 1));
  const std::uint64_t mask = bits >= 64 ? kU64Max : (std::uint64_t{1} << bits) - 1;
  return std::min(rng() & mask, max);
}

// A grain for a loop of n iterations: none (often), 1, about n, far more
// than n, the largest there is, or anything in between.
std::uint64_t random_grain(std::mt19937_64& rng, std::uint64_t n) {
  switch (rng() % 10) {
    case 0:
    case 1:
    case 2:
      return 0;
    case 3:
      return 1;
    case 4:
      return std::max<std::uint64_t>(1, n + (rng() % 3) - 1);
    case 5:
      return rng() % 2 == 0 ? kU64Max : (std::uint64_t{1} << 62) + (rng() % 3);
    default:
      return 1 + log_uniform(rng, std::max<std::uint64_t>(1, n) * 2);
  }
}

// A random range of an integer type: at the bottom or the top of the type,
// around zero or anywhere; sometimes reversed or empty.
template <std::integral I>
std::pair<I, I> random_range(std::mt19937_64& rng, std::uint64_t max_size) {
  using U = std::make_unsigned_t<I>;
  const std::uint64_t span = static_cast<std::uint64_t>(std::numeric_limits<U>::max());
  const std::uint64_t size = log_uniform(rng, std::min(max_size, span));
  const std::uint64_t room = span - size;  // first's distance from the type's minimum: 0..room
  std::uint64_t off = 0;
  switch (rng() % 4) {
    case 0:
      off = 0;
      break;
    case 1:
      off = room;
      break;
    case 2: {
      const std::uint64_t zero = distance_of(std::numeric_limits<I>::min(), I{0});
      off = std::min(room, zero > size / 2 ? zero - size / 2 : 0);
      break;
    }
    default:
      off = room == kU64Max ? rng() : rng() % (room + 1);
      break;
  }
  I first = advanced(std::numeric_limits<I>::min(), off);
  I last = advanced(first, size);
  if (rng() % 16 == 0) std::swap(first, last);
  if (rng() % 32 == 0) last = first;
  return {first, last};
}

// Runs body(rt) on one of the runtimes: inside rt.run (a worker starts the
// loop), or, for rts == nullptr entries, on this thread (the default runtime).
struct runtimes {
  explicit runtimes(std::initializer_list<unsigned> counts) {
    for (unsigned c : counts) all.push_back(std::make_unique<mote::runtime>(workers(c)));
  }
  std::vector<std::unique_ptr<mote::runtime>> all;
};

template <class I>
void random_integer_loops(const char* type, int rounds, std::uint64_t max_size) {
  runtimes rts{1, 2, 4};
  std::mt19937_64 seeds(mote_test::test_seed() ^ mix(std::hash<std::string>()(type)));
  for (int round = 0; round < rounds; ++round) {
    const std::uint64_t seed = seeds();
    std::mt19937_64 rng(seed);
    const std::pair<I, I> range = random_range<I>(rng, max_size);
    const I first = range.first;
    const I last = range.second;
    const std::uint64_t g = random_grain(rng, size_of(first, last));
    const form f = static_cast<form>(rng() % 3);
    const std::size_t which = rng() % (rts.all.size() + 1);
    const std::string what = describe(type, f, first, last, g);
    note(what + ", seed " + std::to_string(seed));
    testing::AssertionResult r = testing::AssertionSuccess();
    if (which == rts.all.size()) {
      r = check_loop(f, first, last, g, &mote::runtime::default_runtime());
    } else {
      mote::runtime& rt = *rts.all[which];
      r = rt.run([&] { return check_loop(f, first, last, g, &rt); });
    }
    ASSERT_TRUE(r) << what << " on "
                   << (which == rts.all.size()
                           ? std::string("the default runtime")
                           : std::to_string(rts.all[which]->num_workers()) + " workers")
                   << ", seed " << seed;
  }
}

const int kTypeRounds = static_cast<int>(scaled(720, 24));
constexpr std::uint64_t kTypeMaxSize = 20000;

TEST(LoopsIndexTypes, Int8) {
  random_integer_loops<std::int8_t>("int8", kTypeRounds, kTypeMaxSize);
}
TEST(LoopsIndexTypes, Uint8) {
  random_integer_loops<std::uint8_t>("uint8", kTypeRounds, kTypeMaxSize);
}
TEST(LoopsIndexTypes, Int16) {
  random_integer_loops<std::int16_t>("int16", kTypeRounds, kTypeMaxSize);
}
TEST(LoopsIndexTypes, Uint16) {
  random_integer_loops<std::uint16_t>("uint16", kTypeRounds, kTypeMaxSize);
}
TEST(LoopsIndexTypes, Int32) {
  random_integer_loops<std::int32_t>("int32", kTypeRounds, kTypeMaxSize);
}
TEST(LoopsIndexTypes, Uint32) {
  random_integer_loops<std::uint32_t>("uint32", kTypeRounds, kTypeMaxSize);
}
TEST(LoopsIndexTypes, Int64) {
  random_integer_loops<std::int64_t>("int64", kTypeRounds, kTypeMaxSize);
}
TEST(LoopsIndexTypes, Uint64) {
  random_integer_loops<std::uint64_t>("uint64", kTypeRounds, kTypeMaxSize);
}
TEST(LoopsIndexTypes, SizeT) {
  random_integer_loops<std::size_t>("size_t", kTypeRounds, kTypeMaxSize);
}
TEST(LoopsIndexTypes, LongLong) {
  random_integer_loops<long long>("long long", kTypeRounds, kTypeMaxSize);
}
TEST(LoopsIndexTypes, UnsignedLongLong) {
  random_integer_loops<unsigned long long>("unsigned long long", kTypeRounds, kTypeMaxSize);
}

// Random-access iterators over a container of n random values.
template <class Container, class Iter, class Begin>
void random_iterator_loops(const char* type, int rounds, Begin begin_of) {
  const std::size_t n = static_cast<std::size_t>(kTypeMaxSize);
  std::mt19937_64 fill(mote_test::test_seed());
  Container c;
  for (std::size_t i = 0; i < n; ++i)
    c.push_back(static_cast<typename Container::value_type>(fill()));
  runtimes rts{1, 2, 4};
  std::mt19937_64 seeds(mote_test::test_seed() ^ mix(std::hash<std::string>()(type)));
  for (int round = 0; round < rounds; ++round) {
    const std::uint64_t seed = seeds();
    std::mt19937_64 rng(seed);
    std::uint64_t a = log_uniform(rng, n);
    std::uint64_t b =
        rng() % 4 == 0 ? rng() % (n + 1) : std::min<std::uint64_t>(n, a + log_uniform(rng, n));
    if (rng() % 3 == 0) a = 0;
    const Iter base = begin_of(c);
    const Iter first = base + static_cast<std::ptrdiff_t>(a);
    const Iter last = base + static_cast<std::ptrdiff_t>(b);  // may be before first: empty
    const std::uint64_t g = random_grain(rng, size_of(first, last));
    const form f = static_cast<form>(rng() % 3);
    const std::size_t which = rng() % (rts.all.size() + 1);
    const std::string what = describe(type, f, first, last, g);
    note(what + ", seed " + std::to_string(seed));
    testing::AssertionResult r = testing::AssertionSuccess();
    if (which == rts.all.size()) {
      r = check_loop(f, first, last, g, &mote::runtime::default_runtime());
    } else {
      mote::runtime& rt = *rts.all[which];
      r = rt.run([&] { return check_loop(f, first, last, g, &rt); });
    }
    ASSERT_TRUE(r) << what << ", seed " << seed;
  }
}

TEST(LoopsIndexTypes, VectorIterator) {
  using V = std::vector<std::uint32_t>;
  random_iterator_loops<V, V::iterator>("vector<uint32>::iterator", kTypeRounds,
                                        [](V& v) { return v.begin(); });
}
TEST(LoopsIndexTypes, VectorConstIterator) {
  using V = std::vector<std::uint64_t>;
  random_iterator_loops<V, V::const_iterator>("vector<uint64>::const_iterator", kTypeRounds,
                                              [](V& v) { return v.cbegin(); });
}
TEST(LoopsIndexTypes, RawPointer) {
  using V = std::vector<std::uint32_t>;
  random_iterator_loops<V, std::uint32_t*>("uint32*", kTypeRounds, [](V& v) { return v.data(); });
}
TEST(LoopsIndexTypes, ConstRawPointer) {
  using V = std::vector<std::int16_t>;
  random_iterator_loops<V, const std::int16_t*>(
      "const int16*", kTypeRounds, [](V& v) { return static_cast<const std::int16_t*>(v.data()); });
}
TEST(LoopsIndexTypes, DequeIterator) {
  using V = std::deque<std::uint32_t>;
  random_iterator_loops<V, V::iterator>("deque<uint32>::iterator", kTypeRounds,
                                        [](V& v) { return v.begin(); });
}

// ---- Edges: empty, one element, type limits, every kind of grain ------------------

// Every form and a list of grains (including none, 1, the size and beyond,
// and the largest) on 1, 2 and 4 workers and the default runtime.
template <class I>
void edge_range(runtimes& rts, const char* type, I first, I last) {
  const std::uint64_t n = size_of(first, last);
  const std::uint64_t grains[] = {0,
                                  1,
                                  2,
                                  3,
                                  7,
                                  64,
                                  n > 1 ? n - 1 : 1,
                                  std::max<std::uint64_t>(n, 1),
                                  n + 1,
                                  1000000,
                                  std::uint64_t{1} << 62,
                                  std::uint64_t{1} << 63,
                                  kU64Max};
  for (std::uint64_t g : grains) {
    for (form f : {form::each, form::ranges, form::reduce}) {
      const std::string what = describe(type, f, first, last, g);
      note(what);
      for (auto& rt : rts.all) {
        EXPECT_TRUE(rt->run([&] { return check_loop(f, first, last, g, rt.get()); }))
            << what << " on " << rt->num_workers() << " workers";
      }
      EXPECT_TRUE(check_loop(f, first, last, g, &mote::runtime::default_runtime()))
          << what << " from a thread outside the runtime";
    }
  }
}

TEST(LoopsEdges, NearTheLimitsOfEveryType) {
  runtimes rts{1, 2, 4};
  using L8 = std::numeric_limits<std::int8_t>;
  using L16 = std::numeric_limits<std::int16_t>;
  using L32 = std::numeric_limits<std::int32_t>;
  using L64 = std::numeric_limits<std::int64_t>;
  edge_range<std::int8_t>(rts, "int8", L8::min(), L8::max());  // [-128, 127)
  edge_range<std::int8_t>(rts, "int8", -1, 0);
  edge_range<std::uint8_t>(rts, "uint8", 0, 255);
  edge_range<std::uint8_t>(rts, "uint8", 254, 255);
  edge_range<std::int16_t>(rts, "int16", L16::min(), static_cast<std::int16_t>(L16::min() + 1000));
  edge_range<std::int16_t>(rts, "int16", static_cast<std::int16_t>(L16::max() - 999), L16::max());
  edge_range<std::uint16_t>(rts, "uint16", 65535 - 1000, 65535);
  edge_range<std::int32_t>(rts, "int32", L32::min(), L32::min() + 1000);
  edge_range<std::int32_t>(rts, "int32", L32::max() - 1000, L32::max());
  edge_range<std::int32_t>(rts, "int32", -500, 501);
  edge_range<std::uint32_t>(rts, "uint32", 0xffffffffu - 1000, 0xffffffffu);
  edge_range<std::int64_t>(rts, "int64", L64::max() - 1000, L64::max());
  edge_range<std::int64_t>(rts, "int64", L64::min(), L64::min() + 1000);
  edge_range<std::int64_t>(rts, "int64", -1, 1);
  edge_range<std::uint64_t>(rts, "uint64", kU64Max - 1000, kU64Max);
  edge_range<std::uint64_t>(rts, "uint64", kU64Max - 1, kU64Max);  // one element at the top
  edge_range<std::size_t>(rts, "size_t", 0, 1);                    // one element
  edge_range<long long>(rts, "long long", -7, 6);                  // 13: divides by nothing here
  std::vector<int> v(1001, 5);
  edge_range(rts, "vector<int>::iterator", v.begin(), v.end());
  edge_range(rts, "vector<int>::iterator", v.begin() + 1000, v.end());
  edge_range<const int*>(rts, "const int*", v.data(), v.data() + 997);
}

TEST(LoopsEdges, EmptyAndReversedRangesCallNothingAndReduceToTheIdentity) {
  runtimes rts{1, 2};
  std::atomic<long> calls{0};
  auto each = [&](long) { calls.fetch_add(1); };
  auto ranges = [&](long, long) { calls.fetch_add(1); };
  auto body = [&](long, long, long acc) {
    calls.fetch_add(1);
    return acc + 1;
  };
  auto plus = [](long a, long b) { return a + b; };
  constexpr long kMin = std::numeric_limits<long>::min();
  constexpr long kMax = std::numeric_limits<long>::max();
  const std::pair<long, long> empty[] = {{-5, -5},     {0, 0},       {7, 6},
                                         {kMin, kMin}, {kMax, kMax}, {kMax, kMin},
                                         {0, kMin},    {kMax, 0},    {1, -1}};
  auto all = [&] {
    for (const auto& [first, last] : empty) {
      mote::parallel_for(first, last, each);
      mote::parallel_for(first, last, ranges);
      mote::parallel_for(first, last, mote::grain(1), each);
      mote::parallel_for(first, last, mote::grain(kU64Max), ranges);
      EXPECT_EQ(mote::parallel_reduce(first, last, 12345L, body, plus), 12345L);
      EXPECT_EQ(mote::parallel_reduce(first, last, mote::grain(3), -9L, body, plus), -9L);
    }
    std::vector<double> v(10);
    mote::parallel_for(v.end(), v.begin(),
                       [&](std::vector<double>::iterator) { calls.fetch_add(1); });
    mote::parallel_for(v.begin() + 3, v.begin() + 3, [&](auto, auto) { calls.fetch_add(1); });
    EXPECT_EQ(mote::parallel_reduce(
                  v.data() + 5, v.data() + 2, 2.5,
                  [&](double*, double*, double acc) {
                    calls.fetch_add(1);
                    return acc;
                  },
                  std::plus<>()),
              2.5);
    mote::parallel_for(std::uint64_t{5}, std::uint64_t{0},
                       [&](std::uint64_t) { calls.fetch_add(1); });
    mote::parallel_for(std::int8_t{127}, std::int8_t{-128},
                       [&](std::int8_t) { calls.fetch_add(1); });
  };
  note("empty ranges");
  for (auto& rt : rts.all) rt->run(all);
  all();  // from outside: the default runtime
  EXPECT_EQ(calls.load(), 0);
}

TEST(LoopsEdges, GrainZeroIsAUsageError) {
  note("grain(0)");
  std::atomic<long> calls{0};
  auto each = [&](int) { calls.fetch_add(1); };
  auto body = [&](int, int, long acc) {
    calls.fetch_add(1);
    return acc;
  };
  mote::runtime rt(workers(2));
  auto all = [&] {
    EXPECT_THROW(mote::parallel_for(0, 100, mote::grain(0), each), mote::usage_error);
    EXPECT_THROW(mote::parallel_for(0, 0, mote::grain(0), each), mote::usage_error);
    EXPECT_THROW(mote::parallel_for(0, 100, mote::grain(0), [&](int, int) { calls.fetch_add(1); }),
                 mote::usage_error);
    EXPECT_THROW(mote::parallel_reduce(0, 100, mote::grain(0), 0L, body, std::plus<>()),
                 mote::usage_error);
    EXPECT_THROW(mote::parallel_reduce(5, 5, mote::grain(0), 0L, body, std::plus<>()),
                 mote::usage_error);
  };
  rt.run(all);
  all();
  EXPECT_EQ(calls.load(), 0);
  // And the message says what was wrong.
  try {
    mote::parallel_for(0, 10, mote::grain(0), each);
    ADD_FAILURE() << "grain(0) did not throw";
  } catch (const mote::usage_error& e) {
    EXPECT_NE(std::string(e.what()).find("grain"), std::string::npos) << e.what();
  }
}

TEST(LoopsEdges, SubRangesNeverExceedTheGrainAndGrainOneGivesSingleIterations) {
  mote::runtime rt(workers(4));
  for (std::uint64_t g : {1ull, 2ull, 5ull, 64ull, 1000ull}) {
    note("grain " + std::to_string(g));
    std::atomic<long> longest{0};
    std::atomic<long> calls{0};
    const long n = scaled(50000);
    rt.run([&] {
      mote::parallel_for(0L, n, mote::grain(g), [&](long b, long e) {
        calls.fetch_add(1, std::memory_order_relaxed);
        long seen = longest.load(std::memory_order_relaxed);
        while (e - b > seen &&
               !longest.compare_exchange_weak(seen, e - b, std::memory_order_relaxed)) {
        }
      });
    });
    EXPECT_LE(longest.load(), static_cast<long>(g));
    EXPECT_GE(calls.load(), (n + static_cast<long>(g) - 1) / static_cast<long>(g));
    if (g == 1) {
      EXPECT_EQ(calls.load(), n);
    }
  }
}

// ---- parallel_reduce: exact integers, reproducible doubles, non-commutative combines

TEST(LoopsReduce, DoubleSumsAreBitwiseTheSameOnEveryRunAndWorkerCount) {
  runtimes rts{1, 2, 4};
  std::mt19937_64 rng(mote_test::test_seed());
  const std::size_t sizes[] = {1,    2,     1000,
                               4097, 65539, static_cast<std::size_t>(scaled(300000, 3))};
  for (std::size_t n : sizes) {
    // Values of mixed signs and magnitudes: the sum depends on the order.
    std::vector<double> x(n);
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    double magnitude = 0;
    for (double& v : x) {
      v = unit(rng) * std::ldexp(1.0, static_cast<int>(rng() % 60) - 30);
      magnitude += std::fabs(v);
    }
    double serial = 0;
    for (double v : x) serial += v;
    const std::uint64_t grains[] = {0, 1, 7, 64, 1000, n, n + 5};
    for (std::uint64_t g : grains) {
      if (g == 1 && n > 70000)
        continue;  // a block per iteration: slow under a sanitizer, covered by smaller n
      const std::string what = "double sum of " + std::to_string(n) + ", grain " + grain_name(g);
      note(what);
      auto by_index = [&] {
        return preduce(
            std::size_t{0}, n, g, 0.0,
            [&](std::size_t b, std::size_t e, double acc) {
              for (; b < e; ++b) acc += x[b];
              return acc;
            },
            std::plus<>());
      };
      auto by_iterator = [&] {
        return preduce(
            x.cbegin(), x.cend(), g, 0.0,
            [](std::vector<double>::const_iterator b, std::vector<double>::const_iterator e,
               double acc) {
              for (; b != e; ++b) acc += *b;
              return acc;
            },
            std::plus<>());
      };
      auto by_pointer = [&] {
        return preduce(
            x.data(), x.data() + n, g, 0.0,
            [](double* b, double* e, double acc) {
              for (; b != e; ++b) acc += *b;
              return acc;
            },
            std::plus<>());
      };
      const double first = rts.all[0]->run(by_index);
      const auto bits = std::bit_cast<std::uint64_t>(first);
      EXPECT_LE(std::fabs(first - serial), 1e-9 * magnitude)
          << what << ": " << first << " vs serial " << serial;
      for (int rep = 0; rep < 2; ++rep) {
        for (auto& rt : rts.all) {
          EXPECT_EQ(std::bit_cast<std::uint64_t>(rt->run(by_index)), bits)
              << what << " on " << rt->num_workers();
          EXPECT_EQ(std::bit_cast<std::uint64_t>(rt->run(by_iterator)), bits)
              << what << " by iterator on " << rt->num_workers();
          EXPECT_EQ(std::bit_cast<std::uint64_t>(rt->run(by_pointer)), bits)
              << what << " by pointer on " << rt->num_workers();
        }
      }
      EXPECT_EQ(std::bit_cast<std::uint64_t>(by_index()), bits)
          << what << " on the default runtime";
      // Nested in a loop's body (a sub-team, or alone): the same bits.
      std::vector<double> nested(4);
      rts.all[2]->run([&] {
        mote::parallel_for(0, 4, mote::grain(1),
                           [&](int i) { nested[static_cast<std::size_t>(i)] = by_index(); });
      });
      for (double v : nested) EXPECT_EQ(std::bit_cast<std::uint64_t>(v), bits) << what << " nested";
    }
  }
}

TEST(LoopsReduce, IntegerSumsAreExact) {
  runtimes rts{1, 2, 4};
  const std::int64_t n = scaled(1000000, 4);
  for (std::uint64_t g : {0ull, 1ull, 3ull, 1000ull, 1ull << 40}) {
    if (g == 1 && mote_test::kSanitized) continue;
    note("integer sum, grain " + grain_name(g));
    for (auto& rt : rts.all) {
      const std::int64_t s = rt->run([&] {
        return preduce(
            -n, n + 1, g, std::int64_t{0},
            [](std::int64_t b, std::int64_t e, std::int64_t acc) {
              for (; b < e; ++b) acc += b * b;
              return acc;
            },
            std::plus<>());
      });
      EXPECT_EQ(s, 2 * (n * (n + 1) * (2 * n + 1) / 6))
          << "grain " << grain_name(g) << " on " << rt->num_workers();
    }
  }
}

TEST(LoopsReduce, ANonCommutativeCombineKeepsTheRangeOrder) {
  // String concatenation: associative, not commutative, with an identity.
  runtimes rts{2, 4};
  for (int n : {0, 1, 2, 31, 500, static_cast<int>(scaled(5000, 2))}) {
    std::string serial;
    for (int i = 0; i < n; ++i) serial += static_cast<char>('a' + i % 26);
    for (std::uint64_t g : {0ull, 1ull, 3ull, 64ull, 100000ull}) {
      note("string concatenation of " + std::to_string(n) + ", grain " + grain_name(g));
      for (auto& rt : rts.all) {
        const std::string s = rt->run([&] {
          return preduce(
              0, n, g, std::string(),
              [](int b, int e, std::string acc) {
                for (; b < e; ++b) acc += static_cast<char>('a' + b % 26);
                return acc;
              },
              [](std::string a, const std::string& b) { return a + b; });
        });
        EXPECT_EQ(s, serial) << "n " << n << ", grain " << grain_name(g) << " on "
                             << rt->num_workers();
      }
    }
  }
}

TEST(LoopsReduce, PartialResultsAreNotLeaked) {
  using mote_test::lifetime;
  mote::runtime rt(workers(4));
  const long before = lifetime::live.load();
  note("reduce with lifetime-counting values");
  for (std::uint64_t g : {0ull, 1ull, 16ull}) {
    const long n = scaled(20000);
    lifetime r = rt.run([&] {
      return preduce(
          0L, n, g, lifetime(0),
          [](long b, long e, lifetime acc) {
            for (; b < e; ++b) acc.value += b;
            return acc;
          },
          [](lifetime a, lifetime b) { return lifetime(a.value + b.value); });
    });
    EXPECT_EQ(r.value, n * (n - 1) / 2);
  }
  // And when a body throws midway.
  for (int rep = 0; rep < 10; ++rep) {
    EXPECT_THROW(rt.run([&] {
      return preduce(
          0, 10000, 7, lifetime(0),
          [rep](int b, int e, lifetime acc) {
            for (; b < e; ++b) {
              if (b == 1111 * rep) throw std::runtime_error("reduce gave up");
              acc.value += b;
            }
            return acc;
          },
          [](lifetime a, lifetime b) { return lifetime(a.value + b.value); });
    }),
                 std::runtime_error);
  }
  EXPECT_EQ(lifetime::live.load(), before);
  EXPECT_EQ(lifetime::double_destroyed.load(), 0);
}

// ---- Huge ranges: claiming stops, and the range is chunked safely ------------------

struct always_throws : std::runtime_error {
  always_throws() : std::runtime_error("the body throws on every call") {}
};

// A loop over a huge range whose body throws on every call. Each participant
// leaves at its first throw, so the body runs at most once per participant
// (a worker, or the thread that started the loop): a loop that did not stop
// claiming would never end.
template <class I>
void huge_throwing(const char* type, I first, I last, mote::runtime& rt,
                   std::initializer_list<form> forms) {
  for (std::uint64_t g :
       {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{1000}, std::uint64_t{1} << 40,
        (std::uint64_t{1} << 60) - 1, std::uint64_t{1} << 60, std::uint64_t{1} << 62,
        std::uint64_t{1} << 63, kU64Max}) {
    for (form f : forms) {
      const std::string what = describe(type, f, first, last, g) + " on " +
                               std::to_string(rt.num_workers()) + " workers, every call throws";
      note(what);
      std::atomic<long> calls{0};
      std::atomic<long> bad{0};
      auto count = [&] {
        if (calls.fetch_add(1) > 1000000) {
          // Far past any participant count: claiming did not stop. Keep
          // throwing, so the loop still ends and the test reports it.
          bad.store(1);
        }
      };
      bool caught = false;
      rt.run([&] {
        try {
          if (f == form::each) {
            pfor(first, last, g, [&](I) {
              count();
              throw always_throws();
            });
          } else if (f == form::ranges) {
            pfor(first, last, g, [&](I b, I e) {
              count();
              if (!(b < e) || b < first || last < e || (g != 0 && distance_of(b, e) > g))
                bad.store(2);
              throw always_throws();
            });
          } else {
            (void)preduce(
                first, last, g, 0L,
                [&](I b, I e, long acc) -> long {
                  count();
                  if (!(b < e) || b < first || last < e || (g != 0 && distance_of(b, e) > g)) {
                    bad.store(2);
                  }
                  (void)acc;
                  throw always_throws();
                },
                std::plus<>());
          }
        } catch (const always_throws&) {
          caught = true;
        }
      });
      EXPECT_TRUE(caught) << what;
      EXPECT_NE(bad.load(), 1) << what << ": " << calls.load() << " calls: claiming did not stop";
      EXPECT_NE(bad.load(), 2)
          << what << ": a sub-range outside the range, empty, or longer than the grain";
      EXPECT_GE(calls.load(), 1) << what;
      EXPECT_LE(calls.load(), static_cast<long>(rt.num_workers()) + 1) << what;
    }
  }
}

constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();

TEST(LoopsHuge, WholeInt64RangeThrowingAtOnceStops) {
  for (unsigned w : {1u, 2u, 4u}) {
    mote::runtime rt(workers(w));
    huge_throwing<std::int64_t>("int64", kI64Min, kI64Max, rt, {form::each, form::ranges});
  }
}

TEST(LoopsHuge, WholeUint64RangeThrowingAtOnceStops) {
  mote::runtime rt(workers(2));
  huge_throwing<std::uint64_t>("uint64", 0, kU64Max, rt, {form::each, form::ranges});
  // Just past the bound of one loop (2^62 units).
  huge_throwing<std::uint64_t>("uint64", 1ull << 62, (1ull << 63) + 1, rt,
                               {form::each, form::ranges});
}

TEST(LoopsHuge, ReduceOverWholeRangesThrowingAtOnceStops) {
  for (unsigned w : {1u, 2u}) {
    mote::runtime rt(workers(w));
    huge_throwing<std::int64_t>("int64", kI64Min, kI64Max, rt, {form::reduce});
    huge_throwing<std::uint64_t>("uint64", 1ull << 62, (1ull << 63) + 1, rt, {form::reduce});
  }
}

// Sub-range bodies that do not iterate cover a huge range in a few calls.
// Their sub-ranges must tile it exactly: no gap, no overlap, none past the
// grain, across the consecutive loops of at most 2^62 units that a longer
// range becomes, the stripes and the batches.
struct tiles {
  std::mutex mutex;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> seen;  // offsets from the range's first
  std::atomic<long> calls{0};
  std::atomic<long> bad{0};  // empty, reversed, outside, or past the grain
};

constexpr long kMaxTileCalls = 1L << 22;

struct too_many_calls : std::runtime_error {
  too_many_calls() : std::runtime_error("more than 2^22 calls: the batches did not grow") {}
};

template <class I>
void add_tile(tiles& t, const I& first, const I& last, const I& b, const I& e, std::uint64_t g) {
  if (t.calls.fetch_add(1, std::memory_order_relaxed) > kMaxTileCalls) throw too_many_calls();
  if (!(b < e) || b < first || last < e || (g != 0 && distance_of(b, e) > g)) {
    t.bad.fetch_add(1);
    return;
  }
  std::lock_guard<std::mutex> lock(t.mutex);
  t.seen.emplace_back(distance_of(first, b), distance_of(first, e));
}

testing::AssertionResult tiled(tiles& t, std::uint64_t n, std::uint64_t block) {
  if (t.bad.load() != 0) return testing::AssertionFailure() << t.bad.load() << " bad sub-ranges";
  std::sort(t.seen.begin(), t.seen.end());
  std::uint64_t at = 0;
  for (std::size_t k = 0; k < t.seen.size(); ++k) {
    const auto [b, e] = t.seen[k];
    if (b != at) {
      return testing::AssertionFailure()
             << (b < at ? "overlap" : "gap") << " at offset " << std::min(b, at) << " (sub-range "
             << k << " of " << t.seen.size() << ")";
    }
    if (block != 0 && e != n && e - b != block) {
      return testing::AssertionFailure() << "a block of " << (e - b) << " units at offset " << b
                                         << " (blocks of " << block << ")";
    }
    at = e;
  }
  if (at != n)
    return testing::AssertionFailure() << "the sub-ranges end at offset " << at << " of " << n;
  return testing::AssertionSuccess();
}

// Sub-range bodies of parallel_for over [first, last).
template <class I>
void huge_tiles_for(const char* type, I first, I last, mote::runtime& rt) {
  const std::uint64_t n = size_of(first, last);
  for (std::uint64_t g : {std::uint64_t{0}, std::uint64_t{1} << 48, (std::uint64_t{1} << 60) - 1,
                          std::uint64_t{1} << 60, std::uint64_t{1} << 61, std::uint64_t{1} << 62,
                          (std::uint64_t{1} << 62) + 1, std::uint64_t{1} << 63, kU64Max}) {
    // Without a grain the batch adapts to the time a call takes, which here
    // is all overhead: on a team it may stay small (under a sanitizer it
    // does), and 2^64 calls never end. Alone, the loop is one batch.
    if (g == 0 && rt.num_workers() != 1) continue;
    const std::string what = describe(type, form::ranges, first, last, g) + " on " +
                             std::to_string(rt.num_workers()) + " workers, sub-ranges not iterated";
    note(what);
    tiles t;
    try {
      rt.run([&] { pfor(first, last, g, [&](I b, I e) { add_tile(t, first, last, b, e, g); }); });
    } catch (const too_many_calls& e) {
      ADD_FAILURE() << what << ": " << e.what();
      continue;
    }
    EXPECT_TRUE(tiled(t, n, 0)) << what;
  }
}

// Blocks of parallel_reduce over [first, last): their lengths sum to the
// range's, modulo 2^64; with a grain, all but the last are that long.
template <class I>
void huge_tiles_reduce(const char* type, I first, I last, mote::runtime& rt) {
  const std::uint64_t n = size_of(first, last);
  for (std::uint64_t g :
       {std::uint64_t{0}, std::uint64_t{1} << 48, std::uint64_t{1} << 61, std::uint64_t{1} << 62,
        (std::uint64_t{1} << 62) + 1, std::uint64_t{1} << 63, kU64Max}) {
    const std::string what = describe(type, form::reduce, first, last, g) + " on " +
                             std::to_string(rt.num_workers()) + " workers, blocks not iterated";
    note(what);
    tiles t;
    std::uint64_t total = 0;
    try {
      total = rt.run([&] {
        return preduce(
            first, last, g, std::uint64_t{0},
            [&](I b, I e, std::uint64_t acc) {
              add_tile(t, first, last, b, e, g);
              return acc + distance_of(b, e);
            },
            std::plus<>());
      });
    } catch (const too_many_calls& e) {
      ADD_FAILURE() << what << ": " << e.what();
      continue;
    }
    EXPECT_EQ(total, n) << what;
    EXPECT_TRUE(tiled(t, n, g)) << what;
  }
}

TEST(LoopsHuge, SubRangesTileTheWholeInt64Range) {
  for (unsigned w : {1u, 2u, 4u}) {
    mote::runtime rt(workers(w));
    huge_tiles_for<std::int64_t>("int64", kI64Min, kI64Max, rt);
  }
}

TEST(LoopsHuge, SubRangesTileHugeUint64Ranges) {
  for (unsigned w : {1u, 2u}) {
    mote::runtime rt(workers(w));
    huge_tiles_for<std::uint64_t>("uint64", 0, kU64Max, rt);
    huge_tiles_for<std::uint64_t>("uint64", (1ull << 62) - 5, (1ull << 63) + 7, rt);
    huge_tiles_for<std::uint64_t>("uint64", 3, (1ull << 62) + 3, rt);  // exactly one loop's bound
  }
}

TEST(LoopsHuge, ReduceBlocksTileHugeRanges) {
  for (unsigned w : {1u, 2u, 4u}) {
    mote::runtime rt(workers(w));
    huge_tiles_reduce<std::int64_t>("int64", kI64Min, kI64Max, rt);
    huge_tiles_reduce<std::uint64_t>("uint64", (1ull << 62) - 5, (1ull << 63) + 7, rt);
    huge_tiles_reduce<std::uint64_t>("uint64", 3, (1ull << 62) + 3, rt);
  }
}

TEST(LoopsHuge, OnlyTheFirstIterationThrowsAndTheRestIsNotRun) {
  // [0, 2^50) with grain 1: iteration 0 throws; the others do nothing. The
  // loop must stop claiming; if it did not, it would run for days, so past
  // 2^31 iterations the body reports that and throws too (which ends it).
  mote::runtime rt(workers(2));
  for (std::uint64_t g : {1ull, 0ull}) {
    note("2^50 iterations, the first throws, grain " + grain_name(g));
    std::atomic<std::uint64_t> ran{0};
    std::atomic<bool> gave_up{false};
    try {
      rt.run([&] {
        pfor(std::uint64_t{0}, std::uint64_t{1} << 50, g, [&](std::uint64_t i) {
          if (i == 0) throw std::runtime_error("iteration 0 failed");
          if (ran.fetch_add(1, std::memory_order_relaxed) > (std::uint64_t{1} << 31)) {
            gave_up.store(true);
            throw std::logic_error("claiming did not stop");
          }
        });
      });
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "iteration 0 failed");
    } catch (const std::logic_error& e) {
      ADD_FAILURE() << e.what();
    }
    EXPECT_FALSE(gave_up.load()) << "grain " << grain_name(g) << ": " << ran.load()
                                 << " iterations ran after the first one threw";
    RecordProperty("iterations_after_throw_grain_" + grain_name(g), std::to_string(ran.load()));
  }
}

// ---- Exceptions ------------------------------------------------------------------

struct loop_error : std::runtime_error {
  explicit loop_error(std::uint64_t at)
      : std::runtime_error("loop body failed at " + std::to_string(at)), where(at) {}
  std::uint64_t where;
};

TEST(LoopsExceptions, AThrowAtARandomIterationReachesTheCaller) {
  runtimes rts{1, 2, 4};
  std::mt19937_64 seeds(mote_test::test_seed() + 17);
  const int rounds = static_cast<int>(scaled(900, 30));
  for (int round = 0; round < rounds; ++round) {
    const std::uint64_t seed = seeds();
    std::mt19937_64 rng(seed);
    const std::uint64_t n = 1 + log_uniform(rng, 50000);
    const std::uint64_t at = rng() % n;
    const std::uint64_t g = random_grain(rng, n);
    const form f = static_cast<form>(rng() % 3);
    const bool many = rng() % 4 == 0;  // every iteration from `at` on throws
    const std::size_t which = rng() % rts.all.size();
    mote::runtime& rt = *rts.all[which];
    const long first = static_cast<long>(rng() % 1000) - 500;
    std::ostringstream what;
    what << form_name(f) << " over " << n << " iterations, grain " << grain_name(g)
         << ", throws at " << at << (many ? " and after" : "") << ", " << rt.num_workers()
         << " workers, seed " << seed;
    note(what.str());
    std::vector<std::atomic<std::uint32_t>> visits(n);
    auto visit = [&](long i) {
      const std::uint64_t k = static_cast<std::uint64_t>(i - first);
      visits[k].fetch_add(1, std::memory_order_relaxed);
      if (k == at || (many && k > at)) throw loop_error(k);
    };
    std::uint64_t caught_at = kU64Max;
    try {
      rt.run([&] {
        const long last = first + static_cast<long>(n);
        if (f == form::each) {
          pfor(first, last, g, [&](long i) { visit(i); });
        } else if (f == form::ranges) {
          pfor(first, last, g, [&](long b, long e) {
            for (; b < e; ++b) visit(b);
          });
        } else {
          (void)preduce(
              first, last, g, 0L,
              [&](long b, long e, long acc) {
                for (; b < e; ++b) visit(b);
                return acc + 1;
              },
              std::plus<>());
        }
      });
    } catch (const loop_error& e) {
      caught_at = e.where;
    }
    ASSERT_NE(caught_at, kU64Max) << what.str() << ": no exception reached the caller";
    EXPECT_TRUE(caught_at == at || (many && caught_at > at))
        << what.str() << ": caught " << caught_at;
    EXPECT_EQ(visits[caught_at].load(), 1u) << what.str();
    if (!many) {
      // The only throwing iteration: nothing stops the loop before it runs.
      EXPECT_EQ(visits[at].load(), 1u) << what.str() << ": the throwing iteration";
    }
    for (std::uint64_t k = 0; k < n; ++k)
      ASSERT_LE(visits[k].load(), 1u) << what.str() << ": iteration " << k;
    if (rt.num_workers() == 1) {
      // Alone, the loop runs in order and stops at the throw: exactly the
      // iterations before it, and it, ran.
      for (std::uint64_t k = 0; k < n; ++k) {
        ASSERT_EQ(visits[k].load(), k <= at ? 1u : 0u) << what.str() << ": iteration " << k;
      }
    }
    // The runtime is unharmed.
    ASSERT_TRUE(rt.run([&] { return check_for(0, 1000, 0, true, &rt); })) << "after " << what.str();
  }
}

TEST(LoopsExceptions, OtherExceptionTypesAndNestedThrowsReachTheCaller) {
  mote::runtime rt(workers(4));
  note("throw 42");
  EXPECT_THROW(rt.run([] {
    mote::parallel_for(0, 1000, [](int i) {
      if (i == 999) throw 42;
    });
  }),
               int);
  EXPECT_THROW(mote::parallel_for(0, 1000,
                                  [](int i) {
                                    if (i == 0) throw 42;
                                  }),
               int);  // the default runtime
  // An inner loop's exception leaves through the outer loop.
  note("nested throw");
  for (int rep = 0; rep < 20; ++rep) {
    try {
      rt.run([&] {
        mote::parallel_for(0, 16, mote::grain(1), [&](int i) {
          mote::parallel_for(0, 1000, [&](int j) {
            if (i == rep % 16 && j == 500)
              throw loop_error(static_cast<std::uint64_t>(i * 1000 + j));
          });
        });
      });
      ADD_FAILURE() << "no exception";
    } catch (const loop_error& e) {
      EXPECT_EQ(e.where, static_cast<std::uint64_t>((rep % 16) * 1000 + 500));
    }
  }
  // Caught inside the outer body: the outer loop completes.
  note("nested throw, caught");
  std::atomic<long> caught{0};
  std::atomic<long> ran{0};
  rt.run([&] {
    mote::parallel_for(0, 64, [&](int i) {
      try {
        mote::parallel_reduce(
            0, 100, 0L,
            [&](int b, int e, long acc) -> long {
              if (b <= 50 && 50 < e && i % 2 == 0) throw std::runtime_error("inner");
              return acc + e - b;
            },
            std::plus<>());
      } catch (const std::runtime_error&) {
        caught.fetch_add(1);
      }
      ran.fetch_add(1);
    });
  });
  EXPECT_EQ(caught.load(), 32);
  EXPECT_EQ(ran.load(), 64);
  EXPECT_TRUE(rt.run([&] { return check_reduce(0, 5000, 0, &rt); }));
}

// ---- Nesting ---------------------------------------------------------------------

// A random tree of nested loops: node q of level L runs a loop over its
// children (level L+1, [base, base + children)), as parallel_for in either
// form or as parallel_reduce, with its own index type, offset and grain.
// Every node's value is mix(its id) plus its children's values; the root's
// value and a visit count per node are checked against the serial run.
struct nest_node {
  std::uint32_t children = 0;
  std::uint64_t base = 0;
  form how = form::each;
  std::uint64_t grain = 0;
  bool unsigned_index = false;
  std::int64_t offset = 0;  // the loop runs over [offset, offset + children)
  bool throws = false;      // throws loop_error(id) after its loop
};

struct nest_program {
  std::vector<std::vector<nest_node>> levels;
  std::uint64_t id(std::size_t level, std::uint64_t q) const {
    return (static_cast<std::uint64_t>(level) << 40) | q;
  }
};

struct nest_state {
  explicit nest_state(const nest_program& p) {
    for (const auto& level : p.levels) {
      visits.emplace_back(level.size());
      values.emplace_back(level.size());
    }
  }
  std::vector<std::vector<std::atomic<std::uint32_t>>> visits;
  std::vector<std::vector<std::atomic<std::uint64_t>>> values;
  std::atomic<long> off_runtime{0};
  std::atomic<long> bad_range{0};
  const mote::runtime* expect = nullptr;
};

// Levels below the root: each node gets 0..max_children children while the
// budget of nodes lasts.
nest_program random_program(std::mt19937_64& rng, int depth, std::uint64_t root_children,
                            std::uint64_t max_children, std::uint64_t budget, bool with_throw) {
  nest_program p;
  p.levels.emplace_back(1);
  std::uint64_t total = 1;
  for (int level = 0; level < depth; ++level) {
    p.levels.emplace_back();
    auto& next = p.levels.back();
    for (auto& node : p.levels[static_cast<std::size_t>(level)]) {
      std::uint64_t c = level == 0 ? root_children : log_uniform(rng, max_children);
      c = std::min(c, budget > total ? budget - total : 0);
      node.children = static_cast<std::uint32_t>(c);
      node.base = next.size();
      node.how = static_cast<form>(rng() % 3);
      node.grain = random_grain(rng, c);
      node.unsigned_index = rng() % 2 == 0;
      if (node.unsigned_index) {
        node.offset = rng() % 3 == 0 ? static_cast<std::int64_t>(0xffffffffu - c)
                                     : static_cast<std::int64_t>(rng() % 1000);
      } else {
        node.offset = rng() % 3 == 0 ? std::numeric_limits<std::int64_t>::min()
                                     : static_cast<std::int64_t>(rng() % 2000) - 1000;
      }
      next.resize(next.size() + c);
      total += c;
    }
  }
  if (with_throw) {
    const std::size_t level = rng() % p.levels.size();
    if (!p.levels[level].empty()) p.levels[level][rng() % p.levels[level].size()].throws = true;
  }
  return p;
}

std::uint64_t serial_value(const nest_program& p, std::size_t level, std::uint64_t q) {
  const nest_node& node = p.levels[level][q];
  std::uint64_t v = mix(p.id(level, q));
  for (std::uint64_t j = 0; j < node.children; ++j) v += serial_value(p, level + 1, node.base + j);
  return v;
}

bool program_throws(const nest_program& p) {
  for (const auto& level : p.levels) {
    for (const auto& node : level) {
      if (node.throws) return true;
    }
  }
  return false;
}

std::uint64_t run_node(const nest_program& p, nest_state& s, std::size_t level, std::uint64_t q);

template <class I>
std::uint64_t run_children(const nest_program& p, nest_state& s, std::size_t level,
                           const nest_node& node) {
  const I first = static_cast<I>(node.offset);
  const I last = advanced(first, node.children);
  auto child = [&](I i) -> std::uint64_t {
    if (s.expect != nullptr && mote::runtime::current() != s.expect) s.off_runtime.fetch_add(1);
    if (i < first || !(i < last)) {
      s.bad_range.fetch_add(1);
      return 0;
    }
    const std::uint64_t j = node.base + distance_of(first, i);
    const std::uint64_t v = run_node(p, s, level + 1, j);
    s.values[level + 1][j].store(v, std::memory_order_relaxed);
    return v;
  };
  auto sum_children = [&] {
    std::uint64_t v = 0;
    for (std::uint64_t j = 0; j < node.children; ++j)
      v += s.values[level + 1][node.base + j].load(std::memory_order_relaxed);
    return v;
  };
  switch (node.how) {
    case form::each:
      pfor(first, last, node.grain, [&](I i) { (void)child(i); });
      return sum_children();
    case form::ranges:
      pfor(first, last, node.grain, [&](I b, I e) {
        if (!(b < e) || (node.grain != 0 && distance_of(b, e) > node.grain))
          s.bad_range.fetch_add(1);
        for (I i = b; i < e; ++i) (void)child(i);
      });
      return sum_children();
    case form::reduce:
      return preduce(
          first, last, node.grain, std::uint64_t{0},
          [&](I b, I e, std::uint64_t acc) {
            if (!(b < e) || (node.grain != 0 && distance_of(b, e) > node.grain))
              s.bad_range.fetch_add(1);
            for (I i = b; i < e; ++i) acc += child(i);
            return acc;
          },
          std::plus<>());
  }
  return 0;
}

std::uint64_t run_node(const nest_program& p, nest_state& s, std::size_t level, std::uint64_t q) {
  s.visits[level][q].fetch_add(1, std::memory_order_relaxed);
  const nest_node& node = p.levels[level][q];
  std::uint64_t v = mix(p.id(level, q));
  if (node.children != 0) {
    v += node.unsigned_index ? run_children<std::uint32_t>(p, s, level, node)
                             : run_children<std::int64_t>(p, s, level, node);
  }
  if (node.throws) throw loop_error(p.id(level, q));
  return v;
}

// Runs p (on the calling thread) and checks it against the serial run.
testing::AssertionResult check_program(const nest_program& p, const mote::runtime* expect) {
  nest_state s(p);
  s.expect = expect;
  const bool throws = program_throws(p);
  std::uint64_t got = 0;
  std::uint64_t thrown = kU64Max;
  try {
    got = run_node(p, s, 0, 0);
  } catch (const loop_error& e) {
    thrown = e.where;
  }
  if (s.off_runtime.load() != 0)
    return testing::AssertionFailure() << s.off_runtime.load() << " bodies ran off the runtime";
  if (s.bad_range.load() != 0)
    return testing::AssertionFailure() << s.bad_range.load() << " bad indices or sub-ranges";
  for (std::size_t level = 0; level < p.levels.size(); ++level) {
    for (std::uint64_t q = 0; q < p.levels[level].size(); ++q) {
      const std::uint32_t v = s.visits[level][q].load();
      if (v > 1 || (!throws && v != 1)) {
        return testing::AssertionFailure()
               << "node " << q << " of level " << level << " ran " << v << " times";
      }
      if (p.levels[level][q].throws && thrown != p.id(level, q)) {
        return testing::AssertionFailure()
               << "the throwing node's exception did not reach the caller (got " << thrown << ")";
      }
    }
  }
  if (!throws && got != serial_value(p, 0, 0))
    return testing::AssertionFailure() << "the root's value differs";
  return testing::AssertionSuccess();
}

std::string describe(const nest_program& p) {
  std::ostringstream s;
  s << "nested program:";
  for (std::size_t level = 0; level < p.levels.size(); ++level)
    s << " level " << level << ": " << p.levels[level].size() << " nodes;";
  s << " root: " << form_name(p.levels[0][0].how) << ", grain " << grain_name(p.levels[0][0].grain);
  return s.str();
}

TEST(LoopsNesting, ThreeLevelsOfEveryForm) {
  mote::runtime rt(workers(4));
  const int a = 13, b = 17, c = static_cast<int>(scaled(101, 2));
  for (int variant = 0; variant < 6; ++variant) {
    note("three levels, variant " + std::to_string(variant));
    std::vector<std::atomic<std::uint32_t>> visits(static_cast<std::size_t>(a * b * c));
    std::atomic<long> off{0};
    const std::uint64_t g = variant % 2 == 0 ? 0 : 1 + static_cast<std::uint64_t>(variant);
    const long total = rt.run([&] {
      return preduce(
          0, a, g, 0L,
          [&](int i, int ie, long acc) {
            for (; i < ie; ++i) {
              pfor(std::int64_t{-b}, std::int64_t{0}, g, [&](std::int64_t jb, std::int64_t je) {
                for (; jb < je; ++jb) {
                  const int j = static_cast<int>(jb + b);
                  pfor(std::uint8_t{150}, static_cast<std::uint8_t>(150 + c), variant < 3 ? g : 1,
                       [&](std::uint8_t k) {
                         if (mote::runtime::current() != &rt) off.fetch_add(1);
                         visits[static_cast<std::size_t>((i * b + j) * c + (k - 150))].fetch_add(1);
                       });
                }
              });
              acc += 1;
            }
            return acc;
          },
          std::plus<>());
    });
    EXPECT_EQ(total, a);
    EXPECT_EQ(off.load(), 0);
    for (std::size_t k = 0; k < visits.size(); ++k)
      ASSERT_EQ(visits[k].load(), 1u) << "variant " << variant << ", leaf " << k;
  }
}

TEST(LoopsNesting, DeeperThanTheDepthLimitStillCorrect) {
  // Depth 12 (past mote::detail::kMaxLoopDepth = 8), two iterations per
  // level, in every form; the leaves count themselves.
  mote::runtime rt(workers(4));
  constexpr int kDepth = 12;
  for (int variant = 0; variant < 3; ++variant) {
    note("depth 12, variant " + std::to_string(variant));
    std::vector<std::atomic<std::uint32_t>> leaves(std::size_t{1} << kDepth);
    std::function<long(int, std::uint64_t)> level = [&](int d, std::uint64_t path) -> long {
      if (d == kDepth) {
        leaves[path].fetch_add(1);
        return 1;
      }
      const form f = static_cast<form>((variant + d) % 3);
      if (f == form::reduce) {
        return preduce(
            0, 2, d % 2 == 0 ? 0 : 1, 0L,
            [&](int b, int e, long acc) {
              for (; b < e; ++b) acc += level(d + 1, path * 2 + static_cast<std::uint64_t>(b));
              return acc;
            },
            std::plus<>());
      }
      std::atomic<long> n{0};
      if (f == form::each) {
        pfor(std::uint64_t{0}, std::uint64_t{2}, 1,
             [&](std::uint64_t i) { n.fetch_add(level(d + 1, path * 2 + i)); });
      } else {
        pfor(-1L, 1L, 0, [&](long b, long e) {
          for (; b < e; ++b)
            n.fetch_add(level(d + 1, path * 2 + static_cast<std::uint64_t>(b + 1)));
        });
      }
      return n.load();
    };
    EXPECT_EQ(rt.run([&] { return level(0, 0); }), 1L << kDepth);
    for (std::size_t k = 0; k < leaves.size(); ++k) ASSERT_EQ(leaves[k].load(), 1u) << "leaf " << k;
  }
  // And a deep chain of one-iteration loops with a wide loop at the bottom.
  note("depth 20 chain");
  std::function<testing::AssertionResult(int)> chain = [&](int d) -> testing::AssertionResult {
    if (d == 20) return check_for(0L, 3000L, 0, d % 2 == 0, &rt);
    testing::AssertionResult r = testing::AssertionSuccess();
    mote::parallel_for(0, 1, [&](int) { r = chain(d + 1); });
    return r;
  };
  EXPECT_TRUE(rt.run([&] { return chain(0); }));
}

TEST(LoopsNesting, InTaskGroupTasksAndJoinBranches) {
  mote::runtime rt(workers(4));
  std::mt19937_64 seeds(mote_test::test_seed() + 5);
  const int rounds = static_cast<int>(scaled(120, 24));
  for (int round = 0; round < rounds; ++round) {
    const std::uint64_t seed = seeds();
    std::mt19937_64 rng(seed);
    std::vector<nest_program> programs;
    for (int t = 0; t < 6; ++t)
      programs.push_back(random_program(rng, 2, 1 + rng() % 200, 40, 4000, false));
    note("task groups and joins, seed " + std::to_string(seed));
    std::vector<testing::AssertionResult> results(programs.size(), testing::AssertionSuccess());
    rt.run([&] {
      mote::task_group g;
      for (std::size_t t = 0; t < 4; ++t) {
        g.spawn([&, t] { results[t] = check_program(programs[t], &rt); });
      }
      (void)mote::join(
          [&] {
            results[4] = check_program(programs[4], &rt);
            return 0;
          },
          [&] {
            results[5] = check_program(programs[5], &rt);
            return 0;
          });
      g.wait();
    });
    for (std::size_t t = 0; t < results.size(); ++t)
      ASSERT_TRUE(results[t]) << "program " << t << ", seed " << seed;
  }
  // Loops inside tasks spawned from inside a loop's body.
  note("task groups inside loop bodies");
  std::vector<std::atomic<std::uint32_t>> visits(64 * 500);
  rt.run([&] {
    mote::parallel_for(0, 64, mote::grain(1), [&](int i) {
      mote::task_group g;
      g.spawn([&, i] {
        mote::parallel_for(
            0, 250, [&](int j) { visits[static_cast<std::size_t>(i * 500 + j)].fetch_add(1); });
      });
      mote::parallel_for(
          250, 500, [&](int j) { visits[static_cast<std::size_t>(i * 500 + j)].fetch_add(1); });
      g.wait();
    });
  });
  for (std::size_t k = 0; k < visits.size(); ++k)
    ASSERT_EQ(visits[k].load(), 1u) << "iteration " << k;
}

TEST(LoopsNesting, ConcurrentLoopsFromTheTasksOfAGroup) {
  mote::runtime rt(workers(4));
  const int tasks = 16;
  const std::uint64_t n = static_cast<std::uint64_t>(scaled(20000, 4));
  for (int rep = 0; rep < 3; ++rep) {
    note("concurrent loops from tasks, rep " + std::to_string(rep));
    std::vector<testing::AssertionResult> results(tasks, testing::AssertionSuccess());
    rt.run([&] {
      mote::task_group g;
      for (int t = 0; t < tasks; ++t) {
        g.spawn([&, t] {
          const form f = static_cast<form>((t + rep) % 3);
          const std::uint64_t grain = t % 4 == 0 ? 0 : static_cast<std::uint64_t>(t);
          results[static_cast<std::size_t>(t)] = check_loop(
              f, std::int64_t{-1000} * t, static_cast<std::int64_t>(n) - 1000 * t, grain, &rt);
        });
      }
      g.wait();
    });
    for (int t = 0; t < tasks; ++t)
      ASSERT_TRUE(results[static_cast<std::size_t>(t)]) << "task " << t << ", rep " << rep;
  }
}

TEST(LoopsNesting, FromThreadsOutsideTheRuntime) {
  // A loop called on a thread that is no worker runs on the default runtime.
  mote::runtime& def = mote::runtime::default_runtime();
  note("from this thread");
  EXPECT_TRUE(check_for(0, 10000, 0, false, &def));
  EXPECT_TRUE(check_reduce(std::size_t{0}, std::size_t{10000}, 7, &def));
  // Several outside threads at once: straight to the default runtime, and
  // through run() on one runtime.
  mote::runtime rt(workers(2));
  const int threads = 4;
  const int rounds = static_cast<int>(scaled(180, 18));
  std::vector<testing::AssertionResult> results(2 * threads, testing::AssertionSuccess());
  note("from several outside threads at once");
  std::vector<std::thread> pool;
  for (int t = 0; t < 2 * threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(mote_test::test_seed() + static_cast<std::uint64_t>(t));
      for (int r = 0; r < rounds && results[static_cast<std::size_t>(t)]; ++r) {
        const std::int64_t first = static_cast<std::int64_t>(rng() % 1000) - 500;
        const std::int64_t last = first + static_cast<std::int64_t>(log_uniform(rng, 20000));
        const std::uint64_t g = random_grain(rng, size_of(first, last));
        const form f = static_cast<form>(rng() % 3);
        if (t < threads) {
          results[static_cast<std::size_t>(t)] = check_loop(f, first, last, g, &def);
        } else {
          results[static_cast<std::size_t>(t)] =
              rt.run([&] { return check_loop(f, first, last, g, &rt); });
        }
        if (!results[static_cast<std::size_t>(t)]) {
          results[static_cast<std::size_t>(t)] << " (" << describe("int64", f, first, last, g)
                                               << ", round " << r << ")";
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  for (int t = 0; t < 2 * threads; ++t) {
    EXPECT_TRUE(results[static_cast<std::size_t>(t)])
        << (t < threads ? "default runtime" : "rt.run") << ", thread " << t;
  }
}

TEST(LoopsNesting, FromAWorkerOfAnotherRuntime) {
  // A worker of rt2 that calls rt.run: the loop inside runs on rt.
  mote::runtime rt(workers(2));
  mote::runtime rt2(workers(2));
  note("from a worker of another runtime");
  EXPECT_TRUE(rt2.run([&] { return rt.run([&] { return check_reduce(0, 20000, 0, &rt); }); }));
  EXPECT_TRUE(rt2.run([&] { return check_for(0, 20000, 0, true, &rt2); }));
}

TEST(LoopsNesting, OnAnAssistantThreadALoopRunsThereAlone) {
  mote::assistant_options o;
  o.pin = false;
  o.adaptive = false;  // the task must run on the assistant
  mote::assistant helper(o);
  note("on an assistant");
  std::vector<std::atomic<std::uint32_t>> visits(3000);
  std::atomic<long> elsewhere{0};
  long sum = -1;
  helper.submit([&] {
    const std::thread::id here = std::this_thread::get_id();
    mote::parallel_for(0, 1000, [&](int i) {
      if (std::this_thread::get_id() != here) elsewhere.fetch_add(1);
      visits[static_cast<std::size_t>(i)].fetch_add(1);
    });
    mote::parallel_for(1000, 2000, mote::grain(7), [&](int b, int e) {
      if (std::this_thread::get_id() != here) elsewhere.fetch_add(1);
      for (; b < e; ++b) visits[static_cast<std::size_t>(b)].fetch_add(1);
    });
    sum = mote::parallel_reduce(
        2000, 3000, mote::grain(10), 0L,
        [&](int b, int e, long acc) {
          if (std::this_thread::get_id() != here) elsewhere.fetch_add(1);
          for (; b < e; ++b) {
            visits[static_cast<std::size_t>(b)].fetch_add(1);
            acc += b;
          }
          return acc;
        },
        std::plus<>());
  });
  helper.wait();
  EXPECT_EQ(elsewhere.load(), 0);
  EXPECT_EQ(sum, (2000L + 2999L) * 1000 / 2);
  for (std::size_t k = 0; k < visits.size(); ++k)
    ASSERT_EQ(visits[k].load(), 1u) << "iteration " << k;
}

// ---- Fake machine shapes -------------------------------------------------------------

// packages x cores per package x hardware threads per core, numbered as
// Linux does (the first hardware threads of every core, then the second...),
// with an L1 and L2 per core and an L3 per package.
mote::topology fake_machine(int packages, int cores_per_package, int smt) {
  mote::topology t;
  const int cores = packages * cores_per_package;
  for (int core = 0; core < cores; ++core) {
    for (int rank = 0; rank < smt; ++rank) {
      mote::cpu_info c;
      c.os_index = core + rank * cores;
      c.core = core;
      c.package = core / cores_per_package;
      c.numa_node = c.package;
      c.smt_rank = rank;
      t.cpus.push_back(c);
    }
  }
  for (int core = 0; core < cores; ++core) {
    for (int level = 1; level <= 2; ++level) {
      mote::cache_info c;
      c.level = level;
      c.size_bytes = level == 1 ? 32 * 1024 : 1024 * 1024;
      c.line_bytes = 64;
      for (int rank = 0; rank < smt; ++rank) c.cpus.push_back(core + rank * cores);
      t.caches.push_back(c);
    }
  }
  for (int package = 0; package < packages; ++package) {
    mote::cache_info c;
    c.level = 3;
    c.size_bytes = 32 * 1024 * 1024;
    c.line_bytes = 64;
    for (const auto& cpu : t.cpus) {
      if (cpu.package == package) c.cpus.push_back(cpu.os_index);
    }
    t.caches.push_back(c);
  }
  t.num_cores = cores;
  t.num_packages = packages;
  t.num_numa_nodes = packages;
  t.source = "test";
  return t;
}

mote::runtime_options on_machine(const mote::topology& t, unsigned num_workers) {
  mote::runtime_options o = workers(num_workers);
  mote::binding none;
  none.mode = mote::binding::kind::none;  // the fake machine's CPUs need not exist here
  o.bind = none;
  o.machine = t;
  return o;
}

// Random flat and nested loops on one runtime, against serial runs.
void random_loops_on(mote::runtime& rt, const std::string& name, int rounds, std::uint64_t max_size,
                     int max_depth, double throw_rate, std::uint64_t salt) {
  std::mt19937_64 seeds(mote_test::test_seed() ^ mix(salt));
  for (int round = 0; round < rounds; ++round) {
    const std::uint64_t seed = seeds();
    std::mt19937_64 rng(seed);
    const int depth = static_cast<int>(rng() % static_cast<std::uint64_t>(max_depth + 1));
    std::string what;
    testing::AssertionResult r = testing::AssertionSuccess();
    if (depth == 0) {
      // One flat loop over a random index type.
      const std::uint64_t n = log_uniform(rng, max_size);
      const form f = static_cast<form>(rng() % 3);
      const std::uint64_t g = random_grain(rng, n);
      switch (rng() % 4) {
        case 0: {
          const std::int64_t first = static_cast<std::int64_t>(rng() % 2000000) - 1000000;
          const std::int64_t last = first + static_cast<std::int64_t>(n);
          what = describe("int64", f, first, last, g);
          note(name + ": " + what + ", seed " + std::to_string(seed));
          r = rt.run([&] { return check_loop(f, first, last, g, &rt); });
          break;
        }
        case 1: {
          const std::uint32_t first = static_cast<std::uint32_t>(0xffffffffu - n - rng() % 1000);
          const std::uint32_t last = static_cast<std::uint32_t>(first + n);
          what = describe("uint32", f, first, last, g);
          note(name + ": " + what + ", seed " + std::to_string(seed));
          r = rt.run([&] { return check_loop(f, first, last, g, &rt); });
          break;
        }
        case 2: {
          const std::size_t first = rng() % 1000;
          const std::size_t last = first + n;
          what = describe("size_t", f, first, last, g);
          note(name + ": " + what + ", seed " + std::to_string(seed));
          r = rt.run([&] { return check_loop(f, first, last, g, &rt); });
          break;
        }
        default: {
          std::vector<std::uint32_t> data(n);
          for (auto& v : data) v = static_cast<std::uint32_t>(rng());
          what = describe("vector<uint32>::iterator", f, data.begin(), data.end(), g);
          note(name + ": " + what + ", seed " + std::to_string(seed));
          r = rt.run([&] { return check_loop(f, data.begin(), data.end(), g, &rt); });
          break;
        }
      }
    } else {
      const std::uint64_t root = log_uniform(rng, depth == 1 ? 2000 : 300);
      const nest_program p =
          random_program(rng, depth, root, depth == 1 ? 300 : 60, max_size,
                         std::uniform_real_distribution<double>(0, 1)(rng) < throw_rate);
      what = describe(p);
      note(name + ": " + what + ", seed " + std::to_string(seed));
      r = rt.run([&] { return check_program(p, &rt); });
    }
    ASSERT_TRUE(r) << name << ": " << what << ", seed " << seed;
  }
}

TEST(LoopsMachines, TwoPackagesTwoCoresTwoThreads) {
  const mote::topology t = fake_machine(2, 2, 2);
  mote::runtime rt(on_machine(t, 8));
  ASSERT_EQ(rt.num_workers(), 8u);
  random_loops_on(rt, "2x2x2, 8 workers", static_cast<int>(scaled(900, 36)), 30000, 2, 0.05, 1);
}

TEST(LoopsMachines, FourPackagesOneCoreTwoThreads) {
  const mote::topology t = fake_machine(4, 1, 2);
  mote::runtime rt(on_machine(t, 8));
  random_loops_on(rt, "4x1x2, 8 workers", static_cast<int>(scaled(900, 36)), 30000, 2, 0.05, 2);
}

TEST(LoopsMachines, FewerWorkersThanCpus) {
  const mote::topology t = fake_machine(2, 2, 2);
  mote::runtime rt(on_machine(t, 5));
  random_loops_on(rt, "2x2x2, 5 workers", static_cast<int>(scaled(480, 30)), 30000, 2, 0.05, 3);
  const mote::topology t2 = fake_machine(2, 3, 1);
  mote::runtime rt2(on_machine(t2, 3));
  random_loops_on(rt2, "2x3x1, 3 workers", static_cast<int>(scaled(480, 30)), 30000, 2, 0.05, 4);
}

TEST(LoopsMachines, MoreWorkersThanCpus) {
  const mote::topology t = fake_machine(3, 2, 1);
  mote::runtime rt(on_machine(t, 7));
  random_loops_on(rt, "3x2x1, 7 workers", static_cast<int>(scaled(480, 30)), 30000, 2, 0.05, 5);
}

TEST(LoopsMachines, NestedToDepthThreeOnEveryShape) {
  struct shape {
    int packages, cores, smt;
    unsigned workers;
  };
  for (const shape& s :
       {shape{2, 2, 2, 8}, shape{4, 1, 2, 8}, shape{1, 4, 2, 8}, shape{2, 1, 4, 8}}) {
    const mote::topology t = fake_machine(s.packages, s.cores, s.smt);
    mote::runtime rt(on_machine(t, s.workers));
    const std::string name =
        std::to_string(s.packages) + "x" + std::to_string(s.cores) + "x" + std::to_string(s.smt);
    std::mt19937_64 seeds(mote_test::test_seed() +
                          static_cast<std::uint64_t>(s.packages * 100 + s.cores * 10 + s.smt));
    for (int round = 0; round < static_cast<int>(scaled(120, 24)); ++round) {
      const std::uint64_t seed = seeds();
      std::mt19937_64 rng(seed);
      const nest_program p = random_program(rng, 3, 4 + rng() % 30, 30, 20000, false);
      note(name + ": " + describe(p) + ", seed " + std::to_string(seed));
      ASSERT_TRUE(rt.run([&] { return check_program(p, &rt); }))
          << name << ": " << describe(p) << ", seed " << seed;
    }
  }
}

// ---- per_worker --------------------------------------------------------------------

TEST(PerWorker, MadeLazilyOnlyByTheWorkersThatAsk) {
  constexpr unsigned kWorkers = 4;
  mote::runtime rt(workers(kWorkers));
  note("per_worker laziness");
  std::atomic<int> inits{0};
  std::vector<std::atomic<int>> init_on(kWorkers);
  std::vector<std::atomic<int>> used_on(kWorkers);
  std::atomic<long> bad_index{0};
  auto index = [&]() -> std::size_t {
    const int w = mote::runtime::current_worker_index();
    if (w < 0 || w >= static_cast<int>(kWorkers)) {
      bad_index.fetch_add(1);
      return 0;
    }
    return static_cast<std::size_t>(w);
  };
  rt.run([&] {
    mote::per_worker<long> counts([&] {
      inits.fetch_add(1);
      init_on[index()].fetch_add(1);
      return 0L;
    });
    EXPECT_EQ(inits.load(), 0) << "made before anyone asked";
    long made = 0;
    counts.for_each([&](long&) { ++made; });
    EXPECT_EQ(made, 0);
    // One iteration: one worker asks, one T is made.
    mote::parallel_for(0, 1, [&](int) {
      ++counts.local();
      used_on[index()].store(1);
    });
    EXPECT_EQ(inits.load(), 1);
    made = 0;
    counts.for_each([&](long& v) {
      ++made;
      EXPECT_EQ(v, 1);
    });
    EXPECT_EQ(made, 1);
    // Many iterations: at most one T per worker, made by a worker that asked.
    const long n = scaled(200000);
    mote::parallel_for(0L, n, [&](long) {
      ++counts.local();
      used_on[index()].store(1, std::memory_order_relaxed);
    });
    EXPECT_EQ(counts.combine(0L, [](long a, long v) { return a + v; }), n + 1);
    int users = 0;
    for (unsigned w = 0; w < kWorkers; ++w) {
      EXPECT_LE(init_on[w].load(), 1) << "worker " << w;
      EXPECT_EQ(init_on[w].load(), used_on[w].load()) << "worker " << w;
      users += used_on[w].load();
    }
    EXPECT_EQ(inits.load(), users);
    made = 0;
    counts.for_each([&](long&) { ++made; });
    EXPECT_EQ(made, users);
    // clear(): none left; the next local() makes a fresh one.
    counts.clear();
    made = 0;
    counts.for_each([&](long&) { ++made; });
    EXPECT_EQ(made, 0);
    EXPECT_EQ(counts.combine(0L, [](long a, long v) { return a + v; }), 0);
    mote::parallel_for(0, 1, [&](int) { counts.local() += 5; });
    EXPECT_EQ(inits.load(), users + 1);
    EXPECT_EQ(counts.combine(0L, [](long a, long v) { return a + v; }), 5);
  });
  EXPECT_EQ(bad_index.load(), 0);
}

TEST(PerWorker, HistogramEqualsTheSerialOne) {
  mote::runtime rt(workers(4));
  std::mt19937_64 rng(mote_test::test_seed());
  const std::size_t n = static_cast<std::size_t>(scaled(300000, 4));
  std::vector<std::uint8_t> data(n);
  for (auto& d : data) d = static_cast<std::uint8_t>(rng() % 7 == 0 ? rng() % 8 : rng());
  std::vector<long> serial(256);
  for (std::uint8_t d : data) ++serial[d];
  mote::per_worker<std::vector<long>> hist(rt, [] { return std::vector<long>(256); });
  for (std::uint64_t g : {0ull, 1ull, 100ull}) {
    note("histogram, grain " + grain_name(g));
    hist.clear();
    rt.run([&] { pfor(std::size_t{0}, n, g, [&](std::size_t i) { ++hist.local()[data[i]]; }); });
    std::vector<long> total(256);
    hist.for_each([&](std::vector<long>& h) {
      for (std::size_t b = 0; b < 256; ++b) total[b] += h[b];
    });
    EXPECT_EQ(total, serial) << "grain " << grain_name(g);
    // With iterators and sub-ranges, accumulating on top.
    rt.run([&] {
      pfor(data.cbegin(), data.cend(), g,
           [&](std::vector<std::uint8_t>::const_iterator b,
               std::vector<std::uint8_t>::const_iterator e) {
             auto& h = hist.local();
             for (; b != e; ++b) ++h[*b];
           });
    });
    const std::vector<long> twice =
        hist.combine(std::vector<long>(256), [](std::vector<long> a, const std::vector<long>& h) {
          for (std::size_t b = 0; b < 256; ++b) a[b] += h[b];
          return a;
        });
    for (std::size_t b = 0; b < 256; ++b) ASSERT_EQ(twice[b], 2 * serial[b]) << "bin " << b;
  }
}

TEST(PerWorker, LocalOffItsRuntimesWorkersIsAUsageError) {
  mote::runtime rt(workers(2));
  mote::runtime other(workers(2));
  note("per_worker usage errors");
  mote::per_worker<int> bound(rt, [] { return 0; });
  EXPECT_THROW(bound.local(), mote::usage_error);                      // this thread
  EXPECT_THROW(other.run([&] { bound.local(); }), mote::usage_error);  // another runtime's worker
  bool threw = false;
  std::thread([&] {  // another outside thread
    try {
      bound.local();
    } catch (const mote::usage_error&) {
      threw = true;
    }
  })
      .join();
  EXPECT_TRUE(threw) << "local() from an outside thread";
  // A loop from this thread runs on the default runtime: not rt's workers.
  EXPECT_THROW(mote::parallel_for(0, 100, [&](int) { ++bound.local(); }), mote::usage_error);
  // Fine on rt's workers.
  rt.run([&] { mote::parallel_for(0, 100, [&](int) { ++bound.local(); }); });
  EXPECT_EQ(bound.combine(0, [](int a, int v) { return a + v; }), 100);
  // Made on a thread that is no worker: bound to the default runtime.
  mote::per_worker<long> on_default;
  EXPECT_THROW(on_default.local(), mote::usage_error);
  EXPECT_THROW(rt.run([&] { ++on_default.local(); }), mote::usage_error);
  mote::parallel_for(0, 1000, [&](int) { ++on_default.local(); });
  EXPECT_EQ(on_default.combine(0L, [](long a, long v) { return a + v; }), 1000);
  // Made on a worker of rt: bound to rt.
  rt.run([&] {
    mote::per_worker<long> on_rt;
    mote::parallel_for(0, 1000, [&](int) { ++on_rt.local(); });
    EXPECT_EQ(on_rt.combine(0L, [](long a, long v) { return a + v; }), 1000);
    EXPECT_THROW(other.run([&] { ++on_rt.local(); }), mote::usage_error);
  });
}

TEST(PerWorker, ElementsAreNotLeaked) {
  using mote_test::lifetime;
  const long before = lifetime::live.load();
  {
    mote::runtime rt(workers(4));
    note("per_worker lifetimes");
    std::atomic<int> inits{0};
    mote::per_worker<lifetime> p(rt, [&] {
      inits.fetch_add(1);
      return lifetime(0);
    });
    const long n = scaled(100000);
    for (int rep = 0; rep < 3; ++rep) {
      rt.run([&] { mote::parallel_for(0L, n, [&](long i) { p.local().value += i; }); });
      long made = 0;
      long sum = 0;
      p.for_each([&](lifetime& v) {
        ++made;
        sum += v.value;
      });
      EXPECT_EQ(sum, n * (n - 1) / 2);
      EXPECT_EQ(lifetime::live.load() - before, made);  // the Ts, and nothing else
      p.clear();
      EXPECT_EQ(lifetime::live.load(), before);
    }
    rt.run([&] { mote::parallel_for(0, 100, [&](int) { ++p.local().value; }); });
    EXPECT_GT(lifetime::live.load(), before);
    EXPECT_GE(inits.load(), 4);  // at least one per round
  }                              // p destroyed with live Ts
  EXPECT_EQ(lifetime::live.load(), before);
  EXPECT_EQ(lifetime::double_destroyed.load(), 0);
}

// ---- Randomized stress: 1, 2 and 4 workers ---------------------------------------------

TEST(LoopsRandom, OneWorker) {
  mote::runtime rt(workers(1));
  random_loops_on(rt, "1 worker", static_cast<int>(scaled(900, 30)), 100000, 2, 0.05, 11);
}

TEST(LoopsRandom, TwoWorkers) {
  mote::runtime rt(workers(2));
  random_loops_on(rt, "2 workers", static_cast<int>(scaled(1500, 36)), 100000, 2, 0.05, 12);
}

TEST(LoopsRandom, FourWorkersOversubscribed) {
  mote::runtime rt(workers(4));
  random_loops_on(rt, "4 workers", static_cast<int>(scaled(1500, 36)), 100000, 2, 0.05, 13);
}

TEST(LoopsRandom, TwoWorkersThatNeverSpin) {
  // A zero spin window: every idle worker parks at once, so loops start
  // with their team asleep.
  mote::runtime rt(workers(2, std::chrono::microseconds(0)));
  random_loops_on(rt, "2 workers, no spin", static_cast<int>(scaled(720, 36)), 100000, 2, 0.05, 14);
}

// ---- Waits in bodies: the starter keeps its own tasks available ------------------------
//
// A body may wait for a group whose tasks the loop's starter spawned before
// the loop; those sit on the starter's pool, private until someone asks. The
// starter, done with its share and waiting for the other participants, must
// run them or share them, or the body waiting for them never returns.

// One scenario that ends in milliseconds unless it deadlocks.
const int kDeadlockSeconds = mote_test::kSanitized ? 60 : 15;

// Spins (yielding) until count reaches n. Outside mote: the test holds a
// worker in a body on purpose.
void await_count(const std::atomic<int>& count, int n) {
  while (count.load(std::memory_order_acquire) < n) std::this_thread::yield();
}

TEST(LoopsWaits, ABodyWaitsForTasksTheStarterSpawnedBeforeTheLoop) {
  mote::runtime rt(workers(2));
  const int rounds = static_cast<int>(scaled(40, 4));
  for (int round = 0; round < rounds; ++round) {
    note("a body waits for the starter's tasks, round " + std::to_string(round), kDeadlockSeconds);
    std::atomic<int> ran{0};
    std::atomic<int> helper_in{0};
    std::atomic<int> helper_waited{0};
    rt.run([&] {
      mote::task_group outer;
      outer.spawn([&] {
        mote::task_group g;
        std::atomic<int> looping{0};
        // An idle worker may have asked for work: then the first spawn is
        // shared at once and it runs that one until the loop is open. The
        // second stays private to this worker.
        g.spawn([&] {
          await_count(looping, 1);
          ran.fetch_add(1);
        });
        g.spawn([&] { ran.fetch_add(1); });
        const int starter = mote::runtime::current_worker_index();
        looping.store(1, std::memory_order_release);
        mote::parallel_for(0, 2, mote::grain(1), [&](int) {
          if (mote::runtime::current_worker_index() == starter) {
            await_count(helper_in, 1);  // the starter's share ends after the other's began
          } else if (helper_in.exchange(1, std::memory_order_acq_rel) == 0) {
            // The other worker's wait may join this loop again and run the
            // starter's iteration too (if it comes first): that one passes.
            g.wait();
            helper_waited.fetch_add(1);
          }
        });
        g.wait();
      });
      outer.wait();
    });
    ASSERT_EQ(ran.load(), 2) << "round " << round;
    ASSERT_EQ(helper_waited.load(), 1) << "round " << round;
  }
}

// A random program of spawns and waits around a loop, nested up to `depth`:
// the starter spawns tasks into a few groups, then runs a loop whose bodies
// each wait for the groups given to them (one waiter per group, as a group
// allows), and may run such a program themselves.
struct wait_program_stats {
  std::atomic<long> spawned{0};
  std::atomic<long> ran{0};
  std::atomic<long> bodies{0};
  std::atomic<long> wrong{0};  // an iteration not run exactly once
};

void wait_program(std::uint64_t seed, int depth, wait_program_stats& st) {
  std::mt19937_64 rng(seed);
  const std::size_t groups = 1 + rng() % 3;
  std::vector<std::unique_ptr<mote::task_group>> g;
  for (std::size_t k = 0; k < groups; ++k) g.push_back(std::make_unique<mote::task_group>());
  const int tasks = static_cast<int>(rng() % 7);
  for (int t = 0; t < tasks; ++t) {
    st.spawned.fetch_add(1);
    const bool again = rng() % 4 == 0;  // spawns one more into its own group
    mote::task_group& into = *g[rng() % groups];
    into.spawn([&st, &into, again] {
      if (again) {
        st.spawned.fetch_add(1);
        into.spawn([&st] { st.ran.fetch_add(1); });
      }
      st.ran.fetch_add(1);
    });
  }
  const int n = 1 + static_cast<int>(rng() % 24);
  const std::uint64_t grain = rng() % 3 == 0 ? 0 : 1 + rng() % 3;
  std::vector<int> waiter(groups);  // the body that waits for each group
  for (auto& w : waiter) w = static_cast<int>(rng() % static_cast<std::uint64_t>(n));
  const std::uint64_t nest_seed = rng();
  std::vector<std::atomic<int>> visits(static_cast<std::size_t>(n));
  pfor(0, n, grain, [&](int i) {
    visits[static_cast<std::size_t>(i)].fetch_add(1);
    st.bodies.fetch_add(1);
    for (std::size_t k = 0; k < groups; ++k) {
      if (waiter[k] == i) g[k]->wait();
    }
    const std::uint64_t child = mix(nest_seed + static_cast<std::uint64_t>(i));
    if (depth > 0 && child % 3 == 0) wait_program(child, depth - 1, st);
  });
  for (auto& group : g) group->wait();
  for (auto& v : visits) {
    if (v.load() != 1) st.wrong.fetch_add(1);
  }
}

TEST(LoopsWaits, RandomSpawnsBeforeLoopsAndBodiesThatWaitForThem) {
  for (unsigned n : {2u, 4u}) {
    mote::runtime rt(workers(n));
    std::mt19937_64 seeds(mote_test::test_seed() + n);
    const int rounds = static_cast<int>(scaled(600, 10));
    for (int round = 0; round < rounds; ++round) {
      const std::uint64_t seed = seeds();
      note("spawns before loops, waits in bodies, " + std::to_string(n) + " workers, seed " +
               std::to_string(seed),
           kDeadlockSeconds);
      wait_program_stats st;
      // Half of the rounds inside a task of a group, as the report's case.
      if (seed % 2 == 0) {
        rt.run([&] { wait_program(seed, 2, st); });
      } else {
        rt.run([&] {
          mote::task_group outer;
          outer.spawn([&] { wait_program(seed, 2, st); });
          outer.wait();
        });
      }
      ASSERT_EQ(st.ran.load(), st.spawned.load()) << n << " workers, seed " << seed;
      ASSERT_EQ(st.wrong.load(), 0) << n << " workers, seed " << seed;
      ASSERT_GT(st.bodies.load(), 0) << n << " workers, seed " << seed;
    }
  }
}

// ---- The starter's context in every body ------------------------------------------------

TEST(LoopsContext, AGroupMadeInABodyIsBoundToTheStartersGroupOnEveryWorker) {
  // One body per worker at once (each waits for the others), so that the
  // starter's body and every helper's make a group while the starter's group
  // is cancelled.
  constexpr int kWorkers = 4;
  mote::runtime rt(workers(kWorkers));
  const int rounds = static_cast<int>(scaled(20, 4));
  int starter_bodies = 0;
  int starter_cancelled = 0;
  int helper_bodies = 0;
  int helper_cancelled = 0;
  for (int round = 0; round < rounds; ++round) {
    note("a group made in a body, round " + std::to_string(round), kDeadlockSeconds);
    std::atomic<int> arrived{0};
    std::atomic<int> cancelled{0};
    std::vector<int> bound(kWorkers, -1);
    std::vector<int> on_starter(kWorkers, 0);
    mote::task_group_status status = mote::task_group_status::complete;
    rt.run([&] {
      mote::task_group outer;
      outer.spawn([&] {
        const int starter = mote::runtime::current_worker_index();
        mote::parallel_for(0, kWorkers, mote::grain(1), [&](int i) {
          mote::task_group inner;
          arrived.fetch_add(1, std::memory_order_acq_rel);
          const bool mine = mote::runtime::current_worker_index() == starter;
          if (mine) {
            await_count(arrived, kWorkers);
            outer.cancel();
            cancelled.store(1, std::memory_order_release);
          } else {
            await_count(cancelled, 1);
          }
          bound[static_cast<std::size_t>(i)] = inner.is_cancelled() ? 1 : 0;
          on_starter[static_cast<std::size_t>(i)] = mine ? 1 : 0;
        });
      });
      status = outer.wait();
    });
    EXPECT_EQ(status, mote::task_group_status::canceled) << "round " << round;
    for (int i = 0; i < kWorkers; ++i) {
      ASSERT_NE(bound[static_cast<std::size_t>(i)], -1)
          << "body " << i << " did not run, round " << round;
      int& bodies = on_starter[static_cast<std::size_t>(i)] ? starter_bodies : helper_bodies;
      int& hit = on_starter[static_cast<std::size_t>(i)] ? starter_cancelled : helper_cancelled;
      ++bodies;
      hit += bound[static_cast<std::size_t>(i)];
    }
  }
  EXPECT_EQ(starter_bodies, rounds);
  EXPECT_EQ(helper_bodies, rounds * (kWorkers - 1));
  EXPECT_EQ(starter_cancelled, starter_bodies) << "groups made in the starter's bodies";
  EXPECT_EQ(helper_cancelled, helper_bodies) << "groups made in the helpers' bodies";
}

TEST(LoopsContext, AGroupMadeInABodyIsNotBoundToWhatItsHelperWasRunning) {
  // The helper joins the loop from a wait inside a task of a cancelled group
  // x; the loop runs in a task of group h, not cancelled. A group made in
  // any body is bound to h: none is cancelled.
  constexpr int kWorkers = 2;
  mote::runtime rt(workers(kWorkers));
  const int rounds = static_cast<int>(scaled(20, 4));
  for (int round = 0; round < rounds; ++round) {
    note("a helper inside a cancelled group, round " + std::to_string(round), kDeadlockSeconds);
    std::atomic<int> x_worker{-1};
    std::atomic<int> loop_started{0};
    std::atomic<int> arrived{0};
    std::vector<int> bound(kWorkers, -1);
    std::vector<int> on_helper(kWorkers, 0);
    mote::task_group h(rt);  // made here: its tasks come in through the injection queue
    std::thread x_thread([&] {
      rt.run([&] {
        mote::task_group x;
        x.spawn([&] {
          x.cancel();
          x_worker.store(mote::runtime::current_worker_index(), std::memory_order_release);
          // Busy until the other worker has taken h's task and is in its
          // loop; then wait for h, which helps: it joins the loop.
          await_count(loop_started, 1);
          (void)h.wait();
        });
        (void)x.wait();
      });
    });
    while (x_worker.load(std::memory_order_acquire) < 0) std::this_thread::yield();
    h.spawn([&] {
      mote::parallel_for(0, kWorkers, mote::grain(1), [&](int i) {
        mote::task_group inner;
        const bool helper = mote::runtime::current_worker_index() == x_worker.load();
        // The loop is open (its slot published before this body began): the
        // helper's wait finds it on its first look.
        if (!helper) loop_started.store(1, std::memory_order_release);
        arrived.fetch_add(1, std::memory_order_acq_rel);
        await_count(arrived, kWorkers);  // one body per worker
        bound[static_cast<std::size_t>(i)] = inner.is_cancelled() ? 1 : 0;
        on_helper[static_cast<std::size_t>(i)] = helper ? 1 : 0;
      });
    });
    x_thread.join();
    int helper_bodies = 0;
    for (int i = 0; i < kWorkers; ++i) {
      ASSERT_EQ(bound[static_cast<std::size_t>(i)], 0)
          << "body " << i
          << (on_helper[static_cast<std::size_t>(i)] ? " (the helper's)" : " (the starter's)")
          << ", round " << round;
      helper_bodies += on_helper[static_cast<std::size_t>(i)];
    }
    ASSERT_EQ(helper_bodies, 1) << "round " << round;
  }
}

TEST(LoopsContext, ADataflowScopeMadeInABodyNestsInTheStartersTaskOnEveryWorker) {
  constexpr int kWorkers = 4;
  mote::runtime rt(workers(kWorkers));
  const int rounds = static_cast<int>(scaled(20, 4));
  int nested = 0;
  int read = 0;
  for (int round = 0; round < rounds; ++round) {
    note("a data-flow scope made in a body, round " + std::to_string(round), kDeadlockSeconds);
    long x = 7;
    long y = 0;
    std::atomic<int> arrived{0};
    std::vector<int> threw(kWorkers, 0);
    std::vector<long> seen(kWorkers, 0);
    rt.run([&] {
      mote::dataflow df;
      df.spawn(mote::inout(x), [&] {
        mote::parallel_for(0, kWorkers, mote::grain(1), [&](int i) {
          arrived.fetch_add(1, std::memory_order_acq_rel);
          await_count(arrived, kWorkers);  // one body per worker
          mote::dataflow inner;
          try {
            // Outside the parent task's accesses: refused in a nested scope.
            inner.spawn(mote::inout(y), [] {});
          } catch (const mote::usage_error&) {
            threw[static_cast<std::size_t>(i)] = 1;
          }
          // Within them: runs.
          inner.spawn(mote::in(x), [&, i] { seen[static_cast<std::size_t>(i)] = x; });
          inner.wait();
        });
      });
      df.wait();
    });
    for (int i = 0; i < kWorkers; ++i) {
      nested += threw[static_cast<std::size_t>(i)];
      read += seen[static_cast<std::size_t>(i)] == 7 ? 1 : 0;
    }
  }
  EXPECT_EQ(nested, rounds * kWorkers) << "scopes nested in the starter's data-flow task";
  EXPECT_EQ(read, rounds * kWorkers);
}

// ---- Cancellation of the group a loop runs in --------------------------------------------

enum class cancel_form { chunks, each, reduce, per_worker };
const char* cancel_form_name(cancel_form f) {
  switch (f) {
    case cancel_form::chunks:
      return "parallel_for body(b,e)";
    case cancel_form::each:
      return "parallel_for body(i) grain 1";
    case cancel_form::reduce:
      return "parallel_reduce";
    case cancel_form::per_worker:
      return "parallel_for with per_worker";
  }
  return "?";
}

// What the chunks of a cancelled loop did. A chunk is one call of the body
// (a batch: body(b, e), body(i) with grain 1, a reduction's block with a
// grain). A worker has seen the cancellation once a body of it has read
// `done` (acquire; set after cancel() returned); no chunk may start on it
// after that.
struct cancel_ledger {
  explicit cancel_ledger(std::uint64_t n, unsigned workers) : visits(n), seen(workers) {}
  std::vector<std::atomic<std::uint32_t>> visits;
  std::vector<std::atomic<int>> seen;
  std::atomic<int> done{0};
  std::atomic<long> started{0};
  std::atomic<long> finished{0};
  std::atomic<long> after_seen{0};  // chunks started on a worker that had seen it
  std::atomic<long> twice{0};       // an index run more than once
  std::atomic<long> off_worker{0};

  int begin_chunk(std::uint64_t b, std::uint64_t e) {
    const int w = mote::runtime::current_worker_index();
    if (w < 0 || w >= static_cast<int>(seen.size())) {
      off_worker.fetch_add(1);
      return 0;
    }
    if (seen[static_cast<std::size_t>(w)].load(std::memory_order_relaxed) != 0)
      after_seen.fetch_add(1);
    started.fetch_add(1);
    for (std::uint64_t k = b; k < e; ++k) {
      if (visits[k].fetch_add(1, std::memory_order_relaxed) != 0) twice.fetch_add(1);
    }
    return w;
  }
  void end_chunk(int w) {
    finished.fetch_add(1);
    if (done.load(std::memory_order_acquire) != 0)
      seen[static_cast<std::size_t>(w)].store(1, std::memory_order_relaxed);
  }
  testing::AssertionResult check() const {
    if (off_worker.load() != 0)
      return testing::AssertionFailure() << off_worker.load() << " chunks off the workers";
    if (after_seen.load() != 0)
      return testing::AssertionFailure()
             << after_seen.load() << " chunks started after their worker saw the cancellation";
    if (twice.load() != 0)
      return testing::AssertionFailure() << twice.load() << " iterations ran twice";
    if (started.load() != finished.load())
      return testing::AssertionFailure()
             << started.load() << " chunks started, " << finished.load() << " finished";
    return testing::AssertionSuccess();
  }
};

// Runs one loop of `form` over [0, n) with `chunk(b, e)` as each chunk's
// work, in the calling worker's context; returns the chunks per_worker
// counted (or -1 for the other forms).
template <class Chunk>
long cancel_loop(cancel_form f, std::uint64_t n, std::uint64_t grain, mote::runtime& rt,
                 Chunk&& chunk) {
  switch (f) {
    case cancel_form::chunks:
      pfor(std::uint64_t{0}, n, grain, [&](std::uint64_t b, std::uint64_t e) { chunk(b, e); });
      return -1;
    case cancel_form::each:
      mote::parallel_for(std::uint64_t{0}, n, mote::grain(1),
                         [&](std::uint64_t i) { chunk(i, i + 1); });
      return -1;
    case cancel_form::reduce: {
      using mote_test::lifetime;
      const lifetime r = mote::parallel_reduce(
          std::uint64_t{0}, n, mote::grain(grain == 0 ? 1 : grain), lifetime(0),
          [&](std::uint64_t b, std::uint64_t e, lifetime acc) {
            chunk(b, e);
            acc.value += static_cast<long>(e - b);
            return acc;
          },
          [](lifetime a, lifetime b) { return lifetime(a.value + b.value); });
      (void)r;  // unspecified after a cancellation
      return -1;
    }
    case cancel_form::per_worker: {
      mote::per_worker<long> counts(rt, [] { return 0L; });
      pfor(std::uint64_t{0}, n, grain, [&](std::uint64_t b, std::uint64_t e) {
        ++counts.local();
        chunk(b, e);
      });
      return counts.combine(0L, [](long a, long v) { return a + v; });
    }
  }
  return -1;
}

TEST(LoopsCancel, ALoopInACancelledGroupStartsNothing) {
  using mote_test::lifetime;
  const long live_before = lifetime::live.load();
  for (unsigned n : {1u, 2u, 4u}) {
    mote::runtime rt(workers(n));
    for (cancel_form f :
         {cancel_form::chunks, cancel_form::each, cancel_form::reduce, cancel_form::per_worker}) {
      note(std::string("cancelled before the loop: ") + cancel_form_name(f) + ", " +
               std::to_string(n) + " workers",
           kDeadlockSeconds);
      cancel_ledger l(10000, n);
      long counted = -2;
      mote::task_group_status status = mote::task_group_status::complete;
      rt.run([&] {
        mote::task_group g;
        g.spawn([&] {
          g.cancel();
          counted = cancel_loop(f, 10000, 0, rt, [&](std::uint64_t b, std::uint64_t e) {
            l.end_chunk(l.begin_chunk(b, e));
          });
        });
        status = g.wait();
      });
      EXPECT_EQ(status, mote::task_group_status::canceled);
      EXPECT_EQ(l.started.load(), 0) << cancel_form_name(f) << ", " << n << " workers";
      if (f == cancel_form::per_worker) EXPECT_EQ(counted, 0);
      EXPECT_TRUE(l.check());
    }
  }
  EXPECT_EQ(lifetime::live.load(), live_before);
  EXPECT_EQ(lifetime::double_destroyed.load(), 0);
}

// Every worker's first chunk waits for the others' (so each has one), then
// the cancellation comes (from the starter's body, or from a thread outside
// the runtime) and each reads it: not one chunk more starts anywhere.
void cancel_with_every_worker_inside(bool from_outside) {
  using mote_test::lifetime;
  constexpr unsigned kWorkers = 4;
  const long live_before = lifetime::live.load();
  mote::runtime rt(workers(kWorkers));
  const std::uint64_t n = 1 << 16;
  for (cancel_form f :
       {cancel_form::chunks, cancel_form::each, cancel_form::reduce, cancel_form::per_worker}) {
    for (std::uint64_t grain : {0ull, 1ull, 64ull}) {
      if ((f == cancel_form::each || f == cancel_form::reduce) && grain == 0)
        continue;  // one chunk per call only
      note(std::string("every worker in a chunk, cancelled from ") +
               (from_outside ? "outside: " : "a body: ") + cancel_form_name(f) + ", grain " +
               grain_name(grain),
           kDeadlockSeconds);
      cancel_ledger l(n, kWorkers);
      std::atomic<int> arrived{0};
      std::vector<std::atomic<int>> first(kWorkers);
      long counted = -2;
      mote::task_group_status status = mote::task_group_status::complete;
      mote::task_group* to_cancel = nullptr;
      std::atomic<int> ready{0};
      std::thread outside;
      if (from_outside) {
        outside = std::thread([&] {
          await_count(arrived, static_cast<int>(kWorkers));
          await_count(ready, 1);
          to_cancel->cancel();
          l.done.store(1, std::memory_order_release);
        });
      }
      rt.run([&] {
        mote::task_group g;
        to_cancel = &g;
        ready.store(1, std::memory_order_release);
        g.spawn([&] {
          const int starter = mote::runtime::current_worker_index();
          counted = cancel_loop(f, n, grain, rt, [&](std::uint64_t b, std::uint64_t e) {
            const int w = l.begin_chunk(b, e);
            if (first[static_cast<std::size_t>(w)].exchange(1) == 0) {
              arrived.fetch_add(1, std::memory_order_acq_rel);
              if (!from_outside && w == starter) {
                await_count(arrived, static_cast<int>(kWorkers));
                g.cancel();
                l.done.store(1, std::memory_order_release);
              }
              await_count(l.done, 1);
            }
            l.end_chunk(w);
          });
        });
        status = g.wait();
      });
      if (outside.joinable()) outside.join();
      const std::string what = std::string(cancel_form_name(f)) + ", grain " + grain_name(grain);
      EXPECT_EQ(status, mote::task_group_status::canceled) << what;
      EXPECT_TRUE(l.check()) << what;
      EXPECT_EQ(l.started.load(), static_cast<long>(kWorkers)) << what;
      if (f == cancel_form::per_worker) EXPECT_EQ(counted, static_cast<long>(kWorkers)) << what;
    }
  }
  EXPECT_EQ(lifetime::live.load(), live_before);
  EXPECT_EQ(lifetime::double_destroyed.load(), 0);
}

TEST(LoopsCancel, ACancelFromABodyStopsEveryWorker) { cancel_with_every_worker_inside(false); }

TEST(LoopsCancel, ACancelFromOutsideStopsEveryWorker) { cancel_with_every_worker_inside(true); }

// Random loops (forms, grains, sizes, nested loops), cancelled from a body
// at a random iteration or from outside once it has run: no chunk starts on
// a worker after it has seen the cancellation, every started chunk ends,
// nothing runs twice, nothing leaks, the group's wait says canceled.
TEST(LoopsCancel, RandomLoopsCancelledFromABodyOrFromOutside) {
  using mote_test::lifetime;
  const long live_before = lifetime::live.load();
  for (unsigned workers_n : {1u, 2u, 4u}) {
    mote::runtime rt(workers(workers_n));
    std::mt19937_64 seeds(mote_test::test_seed() + 17 * workers_n);
    const int rounds = static_cast<int>(scaled(300, 10));
    for (int round = 0; round < rounds; ++round) {
      const std::uint64_t seed = seeds();
      std::mt19937_64 rng(seed);
      const auto f = static_cast<cancel_form>(rng() % 4);
      const std::uint64_t n = 1 + log_uniform(rng, 20000);
      std::uint64_t grain = random_grain(rng, n);
      if (grain > n) grain = n;
      if (f == cancel_form::each || (f == cancel_form::reduce && grain == 0)) grain = 1;
      const std::uint64_t at = rng() % n;  // the iteration that cancels, or lets the outside cancel
      const bool from_outside = rng() % 2 == 0;
      const bool nested = rng() % 3 == 0;
      const std::string what = std::string(cancel_form_name(f)) + " over " + std::to_string(n) +
                               ", grain " + grain_name(grain) + (nested ? ", nested" : "") +
                               ", cancelled at " + std::to_string(at) +
                               (from_outside ? " from outside" : " from a body") + ", " +
                               std::to_string(workers_n) + " workers, seed " + std::to_string(seed);
      note(what, kDeadlockSeconds);
      cancel_ledger l(n, workers_n);
      cancel_ledger inner(n * 4, workers_n);  // nested loops' chunks: 4 iterations per outer one
      std::atomic<int> reached{0};
      std::atomic<int> ready{0};
      mote::task_group* to_cancel = nullptr;
      mote::task_group_status status = mote::task_group_status::complete;
      long counted = -2;
      std::thread outside;
      if (from_outside) {
        outside = std::thread([&] {
          await_count(reached, 1);
          await_count(ready, 1);
          to_cancel->cancel();
          l.done.store(1, std::memory_order_release);
          inner.done.store(1, std::memory_order_release);
        });
      }
      rt.run([&] {
        mote::task_group g;
        to_cancel = &g;
        ready.store(1, std::memory_order_release);
        g.spawn([&] {
          counted = cancel_loop(f, n, grain, rt, [&](std::uint64_t b, std::uint64_t e) {
            const int w = l.begin_chunk(b, e);
            if (nested) {
              // A chunk's own loop: bound to the same group, stopped by it too.
              mote::parallel_for(b * 4, e * 4, mote::grain(1), [&](std::uint64_t i) {
                inner.end_chunk(inner.begin_chunk(i, i + 1));
              });
            }
            if (at >= b && at < e) {
              if (from_outside) {
                reached.store(1, std::memory_order_release);
                await_count(l.done, 1);
              } else {
                g.cancel();
                l.done.store(1, std::memory_order_release);
                inner.done.store(1, std::memory_order_release);
              }
            }
            l.end_chunk(w);
          });
        });
        status = g.wait();
      });
      if (outside.joinable()) outside.join();  // `at` runs before any cancellation: it got there
      ASSERT_EQ(status, mote::task_group_status::canceled) << what;
      ASSERT_TRUE(l.check()) << what;
      ASSERT_TRUE(inner.check()) << what << " (nested loops)";
      ASSERT_GE(l.started.load(), 1) << what;
      if (f == cancel_form::per_worker) ASSERT_EQ(counted, l.started.load()) << what;
      ASSERT_EQ(lifetime::live.load(), live_before) << what;
    }
  }
  EXPECT_EQ(lifetime::double_destroyed.load(), 0);
}

}  // namespace
