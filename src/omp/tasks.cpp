// OpenMP's explicit tasks on mote's workers.
//
// A deferred task is a record (omp_task, then its copy of the arguments)
// handed to the runtime's scheduler policy (runtime_impl::schedule: onto the
// spawning worker's pool under work stealing), so that any worker may steal
// it. A task with dependences is instead a mote::dataflow task of its
// parent's scope (one scope per parent, made on first use: OpenMP orders
// sibling tasks only), whose body runs the record (or hands it back, see
// below, and then ends with an event its completion fulfils); the scope is
// finished when the parent's body has returned and those children are
// complete (they run in the parent's wait meanwhile).
//
// Whoever takes a record starts it only if the task scheduling constraint
// allows (may_start: a descendant of the task the thread is in, unless that
// is its implicit task in the barrier); else it hands it back to its parent
// or its team (hand_back), whose waits run it.
//
// Counting. Every task is counted (1) in its parent's `counts` (taskwait
// waits for its low half to be 1; "Counting" below), (2) in the innermost
// taskgroup open where it was made, and (3) in its team's spawn and
// completion sums (team_tasks_done: the barrier). Its completion takes them
// back in that order, the team's sums last: once they match, the team may
// end, so nothing after that touches the team unless the thread is held
// inside it (a member, inside its barrier) or counted in `foreign_active`.
#include "omp/tasks.hpp"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/runtime_impl.hpp"
#include "mote/detail/adaptive.hpp"
#include "mote/detail/task_alloc.hpp"
#include "mote/detail/worker.hpp"
#include "mote/dataflow.hpp"
#include "mote/detail/dataflow_records.hpp"
#include "dataflow/current.hpp"
#include "wait/idle.hpp"
#include "omp/gomp/abi.hpp"
#include "omp/icv.hpp"

