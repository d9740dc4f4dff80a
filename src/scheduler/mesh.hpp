// scheduler_policy::mesh: XQueue's mesh of lock-less queues (docs/scheduler.md
// has the argument; the comment beside each atomic names what it pairs with).
//
//   producer p (a worker)                   consumer c (the worker that owns row c)
//   ---------------------                   ---------------------------------------
//   target: the next worker round-robin;    take its row's token (one exchange);
//   redirect (NA-RP): a worker nearer by     answer a pending steal request
//   NUMA node that reports under-loaded;      (NA-WS: migrate up to half its tasks
//   push on cell [target][p], an SPSC          into the thief's cell from c);
//   ring (mote::cached_ring): p is its         pop one task, the cells in turn;
//   only producer, target its only             empty: post a steal request to the
//   consumer. Full: the next cell, then        nearest loaded worker; unanswered
//   the caller's fallback (its pool).          for kForceAfterNs: take the victim's
//                                              token and migrate the tasks itself.
//
// Row c holds one cell per producer: an N x N mesh. A cell's consumer side is
// held by whoever holds row c's token: the owner, or a worker rescuing tasks
// from an owner that stopped answering (a long task, a blocking call). So a
// ready task never waits for its owner for much longer than kForceAfterNs
// while another worker is awake to look.
//
// The class knows nothing of the runtime (tests drive it directly with a
// simulated topology); the policy in mesh.cpp wraps it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/config.hpp"
#include "mote/detail/platform.hpp"
#include "mote/detail/task.hpp"
#include "mote/queues/ring.hpp"

namespace mote::detail {

class mesh_queues {
 public:
  static constexpr unsigned kNone = ~0u;
  // A steal request unanswered this long (ns) is served by the thief itself.
  static constexpr std::int64_t kForceAfterNs = 20'000;
  // At most this many tasks move per answered request (the seed's S_steal:
  // small for fine-grained tasks).
  static constexpr std::size_t kStealMax = 32;
  // A producer looks at most this many of its nearest workers for one that
  // reports under-loaded (NA-RP).
  static constexpr unsigned kRedirectProbe = 8;
  // A thief measures at most this many rows per balancing step (NA-WS).
  static constexpr unsigned kVictimProbe = 8;

  // Per row, written by one thread at a time (the row's owner or the thread
  // named beside each), read after the workers stopped.
  struct row_stats {
    std::uint64_t redirects = 0;     // tasks this producer steered off its round-robin target
    std::uint64_t migrated_out = 0;  // tasks this owner moved to thieves (answers)
    std::uint64_t migrated_in = 0;   // tasks this worker took from a silent owner (forced)
    std::uint64_t requests = 0;      // steal requests this worker posted
    std::uint64_t answers = 0;       // requests this owner answered with at least one task
    std::uint64_t forced = 0;        // rescues this worker made
    std::uint64_t max_len = 0;       // the row's length at the owner's takes: max and sum
    std::uint64_t sum_len = 0;
    std::uint64_t samples = 0;
  };

  // worker_nodes[i]: the NUMA node of worker i (any numbers: equal means
  // same node, and nodes whose numbers differ less are taken as nearer, the
  // topology having no distance table). cell_capacity 0: a default that
  // keeps the mesh's memory bounded as N grows. sample: count row lengths at
  // every take (MOTE_STATS). Throws std::bad_alloc, std::invalid_argument
  // (no workers).
  mesh_queues(const std::vector<unsigned>& worker_nodes, mesh_balance balance,
              std::size_t cell_capacity = 0, bool sample = false);
  mesh_queues(const mesh_queues&) = delete;
  mesh_queues& operator=(const mesh_queues&) = delete;

  unsigned size() const noexcept { return n_; }
  std::size_t cell_capacity() const noexcept { return cap_; }
  mesh_balance balance() const noexcept { return balance_; }

