// Suite locks: the FIFO locks of include/mote/sync/ beside std::mutex and a
// test-and-set lock. One source, one executable per lock, named by
// MOTE_BENCH_LOCK (its runtime name in suites.json; the struct of that name in
// `locks` below):
//
//   bench_locks_ticket   mote_ticket   mote::ticket_lock
//   bench_locks_ptlock   mote_ptlock   mote::partitioned_ticket_lock (one slot per CPU)
//   bench_locks_dtlock   mote_dtlock   mote::delegation_lock<long> (plain lock in
//                                      handoff; lock_or_delegate, serving the
//                                      waiters, in get_item)
//   bench_locks_mutex    std_mutex     std::mutex
//   bench_locks_tas      tas           test-and-test-and-set with pause, then yield
//
// --workers N is the number of threads. Each repetition runs for --run-ms
// (50) of wall time and counts what was done, so an oversubscribed FIFO lock
// (a hand-off to a thread that is not running waits for its wake-up) cannot
// stretch the run.
//
// Kernels:
//   handoff   ns per acquisition, every thread acquiring in a loop around a
//             critical section of two shared increments. extra.handoff_share:
//             the fraction of acquisitions by another thread than the
//             previous holder (1 for a fair lock under contention).
//   get_item  ns per item taken from a shared counter, each item followed by
//             about 100 ns of private work: the ready-queue pattern of a
//             scheduler. The delegation lock's holder hands items to the
//             waiters in line before taking its own.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "../common/harness.hpp"
#include "mote/sync/delegation_lock.hpp"
#include "mote/sync/ticket_lock.hpp"

namespace {

using namespace mote_bench;

class tas_lock {
 public:
  void lock() noexcept {
    int spins = 0;
    for (;;) {
      if (!held_.load(std::memory_order_relaxed) && !held_.exchange(true, std::memory_order_acquire)) return;
      if (++spins < 64) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      } else {
        std::this_thread::yield();
      }
    }
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

// The locks, by name. kDelegates: the holder serves the waiters' requests
// (lock_or_delegate) in get_item.
namespace locks {
struct mote_ticket {
  using type = mote::ticket_lock;
  static constexpr bool kDelegates = false;
};
struct mote_ptlock {
  using type = mote::partitioned_ticket_lock;
  static constexpr bool kDelegates = false;
};
struct mote_dtlock {
  using type = mote::delegation_lock<long>;
  static constexpr bool kDelegates = true;
};
struct std_mutex {
  using type = std::mutex;
  static constexpr bool kDelegates = false;
};
struct tas {
  using type = tas_lock;
  static constexpr bool kDelegates = false;
};
}  // namespace locks

#ifndef MOTE_BENCH_LOCK
#error "MOTE_BENCH_LOCK names the lock, e.g. -DMOTE_BENCH_LOCK=mote_ticket (bench/CMakeLists.txt)"
#endif
#define MOTE_BENCH_STRINGIZE2(x) #x
#define MOTE_BENCH_STRINGIZE(x) MOTE_BENCH_STRINGIZE2(x)

using lock_type = locks::MOTE_BENCH_LOCK::type;
constexpr std::string_view kName = MOTE_BENCH_STRINGIZE(MOTE_BENCH_LOCK);
constexpr bool kDelegates = locks::MOTE_BENCH_LOCK::kDelegates;

struct alignas(128) shared_state {
  long counter = 0;
  long last_holder = -1;
  long handoffs = 0;
};
struct alignas(128) second_line {
  long touched = 0;
};

// About `n` dependent multiply-adds of private work.
inline long private_work(long seed, int n) {
  for (int i = 0; i < n; ++i) seed = seed * 6364136223846793005L + 1442695040888963407L;
  return seed;
}

std::unique_ptr<lock_type> make_lock(unsigned threads) {
  if constexpr (kDelegates) {
    return std::make_unique<lock_type>(threads);
  } else {
    (void)threads;
    return std::make_unique<lock_type>();
  }
}

// Runs `body(thread_index, stop)` on `threads` threads for `run_ms`; returns
// the wall seconds from the common start to the last thread's end.
template <class Body>
double timed(unsigned threads, long run_ms, Body body) {
  std::atomic<bool> go{false}, stop{false};
  std::atomic<unsigned> ready{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      body(t, stop);
    });
  }
  while (ready.load() != threads) std::this_thread::yield();
  const auto start = clock::now();
  go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::milliseconds(run_ms));
  stop.store(true, std::memory_order_relaxed);
  for (std::thread& th : pool) th.join();
  return seconds_between(start, clock::now());
}