namespace mote::omp {

using detail::runtime_impl;
using detail::worker;

namespace {

// How many OpenMP task bodies the calling thread is inside (task_depth()).
// initial-exec: a small variable read on every task (as the core's
// current_worker); the general model calls __tls_get_addr each time.
constinit thread_local int tl_task_depth __attribute__((tls_model("initial-exec"))) = 0;

// gcc's flags (gomp-constants.h, through abi.hpp).
constexpr unsigned kFlagUntied = GOMP_TASK_FLAG_UNTIED;
constexpr unsigned kFlagFinal = GOMP_TASK_FLAG_FINAL;
constexpr unsigned kFlagDepend = GOMP_TASK_FLAG_DEPEND;
constexpr unsigned kFlagPriority = GOMP_TASK_FLAG_PRIORITY;
constexpr unsigned kFlagUp = GOMP_TASK_FLAG_UP;
constexpr unsigned kFlagGrainsize = GOMP_TASK_FLAG_GRAINSIZE;
constexpr unsigned kFlagIf = GOMP_TASK_FLAG_IF;
constexpr unsigned kFlagNogroup = GOMP_TASK_FLAG_NOGROUP;
constexpr unsigned kFlagReduction = GOMP_TASK_FLAG_REDUCTION;
constexpr unsigned kFlagDetach = GOMP_TASK_FLAG_DETACH;
constexpr unsigned kFlagStrict = GOMP_TASK_FLAG_STRICT;

// The kinds an omp_depend_t (depobj) holds (out, 2, orders as inout).
constexpr std::uintptr_t kDependIn = 1;
constexpr std::uintptr_t kDependInout = 3;
constexpr std::uintptr_t kDependMutexinoutset = 4;
constexpr std::uintptr_t kDependInoutset = 5;

struct depend_list {
  std::vector<mote::access> accesses;
  bool all_memory = false;
};

mote::access access_of(void* addr, std::uintptr_t kind) {
  // OpenMP orders tasks by the address named, whatever its size: one byte
  // at that address is the region.
  mote::access a{addr, 1, mote::access_type::inout};
  switch (kind) {
    case kDependIn: a.type = mote::access_type::in; break;
    case kDependMutexinoutset: a.type = mote::access_type::commutative; break;
    case kDependInoutset: a.type = mote::access_type::concurrent; break;
    default: a.type = mote::access_type::inout; break;  // out, inout
  }
  return a;
}

// Decodes gcc's depend array: [n, nout, addr...] or, when the first word is
// 0, [0, n, nout, nmutexinoutset, nin, addr...] with depobj entries last.
depend_list decode_depend(void** depend) {
  depend_list out;
  auto word = [&](std::size_t i) { return reinterpret_cast<std::uintptr_t>(depend[i]); };
  std::size_t n, nout, nmutex = 0, nin, first;
  if (word(0) != 0) {
    n = word(0);
    nout = word(1);
    nin = n - nout;
    first = 2;
  } else {
    n = word(1);
    nout = word(2);
    nmutex = word(3);
    nin = word(4);
    first = 5;
  }
  out.accesses.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    void* addr = depend[first + i];
    std::uintptr_t kind;
    if (i < nout) {
      kind = kDependInout;
    } else if (i < nout + nmutex) {
      kind = kDependMutexinoutset;
    } else if (i < nout + nmutex + nin) {
      kind = kDependIn;
    } else {
      // depobj: an omp_depend_t holding {address, kind}.
      auto* obj = static_cast<void**>(addr);
      addr = obj[0];
      kind = reinterpret_cast<std::uintptr_t>(obj[1]);
    }
    if (addr == nullptr && kind != kDependIn) {
      out.all_memory = true;  // omp_all_memory
      continue;
    }
    out.accesses.push_back(access_of(addr, kind));
  }
  return out;
}

mote::dataflow& scope_of(omp_task& parent) {
  if (parent.scope == nullptr) parent.scope = new mote::dataflow();
  return *static_cast<mote::dataflow*>(parent.scope);
}

// The two halves of omp_task::counts.
constexpr std::uint64_t kPending = 1;               // the body, or a child not yet complete
constexpr std::uint64_t kRecord = std::uint64_t{1} << 32;  // an explicit child's record not yet freed
constexpr std::uint64_t kPendingMask = kRecord - 1;

// omp_task::handed once the task's body has ended: children handed back
// after that go to the team's stack.
omp_task* const kClosed = reinterpret_cast<omp_task*>(alignof(omp_task));

// Wakes the worker whose park word `word` is (a worker's word outlives any
// task or group it waited for).
void wake_word(std::atomic<std::uint32_t>* word) noexcept {
  if (word != nullptr) runtime_impl::wake_parked(*word);
}

// ---- Cancellation ---------------------------------------------------------------------
//
// As GNU's library: a worksharing construct's taskgroup (workshare) is
// cancelled with the group that encloses it, and cancel taskgroup inside it
// cancels that one. The flags are hints (relaxed): a task that starts just
// after a cancel runs, as a task that started just before it does.

// The group a task made now would be counted in.
taskgroup* innermost_group(const omp_task& t) noexcept {
  return t.open_group != nullptr ? t.open_group : t.group;
}

bool group_cancelled(const taskgroup* g) noexcept {
  if (g == nullptr) return false;
  if (g->cancelled.load(std::memory_order_relaxed)) return true;  // relaxed: a hint (above)
  return g->workshare && g->enclosing != nullptr &&
         g->enclosing->cancelled.load(std::memory_order_relaxed);  // relaxed: a hint (above)
}

// OMP_CANCELLATION (read once, when the library loads): a pointer to the
// flag, so that the task paths test it inline. cancellation_flag is the same
// pointer for task()'s quick test, which must not pay for the guard of the
// function-local static: null until cancellation_on() first runs (then
// task() takes its long way, which calls cancellation_on()). Release, with
// task()'s acquire load: the flag as globals() set it is what is read.
std::atomic<const bool*> cancellation_flag{nullptr};
bool cancellation_on() noexcept {
  static const bool* const flag = [] {
    const bool* f = &globals().cancellation;
    cancellation_flag.store(f, std::memory_order_release);
    return f;
  }();
  return *flag;
}

// Is t's region or taskgroup cancelled (it starts no new task, and t does
// not start when its body holds no copy-constructed objects)?
bool region_or_group_cancelled(const team* tm, const taskgroup* g) noexcept {
  // Relaxed: a hint (above).
  if (tm != nullptr && tm->cancelled.load(std::memory_order_relaxed)) return true;
  return group_cancelled(g);
}

// ---- The task scheduling constraint --------------------------------------------------
//
// OpenMP lets a thread start a task at a scheduling point only if it is a
// descendant of every tied task suspended on that thread (a task waiting in
// a barrier excepted). mote enforces it for every task, tied or untied:
// whatever hands a worker an OpenMP task (its pool, the scheduler policy, a
// steal, a data-flow task that became ready), the task starts only when the
// task the thread is in (st.task) is its ancestor, or is the thread's
// implicit task waiting in the team's barrier. Otherwise the thread hands
// it back (hand_back): to its parent, whose waits run it, or to the team.
// So a task that holds a lock across taskwait never finds an unrelated
// task of its thread waiting for that lock on top of it, and the tasks on
// one thread's stack are a chain of ancestors (their nesting is bounded by
// the depth of the task tree, whatever the scheduler).

// Is t (made, not started: it holds its parent) a descendant of x? The
// chain of parents up to the first task that is not explicit is readable:
// an explicit task's record holds its explicit parent's (counts' high half).
bool descends(const omp_task* t, const omp_task* x) noexcept {
  for (const omp_task* p = t;;) {
    const omp_task* q = p->parent;
    if (q == x) return true;
    if (q == nullptr || !p->parent_explicit || q->depth <= x->depth) return false;
    p = q;
  }
}

// May the thread whose state in t's team is st start t now?
bool may_start(const omp_task* t, const thread_state& st) noexcept {
  const omp_task* x = st.task;
  // In the thread's implicit task: any task of the team in its barrier, and
  // elsewhere (a taskwait, a taskgroup's end, a taskyield in the implicit
  // task) any descendant of it. `root` says so even where the chain of
  // parents cannot be read (through an undeferred task: the children of a
  // task run in place name it as parent, and it is gone once they are
  // complete): a `single` waiting for its taskgroup handed such tasks back
  // and waited for a thread asleep in the barrier to run them.
  if (x == &st.implicit && (st.in_barrier || t->root == x)) return true;
  return t->parent == x || descends(t, x);
}

void run_body(omp_task* t, thread_state* st) noexcept;

// After a seq_cst publication on tm's `bounced` stack: the members asleep
// in its waits (wait_until's park on their worker's word, the barrier's)
// look again. Each wake-up is the event count's notify, with its fence.
void wake_members(team& tm) noexcept {
  for (worker* w : tm.workers) {
    if (w != nullptr) runtime_impl::wake_parked(w->park_word());
  }
  tm.barrier.notify_waiters();
}

// A worker outside t's team took t (a steal, or the injection queue), or a
// thread of the team that may not start it (the scheduling constraint): t
// goes back to its team, whose threads run it in their waits (an OpenMP
// task runs on a thread of its team: omp_get_thread_num, task reductions'
// copies). To its parent's list when the parent is a running explicit or
// undeferred task (its waits take from there first), else to the team's
// stack. The team cannot end meanwhile (t is pending), and foreign_active
// keeps it alive until the wake-ups are done.
void hand_back(omp_task* t) noexcept {
  team* tm = t->tm;
  omp_task* p = t->parent;
  if (p != nullptr && p->has_list) {
    // As release: once t is in the list, p may run it, end and be
    // freed, so its waiter's word is read first.
    std::atomic<std::uint32_t>* word = p->waiter.load(std::memory_order_seq_cst);
    omp_task* head = p->handed.load(std::memory_order_relaxed);  // relaxed: the CAS below decides
    bool pushed = false;
    while (head != kClosed) {
      t->next = head;
      // seq_cst: the publication side of the Dekker pair with the waits'
      // last look (wait_until's park predicate) before the wake-up.
      if (p->handed.compare_exchange_weak(head, t, std::memory_order_seq_cst, std::memory_order_relaxed)) {
        pushed = true;
        break;
      }
    }
    if (pushed) {
      wake_word(word);
      return;
    }
  }
  tm->foreign_active.fetch_add(1, std::memory_order_relaxed);  // relaxed: as in fulfill_event
  omp_task* head = tm->bounced.load(std::memory_order_relaxed);  // relaxed: the CAS below decides
  do {
    t->next = head;
    // seq_cst: as above, with the members' sleeps (wait_until's and the
    // barrier's) before the wake-ups.
  } while (!tm->bounced.compare_exchange_weak(head, t, std::memory_order_seq_cst, std::memory_order_relaxed));
  tm->bounced_pushes.fetch_add(1, std::memory_order_relaxed);  // relaxed: a hint (team.hpp)
  wake_members(*tm);
  // Release: thread 0's acquire load that sees 0 orders these accesses
  // before the team's end.
  tm->foreign_active.fetch_sub(1, std::memory_order_release);
}

// Runs one of the children handed back to the task st runs; false when it
// has none. Only that task's thread pops (the pushers only push), so a pop
// by compare-and-swap cannot see a task come back at the head (no ABA).
bool run_handed(thread_state& st) noexcept {
  omp_task* x = st.task;
  if (!x->has_list) return false;
  // Acquire: the handed task's contents (its pusher's seq_cst CAS).
  omp_task* head = x->handed.load(std::memory_order_acquire);
  while (head != nullptr && head != kClosed) {
    if (x->handed.compare_exchange_weak(head, static_cast<omp_task*>(head->next), std::memory_order_acquire,
                                        std::memory_order_acquire)) {
      run_body(head, &st);
      return true;
    }
  }
  return false;
}

// The end of x's body: its children handed back from now on go to the team,
// and so do those still in its list.
void close_handed(omp_task& x) noexcept {
  // Acquire: the contents of the tasks still in the list (their pushers'
  // seq_cst CASes).
  omp_task* rest = x.handed.exchange(kClosed, std::memory_order_acquire);
  while (rest != nullptr) {
    omp_task* next = static_cast<omp_task*>(rest->next);
    hand_back(rest);
    rest = next;
  }
}

// Waits until done(), running tasks meanwhile (those the calling task may
// start: its own handed-back children, the team's handed-back tasks, and
// what the runtime's help_once finds and run_scheduled accepts); sleeps
// after the runtime's spin window, on the worker's park word published in
// *slot and in the calling task's own `waiter` (where hand_back wakes it),
// which the completion that makes done() true wakes.
template <class Done>
void wait_until(Done&& done, std::atomic<std::atomic<std::uint32_t>*>* slot) {
  if (done()) return;
  thread_state& st = current_inline();
  omp_task* const x = st.task;
  team* const tm = st.tm;
  std::uint64_t seen = ~std::uint64_t{0};  // bounced_pushes when `bounced` last had nothing for us
  worker* self = detail::current_worker;
  if (self == nullptr || st.self != self) {
    // No worker of the team (a team of one on a thread that is not one, or
    // no region): the tasks pending are detached ones, and the ones that a
    // worker outside the team handed back (dependences: see task()). A
    // worker of another runtime helps that one meanwhile (its pool may hold
    // what this waits for).
    while (!done()) {
      if (!run_handed(st) && !run_bounced(st, false, &seen) && (self == nullptr || !self->runtime().help_once(*self))) {
        std::this_thread::yield();
      }
    }
    return;
  }
  runtime_impl& rt = self->runtime();
  // The park's last look: seq_cst loads, the other half of hand_back's
  // Dekker pairs (bounced_pushes relaxed: a hint, as in run_bounced).
  auto more = [&done, x, tm, &seen] {
    return done() || (x->has_list && x->handed.load(std::memory_order_seq_cst) != nullptr) ||
           (tm != nullptr && tm->bounced.load(std::memory_order_seq_cst) != nullptr &&
            tm->bounced_pushes.load(std::memory_order_relaxed) != seen);
  };
  std::atomic<std::atomic<std::uint32_t>*>* const own = &x->waiter;
  detail::idle_wait idle(rt.spin_ns());
  // The runtime's help (the pool, then the other workers') at every look
  // at first, spaced out while it finds nothing (detail::probe_backoff);
  // the task's own words at every look.
  detail::probe_backoff probe;
  for (;;) {
    if (done()) return;
    if (run_handed(st) || run_bounced(st, false, &seen)) {
      idle.reset();
      probe.reset();
      continue;
    }
    if (probe.due()) {
      if (rt.help_once(*self)) {
        idle.reset();
        probe.reset();
        continue;
      }
      probe.failed();
    }
    if (idle.spin()) continue;
    // The last probe before the sleep, whenever the one before was.
    if (rt.help_once(*self)) {
      idle.reset();
      probe.reset();
      continue;
    }
    // The Dekker pair with release and hand_back: the slot is
    // published (seq_cst) before park_waiting's announcement and last look;
    // the completion changes what done() reads (seq_cst) before it loads
    // the slot.
    slot->store(&self->park_word(), std::memory_order_seq_cst);
    if (own != slot) own->store(&self->park_word(), std::memory_order_seq_cst);
    using look = decltype(more);
    rt.park_waiting(
        *self, [](const void* d) { return (*static_cast<const look*>(d))(); }, &more, 2'000'000);
    slot->store(nullptr, std::memory_order_relaxed);
    if (own != slot) own->store(nullptr, std::memory_order_relaxed);
    idle.reset();
  }
}

// The end of t's body (or of an implicit task): its children with
// dependences are complete (they run here meanwhile, as t's waits run
// them), then its scope goes.
void finish_scope(omp_task& t) {
  if (t.scope == nullptr) return;
  wait_until([&t] { return t.df_pending.load(std::memory_order_seq_cst) == 0; }, &t.waiter);
  auto* df = static_cast<mote::dataflow*>(t.scope);
  t.scope = nullptr;
  delete df;  // its tasks' data-flow ends (each after its record's completion) are all but done
}

// A test seam: MOTE_OMP_TEST_TASKWAIT_DEPEND_PAUSE_US=n makes the empty task
// of taskwait depend pause n microseconds right after it has marked the
// dependences met (the waiter may return then), so that a test can watch
// what the task touches afterwards (tests/omp/taskwait_depend_frame.c).
// Read once; 0 (unset) in production.
int taskwait_depend_pause_us() noexcept {
  static const int us = [] {
    const char* text = std::getenv("MOTE_OMP_TEST_TASKWAIT_DEPEND_PAUSE_US");
    if (text == nullptr || *text == '\0') return 0;
    char* end = nullptr;
    const long v = std::strtol(text, &end, 10);
    if (*end != '\0' || v < 0 || v > 1'000'000) {
      std::fprintf(stderr, "mote: MOTE_OMP_TEST_TASKWAIT_DEPEND_PAUSE_US=%s: expected 0..1000000 (microseconds)\n",
                   text);
      std::abort();
    }
    return static_cast<int>(v);
  }();
  return us;
}

__attribute__((noinline, cold)) void test_pause(int us) noexcept {
  std::this_thread::sleep_for(std::chrono::microseconds(us));
}

// An explicit task's record goes back to the calling thread's record cache
// (its worker's, of whichever runtime: a class's blocks are interchangeable,
// task_alloc.hpp), or to the system allocator on a thread that is no worker.
void free_record(omp_task* t) noexcept {
  const detail::record_tag tag = t->tag;
  t->~omp_task();
  if (worker* w = detail::current_worker) {
    detail::give_record(t, tag, w->cache());
  } else {
    detail::give_record(t, tag);
  }
}

// ---- Undeferred by choice -----------------------------------------------------------
//
// A deferred task pays for its record, its counts (read-modify-writes on its
// parent's word and its group's, the barrier's fence) and, when another
// worker takes it, a hand-off. A task whose body takes less than that
// hand-off is better run at once, undeferred, as OpenMP lets an
// implementation run any task (run_undeferred: it is still a task of its
// own, with its own children and ICVs); so is a task made while the spawning
// worker's pool already holds kDeepQueue tasks (the idle workers have work
// enough). The decision is per call site, as join's adaptive mode makes it
// (docs/adaptive.md): GOMP_task's fn, salted with the task's depth (the
// tasks of one recursive function are large near the root and tiny near the
// leaves), each thread with its own table (nothing shared, nothing atomic).
// A site's size is a moving average of its bodies' durations in
// cycle-counter ticks, measured on a sample: every deferred task of a site
// not measured yet (so that a site is never run in place blind: a task may
// wait for a sibling made after it), then one in kSampleHere run in place
// and one in kSampleAway deferred; the thread that runs a timed body notes
// it. Tasks with dependences, a detach clause or a priority are always
// deferred (their order and their events are the point of them).

// The depths a function's sites are told apart by: a task deeper than this
// counts as at kSiteDepths. A recursion that shrinks its work per level has
// done so long before (fib(90) is 90 levels; a halving one, 2^64 leaves at
// 64); one that goes deeper does not shrink it per level, as uts' binomial
// tree (2.6 million nodes, 1 431 levels), whose every level is alike: a site
// per level there meant a table of 256 entries that its levels kept
// evicting from each other, every eviction a new site deferred blind.
constexpr unsigned kSiteDepths = 64;
MOTE_ALWAYS_INLINE unsigned site_depth(unsigned depth) noexcept { return depth < kSiteDepths ? depth : kSiteDepths; }

constexpr std::uint32_t kSampleHere = 16;
// Tasks in place look for a thief's request at every kAnswerEvery-th at
// least, at every one for sites with long bodies (quick_in_place).
constexpr std::uint32_t kAnswerEvery = 8;
constexpr std::uint32_t kSampleAway = 32;
// Tasks in the spawning worker's pool from which a new one runs at once.
constexpr std::uint32_t kDeepQueue = 64;

struct site_entry {
  void (*fn)(void*) = nullptr;
  unsigned depth = 0;
  std::uint32_t until_sample = 1;  // calls until the next timed one
  std::uint64_t work = 0;          // ticks per body, moving average; 0: not measured yet
  // Its tasks in place look for a thief's request where until_sample & mask
  // is 0 (quick_in_place): every kAnswerEvery-th, or every one once its
  // bodies measure half the hand-off or more (answer_mask_for).
  std::uint32_t answer_mask = kAnswerEvery - 1;
};
constexpr unsigned kSiteLog2 = 8;
struct site_table {
  site_entry entries[1u << kSiteLog2];
  // handoff_ticks() - 1, or 0 when it is 0: a site whose work w has
  // w - 1 < here_below (unsigned: w != 0 and w < the hand-off) runs in place
  // (placed()'s quick test, without the function-local static's guard).
  std::uint64_t here_below = 0;
};
std::uint64_t handoff_ticks() noexcept;
// The calling thread's table (initial-exec, as tl_task_depth: the table
// itself is too large for the static TLS a library loaded late may use, so
// it is on the heap, made on first use and freed with the thread).
constinit thread_local site_table* tl_sites __attribute__((tls_model("initial-exec"))) = nullptr;

__attribute__((noinline, cold)) site_table& make_sites() noexcept {
  struct holder {
    site_table table;
    ~holder() { tl_sites = nullptr; }
  };
  static thread_local std::unique_ptr<holder> mine;
  if (mine == nullptr) {
    mine.reset(new (std::nothrow) holder());
    if (mine == nullptr) {
      std::fputs("mote: out of memory for a thread's table of OpenMP task sites\n", stderr);
      std::abort();
    }
  }
  const std::uint64_t handoff = handoff_ticks();
  mine->table.here_below = handoff != 0 ? handoff - 1 : 0;
  tl_sites = &mine->table;
  return mine->table;
}

// The slot of (fn, depth) in the table.
MOTE_ALWAYS_INLINE unsigned site_slot(void (*fn)(void*), unsigned depth) noexcept {
  const std::uint64_t bits = (static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(fn)) >> 4) +
                             std::uint64_t{depth} * 0x100000001b3ull;
  return static_cast<unsigned>((bits * 0x9E3779B97F4A7C15ull) >> (64 - kSiteLog2));
}

