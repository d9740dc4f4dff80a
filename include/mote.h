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
  MOTE_ENOTOWNER = 7,     /* a call that only the object's owner thread may make, from another */
  MOTE_EUSAGE = 8,        /* a use that mote does not allow (a second concurrent wait on one
                             group, a runtime created before fork() used in the child) */
  MOTE_ECANCELED = 9      /* the group was cancelled: tasks that had not started did not run
                             (the wait is done and the group reusable all the same) */
} mote_status;

typedef struct mote_runtime mote_runtime;
typedef struct mote_task_group mote_task_group;
typedef struct mote_assistant mote_assistant;

/* Options for mote_init. An unset field is taken from the MOTE_* environment
 * variables, else from the topology: num_workers 0, bind NULL, spin_us
 * negative (0 means "do not spin"), adaptive negative. mote_options_init sets
 * every field unset. */
typedef struct mote_options {
  unsigned num_workers;   /* 0: MOTE_NUM_THREADS, else one per core */
  const char* bind;       /* NULL: MOTE_BIND; "none", "cores", "threads" or a cpu list */
  long spin_us;           /* negative: MOTE_SPIN_US, else the default */
  int adaptive;           /* negative: MOTE_ADAPTIVE, else 0; 1: mote_join runs a pair in place
                             when handing it over cannot gain (docs/adaptive.md) */
} mote_options;

/* Fills *options with "take everything from the environment". */
MOTE_C_API void mote_options_init(mote_options* options);

/* Creates a runtime. options may be NULL. */
MOTE_C_API mote_status mote_init(const mote_options* options, mote_runtime** out);
/* Joins the workers and frees the runtime. MOTE_EBUSY (and nothing freed)
 * while task groups of it are not destroyed, MOTE_EUSAGE from a task of rt
 * (a worker cannot join itself). */
MOTE_C_API mote_status mote_finalize(mote_runtime* rt);
MOTE_C_API unsigned mote_num_workers(const mote_runtime* rt);

/* A task group on rt. Created inside a task of another group, it is bound to
 * that group: cancelling the outer group (or a task of it failing) cancels
 * this one too. Such a group must be destroyed before the task that created
 * it returns. */
MOTE_C_API mote_status mote_task_group_create(mote_runtime* rt, mote_task_group** out);
/* Adds fn(arg) to the group. Any thread may spawn, including the group's own
 * tasks; from a worker of the group's runtime the task goes on that worker's
 * own pool. On failure nothing was added: MOTE_ENOMEM, or MOTE_EUSAGE for a
 * runtime created before fork() (called in the child). */
MOTE_C_API mote_status mote_task_group_spawn(mote_task_group* g, void (*fn)(void*), void* arg);
/* Waits for every task of the group, including those its tasks spawned. Any
 * thread may wait, one at a time. MOTE_ETASK when a task failed (the first
 * failure's message in mote_last_error()); MOTE_ECANCELED when the group was
 * cancelled (by mote_task_group_cancel or through the group it is bound to)
 * and tasks that had not started were skipped; in both cases the group is
 * done and reusable all the same. MOTE_EUSAGE when another thread is waiting
 * for the group already, a task of the group waits for it, or its tasks were
 * left behind by fork(); then nothing was waited for. */
MOTE_C_API mote_status mote_task_group_wait(mote_task_group* g);
/* Tasks of the group that have not started yet will not run, nor will those
 * of the groups bound to it; running ones see mote_task_group_is_cancelled()
 * and may stop early. The next wait returns MOTE_ECANCELED (MOTE_ETASK when
 * a task failed) and ends the cancellation.
 *
 *   static void part(void* arg) {
 *     struct job* j = arg;
 *     if (mote_task_group_is_cancelled(j->group)) return;  // give up early
 *     if (search(j) == FOUND) mote_task_group_cancel(j->group);
 *   }
 *   for (i = 0; i < n; ++i) mote_task_group_spawn(g, part, &jobs[i]);
 *   mote_task_group_wait(g);   // the jobs that had not started did not run
 */
