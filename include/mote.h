/* The C API of mote: runtimes and task groups, with error codes.
 *
 *   #include <mote.h>
 *   static void work(void* arg) { *(int*)arg += 1; }
 *   int main(void) {
 *     mote_runtime* rt;
 *     if (mote_init(NULL, &rt) != MOTE_OK) { puts(mote_last_error()); return 1; }
 *     mote_task_group* g;
 *     int x[4] = {0};
 *     mote_task_group_create(rt, &g);
 *     for (int i = 0; i < 4; ++i) mote_task_group_spawn(g, work, &x[i]);
 *     mote_status s = mote_task_group_wait(g);
 *     mote_task_group_destroy(g);
 *     mote_finalize(rt);
 *     return s == MOTE_OK ? 0 : 1;
 *   }
 */
#ifndef MOTE_H
#define MOTE_H

#include <stddef.h>

#if defined(MOTE_SHARED) || defined(MOTE_BUILDING_SHARED)
#  define MOTE_C_API __attribute__((visibility("default")))
#else
#  define MOTE_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mote_status {
  MOTE_OK = 0,
  MOTE_EINVAL = 1,        /* a NULL handle, NULL function or out-of-range argument */
  MOTE_ECONFIG = 2,       /* an option or MOTE_* variable that cannot be used */
  MOTE_ENOMEM = 3,        /* out of memory */
  MOTE_ETASK = 4,         /* a task failed (a C++ exception escaped it); see mote_last_error() */
  MOTE_EBUSY = 5,         /* the object is still in use (pending tasks, for example) */
  MOTE_EINTERNAL = 6,     /* an unexpected failure inside mote; see mote_last_error() */
  MOTE_ENOTOWNER = 7      /* a call that only the object's owner thread may make, from another */
} mote_status;

typedef struct mote_runtime mote_runtime;
typedef struct mote_task_group mote_task_group;
typedef struct mote_assistant mote_assistant;

/* Options for mote_init. An unset field is taken from the MOTE_* environment
 * variables, else from the topology: num_workers 0, bind NULL, spin_us
 * negative (0 means "do not spin"). mote_options_init sets every field unset. */
typedef struct mote_options {
  unsigned num_workers;   /* 0: MOTE_NUM_THREADS, else one per core */
  const char* bind;       /* NULL: MOTE_BIND; "none", "cores", "threads" or a cpu list */
  long spin_us;           /* negative: MOTE_SPIN_US, else the default */
} mote_options;

/* Fills *options with "take everything from the environment". */
MOTE_C_API void mote_options_init(mote_options* options);

/* Creates a runtime. options may be NULL. */
MOTE_C_API mote_status mote_init(const mote_options* options, mote_runtime** out);
/* Joins the workers and frees the runtime. */
MOTE_C_API mote_status mote_finalize(mote_runtime* rt);
MOTE_C_API unsigned mote_num_workers(const mote_runtime* rt);

/* A task group on rt. */
MOTE_C_API mote_status mote_task_group_create(mote_runtime* rt, mote_task_group** out);
/* Adds fn(arg) to the group. */
MOTE_C_API mote_status mote_task_group_spawn(mote_task_group* g, void (*fn)(void*), void* arg);
/* Waits for every task of the group. MOTE_ETASK when one failed. */
MOTE_C_API mote_status mote_task_group_wait(mote_task_group* g);
/* Frees a group; MOTE_EBUSY (and nothing freed) while tasks are pending. */
MOTE_C_API mote_status mote_task_group_destroy(mote_task_group* g);

/* ---- The assistant: a helper thread owned by the thread that creates it --
 *
 *   static void half(void* arg) { ((long*)arg)[0] = 1; }
 *   mote_assistant* a;
 *   long out[2] = {0, 0};
 *   if (mote_assistant_create(NULL, &a) != MOTE_OK) return 1;
 *   mote_assistant_wake_up_hint(a);     // a parallel section begins
 *   mote_assistant_submit(a, half, out); // runs on the assistant
 *   out[1] = 2;                          // meanwhile, here
 *   mote_assistant_wait(a);              // out[0] == 1
 *   mote_assistant_sleep_hint(a);        // it ends
 *   mote_assistant_destroy(a);
 */

/* Options for mote_assistant_create; mote_assistant_options_init sets the
 * defaults (capacity 128, cpu -1: chosen from the topology, pin 1,
 * idle_park_us 1000). */
typedef struct mote_assistant_options {
  unsigned capacity;   /* ring entries, a power of two from 2 to 65536 */
  int cpu;             /* -1: the owner's SMT sibling, else the nearest CPU without a worker */
  int pin;             /* 0: let the kernel place the assistant */
  long idle_park_us;   /* park after this long without work; 0: only after a sleep hint */
} mote_assistant_options;

MOTE_C_API void mote_assistant_options_init(mote_assistant_options* options);
/* Creates an assistant owned by the calling thread. options may be NULL. */
MOTE_C_API mote_status mote_assistant_create(const mote_assistant_options* options,
                                             mote_assistant** out);
/* Hands fn(arg) to the assistant (runs it here when the ring is full).
 * Owner only: MOTE_ENOTOWNER from another thread. */
MOTE_C_API mote_status mote_assistant_submit(mote_assistant* a, void (*fn)(void*), void* arg);
/* Waits for every task submitted so far. Owner only. */
MOTE_C_API mote_status mote_assistant_wait(mote_assistant* a);
/* Wake the assistant ahead of a parallel section / let it sleep after one.
 * Any thread, any order. */
MOTE_C_API mote_status mote_assistant_wake_up_hint(mote_assistant* a);
MOTE_C_API mote_status mote_assistant_sleep_hint(mote_assistant* a);
/* The CPU the assistant is pinned to, or -1. */
MOTE_C_API int mote_assistant_cpu(const mote_assistant* a);
/* Waits for the submitted tasks, then stops and frees the assistant. Owner
 * only (MOTE_ENOTOWNER, and nothing freed, from another thread). */
MOTE_C_API mote_status mote_assistant_destroy(mote_assistant* a);

/* A fixed description of a status code. Never NULL. */
MOTE_C_API const char* mote_strerror(mote_status status);
/* The detailed message of the last error on this thread ("" if none). */
MOTE_C_API const char* mote_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* MOTE_H */