// The entry of (fn, depth): a direct-mapped table; a site that collides with
// another starts afresh in its slot.
site_entry& site_of(void (*fn)(void*), unsigned depth) noexcept {
  site_table& table = MOTE_LIKELY(tl_sites != nullptr) ? *tl_sites : make_sites();
  site_entry& e = table.entries[site_slot(fn, depth)];
  if (MOTE_UNLIKELY(e.fn != fn || e.depth != depth)) e = site_entry{fn, depth, 1, 0, kAnswerEvery - 1};
  return e;
}

// site_entry::answer_mask for bodies of `work` ticks: a look at every task
// in place once a body is worth half a hand-off (1 us at the default).
std::uint32_t answer_mask_for(std::uint64_t work) noexcept {
  return work >= handoff_ticks() / 2 ? 0 : kAnswerEvery - 1;
}

// A timed body of the site (fn, depth) took `ticks`: a moving average over
// about four samples, one sample moving it at most 4x up (a preemption is not
// the body's size).
void note_work(void (*fn)(void*), unsigned depth, std::uint64_t ticks) noexcept {
  site_entry& e = site_of(fn, depth);
  if (ticks == 0) ticks = 1;
  if (e.work == 0) {
    e.work = ticks;
    e.until_sample = kSampleHere;
  } else {
    if (ticks > 4 * e.work) ticks = 4 * e.work;
    e.work = (3 * e.work + ticks) / 4;
  }
  e.answer_mask = answer_mask_for(e.work);
}

// The hand-off cost in ticks: MOTE_OMP_TASK_HANDOFF_NS (default 2000 ns, a
// wake-up and a steal across cores on the machines mote targets); 0 never
// runs a task in place by choice. Read once.
// A value that is not a whole number of nanoseconds in 0..10^12 is named on
// stderr, and the default stays.
std::uint64_t handoff_ticks() noexcept {
  static const std::uint64_t ticks = [] {
    constexpr long long kDefaultNs = 2000;
    long long ns = kDefaultNs;
    if (const char* text = std::getenv("MOTE_OMP_TASK_HANDOFF_NS")) {
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(text, &end, 10);
      if (*text == '\0' || *end != '\0' || errno != 0 || v < 0 || v > 1'000'000'000'000LL) {
        std::fprintf(stderr, "mote: MOTE_OMP_TASK_HANDOFF_NS='%s' is not a number of nanoseconds (0 to 10^12); "
                     "using %lld\n", text, kDefaultNs);
      } else {
        ns = v;
      }
    }
    // Ticks, without overflow for any accepted value (ticks per us are a few thousand).
    return static_cast<std::uint64_t>(ns) / 1000 * detail::ticks_per_us() +
           static_cast<std::uint64_t>(ns) % 1000 * detail::ticks_per_us() / 1000;
  }();
  return ticks;
}

enum class placement : std::uint8_t { away, away_timed, here, here_timed };

placement choose_placement(void (*fn)(void*), unsigned depth, worker& self) noexcept {
  const std::uint64_t handoff = handoff_ticks();
  if (MOTE_UNLIKELY(handoff == 0)) return placement::away;  // MOTE_OMP_TASK_HANDOFF_NS=0: every task deferred
  site_entry& e = site_of(fn, depth);
  const bool deep = self.pool().held() >= kDeepQueue;
  if (!deep && e.work == 0) return placement::away_timed;
  if (deep || e.work < handoff) {
    if (--e.until_sample == 0) {
      e.until_sample = kSampleHere;
      return placement::here_timed;
    }
    return placement::here;
  }
  if (--e.until_sample == 0) {
    e.until_sample = kSampleAway;
    return placement::away_timed;
  }
  return placement::away;
}

// ---- Counting ---------------------------------------------------------------------
//
// A task's `counts` (team.hpp): the low half is 1 for its body and 1 per
// child not yet complete; the high half 1 per explicit child whose record is
// not yet freed, when the task is explicit itself (parent_explicit in the
// child). So an explicit task's record outlives its explicit descendants'
// records, and the chain of parents of any pending task can be read
// (descends). A completion takes back the child's low unit of its parent,
// and, when the child's record goes at the same time (it has nothing left),
// its high unit too, in one read-modify-write; else the record's free does
// that later. An implicit or undeferred task is not freed through counts:
// its end waits for its low half to be 1.

