/* The binary interface between code that `gcc -fopenmp` (gcc 12) emits and
   libgomp.so.1: the types of omp.h as mote defines them, the constants gcc
   passes to the GOMP_* entry points, and the layout of the arrays it builds.

   Valid C and C++: layout_check.c includes it beside gcc's own <omp.h> and
   static_asserts that every size, alignment and value here matches gcc's, so
   a change of either side fails the build. The names are mote's (prefixed),
   never omp.h's, so that the two can meet in one translation unit.

   Where a value comes from: omp.h (gcc 12) for the omp_* types; gcc's
   include/gomp-constants.h for GOMP_TASK_FLAG_* and GOMP_DEPEND_*; the
   arguments gcc 12 passes (read from `gcc -fopenmp -S`) for the schedule,
   cancel and proc_bind codes. */
#ifndef MOTE_OMP_GOMP_ABI_HPP
#define MOTE_OMP_GOMP_ABI_HPP

#include <stddef.h>
#include <stdint.h>

/* What libgomp.so.1 exports: the entry points are default-visibility in an
   otherwise hidden build (the version script names them). */
#define MOTE_GOMP_EXPORT __attribute__((visibility("default")))

/* Binds the function `internal` to the symbol name@node (one '@': a
   compatibility version) or name@@node (two: the default). For the names
   libgomp exports in two versions; the internal name is the one
   tools/omp/gen_stubs.py gives the stub, mote_gomp_<name>_<node with _>:
     MOTE_GOMP_VERSIONED(omp_set_lock, "OMP_1.0", mote_gomp_omp_set_lock_OMP_1_0, "@")
   after the definition of mote_gomp_omp_set_lock_OMP_1_0. */