MOTE_C_API mote_status mote_task_group_cancel(mote_task_group* g);
/* 1 when g is cancelled, directly or through the group it is bound to, else 0
 * (0 for NULL, with MOTE_EINVAL recorded for mote_last_error()). */
MOTE_C_API int mote_task_group_is_cancelled(const mote_task_group* g);
/* Frees a group; MOTE_EBUSY (and nothing freed) while tasks are pending, that
 * is, from a spawn until a wait that returned MOTE_OK or MOTE_ETASK. In a
 * child process after fork() a group of a runtime created before it can
 * always be destroyed: its tasks will never run there. */
MOTE_C_API mote_status mote_task_group_destroy(mote_task_group* g);

/* ---- Data-flow tasks --------------------------------------------------------
 *
 *   static void add(void* p) { struct pair* q = p; q->b += q->a; }
 *   mote_dataflow* df;
 *   struct pair q = {2, 1};
 *   mote_access acc[2] = {{&q.a, sizeof q.a, MOTE_IN}, {&q.b, sizeof q.b, MOTE_INOUT}};
 *   if (mote_dataflow_create(rt, &df) != MOTE_OK) return 1;
 *   mote_dataflow_spawn(df, acc, 2, add, &q);  // runs after earlier writers of q.a, q.b
 *   mote_dataflow_wait(df);                    // q.b == 3
 *   mote_dataflow_destroy(df);
 *
 * The C++ API's mote::dataflow (include/mote/dataflow.hpp) has the rules;
 * reductions are C++ only. */
typedef struct mote_dataflow mote_dataflow;
typedef enum mote_access_type {
  MOTE_IN = 0,          /* reads; runs beside adjacent readers */
  MOTE_OUT = 1,         /* writes the whole region */
  MOTE_INOUT = 2,       /* reads and writes */
  MOTE_COMMUTATIVE = 3, /* excludes adjacent commutative accesses, in any order */
  MOTE_CONCURRENT = 4   /* runs beside adjacent concurrent accesses */
} mote_access_type;
/* A region, identified by its first address (as OpenMP's depend clause). */
typedef struct mote_access {
  const void* address;
  size_t size;
  mote_access_type type;
} mote_access;

/* A data-flow scope on rt; spawn into it and wait for it from the thread that
 * created it. */
MOTE_C_API mote_status mote_dataflow_create(mote_runtime* rt, mote_dataflow** out);
/* Adds fn(arg), ordered after the earlier tasks of df whose accesses conflict
 * with accesses[0..n). On failure nothing was added: MOTE_EINVAL (a bad access
 * type), MOTE_EUSAGE (another thread, or a nested scope's access outside its
 * parent task's), MOTE_ENOMEM. */
MOTE_C_API mote_status mote_dataflow_spawn(mote_dataflow* df, const mote_access* accesses, size_t n,
                                           void (*fn)(void*), void* arg);
/* Waits for every task of df. MOTE_ETASK when a task failed (a C++ exception;
 * the tasks depending on it were skipped, the others ran); the scope is then
 * empty and reusable all the same. MOTE_EUSAGE from another thread. */
MOTE_C_API mote_status mote_dataflow_wait(mote_dataflow* df);
/* Waits for the tasks still pending, then frees df. */
MOTE_C_API mote_status mote_dataflow_destroy(mote_dataflow* df);

/* ---- Fork-join ---------------------------------------------------------------
 *
 *   struct fib_arg { int n; long result; };
 *   static void fib(void* p) {
 *     struct fib_arg* a = p;
 *     if (a->n < 2) { a->result = a->n; return; }
 *     struct fib_arg x = {a->n - 1, 0}, y = {a->n - 2, 0};
 *     mote_join(fib, &x, fib, &y);        // on a worker: joins right there
 *     a->result = x.result + y.result;
 *   }
 *   struct fib_arg top = {30, 0};
 *   mote_status s = mote_run(rt, fib, &top);  // top.result == 832040
 */

/* Runs fn(arg) on a worker of rt and returns when it is done. Called from a
 * worker of rt it simply calls fn(arg); from a worker of another runtime,
 * that worker keeps running its own runtime's tasks meanwhile; any other
 * thread sleeps. Any number of threads may call it at once. MOTE_ETASK when a
 * C++ exception escaped fn (its message in mote_last_error()), MOTE_EUSAGE
 * for a runtime created before fork() (called in the child). */
