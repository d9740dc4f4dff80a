// MOTE_STATS=1: per-worker counters, printed when a runtime ends.
#include <cstdio>

#include "core/runtime_impl.hpp"

namespace mote::detail {

void runtime_impl::print_stats() const {
  // busy = the worker's lifetime minus its idle time (looking for work,
  // spinning, or parked); tasks and spawns count join and task_group work.
  // The deque columns add the worker's three deques (join records, its pool
  // and its kept tasks): shares answered requests, forced ones were made by
  // thieves whose request went unanswered (split_deque::force_share), and
  // publishes shared everything before a wait that runs no tasks. The loop columns: parallel loops led on a team,
  // loops of others joined, batches claimed, and of those the batches
  // received through a request combiner.
  std::fprintf(stderr, "mote: runtime with %u workers (MOTE_STATS)\n", num_workers());
  std::fprintf(stderr, "%6s %12s %12s %10s %14s %8s %10s %11s %11s %8s %8s %9s %9s %11s %9s %9s %10s %12s %11s\n",
               "worker", "tasks", "spawns", "steals", "failed_steals", "parks", "wait_parks", "busy_ms",
               "idle_ms", "shares", "forced", "publishes", "shrinks", "stolen_pops", "injected", "loops",
               "loop_joins", "loop_batches", "loop_remote");
  worker_stats total;
  for (const auto& w : workers_) {
    const worker_stats& s = w->stats();
    deque_counts d = w->frames().counts();
    std::uint64_t forced = w->frames().forced_shares();
    for (const split_deque* q : {&w->pool(), &w->kept()}) {
      const deque_counts& p = q->counts();
      d.shares += p.shares;
      d.shrinks += p.shrinks;
      d.stolen_pops += p.stolen_pops;
      d.publishes += p.publishes;
      forced += q->forced_shares();
    }
    const std::int64_t life = s.ended_ns - s.started_ns;
    const double busy_ms = static_cast<double>(life - s.idle_ns) / 1e6;
    const double idle_ms = static_cast<double>(s.idle_ns) / 1e6;
    std::fprintf(stderr, "%6u %12llu %12llu %10llu %14llu %8llu %10llu %11.3f %11.3f %8llu %8llu %9llu %9llu %11llu "
                 "%9llu %9llu %10llu %12llu %11llu\n",
                 w->index(), static_cast<unsigned long long>(s.tasks),
                 static_cast<unsigned long long>(s.spawns), static_cast<unsigned long long>(s.steals),
                 static_cast<unsigned long long>(s.failed_steals),
                 static_cast<unsigned long long>(s.parks), static_cast<unsigned long long>(s.wait_parks),
                 busy_ms, idle_ms, static_cast<unsigned long long>(d.shares),
                 static_cast<unsigned long long>(forced), static_cast<unsigned long long>(d.publishes),
                 static_cast<unsigned long long>(d.shrinks), static_cast<unsigned long long>(d.stolen_pops),
                 static_cast<unsigned long long>(s.injected), static_cast<unsigned long long>(s.loops),
                 static_cast<unsigned long long>(s.loop_joins), static_cast<unsigned long long>(s.loop_batches),
                 static_cast<unsigned long long>(s.loop_remote));
    total.tasks += s.tasks;
    total.spawns += s.spawns;
    total.steals += s.steals;
    total.failed_steals += s.failed_steals;
    total.parks += s.parks;
    total.wait_parks += s.wait_parks;
  }
  std::fprintf(stderr, "%6s %12llu %12llu %10llu %14llu %8llu %10llu\n", "all",
               static_cast<unsigned long long>(total.tasks), static_cast<unsigned long long>(total.spawns),
               static_cast<unsigned long long>(total.steals),
               static_cast<unsigned long long>(total.failed_steals),
               static_cast<unsigned long long>(total.parks),
               static_cast<unsigned long long>(total.wait_parks));
  policy_->print_stats();
}

}  // namespace mote::detail