#define MOTE_GOMP_VERSIONED(name, node, internal, binding) \
  __asm__(".symver " #internal ", " #name binding node)

#ifdef __cplusplus
extern "C" {
#endif

/* ---- omp.h's types -------------------------------------------------------- */

/* omp_lock_t: 4 bytes, 4-aligned. mote keeps one futex word in it
   (src/omp/gomp/locks.cpp). The OpenMP 2.5 lock (omp_*_lock@OMP_1.0) is the
   same size: an int. */
typedef struct mote_omp_lock {
  uint32_t storage;
} mote_omp_lock_t;

/* omp_nest_lock_t: 8 + sizeof(void*) bytes, pointer-aligned: the lock word,
   the nesting count and the owner. */
typedef struct mote_omp_nest_lock {
  uint32_t word;
  uint32_t count;
  void* owner;
} mote_omp_nest_lock_t;

/* The OpenMP 2.5 nest lock (omp_*_nest_lock@OMP_1.0): programs built against
   it reserved two ints, so it lives in 8 bytes, 4-aligned. */
typedef struct mote_omp_nest_lock_25 {
  uint32_t word;
  uint32_t count;
} mote_omp_nest_lock_25_t;

/* omp_depend_t (a depobj): the address and the GOMP_DEPEND_* kind. */
typedef struct mote_omp_depend {
  void* addr;
  uintptr_t kind;
} mote_omp_depend_t;

/* omp_event_handle_t: an enum as wide as a pointer (the task behind a detach
   clause). */
typedef uintptr_t mote_omp_event_handle_t;

/* omp_sched_t: an int-sized enum; the monotonic modifier is bit 31. The GFS_*
   codes below share the numbering. */
#define MOTE_OMP_SCHED_STATIC 1
#define MOTE_OMP_SCHED_DYNAMIC 2
#define MOTE_OMP_SCHED_GUIDED 3
#define MOTE_OMP_SCHED_AUTO 4
#define MOTE_OMP_SCHED_MONOTONIC 0x80000000u

/* omp_proc_bind_t (int-sized). */
#define MOTE_OMP_PROC_BIND_FALSE 0
#define MOTE_OMP_PROC_BIND_TRUE 1
#define MOTE_OMP_PROC_BIND_PRIMARY 2 /* omp_proc_bind_master too */
#define MOTE_OMP_PROC_BIND_CLOSE 3
#define MOTE_OMP_PROC_BIND_SPREAD 4

/* omp_sync_hint_t, alias omp_lock_hint_t (int-sized). */
#define MOTE_OMP_SYNC_HINT_NONE 0
#define MOTE_OMP_SYNC_HINT_UNCONTENDED 1
#define MOTE_OMP_SYNC_HINT_CONTENDED 2
#define MOTE_OMP_SYNC_HINT_NONSPECULATIVE 4
#define MOTE_OMP_SYNC_HINT_SPECULATIVE 8

/* omp_pause_resource_t (int-sized). */
#define MOTE_OMP_PAUSE_SOFT 1
#define MOTE_OMP_PAUSE_HARD 2

/* omp_memspace_handle_t and omp_allocator_handle_t: enums as wide as a
   pointer. A handle above the last predefined allocator is the address of an
   allocator made by omp_init_allocator. */
typedef uintptr_t mote_omp_memspace_handle_t;
typedef uintptr_t mote_omp_allocator_handle_t;
#define MOTE_OMP_DEFAULT_MEM_SPACE 0
#define MOTE_OMP_LARGE_CAP_MEM_SPACE 1
#define MOTE_OMP_CONST_MEM_SPACE 2
#define MOTE_OMP_HIGH_BW_MEM_SPACE 3
#define MOTE_OMP_LOW_LAT_MEM_SPACE 4

#define MOTE_OMP_NULL_ALLOCATOR 0
#define MOTE_OMP_DEFAULT_MEM_ALLOC 1
#define MOTE_OMP_LARGE_CAP_MEM_ALLOC 2
#define MOTE_OMP_CONST_MEM_ALLOC 3
#define MOTE_OMP_HIGH_BW_MEM_ALLOC 4
#define MOTE_OMP_LOW_LAT_MEM_ALLOC 5
#define MOTE_OMP_CGROUP_MEM_ALLOC 6
#define MOTE_OMP_PTEAM_MEM_ALLOC 7
#define MOTE_OMP_THREAD_MEM_ALLOC 8
#define MOTE_OMP_LAST_PREDEFINED_ALLOC MOTE_OMP_THREAD_MEM_ALLOC

/* omp_alloctrait_t: an int-sized key and a pointer-wide value. */
typedef struct mote_omp_alloctrait {
  int key;
  uintptr_t value;
} mote_omp_alloctrait_t;

/* omp_alloctrait_key_t. */
#define MOTE_OMP_ATK_SYNC_HINT 1
#define MOTE_OMP_ATK_ALIGNMENT 2
#define MOTE_OMP_ATK_ACCESS 3
#define MOTE_OMP_ATK_POOL_SIZE 4
#define MOTE_OMP_ATK_FALLBACK 5
#define MOTE_OMP_ATK_FB_DATA 6
#define MOTE_OMP_ATK_PINNED 7
#define MOTE_OMP_ATK_PARTITION 8

/* omp_alloctrait_value_t (omp_atv_default is all ones, pointer-wide). */
#define MOTE_OMP_ATV_DEFAULT ((uintptr_t)-1)
#define MOTE_OMP_ATV_FALSE 0
#define MOTE_OMP_ATV_TRUE 1
#define MOTE_OMP_ATV_CONTENDED 3
#define MOTE_OMP_ATV_UNCONTENDED 4
#define MOTE_OMP_ATV_SERIALIZED 5
#define MOTE_OMP_ATV_PRIVATE 6
#define MOTE_OMP_ATV_ALL 7
#define MOTE_OMP_ATV_THREAD 8
#define MOTE_OMP_ATV_PTEAM 9
#define MOTE_OMP_ATV_CGROUP 10
#define MOTE_OMP_ATV_DEFAULT_MEM_FB 11
#define MOTE_OMP_ATV_NULL_FB 12
#define MOTE_OMP_ATV_ABORT_FB 13
#define MOTE_OMP_ATV_ALLOCATOR_FB 14
#define MOTE_OMP_ATV_ENVIRONMENT 15
#define MOTE_OMP_ATV_NEAREST 16
#define MOTE_OMP_ATV_BLOCKED 17
#define MOTE_OMP_ATV_INTERLEAVED 18

/* ---- What gcc passes to the GOMP_* entry points ---------------------------- */

/* GOMP_task's and GOMP_taskloop's `flags` (gomp-constants.h). Bits 5 to 7
   are unused: UP is bit 8. */
#define GOMP_TASK_FLAG_UNTIED (1u << 0)
#define GOMP_TASK_FLAG_FINAL (1u << 1)
#define GOMP_TASK_FLAG_MERGEABLE (1u << 2)
#define GOMP_TASK_FLAG_DEPEND (1u << 3)
#define GOMP_TASK_FLAG_PRIORITY (1u << 4)
#define GOMP_TASK_FLAG_UP (1u << 8)         /* taskloop: the step is positive */
#define GOMP_TASK_FLAG_GRAINSIZE (1u << 9)  /* taskloop: num_tasks is a grainsize */
#define GOMP_TASK_FLAG_IF (1u << 10)        /* taskloop: the if clause held */
#define GOMP_TASK_FLAG_NOGROUP (1u << 11)   /* taskloop: no implicit taskgroup */
#define GOMP_TASK_FLAG_REDUCTION (1u << 12) /* taskloop: a reduction clause */
#define GOMP_TASK_FLAG_DETACH (1u << 13)    /* task: a detach clause (the event) */
#define GOMP_TASK_FLAG_STRICT (1u << 14)    /* taskloop: grainsize/num_tasks strict */

/* The kind of a dependence held in an omp_depend_t (a depobj). */
#define GOMP_DEPEND_IN 1
#define GOMP_DEPEND_OUT 2
#define GOMP_DEPEND_INOUT 3
#define GOMP_DEPEND_MUTEXINOUTSET 4

/* The `depend` array of GOMP_task, GOMP_taskwait_depend and the target
   entry points, in one of two forms (depend[0] tells them apart):
     depend[0] != 0:  [n, n_out, addr_0 .. addr_(n-1)]
       the first n_out addresses are out or inout, the others in.
     depend[0] == 0:  [0, n, n_out, n_mutexinoutset, n_in, entries...]
       then n_out out/inout addresses, n_mutexinoutset mutexinoutset
       addresses, n_in in addresses, and the remaining
       n - n_out - n_mutexinoutset - n_in entries are pointers to
       omp_depend_t objects, each holding an address and a GOMP_DEPEND_* kind.
   mote::omp::abi::for_each_depend (below) reads both. */
#define GOMP_DEPEND_SHORT_HEADER 2
#define GOMP_DEPEND_LONG_HEADER 5

/* GOMP_cancel's and GOMP_cancellation_point's `which`. */
#define GOMP_CANCEL_PARALLEL 1
#define GOMP_CANCEL_LOOP 2
#define GOMP_CANCEL_FOR GOMP_CANCEL_LOOP
#define GOMP_CANCEL_DO GOMP_CANCEL_LOOP
#define GOMP_CANCEL_SECTIONS 4
#define GOMP_CANCEL_TASKGROUP 8

/* The schedule GOMP_loop_start and GOMP_loop_ordered_start receive (and the
   run-sched-var ICV holds): the omp_sched_t numbering, with RUNTIME for
   "look at the ICV". The monotonic modifier is bit 31. */
#define GFS_RUNTIME 0
#define GFS_STATIC 1
#define GFS_DYNAMIC 2
#define GFS_GUIDED 3
#define GFS_AUTO 4
#define GFS_MONOTONIC 0x80000000u

/* GOMP_parallel's (and GOMP_parallel_loop_*'s, GOMP_parallel_sections')
   `flags`: the proc_bind clause, an omp_proc_bind_t value in the low three
   bits (0 when the construct has none). */
#define GOMP_PARALLEL_PROC_BIND_MASK 7u

/* The device numbers the target entry points receive besides real ones. */
#define GOMP_DEVICE_ICV (-1)           /* the default-device-var ICV */
#define GOMP_DEVICE_HOST_FALLBACK (-2) /* run on the host */

/* GOMP_target_ext's `kinds`: the map kind in the low byte, log2 of the
   alignment above it. FIRSTPRIVATE: hostaddrs[i] points at sizes[i] bytes the
   region gets a copy of (FIRSTPRIVATE_INT: the value itself, passed in
   hostaddrs[i]). */
#define GOMP_MAP_KIND_MASK 0xffu
#define GOMP_MAP_ALIGN_SHIFT 8
#define GOMP_MAP_FIRSTPRIVATE 12
#define GOMP_MAP_FIRSTPRIVATE_INT 13

/* GOMP_target_ext's `args`: a null-terminated array of words, each naming a
   device (low 7 bits; 0: all), an argument (bits 8-15) and, when bit 7 is
   clear, its value (bits 16 and up); when set, the value is the next word. */
#define GOMP_TARGET_ARG_DEVICE_MASK ((1 << 7) - 1)
#define GOMP_TARGET_ARG_DEVICE_ALL 0
#define GOMP_TARGET_ARG_SUBSEQUENT_PARAM (1 << 7)
#define GOMP_TARGET_ARG_ID_MASK (((1 << 8) - 1) << 8)
#define GOMP_TARGET_ARG_NUM_TEAMS (1 << 8)
#define GOMP_TARGET_ARG_THREAD_LIMIT (2 << 8)
#define GOMP_TARGET_ARG_VALUE_SHIFT 16

#ifdef __cplusplus
}  // extern "C"

#include <cstddef>
#include <cstdint>

namespace mote::omp::abi {

// Calls f(address, kind) for every dependence of a `depend` array (either form
// above), kind a GOMP_DEPEND_* value. The short form cannot tell out from
// inout: it reports GOMP_DEPEND_OUT for both, which orders alike. Returns the
// number of dependences.
//
//   abi::for_each_depend(depend, [&](void* addr, int kind) { add(addr, kind); });
template <class F>
std::size_t for_each_depend(void* const* depend, F&& f) {
  const auto count = [&](std::size_t i) {
    return static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(depend[i]));
  };
  if (count(0) != 0) {
    const std::size_t n = count(0);
    const std::size_t n_out = count(1);
    for (std::size_t i = 0; i < n; ++i) {
      f(depend[GOMP_DEPEND_SHORT_HEADER + i], i < n_out ? GOMP_DEPEND_OUT : GOMP_DEPEND_IN);
    }
    return n;
  }
  const std::size_t n = count(1);
  const std::size_t n_out = count(2);
  const std::size_t n_mutex = count(3);
  const std::size_t n_in = count(4);
  void* const* entry = depend + GOMP_DEPEND_LONG_HEADER;
  for (std::size_t i = 0; i < n; ++i) {
    if (i < n_out) {
      f(entry[i], GOMP_DEPEND_OUT);
    } else if (i < n_out + n_mutex) {
      f(entry[i], GOMP_DEPEND_MUTEXINOUTSET);
    } else if (i < n_out + n_mutex + n_in) {
      f(entry[i], GOMP_DEPEND_IN);
    } else {
      const auto* obj = static_cast<const mote_omp_depend_t*>(entry[i]);
      f(obj->addr, static_cast<int>(obj->kind));
    }
  }
  return n;
}

}  // namespace mote::omp::abi
#endif /* __cplusplus */

#endif /* MOTE_OMP_GOMP_ABI_HPP */
