// libgomp's entry points for explicit tasks, on mote's OpenMP model
// (src/omp/tasks.hpp).
#include <cstddef>
#include <cstdint>

#include "omp/gomp/abi.hpp"
#include "omp/tasks.hpp"

// The entry points are exported (the rest of the library is hidden; the
// version script names them).
#pragma GCC visibility push(default)
extern "C" {

// GOMP_task as gcc 12 emits it (GOMP_5.0 adds detach; older binaries call
// the same symbol with fewer arguments and flags that never name them).
void GOMP_task(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long arg_size, long arg_align,
               bool if_clause, unsigned flags, void** depend, int priority, void* detach) {
  constexpr unsigned kFlagDepend = GOMP_TASK_FLAG_DEPEND, kFlagPriority = GOMP_TASK_FLAG_PRIORITY,
                     kFlagDetach = GOMP_TASK_FLAG_DETACH;
  if (!if_clause && (flags & (kFlagDepend | kFlagDetach)) == 0) {
    // The usual if(0) task (a cut-off): runs here, its arguments passed on as they came.
    mote::omp::task_undeferred(fn, data, cpyfn, arg_size, arg_align, flags);
    return;
  }
  if (if_clause && (flags & (kFlagDepend | kFlagDetach | kFlagPriority)) == 0) {
    // The usual task: its arguments passed on as they came.
    mote::omp::task_plain(fn, data, cpyfn, arg_size, arg_align, flags);
    return;
  }
  const mote::omp::task_args a{fn,
                               data,
                               cpyfn,
                               arg_size,
                               arg_align,
                               if_clause,
                               flags,
                               (flags & kFlagDepend) != 0 ? depend : nullptr,
                               (flags & kFlagPriority) != 0 ? priority : 0,
                               (flags & kFlagDetach) != 0 ? detach : nullptr};
  mote::omp::task(a);
}

void GOMP_taskwait() { mote::omp::taskwait(); }
void GOMP_taskwait_depend(void** depend) { mote::omp::taskwait_depend(depend); }
void GOMP_taskyield() { mote::omp::taskyield(); }
void GOMP_taskgroup_start() { mote::omp::taskgroup_start(); }
void GOMP_taskgroup_end() { mote::omp::taskgroup_end(); }

void GOMP_taskloop(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long arg_size, long arg_align,
                   unsigned flags, unsigned long num_tasks, int priority, long start, long end, long step) {
  mote::omp::taskloop<long>(fn, data, cpyfn, arg_size, arg_align, flags, num_tasks, priority, start, end, step);
}

void GOMP_taskloop_ull(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long arg_size, long arg_align,
                       unsigned flags, unsigned long num_tasks, int priority, unsigned long long start,
                       unsigned long long end, unsigned long long step) {
  mote::omp::taskloop<unsigned long long>(fn, data, cpyfn, arg_size, arg_align, flags, num_tasks, priority, start,
                                          end, step);
}

int omp_in_final() { return mote::omp::in_final() ? 1 : 0; }
void omp_fulfill_event(void* event) { mote::omp::fulfill_event(event); }

}  // extern "C"
#pragma GCC visibility pop

// The entry points are exported (the rest of the library is hidden; the
// version script names them).
#pragma GCC visibility push(default)
extern "C" {

void GOMP_taskgroup_reduction_register(std::uintptr_t* data) { mote::omp::taskgroup_reduction_register(data); }
void GOMP_taskgroup_reduction_unregister(std::uintptr_t* data) { mote::omp::taskgroup_reduction_unregister(data); }
void GOMP_task_reduction_remap(std::size_t cnt, std::size_t cntorig, void** ptrs) {
  mote::omp::task_reduction_remap(cnt, cntorig, ptrs);
}
void GOMP_workshare_task_reduction_unregister(bool cancelled) {
  mote::omp::workshare_task_reduction_unregister(cancelled);
}
unsigned GOMP_parallel_reductions(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags) {
  return mote::omp::parallel_reductions(fn, data, num_threads, flags);
}

}  // extern "C"
#pragma GCC visibility pop
