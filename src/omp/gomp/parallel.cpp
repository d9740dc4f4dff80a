// libgomp's entry points for parallel regions, barriers, cancellation and
// host teams, on mote's OpenMP model (src/omp/team.hpp).
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "omp/gomp/abi.hpp"
#include "omp/icv.hpp"
#include "omp/tasks.hpp"
#include "omp/worksharing.hpp"
#include "omp/team.hpp"

namespace {

// GOMP_cancel's `which` (gcc's GOMP_CANCEL_*).
constexpr int kCancelParallel = 1;
constexpr int kCancelLoop = 2;
constexpr int kCancelSections = 4;
constexpr int kCancelTaskgroup = 8;


bool cancelled(int which) {
  mote::omp::thread_state& st = mote::omp::current();
  switch (which) {
    case kCancelParallel: return st.tm != nullptr && st.tm->cancelled.load(std::memory_order_relaxed);
    case kCancelLoop:
    case kCancelSections: return st.tm != nullptr && st.tm->ws_cancelled.load(std::memory_order_relaxed);
    case kCancelTaskgroup: return mote::omp::taskgroup_cancelled();
    default: return false;
  }
}

}  // namespace

// The entry points are exported (the rest of the library is hidden; the
// version script names them).
#pragma GCC visibility push(default)
extern "C" {

// GOMP_4.0: #pragma omp parallel [num_threads(n)] [if(c)] [proc_bind(b)].
// gcc passes num_threads 1 for a false if clause; flags hold proc_bind.
void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags) {
  mote::omp::parallel(fn, data, num_threads, flags);
}

void GOMP_barrier() { (void)mote::omp::barrier(); }

// GOMP_4.0: a barrier in a region that may be cancelled: true when it was.
bool GOMP_barrier_cancel() { return mote::omp::barrier(); }

// ---- gcc's entry points before 4.9: a region in two halves ---------------------
// GOMP_parallel_start starts the team and returns; the caller runs the body
// as thread 0, then calls GOMP_parallel_end. The halves of one thread nest.

bool GOMP_loop_start(long start, long end, long incr, long sched, long chunk, long* istart, long* iend,
                     std::uintptr_t* reductions, void** mem);
unsigned GOMP_sections_start(unsigned count);

}  // extern "C"

namespace {

// The loop of a GOMP_parallel_loop_*_start, entered by every thread of the
// region before the body (GOMP_loop_start with no chunk wanted).
struct legacy_loop {
  long start, end, incr, sched, chunk;
};
void enter_legacy_loop(void* p) {
  auto* l = static_cast<legacy_loop*>(p);
  (void)GOMP_loop_start(l->start, l->end, l->incr, l->sched, l->chunk, nullptr, nullptr, nullptr, nullptr);
}

// A region between GOMP_*_start and GOMP_parallel_end, with what its threads
// read until its end (the loop's description: every thread has entered the
// loop by then). Freed by GOMP_parallel_end.
struct legacy_region {
  mote::omp::region r;
  legacy_loop loop{};
};

thread_local std::vector<std::unique_ptr<legacy_region>> tl_legacy_regions;

void legacy_begin(std::unique_ptr<legacy_region> rec, void (*fn)(void*), void* data, unsigned num_threads,
                  void (*prologue)(void*), void* arg) {
  mote::omp::region_begin(rec->r, fn, data, num_threads, 0, prologue, arg);
  tl_legacy_regions.push_back(std::move(rec));
}

void legacy_begin(void (*fn)(void*), void* data, unsigned num_threads, void (*prologue)(void*), void* arg) {
  legacy_begin(std::make_unique<legacy_region>(), fn, data, num_threads, prologue, arg);
}

void legacy_loop_begin(void (*fn)(void*), void* data, unsigned num_threads, long start, long end, long incr,
                       long sched, long chunk) {
  auto rec = std::make_unique<legacy_region>();
  rec->loop = legacy_loop{start, end, incr, sched, chunk};
  legacy_loop* loop = &rec->loop;
  legacy_begin(std::move(rec), fn, data, num_threads, enter_legacy_loop, loop);
}

// The sections construct of a GOMP_parallel_sections_start, entered by
// every thread before the body (which asks GOMP_sections_next).
void enter_legacy_sections(void* p) { mote::omp::sections_enter(static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(p))); }

}  // namespace

