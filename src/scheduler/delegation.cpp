// scheduler_policy::delegation: the add-queues, the ready queue and the
// delegation lock (see delegation.hpp, and docs/scheduler.md for the whole
// argument, parking included), and the policy built on them.
#include "scheduler/delegation.hpp"

#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "core/runtime_impl.hpp"
#include "scheduler/scheduler.hpp"

namespace mote::detail {

namespace {
constexpr std::size_t kReadyInitial = 1024;  // a power of two
}  // namespace

// ---- ready_ring -------------------------------------------------------------

ready_ring::ready_ring() : slots_(new task*[kReadyInitial]), mask_(kReadyInitial - 1) {}

bool ready_ring::grow() noexcept {
  const std::size_t capacity = mask_ + 1;
  task** bigger = new (std::nothrow) task*[capacity * 2];
  if (bigger == nullptr) return false;
  // Same logical indices, new mask: copy each live entry to its new place.
  for (std::uint64_t i = head_; i != tail_; ++i) {
    bigger[i & (capacity * 2 - 1)] = slots_[i & mask_];
  }
  slots_.reset(bigger);
  mask_ = capacity * 2 - 1;
  return true;
}

bool ready_ring::push_back(task* t) noexcept {
  if (size() == mask_ + 1 && !grow()) return false;
  slots_[tail_ & mask_] = t;
  ++tail_;
  return true;
}

task* ready_ring::pop_front() noexcept {
  if (head_ == tail_) return nullptr;
  return slots_[head_++ & mask_];
}

task* ready_ring::pop_back() noexcept {
  if (head_ == tail_) return nullptr;
  return slots_[--tail_ & mask_];
}

// ---- add-queues ---------------------------------------------------------------

delegation_scheduler::add_queue::add_queue(std::size_t producers)
    : lock(producers), slots(new task*[kAddQueueCapacity]) {}

bool delegation_scheduler::add_queue::push(task* t) noexcept {
  // Relaxed: only producers write tail, each under `lock`, whose hand-over
  // (release grant, acquire wait) orders the previous producer's store
  // before this load.
  const std::uint64_t at = tail.load(std::memory_order_relaxed);
  if (at - head_seen == kAddQueueCapacity) {
    // Acquire: pairs with drain()'s release store of head: the
    // consumer has read the slots it moved past before we write them again.
    head_seen = head.load(std::memory_order_acquire);
    if (at - head_seen == kAddQueueCapacity) return false;
  }
  slots[at & (kAddQueueCapacity - 1)] = t;
  // seq_cst: a release, so a consumer that reads this tail (acquire) reads
  // the slot written above; and the notifier's half of the event count
  // (wait/event_count.hpp): this store, then notify_one()'s seq_cst load of
  // idle_sleepers_ (in schedule(), after the unlock), against park()'s
  // announcement and its look at this tail in visible(). Either the parker
  // sees the task, or the notifier sees the parker.
  tail.store(at + 1, std::memory_order_seq_cst);
  return true;
}

// ---- the scheduler ------------------------------------------------------------

delegation_scheduler::delegation_scheduler(const std::vector<unsigned>& worker_nodes, unsigned num_nodes)
    : queue_of_worker_(worker_nodes),
      callers_(new caller_state[worker_nodes.empty() ? 1 : worker_nodes.size()]),
      lock_(worker_nodes.empty() ? 1 : worker_nodes.size()) {
  if (num_nodes == 0) num_nodes = 1;
  // A node queue's producers are the workers of that node, one ticket each at
  // most: one slot apiece, so a hand-off touches the next producer's line
  // only. The outside queue's producers are any threads: one slot per CPU.
  std::vector<std::size_t> producers(num_nodes, 0);
  for (unsigned& node : queue_of_worker_) {
    if (node >= num_nodes) node %= num_nodes;
    ++producers[node];
  }
  for (unsigned n = 0; n < num_nodes; ++n) {
    queues_.push_back(std::make_unique<add_queue>(producers[n] == 0 ? 1 : producers[n]));
  }
  queues_.push_back(std::make_unique<add_queue>(default_lock_slots()));
}

delegation_scheduler::~delegation_scheduler() = default;

void delegation_scheduler::publish_count() noexcept {
  // Relaxed: what a reader must see of it travels with the release store of
  // a queue's head that follows it in drain() (see visible()); every other
  // reader (maybe_ready) only takes a hint from it.
  ready_count_.store(ready_.size(), std::memory_order_relaxed);
}

void delegation_scheduler::drain() noexcept {
  for (const std::unique_ptr<add_queue>& q : queues_) {
    // Relaxed: only holders of the delegation lock write head, and the
    // lock's hand-over orders the previous holder's store before this load.
    const std::uint64_t from = q->head.load(std::memory_order_relaxed);
    // Acquire: pairs with push()'s seq_cst (release) store of tail; the
    // slots below it are written.
    const std::uint64_t to = q->tail.load(std::memory_order_acquire);
    if (from == to) continue;
    std::uint64_t at = from;
    while (at != to && ready_.push_back(q->slots[at & (kAddQueueCapacity - 1)])) ++at;
    // The count first, then head: a parker that sees the new head sees this
    // count or a later one (visible()).
    publish_count();
    // Release: a producer that reads it (acquire) may reuse the slots read
    // above; and park()'s last look, which reads head (seq_cst, so acquire)
    // before the count, then sees the count stored above or a later one.
    q->head.store(at, std::memory_order_release);
  }
}

void delegation_scheduler::serve_waiters() {
  // In line order; stops at the first waiter that called lock() (a producer
  // draining a full queue) or has not registered yet: it takes the lock in
  // its turn.
  while (!lock_.empty() && ready_.size() != 0) {
    const std::size_t id = lock_.front();
    // Relaxed: the waiter wrote it before its registration, which front()
    // read with an acquire (delegation_lock::peek); the waiter is blocked
    // until pop_front() below lets it go, so it cannot change meanwhile.
    const bool nested = callers_[id].nested.load(std::memory_order_relaxed);
    lock_.set_item(id, take(nested));
    lock_.pop_front();
  }
}

void delegation_scheduler::add(task* t, unsigned worker) noexcept {
  add_queue& q = *queues_[worker < queue_of_worker_.size() ? queue_of_worker_[worker] : queues_.size() - 1];
  for (;;) {
    bool pushed = false;
    {
      std::lock_guard<partitioned_ticket_lock> hold(q.lock);
      pushed = q.push(t);
    }
    if (MOTE_LIKELY(pushed)) return;
    // Full (listing 5): drain the add-queues into the ready queue ourselves.
    // When the lock is taken, wait for it in line (the lock's wait: spin,
    // yield on a crowded machine, then sleep); every holder drains first
    // thing, so the queue has room by the time we get it, or soon after.
    // We hold no other lock here, and a holder never waits for a producer.
    if (!lock_.try_lock()) lock_.lock();
    drain();
    serve_waiters();
    publish_count();
    lock_.unlock();
  }
}

task* delegation_scheduler::get(unsigned id, bool nested, bool* more) noexcept {
  // Relaxed: published to a holder that serves us by our registration in
  // lock_or_delegate (release), which it reads with an acquire.
  callers_[id].nested.store(nested, std::memory_order_relaxed);
  *more = false;
  task* t = nullptr;
  // A waiter that the holder serves returns here with its task, never
  // having held the lock. id < the number of workers: never throws.
  if (!lock_.lock_or_delegate(id, t)) return t;
  drain();
  serve_waiters();
  t = take(nested);
  publish_count();
  *more = ready_.size() != 0;
  lock_.unlock();
  return t;
}

bool delegation_scheduler::maybe_ready() const noexcept {
  // Relaxed: a hint; get() decides under the lock.
  if (ready_count_.load(std::memory_order_relaxed) != 0) return true;
  for (const std::unique_ptr<add_queue>& q : queues_) {
    if (q->tail.load(std::memory_order_relaxed) != q->head.load(std::memory_order_relaxed)) return true;
  }
  return false;
}

bool delegation_scheduler::visible() const noexcept {
  // Each queue's tail, then its head, then (after all queues) the count, all
  // seq_cst. The tail load is the second half of the Dekker pair with push()
  // (see there): after park()'s announcement it sees every task whose
  // producer did not see the announcement. Such a task is then either still
  // in the queue (head below tail: found), or a holder drained it: the head
  // load (an acquire) then reads that drain's store (or a later one), a
  // release sequenced after the drain's store of the count, so the count
  // load below reads that count or a later one (coherence). A later count is
  // lower only when a holder handed tasks to workers, which are awake and
  // run them.
  for (const std::unique_ptr<add_queue>& q : queues_) {
    const std::uint64_t tail = q->tail.load(std::memory_order_seq_cst);
    if (q->head.load(std::memory_order_seq_cst) != tail) return true;
  }
  return ready_count_.load(std::memory_order_seq_cst) != 0;
}

}  // namespace mote::detail