  // Producer p (its thread only) places t. Returns the worker whose cell took
  // it, kNone when every cell of p is full (t is still the caller's: it must
  // go elsewhere). *redirected: NA-RP chose the worker.
  // NOLINTNEXTLINE(bugprone-exception-escape): it never closes its rings
  unsigned push(unsigned p, task* t, bool* redirected) noexcept;

  // Owner c (its thread only): answers a pending steal request (NA-WS, when
  // on; *answered_to is the thief, *migrated how many tasks moved), then
  // takes one task of row c. nullptr when the row is empty or a rescuer holds
  // its token.
  task* pop(unsigned c, unsigned* answered_to, std::size_t* migrated) noexcept;
  // Owner c between its own spawns: answers a pending steal request as pop()
  // does, and takes nothing. True when tasks moved.
  bool answer(unsigned c, unsigned* answered_to, std::size_t* migrated) noexcept;

  // Owner c found nothing: the balancing step. Posts a steal request to the
  // nearest worker with tasks (a thief has one request out at a time); once
  // it went unanswered for kForceAfterNs (by `now`, ns), takes that worker's
  // token and moves up to half its tasks into row c, returning one of them
  // (*victim and *migrated say from where and how many, the returned one
  // included). nullptr otherwise.
  task* balance_step(unsigned c, std::int64_t now, unsigned* victim,
                     std::size_t* migrated) noexcept;

  // Tasks in row c now (acquire loads of each cell's indices: a snapshot).
  std::size_t row_length(unsigned c) const noexcept;
  // Any task in any cell? After a seq_cst fence (park()'s last look; see
  // mesh.cpp).
  bool visible() const noexcept;
  // Does row c report under-loaded (its owner found it empty, and no push
  // came since)? A relaxed hint.
  bool hungry(unsigned c) const noexcept {
    return rows_[c]->hungry.load(std::memory_order_relaxed);
  }
  // The order in which worker c looks at the others: nearest node first.
  const std::vector<unsigned>& order(unsigned c) const noexcept { return order_[c]; }

  const row_stats& stats(unsigned c) const noexcept { return rows_[c]->st; }

 private:
  using cell = cached_ring<task*>;

  struct alignas(cache_line) row {
    std::vector<std::unique_ptr<cell>> cells;  // cells[p]: producer p's ring into this row
    // The consumer token: true while a thread holds row's consumer side.
    alignas(cache_line) std::atomic<bool> busy{false};
    // A steal request: 0, or the thief's index + 1. Posted by a thief (CAS
    // from 0), cleared by the token's holder.
    alignas(cache_line) std::atomic<std::uint32_t> request{0};
    // The owner's report: its row was empty at its last take.
    alignas(cache_line) std::atomic<bool> hungry{false};
    // ---- Private to the row's worker (as owner, producer or thief) ----
    alignas(cache_line) unsigned next_cell = 0;  // owner: the cell to pop first
    unsigned rr = 0;                             // producer: round-robin cursor
    unsigned asked = kNone;                      // thief: the worker holding its request
    std::int64_t asked_at = 0;                   // thief: when it posted it
    unsigned misses = 0;                         // thief: where in order_ its next look starts
    row_stats st;
  };

  bool lock(row& r) noexcept;
  static void unlock(row& r) noexcept;
  task* pop_locked(row& r) noexcept;
  void answer_locked(row& r, unsigned c, unsigned* answered_to, std::size_t* migrated) noexcept;
  // Token of `from` held: moves up to `max` of its tasks into cell
  // [to][producer]. Returns how many moved.
  std::size_t migrate(row& from, unsigned to, unsigned producer, std::size_t max) noexcept;
  void set_hungry(row& r, bool on) noexcept;

  unsigned n_;
  std::size_t cap_;
  mesh_balance balance_;
  bool sample_;
  std::vector<std::unique_ptr<row>> rows_;
  std::vector<std::vector<unsigned>> order_;  // order_[c]: the other workers, nearest first
};

}  // namespace mote::detail