void handoff(const options& o, long run_ms) {
  record r{"locks", "handoff", kName, o.workers, "ns", {}, 0, {}};
  double share_sum = 0;
  int counted = 0;
  int empty_reps = 0;
  for (int rep = -o.warmup; rep < o.reps; ++rep) {
    auto lock = make_lock(o.workers);
    shared_state s;
    second_line l2;
    const double secs = timed(o.workers, run_ms, [&](unsigned t, std::atomic<bool>& stop) {
      while (!stop.load(std::memory_order_relaxed)) {
        std::lock_guard<lock_type> hold(*lock);
        ++s.counter;
        ++l2.touched;
        if (s.last_holder != static_cast<long>(t)) {
          ++s.handoffs;
          s.last_holder = static_cast<long>(t);
        }
      }
    });
    if (rep < 0) continue;
    // No acquisition in the window (a loaded machine kept every thread off
    // the CPU): the window itself is the sample, a bound the real cost is
    // above, counted in extra.empty_reps; never a division by zero, which
    // would print inf, which JSON has not.
    if (s.counter == 0) ++empty_reps;
    const double done = static_cast<double>(std::max(s.counter, 1L));
    r.samples.push_back(1e9 * secs / done);
    share_sum += static_cast<double>(s.handoffs) / done;
    ++counted;
    r.result += s.counter == l2.touched ? 1 : 0;  // exclusion held in every rep
  }
  r.extra.add("run_ms", std::int64_t{run_ms}).add("handoff_share", share_sum / counted);
  r.extra.add("empty_reps", std::int64_t{empty_reps});
  emit(r);
}

// One item from the "ready queue" `next_item`, guarded by `lock`; a
// delegating lock's holder first hands items to the waiters in line and
// counts them in `served`.
template <class L>
long take_item(L& lock, unsigned t, long& next_item, std::atomic<long>& served) {
  long item;
  if constexpr (kDelegates) {
    if (lock.lock_or_delegate(t, item)) {
      long gave = 0;
      while (!lock.empty()) {
        lock.set_item(lock.front(), next_item++);
        lock.pop_front();
        ++gave;
      }
      item = next_item++;
      lock.unlock();
      served.fetch_add(gave, std::memory_order_relaxed);  // a count, read after the threads join
    }
  } else {
    std::lock_guard<L> hold(lock);
    item = next_item++;
  }
  return item;
}

void get_item(const options& o, long run_ms) {
  record r{"locks", "get_item", kName, o.workers, "ns", {}, 0, {}};
  double served_sum = 0;
  int counted = 0;
  int empty_reps = 0;
  for (int rep = -o.warmup; rep < o.reps; ++rep) {
    auto lock = make_lock(o.workers);
    long next_item = 0;  // the "ready queue", guarded by the lock
    std::atomic<long> taken{0}, served{0}, sink{0};
    const double secs = timed(o.workers, run_ms, [&](unsigned t, std::atomic<bool>& stop) {
      long mine = 0, local = t;
      while (!stop.load(std::memory_order_relaxed)) {
        const long item = take_item(*lock, t, next_item, served);
        ++mine;
        local = private_work(local + item, 30);
      }
      taken.fetch_add(mine);
      sink.fetch_add(local & 1);
    });
    if (rep < 0) continue;
    if (taken.load() == 0) ++empty_reps;  // as in handoff()
    const double done = static_cast<double>(std::max(taken.load(), 1L));
    r.samples.push_back(1e9 * secs / done);
    served_sum += static_cast<double>(served.load()) / done;
    ++counted;
    r.result += taken.load() == next_item ? 1 : 0;  // every item handed out once
  }
  r.extra.add("run_ms", std::int64_t{run_ms}).add("empty_reps", std::int64_t{empty_reps});
  if (kDelegates) r.extra.add("served_share", served_sum / counted);
  emit(r);
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse_options(argc, argv);
  const long run_ms = option_value(o, "--run-ms", o.quick ? 20 : 50);
  if (o.wants("handoff")) handoff(o, run_ms);
  if (o.wants("get_item")) get_item(o, run_ms);
  return 0;
}
