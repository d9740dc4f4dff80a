// scheduler_policy::mesh: the mesh of SPSC cells and its two balancing
// protocols (see mesh.hpp, and docs/scheduler.md for the whole argument,
// parking included), and the policy built on them.
#include "scheduler/mesh.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <vector>

#include "core/runtime_impl.hpp"
#include "mote/trace.hpp"
#include "scheduler/scheduler.hpp"

namespace mote::detail {

namespace {

// The default cell: 1024 slots for a few workers, fewer as N grows, so that
// the N x N mesh stays near 8192 slots per row (64 KiB of pointers) and
// never below 32 slots a cell.
std::size_t default_capacity(unsigned n) {
  const std::size_t per = 8192 / std::max(1u, n);
  return std::clamp<std::size_t>(per, 32, 1024);
}

unsigned node_distance(unsigned a, unsigned b) { return a == b ? 0 : 1 + (a > b ? a - b : b - a); }

}  // namespace

mesh_queues::mesh_queues(const std::vector<unsigned>& worker_nodes, mesh_balance balance,
                         std::size_t cell_capacity, bool sample)
    : n_(static_cast<unsigned>(worker_nodes.size())),
      cap_(cell_capacity != 0 ? cell_capacity
                              : default_capacity(static_cast<unsigned>(worker_nodes.size()))),
      balance_(balance),
      sample_(sample) {
  if (n_ == 0) throw std::invalid_argument("mote: a queue mesh needs at least one worker");
  rows_.reserve(n_);
  for (unsigned c = 0; c < n_; ++c) {
    auto r = std::make_unique<row>();
    r->cells.reserve(n_);
    for (unsigned p = 0; p < n_; ++p) r->cells.push_back(std::make_unique<cell>(cap_));
    // Each producer starts its round-robin at its own cell.
    r->rr = c;
    rows_.push_back(std::move(r));
  }
  order_.resize(n_);
  for (unsigned c = 0; c < n_; ++c) {
    std::vector<unsigned>& o = order_[c];
    for (unsigned k = 1; k < n_; ++k) o.push_back((c + k) % n_);
    // Nearest node first; within a distance, the ring order from c (stable),
    // so that neighbours spread their looks over different workers.
    std::stable_sort(o.begin(), o.end(), [&](unsigned a, unsigned b) {
      return node_distance(worker_nodes[c], worker_nodes[a]) <
             node_distance(worker_nodes[c], worker_nodes[b]);
    });
  }
}

bool mesh_queues::lock(row& r) noexcept {
  // Relaxed look first, so that a busy token is not written for nothing.
  // Acquire exchange: pairs with unlock()'s release store; the previous
  // holder's consumer-side work on the cells (the rings' private head
  // copies, the slots it read) happens before ours.
  return !r.busy.load(std::memory_order_relaxed) &&
         !r.busy.exchange(true, std::memory_order_acquire);
}

void mesh_queues::unlock(row& r) noexcept {
  // Release: see lock().
  r.busy.store(false, std::memory_order_release);
}

void mesh_queues::set_hungry(row& r, bool on) noexcept {
  // Relaxed, and stored only on a change (the line is read by producers): a
  // hint for placement (NA-RP) and victim choice (NA-WS). A stale value only
  // sends a task to a busier worker or a thief to a poorer victim; every
  // task is still drained by its row's owner or rescued (pop, balance_step).
  if (r.hungry.load(std::memory_order_relaxed) != on) r.hungry.store(on, std::memory_order_relaxed);
}

// try_push throws only on a closed ring, and the mesh never closes its cells.
// NOLINTNEXTLINE(bugprone-exception-escape)
unsigned mesh_queues::push(unsigned p, task* t, bool* redirected) noexcept {
  row& me = *rows_[p];
  *redirected = false;
  unsigned target = me.rr;
  me.rr = me.rr + 1 == n_ ? 0 : me.rr + 1;
  if ((static_cast<unsigned>(balance_) & static_cast<unsigned>(mesh_balance::redirect)) != 0 &&
      !hungry(target)) {
    // NA-RP: the nearest worker (by node) that reports under-loaded, itself
    // included, takes the task instead of the round-robin target.
    if (hungry(p)) {
      target = p;
    } else {
      const std::vector<unsigned>& o = order_[p];
      const std::size_t probe = std::min<std::size_t>(o.size(), kRedirectProbe);
      for (std::size_t k = 0; k < probe; ++k) {
        if (hungry(o[k])) {
          target = o[k];
          *redirected = true;
          break;
        }
      }
    }
  }
  // A full cell never drops the task: the next worker's cell from p, and so
  // on round the mesh; kNone only when every cell of p is full.
  for (unsigned k = 0; k < n_; ++k) {
    const unsigned j = target + k < n_ ? target + k : target + k - n_;
    row& r = *rows_[j];
    // The ring's release store of its tail publishes the slot (and the task
    // it points to) to the consumer's acquire load.
    if (r.cells[p]->try_push(t)) {
      // seq_cst fence: the tail store above, then the load of the owner's
      // report below (and the caller's load of the sleeper count: the
      // notifier's half of the Dekker pair with park(), see visible()).
      // Against pop()'s store of the report, its fence and its second look
      // at the cells: either the owner sees this task, or we see its report
      // and answer it. So a row with tasks never stays reported empty, and
      // thieves may skip rows that report empty (balance_step).
      std::atomic_thread_fence(std::memory_order_seq_cst);
      set_hungry(r, false);
      if (k != 0) *redirected = false;  // a full cell moved it, not NA-RP
      if (*redirected) ++me.st.redirects;
      return j;
    }
  }
  *redirected = false;
  return kNone;
}

task* mesh_queues::pop_locked(row& r) noexcept {
  for (unsigned k = 0; k < n_; ++k) {
    unsigned i = r.next_cell + k;
    if (i >= n_) i -= n_;
    if (std::optional<task*> t = r.cells[i]->try_pop()) {
      // The cells in turn, one task each: the order XQueue's consumers use,
      // so that no producer's tasks wait behind another's burst.
      r.next_cell = i + 1 == n_ ? 0 : i + 1;
      return *t;
    }
  }
  return nullptr;
}

std::size_t mesh_queues::migrate(row& from, unsigned to, unsigned producer,
                                 std::size_t max) noexcept {
  cell& dest = *rows_[to]->cells[producer];
  // The caller is dest's only producer, and its consumer only frees slots:
  // the room seen now is a lower bound, so every push below succeeds and no
  // task is ever popped without a place to go.
  const std::size_t room = cap_ - dest.size_approx();
  std::size_t moved = 0;
  while (moved < std::min(max, room)) {
    task* t = pop_locked(from);
    if (t == nullptr) break;
    if (MOTE_UNLIKELY(!dest.try_push(t))) {
      std::fprintf(stderr,
                   "mote: a mesh migration found its cell full after seeing room (a bug)\n");
      std::abort();
    }
    ++moved;
  }
  if (moved != 0) {
    // As a push (see there): the tail stores, a seq_cst fence, then the
    // answer to the destination owner's report, so that thieves do not skip
    // a row that now holds tasks.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    set_hungry(*rows_[to], false);
  }
  return moved;
}

void mesh_queues::answer_locked(row& r, unsigned c, unsigned* answered_to,
                                std::size_t* migrated) noexcept {
  // Relaxed: the request carries no data (the thief's cells exist from the
  // start); the tasks we migrate are published by the rings' release stores.
  const std::uint32_t req = r.request.load(std::memory_order_relaxed);
  if (req == 0 ||
      (static_cast<unsigned>(balance_) & static_cast<unsigned>(mesh_balance::steal)) == 0)
    return;
  const unsigned thief = req - 1;
  const std::size_t len = row_length(c);
  // Keep one for ourselves; move half the rest (at most kStealMax) into the
  // thief's cell from us (we are that cell's only producer).
  const std::size_t give = std::min(kStealMax, len / 2);
  if (give != 0) {
    *migrated = migrate(r, thief, c, give);
    if (*migrated != 0) {
      *answered_to = thief;
      r.st.migrated_out += *migrated;
      ++r.st.answers;
    }
  }
  // Relaxed: cleared under the token, which a rescuer must hold too; the
  // thief only reads it as a hint to post again.
  r.request.store(0, std::memory_order_relaxed);
}

bool mesh_queues::answer(unsigned c, unsigned* answered_to, std::size_t* migrated) noexcept {
  row& r = *rows_[c];
  *answered_to = kNone;
  *migrated = 0;
  // Relaxed: a look at a line only thieves write (a stale zero leaves the
  // request to the owner's next take).
  if (r.request.load(std::memory_order_relaxed) == 0 || !lock(r)) return false;
  answer_locked(r, c, answered_to, migrated);
  unlock(r);
  return *migrated != 0;
}

task* mesh_queues::pop(unsigned c, unsigned* answered_to, std::size_t* migrated) noexcept {
  row& r = *rows_[c];
  *answered_to = kNone;
  *migrated = 0;
  if (!lock(r)) return nullptr;  // a rescuer holds the row: it runs our tasks
  if (sample_) {
    const std::size_t len = row_length(c);
    r.st.max_len = std::max<std::uint64_t>(r.st.max_len, len);
    r.st.sum_len += len;
    ++r.st.samples;
  }
  answer_locked(r, c, answered_to, migrated);
  task* t = pop_locked(r);
  if (t == nullptr && !r.hungry.load(std::memory_order_relaxed)) {
    // Report under-loaded, then look again: the other half of push()'s
    // Dekker pair (relaxed store, seq_cst fence, the cells' tail loads).
    r.hungry.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    t = pop_locked(r);
    if (t != nullptr) set_hungry(r, false);
  } else if (t != nullptr) {
    set_hungry(r, false);
  }
  unlock(r);
  return t;
}

task* mesh_queues::balance_step(unsigned c, std::int64_t now, unsigned* victim,
                                std::size_t* migrated) noexcept {
  row& me = *rows_[c];
  *victim = kNone;
  *migrated = 0;
  if (n_ < 2) return nullptr;
  if (me.asked != kNone) {
    row& v = *rows_[me.asked];
    // Relaxed: a hint (see pop()); a stale value delays the next request.
    // Any request counts, ours or another thief's that we wait beside (see
    // below): the owner has not answered either.
    const bool pending = v.request.load(std::memory_order_relaxed) != 0;
    if (pending && now - me.asked_at < kForceAfterNs)
      return nullptr;  // the victim answers at its next take
    if (pending) {
      // Unanswered: the owner is running a long task, blocked or asleep.
      // Take its row's consumer side and serve ourselves.
      const unsigned vi = me.asked;
      // The owner holds its token (it is taking tasks right now): it will
      // see the request; look again next step.
      if (!lock(v)) return nullptr;
      {
        task* t = nullptr;
        std::size_t moved = 0;
        // Only if a request is still there: the owner may have answered
        // in between (then its tasks are in the thief's row already).
        if (v.request.load(std::memory_order_relaxed) != 0) {
          t = pop_locked(v);
          if (t != nullptr) {
            moved = 1;
            const std::size_t len = row_length(vi);
            // Into our own row from ourselves: we are that cell's producer.
            moved += migrate(v, c, c, std::min(kStealMax, len / 2));
          }
          // Relaxed: cleared under the token (see pop()).
          v.request.store(0, std::memory_order_relaxed);
        }
        unlock(v);
        me.asked = kNone;
        if (t != nullptr) {
          ++me.st.forced;
          me.st.migrated_in += moved;
          *victim = vi;
          *migrated = moved;
          return t;
        }
      }
    }
    me.asked = kNone;
  }
  // Post a request to the nearest worker with tasks. Rows that report empty
  // are skipped (a report is never left standing over a task: see push()).
  // At most kVictimProbe rows are measured per step, resuming where the
  // last step stopped, so that a step costs O(N) flag loads and a few rows'
  // lengths, not N rows' (busy owners whose rows are empty do not report).
  const std::vector<unsigned>& o = order_[c];
  unsigned measured = 0;
  for (std::size_t k = 0; k < o.size() && measured < kVictimProbe; ++k) {
    std::size_t at = me.misses + k;
    if (at >= o.size()) at -= o.size();
    const unsigned j = o[at];
    if (hungry(j)) continue;
    ++measured;
    if (row_length(j) == 0) continue;
    std::uint32_t expected = 0;
    // Relaxed CAS: one request per victim at a time; the request carries no
    // data (see pop()).
    if (rows_[j]->request.compare_exchange_strong(expected, c + 1, std::memory_order_relaxed)) {
      me.asked = j;
      me.asked_at = now;
      ++me.st.requests;
      me.misses = 0;  // nearest first again next time
      return nullptr;
    }
    // Another thief's request stands there. Wait beside it, on our own
    // clock: that thief may have found work elsewhere and be running it
    // (or be blocked in a wait that runs no tasks) and never come back for
    // its answer; a row whose owner and requester are both away must still
    // be rescued. The rescue clears whichever request stands; a thief whose
    // request went unanswered that way posts again.
    me.asked = j;
    me.asked_at = now;
    me.misses = 0;
    return nullptr;
  }
  me.misses = static_cast<unsigned>((me.misses + kVictimProbe) % o.size());
  return nullptr;
}

std::size_t mesh_queues::row_length(unsigned c) const noexcept {
  std::size_t len = 0;
  for (const std::unique_ptr<cell>& q : rows_[c]->cells) len += q->size_approx();
  return len;
}

bool mesh_queues::visible() const noexcept {
  // The parker's half of the Dekker pair: this fence, then each cell's tail
  // (size_approx: head, then tail, acquire loads). A producer stores a
  // cell's tail (release), then a seq_cst fence, then loads the sleeper
  // count (mesh_policy::schedule). Of the two fences, one comes first in
  // the single total order: if the producer's, our tail load sees its push;
  // if ours, its sleeper load sees park()'s announcement (made before this
  // call) and wakes us. A cell whose head moved past the task was drained by
  // an awake worker, which runs it.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (unsigned c = 0; c < n_; ++c) {
    if (row_length(c) != 0) return true;
  }
  return false;
}

}  // namespace mote::detail

