// The data-environment ICVs (nthreads-var, dyn-var, run-sched-var,
// max-active-levels-var, default-device-var, ...) belong to tasks: a task
// starts with its creator's values as they were when it was made, its
// omp_set_* calls change its own copy only, and a thread's implicit task
// keeps its values whatever the tasks it runs do. def-allocator-var belongs
// to implicit tasks: a region's threads start with the encountering
// thread's, and one thread's omp_set_default_allocator changes no other's.
#include <omp.h>
#include <string.h>

#include "omp_check.h"

// As GNU's testsuite (libgomp.c/icv-1.c): an undeferred task's change stays
// in it.
static void undeferred(void) {
  omp_set_num_threads(4);
  int err = 0;
#pragma omp parallel num_threads(1) reduction(| : err)
  {
    err |= omp_get_max_threads() != 4;
    omp_set_num_threads(6);
#pragma omp task if (0) shared(err)
    {
      err |= (omp_get_max_threads() != 6) << 1;
      omp_set_num_threads(5);
      omp_set_dynamic(1);
      omp_set_schedule(omp_sched_guided, 7);
      err |= (omp_get_max_threads() != 5) << 2;
    }
    err |= (omp_get_max_threads() != 6) << 3;
    err |= (omp_get_dynamic() != 0) << 4;
    omp_sched_t kind;
    int chunk;
    omp_get_schedule(&kind, &chunk);
    err |= (kind == omp_sched_guided) << 5;
  }
  CHECK(err == 0, "an undeferred task's ICVs leaked into its parent (error bits %#x)", err);
  CHECK(omp_get_max_threads() == 4, "the region changed the initial task's nthreads-var: %d",
        omp_get_max_threads());
}

// Deferred tasks: each sees its creator's values as they were at its
// creation, not the values of the thread that runs it, and its own changes
// leave its creator and the threads alone.
static void deferred(int team) {
  enum { kTasks = 200 };
  static int seen_threads[kTasks], seen_levels[kTasks], seen_device[kTasks], own[kTasks];
  omp_set_num_threads(3);
  omp_set_max_active_levels(1);
  int threads_after = 0, bad_threads = 0, single_thread = -1;
#pragma omp parallel num_threads(team) reduction(+ : bad_threads)
  {
#pragma omp single
    {
      single_thread = omp_get_thread_num();
      for (int k = 0; k < kTasks; ++k) {
        omp_set_num_threads(10 + k);
        omp_set_max_active_levels(1 + k % 5);
        omp_set_default_device(k % 3);
#pragma omp task firstprivate(k)
        {
          seen_threads[k] = omp_get_max_threads();
          seen_levels[k] = omp_get_max_active_levels();
          seen_device[k] = omp_get_default_device();
          omp_set_num_threads(1000 + k);
          omp_set_max_active_levels(7);
          omp_set_default_device(2);
          own[k] = omp_get_max_threads() == 1000 + k && omp_get_max_active_levels() == 7;
        }
      }
#pragma omp taskwait
      threads_after = omp_get_max_threads();
    }
    // The single's barrier: every task has run. The other threads' implicit
    // tasks keep the region's value (3, inherited), whatever ran on them.
    if (omp_get_thread_num() != single_thread) bad_threads += omp_get_max_threads() != 3;
  }
  for (int k = 0; k < kTasks; ++k) {
    CHECK(seen_threads[k] == 10 + k, "task %d: nthreads-var %d, its creator's was %d when it was made", k,
          seen_threads[k], 10 + k);
    CHECK(seen_levels[k] == 1 + k % 5, "task %d: max-active-levels-var %d, its creator's was %d", k,
          seen_levels[k], 1 + k % 5);
    CHECK(seen_device[k] == k % 3, "task %d: default-device-var %d, its creator's was %d", k, seen_device[k],
          k % 3);
    CHECK(own[k], "task %d did not see its own omp_set_* changes", k);
  }
  CHECK(threads_after == 10 + kTasks - 1, "the tasks changed their creator's nthreads-var: %d, want %d",
        threads_after, 10 + kTasks - 1);
  CHECK(bad_threads == 0, "%d threads' implicit tasks took a value a task they ran had set", bad_threads);
  CHECK(omp_get_max_threads() == 3, "the initial task's nthreads-var changed: %d", omp_get_max_threads());
  omp_set_max_active_levels(1);
}

