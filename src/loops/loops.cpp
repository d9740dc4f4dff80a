// Parallel loops: teams from the topology, stripes, request combining, the
// gates and the completion tree, and how idle workers join a loop.
// docs/loops.md has the protocol; the memory-order arguments are beside the
// atomics.
#include "loops/loops.hpp"

#include <algorithm>
#include <exception>
#include <map>
#include <tuple>

#include "mote/detail/worker.hpp"
#include "mote/export.hpp"
#include "mote/loops.hpp"
#include "mote/runtime.hpp"
#include "mote/task_group.hpp"
#include "mote/trace.hpp"
#include "core/extension.hpp"
#include "wait/idle.hpp"
#include "core/runtime_impl.hpp"
#include "wait/event_count.hpp"

#if defined(__x86_64__) || defined(__i386__)
#  include <x86intrin.h>
#endif

namespace mote::detail {

// The data-flow task whose body this thread runs, and setting it
// (mote/dataflow.hpp, declared here to keep that header out of the loops').
MOTE_API df_task* df_current_task() noexcept;
MOTE_API df_task* df_exchange_current_task(df_task* t) noexcept;

namespace {

__extension__ typedef unsigned __int128 u128;  // products of two 64-bit counts

// Time-stamp-counter ticks: what adaptive batches are sized in.
inline std::uint64_t loop_ticks() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return static_cast<std::uint64_t>(now_ns());
#endif
}

// ---- Teams -------------------------------------------------------------------

// Where a worker sits: its package and core (for an unpinned worker, the
// place of the CPU its index would take, so that teams still follow the
// machine's shape).
struct place {
  int package = 0;
  int core = 0;
  int smt = 0;
};

constexpr int kLevels = 3;  // machine, package, core

int key_at(const place& p, int level) noexcept {
  switch (level) {
    case 0: return 0;
    case 1: return p.package;
    default: return p.core;
  }
}

}  // namespace

loop_teams::loop_teams(const resolved_config& config) {
  const unsigned n = config.num_workers;
  const topology& t = config.machine;
  std::vector<place> places(n);
  for (unsigned i = 0; i < n; ++i) {
    const cpu_info* cpu = nullptr;
    if (i < config.worker_cpus.size() && config.worker_cpus[i] >= 0) cpu = t.find(config.worker_cpus[i]);
    if (cpu == nullptr && !t.cpus.empty()) cpu = &t.cpus[i % t.cpus.size()];
    if (cpu != nullptr) {
      places[i] = place{cpu->package, cpu->core, cpu->smt_rank};
    } else {
      places[i] = place{0, static_cast<int>(i), 0};
    }
  }
  std::vector<unsigned> all(n);
  for (unsigned i = 0; i < n; ++i) all[i] = i;
  std::sort(all.begin(), all.end(), [&](unsigned a, unsigned b) {
    return std::tie(places[a].package, places[a].core, places[a].smt, a) <
           std::tie(places[b].package, places[b].core, places[b].smt, b);
  });
  by_worker_.resize(n);

  // The groups of `members` (in seat order) at `level`, in order.
  auto split = [&](const std::vector<unsigned>& members, int level) {
    std::vector<std::vector<unsigned>> groups;
    for (unsigned w : members) {
      if (groups.empty() || key_at(places[groups.back().front()], level) != key_at(places[w], level)) {
        groups.emplace_back();
      }
      groups.back().push_back(w);
    }
    return groups;
  };

  auto make = [&](const std::vector<unsigned>& members, int level) {
    auto team = std::make_unique<loop_team>();
    team->members = members;
    team->seat_of.assign(n, -1);
    for (unsigned s = 0; s < members.size(); ++s) team->seat_of[members[s]] = static_cast<int>(s);
    // Domains: the first finer level that splits the team into groups of two
    // or more on average, else runs of kDomainSeats seats.
    std::vector<unsigned> sizes;
    for (int l = level + 1; l < kLevels && sizes.empty(); ++l) {
      auto groups = split(members, l);
      if (groups.size() >= 2 && members.size() >= 2 * groups.size()) {
        for (auto& g : groups) sizes.push_back(static_cast<unsigned>(g.size()));
      }
    }
    if (sizes.empty()) {
      for (std::size_t s = 0; s < members.size(); s += loop_team::kDomainSeats) {
        sizes.push_back(static_cast<unsigned>(std::min<std::size_t>(loop_team::kDomainSeats, members.size() - s)));
      }
    }
    unsigned first = 0;
    for (unsigned d = 0; d < sizes.size(); ++d) {
      team->domain_first.push_back(first);
      for (unsigned k = 0; k < sizes[d]; ++k) team->domain_of.push_back(d);
      first += sizes[d];
    }
    team->domain_first.push_back(first);
    teams_.push_back(std::move(team));
    return teams_.back().get();
  };

  // Depth d's team of a worker: depth 0 the whole runtime; each deeper depth
  // the group of the next finer level that is smaller and holds two or more
  // workers; when there is none, the same team again.
  auto assign = [&](auto& self, const loop_team* team, int level, unsigned depth) -> void {
    for (unsigned w : team->members) by_worker_[w][depth] = team;
    if (depth + 1 >= kMaxLoopDepth) return;
    for (int l = level + 1; l < kLevels; ++l) {
      auto groups = split(team->members, l);
      if (groups.size() < 2) continue;
      for (auto& g : groups) {
        if (g.size() >= 2) {
          self(self, make(g, l), l, depth + 1);
        } else {
          for (unsigned d = depth + 1; d < kMaxLoopDepth; ++d) by_worker_[g.front()][d] = team;
        }
      }
      return;
    }
    for (unsigned d = depth + 1; d < kMaxLoopDepth; ++d) {
      for (unsigned w : team->members) by_worker_[w][d] = team;
    }
  };
  assign(assign, make(all, 0), 0, 0);
}