// ---- The policy ----------------------------------------------------------------

namespace mote::detail {

namespace {

class mesh_policy final : public scheduler {
 public:
  mesh_policy(runtime_impl& rt, const resolved_config& config)
      : rt_(rt), mesh_(nodes_of(config), config.balance, 0, config.stats) {}

  bool takes_spawns() const noexcept override { return true; }

  void schedule(queued_task* t, worker* w) override {
    if (w == nullptr || &w->runtime() != &rt_) {
      // A thread outside the runtime has no column of the mesh: the
      // injection queue (refused in a forked child, as submit()).
      rt_.submit(t);
      return;
    }
    bool redirected = false;
    const unsigned j = mesh_.push(w->index(), t, &redirected);
    if (MOTE_UNLIKELY(j == mesh_queues::kNone)) {
      // Every cell of this producer is full: its own pool (the core's
      // stealing and publishing cover it), else the injection queue.
      if (!w->pool().push(t)) rt_.inject(t);
      return;
    }
    if (MOTE_UNLIKELY(redirected)) {
      if (trace_buffer* b = w->trace()) b->put(trace_kind::mesh_redirect, j);
    }
    // A producer that spawns for long would leave a thief's request to its
    // next take: answer it here too (one relaxed load when there is none).
    unsigned thief = mesh_queues::kNone;
    std::size_t moved = 0;
    if (MOTE_UNLIKELY(mesh_.answer(w->index(), &thief, &moved))) answered(*w, thief, moved);
    // mesh_queues::push's seq_cst fence came after the cell's tail store:
    // this seq_cst load of the sleeper count is the notifier's half of the
    // Dekker pair with park() (mesh_queues::visible).
    if (rt_.has_sleepers()) {
      // The task's row is j's: wake j itself when it sleeps; else any
      // sleeper, who rescues the task should j not take it soon (j may be
      // this worker, about to block in a wait that runs no tasks: nothing
      // else would publish the task, as publish_before_wait() does a pool's).
      if (j == w->index() || !rt_.wake_idle(rt_.worker_at(j))) rt_.notify_one();
    }
  }