// A region opened in a task starts from that task's values.
static void nested_from_task(void) {
  int inner = -1, inner_dyn = -1;
#pragma omp parallel num_threads(2)
#pragma omp single
  {
#pragma omp task shared(inner, inner_dyn)
    {
      omp_set_num_threads(5);
      omp_set_dynamic(1);
#pragma omp parallel num_threads(1)
      {
        inner = omp_get_max_threads();
        inner_dyn = omp_get_dynamic();
      }
    }
  }
  CHECK(inner == 5, "a region opened in a task: nthreads-var %d, the task's was 5", inner);
  CHECK(inner_dyn == 1, "a region opened in a task: dyn-var %d, the task's was 1", inner_dyn);
  CHECK(omp_get_dynamic() == 0, "a task's omp_set_dynamic reached the initial task");
}

// def-allocator-var: every thread of a region starts with the encountering
// thread's; a thread's change is its own.
static void default_allocator(void) {
  const omp_alloctrait_t traits[] = {{omp_atk_alignment, 64}};
  omp_allocator_handle_t a = omp_init_allocator(omp_default_mem_space, 1, traits);
  omp_allocator_handle_t b = omp_init_allocator(omp_default_mem_space, 1, traits);
  CHECK(a != omp_null_allocator && b != omp_null_allocator, "omp_init_allocator failed");
  omp_set_default_allocator(a);
  int wrong_start = 0, wrong_after = 0, wrong_nested = 0;
#pragma omp parallel num_threads(2) reduction(+ : wrong_start, wrong_after, wrong_nested)
  {
    wrong_start += omp_get_default_allocator() != a;
    void* p = omp_alloc(16, omp_null_allocator);
    wrong_start += p == NULL || ((uintptr_t)p & 63) != 0;
    omp_free(p, omp_null_allocator);
#pragma omp barrier
    if (omp_get_thread_num() == 1) omp_set_default_allocator(b);
#pragma omp barrier
    wrong_after += omp_get_default_allocator() != (omp_get_thread_num() == 1 ? b : a);
#pragma omp parallel num_threads(1) reduction(+ : wrong_nested)
    wrong_nested += omp_get_default_allocator() != (omp_get_ancestor_thread_num(1) == 1 ? b : a);
  }
  CHECK(wrong_start == 0, "%d threads did not start the region with the encountering thread's default allocator",
        wrong_start);
  CHECK(wrong_after == 0, "%d threads saw another thread's omp_set_default_allocator", wrong_after);
  CHECK(wrong_nested == 0, "%d nested regions did not start with their encountering thread's allocator",
        wrong_nested);
  CHECK(omp_get_default_allocator() == a, "the region changed the initial thread's default allocator");
  omp_set_default_allocator(omp_default_mem_alloc);
  omp_destroy_allocator(a);
  omp_destroy_allocator(b);
}

int main(int argc, char** argv) {
  const char* only = argc > 1 ? argv[1] : NULL;  // one part only: undeferred, deferred, nested, allocator
  const int team = omp_get_max_threads();        // OMP_NUM_THREADS
  if (only == NULL || strcmp(only, "undeferred") == 0) undeferred();
  if (only == NULL || strcmp(only, "deferred") == 0) deferred(team);
  if (only == NULL || strcmp(only, "nested") == 0) nested_from_task();
  if (only == NULL || strcmp(only, "allocator") == 0) default_allocator();
  printf("task_icvs: ok\n");
  return 0;
}
