// The inline half of parallel loops (loops.hpp): what one participant runs.
//
// A loop is `units` units of work (iterations, or a reduction's blocks),
// split evenly into one stripe per seat of a team of workers. A participant
// claims batches from its own stripe with one fetch-and-add, then from the
// other stripes of its domain, then, through its domain's request combiner,
// from other domains (src/loops/loops.cpp, docs/loops.md). The claim from the
// participant's own stripe is inline here; the rest is compiled.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>

#include "mote/detail/platform.hpp"
#include "mote/detail/worker.hpp"
#include "mote/export.hpp"

namespace mote {
class task_group;
}  // namespace mote

namespace mote::detail {

struct loop_desc;  // src/loops/loops.hpp: one open loop, with its team's stripes
class loop_teams;  // src/loops/loops.hpp: every worker's team at every depth
class loop_claimer;

// Loops nested deeper than this on one worker run on that worker alone.
inline constexpr unsigned kMaxLoopDepth = 8;

// The worker slot (worker::slot) that holds a worker's loop_worker.
inline constexpr unsigned kLoopsSlot = 0;

// A worker's part in parallel loops: made before its thread starts, freed
// after it ends (src/loops/loops.cpp).
struct loop_worker {
  // The innermost loop this worker leads while it hands batches out, or
  // nullptr: where idle workers of its team look (written by the owner,
  // read by everyone), so on a line of its own.
  alignas(cache_line) std::atomic<loop_desc*> open{nullptr};
  // ---- Owner only ----
  // The nesting depth of the loop body running here (0 outside any).
  alignas(cache_line) unsigned depth = 0;
  // Loops this worker leads right now (they nest on its stack).
  unsigned leading = 0;
  const loop_teams* teams = nullptr;  // the runtime's
  // The state of the loop this worker leads as its open-th, on the team of
  // `depth`: made on first use and kept for the worker's life (an idle
  // worker may still hold a pointer to it).
  loop_desc* frames[kMaxLoopDepth][kMaxLoopDepth] = {};
};

inline loop_worker& loops_of(const worker& w) noexcept { return *static_cast<loop_worker*>(w.slot(kLoopsSlot)); }
// Offsets stay below this (so no fetch-and-add overshoot can wrap); a longer
// range runs as consecutive loops of this many units.
inline constexpr std::uint64_t kMaxLoopUnits = std::uint64_t{1} << 62;

// One stripe of a loop: [next, end) is still unclaimed. Claimed with
// fetch-and-add by its owner, and by others once theirs are empty, so it may
// run past end; it is never read as a claim when it does.
struct alignas(cache_line) loop_stripe {
  std::atomic<std::uint64_t> next{0};
  std::uint64_t end = 0;
};

// What a loop is, from the template side: the participate function runs
// batches from a claimer until it says none are left. Lives in the frame of
// the thread that started the loop.
struct loop_job {
  using participate_fn = void (*)(loop_job& job, loop_claimer& claims);
  participate_fn participate = nullptr;
  std::uint64_t units = 0;     // work units in the loop
  std::uint64_t grain = 0;     // units per batch; 0: adapt to about kTargetTicks per batch
  const void* site = nullptr;  // the body's identity: a grain learnt last time is reused
  // The first exception from a body; `failed` tells who stored it. Read by
  // the starter after the loop's completion, which orders the store before.
  std::atomic<bool> failed{false};
  std::exception_ptr error;
};

// Records the exception in flight as the loop's first failure and stops the
// claiming of new batches. Any participant; call from a catch block.
MOTE_API void loop_fail(loop_job& job, loop_claimer& claims) noexcept;

// Hands out batches to one participant. Made by the runtime, used by the
// template's participate function only.
class loop_claimer {
 public:
  // Body work per batch when no grain is given, in time-stamp-counter ticks.
  static constexpr std::uint64_t kTargetTicks = 2048;

  // Alone: the whole of [0, units) in batches of `grain` (0: one batch).
  explicit loop_claimer(std::uint64_t units, std::uint64_t grain) noexcept
      : own_(&solo_), own_end_(units), batch_(clamp_batch(grain == 0 ? units : grain)) {
    solo_.end = units;
  }
  // Seat `seat` of the open loop d.
  MOTE_API loop_claimer(loop_desc& d, unsigned seat, std::uint64_t grain, std::uint64_t hint) noexcept;

  // Batches reserved at once from the participant's own stripe, at most: a
  // fetch-and-add costs more than a 64-iteration body of a sum here. The
  // reservation is also at most 1/kReserveShare of what was left in the
  // stripe, so others can still even out the end of the loop.
  static constexpr std::uint64_t kMaxReserve = 16;
  static constexpr std::uint64_t kReserveShare = 16;
  // The largest batch: a loop has fewer than 2^62 units, so a larger grain
  // means the same; this bound keeps batch * kMaxReserve, and a combiner's
  // sum of 64 requests, below 2^63.
  static constexpr std::uint64_t kMaxBatch = kMaxLoopUnits / 64;

