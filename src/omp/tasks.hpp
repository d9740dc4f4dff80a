// OpenMP's explicit tasks on mote: GOMP_task's records, taskwait, taskgroups,
// dependences through mote::dataflow, detach, taskloop. tasks.cpp has the
// protocol; docs/openmp.md the mapping.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "mote/export.hpp"
#include "omp/team.hpp"

namespace mote::omp {

// A taskgroup region: the tasks made in it and their descendants are
// counted here (each task in the innermost group open where it was made;
// a task that opens a group inside finishes after it, so the outer count
// covers it).
struct taskgroup {
  std::atomic<std::uint64_t> count{0};
  taskgroup* outer = nullptr;
  // The waiter's park word while taskgroup_end sleeps (as omp_task::waiter).
  std::atomic<std::atomic<std::uint32_t>*> waiter{nullptr};
  std::atomic<bool> cancelled{false};
  // A worksharing construct's group (`for reduction(task, ...)`): cancel
  // taskgroup inside it cancels `enclosing`, and its tasks are cancelled
  // with `enclosing` (as GNU's library does).
  bool workshare = false;
  // The group the opening task was counted in, or had open, when this one
  // opened (it outlives this one), or nullptr.
  taskgroup* enclosing = nullptr;
  // Task reductions (gcc's registration arrays, newest first, chained
  // through word 4): inherited from the enclosing group when it opens.
  std::uintptr_t* reductions = nullptr;
};

// GOMP_task's arguments, as gcc 12 passes them.
struct task_args {
  void (*fn)(void*);
  void* data;
  void (*cpyfn)(void*, void*);
  long arg_size;
  long arg_align;
  bool if_clause;
  unsigned flags;
  void** depend;
  int priority;
  void* detach;
  // data holds objects made by a copy constructor (cpyfn, or taskloop's copy
  // through it) whose destructors run at the end of fn: the body runs even in
  // a cancelled taskgroup or region (as GNU's library runs it).
  bool copies = false;
};

MOTE_API void task(const task_args& a);
// task() for GOMP_task's if(0) case without depend or detach (flags: GOMP's,
// only final is read): the arguments in registers, no task_args built.
MOTE_API void task_undeferred(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long arg_size,
                              long arg_align, unsigned flags);
// task() for the usual case, if(1) without depend, detach or priority and
// no copy-constructed arguments (what GOMP_task calls for it, and task()
// itself): the arguments in registers; the tasks that run at once (a
// measured short site, a team of one, a final parent) run without a
// task_args, the others go on to their placement.
MOTE_API void task_plain(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long arg_size, long arg_align,
                         unsigned flags);
MOTE_API void taskwait();
MOTE_API void taskwait_depend(void** depend);
MOTE_API void taskyield();
MOTE_API void taskgroup_start();
MOTE_API void taskgroup_end();
MOTE_API bool in_final() noexcept;
MOTE_API void fulfill_event(void* event);

// GOMP_taskloop / GOMP_taskloop_ull: the iteration space split into tasks,
// each with its own copy of data whose first two words are set to its
// [start, end) (longs, or unsigned long longs for the _ull form).
template <class T>
void taskloop(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long arg_size, long arg_align,
              unsigned flags, unsigned long num_tasks, int priority, T start, T end, T step);
extern template MOTE_API void taskloop<long>(void (*)(void*), void*, void (*)(void*, void*), long, long, unsigned,
                                             unsigned long, int, long, long, long);
extern template MOTE_API void taskloop<unsigned long long>(void (*)(void*), void*, void (*)(void*, void*), long,
                                                           long, unsigned, unsigned long, int, unsigned long long,
                                                           unsigned long long, unsigned long long);

// Cancellation (GOMP_cancel / GOMP_cancellation_point for taskgroups and
// parallel regions): true when the construct is cancelled.
MOTE_API bool cancel_taskgroup();
MOTE_API bool taskgroup_cancelled() noexcept;

// Task reductions (GOMP_taskgroup_reduction_register and friends): gcc lays
// out `data` (count, size per thread, alignment, allocator, next, and one
// {address, offset, -} triple per variable); mote gives each thread of the
// team its own zeroed copy of the block, and remap points a task's accesses
// at its thread's copy. gcc's code combines the copies after the group.
MOTE_API void taskgroup_reduction_register(std::uintptr_t* data);
MOTE_API void taskgroup_reduction_unregister(std::uintptr_t* data);
MOTE_API void task_reduction_remap(std::size_t cnt, std::size_t cntorig, void** ptrs);
// A worksharing construct's task reductions: its taskgroup opens on every
// thread; the first thread to reach the construct registers data, the
// others share its copies (orig: the first thread's array).
MOTE_API void workshare_taskgroup_start();
MOTE_API void workshare_reduction_register(std::uintptr_t* data, std::uintptr_t* orig);
MOTE_API void workshare_task_reduction_unregister(bool cancelled);
// GOMP_parallel_reductions: registers the region's reductions for the
// team's real size, which it returns.
MOTE_API unsigned parallel_reductions(void (*fn)(void*), void* data, unsigned nthreads, unsigned flags);

// The end of a thread's implicit task (after the region's end barrier): its
// children's dependence scope, if it made one, is finished.
void end_implicit_task(thread_state& st);

}  // namespace mote::omp