// ---- The policy ----------------------------------------------------------------

namespace mote::detail {

namespace {

class delegation_policy final : public scheduler {
 public:
  delegation_policy(runtime_impl& rt, const resolved_config& config)
      : rt_(rt), queues_(nodes_of(config), config.num_nodes) {}

  bool takes_spawns() const noexcept override { return true; }

  void schedule(queued_task* t, worker* w) override {
    const bool mine = w != nullptr && &w->runtime() == &rt_;
    // A thread outside the runtime: as submit(), refused in a forked child,
    // whose runtime has no workers to run t.
    if (!mine) rt_.check_not_orphaned();
    queues_.add(t, mine ? w->index() : delegation_scheduler::kOutside);
    // Like a push that shares: the add-queue's seq_cst tail store came first
    // (delegation_scheduler::add_queue::push), so this seq_cst load of the
    // sleeper count is the notifier's half of the Dekker pair with park().
    rt_.notify_one();
  }

  task* take(worker& self) noexcept override {
    if (!queues_.maybe_ready()) return nullptr;
    bool more = false;
    task* t = queues_.get(self.index(), self.inside_task(), &more);
    // Tasks remain in the ready queue: pass the wake-up on, so that a burst
    // does not wait for the one worker that was woken for its first task.
    if (more) rt_.notify_one();
    return t;
  }

  // The add-queues and the ready queue, with the seq_cst loads that pair
  // with schedule()'s publication (delegation_scheduler::visible).
  bool visible(worker&) noexcept override { return queues_.visible(); }

 private:
  static std::vector<unsigned> nodes_of(const resolved_config& config) {
    std::vector<unsigned> nodes = config.worker_nodes;
    nodes.resize(config.num_workers, 0);
    return nodes;
  }

  runtime_impl& rt_;
  delegation_scheduler queues_;
};

}  // namespace

std::unique_ptr<scheduler> make_delegation(runtime_impl& rt, const resolved_config& config) {
  return std::make_unique<delegation_policy>(rt, config);
}

}  // namespace mote::detail