  // The next batch of units [*begin, *end), or false when nothing is left
  // for this participant (or the loop failed, or its group was cancelled).
  MOTE_ALWAYS_INLINE bool next(std::uint64_t* begin, std::uint64_t* end) noexcept {
    if (MOTE_LIKELY(reserved_ < reserved_end_) && !stopped()) {
      *begin = reserved_;
      *end = reserved_end_ - reserved_ < batch_ ? reserved_end_ : reserved_ + batch_;
      reserved_ = *end;
      ++batches_;
      units_ += *end - *begin;
      return true;
    }
    if (MOTE_LIKELY(own_ != nullptr)) {
      if (MOTE_UNLIKELY(--until_tune_ == 0)) retune();
      const std::uint64_t want = batch_ * reserve_;
      // Relaxed: a claim needs only atomicity. The loop's data is ordered by
      // its start (the gate the participant joined through) and its end (the
      // release of the participant's leave).
      const std::uint64_t b = own_->next.fetch_add(want, std::memory_order_relaxed);
      if (MOTE_LIKELY(b < own_end_ && !stopped())) {
        const std::uint64_t e = own_end_ - b < want ? own_end_ : b + want;
        window_units_ += e - b;
        // What this claim left in the stripe (as far as this owner knows)
        // sets the next reservation.
        const std::uint64_t left = (own_end_ - e) / batch_ / kReserveShare;
        reserve_ = left < 1 ? 1 : (left > kMaxReserve ? kMaxReserve : left);
        *begin = b;
        *end = e - b < batch_ ? e : b + batch_;
        reserved_ = *end;
        reserved_end_ = e;
        ++batches_;
        units_ += *end - *begin;
        return true;
      }
      own_ = nullptr;
    }
    return next_elsewhere(begin, end);
  }

  std::uint64_t batches() const noexcept { return batches_; }
  std::uint64_t units() const noexcept { return units_; }
  std::uint64_t remote_batches() const noexcept { return remote_; }
  std::uint64_t batch() const noexcept { return batch_; }
  loop_desc* desc() const noexcept { return desc_; }
  static constexpr std::uint64_t clamp_batch(std::uint64_t b) noexcept {
    return b == 0 ? 1 : (b > kMaxBatch ? kMaxBatch : b);
  }
  // Marks the loop stopped: no participant claims another batch.
  MOTE_API void stop() noexcept;
  // Hands out nothing more once g (the group the loop's starter runs in), or
  // a group g is bound to, is cancelled. The runtime's, before the first
  // next(); g may be nullptr (no group).
  void watch(const task_group* g) noexcept;

 private:
  bool stopped() const noexcept {
    // Relaxed: a hint; a batch claimed just after a failure runs, harmlessly.
    if (stop_ != nullptr && stop_->load(std::memory_order_relaxed)) return true;
    // Relaxed, as a task's start looks (task_group.hpp): while no group is
    // cancelled anywhere, one load of a line nobody writes. A thread that has
    // seen the group's cancel() (its own, or through an acquire that follows
    // it) reads a count that includes it, and then the group's flag.
    return cancels_ != nullptr && MOTE_UNLIKELY(cancels_->load(std::memory_order_relaxed) != 0) &&
           group_cancelled();
  }
  MOTE_API bool group_cancelled() const noexcept;
  MOTE_API bool next_elsewhere(std::uint64_t* begin, std::uint64_t* end) noexcept;
  MOTE_API void retune() noexcept;

  loop_stripe* own_;
  std::uint64_t own_end_;
  std::uint64_t batch_;
  std::uint64_t reserve_ = 1;      // batches the next own claim takes
  std::uint64_t reserved_ = 0;     // [reserved_, reserved_end_): claimed, not yet handed out
  std::uint64_t reserved_end_ = 0;
  std::uint64_t until_tune_ = ~std::uint64_t{0};  // claims left before the next retune()
  std::uint64_t batches_ = 0;
  std::uint64_t units_ = 0;
  std::uint64_t remote_ = 0;
  loop_desc* desc_ = nullptr;
  const std::atomic<bool>* stop_ = nullptr;
  // With a group to watch: the count of cancelled groups (task_group.hpp's
  // group_cancels_active), and the group.
  const std::atomic<std::uint32_t>* cancels_ = nullptr;
  const task_group* group_ = nullptr;
  unsigned seat_ = 0;
  unsigned cursor_ = 0;  // the next stripe of the domain to look at
  // Batch tuning (no grain given): the current window's first tick, the
  // units claimed from the own stripe since, and its length in claims.
  std::uint64_t window_start_ = 0;
  std::uint64_t window_units_ = 0;
  std::uint64_t window_len_ = 1;
  loop_stripe solo_;
};

// Runs job on the calling worker's team (or alone, when the loop is too deep,
// the runtime has one worker, or the loop has one batch). Returns when every
// batch has run, the loop failed, or the group the worker runs in was
// cancelled; does not rethrow (the caller does).
MOTE_API void run_loop(worker& w, loop_job& job);

}  // namespace mote::detail
