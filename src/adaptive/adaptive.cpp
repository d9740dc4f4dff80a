// Adaptive offloading's shared pieces: the cycle counter's rate, the sites'
// totals and their MOTE_STATS lines; and join's model, attached to each
// worker of an adaptive runtime.
#include "mote/detail/adaptive.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/extension.hpp"
#include "core/runtime_impl.hpp"

namespace mote::detail {

struct site_access {
  static std::atomic<std::uint64_t>& offloaded(site& s) noexcept { return s.offloaded_; }
  static std::atomic<std::uint64_t>& inlined(site& s) noexcept { return s.inlined_; }
  static std::atomic<bool>& listed(site& s) noexcept { return s.listed_; }
  static site*& next(site& s) noexcept { return s.next_; }
};

std::uint64_t (*cycle_clock_override)() noexcept = nullptr;

namespace {

std::uint64_t calibrate_ticks_per_us() noexcept {
  // The median of three short windows against the monotonic clock.
  std::uint64_t rates[3];
  for (std::uint64_t& rate : rates) {
    const std::int64_t t0 = now_ns();
    const std::uint64_t c0 = raw_cycle_clock();
    std::int64_t t1 = t0;
    while (t1 - t0 < 70'000) t1 = now_ns();
    const std::uint64_t c1 = raw_cycle_clock();
    rate = (c1 - c0) * 1000 / static_cast<std::uint64_t>(t1 - t0);
  }
  std::sort(rates, rates + 3);
  return rates[1] != 0 ? rates[1] : 1;
}

// The sites with counts, newest first: pushed once each, never removed.
std::atomic<site*> listed_sites{nullptr};

// A type site's name is the __PRETTY_FUNCTION__ of type_site_name<F>: keep
// the part that names F.
std::string display_name(const char* name) {
  std::string s = name;
  const char* const markers[] = {"[with F = ", "[F = "};
  for (const char* m : markers) {
    const auto at = s.find(m);
    if (at != std::string::npos) {
      std::string t = s.substr(at + std::strlen(m));
      if (!t.empty() && t.back() == ']') t.pop_back();
      return "type " + t;
    }
  }
  return s;
}

void print_sites() {
  std::vector<site*> sites;
  // Acquire: pairs with flush_site's release CAS; each site's name and link
  // are visible.
  for (site* s = listed_sites.load(std::memory_order_acquire); s != nullptr; s = site_access::next(*s)) {
    sites.push_back(s);
  }
  if (sites.empty()) return;
  std::fprintf(stderr, "mote: adaptive offloading (MOTE_STATS): %zu sites\n", sites.size());
  std::fprintf(stderr, "%14s %14s  %s\n", "offloaded", "inlined", "site");
  for (auto it = sites.rbegin(); it != sites.rend(); ++it) {
    site* s = *it;
    std::fprintf(stderr, "%14llu %14llu  %s\n", static_cast<unsigned long long>(s->offloaded()),
                 static_cast<unsigned long long>(s->inlined()), display_name(s->name()).c_str());
  }
}

bool stats_wanted() noexcept {
  const char* v = std::getenv("MOTE_STATS");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace

std::uint64_t ticks_per_us() noexcept {
  static const std::uint64_t rate = calibrate_ticks_per_us();
  return rate;
}

void flush_site(site* s, std::uint64_t offloaded, std::uint64_t inlined) noexcept {
  // Relaxed: totals, read at exit (after the owners flushed, in the thread
  // that ends the process) or by a caller that has joined the owners.
  site_access::offloaded(*s).fetch_add(offloaded, std::memory_order_relaxed);
  site_access::inlined(*s).fetch_add(inlined, std::memory_order_relaxed);
  static const bool print = stats_wanted() && std::atexit(print_sites) == 0;
  (void)print;
  // The first flush of a site lists it: the exchange makes exactly one caller
  // the one that pushes it.
  if (site_access::listed(*s).exchange(true, std::memory_order_relaxed)) return;
  site* head = listed_sites.load(std::memory_order_relaxed);
  do {
    site_access::next(*s) = head;
    // Release: the link written above is visible to print_sites' acquire.
  } while (!listed_sites.compare_exchange_weak(head, s, std::memory_order_release, std::memory_order_relaxed));
}

// ---- join's model: one per worker (runtime_options::adaptive) ----------------

namespace {

void* make_join_offload(worker& w, void*) {
  const runtime_impl& rt = w.runtime();
  if (!rt.config().adaptive) return nullptr;
  // Re-probe within a quarter of the spin window (a site's work is half of
  // its pairs' time, or less): while this worker runs its pairs
  // in place the others find no work, and a probe must come before they
  // park (a probe to a parked worker is not stolen, and measures nothing).
  // Hand-off samples over 20 us were a sleeping or busy thief: not the
  // cost of a hand-off to a worker that is looking for work.
  const std::int64_t spin_us = rt.spin_ns() / 1000;
  const std::uint64_t probe_us = spin_us > 0 ? static_cast<std::uint64_t>(std::clamp<std::int64_t>(spin_us / 4, 5, 500)) : 500;
  return new join_offload(offload_model::defaults(probe_us, 20));
}

// Adds its counts to the sites (MOTE_STATS).
void free_join_offload(void* p) noexcept { delete static_cast<join_offload*>(p); }

}  // namespace

extern const model_hooks adaptive_join_model;
const model_hooks adaptive_join_model = {
    .name = "adaptive join",
    .slot = kAdaptiveSlot,
    .make_runtime = nullptr,
    .free_runtime = nullptr,
    .make_worker = make_join_offload,
    .free_worker = free_join_offload,
    .thread_begin = nullptr,
    .thread_end = nullptr,
    .help = nullptr,
    .visible = nullptr,
};

}  // namespace mote::detail
