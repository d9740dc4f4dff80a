// Work from threads that are not workers of the runtime: the injection queue,
// and runtime::run's wait for it.
#include "mote/trace.hpp"
#include "wait/idle.hpp"
#include "core/runtime_impl.hpp"
#include "wait/event_count.hpp"

namespace mote::detail {

void runtime_impl::submit(queued_task* t) {
  check_not_orphaned();
  inject(t);
}

void runtime_impl::inject(queued_task* t) noexcept {
  {
    // A std::mutex's lock fails only for a misused mutex or deadlock, which
    // this one cannot see (it guards a few pointer writes); an exception
    // here ends the process, as noexcept says.
    std::lock_guard<std::mutex> lock(inject_mutex_);
    t->next = nullptr;
    if (inject_tail_ != nullptr) {
      inject_tail_->next = t;
    } else {
      inject_head_ = t;
    }
    inject_tail_ = t;
    ++inject_size_;
    // seq_cst store, after the push and inside the lock: pairs with the
    // seq_cst announcement in park() like grow_shared()'s CAS does.
    inject_count_.store(inject_size_, std::memory_order_seq_cst);
  }
  notify_one();
}

task* runtime_impl::take_injected() noexcept {
  task* t = nullptr;
  bool more = false;
  {
    std::lock_guard<std::mutex> lock(inject_mutex_);
    queued_task* head = inject_head_;
    if (head == nullptr) return nullptr;
    inject_head_ = head->next;
    if (inject_head_ == nullptr) inject_tail_ = nullptr;
    --inject_size_;
    t = head;
    more = inject_head_ != nullptr;
    // seq_cst, as in submit(): every store of the count is one of the Dekker
    // pair with park()'s announcement.
    inject_count_.store(inject_size_, std::memory_order_seq_cst);
  }
  // Entries remain: pass the wake-up on, so that a burst of submissions does
  // not queue behind the one worker that was woken for the first.
  if (more) notify_one();
  return t;
}

void runtime_impl::schedule_urgent(queued_task* t, std::uint32_t priority) noexcept {
  {
    // As inject(): the mutex guards a few pointer writes.
    std::lock_guard<std::mutex> lock(urgent_mutex_);
    // Relaxed: the task waits here, unseen by anyone but this list's users,
    // whose mutex orders it; its `state` (join's alone) holds the priority.
    t->state.store(priority, std::memory_order_relaxed);
    t->next = nullptr;
    if (urgent_tail_ == nullptr) {
      urgent_head_ = urgent_tail_ = t;
    } else if (urgent_tail_->state.load(std::memory_order_relaxed) >= priority) {
      urgent_tail_->next = t;  // the common case: no higher than the last
      urgent_tail_ = t;
    } else {
      // After every task of its priority or higher: a walk over the few
      // urgent tasks that wait.
      queued_task** at = &urgent_head_;
      while ((*at)->state.load(std::memory_order_relaxed) >= priority) at = &(*at)->next;
      t->next = *at;
      *at = t;
    }
    ++urgent_size_;
    // seq_cst, under the lock: pairs with park()'s announcement as the
    // injection count's store does.
    urgent_count_.store(urgent_size_, std::memory_order_seq_cst);
    // Relaxed, under the lock: a hint for the group owners' loops.
    if (urgent_size_ == 1) attention_.fetch_or(kAttentionUrgent, std::memory_order_relaxed);
  }
  notify_one();
}

task* runtime_impl::take_urgent() noexcept {
  queued_task* t = nullptr;
  bool more = false;
  {
    std::lock_guard<std::mutex> lock(urgent_mutex_);
    t = urgent_head_;
    if (t == nullptr) return nullptr;
    urgent_head_ = t->next;
    if (urgent_head_ == nullptr) urgent_tail_ = nullptr;
    --urgent_size_;
    more = urgent_head_ != nullptr;
    // seq_cst, as in schedule_urgent().
    urgent_count_.store(urgent_size_, std::memory_order_seq_cst);
    // Relaxed, under the lock: as in schedule_urgent().
    if (urgent_size_ == 0) attention_.fetch_and(~kAttentionUrgent, std::memory_order_relaxed);
  }
  // Relaxed: the word goes back to being join's unused field.
  t->state.store(task::kRunning, std::memory_order_relaxed);
  if (more) notify_one();
  return t;
}

void submit_and_wait(runtime_impl& rt, external_task& t) {
  rt.submit(&t);
  worker* w = current_worker;
  if (w != nullptr) {
    // A worker of another runtime: keep its own runtime going meanwhile, so
    // that a runtime that calls into another and is called back (or simply
    // has work queued) does not stall. Parks with a timeout: its own
    // runtime's new work does not wake it here.
    runtime_impl& home = w->runtime();
    if (MOTE_UNLIKELY(w->instrumented())) w->note_wait_begin(2);
    idle_wait idle(home.spin_ns());
    // Acquire: pairs with complete_external()'s release store; the result and
    // error written by the task are visible after this loop.
    while (t.finished.load(std::memory_order_acquire) == 0) {
      if (home.help_once(*w)) {
        idle.reset();
        continue;
      }
      if (idle.spin()) continue;
      ++w->stats().wait_parks;
      // The event count's one-word form (wait/event_count.hpp): the flag is
      // the word, and its store always notifies.
      event_word::commit_for(&t.finished, 0, idle.next_park_timeout());
    }
    if (MOTE_UNLIKELY(w->instrumented())) w->note_wait_end();
    return;
  }
  trace_buffer* trace = outside_trace_buffer();
  if (MOTE_UNLIKELY(trace != nullptr)) trace->put(trace_kind::wait_begin, 2);
  // Acquire: as above.
  while (t.finished.load(std::memory_order_acquire) == 0) event_word::commit(&t.finished, 0);
  if (MOTE_UNLIKELY(trace != nullptr)) trace->put(trace_kind::wait_end);
}

void complete_external(external_task& t) noexcept {
  t.finished.store(1, std::memory_order_release);
  // Address only: the waiter may already have returned.
  event_word::notify(&t.finished, 1);
}

runtime_impl* runtime_of(const worker* w) noexcept { return w ? &w->runtime() : nullptr; }

// task_group::spawn's way into the policy under delegation (it is inline and
// cannot name runtime_impl's members).
void schedule_task(runtime_impl& rt, queued_task* t, worker* w) { rt.schedule(t, w); }

}  // namespace mote::detail