extern "C" {

void GOMP_parallel_start(void (*fn)(void*), void* data, unsigned num_threads) {
  legacy_begin(fn, data, num_threads, nullptr, nullptr);
}

void GOMP_parallel_end() {
  if (tl_legacy_regions.empty()) return;
  std::unique_ptr<legacy_region> rec = std::move(tl_legacy_regions.back());
  tl_legacy_regions.pop_back();
  mote::omp::region_end(rec->r);
}

// GOMP_parallel_loop_<schedule>_start (GOMP_1.0): gcc's GFS_ codes.
void GOMP_parallel_loop_static_start(void (*fn)(void*), void* data, unsigned n, long start, long end, long incr,
                                     long chunk) {
  legacy_loop_begin(fn, data, n, start, end, incr, GFS_STATIC, chunk);
}
void GOMP_parallel_loop_dynamic_start(void (*fn)(void*), void* data, unsigned n, long start, long end, long incr,
                                      long chunk) {
  legacy_loop_begin(fn, data, n, start, end, incr, GFS_DYNAMIC | GFS_MONOTONIC, chunk);
}
void GOMP_parallel_loop_guided_start(void (*fn)(void*), void* data, unsigned n, long start, long end, long incr,
                                     long chunk) {
  legacy_loop_begin(fn, data, n, start, end, incr, GFS_GUIDED | GFS_MONOTONIC, chunk);
}
void GOMP_parallel_loop_runtime_start(void (*fn)(void*), void* data, unsigned n, long start, long end,
                                      long incr) {
  legacy_loop_begin(fn, data, n, start, end, incr, GFS_RUNTIME, 0);
}

void GOMP_parallel_sections_start(void (*fn)(void*), void* data, unsigned n, unsigned count) {
  legacy_begin(fn, data, n, enter_legacy_sections, reinterpret_cast<void*>(static_cast<std::uintptr_t>(count)));
}

// GOMP_error and GOMP_warning: the error directive (gcc 12), as GNU's
// library reports it. msglen (size_t)-1: msg is NUL-terminated.
void GOMP_warning(const char* msg, std::size_t msglen) {
  if (msg == nullptr) {
    std::fputs("libgomp: error directive encountered\n", stderr);
  } else if (msglen == static_cast<std::size_t>(-1)) {
    std::fprintf(stderr, "libgomp: error directive encountered: %s\n", msg);
  } else {
    std::fputs("\nlibgomp: error directive encountered: ", stderr);
    std::fwrite(msg, 1, msglen, stderr);
    std::fputc('\n', stderr);
  }
}

void GOMP_error(const char* msg, std::size_t msglen) {
  if (msg == nullptr) {
    std::fputs("libgomp: fatal error: error directive encountered\n", stderr);
  } else if (msglen == static_cast<std::size_t>(-1)) {
    std::fprintf(stderr, "libgomp: fatal error: error directive encountered: %s\n", msg);
  } else {
    std::fputs("\nlibgomp: fatal error: error directive encountered: ", stderr);
    std::fwrite(msg, 1, msglen, stderr);
    std::fputc('\n', stderr);
  }
  std::exit(EXIT_FAILURE);
}

// GOMP_4.0: #pragma omp cancel <construct> [if(c)]: with OMP_CANCELLATION
// off, nothing is cancelled and false is returned (the construct goes on).
bool GOMP_cancel(int which, bool do_cancel) {
  if (!mote::omp::globals().cancellation) return false;
  if (!do_cancel) return cancelled(which);
  mote::omp::thread_state& st = mote::omp::current();
  switch (which) {
    case kCancelParallel:
      if (st.tm != nullptr) st.tm->cancelled.store(true, std::memory_order_relaxed);
      return true;
    case kCancelLoop:
    case kCancelSections:
      if (st.tm != nullptr) st.tm->ws_cancelled.store(true, std::memory_order_relaxed);
      return true;
    case kCancelTaskgroup: return mote::omp::cancel_taskgroup();
    default: return false;
  }
}

bool GOMP_cancellation_point(int which) {
  if (!mote::omp::globals().cancellation) return false;
  return cancelled(which);
}

int omp_get_max_teams(void);
int omp_get_teams_thread_limit(void);

// GOMP_5.0: #pragma omp teams on the host.
void GOMP_teams_reg(void (*fn)(void*), void* data, unsigned num_teams, unsigned thread_limit, unsigned flags) {
  (void)flags;
  // Each team's thread-limit-var: the clause's, else teams-thread-limit-var
  // (omp_set_teams_thread_limit, OMP_TEAMS_THREAD_LIMIT); the calling task's
  // is restored after, as GNU's library does.
  if (thread_limit == 0) thread_limit = static_cast<unsigned>(std::max(0, omp_get_teams_thread_limit()));
  unsigned saved_limit = 0;
  if (thread_limit != 0) {
    saved_limit = mote::omp::current_icvs().thread_limit;
    mote::omp::writable_icvs().thread_limit = thread_limit > INT_MAX ? UINT_MAX : thread_limit;
  }
  // The league runs one team after another on the calling thread (as GNU's
  // libgomp does on the host), each team's initial thread being that thread;
  // nteams-var (omp_set_num_teams, OMP_NUM_TEAMS) when num_teams is 0, else
  // GNU's 3.
  const int nteams_var = omp_get_max_teams();
  const unsigned n = num_teams != 0 ? num_teams : nteams_var > 0 ? static_cast<unsigned>(nteams_var) : 3;
  mote::omp::thread_state& st = mote::omp::current();
  st.num_teams = static_cast<int>(n);
  for (unsigned k = 0; k < n; ++k) {
    st.team_num = static_cast<int>(k);
    fn(data);
  }
  st.team_num = 0;
  st.num_teams = 1;
  if (thread_limit != 0) mote::omp::writable_icvs().thread_limit = saved_limit;
}

int omp_get_team_num() { return mote::omp::current().team_num; }
int omp_get_num_teams() { return mote::omp::current().num_teams; }

// The calling thread's place in the team tree (omp.h).
int omp_get_thread_num() { return mote::omp::thread_num(); }
int omp_get_num_threads() { return mote::omp::num_threads(); }
int omp_get_level() { return mote::omp::level(); }
int omp_get_active_level() { return mote::omp::active_level(); }
int omp_get_ancestor_thread_num(int level) { return mote::omp::ancestor_thread_num(level); }
int omp_get_team_size(int level) { return mote::omp::team_size(level); }
int omp_in_parallel() { return mote::omp::in_parallel() ? 1 : 0; }

}  // extern "C"

