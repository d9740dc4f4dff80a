/* Compiles only when mote's definitions of the libgomp ABI (abi.hpp) agree
   with gcc's own <omp.h>, from the include directory of the gcc that builds
   this file, which is the omp.h that programs built with `gcc -fopenmp` saw.
   It holds no code: a mismatch stops the build of libgomp.so.1 here.
   CMake names that omp.h by its path (MOTE_GCC_OMP_H). */
#ifdef MOTE_GCC_OMP_H
#if defined(__clang__)
/* clang (clang-tidy reads this file) does not know gcc's __malloc__(dealloc)
   attribute; the types and constants are all this file needs. */
#define __malloc__(...)
#endif
/* Named by its path, it is not a system header: its enumerators past INT_MAX
   are gcc's, not this file's. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include MOTE_GCC_OMP_H
#pragma GCC diagnostic pop
#else
#include <omp.h>
#endif
#include <stdalign.h>

#include "omp/gomp/abi.hpp"

#define MOTE_SAME_LAYOUT(theirs, ours)                                \
  _Static_assert(sizeof(theirs) == sizeof(ours), "size of " #theirs); \
  _Static_assert(alignof(theirs) == alignof(ours), "alignment of " #theirs)
#define MOTE_SAME_VALUE(theirs, ours) \
  _Static_assert((uintptr_t)(theirs) == (uintptr_t)(ours), #theirs " is " #ours)

MOTE_SAME_LAYOUT(omp_lock_t, mote_omp_lock_t);
MOTE_SAME_LAYOUT(omp_nest_lock_t, mote_omp_nest_lock_t);
/* The OpenMP 2.5 forms: an int, and two ints. */
MOTE_SAME_LAYOUT(int, mote_omp_lock_t);
_Static_assert(sizeof(mote_omp_nest_lock_25_t) == 2 * sizeof(int), "OpenMP 2.5 nest lock");
_Static_assert(alignof(mote_omp_nest_lock_25_t) <= alignof(int), "OpenMP 2.5 nest lock");
MOTE_SAME_LAYOUT(omp_depend_t, mote_omp_depend_t);
MOTE_SAME_LAYOUT(omp_event_handle_t, mote_omp_event_handle_t);
MOTE_SAME_LAYOUT(omp_memspace_handle_t, mote_omp_memspace_handle_t);
MOTE_SAME_LAYOUT(omp_allocator_handle_t, mote_omp_allocator_handle_t);
MOTE_SAME_LAYOUT(omp_alloctrait_t, mote_omp_alloctrait_t);
_Static_assert(offsetof(omp_alloctrait_t, value) == offsetof(mote_omp_alloctrait_t, value),
               "omp_alloctrait_t.value");
/* The enums passed by value are int-sized (the ABI passes them as int). */
_Static_assert(sizeof(omp_sched_t) == sizeof(int), "omp_sched_t");
_Static_assert(sizeof(omp_proc_bind_t) == sizeof(int), "omp_proc_bind_t");
_Static_assert(sizeof(omp_sync_hint_t) == sizeof(int), "omp_sync_hint_t");
_Static_assert(sizeof(omp_pause_resource_t) == sizeof(int), "omp_pause_resource_t");
_Static_assert(sizeof(omp_alloctrait_key_t) == sizeof(int), "omp_alloctrait_key_t");

MOTE_SAME_VALUE(omp_sched_static, MOTE_OMP_SCHED_STATIC);
MOTE_SAME_VALUE(omp_sched_dynamic, MOTE_OMP_SCHED_DYNAMIC);
MOTE_SAME_VALUE(omp_sched_guided, MOTE_OMP_SCHED_GUIDED);
MOTE_SAME_VALUE(omp_sched_auto, MOTE_OMP_SCHED_AUTO);
MOTE_SAME_VALUE(omp_sched_monotonic, MOTE_OMP_SCHED_MONOTONIC);
/* The GFS_* codes are the omp_sched_t numbering. */
MOTE_SAME_VALUE(omp_sched_static, GFS_STATIC);
MOTE_SAME_VALUE(omp_sched_dynamic, GFS_DYNAMIC);
MOTE_SAME_VALUE(omp_sched_guided, GFS_GUIDED);
MOTE_SAME_VALUE(omp_sched_auto, GFS_AUTO);
MOTE_SAME_VALUE(omp_sched_monotonic, GFS_MONOTONIC);