// ---- The open loop -------------------------------------------------------------

loop_desc::loop_desc(const loop_team& t, worker& w, unsigned d)
    : team(t),
      owner(w),
      depth(d),
      stripes(std::make_unique<loop_stripe[]>(t.size())),
      requests(std::make_unique<loop_request[]>(t.size())),
      domains(std::make_unique<loop_domain[]>(t.num_domains())) {
  // Closed, with seq 0: nobody joins before the first loop opens.
  for (unsigned i = 0; i < t.num_domains(); ++i) domains[i].gate.store(kClosed, std::memory_order_relaxed);
}

void destroy_loop_desc(loop_desc* d) noexcept { delete d; }

namespace {

// The leader's side: sets the loop up and opens the gates.
void open_loop(loop_desc& d, loop_job& job, worker& w) {
  const loop_team& team = d.team;
  const unsigned seats = team.size();
  ++d.seq;
  d.job = &job;
  d.group = w.current_group();
  d.flow = df_current_task();
  if (job.grain != 0) {
    d.hint = job.grain;
  } else {
    // The batch this body's last loop here ended with, but leaving every
    // seat a few batches: the same body may cost more on other data.
    const std::uint64_t cap = std::max<std::uint64_t>(1, job.units / (4 * std::uint64_t{seats}));
    d.hint = job.site == d.learnt_site ? std::min(d.learnt_batch, cap) : 1;
  }
  // Relaxed, as every store below up to the gates: their release stores
  // publish them to whoever joins this loop.
  d.stop.store(false, std::memory_order_relaxed);
  d.dry.store(false, std::memory_order_relaxed);
  for (unsigned s = 0; s < seats; ++s) {
    // Even stripes; units < 2^62 and seats < 2^23, so the product fits in 128 bits.
    const auto lo = static_cast<std::uint64_t>(static_cast<u128>(job.units) * s / seats);
    const auto hi = static_cast<std::uint64_t>(static_cast<u128>(job.units) * (s + 1) / seats);
    // Relaxed: published by the gates' release stores below.
    d.stripes[s].next.store(lo, std::memory_order_relaxed);
    d.stripes[s].end = hi;
  }
  const unsigned domains = team.num_domains();
  for (unsigned i = 0; i < domains; ++i) {
    d.domains[i].remote_dry.store(false, std::memory_order_relaxed);
    d.domains[i].cursor = team.domain_first[i + 1] % seats;
  }
  d.pending.store(domains, std::memory_order_relaxed);
  // Release: a participant that joins through a gate (its acquire CAS) sees
  // everything above. The previous loop's participants have all left (its
  // close waited for them), so none reads these fields while they change.
  for (unsigned i = 0; i < domains; ++i) {
    d.domains[i].gate.store(d.seq << loop_desc::kSeqShift, std::memory_order_release);
  }
}

// The leader's side: closes every gate and waits until the participants
// inside have left. Meanwhile it runs the tasks of its own pool: a body
// elsewhere may be waiting for one that this worker spawned before the loop,
// and nobody else can take them while they are private.
void close_loop(loop_desc& d, worker& w) noexcept {
  const unsigned domains = d.team.num_domains();
  std::uint32_t drained = 0;
  for (unsigned i = 0; i < domains; ++i) {
    // acq_rel: acquires the bodies' writes of the participants that already
    // left (their release fetch_sub), and orders the close before the wait.
    const std::uint64_t old = d.domains[i].gate.fetch_or(loop_desc::kClosed, std::memory_order_acq_rel);
    if ((old & loop_desc::kActive) == 0) ++drained;
  }
  if (drained == domains) return;
  // The domains still busy each end with one fetch_sub by their last leaver.
  std::uint32_t v = d.pending.fetch_sub(drained, std::memory_order_acq_rel) - drained;
  idle_wait idle(w.runtime().spin_ns());
  while ((v & ~loop_desc::kLeaderParked) != 0) {
    // The newest first, as a group's wait takes them (pop_any also shares
    // half of them when a thief asked). A task run here is on top of this
    // open loop: the loops it starts are keyed one further (loops_open() is
    // still this loop's), and its bodies' depth is the leader's own.
    if (task* t = w.pool().pop_any()) {
      w.run_task(t, nullptr);
      idle.reset();
    } else if (!idle.spin()) {
      // The pool is empty and only this worker pushes on it: nothing it
      // holds is left for anyone, so it may sleep until the last leaver
      // wakes it. The event count's one-word form (wait/event_count.hpp):
      // the parked bit is the announcement, in the count itself.
      if ((v & loop_desc::kLeaderParked) == 0 &&
          !d.pending.compare_exchange_strong(v, v | loop_desc::kLeaderParked,
                                             std::memory_order_acquire)) {
        continue;  // v reloaded
      }
      event_word::commit(&d.pending, v | loop_desc::kLeaderParked);
    }
    // Acquire: pairs with the last leavers' release fetch_sub, so their
    // bodies' writes are visible once it reads 0.
    v = d.pending.load(std::memory_order_acquire);
  }
}

// A participant leaves domain `dom` of d. Its last access to d, but for the
// wake-up, which touches no memory.
void leave_loop(loop_desc& d, unsigned dom) noexcept {
  // Release: publishes this participant's bodies to the leader (its close, or
  // through the last leaver's pending decrement, a release sequence).
  const std::uint64_t old = d.domains[dom].gate.fetch_sub(1, std::memory_order_acq_rel);
  if ((old & loop_desc::kClosed) == 0 || (old & loop_desc::kActive) != 1) return;
  // The last one out of a closed domain.
  std::atomic<std::uint32_t>* pending = &d.pending;
  const std::uint32_t was = pending->fetch_sub(1, std::memory_order_acq_rel);
  if ((was & ~loop_desc::kLeaderParked) == 1 && (was & loop_desc::kLeaderParked) != 0) event_word::notify(pending, 1);
}

struct trace_scope {
  worker& w;
  bool on;
  trace_scope(worker& wk, bool instrumented) : w(wk), on(instrumented) {
    if (on) w.note_task_begin("mote::parallel_for", true);
  }
  ~trace_scope() {
    if (on) w.note_task_end();
  }
};

// Runs the participate function with the worker's depth set for the bodies,
// its claims stopped by a cancellation of `group` (the starter's).
void participate(worker& w, unsigned body_depth, loop_job& job, loop_claimer& claims,
                 const task_group* group) noexcept {
  claims.watch(group);
  loop_worker& mine = loops_of(w);
  const unsigned saved = mine.depth;
  mine.depth = body_depth;
  {
    trace_scope scope(w, w.instrumented());
    // The template's participate catches what bodies throw; nothing else
    // throws there but the allocation of a reduction's pieces, which ends the
    // process as any noexcept failure would.
    job.participate(job, claims);
  }
  mine.depth = saved;
  worker_stats& st = w.stats();
  st.loop_batches += claims.batches();
  st.loop_remote += claims.remote_batches();
}

// The combiner: claims for every asking seat of domain `dom` at once from
// other domains' stripes, and answers each. Under the domain's lock.
void serve_requests(loop_desc& d, unsigned dom) noexcept {
  const loop_team& team = d.team;
  loop_domain& dm = d.domains[dom];
  const unsigned first = team.domain_first[dom];
  const unsigned last = team.domain_first[dom + 1];
  constexpr unsigned kMaxAsking = 64;  // more wait for the next round
  unsigned asking[kMaxAsking];
  std::uint64_t wants[kMaxAsking];
  unsigned count = 0;
  std::uint64_t total = 0;
  for (unsigned s = first; s < last && count < kMaxAsking; ++s) {
    // Acquire: pairs with the requester's release store; reads its `end`.
    if (d.requests[s].begin.load(std::memory_order_acquire) == loop_request::kAsking) {
      asking[count] = s;
      wants[count] = d.requests[s].end;
      total += wants[count];
      ++count;
    }
  }
  unsigned served = 0;
  auto answer = [&](unsigned s, std::uint64_t b, std::uint64_t e) {
    d.requests[s].end = e;
    // Release: the requester that reads b (acquire) reads e.
    d.requests[s].begin.store(b, std::memory_order_release);
  };
  const unsigned seats = team.size();
  for (unsigned visited = 0; served < count && visited < seats;) {
    const unsigned s = dm.cursor;
    if (s >= first && s < last) {  // our own domain: skip past it
      dm.cursor = last % seats;
      visited += last - s;
      continue;
    }
    loop_stripe& st = d.stripes[s];
    if (st.next.load(std::memory_order_relaxed) < st.end) {
      // One claim for everyone asking: the point of combining.
      std::uint64_t b = st.next.fetch_add(total, std::memory_order_relaxed);
      if (b < st.end) {
        const std::uint64_t e = st.end - b < total ? st.end : b + total;
        while (served < count && b < e) {
          const std::uint64_t take = e - b < wants[served] ? e - b : wants[served];
          answer(asking[served], b, b + take);
          b += take;
          total -= wants[served];
          ++served;
        }
        if (served == count) break;  // the stripe may hold more: stay on it
      }
    }
    dm.cursor = (s + 1) % seats;
    ++visited;
  }
  if (served < count) {
    // Relaxed: a hint that spares later requesters the lock; one that misses
    // it asks, and is answered "nothing" the same way.
    dm.remote_dry.store(true, std::memory_order_relaxed);
    for (; served < count; ++served) answer(asking[served], loop_request::kNothing, 0);
  }
}

}  // namespace

