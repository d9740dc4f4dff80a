// The compiled half of parallel loops: teams, the open loop's shared state,
// and the runtime's hooks (idle workers joining, the last look before
// parking, wake-ups). docs/loops.md has the protocol and its memory orders.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "mote/detail/loops.hpp"
#include "mote/detail/platform.hpp"
#include "core/config.hpp"

namespace mote::detail {

class worker;
struct df_task;  // mote/dataflow.hpp

// A set of workers that runs loops together: the whole runtime, a socket's
// workers, a core's hardware threads. Seats are the members in topology
// order, so that each domain (a finer group: sockets of the machine, cores of
// a socket, else runs of up to kDomainSeats seats) is a run of seats.
struct loop_team {
  static constexpr unsigned kDomainSeats = 8;

  std::vector<unsigned> members;       // worker index of each seat
  std::vector<int> seat_of;            // seat of each worker index, -1 outside the team
  std::vector<unsigned> domain_of;     // domain of each seat
  std::vector<unsigned> domain_first;  // first seat of each domain, then members.size()

  unsigned size() const noexcept { return static_cast<unsigned>(members.size()); }
  unsigned num_domains() const noexcept { return static_cast<unsigned>(domain_first.size() - 1); }
};

// Every worker's team at every nesting depth, fixed when the runtime starts.
class loop_teams {
 public:
  explicit loop_teams(const resolved_config& config);
  const loop_team& team(unsigned worker_index, unsigned depth) const noexcept {
    return *by_worker_[worker_index][depth];
  }

 private:
  std::vector<std::unique_ptr<loop_team>> teams_;
  std::vector<std::array<const loop_team*, kMaxLoopDepth>> by_worker_;
};

// A domain's part of an open loop: the gate participants join through (one
// node of the completion tree) and the request combiner.
struct alignas(cache_line) loop_domain {
  // seq << kSeqShift | kClosed | participants inside. Opened by the leader
  // (a new seq), closed by it when the stripes are empty; the participant
  // that leaves a closed domain last tells the leader.
  std::atomic<std::uint64_t> gate;
  std::atomic<std::uint32_t> lock{0};      // the request combiner's
  std::atomic<bool> remote_dry{false};     // hint: other domains have nothing left
  unsigned cursor = 0;                     // combiner's next remote seat (under lock)
};

// A participant's request to its domain's combiner.
struct alignas(cache_line) loop_request {
  static constexpr std::uint64_t kIdle = ~std::uint64_t{0};
  static constexpr std::uint64_t kAsking = kIdle - 1;
  static constexpr std::uint64_t kNothing = kIdle - 2;
  // kIdle, kAsking (end holds the units wanted), kNothing, or a grant's first
  // unit (end holds its end).
  std::atomic<std::uint64_t> begin{kIdle};
  std::uint64_t end = 0;
};

// One worker's loop at one depth: made on first use, reused for every loop it
// leads there, freed with the worker. Its memory outlives every pointer an
// idle worker may hold; the gates tell a current loop from an old one.
struct loop_desc {
  static constexpr unsigned kSeqShift = 24;
  static constexpr std::uint64_t kClosed = std::uint64_t{1} << 23;
  static constexpr std::uint64_t kActive = kClosed - 1;
  static constexpr std::uint32_t kLeaderParked = 0x80000000u;

  loop_desc(const loop_team& t, worker& w, unsigned d);

  const loop_team& team;
  worker& owner;
  unsigned depth;
  std::uint64_t seq = 0;                 // the current loop's (owner only)
  const void* learnt_site = nullptr;     // the last adaptive loop's body, and
  std::uint64_t learnt_batch = 1;        // its leader's final batch (owner only)

  // Written by the leader before the gates open; then read-only, but for the
  // two flags, each written at most once per loop.
  alignas(cache_line) loop_job* job = nullptr;
  std::uint64_t hint = 1;                // first batch of adaptive claims
  // The leader's context, which its bodies have on every worker: the group
  // it runs in (groups made in bodies bind to it; its cancellation stops the
  // claims) and its current data-flow task (scopes made in bodies nest in it).
  task_group* group = nullptr;
  df_task* flow = nullptr;
  std::atomic<bool> stop{false};         // a body failed: claim nothing more
  std::atomic<bool> dry{false};          // hint: every stripe is empty

  // Domains not yet drained after their close; the leader sleeps on it
  // (with kLeaderParked) until 0.
  alignas(cache_line) std::atomic<std::uint32_t> pending{0};

  std::unique_ptr<loop_stripe[]> stripes;    // one per seat
  std::unique_ptr<loop_request[]> requests;  // one per seat
  std::unique_ptr<loop_domain[]> domains;
};

void destroy_loop_desc(loop_desc* d) noexcept;

}  // namespace mote::detail
