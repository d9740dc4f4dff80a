// Placeholder for the ICVs (replaced by the environment part, same fields).
#pragma once
#include <cstddef>
#include "mote/export.hpp"
namespace mote::omp {
struct task_icvs {
  unsigned nthreads = 2;
  const unsigned* nthreads_rest = nullptr;
  unsigned nthreads_rest_len = 0;
  bool dyn = false;
  int run_sched = 1;
  int run_chunk = 0;
  int bind = 0;
  const int* bind_rest = nullptr;
  unsigned bind_rest_len = 0;
  unsigned thread_limit = 0x7fffffff;
  unsigned max_active_levels = 1;
  int default_device = 0;
};
struct global_icvs {
  bool cancellation = false;
  int max_task_priority = 0;
  std::size_t stacksize = 0;
  int wait_policy = -1;
  unsigned long long spincount = 0;
  bool spincount_set = false;
  unsigned num_procs = 2;
  task_icvs initial;
};
MOTE_API const global_icvs& globals();
MOTE_API task_icvs& thread_icvs();
}  // namespace mote::omp