// ---- Claims ------------------------------------------------------------------

loop_claimer::loop_claimer(loop_desc& d, unsigned seat, std::uint64_t grain, std::uint64_t hint) noexcept
    : own_(&d.stripes[seat]),
      own_end_(d.stripes[seat].end),
      batch_(clamp_batch(grain != 0 ? grain : hint)),
      desc_(&d),
      stop_(&d.stop),
      seat_(seat) {
  if (grain == 0) until_tune_ = 1;
}

void loop_claimer::watch(const task_group* g) noexcept {
  group_ = g;
  cancels_ = g != nullptr ? &group_cancels_active : nullptr;
}

bool loop_claimer::group_cancelled() const noexcept { return group_->is_cancelled(); }

void loop_claimer::stop() noexcept {
  // Relaxed: claimers read it as a hint (stopped()); the failure itself
  // reaches the starter through loop_job::failed and the loop's end.
  if (desc_ != nullptr) desc_->stop.store(true, std::memory_order_relaxed);
}

void loop_fail(loop_job& job, loop_claimer& claims) noexcept {
  bool expected = false;
  // The first failure stores its exception; the starter reads it after the
  // loop's completion, which the participants' release leaves order after.
  if (job.failed.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
    job.error = std::current_exception();
  }
  claims.stop();
}

