// The OpenMP model's teams: an OpenMP thread is a mote worker for the length
// of a parallel region. docs/openmp.md ("How OpenMP maps onto mote") has the
// picture; this header is the state the other parts of src/omp/ share.
//
// A parallel region of n threads runs on n workers of the OpenMP runtime (a
// mote runtime with a caller seat, made on first use): the encountering
// thread is thread 0 (in the seat when it is not a worker already), and n - 1
// free workers are reserved and handed the region through their mailbox (an
// extension slot; the model's help hook takes it). Every thread runs the
// region's function, then the region's end barrier (a mote::tree_barrier
// that is held until the team's explicit tasks are done, while the waiters
// run tasks), and the members go back to being idle workers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "mote/detail/platform.hpp"
#include "mote/detail/task.hpp"
#include "mote/detail/task_alloc.hpp"
#include "mote/export.hpp"
#include "mote/tree_barrier.hpp"
#include "omp/icv.hpp"
#include "omp/worksharing.hpp"

namespace mote::detail {
class worker;
class runtime_impl;
}  // namespace mote::detail

namespace mote::omp {
using detail::cache_line;

struct team;
struct taskgroup;  // tasks.hpp
struct icv_block;  // icv.cpp

// An OpenMP task: an explicit one (a record made by GOMP_task, run by any
// worker of the team), an undeferred one (a record on its encountering
// thread's stack), or a thread's implicit task (inside its thread_state).
struct omp_task : detail::queued_task {
  void (*fn)(void*) = nullptr;
  void* arg = nullptr;
  team* tm = nullptr;               // the team it is bound to (nullptr: no region)
  omp_task* parent = nullptr;       // the task that made it (explicit tasks only)
  taskgroup* group = nullptr;       // the taskgroup it is counted in, or nullptr
  taskgroup* open_group = nullptr;  // the innermost taskgroup open in its body
  void* scope = nullptr;            // its children's dependences (a mote::dataflow), made on first use
  // Two counts in one word (tasks.cpp, "Counting"): the low half is 1 while
  // its body runs, plus one per child not yet complete (taskwait waits for
  // 1); the high half counts the records of its explicit children that are
  // not freed yet (an explicit task's record holds its explicit parent's
  // record, so that the chain of parents of a pending task can be read). An
  // explicit task's record is freed when the word reaches 0. acq_rel on
  // every change: a child's last writes are seen by the waiter that reads 1
  // (and by the free).
  std::atomic<std::uint64_t> counts{1};
  // Its children with dependences not yet complete (the scope's wait).
  std::atomic<std::uint32_t> df_pending{0};
  // The sleeper of its waits: its park word while it waits (see tasks.cpp).
  std::atomic<std::atomic<std::uint32_t>*> waiter{nullptr};
  // Its children that a thread took and could not start (the task
  // scheduling constraint, or a thread outside the team), handed back for
  // this task's waits to run: a stack linked through queued_task::next,
  // pushed by any thread, popped by the thread that runs this task; closed
  // (tasks.cpp, kClosed) when its body has ended. Explicit and undeferred
  // tasks only (has_list); an implicit task's go to its team's `bounced`.
  std::atomic<omp_task*> handed{nullptr};
  // detach: the completion waits for both the body's return and
  // omp_fulfill_event (2 holds); 1 hold otherwise.
  std::atomic<std::uint32_t> holds{1};
  // An undeferred detached task's event record only: set by omp_fulfill_event,
  // which the task's encountering thread waits for (tasks.cpp).
  std::atomic<std::uint32_t> fulfilled{0};
  // The data-flow event its completion fulfils (a mote::dataflow_event*,
  // tasks.cpp): a task with dependences whose data-flow task ended before
  // the record did (detached, or handed back).
  void* df_event = nullptr;
  // The implicit task its chain of creators starts from (an implicit task's
  // is itself; nullptr outside a region): a task is a descendant of a
  // thread's implicit task exactly when this is that task, whatever
  // undeferred tasks the chain went through (tasks.cpp, may_start).
  const omp_task* root = nullptr;
  unsigned depth = 0;         // its parent's depth + 1; an implicit task's is 0
  bool is_final = false;
  bool is_explicit = false;
  bool parent_explicit = false;  // its parent is an explicit task (whose record it holds)
  bool has_list = false;         // explicit or undeferred: takes its children back (handed)
  bool has_deps = false;         // made with dependences (counted in its parent's df_pending)
  bool detached = false;         // made with a detach clause
  bool has_copies = false;       // its arguments hold copy-constructed objects (task_args::copies)
  int priority = 0;
  // An explicit task's record: how its block was taken (tasks.cpp,
  // make_record: a worker's record cache for the usual sizes).
  detail::record_tag tag{};
  // Its body is timed (tasks.cpp, "Undeferred by choice"): the thread that
  // runs it notes the ticks in its table of call sites.
  bool timed = false;
  // Its data-environment ICVs (icv.cpp): icv points at them (nullptr: the
  // initial ones, globals().initial); icv_held is the block they are in when
  // the task holds a reference to one (a copy some task made to change
  // them), nullptr when they are a region's (team::icvs) or the initial ones.
  const task_icvs* icv = nullptr;
  icv_block* icv_held = nullptr;