// Takes `delta` off p's counts: kPending for a child's completion, kRecord
// for a child's record, or both. The free of p's record (when it reaches 0:
// its body ended, nothing left) takes p's own unit off its parent, and so on
// up (a loop, not a recursion).
void release(omp_task* p, std::uint64_t delta) noexcept {
  while (p != nullptr) {
    // The waiter's word is read before the decrement: once the low half
    // reads 1, p may return from taskwait, end and be freed, so nothing of p
    // may be touched after. A waiter that publishes its word between the two
    // misses this wake-up only if its last look also missed the decrement;
    // its sleep is bounded (wait_until's timeout), so it looks again.
    std::atomic<std::uint32_t>* word = (delta & kPendingMask) != 0 ? p->waiter.load(std::memory_order_seq_cst)
                                                                    : nullptr;
    const bool is_explicit = p->is_explicit;
    omp_task* const up = p->parent;
    const bool up_explicit = p->parent_explicit;
    // seq_cst: the completion side of the Dekker pair with the waiter
    // (wait_until), and acq_rel for the free.
    const std::uint64_t before = p->counts.fetch_sub(delta, std::memory_order_seq_cst);
    if ((delta & kPendingMask) != 0 && (before & kPendingMask) == 2) wake_word(word);
    if (before != delta || !is_explicit) return;
    free_record(p);
    if (!up_explicit) return;  // (its completion took its unit off its parent already)
    p = up;
    delta = kRecord;
  }
}

// The counts of a finished task (its body returned and, when detached, its
// event was fulfilled): its group, its parent, then the team's sum. st: the
// thread's state in t's team, or a stand-in for a thread outside it (then
// counted in foreign_completed, and the caller holds foreign_active). Once
// the team's sums match, the team may end: nothing after the last step
// touches it.
void complete(omp_task* t, thread_state* st) noexcept {
  team* tm = t->tm;
  if (t->df_event != nullptr) {
    // Its data-flow task ends now (its successors may start).
    auto* ev = static_cast<mote::dataflow_event*>(t->df_event);
    t->df_event = nullptr;
    ev->fulfill();
    delete ev;
  }
  if (taskgroup* g = t->group) {
    // As release: the group may end (and be deleted) once the count reads
    // 0, so its waiter's word is read first.
    std::atomic<std::uint32_t>* word = g->waiter.load(std::memory_order_seq_cst);
    if (g->count.fetch_sub(1, std::memory_order_seq_cst) == 1) wake_word(word);
  }
  omp_task* const parent = t->parent;
  if (t->has_deps) {
    // As release: the word first, then the decrement (seq_cst: the Dekker
    // pair with the scope's wait, finish_scope).
    std::atomic<std::uint32_t>* word = parent->waiter.load(std::memory_order_seq_cst);
    if (parent->df_pending.fetch_sub(1, std::memory_order_seq_cst) == 1) wake_word(word);
  }
  // The body's own unit: when it was the last, the record goes, and its
  // parent loses both units at once; else the parent loses the pending one
  // and the record's free (release) takes the other later.
  const bool parent_explicit = t->parent_explicit;
  if (t->counts.fetch_sub(kPending, std::memory_order_acq_rel) == kPending) {  // acq_rel: see omp_task::counts
    free_record(t);
    release(parent, parent_explicit ? kPending + kRecord : kPending);
  } else {
    release(parent, kPending);
  }
  if (tm != nullptr) {
    st->count_completion();
    tm->barrier.notify_waiters();
  }
}

// Runs t's body with st current (the thread's state in t's team), then its
// completion. Kept small: a chain of tasks that each wait for the next nests
// one of these per level on the stack.
void run_in(omp_task* t, thread_state* st, thread_state* saved) noexcept {
  set_current(st);
  ++tl_task_depth;
  omp_task* const outer_task = st->task;
  st->task = t;
  // Scopes made in the body are OpenMP's sibling scopes, not nested in the
  // data-flow task that may be running this body.
  detail::df_task* const df = detail::tl_df_current;
  detail::tl_df_current = nullptr;
  // A task of a cancelled region or taskgroup does not start, but for one
  // whose arguments hold objects its body destroys (as GNU's library).
  const bool skip = !t->has_copies && MOTE_UNLIKELY(cancellation_on()) &&
                    region_or_group_cancelled(t->tm, t->group);
  if (MOTE_UNLIKELY(t->timed)) {
    const std::uint64_t t0 = detail::cycle_clock();
    if (!skip) t->fn(t->arg);
    note_work(t->fn, t->depth, detail::cycle_clock() - t0);
  } else if (!skip) {
    t->fn(t->arg);
  }
  finish_scope(*t);
  // With no child pending (the body's own unit alone), none can be handed
  // back any more: the list is empty for good, and closing it (an
  // exchange) is not needed. Acquire: as taskwait's read of 1.
  if ((t->counts.load(std::memory_order_acquire) & kPendingMask) != 1) close_handed(*t);
  detail::tl_df_current = df;
  st->task = outer_task;
  --tl_task_depth;
  set_current(saved);
  // Detached and not yet fulfilled: fulfill_event completes it (and drops
  // the body's reference then, keeping the record for the event until then).
  if (t->holds.fetch_sub(1, std::memory_order_acq_rel) == 1) complete(t, st);
}

void run_body(omp_task* t, thread_state* st) noexcept { run_in(t, st, &current_inline()); }

// The calling thread's state in t's team, or nullptr when it is not in it.
thread_state* state_for(const omp_task* t) noexcept {
  return t->tm == nullptr ? &current() : state_in(t->tm);
}

void run_scheduled(detail::task* base, worker&) noexcept {
  auto* t = static_cast<omp_task*>(base);
  thread_state* st = state_for(t);
  if (MOTE_UNLIKELY(st == nullptr || !may_start(t, *st))) {
    hand_back(t);
    return;
  }
  run_body(t, st);
}

// The body of a task with dependences, as its data-flow task (on whichever
// worker readied it). The record runs here when this thread may start it;
// otherwise it is handed back, and its data-flow task ends with an event
// that its completion fulfils; so does a detached one's (its successors
// wait for omp_fulfill_event too).
void run_dataflow(omp_task* t) noexcept {
  thread_state* st = state_for(t);
  const bool here = st != nullptr && may_start(t, *st);
  if (t->detached || !here) {
    auto* ev = new (std::nothrow) mote::dataflow_event(mote::dataflow_event::open());
    if (ev == nullptr) {
      std::fputs("mote: out of memory for an OpenMP task's data-flow event\n", stderr);
      std::abort();
    }
    t->df_event = ev;
  }
  if (here) {
    run_body(t, st);
  } else {
    hand_back(t);
  }
}

// ---- Events (detach) ----------------------------------------------------------------
//
// An omp_event_handle_t is a number handed out here, not the record's
// address: a handle fulfilled twice (or never handed out) is found unknown
// without reading any record, which the first fulfilment may have freed.
// The live ones are in a table, sharded, each shard under a mutex (detached
// tasks are few, and each handle is looked at twice: made, fulfilled).
struct event_shard {
  std::mutex lock;
  std::unordered_map<std::uintptr_t, omp_task*> live;
};
constexpr std::uintptr_t kEventShards = 16;

event_shard* event_shards() {
  // Never destroyed: an event may be fulfilled while static objects go.
  static event_shard* shards = new event_shard[kEventShards];
  return shards;
}

// Handles from 1 up; relaxed: a unique number is all it gives.
std::atomic<std::uintptr_t> next_event{1};

// A new handle for t's event, written where gcc reads it: the variable the
// clause names and the first word of the task's data. Throws bad_alloc.
void open_event(omp_task* t, const task_args& a) {
  const std::uintptr_t handle = next_event.fetch_add(1, std::memory_order_relaxed);
  event_shard& shard = event_shards()[handle % kEventShards];
  {
    const std::lock_guard<std::mutex> hold(shard.lock);
    shard.live.emplace(handle, t);
  }
  *static_cast<void**>(a.detach) = reinterpret_cast<void*>(handle);
  if (a.data != nullptr) *static_cast<void**>(a.data) = reinterpret_cast<void*>(handle);
}

// Takes back a handle whose task was not made after all.
void forget_event(void* event) noexcept {
  const auto handle = reinterpret_cast<std::uintptr_t>(event);
  event_shard& shard = event_shards()[handle % kEventShards];
  const std::lock_guard<std::mutex> hold(shard.lock);
  shard.live.erase(handle);
}

// The record of a live handle, which is then no longer live; or, for one
// that is not (fulfilled already, or never made), GNU's message and exit.
omp_task* take_event(void* event) noexcept {
  const auto handle = reinterpret_cast<std::uintptr_t>(event);
  event_shard& shard = event_shards()[handle % kEventShards];
  {
    const std::lock_guard<std::mutex> hold(shard.lock);
    auto found = shard.live.find(handle);
    if (found != shard.live.end()) {
      omp_task* t = found->second;
      shard.live.erase(found);
      return t;
    }
  }
  std::fprintf(stderr, "\nlibgomp: omp_fulfill_event: %p event is invalid or has already been fulfilled!\n\n", event);
  std::fflush(stderr);
  std::exit(EXIT_FAILURE);
}

// Copies the arguments into dst (aligned for them).
void copy_args(const task_args& a, void* dst) {
  if (a.cpyfn != nullptr) {
    a.cpyfn(dst, a.data);
  } else if (a.arg_size > 0) {
    std::memcpy(dst, a.data, static_cast<std::size_t>(a.arg_size));
  }
}