  task* take(worker& self) noexcept override {
    const unsigned c = self.index();
    unsigned thief = mesh_queues::kNone;
    std::size_t moved = 0;
    task* t = mesh_.pop(c, &thief, &moved);
    if (MOTE_UNLIKELY(moved != 0)) answered(self, thief, moved);
    if (t != nullptr) return t;
    unsigned victim = mesh_queues::kNone;
    t = mesh_.balance_step(c, now_ns(), &victim, &moved);
    if (t != nullptr) {
      if (trace_buffer* b = self.trace()) b->put(trace_kind::mesh_migrate, (moved << 16) | victim);
      // More moved than the one we run: pass a wake-up on.
      if (moved > 1) rt_.notify_one();
    }
    return t;
  }

  bool visible(worker&) noexcept override { return mesh_.visible(); }

  // self moved `moved` tasks into thief's row (a steal request answered).
  void answered(worker& self, unsigned thief, std::size_t moved) noexcept {
    if (trace_buffer* b = self.trace()) b->put(trace_kind::mesh_migrate, (moved << 16) | thief);
    // The thief asked and is probably awake; if it parked meanwhile, its
    // tasks must not wait: migrate()'s seq_cst fence came after the tail
    // stores, so this seq_cst load pairs with park() as in schedule().
    if (rt_.has_sleepers()) rt_.wake_idle(rt_.worker_at(thief));
  }

