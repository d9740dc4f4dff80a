// The data-environment ICVs of OpenMP tasks (icv.hpp): each task has its
// own, its creator's as they were when it was made.
//
// Copying the ICVs into every task would cost each GOMP_task a cache line of
// stores and its record a line more, for values that almost no task
// changes. So a task points at its ICVs instead, and copies them only when
// it changes them (copy on write):
//   - a region's implicit tasks point at team::icvs, which lives as long as
//     the region's tasks; a thread in no region at globals().initial (null
//     pointer: see current_icvs);
//   - a child points where its creator points: one pointer copied, and, when
//     the creator's ICVs are in a block of their own, one reference more on
//     the block (icv_block::holders);
//   - omp_set_* writes the task's own block when it is the block's only
//     holder, and otherwise makes a new block with the task as its holder (a
//     child made before the change keeps the old values, as OpenMP says).
// The last holder of a block frees it, when its task record ends.
#include <cstdio>
#include <cstdlib>
#include <new>

#include "omp/icv.hpp"
#include "omp/team.hpp"

namespace mote::omp {

void omp_task::drop_icvs() noexcept {
  icv_block* b = icv_held;
  if (b == nullptr) return;
  icv_held = nullptr;
  icv = nullptr;
  // acq_rel: see icv_block::holders.
  if (b->holders.fetch_sub(1, std::memory_order_acq_rel) == 1) delete b;
}

const task_icvs& current_icvs() noexcept {
  const task_icvs* v = current().task->icv;
  return v != nullptr ? *v : globals().initial;
}

task_icvs& writable_icvs() noexcept {
  omp_task& t = *current().task;
  // Acquire: a child that held the block and let it go read it before; its
  // release (drop_icvs) orders that before our writes.
  if (t.icv_held != nullptr && t.icv_held->holders.load(std::memory_order_acquire) == 1) {
    return t.icv_held->values;
  }
  auto* b = new (std::nothrow) icv_block{current_icvs()};  // holders: 1, this task
  if (b == nullptr) {
    std::fputs("mote: out of memory for a task's copy of its ICVs (omp_set_*)\n", stderr);
    std::abort();
  }
  t.drop_icvs();
  t.icv_held = b;
  t.icv = &b->values;
  return b->values;
}

}  // namespace mote::omp
