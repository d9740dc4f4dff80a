// The scheduler policy: where a ready task that is not join's goes, and where
// a worker looks for one. One implementation per file in this folder
// (work_stealing.cpp, delegation.cpp, mesh.cpp), chosen once when a runtime starts by
// make_scheduler() (scheduler.cpp). docs/scheduler.md has the policies.
//
// What stays in the core, whatever the policy: join's frames deque and its
// wait, each worker's pool deque (task_group's tasks under work stealing),
// stealing (a victim's frames, then its pool), the injection queue, parking
// and the models' work sources. The order in which an idle worker looks is
// the core's too (runtime_impl::help_once): its own pool, the policy's
// take(), injected work, the models, stealing. The policy is asked on the
// idle path only: task_group's inline spawn tests worker::delegating() (set
// from takes_spawns() before the worker starts) and never calls the policy
// under work stealing; join never does.
//
// Adding a policy: a file here with a class derived from scheduler and a
// function that makes it, and its line in make_scheduler().
#pragma once

#include <memory>

#include "mote/detail/task.hpp"
#include "mote/detail/worker.hpp"

namespace mote::detail {

class runtime_impl;
struct resolved_config;

class scheduler {
 public:
  virtual ~scheduler() = default;

  // Do task_group's spawns on a worker go through schedule() (true), rather
  // than onto the spawning worker's pool? Read once, before the workers start.
  virtual bool takes_spawns() const noexcept = 0;

  // Hands t, a ready task that is not join's, to the policy. w: the calling
  // thread's worker (of any runtime), or nullptr. Any thread. Never runs t
  // here, never drops it, never allocates; wakes a worker when t became
  // visible (runtime_impl::notify_one, whose seq_cst load must come after
  // the seq_cst store that publishes t: the Dekker pair with park()'s last
  // look, visible()). Throws only what runtime_impl::submit() throws, and
  // only when w is not a worker of this runtime.
  virtual void schedule(queued_task* t, worker* w) = 0;

  // A ready task from the policy's own queue for `self` (a worker of this
  // runtime), or nullptr; passes a wake-up on (notify_one) when more remain.
  // Owner of `self` only. Asked after self's pool, and by join's wait.
  virtual task* take(worker& self) noexcept = 0;

  // park()'s last look: is a task waiting in the policy's own queue? seq_cst
  // loads, the other half of the Dekker pair described at schedule().
  virtual bool visible(worker& self) noexcept = 0;

  // MOTE_STATS: the policy's own columns, printed (stderr) after the
  // workers' table when the runtime ends. Nothing by default.
  virtual void print_stats() const {}
};

// The policy config.policy names, for rt (not yet running: no worker has
// started). Throws std::bad_alloc.
std::unique_ptr<scheduler> make_scheduler(runtime_impl& rt, const resolved_config& config);

}  // namespace mote::detail