void loop_claimer::retune() noexcept {
  const std::uint64_t now = loop_ticks();
  if (window_start_ != 0 && now > window_start_ && window_units_ != 0) {
    // The last window: window_units_ units claimed and run (a reservation is
    // used up before the next claim, which is when this runs). Aim the next
    // batch at kTargetTicks, moving at most 4x either way per window so that
    // one interrupted batch does not swing it.
    const std::uint64_t spent = now - window_start_;
    auto want = static_cast<u128>(kTargetTicks) * window_units_ / spent;
    const std::uint64_t lo = std::max<std::uint64_t>(1, batch_ / 4);
    const std::uint64_t hi = std::min(batch_ * 4, kMaxBatch);
    if (want < lo) want = lo;
    if (want > hi) want = hi;
    batch_ = static_cast<std::uint64_t>(want);
    if (window_len_ < 16) window_len_ *= 2;
  }
  window_start_ = now;
  window_units_ = 0;
  until_tune_ = window_len_;
}

bool loop_claimer::next_elsewhere(std::uint64_t* begin, std::uint64_t* end) noexcept {
  loop_desc* d = desc_;
  if (d == nullptr || stopped()) return false;
  const loop_team& team = d->team;
  const unsigned dom = team.domain_of[seat_];
  const unsigned first = team.domain_first[dom];
  const unsigned size = team.domain_first[dom + 1] - first;
  // The other stripes of this domain, each until it is empty.
  for (; cursor_ + 1 < size; ++cursor_) {
    loop_stripe& s = d->stripes[first + (seat_ - first + cursor_ + 1) % size];
    // A look first, so that an empty stripe's line is not taken exclusive.
    if (s.next.load(std::memory_order_relaxed) >= s.end) continue;
    const std::uint64_t b = s.next.fetch_add(batch_, std::memory_order_relaxed);
    if (b >= s.end) continue;
    *begin = b;
    *end = s.end - b < batch_ ? s.end : b + batch_;
    ++batches_;
    units_ += *end - b;
    return true;
  }
  if (team.num_domains() > 1) {
    loop_domain& dm = d->domains[dom];
    if (!dm.remote_dry.load(std::memory_order_relaxed) && !stopped()) {
      loop_request& mine = d->requests[seat_];
      mine.end = batch_;
      // Release: the combiner that reads kAsking (acquire) reads `end` too.
      mine.begin.store(loop_request::kAsking, std::memory_order_release);
      backoff wait;
      for (;;) {
        // Acquire: pairs with the combiner's release store of the answer.
        const std::uint64_t v = mine.begin.load(std::memory_order_acquire);
        if (v != loop_request::kAsking) {
          // Relaxed: only this requester writes kIdle or kAsking, and the
          // combiner acts on kAsking alone, which a release store publishes.
          mine.begin.store(loop_request::kIdle, std::memory_order_relaxed);
          if (v == loop_request::kNothing) break;
          *begin = v;
          *end = mine.end;
          ++batches_;
          units_ += mine.end - v;
          ++remote_;
          return true;
        }
        // Acquire on the lock: the previous holder's answers and cursor.
        if (dm.lock.load(std::memory_order_relaxed) == 0 &&
            dm.lock.exchange(1, std::memory_order_acquire) == 0) {
          serve_requests(*d, dom);
          dm.lock.store(0, std::memory_order_release);
          continue;
        }
        wait.pause();
      }
    }
  }
  // Relaxed: a hint for idle workers deciding whether to try the gate.
  d->dry.store(true, std::memory_order_relaxed);
  return false;
}

