// Where the runtime meets the delegation scheduler: schedule()'s delegation
// branch, the workers' way to a ready task, and the exported entry that
// task_group::spawn calls inline. The work-stealing side of the seam is in
// runtime/injection.cpp (schedule) and runtime/worker_loop.cpp (help_once).
#include "mote/runtime.hpp"
#include "runtime/runtime_impl.hpp"
#include "scheduler/delegation.hpp"

namespace mote::detail {

void runtime_impl::schedule_delegated(task* t, worker* w) {
  const bool mine = w != nullptr && &w->runtime() == this;
  // A thread outside the runtime: as submit(), refused in a forked child,
  // whose runtime has no workers to run t.
  if (!mine) check_not_orphaned();
  delegation_->add(t, mine ? w->index() : delegation_scheduler::kOutside);
  // Like a push that shares: the add-queue's seq_cst tail store came first
  // (delegation_scheduler::add_queue::push), so this seq_cst load of the
  // sleeper count is the notifier's half of the Dekker pair with park().
  notify_one();
}

task* runtime_impl::take_ready(worker& self) noexcept {
  delegation_scheduler* d = delegation_.get();
  if (d == nullptr || !d->maybe_ready()) return nullptr;
  bool more = false;
  task* t = d->get(self.index(), self.inside_task(), &more);
  // Tasks remain in the ready queue: pass the wake-up on, so that a burst
  // does not wait for the one worker that was woken for its first task.
  if (more) notify_one();
  return t;
}

void schedule_task(runtime_impl& rt, queued_task* t, worker* w) { rt.schedule(t, w); }

}  // namespace mote::detail
