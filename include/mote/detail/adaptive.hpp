// The decision behind adaptive offloading: run a task in place, or hand it to
// another thread (docs/adaptive.md). One offload_model per owner (an
// assistant's owner thread, a worker); it is the owner's alone, so nothing in
// it is shared or atomic.
//
// The model: two tasks of W ticks handed across cores take at least W + H,
// where H, the hand-off cost, is the time from handing a task over to the
// other thread starting it plus the time from its end to the owner seeing
// that (about one core-to-core round trip when the other side is spinning).
// Back to back on one thread they take 2W. So offloading pays when W > H,
// and every decision compares the call site's estimate of W with the owner's
// estimate of H. Both are moving averages of measurements in cycle-counter
// ticks, taken on a sample of the calls (timing every call would cost more
// than the tiniest tasks): one call in `sample_here` that runs in place is
// timed; one offload in `sample_away` is timed end to end (a probe). A site
// that runs in place is probed now and then (after about `probe_ticks` of its
// own work) so that a change of the host's round trip, or of the data, is
// noticed.
#pragma once

#include <cstdint>

#include "mote/detail/platform.hpp"
#include "mote/export.hpp"
#include "mote/site.hpp"

#if defined(__x86_64__) || defined(__i386__)
#  include <x86intrin.h>
#endif

namespace mote::detail {

// Tests replace the cycle counter with their own (set it before the threads
// that use it start; nullptr: the real one).
MOTE_API extern std::uint64_t (*cycle_clock_override)() noexcept;

// The hardware's cycle counter (the time-stamp counter on x86: constant
// rate, and synchronized between cores on the machines mote targets).
inline std::uint64_t raw_cycle_clock() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return static_cast<std::uint64_t>(now_ns());
#endif
}

// The cycle counter the decisions are measured in.
inline std::uint64_t cycle_clock() noexcept {
  if (MOTE_UNLIKELY(cycle_clock_override != nullptr)) return cycle_clock_override();
  return raw_cycle_clock();
}

// Cycle-counter ticks per microsecond (the hardware's, whatever
// cycle_clock_override says), calibrated against the clock once (about
// 200 us, on first use).
MOTE_API std::uint64_t ticks_per_us() noexcept;

// Adds an owner's counts to the site's totals (relaxed atomics) and lists the
// site for MOTE_STATS.
MOTE_API void flush_site(site* s, std::uint64_t offloaded, std::uint64_t inlined) noexcept;

// The site of the tasks one closure type makes: one static object per type,
// named after the type for MOTE_STATS.
template <class F>
constexpr const char* type_site_name() noexcept {
  return __PRETTY_FUNCTION__;
}
template <class F>
inline constinit site type_site{type_site_name<F>()};

class offload_model {
 public:
  enum class choice : std::uint8_t {
    here,        // run it in place
    here_timed,  // run it in place and report its ticks (note_work)
    away,        // hand it over
    away_timed,  // hand it over, timed end to end (note_work, note_handoff)
  };

  struct params {
    std::uint32_t sample_here = 16;     // time one in-place run in this many
    std::uint32_t sample_away = 32;     // time one offload in this many
    std::uint64_t probe_ticks = 1;      // a site's own work between re-probes
    std::uint64_t discard_ticks = ~std::uint64_t{0};  // longer hand-offs were sleeps: not counted
    std::uint64_t short_ticks = 0;      // tasks shorter than this are timed 4x less often
    std::uint32_t slow_run = 8;         // this many slow samples in a row count after all
    std::uint32_t burst = 4;            // probes in a row (the first one's hand-off is not counted)
    std::uint32_t retry = 32;           // calls until the next probe after one that measured nothing
    std::uint32_t min_probe_calls = 64;        // re-probe interval bounds, in calls
    std::uint32_t max_probe_calls = 1u << 20;
  };

  // One call site as this owner knows it.
  struct entry {
    site* key = nullptr;
    std::uint32_t salt = 0;
    std::uint64_t work = 0;          // ticks per task, moving average; 0: not measured yet
    std::uint32_t until_sample = 1;  // calls until the next timed one
    std::uint32_t until_probe = 1;   // calls in place until the next probe
    std::uint32_t burst = 0;         // probes left in the current burst
    bool warm = true;                // false: the burst's first hand-off is still to come
    std::uint64_t here = 0;          // counts since the last flush
    std::uint64_t away = 0;
  };