// ---- Starting a loop -----------------------------------------------------------

namespace {

// After a loop's publication: wakes up to `count` members of team other than
// self that sleep (or cancels their announcement).
void wake_for_loop(runtime_impl& rt, worker& self, const loop_team& team, unsigned count) noexcept {
  if (count == 0 || !rt.has_sleepers()) return;
  const unsigned seats = team.size();
  const unsigned mine = static_cast<unsigned>(team.seat_of[self.index()]);
  for (unsigned k = 1; k < seats && count != 0; ++k) {
    if (rt.wake_idle(rt.worker_at(team.members[(mine + k) % seats]))) --count;
  }
}

// The batch of about kTargetTicks for a body that ran `units` in `ticks`,
// moving at most 4x from the last estimate (one preempted run should not
// swing it).
std::uint64_t learn_batch(std::uint64_t last, std::uint64_t units, std::uint64_t ticks) noexcept {
  if (units == 0 || ticks == 0) return last;
  auto want = static_cast<u128>(loop_claimer::kTargetTicks) * units / ticks;
  const std::uint64_t lo = std::max<std::uint64_t>(1, last / 4);
  const std::uint64_t hi = std::min(last * 4, loop_claimer::kMaxBatch);
  if (want < lo) want = lo;
  if (want > hi) want = hi;
  return static_cast<std::uint64_t>(want);
}

}  // namespace