// A record with room for the arguments' copy after it: from the calling
// worker's record cache when it fits a class (no allocator call, no atomic),
// else from operator new (task_alloc.hpp's rule). Throws bad_alloc.
omp_task* make_record(const task_args& a, void** arg_out) {
  const std::size_t align = std::max<std::size_t>(static_cast<std::size_t>(std::max(a.arg_align, 1L)), 1);
  const std::size_t head = (sizeof(omp_task) + align - 1) / align * align;
  const std::size_t bytes = head + static_cast<std::size_t>(std::max(a.arg_size, 0L));
  const std::size_t record_align = std::max(align, alignof(omp_task));
  const detail::record_tag tag = detail::record_tag::of(bytes, record_align);
  worker* w = detail::current_worker;
  void* memory = w != nullptr ? detail::take_record(tag, bytes, w->cache()) : detail::take_record(tag, bytes);
  auto* t = ::new (memory) omp_task();
  t->tag = tag;
  *arg_out = static_cast<char*>(memory) + head;
  return t;
}

// Runs a's body on a copy of its arguments made by its cpyfn: out of line,
// so that the frames of a chain of undeferred tasks stay small (a chain of
// tasks each waiting for the next nests one of them per level).
__attribute__((noinline)) void call_on_copy(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*),
                                            long arg_size, long arg_align) {
  const std::size_t align = static_cast<std::size_t>(std::max(arg_align, 1L));
  const std::size_t bytes = static_cast<std::size_t>(arg_size) + align;
  // Small arguments on the stack, aligned by hand; large ones on the heap.
  alignas(64) char small[512];
  std::unique_ptr<char[]> big;
  char* raw = small;
  if (bytes > sizeof(small)) {
    big.reset(new char[bytes]);
    raw = big.get();
  }
  void* buf = raw;
  std::size_t space = bytes;
  buf = std::align(align, static_cast<std::size_t>(arg_size), buf, space);
  cpyfn(buf, data);
  fn(buf);
}

// Runs an undeferred task here: a task of its own (its children are its),
// waited for at its end so that nothing outlives the frame it lives in.
// The arguments one by one: GOMP_task's if(0) case comes here without a
// task_args (task_undeferred).
MOTE_ALWAYS_INLINE void run_undeferred(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long arg_size,
                                       long arg_align, thread_state& st, bool final_task) {
  omp_task t;
  t.fn = fn;
  t.tm = st.tm;
  t.parent = nullptr;
  t.root = st.task->root;
  t.inherit_icvs(*st.task);
  t.depth = st.task->depth + 1;
  t.has_list = true;
  t.group = st.task->open_group != nullptr ? st.task->open_group : st.task->group;
  t.is_final = final_task;
  omp_task* const outer = st.task;
  st.task = &t;
  // Scopes made in the body are OpenMP's sibling scopes (as in run_in).
  detail::df_task* const df = detail::tl_df_current;
  detail::tl_df_current = nullptr;
  if (cpyfn != nullptr) {
    call_on_copy(fn, data, cpyfn, arg_size, arg_align);
  } else {
    fn(data);
  }
  if (t.scope != nullptr) finish_scope(t);
  // Its children are complete (the usual case: none was deferred): no call
  // to wait_until, whose first look is this one.
  auto children_done = [&t] { return (t.counts.load(std::memory_order_acquire) & kPendingMask) == 1; };
  if (MOTE_UNLIKELY(!children_done())) wait_until(children_done, &t.waiter);
  // Not closed: its children are all complete, so its list is empty and
  // nothing can be handed back to it any more.
  detail::tl_df_current = df;
  st.task = outer;
}

void run_undeferred(const task_args& a, thread_state& st, bool final_task) {
  run_undeferred(a.fn, a.data, a.cpyfn, a.arg_size, a.arg_align, st, final_task);
}

// An undeferred task (if(0), a final parent, a thread that is no worker) or
// one on omp_all_memory that waits first: its dependences are met by waiting
// for the siblings that have any, then it runs here. A detached undeferred
// task waits for its event at its end. Out of line: task()'s frame stays
// small (see call_on_copy).
__attribute__((noinline)) void run_undeferred_waiting(const task_args& a, thread_state& st, const depend_list& deps,
                                                      bool final_task) {
  omp_task& parent = *st.task;
  const bool detach = (a.flags & kFlagDetach) != 0;
  if (parent.scope != nullptr && (!deps.accesses.empty() || deps.all_memory)) {
    wait_until([&parent] { return parent.df_pending.load(std::memory_order_seq_cst) == 0; }, &parent.waiter);
    static_cast<mote::dataflow*>(parent.scope)->wait();
  }
  if (detach) {
    // The event is this stack record's address only while it runs: keep a
    // heap record for the event instead.
    task_args b = a;
    b.detach = nullptr;
    auto ev = std::make_unique<omp_task>();
    open_event(ev.get(), a);
    run_undeferred(b, st, final_task);
    omp_task* const e = ev.get();
    wait_until([e] { return e->fulfilled.load(std::memory_order_seq_cst) != 0; }, &e->waiter);
    return;
  }
  run_undeferred(a, st, final_task);
}

// A deferred task: a record, counted, then handed to the runtime (`self`, the
// calling worker), to its parent's data-flow scope, or run at once in a team
// of one on a thread that is no worker (self nullptr; see task()). Out of
// line: task()'s frame stays small.
__attribute__((noinline)) void defer(const task_args& a, thread_state& st, const depend_list& deps, bool final_task,
                                     worker* self, bool timed) {
  omp_task& parent = *st.task;
  const bool detach = (a.flags & kFlagDetach) != 0;
  void* arg = nullptr;
  omp_task* t = make_record(a, &arg);
  t->fn = a.fn;
  t->arg = arg;
  t->tm = st.tm;
  t->parent = &parent;
  t->parent_explicit = parent.is_explicit;
  t->root = parent.root;
  t->depth = parent.depth + 1;
  t->inherit_icvs(parent);
  t->group = parent.open_group != nullptr ? parent.open_group : parent.group;
  t->is_final = final_task;
  t->is_explicit = true;
  t->has_list = true;
  t->has_deps = !deps.accesses.empty();
  t->has_copies = a.cpyfn != nullptr || a.copies;
  t->priority = (a.flags & kFlagPriority) != 0 ? a.priority : 0;
  t->timed = timed;
  if (detach) {
    t->detached = true;
    t->holds.store(2, std::memory_order_relaxed);
  }
  bool event_open = false;
  try {
    if (detach) {
      open_event(t, a);  // before the copy, which then carries it
      event_open = true;
    }
    copy_args(a, arg);
  } catch (...) {
    if (event_open) forget_event(*static_cast<void**>(a.detach));
    free_record(t);
    throw;
  }
  t->init(&run_scheduled);
  // Counted before it can run (and finish) anywhere: the parent's counts
  // (its record too, when it is explicit), the group, the parent's
  // dependent children, the team's spawn sum. Relaxed: the hand-off below
  // publishes them.
  const std::uint64_t units = t->parent_explicit ? kPending + kRecord : kPending;
  parent.counts.fetch_add(units, std::memory_order_relaxed);
  if (t->group != nullptr) t->group->count.fetch_add(1, std::memory_order_relaxed);
  if (t->has_deps) parent.df_pending.fetch_add(1, std::memory_order_relaxed);
  st.count_spawn();
  if (t->has_deps) {
    try {
      mote::dataflow& df = scope_of(parent);
      df.spawn_accesses(deps.accesses, [t] { run_dataflow(t); });
    } catch (...) {
      // The scope or its registration could not be made (bad_alloc): the
      // task was added nowhere, so its counts are taken back (the spawn
      // sum is balanced by a completion) and nothing is left behind.
      parent.counts.fetch_sub(units, std::memory_order_relaxed);
      parent.df_pending.fetch_sub(1, std::memory_order_relaxed);
      if (t->group != nullptr) t->group->count.fetch_sub(1, std::memory_order_relaxed);
      st.count_completion();
      free_record(t);
      throw;
    }
  } else if (self != nullptr) {
    // MOTE_STATS' spawns and MOTE_TRACE's spawn marks, as a task group's
    // (named as the worker names the task when it begins it).
    if (MOTE_UNLIKELY(self->instrumented())) self->note_spawn(reinterpret_cast<const void*>(t->execute), false);
    self->runtime().schedule(t, self);
  } else {
    run_in(t, &st, &st);  // solo and detached: its body now, its completion with its event
  }
  if (st.tm != nullptr) st.tm->barrier.notify_waiters();
}

}  // namespace

int task_depth() noexcept { return tl_task_depth; }