  static constexpr unsigned kEntries = 64;

  offload_model() noexcept = default;
  explicit offload_model(const params& p) noexcept : p_(p) {}
  ~offload_model() { flush(); }
  offload_model(const offload_model&) = delete;
  offload_model& operator=(const offload_model&) = delete;

  // Real parameters: probes after about `probe_us` of a site's work; hand-off
  // samples over `discard_us` are dropped (the other side was asleep or
  // preempted: that is not what a hand-off costs while it is spinning).
  static params defaults(std::uint64_t probe_us = 500, std::uint64_t discard_us = 20) noexcept {
    params p;
    const std::uint64_t t = ticks_per_us();
    p.probe_ticks = probe_us * t;
    p.discard_ticks = discard_us * t;
    p.short_ticks = t / 10;  // 100 ns
    return p;
  }

  // The entry of site s (a direct-mapped table: a site that collides with
  // another takes its entry, whose counts are flushed first).
  // `salt` tells apart entries of one site (join: the nesting depth).
  entry& find(site* s, std::uint32_t salt = 0) noexcept {
    const std::uint64_t bits = (static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(s)) >> 3) +
                               (std::uint64_t{salt} << 32) + salt;
    entry& e = table_[(bits * 0x9E3779B97F4A7C15ull) >> (64 - kLog2Entries)];
    if (MOTE_UNLIKELY(e.key != s || e.salt != salt)) claim(e, s, salt);
    return e;
  }

  choice decide(entry& e) noexcept {
    // A new site runs in place, timed: its size, the cheap way.
    if (MOTE_UNLIKELY(e.work == 0)) {
      ++e.here;
      return choice::here_timed;
    }
    // handoff_ == 0 (not measured yet) offloads, and the first offload of
    // each site is timed (until_sample starts at 1): a probe.
    // Offload when the task outweighs the hand-off by a margin (1/8): near
    // the crossover either choice costs about the same, and the estimates
    // are noisy; a pair flipping back and forth pays for the probes.
    if (e.work >= handoff_ + (handoff_ >> 3)) {
      ++e.away;
      if (--e.until_sample == 0) {
        e.until_sample = p_.sample_away;
        return choice::away_timed;
      }
      return choice::away;
    }
    if (MOTE_UNLIKELY(--e.until_probe == 0)) {
      // Probes come in bursts of `burst` calls in a row, and the first
      // one's hand-off is not counted: after a stretch in place the other
      // side has been idle for a while and answers the first hand-off more
      // slowly than it answers a stream of them, which is what offloading
      // would be.
      if (e.burst == 0) {
        e.burst = p_.burst;
        e.warm = false;
      }
      e.until_probe = --e.burst != 0 ? 1 : probe_interval(e.work);
      ++e.away;
      return choice::away_timed;
    }
    ++e.here;
    if (--e.until_sample == 0) {
      // Tasks shorter than short_ticks are timed four times less often:
      // reading the clock twice costs a few percent of them.
      e.until_sample = e.work < p_.short_ticks ? 4 * p_.sample_here : p_.sample_here;
      return choice::here_timed;
    }
    return choice::here;
  }

  // A timed run of e's task took `ticks` (in place, or on the other side).
  // A moving average over about four samples; one sample moves it at most
  // 4x up (a preemption inside a timed run is not the task's size).
  void note_work(entry& e, std::uint64_t ticks) noexcept {
    if (ticks == 0) ticks = 1;
    if (e.work == 0) {
      // The first size: in place from now on, if short, until a probe.
      e.work = ticks;
      e.until_probe = probe_interval(ticks);
      // The first offload is timed while the hand-off is unknown.
      e.until_sample = handoff_ == 0 ? 1 : p_.sample_here;
      return;
    }
    if (ticks > 4 * e.work) ticks = 4 * e.work;
    e.work = average(e.work, ticks);
  }

  // A timed offload of e's task measured a hand-off of `ticks` (the time
  // from handing over to the other side starting, plus from its end to the
  // owner seeing it). Returns false when the sample was dropped as a sleep,
  // and then probes again soon, while the other side is surely awake.
  bool note_handoff(entry& e, std::uint64_t ticks) noexcept {
    if (ticks > p_.discard_ticks) {
      // Dropped, unless the hand-offs are slow every time (the other side
      // shares this core, or is always busy): then slow is what they cost.
      if (++slow_in_row_ < p_.slow_run) {
        ++discarded_;
        e.until_probe = p_.retry;
        return false;
      }
    } else {
      slow_in_row_ = 0;
    }
    if (!e.warm) {
      e.warm = true;  // the first of a burst
      ++cold_;
      return true;
    }
    if (ticks == 0) ticks = 1;
    if (handoff_ == 0) {
      handoff_ = ticks;
    } else {
      if (ticks > 4 * handoff_) ticks = 4 * handoff_;
      handoff_ = average(handoff_, ticks);
    }
    ++handoffs_;
    return true;
  }
  // A timed offload that measured no hand-off (the other side did not take
  // it, or the owner was not waiting when it ended).
  void no_handoff(entry& e) noexcept {
    if (handoff_ == 0 || e.work < handoff_) e.until_probe = p_.retry;
  }

  std::uint64_t handoff() const noexcept { return handoff_; }
  void set_handoff(std::uint64_t ticks) noexcept { handoff_ = ticks; }
  std::uint64_t handoff_samples() const noexcept { return handoffs_; }
  std::uint64_t discarded_samples() const noexcept { return discarded_; }
  std::uint64_t cold_samples() const noexcept { return cold_; }
  const params& parameters() const noexcept { return p_; }

  // Adds every entry's counts to its site (flush_site) and zeroes them.
  void flush() noexcept {
    for (entry& e : table_) flush(e);
  }

  // Calls in place between bursts of probes: about probe_ticks of the
  // site's work, or more when a hand-off is much longer than the task: a
  // probe then costs about H - W more than running in place, and a burst's
  // cost stays under about 1% of the work between bursts.
  std::uint32_t probe_interval(std::uint64_t work) const noexcept {
    const std::uint64_t w = work != 0 ? work : 1;
    std::uint64_t ticks = p_.probe_ticks;
    if (handoff_ > w) {
      const std::uint64_t budget = (handoff_ - w) * p_.burst * 100;
      if (budget > ticks) ticks = budget;
    }
    std::uint64_t calls = ticks / w;
    if (calls < p_.min_probe_calls) calls = p_.min_probe_calls;
    if (calls > p_.max_probe_calls) calls = p_.max_probe_calls;
    return static_cast<std::uint32_t>(calls);
  }

 private:
  static constexpr unsigned kLog2Entries = 6;
  static_assert((1u << kLog2Entries) == kEntries);

  static std::uint64_t average(std::uint64_t old, std::uint64_t sample) noexcept {
    // old + (sample - old) / 4, in unsigned arithmetic.
    return sample >= old ? old + (sample - old) / 4 : old - (old - sample) / 4;
  }
  void flush(entry& e) noexcept {
    if (e.key != nullptr && (e.here != 0 || e.away != 0)) flush_site(e.key, e.away, e.here);
    e.here = 0;
    e.away = 0;
  }
  MOTE_NOINLINE void claim(entry& e, site* s, std::uint32_t salt) noexcept {
    flush(e);
    e = entry{};
    e.key = s;
    e.salt = salt;
  }

  entry table_[kEntries];
  std::uint64_t handoff_ = 0;  // ticks, moving average; 0: not measured yet
  std::uint64_t handoffs_ = 0;
  std::uint64_t discarded_ = 0;
  std::uint64_t cold_ = 0;
  std::uint32_t slow_in_row_ = 0;  // hand-off samples over discard_ticks in a row
  params p_;
};

// runtime_options::adaptive: a worker's offload model for join, and the
// nesting depth of adaptive joins on it (a part of the site's key: the tasks
// of a recursive site differ in size by depth). Owner only. Made before the
// worker's thread starts, freed (its counts added to the sites) after it
// ends (src/adaptive/adaptive.cpp).
struct join_offload {
  explicit join_offload(const offload_model::params& p) noexcept : model(p) {}
  offload_model model;
  std::uint32_t depth = 0;
};

// The worker slot (worker::slot) that holds a worker's join_offload, or
// nullptr when the runtime is not adaptive.
inline constexpr unsigned kAdaptiveSlot = 2;

}  // namespace mote::detail