void run_loop(worker& w, loop_job& job) {
  if (job.units == 0) return;
  runtime_impl& rt = w.runtime();
  loop_worker& state = loops_of(w);
  const unsigned depth = state.depth;
  const unsigned open = state.leading;
  const bool one_batch = job.grain != 0 && job.units <= job.grain;
  if (rt.num_workers() == 1 || depth >= kMaxLoopDepth || open >= kMaxLoopDepth || one_batch ||
      state.teams->team(w.index(), depth).size() < 2) {
    loop_claimer alone(job.units, job.grain);
    participate(w, depth + 1, job, alone, w.current_group());
    return;
  }
  const loop_team& team = state.teams->team(w.index(), depth);
  // Keyed by the loops this worker leads already, not by depth alone: from a
  // join's wait inside one of its loop's bodies a worker may join another
  // loop and, in that loop's body, start one at a depth it already leads at.
  loop_desc*& frame = state.frames[open][depth];
  if (frame == nullptr) frame = new loop_desc(team, w, depth);  // may throw: nothing started
  loop_desc& d = *frame;
  if (job.grain == 0 && job.site == d.learnt_site && job.units <= d.learnt_batch) {
    // The last loop of this body here says the whole loop is about one
    // batch of work: less than handing batches out would cost (a nested
    // loop of a few hundred cheap iterations, say). Run it alone, timed, so
    // that the estimate follows the data.
    const std::uint64_t start = loop_ticks();
    loop_claimer alone(job.units, 0);
    participate(w, depth + 1, job, alone, w.current_group());
    d.learnt_batch = learn_batch(d.learnt_batch, job.units, loop_ticks() - start);
    return;
  }
  state.leading = open + 1;
  open_loop(d, job, w);
  // Relaxed: only this worker stores its own open slot; the load reads back
  // its own last store (the loop this one nests in, or null).
  loop_desc* const outer = state.open.load(std::memory_order_relaxed);
  // seq_cst: the Dekker pair of park()'s announcement; either a parking
  // worker's last look (loops_visible) sees this loop, or wake_for_loop()
  // below sees it.
  state.open.store(&d, std::memory_order_seq_cst);
  const std::uint64_t batches =
      job.grain != 0 ? job.units / job.grain + (job.units % job.grain != 0 ? 1 : 0) : job.units;
  wake_for_loop(rt, w, team, static_cast<unsigned>(std::min<std::uint64_t>(team.size() - 1, batches - 1)));
  const unsigned seat = static_cast<unsigned>(team.seat_of[w.index()]);
  loop_claimer mine(d, seat, job.grain, d.hint);
  const std::uint64_t start = loop_ticks();
  participate(w, depth + 1, job, mine, d.group);
  const std::uint64_t spent = loop_ticks() - start;
  // No new participant after this is any use. Release only keeps this store
  // after the claims above; nothing is published through it: a worker that
  // still reads &d tries the gate, which decides (and closes below).
  state.open.store(outer, std::memory_order_release);
  close_loop(d, w);
  state.leading = open;
  if (job.grain == 0) {
    // What the leader's own part took, per unit: a loop too short for its
    // batches to grow still tells what one batch of about kTargetTicks is.
    const std::uint64_t last = d.learnt_site == job.site ? d.learnt_batch : mine.batch();
    d.learnt_site = job.site;
    d.learnt_batch = std::max(mine.batch(), learn_batch(last, mine.units(), spent));
  }
  ++w.stats().loops;
}

void start_loop(loop_job& job) {
  if (job.units != 0) {
    if (worker* w = current_worker) {
      run_loop(*w, job);
    } else if (on_assistant_thread()) {
      loop_claimer alone(job.units, job.grain);
      job.participate(job, alone);
    } else {
      runtime::default_runtime().run([&job] { run_loop(*current_worker, job); });
    }
  }
  // Acquire: the failure's store, in whichever participant, happened before
  // the loop's end; this load is after it on this thread anyway.
  if (job.failed.load(std::memory_order_acquire)) std::rethrow_exception(job.error);
}