bool run_bounced(thread_state& st, bool any, std::uint64_t* seen) noexcept {
  team* tm = st.tm;
  if (tm == nullptr || st.foreign || tm->bounced.load(std::memory_order_relaxed) == nullptr) return false;
  // Relaxed: a hint; a push after this load changes it again.
  const std::uint64_t pushes = tm->bounced_pushes.load(std::memory_order_relaxed);
  if (seen != nullptr && pushes == *seen) return false;
  // Take the whole stack (acquire: the tasks' contents; several threads
  // take from it, so never one task by compare-and-swap, which could see a
  // freed task's address come back), run the first this thread may start,
  // and put the others back.
  omp_task* list = tm->bounced.exchange(nullptr, std::memory_order_acquire);
  // Another thread took the stack between the look above and the exchange:
  // nothing was seen, so `seen` stays (that thread puts back what it cannot
  // start, and counts that as a push: see below).
  if (list == nullptr) return false;
  omp_task* chosen = nullptr;
  omp_task* keep = nullptr;  // the others, in their order
  omp_task* keep_tail = nullptr;
  if (any) {
    chosen = list;
    keep = list != nullptr ? static_cast<omp_task*>(list->next) : nullptr;
  } else {
    while (list != nullptr) {
      omp_task* next = static_cast<omp_task*>(list->next);
      if (chosen == nullptr && may_start(list, st)) {
        chosen = list;
      } else {
        list->next = nullptr;
        if (keep_tail == nullptr) {
          keep = list;
        } else {
          keep_tail->next = list;
        }
        keep_tail = list;
      }
      list = next;
    }
  }
  if (keep != nullptr) {
    // Back on the stack: at once when nobody pushed meanwhile (the barrier's
    // takers: no walk), else below what they pushed. seq_cst, then the
    // wake-ups below: as hand_back's push. A member that looked while this
    // thread held the stack found it empty and may have gone to sleep (a
    // barrier's sleep has no timeout): the put-back must wake it, or the
    // tasks this thread may not start wait for a thread that never looks.
    omp_task* head = nullptr;
    if (!tm->bounced.compare_exchange_strong(head, keep, std::memory_order_seq_cst, std::memory_order_relaxed)) {
      if (keep_tail == nullptr) {
        for (keep_tail = keep; keep_tail->next != nullptr;) keep_tail = static_cast<omp_task*>(keep_tail->next);
      }
      do {
        keep_tail->next = head;
      } while (!tm->bounced.compare_exchange_weak(head, keep, std::memory_order_seq_cst, std::memory_order_relaxed));
    }
    wake_members(*tm);
    // A push for the others: a thread that looked while this one held the
    // stack found it empty, or took a stack without these, and must look
    // again (relaxed: a hint, as everywhere bounced_pushes is read; the
    // stack itself is what the park's last look reads seq_cst). This thread
    // has seen them: its own put-back is nothing new to it.
    const std::uint64_t after = tm->bounced_pushes.fetch_add(1, std::memory_order_relaxed) + 1;
    if (chosen == nullptr && seen != nullptr) *seen = after;
    if (chosen == nullptr) return false;
  } else if (chosen == nullptr) {
    if (seen != nullptr) *seen = pushes;
    return false;
  }
  run_body(chosen, &st);
  return true;
}

bool in_final() noexcept {
  const thread_state& st = current_inline();
  return st.task != nullptr && st.task->is_final;
}

namespace {

// A thief asked this worker for work while it runs its tasks in place: no
// push or pop of its own would answer before the task in place ends, which
// for a large one (a whole subtree) is long. So it answers now, as a push
// would: the older half of its private tasks goes to the shared part
// (split_deque::grow_shared, which wakes a worker parked in the runtime),
// and a member of the team that sleeps in the team's barrier, where the
// runtime's wake-up does not reach, is woken too.
__attribute__((noinline, cold)) void answer_request_slow(worker& self, thread_state& st) noexcept {
  self.pool().share_if_asked();
  // The share's seq_cst publication (split_deque::share_up_to) is ordered
  // before notify_waiters' seq_cst look at the barrier's sleepers: the
  // notifier half of the event count's pair, as after defer()'s push.
  if (st.tm != nullptr) st.tm->barrier.notify_waiters();
}
// With nothing private there is nothing to answer with (the next push
// answers): the test reads the owner's own indices first, and the request
// word, which a thief that asks writes, only when there is something to
// share (a look at it at every task in place, while an idle thief kept
// asking, cost a miss a task: uts ran at two thirds of its speed).
MOTE_ALWAYS_INLINE void answer_request(worker& self, thread_state& st) noexcept {
  if (MOTE_UNLIKELY(self.pool().has_private()) && self.pool().asked()) answer_request_slow(self, st);
}

// placed() for every case but its quick one. Out of line, so that the quick
// one saves no registers.
__attribute__((noinline)) void placed_slow(const task_args& a, thread_state& st, bool final_task, worker& self) {
  const unsigned depth = site_depth(st.task->depth + 1);
  const placement where = choose_placement(a.fn, depth, self);
  if (where == placement::here || where == placement::here_timed) answer_request(self, st);
  switch (where) {
    case placement::here:
      run_undeferred(a, st, final_task);
      return;
    case placement::here_timed: {
      const std::uint64_t t0 = detail::cycle_clock();
      run_undeferred(a, st, final_task);
      note_work(a.fn, depth, detail::cycle_clock() - t0);
      return;
    }
    case placement::away:
    case placement::away_timed:
      defer(a, st, depend_list{}, final_task, &self, where == placement::away_timed);
      return;
  }
}

// A task without dependences, detach clause or priority, on a worker of its
// team: undeferred by choice, or deferred (see "Undeferred by choice"). The
// quick case, a measured site short against the hand-off and not due for a
// sample, is choose_placement()'s `here` without its other tests (a deep
// pool does not matter to a site that runs in place anyway).
// *answer: this is one of the site's tasks in place at which a thief's
// request is looked for (answer_request): where the site's countdown to its
// next sample is a multiple of kAnswerEvery, and at the sampled task
// (placed_slow), so about every 8th; a look at every one cost 8 of a fib
// task's instructions in place (callgrind, fib(22) on 2 threads). A site
// whose bodies measure half a hand-off or more looks at every one
// (site_entry::answer_mask): at every 8th, a thief asking for the spawner's
// older tasks waited for up to eight of health's subtrees in place, about
// 10 us, at every step (docs/performance.md, "A thief's request answered by
// tasks in place").
MOTE_ALWAYS_INLINE bool quick_in_place(void (*fn)(void*), const thread_state& st, bool* answer) noexcept {
  site_table* const table = tl_sites;
  if (MOTE_UNLIKELY(table == nullptr)) return false;
  const unsigned depth = site_depth(st.task->depth + 1);
  site_entry& e = table->entries[site_slot(fn, depth)];
  if (MOTE_LIKELY(e.fn == fn && e.depth == depth && e.work - 1 < table->here_below && e.until_sample > 1)) {
    *answer = (--e.until_sample & e.answer_mask) == 0;
    return true;
  }
  return false;
}

MOTE_ALWAYS_INLINE void placed(const task_args& a, thread_state& st, bool final_task, worker& self) {
  bool answer = false;
  if (MOTE_LIKELY(quick_in_place(a.fn, st, &answer))) {
    if (MOTE_UNLIKELY(answer)) answer_request(self, st);
    run_undeferred(a, st, final_task);
    return;
  }
  placed_slow(a, st, final_task, self);
}

// task() for the tasks task_plain()'s quick tests leave: the clauses that
// take the long way, cancellation on. Out of line, so that the quick tests'
// frame and prologue stay their own.
__attribute__((noinline)) void task_general(const task_args& a, thread_state& st, worker* self) {
  omp_task& parent = *st.task;
  if (MOTE_UNLIKELY(cancellation_on())) {
    // A cancelled region or taskgroup starts no new task (as GNU's library,
    // which makes none): not even one that would run here, undeferred.
    if (region_or_group_cancelled(st.tm, innermost_group(parent))) return;
  }
  const bool final_task = (a.flags & kFlagFinal) != 0 || parent.is_final;
  const bool detach = (a.flags & kFlagDetach) != 0;
  depend_list deps;
  if ((a.flags & kFlagDepend) != 0 && a.depend != nullptr) deps = decode_depend(a.depend);
  const bool worker_here = self != nullptr && st.self == self;
  const bool may_defer = a.if_clause && !parent.is_final;
  // A team of one on a thread that is no worker (`solo`): its tasks run as
  // they are made, but for those OpenMP lets the program expect to be
  // deferred: a detached one (its event may be fulfilled by a task made
  // after it: it runs its body now and completes when the event comes), and
  // once one with dependences is pending, every task with dependences (they
  // wait in the parent's data-flow scope, on mote's default runtime, whose
  // workers hand them back to this thread's waits when they are ready).
  const bool solo = !worker_here && st.tm != nullptr && may_defer && !deps.all_memory &&
                    (detach || (!deps.accesses.empty() && parent.scope != nullptr));
  const bool deferrable = (worker_here && may_defer) || solo;
  if (!deferrable || deps.all_memory) {
    if (MOTE_LIKELY(!detach && (parent.scope == nullptr || (deps.accesses.empty() && !deps.all_memory)))) {
      run_undeferred(a, st, final_task);  // the common case: a frame as small as can be
    } else {
      run_undeferred_waiting(a, st, deps, final_task);
    }
    return;
  }
  if (worker_here && deps.accesses.empty() && !detach && (a.flags & kFlagPriority) == 0) {
    placed(a, st, final_task, *self);
    return;
  }
  defer(a, st, deps, final_task, worker_here ? self : nullptr, false);
}

}  // namespace

void task(const task_args& a) {
  // The usual task (if(1), none of the clauses that take the long way, no
  // copy-constructed arguments): task_plain's quick tests; everything else
  // the general way.
  if (MOTE_LIKELY(a.if_clause && (a.flags & (kFlagDepend | kFlagDetach | kFlagPriority)) == 0 && !a.copies)) {
    task_plain(a.fn, a.data, a.cpyfn, a.arg_size, a.arg_align, a.flags);
    return;
  }
  task_general(a, current_inline(), detail::current_worker);
}

void task_plain(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long arg_size, long arg_align,
                unsigned flags) {
  thread_state* const st = tl_current_state;
  worker* const self = detail::current_worker;
  const bool* const cancel = cancellation_flag.load(std::memory_order_acquire);
  // Runs here: a short measured site on a worker of the team, or a task on
  // a thread that is no worker of its team (a team of one) or in a final
  // parent, with one run_undeferred. Otherwise a deferrable task on a worker
  // of the team goes to the rest of its placement, and anything else (no
  // thread state yet, cancellation on or not yet read, a final clause) the
  // general way.
  bool here = false;
  bool final_task = false;
  bool placeable = false;
  if (MOTE_LIKELY(st != nullptr && cancel != nullptr && !*cancel)) {
    const bool final_parent = st->task->is_final;
    if (self == nullptr || st->self != self || final_parent) {
      here = true;
      final_task = (flags & kFlagFinal) != 0 || final_parent;
    } else if ((flags & kFlagFinal) == 0) {
      bool answer = false;
      here = quick_in_place(fn, *st, &answer);
      if (MOTE_UNLIKELY(answer)) answer_request(*self, *st);
      placeable = true;
    }
  }
  if (MOTE_LIKELY(here)) {
    run_undeferred(fn, data, cpyfn, arg_size, arg_align, *st, final_task);
    return;
  }
  const task_args a{fn, data, cpyfn, arg_size, arg_align, true, flags, nullptr, 0, nullptr};
  if (placeable) {
    placed_slow(a, *st, false, *self);
    return;
  }
  task_general(a, current_inline(), self);
}