  omp_task() = default;
  omp_task(const omp_task&) = delete;
  omp_task& operator=(const omp_task&) = delete;
  ~omp_task() {
    if (icv_held != nullptr) drop_icvs();  // (inline: most tasks hold no block of their own)
  }
  // Starts with `creator`'s ICVs (a reference to its block, if it has one).
  inline void inherit_icvs(const omp_task& creator) noexcept;
  // Gives up its block, if it holds one (the last holder frees it).
  MOTE_API void drop_icvs() noexcept;
};

// The extension slot the OpenMP model keeps its per-worker state in.
inline constexpr unsigned kOmpSlot = 3;

// One OpenMP thread's implicit task in one team (or, for a thread in no
// parallel region, its initial task: team nullptr, level 0).
struct alignas(cache_line) thread_state {
  team* tm = nullptr;
  unsigned id = 0;                  // omp_get_thread_num()
  unsigned level = 0;               // omp_get_level()
  unsigned active_level = 0;        // omp_get_active_level()
  thread_state* outer = nullptr;    // the encountering thread's state one level out
  thread_state* prev = nullptr;     // this thread's state before it joined the team (restored after)
  detail::worker* self = nullptr;   // the worker this thread is (nullptr: not a worker)
  omp_task* task = nullptr;         // the task running here (&implicit, or an explicit one)
  omp_task implicit;                // this thread's implicit task in the team
  bool foreign = false;             // a stand-in for a worker outside the team (tasks.cpp)
  // In the team's barrier (its implicit task waits there): the task
  // scheduling constraint lets it start any task of the team.
  bool in_barrier = false;
  // Host teams (GOMP_teams_reg): the league this thread's task belongs to;
  // a region's threads inherit it from the thread that encountered it.
  int team_num = 0;
  int num_teams = 1;
  // def-allocator-var: a per-implicit-task ICV (omp_set_default_allocator
  // binds to the implicit task of the calling thread); 0: OMP_ALLOCATOR's.
  // A region's threads start with the encountering thread's.
  std::uintptr_t def_allocator = 0;
  ws_thread_state ws;               // worksharing.hpp: this thread's place in the team's constructs

  // The explicit tasks this thread made and finished, for the barrier's test
  // that the team's tasks are all done (team_tasks_done). Each is written by
  // this thread only (plain load + release store, no read-modify-write).
  alignas(cache_line) std::atomic<std::uint64_t> spawned{0};
  std::atomic<std::uint64_t> completed{0};
  inline void count_spawn() noexcept;
  inline void count_completion() noexcept;
};

// A parallel region's team. Made by thread 0, which frees it (or keeps it for
// its next region) once every member has left it (`left`).
struct team {
  team(unsigned n, std::int64_t spin_ns);
  ~team();