  void print_stats() const override {
    std::fprintf(stderr,
                 "mote: mesh scheduler (MOTE_SCHEDULER=mesh, balance %s, %zu slots a cell)\n",
                 mesh_balance_name(mesh_.balance()), mesh_.cell_capacity());
    std::fprintf(stderr, "%6s %10s %10s %10s %10s %10s %10s %10s %10s\n", "worker", "len_max",
                 "len_mean", "redirects", "requests", "answers", "migr_out", "forced", "migr_in");
    for (unsigned c = 0; c < mesh_.size(); ++c) {
      const mesh_queues::row_stats& s = mesh_.stats(c);
      const double mean =
          s.samples != 0 ? static_cast<double>(s.sum_len) / static_cast<double>(s.samples) : 0.0;
      std::fprintf(stderr, "%6u %10llu %10.2f %10llu %10llu %10llu %10llu %10llu %10llu\n", c,
                   static_cast<unsigned long long>(s.max_len), mean,
                   static_cast<unsigned long long>(s.redirects),
                   static_cast<unsigned long long>(s.requests),
                   static_cast<unsigned long long>(s.answers),
                   static_cast<unsigned long long>(s.migrated_out),
                   static_cast<unsigned long long>(s.forced),
                   static_cast<unsigned long long>(s.migrated_in));
    }
  }

 private:
  static std::vector<unsigned> nodes_of(const resolved_config& config) {
    std::vector<unsigned> nodes = config.worker_nodes;
    nodes.resize(std::max(1u, config.num_workers), 0);
    return nodes;
  }

  runtime_impl& rt_;
  mesh_queues mesh_;
};

}  // namespace

std::unique_ptr<scheduler> make_mesh(runtime_impl& rt, const resolved_config& config) {
  return std::make_unique<mesh_policy>(rt, config);
}

}  // namespace mote::detail