namespace {

// task_undeferred with cancellation on: the whole of task() (a task of a
// cancelled taskgroup is discarded). Out of line, so that the usual case
// saves no registers for it.
__attribute__((noinline, cold)) void task_undeferred_cancellable(void (*fn)(void*), void* data,
                                                                 void (*cpyfn)(void*, void*), long arg_size,
                                                                 long arg_align, unsigned flags) {
  task(task_args{fn, data, cpyfn, arg_size, arg_align, false, flags, nullptr, 0, nullptr});
}

}  // namespace

void task_undeferred(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long arg_size, long arg_align,
                     unsigned flags) {
  if (MOTE_UNLIKELY(cancellation_on())) {
    task_undeferred_cancellable(fn, data, cpyfn, arg_size, arg_align, flags);
    return;
  }
  thread_state& st = current_inline();
  // An if(0) task is a scheduling point as a task in place is: the first of
  // a subtree of them (made by a task that is not undeferred itself: an
  // explicit one, or an implicit one, which keeps no list) looks for a
  // thief's request (answer_request), so that the older tasks this thread
  // holds privately do not wait for the whole subtree (health's cut-off: 84
  // villages under each deferred task, about 5 us, at every step). The ones
  // below it do not look: in a recursion cut off with if(0) they are nearly
  // all of the calls, a few instructions each (a look at every 8th cost
  // fib_if_clause 7%).
  const omp_task& maker = *st.task;
  if ((maker.is_explicit || !maker.has_list) && st.self != nullptr && st.self == detail::current_worker) {
    answer_request(*st.self, st);
  }
  run_undeferred(fn, data, cpyfn, arg_size, arg_align, st, (flags & kFlagFinal) != 0 || st.task->is_final);
}

namespace {

// taskwait with children pending, or a scope of dependences to close.
__attribute__((noinline)) void taskwait_slow(omp_task& t) {
  // Every child complete, those with dependences too (their data-flow
  // tasks' ends follow at once); the scope's wait then only forgets them.
  wait_until([&t] { return (t.counts.load(std::memory_order_seq_cst) & kPendingMask) == 1; }, &t.waiter);
  if (t.scope != nullptr) static_cast<mote::dataflow*>(t.scope)->wait();
}

}  // namespace

void taskwait() {
  thread_state& st = current_inline();
  omp_task& t = *st.task;
  // No child pending and no scope: nothing to wait for (the look
  // wait_until's first would make, without its frame). seq_cst: as there.
  if (MOTE_LIKELY((t.counts.load(std::memory_order_seq_cst) & kPendingMask) == 1 && t.scope == nullptr)) return;
  taskwait_slow(t);
}

void taskwait_depend(void** depend) {
  thread_state& st = current_inline();
  omp_task& t = *st.task;
  if (t.scope == nullptr) return;  // no sibling has dependences
  depend_list deps = decode_depend(depend);
  auto& df = *static_cast<mote::dataflow*>(t.scope);
  if (deps.all_memory) {
    wait_until([&t] { return t.df_pending.load(std::memory_order_seq_cst) == 0; }, &t.waiter);
    df.wait();
    return;
  }
  // An empty task with the same dependences: when it has run, they are met.
  std::atomic<std::uint32_t> reached{0};
  std::atomic<std::atomic<std::uint32_t>*> waiter{nullptr};
  // Both live in this frame, which ends as soon as the waiter sees `reached`:
  // as release does, the task reads the waiter's word before its store
  // and touches nothing of the frame after it. A waiter that publishes its
  // word between the two misses this wake-up only if its last look missed
  // the store too; its sleep is bounded (wait_until), so it looks again.
  df.spawn_accesses(deps.accesses, [&reached, &waiter] {
    std::atomic<std::uint32_t>* word = waiter.load(std::memory_order_seq_cst);
    reached.store(1, std::memory_order_seq_cst);
    if (MOTE_UNLIKELY(taskwait_depend_pause_us() != 0)) test_pause(taskwait_depend_pause_us());
    wake_word(word);
  });
  wait_until([&reached] { return reached.load(std::memory_order_seq_cst) != 0; }, &waiter);
}

// A task scheduling point: one task the calling task may start, if any (its
// handed-back children, the team's, or what help_once finds and
// run_scheduled accepts). GNU's library runs none.
void taskyield() {
  thread_state& st = current_inline();
  std::uint64_t seen = ~std::uint64_t{0};
  if (!run_handed(st) && !run_bounced(st, false, &seen) && st.self == detail::current_worker) (void)help_once();
}

void taskgroup_start() {
  thread_state& st = current_inline();
  auto* g = new taskgroup();
  g->outer = st.task->open_group;
  g->enclosing = innermost_group(*st.task);
  if (g->enclosing != nullptr) g->reductions = g->enclosing->reductions;
  st.task->open_group = g;
}

void taskgroup_end() {
  thread_state& st = current_inline();
  taskgroup* g = st.task->open_group;
  if (g == nullptr) return;
  wait_until([g] { return g->count.load(std::memory_order_seq_cst) == 0; }, &g->waiter);
  st.task->open_group = g->outer;
  delete g;
}

bool cancel_taskgroup() {
  thread_state& st = current_inline();
  taskgroup* g = innermost_group(*st.task);
  if (g == nullptr) return false;
  if (g->workshare && g->enclosing != nullptr) g = g->enclosing;
  g->cancelled.store(true, std::memory_order_relaxed);  // relaxed: a hint (see "Cancellation")
  return true;
}

bool taskgroup_cancelled() noexcept {
  // cancel parallel cancels the region's explicit tasks too (GNU's
  // cancellation point taskgroup answers for the region as well).
  const thread_state& st = current_inline();
  return region_or_group_cancelled(st.tm, innermost_group(*st.task));
}

void fulfill_event(void* event) {
  omp_task* t = take_event(event);
  if (!t->is_explicit) {
    // An undeferred task's event (see task()): its waiter polls the flag
    // and frees the record after, so the notification goes first.
    std::atomic<std::uint32_t>* word = t->waiter.load(std::memory_order_seq_cst);
    t->fulfilled.store(1, std::memory_order_seq_cst);
    if (word != nullptr) detail::runtime_impl::wake_parked(*word);
    return;
  }
  // Pinned by a unit of its own: the task's body may end, complete it and
  // drop its units at any moment from here on. Relaxed: the record is alive
  // (its event was live, so the completion that frees it has not come),
  // and this call's own drop below orders what it did (acq_rel).
  t->counts.fetch_add(kPending, std::memory_order_relaxed);
  team* tm = t->tm;
  // Counted among the team's outside threads: the completion below may be
  // the team's last, and the team must outlive this call (parallel() waits
  // for foreign_active to drop to 0).
  if (tm != nullptr) tm->foreign_active.fetch_add(1, std::memory_order_relaxed);
  // The completion belongs to whoever drops the last hold: the body's end
  // or this call.
  if (t->holds.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    thread_state outside;
    outside.tm = tm;
    outside.foreign = true;
    complete(t, &outside);
  }
  if (tm != nullptr) tm->foreign_active.fetch_sub(1, std::memory_order_release);
  // The pin: its record goes now if the completion is done and nothing else
  // holds it (then its explicit parent's record unit goes too).
  const bool parent_explicit = t->parent_explicit;
  omp_task* const parent = t->parent;
  if (t->counts.fetch_sub(kPending, std::memory_order_acq_rel) == kPending) {  // acq_rel: see omp_task::counts
    free_record(t);
    if (parent_explicit) release(parent, kRecord);
  }
}

void end_implicit_task(thread_state& st) {
  finish_scope(st.implicit);
  st.implicit.drop_icvs();
}

// ---- Task reductions ---------------------------------------------------------------

namespace {

// The words of gcc's registration array.
enum : std::size_t { kCount = 0, kSize = 1, kBase = 2, kAllocator = 3, kNext = 4, kHead = 5, kEnd = 6, kEntries = 7 };

// Gives every block of the chain that starts at data its per-thread copies
// (or orig's, for a worksharing construct's later threads) and links the
// chain's end to `old`, the enclosing registration.
void register_chain(std::uintptr_t* data, std::uintptr_t* old, std::uintptr_t* orig, unsigned nthreads) {
  std::uintptr_t* d = data;
  for (;;) {
    if (orig != nullptr) {
      d[kBase] = orig[kBase];
      d[kEnd] = orig[kEnd];
      orig = reinterpret_cast<std::uintptr_t*>(orig[kNext]);
    } else {
      const std::size_t align = std::max<std::size_t>(d[kBase], alignof(std::max_align_t));
      const std::size_t bytes = (d[kSize] * nthreads + align - 1) / align * align;
      void* p = std::aligned_alloc(align, std::max<std::size_t>(bytes, align));
      if (p == nullptr) throw std::bad_alloc();
      std::memset(p, 0, bytes);
      d[kBase] = reinterpret_cast<std::uintptr_t>(p);
      d[kEnd] = d[kBase] + d[kSize] * nthreads;
    }
    d[kHead] = 0;
    if (d[kNext] == 0) {
      d[kNext] = reinterpret_cast<std::uintptr_t>(old);
      break;
    }
    d = reinterpret_cast<std::uintptr_t*>(d[kNext]);
  }
  // The chain's first block is marked, so that unregister stops at the
  // enclosing registration.
  data[kHead] = 1;
}

// The thread's index among the team's copies.
unsigned copy_index(const thread_state& st) {
  if (st.foreign) unsupported("GOMP_task_reduction_remap (a task with in_reduction run outside its team)");
  return st.id;
}

}  // namespace

