// OpenMP teams on mote's workers: the OpenMP runtime, regions, the barrier
// and the queries. team.hpp has the shape; docs/openmp.md the mapping.
#include "omp/team.hpp"
#include "omp/omp.hpp"

#include <emmintrin.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/extension.hpp"
#include "core/runtime_impl.hpp"
#include "mote/runtime.hpp"
#include "omp/tasks.hpp"

namespace mote::omp {

using detail::runtime_impl;
using detail::worker;

namespace {

// Per worker of every runtime (its extension slot): the mailbox through
// which a region reaches it. Only the OpenMP runtime's are ever written.
struct alignas(cache_line) seat {
  // The team this worker is to join, or nullptr. Stored (seq_cst) by the
  // region's thread 0 after `id`, then the worker is woken (wake_idle): the
  // Dekker pair with the worker's last look before it parks (seat_visible).
  // Taken by the worker with an acquire load, which orders `id` and the team.
  std::atomic<team*> mailbox{nullptr};
  unsigned id = 0;
  bool busy = false;  // in a team, or reserved for one (under omp_state::mutex)
};

// A contention group's OpenMP runtime: the workers of the outermost region
// that holds it (its caller seat), and of the regions nested in it. Outermost
// regions that run at once (opened by different application threads) each
// hold a group of their own; a group is made on demand and kept for the next
// outermost region that finds it free.
struct omp_group {
  std::unique_ptr<mote::runtime> rt;
  runtime_impl* impl = nullptr;
  bool in_use = false;  // an outermost region holds it (its seat taken or about to be)
};

struct omp_state {
  std::mutex mutex;  // the groups (taking, creating, growing them); reservations
  // Never shrinks; the first is the runtime of runtime() and the one whose
  // workers sit on the cores (the others' workers float: see ensure_runtime).
  std::vector<std::unique_ptr<omp_group>> groups;
};

omp_state& state() {
  // Never destroyed: a worker may still be parked in it while static
  // objects are destroyed at exit (the process ends them).
  static omp_state* s = new omp_state;
  return *s;
}

seat& seat_of(worker& w) noexcept { return *static_cast<seat*>(w.slot(kOmpSlot)); }


// set_region_start_hook's function. Relaxed: set before any region starts
// (libgomp.so.1's constructor); only a code address, nothing published.
std::atomic<void (*)()> region_start_hook{nullptr};

void region_started() {
  void (*hook)() = region_start_hook.load(std::memory_order_relaxed);
  if (MOTE_UNLIKELY(hook != nullptr)) hook();
}

thread_state& initial_state() {
  // A thread in no region: level 0, its initial task, no team.
  static thread_local std::unique_ptr<thread_state> mine;
  if (!mine) {
    mine = std::make_unique<thread_state>();
    mine->task = &mine->implicit;
  }
  return *mine;
}

// Are threads bound to places (OMP_PLACES given, or OMP_PROC_BIND other
// than false)?
bool binds(const global_icvs& g) {
  if (g.places.empty()) return false;
  return g.initial.bind != bind_false || std::getenv("OMP_PLACES") != nullptr;
}

std::int64_t spin_ns_for_omp() {
  // OMP_WAIT_POLICY / GOMP_SPINCOUNT choose how long an idle OpenMP thread
  // spins before it sleeps, when MOTE_SPIN_US does not (explicit > MOTE_* >
  // OMP_*). passive: sleep at once; active: spin 10 ms (idle threads still
  // sleep after that: an idle program uses no CPU); GOMP_SPINCOUNT=n: n ns.
  const global_icvs& g = globals();
  if (g.spincount_set) return static_cast<std::int64_t>(std::min<unsigned long long>(g.spincount, 10'000'000'000ull));
  if (g.wait_policy == 0) return 0;
  if (g.wait_policy == 1) return 10'000'000;
  return -1;  // mote's default
}

// The most threads a team has: 64 per CPU this process may use, at least
// 256, at most 4096 (mote's limit on a runtime's workers, core/config.cpp).
// A team asked for more is this large (OpenMP lets a team be smaller than
// asked); omp_get_num_threads() says how large it is. Far more workers than
// CPUs cost mote time that grows with their square (an idle worker's look
// visits every other worker): on 2 CPUs a region of 1024 threads took 2-4 s,
// of 2048 threads 9-15 s, of 256 threads 0.03-0.3 s.
unsigned max_team() {
  static const unsigned cap = std::clamp(64 * globals().num_procs, 256u, 4096u);
  return cap;
}

// MOTE_STATS=1: the OpenMP runtimes are never destroyed (a worker may be
// parked in one while the process exits), so nothing would print their
// counters, which a runtime prints when it ends. At exit, when no region
// holds a group and the exiting thread is none of their workers, they are
// ended then (outside the mutex: a worker's way out may take it).
void end_for_stats() {
  std::vector<std::unique_ptr<mote::runtime>> ending;
  {
    omp_state& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (detail::current_worker != nullptr) return;
    for (const auto& g : s.groups) {
      if (g->in_use) return;
    }
    for (auto& g : s.groups) {
      if (g->rt == nullptr || g->impl->orphaned()) continue;
      ending.push_back(std::move(g->rt));
      g->impl = nullptr;
    }
  }
  ending.clear();
}

// Under omp_state::mutex, on a group that no region runs on (held by the
// caller, or made by runtime()): a runtime of at least `want` workers (worker
// 0 is the caller seat). `first`: the first group, whose workers mote binds
// as usual (one per core); the others' are left to the kernel unless places
// ask otherwise, so that groups running at once do not pile onto the same
// cores.
runtime_impl& ensure_runtime(omp_group& s, unsigned want, bool first) {
  if (s.impl != nullptr && s.impl->num_workers() >= want && !s.impl->orphaned()) return *s.impl;
  if (s.rt != nullptr && s.impl->orphaned()) {
    (void)s.rt.release();  // a child after fork(): its workers live in the parent
  }
  s.rt.reset();
  s.impl = nullptr;
  runtime_options o;
  o.caller_seat = true;
  if (std::getenv("MOTE_NUM_THREADS") == nullptr) o.num_workers = want;
  if (std::getenv("MOTE_SPIN_US") == nullptr) {
    const std::int64_t ns = spin_ns_for_omp();
    if (ns >= 0) o.spin = std::chrono::microseconds(ns / 1000);
  }
  const global_icvs& g = globals();
  o.stack_size = g.stacksize;  // OMP_STACKSIZE / GOMP_STACKSIZE
  if (std::getenv("MOTE_BIND") == nullptr && binds(g)) {
    // OMP_PLACES / OMP_PROC_BIND: worker i on place i (its first CPU this
    // process may use), as GNU's close binding puts a team's threads; thread
    // 0, in the seat, is bound to the first place already
    // (bind_initial_thread). A place with no such CPU (GOMP_CPU_AFFINITY
    // may name any, and GNU's list keeps them) gets no worker.
    binding b;
    b.mode = binding::kind::list;
    for (const place& p : g.places) {
      const auto usable = std::find_if(p.begin(), p.end(), [&g](int cpu) {
        return std::binary_search(g.allowed_cpus.begin(), g.allowed_cpus.end(), cpu);
      });
      if (usable != p.end()) b.cpus.push_back(*usable);
    }
    if (!b.cpus.empty()) o.bind = b;
  } else if (std::getenv("MOTE_BIND") == nullptr && !first) {
    binding b;
    b.mode = binding::kind::none;
    o.bind = b;
  }
  // The calling thread may be bound to its place already (thread 0): the
  // runtime is made with the process's CPUs in view (mote checks the
  // binding against the caller's affinity), then the binding is restored.
  cpu_set_t mine;
  const bool restore = binds(g) && sched_getaffinity(0, sizeof(mine), &mine) == 0 && !g.allowed_cpus.empty();
  if (restore) {
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int c : g.allowed_cpus) CPU_SET(c, &all);
    (void)sched_setaffinity(0, sizeof(all), &all);
  }
  try {
    s.rt = std::make_unique<mote::runtime>(o);
  } catch (...) {
    if (restore) (void)sched_setaffinity(0, sizeof(mine), &mine);
    throw;
  }
  if (restore) (void)sched_setaffinity(0, sizeof(mine), &mine);
  s.impl = &detail::runtime_access::impl(*s.rt);
  // A steal takes one task: a batch would sit on its thief's pool, where a
  // taskwait of the thief's may not start them (the task scheduling
  // constraint, tasks.cpp) and hands them back.
  s.impl->set_steal_batch(1);
  if (MOTE_UNLIKELY(s.impl->config().stats)) {
    static std::once_flag registered;
    std::call_once(registered, [] { std::atexit(end_for_stats); });
  }
  return *s.impl;
}

// The runtime's workers the calling thread may use for a team of n: thread 0
// is `self`; up to n - 1 others that are in no team are reserved.
void reserve(runtime_impl& rt, worker* self, unsigned n, std::vector<unsigned>& out) {
  std::lock_guard<std::mutex> lock(state().mutex);
  const unsigned w = rt.num_workers();
  // Start after the caller, round the ring: nested teams of different
  // threads take different workers first.
  const unsigned start = self->index() + 1;
  for (unsigned k = 0; k < w && out.size() + 1 < n; ++k) {
    const unsigned i = (start + k) % w;
    if (i == self->index()) continue;
    seat& s = seat_of(rt.worker_at(i));
    if (s.busy) continue;
    if (i == 0 && rt.has_seat()) continue;  // the seat has no thread unless occupied (then it is busy)
    s.busy = true;
    out.push_back(i);
  }
}

void release(runtime_impl& rt, const std::vector<unsigned>& members) {
  std::lock_guard<std::mutex> lock(state().mutex);
  for (unsigned i : members) seat_of(rt.worker_at(i)).busy = false;
}

// Under omp_state::mutex: is rt one of the OpenMP runtimes?
bool is_omp_runtime(const omp_state& s, const runtime_impl* rt) {
  for (const auto& g : s.groups) {
    if (g->impl == rt) return true;
  }
  return false;
}

// Under omp_state::mutex: a group for an outermost region that needs `want`
// workers, held for it (in_use) until region_end: a free one that is large
// enough, else a free one to grow, else a new one.
omp_group& take_group(omp_state& s, unsigned want) {
  omp_group* pick = nullptr;
  for (const auto& g : s.groups) {
    if (g->in_use) continue;
    if (g->impl != nullptr && g->impl->num_workers() >= want && !g->impl->orphaned()) {
      pick = g.get();
      break;
    }
    if (pick == nullptr) pick = g.get();
  }
  if (pick == nullptr) {
    s.groups.push_back(std::make_unique<omp_group>());
    pick = s.groups.back().get();
  }
  pick->in_use = true;
  return *pick;
}

// The ICVs a team's threads start with: the encountering task's, one level
// further down the OMP_NUM_THREADS and OMP_PROC_BIND lists.
task_icvs team_icvs(const task_icvs& enc) {
  task_icvs t = enc;
  if (t.nthreads_rest_len > 0) {
    t.nthreads = t.nthreads_rest[0];
    ++t.nthreads_rest;
    --t.nthreads_rest_len;
  }
  if (t.bind_rest_len > 0) {
    t.bind = t.bind_rest[0];
    ++t.bind_rest;
    --t.bind_rest_len;
  }
  return t;
}

// Regions the calling thread has open as their thread 0: they nest, so the
// innermost is at depth tl_open_regions - 1.
constinit thread_local unsigned tl_open_regions = 0;

// The team a thread opens at depth `depth` among the regions it has open as
// thread 0 (not the OpenMP level: a target region's initial thread is at
// level 0 inside a region of its own thread, whose team is still in use):
// kept from its last region there when it has the same size and runtime
// (regions back to back reuse the barrier, the worksharing ring and the
// thread states: their counters only ever grow, so the sums and ring numbers
// carry over), else made anew. Thread 0 reuses it only after every member's
// last access (parallel() waits).
team& team_for(unsigned depth, unsigned n, runtime_impl* rt) {
  static thread_local std::vector<std::unique_ptr<team>> cache;
  if (cache.size() <= depth) cache.resize(depth + 1);
  std::unique_ptr<team>& slot = cache[depth];
  if (slot == nullptr || slot->n != n || slot->rt != rt) {
    slot = std::make_unique<team>(n, rt != nullptr ? rt->spin_ns() : -1);
    slot->rt = rt;
    slot->workers.resize(n);
  }
  team& tm = *slot;
  // What a region changes: reset for the next one. A cancelled region's
  // threads may have skipped constructs: its worksharing ring starts afresh.
  if (tm.cancelled.load(std::memory_order_relaxed)) reset_worksharing(tm);
  tm.cancelled.store(false, std::memory_order_relaxed);
  tm.ws_cancelled.store(false, std::memory_order_relaxed);
  tm.at_end.store(0, std::memory_order_relaxed);
  tm.final_episode = false;
  tm.left.store(0, std::memory_order_relaxed);
  return tm;
}

void end_of_region(team& tm, thread_state& st) {
  if (!globals().cancellation || tm.n == 1) {
    team_barrier(tm, st);
  } else {
    // With cancellation, a thread that cancelled the region goes straight
    // here while others may still be in a barrier of the region body
    // (GOMP_barrier_cancel); that episode then releases both. So the end is
    // the first episode that every thread entered from here: the root
    // decides it (in ready(), when all have arrived) from at_end, which each
    // thread raised before it arrived, and publishes it with the release.
    // The root of the next episode writes final_episode only after every
    // thread has arrived again, so each thread reads this episode's answer.
    tm.at_end.fetch_add(1, std::memory_order_relaxed);
    worker* self = st.self;
    runtime_impl* rt = self != nullptr ? &self->runtime() : nullptr;
    st.in_barrier = true;
    for (;;) {
      tm.barrier.wait(
          st.id,
          // With tasks pending, rescue() too: the barrier's sleeps are only
          // bounded, and a member that computes on holds its private tasks
          // until another thread forces them out.
          [rt, self, &st, &tm] {
            return run_bounced(st, true, nullptr) ||
                   (rt != nullptr && (team_tasks_done(tm) ? rt->help_once(*self) : rt->help_or_rescue(*self)));
          },
          [&tm] {
            if (!team_tasks_done(tm)) return false;
            tm.final_episode = tm.at_end.load(std::memory_order_relaxed) == tm.n;
            return true;
          });
      if (tm.final_episode) break;
    }
    st.in_barrier = false;
  }
  end_implicit_task(st);
}

void run_member(worker& w, team& tm, unsigned id) {
  thread_state* const saved = tl_current_state;
  thread_state& st = tm.threads[id];
  st.prev = saved;
  tl_current_state = &st;
  region_started();
  if (tm.prologue != nullptr) tm.prologue(tm.prologue_arg);
  tm.fn(tm.data);
  end_of_region(tm, st);
  tl_current_state = saved;
  (void)w;
  // The member's last access to the team: release, so that thread 0's
  // acquire load that counts it orders everything the member did (its end
  // barrier included) before the team is freed.
  tm.left.fetch_add(1, std::memory_order_release);
}

// ---- The model's hooks ----------------------------------------------------------

void* make_seat(worker&, void*) { return new seat; }
void free_seat(void* p) noexcept { delete static_cast<seat*>(p); }

bool seat_help(worker& w) noexcept {
  seat& s = seat_of(w);
  // Relaxed first: the common case (no region for this worker) stays a load
  // of a line nobody writes. The acquire below orders `id` and the team.
  if (MOTE_LIKELY(s.mailbox.load(std::memory_order_relaxed) == nullptr)) return false;
  // Not from inside a task this worker runs (it would nest the region in a
  // task that the region's end waits for): from its idle loop only.
  if (task_depth() != 0 || w.inside_task()) return false;
  team* tm = s.mailbox.load(std::memory_order_acquire);
  s.mailbox.store(nullptr, std::memory_order_relaxed);
  run_member(w, *tm, s.id);
  return true;
}

bool seat_visible(worker& w) noexcept {
  // The last look before parking: seq_cst, against thread 0's seq_cst
  // store of the mailbox, which it follows with wake_idle().
  return seat_of(w).mailbox.load(std::memory_order_seq_cst) != nullptr;
}

}  // namespace

team::team(unsigned size, std::int64_t spin_ns)
    : n(size),
      level(0),
      active_level(0),
      threads(new thread_state[size]),
      // The team's threads spread over the CPUs the process may use (as
      // at start), whatever the mask of the thread that builds the team:
      // the primary thread may sit pinned to one CPU (its seat kept apart
      // from a worker's CPU, or OMP_PROC_BIND), and a team built there
      // counted one CPU, spun 2 us and slept at every wait
      // (docs/performance.md, "A team built on a pinned thread").
      barrier(size, std::chrono::nanoseconds(spin_ns < 0 ? 100000 : spin_ns), globals().num_procs),
      ws(size) {}

team::~team() = default;

// initial-exec: read on every task and construct (as the core's
// current_worker); the general model calls __tls_get_addr each time.
constinit thread_local thread_state* tl_current_state __attribute__((tls_model("initial-exec"))) = nullptr;

thread_state& current() noexcept {
  thread_state* s = tl_current_state;
  if (MOTE_LIKELY(s != nullptr)) return *s;
  thread_state& init = initial_state();
  tl_current_state = &init;
  return init;
}

void set_current(thread_state* st) noexcept { tl_current_state = st; }

void set_region_start_hook(void (*hook)()) noexcept { region_start_hook.store(hook, std::memory_order_relaxed); }

void run_as_initial_thread(void (*fn)(void*), void* arg) {
  // A fresh initial task: the initial ICVs (as GNU's host fallback, which
  // starts from the global ones), the default allocator of OMP_ALLOCATOR.
  thread_state fresh;
  fresh.task = &fresh.implicit;
  thread_state* const saved = tl_current_state;
  tl_current_state = &fresh;
  fn(arg);
  end_implicit_task(fresh);
  tl_current_state = saved;
}

thread_state* state_in(team* tm) noexcept {
  for (thread_state* s = &current(); s != nullptr; s = s->prev) {
    if (s->tm == tm) return s;
  }
  return nullptr;
}

runtime_impl& runtime() {
  omp_state& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.groups.empty()) s.groups.push_back(std::make_unique<omp_group>());
  omp_group& first = *s.groups.front();
  if (first.impl != nullptr) return *first.impl;
  return ensure_runtime(first, std::min(max_team(), std::max(1u, globals().initial.nthreads)), true);
}

int pause_host() {
  if (current().level > 0) return -1;  // as GNU's library
  omp_state& s = state();
  worker* const self = detail::current_worker;
  std::vector<std::unique_ptr<mote::runtime>> old;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      // A thread of an OpenMP runtime (a target region's initial thread
      // inside a region): its workers are in use, and a worker cannot end
      // itself.
      if (self != nullptr && is_omp_runtime(s, &self->runtime())) return -1;
      // Outermost regions that other threads run end first: no group is
      // held when the runtimes are taken. A region that starts after this
      // finds its group empty and makes a new runtime (new threads, fresh
      // threadprivate data), as after GNU's pause.
      const bool held = std::any_of(s.groups.begin(), s.groups.end(),
                                    [](const std::unique_ptr<omp_group>& g) { return g->in_use; });
      if (!held) {
        for (const auto& g : s.groups) {
          if (g->impl == nullptr) continue;
          if (g->impl->orphaned()) {
            (void)g->rt.release();  // a child after fork(): its workers live in the parent
          } else {
            old.push_back(std::move(g->rt));
          }
          g->impl = nullptr;
        }
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  old.clear();  // stops and joins the workers, idle between regions
  return 0;
}

bool team_tasks_done(const team& tm) noexcept {
  // Completions first, then spawns (acquire each): a task's children are
  // counted as spawned before the task is counted complete (program order
  // on its thread, published by the release store of its completion), so a
  // sum of spawns read after the completions includes every task whose
  // parent's completion was read. Equal sums: nothing is pending, and no
  // thread of the team is left to spawn (they have all arrived).
  std::uint64_t done = tm.foreign_completed.load(std::memory_order_acquire);
  for (unsigned i = 0; i < tm.n; ++i) done += tm.threads[i].completed.load(std::memory_order_acquire);
  std::uint64_t made = tm.foreign_spawned.load(std::memory_order_acquire);
  for (unsigned i = 0; i < tm.n; ++i) made += tm.threads[i].spawned.load(std::memory_order_acquire);
  return made == done;
}

void team_barrier(team& tm, thread_state& st) {
  worker* self = st.self;
  st.in_barrier = true;  // its implicit task waits here: it may start any of the team's tasks
  if (self == nullptr) {
    // A team of one on a thread that is no worker: its tasks ran as they
    // were made (tasks.cpp), but for detached ones waiting for their events
    // and those a worker outside the team handed back (dependences).
    worker* other = detail::current_worker;  // a worker of another runtime: it helps that one
    while (!team_tasks_done(tm)) {
      if (!run_bounced(st, true, nullptr) && (other == nullptr || !other->runtime().help_once(*other))) {
        std::this_thread::yield();
      }
    }
    tm.ws_cancelled.store(false, std::memory_order_relaxed);  // relaxed: see below
  } else {
    runtime_impl& rt = self->runtime();
    // poll: tasks, only while the team has some pending (a barrier with no
    // task to run spins on its own line, and steals from nobody).
    tm.barrier.wait(
        st.id,
        [&rt, self, &st, &tm] {
          // rescue() too (help_or_rescue): see end_of_region.
          return !team_tasks_done(tm) && (run_bounced(st, true, nullptr) || rt.help_or_rescue(*self));
        },
        [&tm] {
          if (!team_tasks_done(tm)) return false;
          // A cancelled worksharing construct ends at its barrier (as GNU's
          // library clears its flag when the last thread arrives): the
          // constructs after it run whole. Relaxed: the release publishes it.
          tm.ws_cancelled.store(false, std::memory_order_relaxed);
          return true;
        });
    // The primary thread in the runtime's seat may have slept in there.
    if (self == &rt.worker_at(0)) rt.keep_seat_apart();
  }
  st.in_barrier = false;
}

bool barrier() {
  thread_state& st = current();
  if (st.tm == nullptr) return false;
  // A cancelled region's threads go to its end: no barrier holds them.
  if (st.tm->cancelled.load(std::memory_order_relaxed)) return true;
  team_barrier(*st.tm, st);
  return st.tm->cancelled.load(std::memory_order_relaxed);
}

bool help_once() noexcept {
  worker* w = detail::current_worker;
  return w != nullptr && w->runtime().help_once(*w);
}

void region_begin(region& r, void (*fn)(void*), void* data, unsigned nthreads, unsigned flags,
                  void (*prologue)(void*), void* prologue_arg) {
  (void)flags;  // proc_bind: the workers are placed when the runtime starts
  thread_state& cur = current();
  const task_icvs& icv = current_icvs();
  unsigned n = nthreads != 0 ? nthreads : icv.nthreads;
  if (cur.active_level >= icv.max_active_levels) n = 1;
  n = std::max(1u, std::min({n, icv.thread_limit, max_team()}));
  r.cur = &cur;

  omp_state& s = state();
  worker* self = detail::current_worker;
  bool on_omp = false;
  if (self != nullptr) {
    std::lock_guard<std::mutex> lock(s.mutex);
    on_omp = is_omp_runtime(s, &self->runtime());
  }
  if (on_omp) {
    r.rt = &self->runtime();
  } else if (n > 1 && detail::env_num_threads().value_or(2) > 1) {
    // An outermost region (this thread is no OpenMP worker): a contention
    // group of its own, which it holds until region_end while other
    // application threads' outermost regions run on theirs.
    // (MOTE_NUM_THREADS=1: the runtime would be its caller seat alone, which
    // mote::runtime refuses; every region is then a team of one, below.)
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      // Nested regions take workers no outer team holds: room for the
      // levels below when nesting is on (up to four, at most 64 workers
      // unless the outermost team alone needs more).
      unsigned want = n;
      const unsigned levels = std::min(icv.max_active_levels, 4u);
      for (unsigned l = 1; l < levels; ++l) {
        const unsigned inner = icv.nthreads_rest_len >= l ? icv.nthreads_rest[l - 1] : n;
        want = std::max(n, std::min(64u, want * std::max(1u, inner)));
      }
      omp_group& group = take_group(s, want);
      try {
        r.rt = &ensure_runtime(group, want, &group == s.groups.front().get());
      } catch (...) {
        group.in_use = false;
        throw;
      }
      r.group = &group;
    }
    try {
      r.previous = r.rt->enter_seat();
    } catch (...) {
      std::lock_guard<std::mutex> lock(s.mutex);
      static_cast<omp_group*>(r.group)->in_use = false;
      throw;
    }
    r.seated = true;
    self = &r.rt->worker_at(0);
    std::lock_guard<std::mutex> lock(s.mutex);
    seat_of(*self).busy = true;
  } else {
    self = nullptr;  // a team of one on a thread that is no OpenMP worker
  }
  runtime_impl* rt = r.rt;

  if (rt != nullptr && n > 1 && cur.tm != nullptr && icv.thread_limit < 0xffffffffu) {
    // thread-limit-var bounds the threads of the whole contention group:
    // the ones already in teams count (the caller among them). An outermost
    // region of its thread (an initial thread's, a target region's on the
    // host) starts from a group of one: n is bounded already.
    std::unique_lock<std::mutex> lock(s.mutex);
    unsigned busy = 0;
    for (unsigned i = 0; i < rt->num_workers(); ++i) busy += seat_of(rt->worker_at(i)).busy ? 1 : 0;
    lock.unlock();
    const unsigned room = icv.thread_limit > busy ? icv.thread_limit - busy : 0;
    n = std::min(n, 1 + room);
  }
  if (rt != nullptr && n > 1) reserve(*rt, self, n, r.members);
  n = 1 + static_cast<unsigned>(r.members.size());

  team& tm = team_for(tl_open_regions, n, rt);
  ++tl_open_regions;
  r.tm = &tm;
  tm.level = cur.level + 1;
  tm.active_level = cur.active_level + (n > 1 ? 1 : 0);
  tm.fn = fn;
  tm.data = data;
  tm.prologue = prologue;
  tm.prologue_arg = prologue_arg;
  tm.rt = rt;
  tm.icvs = team_icvs(icv);
  tm.workers[0] = self;
  for (unsigned i = 1; i < n; ++i) tm.workers[i] = &rt->worker_at(r.members[i - 1]);
  for (unsigned i = 0; i < n; ++i) {
    thread_state& st = tm.threads[i];
    st.tm = &tm;
    st.id = i;
    st.level = tm.level;
    st.active_level = tm.active_level;
    st.outer = &cur;
    st.self = tm.workers[i];
    st.task = &st.implicit;
    st.implicit.drop_icvs();
    st.implicit.icv = &tm.icvs;  // the encountering task's, as team_icvs made them
    st.def_allocator = cur.def_allocator;
    st.implicit.tm = &tm;
    st.implicit.root = &st.implicit;
    st.implicit.open_group = nullptr;
    st.implicit.group = nullptr;
    st.foreign = false;
    st.team_num = cur.team_num;
    st.num_teams = cur.num_teams;
  }
  // Hand the region to the members: id, then the mailbox (seq_cst: see seat),
  // then wake the worker if it sleeps or is about to.
  for (unsigned i = 1; i < n; ++i) {
    seat& m = seat_of(*tm.workers[i]);
    m.id = i;
    m.mailbox.store(&tm, std::memory_order_seq_cst);
    rt->wake_idle(*tm.workers[i]);
  }

  // Thread 0 enters the team; its caller runs the region's function.
  thread_state& st = tm.threads[0];
  st.prev = &cur;
  tl_current_state = &st;
  region_started();
  if (prologue != nullptr) prologue(prologue_arg);
}

void region_end(region& r) {
  team& tm = *r.tm;
  const unsigned n = tm.n;
  thread_state& st = tm.threads[0];
  end_of_region(tm, st);
  tl_current_state = r.cur;
  --tl_open_regions;  // (the team is reused only by this thread's next region at this depth)

  // Every member's last access (the acquire pairs with its release), and
  // every outside thread's (a stolen task's end, an event's fulfilment).
  for (int spins = 0; tm.left.load(std::memory_order_acquire) != n - 1 ||
                      tm.foreign_active.load(std::memory_order_acquire) != 0;
       ++spins) {
    if (spins < 1000) {
      _mm_pause();
    } else {
      std::this_thread::yield();
    }
  }
  omp_state& s = state();
  if (r.rt != nullptr && !r.members.empty()) release(*r.rt, r.members);
  if (r.seated) {
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      seat_of(r.rt->worker_at(0)).busy = false;
    }
    r.rt->leave_seat(r.previous);
    // The seat is free again: so is the group, for the next outermost region.
    std::lock_guard<std::mutex> lock(s.mutex);
    static_cast<omp_group*>(r.group)->in_use = false;
  }
}