MOTE_C_API mote_status mote_run(mote_runtime* rt, void (*fn)(void*), void* arg);
/* Runs f(a) and g(b), possibly in parallel, and returns when both are done.
 * On a worker (inside a task or mote_run) it joins there: g is offered to the
 * other workers of that runtime and, when none took it, runs here after f,
 * with no lock (and no atomic read-modify-write unless a thief had asked this
 * worker to share). On any other thread it runs
 * on the default runtime (options from the MOTE_* variables; MOTE_ECONFIG
 * when they are wrong) and blocks until done; on an assistant thread it runs
 * f, then g, right there. MOTE_ETASK when either threw a C++ exception (the
 * first one's message in mote_last_error()); when f throws, g may not run. */
MOTE_C_API mote_status mote_join(void (*f)(void*), void* a, void (*g)(void*), void* b);

/* ---- Parallel loops -----------------------------------------------------------
 *
 *   static void scale(void* ctx, long long begin, long long end) {
 *     double* x = ctx;
 *     for (long long i = begin; i < end; ++i) x[i] *= 2;
 *   }
 *   double x[1000];
 *   mote_status s = mote_parallel_for(rt, 0, 1000, 0, scale, x);  // grain 0: adapts
 */

/* Runs body(ctx, begin, end) over sub-ranges of [first, last) that together
 * cover it once, possibly in parallel, on rt's workers, and returns when all
 * have run. grain: the most iterations per call (0: chosen as the loop runs,
 * about 1K cycles of work per call). Called from a worker of rt (inside a
 * loop body, a task or mote_run) it is a nested loop; from any other thread
 * the caller blocks. An empty range calls nothing. MOTE_EINVAL for a NULL rt
 * or body or a negative grain; MOTE_ETASK when a C++ exception escaped body
 * (claiming stopped; its message in mote_last_error()). */
MOTE_C_API mote_status mote_parallel_for(mote_runtime* rt, long long first, long long last, long long grain,
                                         void (*body)(void* ctx, long long begin, long long end), void* ctx);

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
 * idle_park_us 1000, adaptive -1). */
typedef struct mote_assistant_options {
  unsigned capacity;   /* ring entries, a power of two from 2 to 65536 */
  int cpu;             /* -1: the owner's SMT sibling, else the nearest CPU without a worker */
  int pin;             /* 0: let the kernel place the assistant */
  long idle_park_us;   /* park after this long without work; 0: only after a sleep hint */
  int adaptive;        /* 1: run a task here when tasks of its function are too short to gain
                          from the hand-off (docs/adaptive.md); 0: always through the ring;
                          negative: MOTE_ADAPTIVE, else 1 */
} mote_assistant_options;

MOTE_C_API void mote_assistant_options_init(mote_assistant_options* options);
/* Creates an assistant owned by the calling thread. options may be NULL. */
MOTE_C_API mote_status mote_assistant_create(const mote_assistant_options* options,
                                             mote_assistant** out);
/* Hands fn(arg) to the assistant (runs it here when the ring is full).
 * Owner only: MOTE_ENOTOWNER from another thread. */
MOTE_C_API mote_status mote_assistant_submit(mote_assistant* a, void (*fn)(void*), void* arg);
/* Waits for every task submitted so far. Owner only. MOTE_ETASK when one
 * failed since the last wait (the first failure's message in
 * mote_last_error()); MOTE_EUSAGE in a child process after fork() for an
 * assistant created before it (its thread does not exist there). */
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

/* A fixed description of a status code (a mote_status, taken as an int so
 * that any value a C caller passes is defined: "unknown status" for one that
 * names no status). Never NULL.
 *
 *   fprintf(stderr, "%s: %s\n", mote_strerror(st), mote_last_error());
 */
MOTE_C_API const char* mote_strerror(int status);
/* The detailed message of the last error on this thread ("" if none). */
MOTE_C_API const char* mote_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* MOTE_H */