void taskgroup_reduction_register(std::uintptr_t* data) {
  thread_state& st = current_inline();
  if (st.task->open_group == nullptr) taskgroup_start();
  taskgroup* g = st.task->open_group;
  register_chain(data, g->reductions, nullptr, st.tm != nullptr ? st.tm->n : 1);
  g->reductions = data;
}

void taskgroup_reduction_unregister(std::uintptr_t* data) {
  std::uintptr_t* d = data;
  do {
    std::free(reinterpret_cast<void*>(d[kBase]));
    d = reinterpret_cast<std::uintptr_t*>(d[kNext]);
  } while (d != nullptr && d[kHead] == 0);
}

void task_reduction_remap(std::size_t cnt, std::size_t cntorig, void** ptrs) {
  thread_state& st = current_inline();
  const unsigned id = copy_index(st);
  taskgroup* g = innermost_group(*st.task);
  std::uintptr_t* data = g != nullptr ? g->reductions : nullptr;
  for (std::size_t i = 0; i < cnt; ++i) {
    const auto p = reinterpret_cast<std::uintptr_t>(ptrs[i]);
    bool found = false;
    // An original variable's address: its entry, in any block of the chain.
    for (std::uintptr_t* d = data; d != nullptr && !found; d = reinterpret_cast<std::uintptr_t*>(d[kNext])) {
      for (std::size_t j = 0; j < d[kCount]; ++j) {
        if (d[kEntries + 3 * j] == p) {
          ptrs[i] = reinterpret_cast<void*>(d[kBase] + id * d[kSize] + d[kEntries + 3 * j + 1]);
          if (i < cntorig) ptrs[cnt + i] = reinterpret_cast<void*>(p);
          found = true;
          break;
        }
      }
    }
    if (found) continue;
    // Else an address inside some thread's copy: the same offset in ours.
    for (std::uintptr_t* d = data; d != nullptr; d = reinterpret_cast<std::uintptr_t*>(d[kNext])) {
      if (p < d[kBase] || p >= d[kEnd]) continue;
      const std::uintptr_t off = (p - d[kBase]) % d[kSize];
      ptrs[i] = reinterpret_cast<void*>(d[kBase] + id * d[kSize] + off);
      if (i < cntorig) {
        for (std::size_t j = 0; j < d[kCount]; ++j) {
          if (d[kEntries + 3 * j + 1] == off) ptrs[cnt + i] = reinterpret_cast<void*>(d[kEntries + 3 * j]);
        }
      }
      found = true;
      break;
    }
    if (!found) {
      std::fprintf(stderr, "mote: no task_reduction or reduction with the task modifier matches %p\n", ptrs[i]);
      std::abort();
    }
  }
}

void workshare_taskgroup_start() {
  taskgroup_start();
  current().task->open_group->workshare = true;
}

void workshare_reduction_register(std::uintptr_t* data, std::uintptr_t* orig) {
  thread_state& st = current_inline();
  taskgroup* g = st.task->open_group;
  register_chain(data, g->reductions, orig, st.tm != nullptr ? st.tm->n : 1);
  g->reductions = data;
}

void workshare_task_reduction_unregister(bool cancelled) {
  thread_state& st = current_inline();
  taskgroup* g = st.task->open_group;
  std::uintptr_t* data = g->reductions;
  taskgroup_end();
  // Thread 0 frees the copies, after every thread has combined (the barrier).
  if (!cancelled) (void)barrier();
  if (st.id == 0) taskgroup_reduction_unregister(data);
}

unsigned parallel_reductions(void (*fn)(void*), void* data, unsigned nthreads, unsigned flags) {
  struct context {
    void (*fn)(void*);
    void* data;
    std::uintptr_t* rdata;
    taskgroup group;  // the implicit tasks' group: remap finds the copies there
    unsigned size;
  } ctx{fn, data, *static_cast<std::uintptr_t**>(data), {}, 1};
  ctx.group.reductions = ctx.rdata;
  // Registered for the team's real size, known once it has started: by its
  // thread 0, before a barrier that every thread passes before its body.
  // That barrier runs no task: gcc's code at the start of each thread's body
  // (re)initialises the thread's copy, so a task run on a thread before its
  // body started (one another thread made just after the release) would have
  // its part overwritten. No task of the team exists before the release.
  auto trampoline = [](void* p) {
    auto& c = *static_cast<context*>(p);
    thread_state& st = current_inline();
    if (st.id == 0) {
      c.size = st.tm != nullptr ? st.tm->n : 1;
      register_chain(c.rdata, nullptr, nullptr, c.size);
    }
    st.implicit.group = &c.group;
    if (st.tm != nullptr && st.tm->n > 1) st.tm->barrier.wait(st.id);
    c.fn(c.data);
  };
  parallel(trampoline, &ctx, nthreads, flags);
  return ctx.size;
}

template <class T>
void taskloop(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long arg_size, long arg_align,
              unsigned flags, unsigned long num_tasks, int priority, T start, T end, T step) {
  // The number of iterations, for either sign of step (ull: the `up` flag).
  unsigned long long iters;
  if constexpr (std::is_signed_v<T>) {
    if (step > 0) {
      iters = start < end ? static_cast<unsigned long long>((end - start + step - 1) / step) : 0;
    } else {
      iters = start > end ? static_cast<unsigned long long>((start - end - step - 1) / -step) : 0;
    }
  } else {
    if ((flags & kFlagUp) != 0) {
      iters = start < end ? (end - start + step - 1) / step : 0;
    } else {
      iters = start > end ? (start - end - step - 1) / -step : 0;
    }
  }
  struct head {  // gcc's data starts {start, end, registration array}
    T start, end;
    std::uintptr_t* ptr;
  };
  if (iters == 0) {
    // Nothing to run: as GNU does, word 2 of the registration array (its
    // copies' base) tells gcc's code that nothing was registered.
    if ((flags & (kFlagNogroup | kFlagReduction)) == kFlagReduction) static_cast<head*>(data)->ptr[2] = 0;
    return;
  }
  const bool group = (flags & kFlagNogroup) == 0;
  if (group) {
    taskgroup_start();
    if ((flags & kFlagReduction) != 0) {
      taskgroup_reduction_register(static_cast<head*>(data)->ptr);
    }
  }
  if (iters > 0) {
    unsigned long long ntasks;
    unsigned long long strict_grain = 0;
    if ((flags & kFlagGrainsize) != 0) {
      const unsigned long long grain = std::max<unsigned long>(num_tasks, 1);
      if ((flags & kFlagStrict) != 0) {
        // strict: every task but one runs exactly grain iterations.
        ntasks = (iters + grain - 1) / grain;
        strict_grain = grain;
      } else {
        ntasks = std::max<unsigned long long>(iters / grain, 1);
      }
    } else if (num_tasks != 0) {
      ntasks = std::min<unsigned long long>(num_tasks, iters);
    } else {
      ntasks = std::min<unsigned long long>(iters, static_cast<unsigned long long>(num_threads()));
    }
    const unsigned long long base = iters / ntasks, extra = iters % ntasks;
    T s = start;
    // Each task's copy of data, with [s, e) in its first two words: made
    // here through cpyfn (or a byte copy), then handed to task() as the
    // source of a plain byte copy.
    const std::size_t size = static_cast<std::size_t>(std::max(arg_size, 0L));
    const std::size_t align = static_cast<std::size_t>(std::max(arg_align, 1L));
    void* scratch =
        ::operator new(std::max<std::size_t>(size, 2 * sizeof(T)), std::align_val_t{std::max(align, alignof(T))});
    for (unsigned long long k = 0; k < ntasks; ++k) {
      unsigned long long count = base + (k < extra ? 1 : 0);
      if (strict_grain != 0) count = k + 1 < ntasks ? strict_grain : iters - strict_grain * (ntasks - 1);
      const T e = static_cast<T>(s + static_cast<T>(count) * step);
      if (cpyfn != nullptr) {
        cpyfn(scratch, data);
      } else {
        std::memcpy(scratch, data, size);
      }
      static_cast<T*>(scratch)[0] = s;
      static_cast<T*>(scratch)[1] = e;
      task_args a{fn,        scratch, nullptr,  arg_size, arg_align, (flags & kFlagIf) != 0,
                  flags & (kFlagFinal | kFlagPriority | kFlagUntied), nullptr, priority, nullptr};
      a.copies = cpyfn != nullptr;  // the byte copy moves what cpyfn made
      task(a);
      s = e;
    }
    ::operator delete(scratch, std::align_val_t{std::max(align, alignof(T))});
  }
  if (group) taskgroup_end();
}

template void taskloop<long>(void (*)(void*), void*, void (*)(void*, void*), long, long, unsigned, unsigned long,
                             int, long, long, long);
template void taskloop<unsigned long long>(void (*)(void*), void*, void (*)(void*, void*), long, long, unsigned,
                                           unsigned long, int, unsigned long long, unsigned long long,
                                           unsigned long long);

}  // namespace mote::omp
