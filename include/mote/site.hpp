// mote::site: a call site of adaptive offloading (docs/adaptive.md).
#pragma once

#include <atomic>
#include <cstdint>

#include "mote/export.hpp"

namespace mote {

namespace detail {
struct site_access;
}  // namespace detail

// A call site whose tasks share one estimate of their duration, for the
// decision to offload or run in place (mote::assistant::submit, and mote::join
// under runtime_options::adaptive). Without one, the closure's type is the
// site: every task made by one lambda expression shares an estimate. Give a
// site where one closure type makes tasks of very different sizes (a
// std::function, a function pointer, one lambda over inputs of many sizes),
// or for a name in MOTE_STATS. A site is a static object; the name must
// outlive it (a string literal).
//
//   static mote::site small_parse{"parse small"};
//   helper.submit(small_parse, [&] { parse(chunk); });
//   auto [a, b] = mote::join(small_parse, [&] { return f(); }, [&] { return g(); });
class site {
 public:
  explicit constexpr site(const char* name) noexcept : name_(name) {}
  site(const site&) = delete;
  site& operator=(const site&) = delete;

  const char* name() const noexcept { return name_; }
  // Tasks of this site handed to another thread, and run in place, so far:
  // counted by each owner and added here when it flushes its counts (when an
  // assistant or a runtime ends, or the owner's table of sites needs the
  // room). MOTE_STATS=1 prints them at exit.
  std::uint64_t offloaded() const noexcept { return offloaded_.load(std::memory_order_relaxed); }
  std::uint64_t inlined() const noexcept { return inlined_.load(std::memory_order_relaxed); }

 private:
  friend struct detail::site_access;
  const char* name_;
  // Relaxed counters: totals read at exit or by a caller after the owners
  // flushed; the flush that adds them is what orders them (see flush_site).
  std::atomic<std::uint64_t> offloaded_{0};
  std::atomic<std::uint64_t> inlined_{0};
  // The list of sites with counts, for MOTE_STATS (pushed once, lock-free).
  site* next_ = nullptr;
  std::atomic<bool> listed_{false};
};

}  // namespace mote
