// libgomp's entry points for parallel regions, barriers, cancellation and
// host teams, on mote's OpenMP model (src/omp/team.hpp).
#include <cstdint>

#include "omp/icv.hpp"
#include "omp/tasks.hpp"
#include "omp/team.hpp"

namespace {

// GOMP_cancel's `which` (gcc's GOMP_CANCEL_*).
constexpr int kCancelParallel = 1;
constexpr int kCancelLoop = 2;
constexpr int kCancelSections = 4;
constexpr int kCancelTaskgroup = 8;

// Host teams (GOMP_teams_reg): the league runs one team after another on the
// calling thread, each team's initial thread being that thread.
constinit thread_local int tl_team_num = 0;
constinit thread_local int tl_num_teams = 1;

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

extern "C" {

// GOMP_4.0: #pragma omp parallel [num_threads(n)] [if(c)] [proc_bind(b)].
// gcc passes num_threads 1 for a false if clause; flags hold proc_bind.
void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags) {
  mote::omp::parallel(fn, data, num_threads, flags);
}

void GOMP_barrier() { (void)mote::omp::barrier(); }

// GOMP_4.0: a barrier in a region that may be cancelled: true when it was.
bool GOMP_barrier_cancel() { return mote::omp::barrier(); }

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

// GOMP_5.0: #pragma omp teams on the host.
void GOMP_teams_reg(void (*fn)(void*), void* data, unsigned num_teams, unsigned thread_limit, unsigned flags) {
  (void)flags;
  mote::omp::task_icvs& icv = mote::omp::thread_icvs();
  const mote::omp::task_icvs saved = icv;
  if (thread_limit != 0) icv.thread_limit = thread_limit;
  const unsigned n = num_teams == 0 ? 1 : num_teams;
  tl_num_teams = static_cast<int>(n);
  for (unsigned k = 0; k < n; ++k) {
    tl_team_num = static_cast<int>(k);
    fn(data);
  }
  tl_team_num = 0;
  tl_num_teams = 1;
  icv = saved;
}

int omp_get_team_num() { return tl_team_num; }
int omp_get_num_teams() { return tl_num_teams; }

}  // extern "C"