// ---- The runtime's side: idle workers, parking, wake-ups --------------------
// The model's hooks (src/models.cpp lists them), and what they use.

namespace {

// Joins d through the gate of self's domain and runs batches until none is
// left. False when self is not in d's team or d is not open (any more).
bool join_loop(loop_desc& d, worker& self) noexcept {
  // Relaxed: a hint, validated by the gate.
  if (d.dry.load(std::memory_order_relaxed)) return false;
  const int seat = d.team.seat_of[self.index()];
  if (seat < 0) return false;
  const unsigned dom = d.team.domain_of[static_cast<unsigned>(seat)];
  std::atomic<std::uint64_t>& gate = d.domains[dom].gate;
  std::uint64_t g = gate.load(std::memory_order_relaxed);
  do {
    if ((g & loop_desc::kClosed) != 0) return false;
    // Acquire on success: pairs with open_loop()'s release store of this
    // seq, so the job, hint and stripes read below are this loop's. While we
    // are counted in, the leader cannot finish this loop nor open another.
  } while (!gate.compare_exchange_weak(g, g + 1, std::memory_order_acquire, std::memory_order_relaxed));
  loop_job& job = *d.job;
  loop_claimer claims(d, static_cast<unsigned>(seat), job.grain, d.hint);
  // The leader's context, in place of whatever this worker was inside (a
  // wait in some task): a group made in a body binds to the leader's group,
  // a data-flow scope nests in its task, as on the leader.
  const std::uint32_t level = self.enter_group(d.group);
  df_task* const flow = df_exchange_current_task(d.flow);
  participate(self, d.depth + 1, job, claims, d.group);
  df_exchange_current_task(flow);
  self.leave_group(level);
  ++self.stats().loop_joins;
  leave_loop(d, dom);
  return claims.batches() != 0;
}

bool open_for(const loop_desc* d, const worker& self) noexcept {
  return d != nullptr && d->team.seat_of[self.index()] >= 0 && !d->dry.load(std::memory_order_relaxed);
}

// An idle worker joins an open loop of a team it belongs to and runs its
// batches. True when it ran at least one.
bool help_loops(worker& self) noexcept {
  runtime_impl& rt = self.runtime();
  const unsigned n = rt.num_workers();
  for (unsigned k = 1; k < n; ++k) {
    const worker& v = rt.worker_at((self.index() + k) % n);
    // Acquire: the desc's constant fields (team, depth) were written before
    // the first publication; the loop's own fields are read after the gate.
    loop_desc* d = loops_of(v).open.load(std::memory_order_acquire);
    if (open_for(d, self) && join_loop(*d, self)) return true;
  }
  return false;
}

// park()'s last look: an open loop self could join.
bool loops_visible(worker& self) noexcept {
  runtime_impl& rt = self.runtime();
  const unsigned n = rt.num_workers();
  for (unsigned i = 0; i < n; ++i) {
    const worker& w = rt.worker_at(i);
    if (&w == &self) continue;
    // seq_cst: the Dekker pair of run_loop()'s publication (see park()).
    if (open_for(loops_of(w).open.load(std::memory_order_seq_cst), self)) return true;
  }
  return false;
}

void* make_teams(runtime_impl& rt) { return new loop_teams(rt.config()); }
void free_teams(void* teams) noexcept { delete static_cast<loop_teams*>(teams); }

void* make_loop_worker(worker&, void* teams) {
  auto* state = new loop_worker;
  state->teams = static_cast<const loop_teams*>(teams);
  return state;
}

void free_loop_worker(void* p) noexcept {
  auto* state = static_cast<loop_worker*>(p);
  if (state == nullptr) return;
  for (auto& row : state->frames) {
    for (loop_desc* d : row) destroy_loop_desc(d);
  }
  delete state;
}

}  // namespace

extern const model_hooks loops_model;
const model_hooks loops_model = {
    .name = "loops",
    .slot = kLoopsSlot,
    .make_runtime = make_teams,
    .free_runtime = free_teams,
    .make_worker = make_loop_worker,
    .free_worker = free_loop_worker,
    .thread_begin = nullptr,
    .thread_end = nullptr,
    .help = help_loops,
    .visible = loops_visible,
};

}  // namespace mote::detail