void parallel(void (*fn)(void*), void* data, unsigned nthreads, unsigned flags) {
  region r;
  region_begin(r, fn, data, nthreads, flags, nullptr, nullptr);
  fn(data);
  region_end(r);
}

void unsupported(const char* name) noexcept {
  std::fprintf(stderr, "mote: libgomp entry point %s is not implemented\n", name);
  std::fflush(stderr);
  std::abort();
}

// ---- Queries ----------------------------------------------------------------------

void bind_initial_thread() {
  // As GNU's library does at start: the initial thread on the first place.
  const global_icvs& g = globals();
  if (!binds(g) || g.places.front().empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : g.places.front()) CPU_SET(c, &set);
  (void)sched_setaffinity(0, sizeof(set), &set);
}

int place_num() noexcept {
  // The place holding the CPU the thread runs on (workers are pinned; the
  // primary thread keeps its own affinity): -1 without places.
  const global_icvs& g = globals();
  if (g.places.empty()) return -1;
  const int cpu = sched_getcpu();
  for (std::size_t p = 0; p < g.places.size(); ++p) {
    for (int c : g.places[p]) {
      if (c == cpu) return static_cast<int>(p);
    }
  }
  return 0;
}

int thread_num() noexcept { return static_cast<int>(current().id); }
int num_threads() noexcept {
  const thread_state& s = current();
  return s.tm != nullptr ? static_cast<int>(s.tm->n) : 1;
}
int level() noexcept { return static_cast<int>(current().level); }
int active_level() noexcept { return static_cast<int>(current().active_level); }
bool in_parallel() noexcept { return current().active_level > 0; }

namespace {
const thread_state* ancestor(int lvl) noexcept {
  const thread_state* s = &current();
  if (lvl < 0 || lvl > static_cast<int>(s->level)) return nullptr;
  while (s != nullptr && static_cast<int>(s->level) > lvl) s = s->outer;
  return s;
}
}  // namespace

int ancestor_thread_num(int lvl) noexcept {
  const thread_state* s = ancestor(lvl);
  return s == nullptr ? -1 : static_cast<int>(s->id);
}
int team_size(int lvl) noexcept {
  const thread_state* s = ancestor(lvl);
  if (s == nullptr) return -1;
  return s->tm != nullptr ? static_cast<int>(s->tm->n) : 1;
}

}  // namespace mote::omp

namespace mote::detail {
extern const model_hooks omp_model;
const model_hooks omp_model = {
    .name = "omp",
    .slot = mote::omp::kOmpSlot,
    .make_runtime = nullptr,
    .free_runtime = nullptr,
    .make_worker = mote::omp::make_seat,
    .free_worker = mote::omp::free_seat,
    .thread_begin = nullptr,
    .thread_end = nullptr,
    .help = mote::omp::seat_help,
    .visible = mote::omp::seat_visible,
};
}  // namespace mote::detail