  unsigned n;
  unsigned level;                   // the team's level (1 for an outermost region)
  unsigned active_level;
  void (*fn)(void*) = nullptr;
  void* data = nullptr;
  // Run by every thread before fn (the legacy GOMP_parallel_loop_*_start
  // forms: the loop's initialisation), or nullptr.
  void (*prologue)(void*) = nullptr;
  void* prologue_arg = nullptr;
  detail::runtime_impl* rt = nullptr;
  std::vector<detail::worker*> workers;   // the worker of each thread
  task_icvs icvs;                   // the ICVs its threads start with
  // Explicit tasks of this team completed by a thread outside it (the one
  // that fulfilled a detached task's event after its body ended);
  // read-modify-write, as several such threads may add.
  alignas(cache_line) std::atomic<std::uint64_t> foreign_completed{0};
  std::atomic<std::uint64_t> foreign_spawned{0};
  // Threads outside the team inside one of its tasks' bookkeeping (a task
  // taken and handed back, omp_fulfill_event): thread 0 waits for 0 before
  // the team ends.
  std::atomic<unsigned> foreign_active{0};
  std::unique_ptr<thread_state[]> threads;
  mote::tree_barrier barrier;
  ws_team_state ws;                 // worksharing.hpp: the constructs in flight

  // OpenMP cancellation of the region (GOMP_cancel(PARALLEL)): set once.
  std::atomic<bool> cancelled{false};
  // The end of a cancellable region (team.cpp, end_of_region): threads that
  // reached it, and whether the last barrier episode was the end for all.
  // at_end: relaxed (the barrier's arrival orders it before the root's
  // read); final_episode: written by the root before the release, read after.
  std::atomic<unsigned> at_end{0};
  bool final_episode = false;
  // Explicit tasks handed back to the team (tasks.cpp, hand_back): taken by
  // a worker outside it, or by a thread of it that the task scheduling
  // constraint kept from starting them, when their parent takes none back.
  // A stack linked through queued_task::next, pushed by any thread with a
  // seq_cst CAS, taken whole by a member (acquire), which puts back what it
  // does not start.
  alignas(cache_line) std::atomic<omp_task*> bounced{nullptr};
  // Pushes onto `bounced` so far: a waiting thread that found nothing there
  // it may start looks again only when this changed. Relaxed: a hint.
  std::atomic<std::uint64_t> bounced_pushes{0};
  // GOMP_cancel(LOOP or SECTIONS): the worksharing construct in flight is
  // cancelled; reset by the construct's end (worksharing.cpp).
  std::atomic<bool> ws_cancelled{false};
  // Members that have made their last access to the team; thread 0 waits for
  // n - 1 before it frees or reuses the team.
  alignas(cache_line) std::atomic<unsigned> left{0};
};

// The block of ICVs a task changed (icv.cpp): shared by its creator and the
// tasks made after the change, freed by the last holder.
struct icv_block {
  task_icvs values;
  // Tasks that hold it. Taken only by a holder (a task that makes a child),
  // so 1 means the reader is the only holder. Increments relaxed (the
  // holder's own reference keeps the block); decrements acq_rel (the last
  // one frees, after every other holder's reads).
  std::atomic<std::uint32_t> holders{1};
};

void omp_task::inherit_icvs(const omp_task& creator) noexcept {
  icv = creator.icv;
  icv_held = creator.icv_held;
  if (icv_held != nullptr) icv_held->holders.fetch_add(1, std::memory_order_relaxed);
}

void thread_state::count_spawn() noexcept {
  if (MOTE_UNLIKELY(foreign)) {
    tm->foreign_spawned.fetch_add(1, std::memory_order_release);
    return;
  }
  spawned.store(spawned.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void thread_state::count_completion() noexcept {
  if (MOTE_UNLIKELY(foreign)) {
    tm->foreign_completed.fetch_add(1, std::memory_order_release);
    return;
  }
  completed.store(completed.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

// Stops the program with one line naming an entry point mote does not
// implement (never runs it wrong).
[[noreturn]] MOTE_API void unsupported(const char* name) noexcept;

// ---- The calling thread ---------------------------------------------------------
// Its current OpenMP thread state (never nullptr: a thread in no region has
// its initial state).
MOTE_API thread_state& current() noexcept;
// The calling thread's state once current() has made it (nullptr before):
// read inline on the task layer's paths (initial-exec, as the core's
// current_worker); current() is the same with the first-use set-up.
extern constinit thread_local thread_state* tl_current_state __attribute__((tls_model("initial-exec")));
inline thread_state& current_inline() noexcept {
  thread_state* s = tl_current_state;
  return MOTE_LIKELY(s != nullptr) ? *s : current();
}
// The state of the calling thread in team tm (its own, or an outer one of
// its own: a thread of an inner team runs a task of the outer team it is
// also in), or nullptr when the thread is not in tm. The task layer runs a
// task with that state current (set_current), and counts its completion there.
thread_state* state_in(team* tm) noexcept;
void set_current(thread_state* st) noexcept;

// ---- Regions ----------------------------------------------------------------------
// Runs fn(data) on a team: GOMP_parallel's body. nthreads 0: the ICV's
// choice; flags: GOMP_parallel's (the proc_bind in its low bits).
MOTE_API void parallel(void (*fn)(void*), void* data, unsigned nthreads, unsigned flags);
// The same in two halves, for gcc's older entry points (GOMP_parallel_start
// and GOMP_parallel_end, between which the caller runs fn itself as thread
// 0): region_begin starts the team (every thread runs prologue(arg) first,
// thread 0 before region_begin returns); region_end is the region's end.
struct region {
  thread_state* cur = nullptr;
  void* group = nullptr;  // an outermost region's contention group (team.cpp), held to its end
  detail::worker* previous = nullptr;
  detail::runtime_impl* rt = nullptr;
  bool seated = false;
  std::vector<unsigned> members;
  team* tm = nullptr;
};
MOTE_API void region_begin(region& r, void (*fn)(void*), void* data, unsigned nthreads, unsigned flags,
                           void (*prologue)(void*), void* prologue_arg);
MOTE_API void region_end(region& r);
// Called by every thread of a team as it starts a region (thread 0 too),
// with its thread state and ICVs those of the region, before the region's
// function: libgomp.so.1 sets it when OMP_DISPLAY_AFFINITY is true, before
// any region. nullptr: nothing is called.
MOTE_API void set_region_start_hook(void (*hook)()) noexcept;
// The barrier of the calling thread's team (GOMP_barrier, and the implicit
// barriers of worksharing): waits for every thread and for the team's
// explicit tasks, running tasks meanwhile. Returns true when the region was
// cancelled (GOMP_barrier_cancel's answer).
MOTE_API bool barrier();
// Are all the team's explicit tasks done? (The barrier's release condition.)
bool team_tasks_done(const team& tm) noexcept;
// The barrier as the thread whose state st is in tm.
void team_barrier(team& tm, thread_state& st);
// Runs one task handed back to st's team (its `bounced` stack, tasks.cpp):
// any of them when `any` (the barrier), else one that st's current task may
// start (the task scheduling constraint). *seen (may be null): the team's
// bounced_pushes when the stack last held nothing this thread could start;
// it looks again only after more were pushed. False when it ran none.
bool run_bounced(thread_state& st, bool any, std::uint64_t* seen) noexcept;
// How deep the calling thread is inside OpenMP task bodies (a worker that is
// inside one takes no region from its mailbox: it would nest the region in
// a task that the region's barrier waits for).
int task_depth() noexcept;

// One step of work for a waiting OpenMP thread: a task, from anywhere in the
// runtime. True when it ran one.
MOTE_API bool help_once() noexcept;

// ---- Queries (omp_get_*) -----------------------------------------------------------
MOTE_API int thread_num() noexcept;
MOTE_API int num_threads() noexcept;
MOTE_API int level() noexcept;
MOTE_API int active_level() noexcept;
MOTE_API int ancestor_thread_num(int level) noexcept;
MOTE_API int team_size(int level) noexcept;
MOTE_API bool in_parallel() noexcept;

// Runs fn(arg) on the calling thread as a fresh initial thread (level 0, no
// team): a target region's host fallback.
MOTE_API void run_as_initial_thread(void (*fn)(void*), void* arg);

// The OpenMP runtime (made on first use), for tests and for the front end.
MOTE_API detail::runtime_impl& runtime();

// omp_pause_resource on the host: ends the OpenMP runtime's workers (their
// threads exit, so threadprivate data starts afresh in the next region's
// threads, as GNU's library ends its pool's threads); the next region makes
// a new runtime. Waits for an outermost region another thread runs. -1
// (nothing done) inside a parallel region, or on a thread of the runtime
// (inside a target region run on one), 0 otherwise.
MOTE_API int pause_host();

}  // namespace mote::omp