// ---- Target constructs, on the host (there is no offload device) -------------
// A target region runs on the encountering thread as a fresh initial
// thread would (level 0, no team, its own contention group), as GNU's host
// fallback does: on copies of its firstprivate data, with the thread_limit
// clause as its thread-limit-var. The data constructs have nothing to move.
// Dependences are met first; a nowait region runs at once (it may: it is
// then an undeferred task).

namespace {

// The region's firstprivate data (map kind GOMP_MAP_FIRSTPRIVATE): one block
// holding a copy of each, each at the alignment its kind names; hostaddrs is
// pointed at the copies, so that the region's writes stay in them.
struct firstprivate_copies {
  void* memory = nullptr;
  std::size_t align = 1;

  firstprivate_copies(std::size_t mapnum, void** hostaddrs, const std::size_t* sizes,
                      const unsigned short* kinds) {
    const auto copied = [&](std::size_t i) {
      return (kinds[i] & GOMP_MAP_KIND_MASK) == GOMP_MAP_FIRSTPRIVATE && hostaddrs[i] != nullptr;
    };
    const auto align_of = [&](std::size_t i) {
      return std::size_t{1} << (kinds[i] >> GOMP_MAP_ALIGN_SHIFT);
    };
    std::size_t bytes = 0;
    bool any = false;
    for (std::size_t i = 0; i < mapnum; ++i) {
      if (!copied(i)) continue;
      any = true;
      align = std::max(align, align_of(i));
      bytes = (bytes + align_of(i) - 1) / align_of(i) * align_of(i) + sizes[i];
    }
    if (!any) return;
    memory =
        ::operator new(std::max<std::size_t>(bytes, 1), std::align_val_t{align}, std::nothrow);
    if (memory == nullptr) {
      std::fprintf(stderr,
                   "mote: out of memory for the %zu bytes of a target region's firstprivate data\n",
                   bytes);
      std::abort();
    }
    std::size_t at = 0;
    for (std::size_t i = 0; i < mapnum; ++i) {
      if (!copied(i)) continue;
      at = (at + align_of(i) - 1) / align_of(i) * align_of(i);
      void* copy = static_cast<char*>(memory) + at;
      std::memcpy(copy, hostaddrs[i], sizes[i]);
      hostaddrs[i] = copy;
      at += sizes[i];
    }
  }
  ~firstprivate_copies() {
    if (memory != nullptr) ::operator delete(memory, std::align_val_t{align});
  }
  firstprivate_copies(const firstprivate_copies&) = delete;
  firstprivate_copies& operator=(const firstprivate_copies&) = delete;
};

// The thread_limit clause from GOMP_target_ext's args (for every device), as
// thread-limit-var holds it: 0 when there is none (or the host cannot know it).
unsigned target_thread_limit(void* const* args) {
  if (args == nullptr) return 0;
  while (*args != nullptr) {
    const auto id = reinterpret_cast<std::intptr_t>(*args++);
    std::intptr_t value = id >> GOMP_TARGET_ARG_VALUE_SHIFT;
    if ((id & GOMP_TARGET_ARG_SUBSEQUENT_PARAM) != 0)
      value = reinterpret_cast<std::intptr_t>(*args++);
    if ((id & GOMP_TARGET_ARG_DEVICE_MASK) != GOMP_TARGET_ARG_DEVICE_ALL) continue;
    if ((id & GOMP_TARGET_ARG_ID_MASK) != GOMP_TARGET_ARG_THREAD_LIMIT) continue;
    if (value <= 0) return 0;
    return value > INT_MAX ? UINT_MAX : static_cast<unsigned>(value);
  }
  return 0;
}

struct target_region {
  void (*fn)(void*);
  void** hostaddrs;
  unsigned thread_limit;
};

// The region's initial task: the initial ICVs, and the thread_limit clause's.
void run_target_region(void* p) {
  const auto& r = *static_cast<const target_region*>(p);
  if (r.thread_limit != 0) mote::omp::writable_icvs().thread_limit = r.thread_limit;
  r.fn(r.hostaddrs);
}

}  // namespace