MOTE_SAME_VALUE(omp_proc_bind_false, MOTE_OMP_PROC_BIND_FALSE);
MOTE_SAME_VALUE(omp_proc_bind_true, MOTE_OMP_PROC_BIND_TRUE);
MOTE_SAME_VALUE(omp_proc_bind_primary, MOTE_OMP_PROC_BIND_PRIMARY);
MOTE_SAME_VALUE(omp_proc_bind_master, MOTE_OMP_PROC_BIND_PRIMARY);
MOTE_SAME_VALUE(omp_proc_bind_close, MOTE_OMP_PROC_BIND_CLOSE);
MOTE_SAME_VALUE(omp_proc_bind_spread, MOTE_OMP_PROC_BIND_SPREAD);
_Static_assert(omp_proc_bind_spread <= GOMP_PARALLEL_PROC_BIND_MASK, "proc_bind in flags");

MOTE_SAME_VALUE(omp_sync_hint_none, MOTE_OMP_SYNC_HINT_NONE);
MOTE_SAME_VALUE(omp_sync_hint_uncontended, MOTE_OMP_SYNC_HINT_UNCONTENDED);
MOTE_SAME_VALUE(omp_sync_hint_contended, MOTE_OMP_SYNC_HINT_CONTENDED);
MOTE_SAME_VALUE(omp_sync_hint_nonspeculative, MOTE_OMP_SYNC_HINT_NONSPECULATIVE);
MOTE_SAME_VALUE(omp_sync_hint_speculative, MOTE_OMP_SYNC_HINT_SPECULATIVE);
MOTE_SAME_VALUE(omp_lock_hint_none, MOTE_OMP_SYNC_HINT_NONE);
MOTE_SAME_VALUE(omp_lock_hint_uncontended, MOTE_OMP_SYNC_HINT_UNCONTENDED);
MOTE_SAME_VALUE(omp_lock_hint_contended, MOTE_OMP_SYNC_HINT_CONTENDED);
MOTE_SAME_VALUE(omp_lock_hint_nonspeculative, MOTE_OMP_SYNC_HINT_NONSPECULATIVE);
MOTE_SAME_VALUE(omp_lock_hint_speculative, MOTE_OMP_SYNC_HINT_SPECULATIVE);

MOTE_SAME_VALUE(omp_pause_soft, MOTE_OMP_PAUSE_SOFT);
MOTE_SAME_VALUE(omp_pause_hard, MOTE_OMP_PAUSE_HARD);

MOTE_SAME_VALUE(omp_default_mem_space, MOTE_OMP_DEFAULT_MEM_SPACE);
MOTE_SAME_VALUE(omp_large_cap_mem_space, MOTE_OMP_LARGE_CAP_MEM_SPACE);
MOTE_SAME_VALUE(omp_const_mem_space, MOTE_OMP_CONST_MEM_SPACE);
MOTE_SAME_VALUE(omp_high_bw_mem_space, MOTE_OMP_HIGH_BW_MEM_SPACE);
MOTE_SAME_VALUE(omp_low_lat_mem_space, MOTE_OMP_LOW_LAT_MEM_SPACE);

