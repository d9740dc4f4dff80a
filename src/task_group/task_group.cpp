// mote::task_group: counting, waiting, cancellation. docs/design.md ("Task
// groups") has the argument; the comments give each ordering's pairing.
#include "mote/task_group.hpp"

#include <climits>
#include <cstdint>
#include <exception>
#include <type_traits>

#include "wait/idle.hpp"
#include "core/runtime_impl.hpp"
#include "wait/event_count.hpp"

namespace mote {

namespace detail {
std::atomic<std::uint32_t> group_cancel_epoch{0};
std::atomic<std::uint32_t> group_cancels_active{0};
}  // namespace detail

namespace {
detail::runtime_impl& runtime_for_caller() {
  detail::worker* w = detail::current_worker;
  return w ? w->runtime() : detail::runtime_access::impl(runtime::default_runtime());
}
}  // namespace

task_group::task_group() { construct(runtime_for_caller(), true); }
task_group::task_group(runtime& rt) { construct(detail::runtime_access::impl(rt), true); }
task_group::task_group(isolated_t) { construct(runtime_for_caller(), false); }
task_group::task_group(runtime& rt, isolated_t) { construct(detail::runtime_access::impl(rt), false); }

void task_group::construct(detail::runtime_impl& rt, bool bound) {
  runtime_ = &rt;
  detail::worker* w = detail::current_worker;
  if (w != nullptr && &w->runtime() == runtime_) owner_ = w;
  if (bound && w != nullptr) parent_ = w->current_group();
  // The epoch first, the parents second: a cancellation after this read moves
  // the epoch past it, so the next is_cancelled() looks again.
  const std::uint32_t epoch = detail::group_cancel_epoch.load(std::memory_order_acquire);
  seen_epoch_.store(epoch, std::memory_order_relaxed);
  if (parent_ != nullptr && detail::group_cancels_active.load(std::memory_order_acquire) != 0 &&
      parent_->is_cancelled()) {
    cancel();
  }
}

// NOLINTNEXTLINE(bugprone-exception-escape): throws missing_wait by design
task_group::~task_group() noexcept(false) {
  // Relaxed: the destructor runs on the owner (which wrote owner_spawned_),
  // or on a thread that was told the group is done (an acquire that follows
  // the owner's last store). The acquire on remote_ sees spawns from elsewhere.
  const bool spawned_since_wait =
      owner_spawned_.load(std::memory_order_relaxed) ||
      (remote_.load(std::memory_order_acquire) >> 40) != waited_version_;
  if (!spawned_since_wait) {
    if (MOTE_UNLIKELY(flags_.load(std::memory_order_relaxed) & kCancelled)) uncancel();
    return;
  }
  // In a child process after fork(): the tasks belong to the parent's
  // workers, and no thread of this process can run or touch them.
  if (runtime_->orphaned()) return;
  // Forgotten wait: cancel what has not started, wait for what has, and then
  // say so. Nothing is left to run against this destroyed group.
  cancel();
  await(detail::current_worker);
  uncancel();
  if (std::uncaught_exceptions() == 0) {
    throw missing_wait("mote::task_group destroyed with tasks spawned since its last wait()");
  }
}

void task_group::cancel() noexcept {
  // Relaxed: cancellation is a request (see group_task::run); the counts
  // below carry the release that bound groups and task starts acquire.
  if (flags_.fetch_or(kCancelled, std::memory_order_relaxed) & kCancelled) return;
  // Release, both: a task that sees either count sees the flag set above
  // (the epoch is what bound groups compare; the active count is what every
  // task start looks at first).
  detail::group_cancels_active.fetch_add(1, std::memory_order_release);
  detail::group_cancel_epoch.fetch_add(1, std::memory_order_release);
}

void task_group::uncancel() noexcept {
  // Relaxed: at the end of a wait nothing of this group runs; the active
  // count is only the gate that makes task starts look at their group.
  if (flags_.fetch_and(~kCancelled, std::memory_order_relaxed) & kCancelled) {
    detail::group_cancels_active.fetch_sub(1, std::memory_order_relaxed);
  }
}

bool task_group::cancelled_through_parents(std::uint32_t epoch) const noexcept {
  // Every parent is alive: a bound group lives inside a task of its parent,
  // which its parent waits for (and so on up).
  for (const task_group* p = parent_; p != nullptr; p = p->parent_) {
    if (p->flags_.load(std::memory_order_relaxed) & kCancelled) return true;
  }
  seen_epoch_.store(epoch, std::memory_order_relaxed);
  return false;
}

void task_group::record_exception(std::exception_ptr e) noexcept {
  record_exception_only(std::move(e));
  cancel();
}

void task_group::record_exception_only(std::exception_ptr e) noexcept {
  // The first failure writes error_; the task's count-down, which follows,
  // publishes it (release) to the waiter, which reads it after it sees the
  // group finished (acquire).
  if ((flags_.fetch_or(kFailed, std::memory_order_acq_rel) & kFailed) == 0) error_ = std::move(e);
}

void task_group::finish_remote() noexcept {
  std::atomic<std::uint64_t>* word = &remote_;
  // The owner's park word, read while the group surely lives (a worker
  // outlives every group it owns).
  std::atomic<std::uint32_t>* owner_word = owner_ != nullptr ? &owner_->park_word() : nullptr;
  // A worker waiting here without owning the group: its park word, read
  // before the count-down for the same reason (seq_cst: against the
  // waiter's seq_cst store of it before it registers; a count-down that
  // still reads nullptr is covered by that waiter's timed sleep).
  std::atomic<std::uint32_t>* waiter_word = waiter_word_.load(std::memory_order_seq_cst);
  // Count down (and move the version). Release: the task's effects, and
  // error_, reach whoever acquires the word after this. Once this is done the
  // waiter may find the group finished and destroy it, so nothing below
  // touches the group: the wake-up uses the word's address only.
  const std::uint64_t old = word->fetch_add(kVersionOne - kCountOne, std::memory_order_release);
  // The count went from 1 to 0 with a waiter parked: the waiter folded its
  // private count in before parking, so zero here means finished (or, for a
  // waiter that is not the owner, possibly finished: it looks again).
  // Waiters elsewhere sleep on the word (the event count's one-word form);
  // the owner sleeps as a worker, on its park word (its waiter_slot).
  if (count_of(old) == 1 && waiters_of(old) != 0) {
    detail::event_word::notify(detail::futex_low_half(word), -1);
    if (owner_word != nullptr) detail::runtime_impl::wake_parked(*owner_word);
    if (waiter_word != nullptr) detail::runtime_impl::wake_parked(*waiter_word);
  }
}

void task_group::spawn_elsewhere(detail::group_task_base* t, detail::worker* w) {
  // Counted before the task is visible: it may run and count itself down at
  // once. Relaxed: the task's publication (a push, released by the deque's
  // sharing CAS; the injection queue's mutex; an add-queue's release store
  // under delegation) orders this before its count-down.
  remote_.fetch_add(kVersionOne + kCountOne, std::memory_order_relaxed);
  if (w != nullptr && &w->runtime() == runtime_) {
    // scheduler_policy::delegation: through the scheduler (never throws for
    // a worker of the runtime, never runs t here).
    if (MOTE_UNLIKELY(w->delegating())) {
      runtime_->schedule(t, w);
      return;
    }
    // A worker of the group's runtime: on its own pool, where it and
    // thieves find it.
    if (w->pool().push(t)) return;
    t->execute(t, *w);  // the pool is full: run it here
    return;
  }
  try {
    // Any other thread: the injection queue under work stealing (schedule()
    // is submit() then), the outside add-queue under delegation.
    runtime_->schedule(t, w);
  } catch (...) {
    // Not handed in (a forked child's runtime): undo the count
    // exactly, version included, so the group is as before the spawn. The
    // caller destroys the record.
    const std::uint64_t old = remote_.fetch_sub(kVersionOne + kCountOne, std::memory_order_relaxed);
    if (count_of(old) == 1 && waiters_of(old) != 0) {
      detail::event_word::notify(detail::futex_low_half(&remote_), -1);
    }
    throw;
  }
}

std::uint32_t task_group::pending_for_others() const noexcept {
  // The owner's count and the shared one, read so that the shared one held
  // still in between: then their sum is the pending count at the moment
  // local_ was read. Acquire loads: a task that counted itself down published
  // its effects; any spawn that happens before this wait is in what they read
  // (write-read coherence), and spawns by tasks are counted before the
  // spawning task counts itself down. The sum never reads low: every count
  // goes up before its task is visible and down after it is finished (docs/design.md).
  for (;;) {
    const std::uint64_t before = remote_.load(std::memory_order_acquire);
    const std::int64_t mine = local_.load(std::memory_order_acquire);
    const std::uint64_t after = remote_.load(std::memory_order_acquire);
    if ((before >> kCountShift) == (after >> kCountShift)) {
      return static_cast<std::uint32_t>(mine) + count_of(before);
    }
  }
}

void task_group::await(detail::worker* w) noexcept {
  if (w != nullptr && w == owner_) {
    await_as_owner(*w);
  } else {
    await_elsewhere(w);
  }
}

void task_group::await_as_owner(detail::worker& w) noexcept {
  // The common case first, without a clock or a trace: take back the newest
  // tasks of this worker's pool and run them, until the group is done. They
  // are usually this group's own, and this loop is why a group of
  // sub-microsecond tasks costs little more than the calls. When the newest
  // is another group's it runs just the same: every pooled task is
  // self-contained, and it may be holding ours below it. True when the
  // group is done, false when the pool ran dry.
  const bool traced = w.instrumented();
  auto own_pool = [&](auto helps) noexcept {
    for (;;) {
      // The private count alone settles it while it is nonzero.
      if (local_.load(std::memory_order_relaxed) == 0 && pending_for_owner() == 0) return true;
      if constexpr (decltype(helps)::value) {
        // A data-flow scope: urgent tasks wait, or a work source must be
        // polled between tasks. The runtime's look takes those first, then
        // this pool's newest.
        if (MOTE_UNLIKELY(runtime_->wants_help_once())) {
          if (runtime_->help_once(w)) continue;
          return false;
        }
      }
      detail::task* t = w.pool().pop_any();
      if (t == nullptr) return false;
      if (MOTE_UNLIKELY(traced)) {
        w.note_task_begin(reinterpret_cast<const void*>(t->execute), false);
        t->execute(t, w);
        w.note_task_end();
      } else {
        t->execute(t, w);
      }
    }
  };
  // One test per wait, not per task: the plain loop stays as it was.
  if (MOTE_UNLIKELY(helps_runtime_) ? own_pool(std::true_type{}) : own_pool(std::false_type{})) return;
  // The rest are stolen or elsewhere: help the runtime meanwhile, then park.
  if (MOTE_UNLIKELY(traced)) w.note_wait_begin(1);
  detail::idle_wait idle(runtime_->spin_ns());
  while (pending_for_owner() != 0) {
    if (runtime_->help_once(w)) {  // its own pool first
      idle.reset();
      continue;
    }
    if (idle.spin()) continue;
    park_as_owner(w, idle.next_park_timeout());
  }
  if (MOTE_UNLIKELY(traced)) w.note_wait_end();
}

void task_group::park_as_owner(detail::worker& w, std::int64_t timeout_ns) noexcept {
  // Fold the private count into the shared word and register as a waiter, in
  // one read-modify-write: from then on the shared count is the whole count,
  // so the task that takes it to zero knows that it finished the group, and
  // wakes us (finish_remote). Only tasks that finish elsewhere are left to
  // come, since this thread is here. acq_rel: acquire for what finishers
  // released before it; release so that this RMW heads the sequence that
  // later finishers extend.
  const std::int64_t mine = local_.load(std::memory_order_relaxed);
  local_.store(0, std::memory_order_relaxed);
  const std::uint64_t add =
      kVersionOne + (static_cast<std::uint64_t>(static_cast<std::uint32_t>(mine)) << kCountShift) + kWaiterOne;
  const std::uint64_t now = remote_.fetch_add(add, std::memory_order_acq_rel) + add;
  if (count_of(now) != 0) {
    ++w.stats().wait_parks;
    // Asleep as an idle worker is: new work anywhere in the runtime wakes
    // us (a long wait must not keep a worker from it), and so does the
    // group's last count-down (finish_remote). The timeout is a safety net.
    if (MOTE_UNLIKELY(w.instrumented())) w.note_park(true);
    runtime_->park_waiting(
        w, [](const void* g) { return static_cast<const task_group*>(g)->pending_for_owner() == 0; }, this,
        timeout_ns);
    if (MOTE_UNLIKELY(w.instrumented())) w.note_park(false);
  }
  // Relaxed: the waiter bits only decide whether a finisher wakes anyone;
  // a finisher that still sees us wakes nobody, or us (we look again).
  remote_.fetch_sub(kWaiterOne, std::memory_order_relaxed);
}

void task_group::await_elsewhere(detail::worker* w) noexcept {
  if (pending_for_others() == 0) return;
  // A worker (of this runtime or another) keeps its own runtime busy; any
  // other thread sleeps at once, as it would on a mutex.
  const bool helps = w != nullptr;
  const bool traced = helps && w->instrumented();
  if (MOTE_UNLIKELY(traced)) w->note_wait_begin(1);
  detail::idle_wait idle(helps ? w->runtime().spin_ns() : 0);
  while (pending_for_others() != 0) {
    if (helps) {
      if (w->runtime().help_once(*w)) {
        idle.reset();
        continue;
      }
      if (idle.spin()) continue;
      ++w->stats().wait_parks;
      park_worker_elsewhere(*w, idle.next_park_timeout());
      continue;
    }
    // Without an owner every count is shared, and its last count-down wakes
    // us. With one, its own completions wake nobody: look again now and then.
    park_elsewhere(owner_ != nullptr ? idle.next_park_timeout() : -1);
  }
  if (MOTE_UNLIKELY(traced)) w->note_wait_end();
}

void task_group::park_elsewhere(std::int64_t timeout_ns) noexcept {
  // The event count's one-word form (wait/event_count.hpp): register in the
  // shared word, then look again (acquire loads in pending_for_others): a
  // finisher whose count-down came before the registration is seen by the
  // look; one after it sees the waiter and wakes us, or changes the word
  // before we sleep (the sleep compares its low half, which holds the
  // waiter bits and the low bits of the count).
  const std::uint64_t now = remote_.fetch_add(kWaiterOne, std::memory_order_acq_rel) + kWaiterOne;
  if (pending_for_others() != 0) {
    const auto parked = static_cast<std::uint32_t>(now);
    if (timeout_ns < 0) {
      detail::event_word::commit(detail::futex_low_half(&remote_), parked);
    } else {
      detail::event_word::commit_for(detail::futex_low_half(&remote_), parked, timeout_ns);
    }
  }
  // Relaxed: as in park_as_owner().
  remote_.fetch_sub(kWaiterOne, std::memory_order_relaxed);
}

void task_group::park_worker_elsewhere(detail::worker& w, std::int64_t timeout_ns) noexcept {
  // A worker that waits for a group it does not own sleeps as an idle worker
  // does (on its park word, counted among its runtime's sleepers), so that
  // new work anywhere in its runtime wakes it to take it; the group's last
  // count-down wakes it through waiter_word_ (one waiter at a time:
  // wait_for_all's waiting_). seq_cst store, then the registration and the
  // look (park_waiting's done()): a count-down after the registration that
  // read waiter_word_ before this store wakes nobody, so the sleep is timed
  // (the caller's doubling timeout), and the waiter's next look finds it.
  waiter_word_.store(&w.park_word(), std::memory_order_seq_cst);
  remote_.fetch_add(kWaiterOne, std::memory_order_acq_rel);
  w.runtime().park_waiting(
      w, [](const void* g) { return static_cast<const task_group*>(g)->pending_for_others() == 0; }, this,
      timeout_ns);
  // Relaxed both: as in park_as_owner(); a finisher that still sees us
  // wakes a worker that is looking anyway.
  remote_.fetch_sub(kWaiterOne, std::memory_order_relaxed);
  waiter_word_.store(nullptr, std::memory_order_relaxed);
}

std::exception_ptr task_group::wait_for_all(task_group_status* status) {
  // The self-wait check comes first and touches nothing shared: a task that
  // waits for its own group must not hold waiting_ even for a moment, or the
  // owner's legitimate wait, arriving then, would be refused in its place.
  detail::worker* w = detail::current_worker;
  if (MOTE_UNLIKELY(w != nullptr && w->inside_group(this))) {
    throw usage_error(
        "mote::task_group::wait: called from inside a task of the same group, which would wait "
        "for itself; wait from the frame that owns the group");
  }
  // Acquire: pairs with the release store that ends the previous wait, whose
  // reset of the group this one must see.
  if (waiting_.exchange(true, std::memory_order_acquire)) {
    throw usage_error(
        "mote::task_group::wait: another thread is waiting for the same group; wait from one "
        "thread at a time");
  }
  struct end_wait {
    std::atomic<bool>& waiting;
    // Release: pairs with the next wait()'s acquire exchange above, which
    // then sees this wait's reset of the group.
    ~end_wait() { waiting.store(false, std::memory_order_release); }
  } end{waiting_};

  if (MOTE_UNLIKELY(runtime_->orphaned())) {
    if (pending(w)) {
      throw usage_error(
          "mote::task_group::wait: the group's runtime was created before fork(); its tasks "
          "belong to the parent process and will not run in this one");
    }
  } else {
    await(w);
  }

  // Every task has finished; the acquire loads that saw it made their
  // writes, and error_, visible. Reset for reuse, then report the first
  // failure.
  std::exception_ptr error;
  *status = is_cancelled() ? task_group_status::canceled : task_group_status::complete;
  const std::uint32_t flags = flags_.load(std::memory_order_acquire);
  if (flags & kFailed) {
    error = std::move(error_);
    error_ = nullptr;
  }
  // Relaxed, these resets and the stores below: nothing is pending, so no
  // task reads them; the next wait() receives them through waiting_ (release
  // above), and a spawner or destructor on another thread through whatever
  // told it that this wait had returned.
  if (flags != 0) {
    uncancel();
    flags_.store(0, std::memory_order_relaxed);
  }
  // One epoch back: the next is_cancelled() looks at the parents again, in
  // case one of them is still cancelled.
  seen_epoch_.store(detail::group_cancel_epoch.load(std::memory_order_relaxed) - 1,
                    std::memory_order_relaxed);
  owner_spawned_.store(false, std::memory_order_relaxed);
  waited_version_ = remote_.load(std::memory_order_relaxed) >> 40;
  return error;
}

bool detail::group_access::orphaned(const task_group& g) noexcept { return g.runtime_->orphaned(); }

task_group_status task_group::wait() {
  task_group_status status = task_group_status::complete;
  if (std::exception_ptr error = wait_for_all(&status)) std::rethrow_exception(error);
  return status;
}

}  // namespace mote