extern "C" {

void GOMP_target_ext(int device, void (*fn)(void*), std::size_t mapnum, void** hostaddrs, std::size_t* sizes,
                     unsigned short* kinds, unsigned flags, void** depend, void** args) {
  (void)device, (void)flags;
  // The copies first: firstprivate takes the values the construct met, not
  // those after its dependences are met.
  const firstprivate_copies copies(mapnum, hostaddrs, sizes, kinds);
  if (depend != nullptr) mote::omp::taskwait_depend(depend);
  target_region region{fn, hostaddrs, target_thread_limit(args)};
  mote::omp::run_as_initial_thread(&run_target_region, &region);
}

void GOMP_target(int device, void (*fn)(void*), const void* unused, std::size_t mapnum, void** hostaddrs,
                 std::size_t* sizes, unsigned char* kinds) {
  (void)device, (void)unused, (void)mapnum, (void)sizes, (void)kinds;
  mote::omp::run_as_initial_thread(fn, hostaddrs);
}

void GOMP_target_data_ext(int, std::size_t, void**, std::size_t*, unsigned short*) {}
void GOMP_target_data(int, const void*, std::size_t, void**, std::size_t*, unsigned char*) {}
void GOMP_target_end_data() {}
void GOMP_target_update(int, const void*, std::size_t, void**, std::size_t*, unsigned char*) {}
void GOMP_target_update_ext(int, std::size_t, void**, std::size_t*, unsigned short*, unsigned, void** depend) {
  if (depend != nullptr) mote::omp::taskwait_depend(depend);
}
void GOMP_target_enter_exit_data(int, std::size_t, void**, std::size_t*, unsigned short*, unsigned,
                                 void** depend) {
  if (depend != nullptr) mote::omp::taskwait_depend(depend);
}

// The teams of a target region on the host: gcc loops over the league,
// calling this first with first = true, then until it answers false.
bool GOMP_teams4(unsigned num_teams_low, unsigned num_teams_high, unsigned thread_limit, bool first) {
  (void)num_teams_high;
  mote::omp::thread_state& st = mote::omp::current();
  if (first) {
    if (thread_limit != 0) mote::omp::writable_icvs().thread_limit = thread_limit > INT_MAX ? UINT_MAX : thread_limit;
    st.num_teams = static_cast<int>(num_teams_low == 0 ? 1 : num_teams_low);
    st.team_num = 0;
    return true;
  }
  if (st.team_num + 1 >= st.num_teams) {
    st.team_num = 0;
    st.num_teams = 1;
    return false;
  }
  ++st.team_num;
  return true;
}

void GOMP_teams(unsigned num_teams, unsigned thread_limit) {
  (void)num_teams;
  if (thread_limit != 0) mote::omp::writable_icvs().thread_limit = thread_limit > INT_MAX ? UINT_MAX : thread_limit;
}

}  // extern "C"
#pragma GCC visibility pop