MOTE_SAME_VALUE(omp_null_allocator, MOTE_OMP_NULL_ALLOCATOR);
MOTE_SAME_VALUE(omp_default_mem_alloc, MOTE_OMP_DEFAULT_MEM_ALLOC);
MOTE_SAME_VALUE(omp_large_cap_mem_alloc, MOTE_OMP_LARGE_CAP_MEM_ALLOC);
MOTE_SAME_VALUE(omp_const_mem_alloc, MOTE_OMP_CONST_MEM_ALLOC);
MOTE_SAME_VALUE(omp_high_bw_mem_alloc, MOTE_OMP_HIGH_BW_MEM_ALLOC);
MOTE_SAME_VALUE(omp_low_lat_mem_alloc, MOTE_OMP_LOW_LAT_MEM_ALLOC);
MOTE_SAME_VALUE(omp_cgroup_mem_alloc, MOTE_OMP_CGROUP_MEM_ALLOC);
MOTE_SAME_VALUE(omp_pteam_mem_alloc, MOTE_OMP_PTEAM_MEM_ALLOC);
MOTE_SAME_VALUE(omp_thread_mem_alloc, MOTE_OMP_THREAD_MEM_ALLOC);

MOTE_SAME_VALUE(omp_atk_sync_hint, MOTE_OMP_ATK_SYNC_HINT);
MOTE_SAME_VALUE(omp_atk_alignment, MOTE_OMP_ATK_ALIGNMENT);
MOTE_SAME_VALUE(omp_atk_access, MOTE_OMP_ATK_ACCESS);
MOTE_SAME_VALUE(omp_atk_pool_size, MOTE_OMP_ATK_POOL_SIZE);
MOTE_SAME_VALUE(omp_atk_fallback, MOTE_OMP_ATK_FALLBACK);
MOTE_SAME_VALUE(omp_atk_fb_data, MOTE_OMP_ATK_FB_DATA);
MOTE_SAME_VALUE(omp_atk_pinned, MOTE_OMP_ATK_PINNED);
MOTE_SAME_VALUE(omp_atk_partition, MOTE_OMP_ATK_PARTITION);

MOTE_SAME_VALUE(omp_atv_default, MOTE_OMP_ATV_DEFAULT);
MOTE_SAME_VALUE(omp_atv_false, MOTE_OMP_ATV_FALSE);
MOTE_SAME_VALUE(omp_atv_true, MOTE_OMP_ATV_TRUE);
MOTE_SAME_VALUE(omp_atv_contended, MOTE_OMP_ATV_CONTENDED);
MOTE_SAME_VALUE(omp_atv_uncontended, MOTE_OMP_ATV_UNCONTENDED);
MOTE_SAME_VALUE(omp_atv_serialized, MOTE_OMP_ATV_SERIALIZED);
MOTE_SAME_VALUE(omp_atv_private, MOTE_OMP_ATV_PRIVATE);
MOTE_SAME_VALUE(omp_atv_all, MOTE_OMP_ATV_ALL);
MOTE_SAME_VALUE(omp_atv_thread, MOTE_OMP_ATV_THREAD);
MOTE_SAME_VALUE(omp_atv_pteam, MOTE_OMP_ATV_PTEAM);
MOTE_SAME_VALUE(omp_atv_cgroup, MOTE_OMP_ATV_CGROUP);
MOTE_SAME_VALUE(omp_atv_default_mem_fb, MOTE_OMP_ATV_DEFAULT_MEM_FB);
MOTE_SAME_VALUE(omp_atv_null_fb, MOTE_OMP_ATV_NULL_FB);
MOTE_SAME_VALUE(omp_atv_abort_fb, MOTE_OMP_ATV_ABORT_FB);
MOTE_SAME_VALUE(omp_atv_allocator_fb, MOTE_OMP_ATV_ALLOCATOR_FB);
MOTE_SAME_VALUE(omp_atv_environment, MOTE_OMP_ATV_ENVIRONMENT);
MOTE_SAME_VALUE(omp_atv_nearest, MOTE_OMP_ATV_NEAREST);
MOTE_SAME_VALUE(omp_atv_blocked, MOTE_OMP_ATV_BLOCKED);
MOTE_SAME_VALUE(omp_atv_interleaved, MOTE_OMP_ATV_INTERLEAVED);
