/* A program built with `gcc -fopenmp`, as a user's would be, that calls the
   omp_* routines which need no parallel region and checks their answers
   against what GNU's libgomp gives (ctest runs it on both libraries: the
   expectations are GNU's, the library under test is mote's).

     test_omp_abi_smoke                      the checks; exit 0 when all pass
     test_omp_abi_smoke --library PATH       and check that omp_* come from PATH
     test_omp_abi_smoke --print-icvs         print the ICVs (tools/omp/compare_gnu.py)
     test_omp_abi_smoke --print-max-threads  print omp_get_max_threads()
     test_omp_abi_smoke --unsupported        check that an entry point mote lacks
                                             prints its line and aborts

   No parallel region: the locks are contended by POSIX threads. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The OpenMP 2.5 locks (omp_*_lock@OMP_1.0), as a binary built by gcc 4.2
   calls them: a plain lock is an int, a nest lock two ints. */
void omp25_init_lock(int*);
void omp25_set_lock(int*);
void omp25_unset_lock(int*);
int omp25_test_lock(int*);
void omp25_destroy_lock(int*);
void omp25_init_nest_lock(int*);
void omp25_set_nest_lock(int*);
void omp25_unset_nest_lock(int*);
int omp25_test_nest_lock(int*);
void omp25_destroy_nest_lock(int*);
__asm__(".symver omp25_init_lock, omp_init_lock@OMP_1.0");
__asm__(".symver omp25_set_lock, omp_set_lock@OMP_1.0");
__asm__(".symver omp25_unset_lock, omp_unset_lock@OMP_1.0");
__asm__(".symver omp25_test_lock, omp_test_lock@OMP_1.0");
__asm__(".symver omp25_destroy_lock, omp_destroy_lock@OMP_1.0");
__asm__(".symver omp25_init_nest_lock, omp_init_nest_lock@OMP_1.0");
__asm__(".symver omp25_set_nest_lock, omp_set_nest_lock@OMP_1.0");
__asm__(".symver omp25_unset_nest_lock, omp_unset_nest_lock@OMP_1.0");
__asm__(".symver omp25_test_nest_lock, omp_test_nest_lock@OMP_1.0");
__asm__(".symver omp25_destroy_nest_lock, omp_destroy_nest_lock@OMP_1.0");

/* An OpenACC routine: libgomp.so.1 exports it, mote does not implement it. */
int acc_get_num_devices(int);

static int failures;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)
#define CHECK_EQ_INT(a, b)                                                              \
  do {                                                                                  \
    long long a_ = (long long)(a), b_ = (long long)(b);                                 \
    if (a_ != b_) {                                                                     \
      fprintf(stderr, "%s:%d: %s is %lld, not %lld\n", __FILE__, __LINE__, #a, a_, b_); \
      ++failures;                                                                       \
    }                                                                                   \
  } while (0)

/* ---- Locks contended by threads ------------------------------------------------ */

enum { kThreads = 4, kRounds = 20000 };

struct shared {
  omp_lock_t lock;
  omp_nest_lock_t nest;
  int lock25;
  int nest25[2];
  long counter; /* guarded by the lock under test */
  int mode;     /* 0 lock, 1 nest lock, 2 lock@OMP_1.0, 3 nest lock@OMP_1.0, 4 test_lock */
};

static void* hammer(void* arg) {
  struct shared* s = arg;
  for (int i = 0; i < kRounds; ++i) {
    switch (s->mode) {
      case 0:
        omp_set_lock(&s->lock);
        ++s->counter;
        omp_unset_lock(&s->lock);
        break;
      case 1:
        /* Twice, nested: the owner passes its own lock. */
        omp_set_nest_lock(&s->nest);
        omp_set_nest_lock(&s->nest);
        ++s->counter;
        omp_unset_nest_lock(&s->nest);
        omp_unset_nest_lock(&s->nest);
        break;
      case 2:
        omp25_set_lock(&s->lock25);
        ++s->counter;
        omp25_unset_lock(&s->lock25);
        break;
      case 3:
        omp25_set_nest_lock(s->nest25);
        omp25_set_nest_lock(s->nest25);
        ++s->counter;
        omp25_unset_nest_lock(s->nest25);
        omp25_unset_nest_lock(s->nest25);
        break;
      default:
        while (!omp_test_lock(&s->lock)) sched_yield();
        ++s->counter;
        omp_unset_lock(&s->lock);
        break;
    }
  }
  return NULL;
}

/* Both nest locks, tried from a thread that does not hold them: the sum of
   the two answers (0 when both refuse). */
static void* try_nest_locks(void* arg) {
  struct shared* s = arg;
  return (void*)(intptr_t)(omp_test_nest_lock(&s->nest) + omp25_test_nest_lock(s->nest25));
}

static void check_locks(void) {
  static struct shared s;
  omp_init_lock(&s.lock);
  omp_init_nest_lock(&s.nest);
  omp25_init_lock(&s.lock25);
  omp25_init_nest_lock(s.nest25);

  /* One thread: the answers. */
  CHECK_EQ_INT(omp_test_lock(&s.lock), 1);
  CHECK_EQ_INT(omp_test_lock(&s.lock), 0); /* held, even by the caller */
  omp_unset_lock(&s.lock);
  CHECK_EQ_INT(omp_test_nest_lock(&s.nest), 1);
  CHECK_EQ_INT(omp_test_nest_lock(&s.nest), 2);
  omp_set_nest_lock(&s.nest);
  CHECK_EQ_INT(omp_test_nest_lock(&s.nest), 4);
  for (int i = 0; i < 4; ++i) omp_unset_nest_lock(&s.nest);
  CHECK_EQ_INT(omp25_test_lock(&s.lock25), 1);
  CHECK_EQ_INT(omp25_test_lock(&s.lock25), 0);
  omp25_unset_lock(&s.lock25);
  CHECK_EQ_INT(omp25_test_nest_lock(s.nest25), 1);
  CHECK_EQ_INT(omp25_test_nest_lock(s.nest25), 2);
  omp25_unset_nest_lock(s.nest25);
  omp25_unset_nest_lock(s.nest25);

  /* Threads: no increment lost under any of the locks. */
  for (int mode = 0; mode <= 4; ++mode) {
    s.mode = mode;
    s.counter = 0;
    pthread_t threads[kThreads];
    for (int t = 0; t < kThreads; ++t) CHECK(pthread_create(&threads[t], NULL, hammer, &s) == 0);
    for (int t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
    if (s.counter != (long)kThreads * kRounds) {
      fprintf(stderr, "lock mode %d: counter %ld, not %ld\n", mode, s.counter,
              (long)kThreads * kRounds);
      ++failures;
    }
  }
  /* A nest lock held by another thread is not the caller's. */
  omp_set_nest_lock(&s.nest);
  omp25_set_nest_lock(s.nest25);
  pthread_t other;
  void* result = NULL;
  CHECK(pthread_create(&other, NULL, try_nest_locks, &s) == 0);
  pthread_join(other, &result);
  CHECK_EQ_INT((intptr_t)result, 0);
  omp_unset_nest_lock(&s.nest);
  omp25_unset_nest_lock(s.nest25);

  omp_destroy_lock(&s.lock);
  omp_destroy_nest_lock(&s.nest);
  omp25_destroy_lock(&s.lock25);
  omp25_destroy_nest_lock(s.nest25);
}

/* ---- ICVs ------------------------------------------------------------------------- */

static int allowed_cpus(cpu_set_t* set) {
  CPU_ZERO(set);
  if (sched_getaffinity(0, sizeof *set, set) != 0) return 1;
  return CPU_COUNT(set);
}

static void check_icvs(void) {
  cpu_set_t set;
  const int cpus = allowed_cpus(&set);
  const char* env = getenv("OMP_NUM_THREADS");
  CHECK_EQ_INT(omp_get_max_threads(), env != NULL ? atoi(env) : cpus);
  CHECK_EQ_INT(omp_get_num_procs(), cpus);
  CHECK_EQ_INT(omp_get_thread_limit(), INT_MAX);
  CHECK_EQ_INT(omp_get_supported_active_levels(), 255);

  omp_set_num_threads(5);
  CHECK_EQ_INT(omp_get_max_threads(), 5);
  omp_set_num_threads(-2);
  CHECK_EQ_INT(omp_get_max_threads(), 1);

  omp_set_dynamic(7);
  CHECK_EQ_INT(omp_get_dynamic(), 1);
  omp_set_dynamic(0);
  CHECK_EQ_INT(omp_get_dynamic(), 0);

  omp_sched_t kind;
  int chunk;
  omp_set_schedule(omp_sched_guided, 0);
  omp_get_schedule(&kind, &chunk);
  CHECK_EQ_INT(kind, omp_sched_guided);
  CHECK_EQ_INT(chunk, 1);
  omp_set_schedule((omp_sched_t)(omp_sched_static | omp_sched_monotonic), -4);
  omp_get_schedule(&kind, &chunk);
  CHECK_EQ_INT((unsigned)kind, (unsigned)(omp_sched_static | omp_sched_monotonic));
  CHECK_EQ_INT(chunk, 0);
  omp_set_schedule(omp_sched_auto, 9); /* auto keeps the chunk */
  omp_get_schedule(&kind, &chunk);
  CHECK_EQ_INT(kind, omp_sched_auto);
  CHECK_EQ_INT(chunk, 0);
  omp_set_schedule((omp_sched_t)99, 3); /* not a schedule: ignored */
  omp_get_schedule(&kind, &chunk);
  CHECK_EQ_INT(kind, omp_sched_auto);

  omp_set_max_active_levels(1000);
  CHECK_EQ_INT(omp_get_max_active_levels(), 255);
  omp_set_max_active_levels(-1); /* ignored */
  CHECK_EQ_INT(omp_get_max_active_levels(), 255);
  omp_set_max_active_levels(3);
  CHECK_EQ_INT(omp_get_max_active_levels(), 3);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  CHECK_EQ_INT(omp_get_nested(), 1);
  omp_set_nested(0);
  CHECK_EQ_INT(omp_get_max_active_levels(), 1);
  CHECK_EQ_INT(omp_get_nested(), 0);
  omp_set_nested(1);
  CHECK_EQ_INT(omp_get_max_active_levels(), 255);
#pragma GCC diagnostic pop

  /* Devices: the host alone. */
  CHECK_EQ_INT(omp_get_num_devices(), 0);
  CHECK_EQ_INT(omp_get_initial_device(), 0);
  CHECK_EQ_INT(omp_get_device_num(), 0);
  CHECK_EQ_INT(omp_is_initial_device(), 1);
  omp_set_default_device(3);
  CHECK_EQ_INT(omp_get_default_device(), 3);
  omp_set_default_device(-5);
  CHECK_EQ_INT(omp_get_default_device(), 0);

  omp_set_num_teams(6);
  CHECK_EQ_INT(omp_get_max_teams(), 6);
  omp_set_teams_thread_limit(2);
  CHECK_EQ_INT(omp_get_teams_thread_limit(), 2);

  CHECK_EQ_INT(omp_pause_resource_all(omp_pause_soft), 0);
  CHECK_EQ_INT(omp_pause_resource(omp_pause_hard, omp_get_initial_device()), 0);
  CHECK_EQ_INT(omp_pause_resource(omp_pause_hard, 4), -1);
}

/* ---- Time -------------------------------------------------------------------------- */

static void check_time(void) {
  const double a = omp_get_wtime();
  const double b = omp_get_wtime();
  CHECK(a > 0.0);
  CHECK(b >= a);
  CHECK(omp_get_wtick() > 0.0 && omp_get_wtick() < 1.0);
}

/* ---- Affinity format ----------------------------------------------------------------- */

static void check_affinity(void) {
  char buffer[256];
  CHECK_EQ_INT(omp_get_affinity_format(buffer, sizeof buffer),
               strlen("level %L thread %i affinity %A"));
  CHECK(strcmp(buffer, "level %L thread %i affinity %A") == 0);
  CHECK_EQ_INT(omp_get_affinity_format(buffer, 6), strlen("level %L thread %i affinity %A"));
  CHECK(strcmp(buffer, "level") == 0);

  /* The process's CPUs as ranges, which %A shows for an unbound thread. */
  cpu_set_t set;
  allowed_cpus(&set);
  char ranges[128] = "";
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    size_t used = strlen(ranges);
    if (last > cpu) {
      snprintf(ranges + used, sizeof ranges - used, "%s%d-%d", used ? "," : "", cpu, last);
    } else {
      snprintf(ranges + used, sizeof ranges - used, "%s%d", used ? "," : "", cpu);
    }
    cpu = last;
  }
  char expected[256];
  snprintf(expected, sizeof expected, "[%d|0|0|1|-1|    0|0    |00000|-0001|%%|%s]", (int)getpid(),
           ranges);
  const size_t n = omp_capture_affinity(buffer, sizeof buffer,
                                        "[%P|%L|%n|%N|%a|%.5n|%5{thread_num}|%0.5L|%0.5a|%%|%A]");
  CHECK_EQ_INT(n, strlen(expected));
  if (strcmp(buffer, expected) != 0) {
    fprintf(stderr, "omp_capture_affinity: '%s', not '%s'\n", buffer, expected);
    ++failures;
  }
  /* Cut to the buffer, the whole length all the same. */
  char pid[32];
  const size_t pid_len = (size_t)snprintf(pid, sizeof pid, "%d", (int)getpid());
  CHECK_EQ_INT(omp_capture_affinity(buffer, 4, "%P-%P"), 2 * pid_len + 1);
  CHECK_EQ_INT(strlen(buffer), 3);

  omp_set_affinity_format("T%n");
  CHECK_EQ_INT(omp_capture_affinity(buffer, sizeof buffer, NULL), 2);
  CHECK(strcmp(buffer, "T0") == 0);
  omp_set_affinity_format("level %L thread %i affinity %A");
}

/* ---- Memory --------------------------------------------------------------------------- */

static void check_memory(void) {
  /* Alignment, zeroing, realloc keeping the contents. */
  char* p = omp_aligned_alloc(256, 1000, omp_default_mem_alloc);
  CHECK(p != NULL && (uintptr_t)p % 256 == 0);
  memset(p, 7, 1000);
  p = omp_realloc(p, 5000, omp_null_allocator, omp_null_allocator);
  CHECK(p != NULL);
  int kept = 1;
  for (int i = 0; i < 1000; ++i) kept &= p[i] == 7;
  CHECK(kept);
  omp_free(p, omp_null_allocator);
  int* z = omp_calloc(100, sizeof(int), omp_null_allocator);
  CHECK(z != NULL);
  int zero = 1;
  for (int i = 0; i < 100; ++i) zero &= z[i] == 0;
  CHECK(zero);
  omp_free(z, omp_null_allocator);
  CHECK(omp_alloc(0, omp_null_allocator) == NULL);
  volatile size_t huge = (size_t)-1; /* count * size overflows */
  CHECK(omp_calloc(huge, 16, omp_null_allocator) == NULL);

  /* An allocator with traits: alignment, and a pool that runs out. */
  omp_alloctrait_t traits[] = {
      {omp_atk_alignment, 128}, {omp_atk_pool_size, 4096}, {omp_atk_fallback, omp_atv_null_fb}};
  omp_allocator_handle_t a = omp_init_allocator(omp_default_mem_space, 3, traits);
  CHECK(a != omp_null_allocator);
  void* q = omp_alloc(100, a);
  CHECK(q != NULL && (uintptr_t)q % 128 == 0);
  CHECK(omp_alloc(8192, a) == NULL);               /* beyond the pool, null_fb */
  void* q2 = omp_alloc(3000, a);                   /* the pool has room for it... */
  CHECK(q2 == NULL || omp_alloc(3000, a) == NULL); /* ...but not twice */
  omp_free(q2, a);
  omp_free(q, a);
  void* q3 = omp_alloc(3000, a); /* freed blocks went back to the pool */
  CHECK(q3 != NULL);
  omp_free(q3, a);
  omp_destroy_allocator(a);

  /* The default fallback: the default allocator takes over. */
  omp_alloctrait_t small[] = {{omp_atk_pool_size, 64}};
  omp_allocator_handle_t b = omp_init_allocator(omp_default_mem_space, 1, small);
  void* r = omp_alloc(1000, b);
  CHECK(r != NULL);
  omp_free(r, b);
  omp_destroy_allocator(b);

  /* Traits GNU refuses. */
  omp_alloctrait_t bad_alignment[] = {{omp_atk_alignment, 24}};
  CHECK(omp_init_allocator(omp_default_mem_space, 1, bad_alignment) == omp_null_allocator);
  omp_alloctrait_t pinned[] = {{omp_atk_pinned, omp_atv_true}};
  CHECK(omp_init_allocator(omp_default_mem_space, 1, pinned) == omp_null_allocator);
  CHECK(omp_init_allocator(omp_high_bw_mem_space, 0, NULL) == omp_null_allocator);

  CHECK(omp_get_default_allocator() == omp_default_mem_alloc);
  omp_set_default_allocator(omp_large_cap_mem_alloc);
  CHECK(omp_get_default_allocator() == omp_large_cap_mem_alloc);
  omp_set_default_allocator(omp_null_allocator);
  CHECK(omp_get_default_allocator() == omp_default_mem_alloc);

  /* Target memory on the host. */
  const int host = omp_get_initial_device();
  int* t = omp_target_alloc(64 * sizeof(int), host);
  CHECK(t != NULL);
  int src[64];
  for (int i = 0; i < 64; ++i) src[i] = i;
  CHECK_EQ_INT(omp_target_memcpy(t, src, sizeof src, 0, 0, host, host), 0);
  CHECK_EQ_INT(t[63], 63);
  CHECK_EQ_INT(omp_target_is_present(t, host), 1);
  /* A 2x3 block at (1,2) of an 8x8 matrix into a 4x4 one at (0,1). */
  int dst[16] = {0};
  const size_t volume[2] = {2, 3}, dst_offsets[2] = {0, 1}, src_offsets[2] = {1, 2};
  const size_t dst_dims[2] = {4, 4}, src_dims[2] = {8, 8};
  CHECK_EQ_INT(omp_target_memcpy_rect(dst, t, sizeof(int), 2, volume, dst_offsets, src_offsets,
                                      dst_dims, src_dims, host, host),
               0);
  CHECK_EQ_INT(dst[1], 10);
  CHECK_EQ_INT(dst[3], 12);
  CHECK_EQ_INT(dst[5], 18);
  CHECK_EQ_INT(dst[7], 20);
  CHECK_EQ_INT(dst[0] + dst[4] + dst[8], 0);
  CHECK_EQ_INT(omp_target_memcpy_rect(NULL, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, host, host),
               INT_MAX);
  CHECK_EQ_INT(omp_target_associate_ptr(src, t, sizeof src, 0, host), EINVAL);
  CHECK_EQ_INT(omp_target_disassociate_ptr(src, host), EINVAL);
  CHECK(omp_target_alloc(16, 3) == NULL);
  CHECK_EQ_INT(omp_target_memcpy(t, src, 4, 0, 0, 3, host), EINVAL);
  omp_target_free(t, host);
}

/* ---- Modes ---------------------------------------------------------------------------- */

static int print_icvs(void) {
  omp_sched_t kind;
  int chunk;
  omp_get_schedule(&kind, &chunk);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  printf(
      "max_threads=%d dynamic=%d nested=%d max_active_levels=%d thread_limit=%d schedule=%#x,%d\n",
      omp_get_max_threads(), omp_get_dynamic(), omp_get_nested(), omp_get_max_active_levels(),
      omp_get_thread_limit(), (unsigned)kind, chunk);
#pragma GCC diagnostic pop
  printf("proc_bind=%d num_places=%d num_procs=%d place_num=%d partition=%d\n", omp_get_proc_bind(),
         omp_get_num_places(), omp_get_num_procs(), omp_get_place_num(),
         omp_get_partition_num_places());
  printf(
      "cancellation=%d max_task_priority=%d default_device=%d max_teams=%d teams_thread_limit=%d\n",
      omp_get_cancellation(), omp_get_max_task_priority(), omp_get_default_device(),
      omp_get_max_teams(), omp_get_teams_thread_limit());
  printf("default_allocator=%lu\n", (unsigned long)omp_get_default_allocator());
  for (int p = 0; p < omp_get_num_places(); ++p) {
    int ids[1024];
    const int n = omp_get_place_num_procs(p);
    omp_get_place_proc_ids(p, ids);
    printf("place %d:", p);
    for (int i = 0; i < n && i < 1024; ++i) printf(" %d", ids[i]);
    printf("\n");
  }
  char format[256];
  omp_get_affinity_format(format, sizeof format);
  printf("affinity_format=%s\n", format);
  return 0;
}

/* Runs an entry point mote does not implement in a child: its stderr must be
   the one line, and it must die of SIGABRT. */
static int check_unsupported(void) {
  int fds[2];
  if (pipe(fds) != 0) return 1;
  const pid_t child = fork();
  if (child == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    acc_get_num_devices(0);
    _exit(0); /* not reached: the stub aborts */
  }
  close(fds[1]);
  char text[512];
  size_t got = 0;
  ssize_t n;
  while (got < sizeof text - 1 && (n = read(fds[0], text + got, sizeof text - 1 - got)) > 0)
    got += (size_t)n;
  text[got] = '\0';
  int status = 0;
  waitpid(child, &status, 0);
  const char* wanted = "mote: libgomp entry point acc_get_num_devices is not implemented\n";
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
  if (strcmp(text, wanted) != 0) {
    fprintf(stderr, "stderr of the child: '%s', not '%s'\n", text, wanted);
    ++failures;
  }
  return failures == 0 ? 0 : 1;
}

/* omp_get_max_threads must come from `library` (not GNU's copy). */
static void check_library(const char* library) {
  Dl_info info;
  CHECK(dladdr((void*)omp_get_max_threads, &info) != 0);
  char want[PATH_MAX], have[PATH_MAX];
  if (realpath(library, want) == NULL || info.dli_fname == NULL ||
      realpath(info.dli_fname, have) == NULL || strcmp(want, have) != 0) {
    fprintf(stderr, "omp_get_max_threads is from %s, not %s\n",
            info.dli_fname ? info.dli_fname : "?", library);
    ++failures;
  }
}

int main(int argc, char** argv) {
  alarm(120); /* a watchdog: a hung lock fails the test */
  const char* library = NULL;
  const char* mode = NULL;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--library") == 0 && i + 1 < argc) {
      library = argv[++i];
    } else if (strncmp(argv[i], "--", 2) == 0 && mode == NULL) {
      mode = argv[i];
    } else {
      fprintf(stderr,
              "usage: %s [--library PATH] [--print-icvs | --print-max-threads | --unsupported]\n",
              argv[0]);
      return 2;
    }
  }
  if (library != NULL) check_library(library);
  if (mode != NULL && strcmp(mode, "--print-icvs") == 0) return print_icvs();
  if (mode != NULL && strcmp(mode, "--print-max-threads") == 0) {
    printf("%d\n", omp_get_max_threads());
    return failures == 0 ? 0 : 1;
  }
  if (mode != NULL && strcmp(mode, "--unsupported") == 0) return check_unsupported();
  if (mode != NULL) {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  check_icvs();
  check_time();
  check_affinity();
  check_memory();
  check_locks();
  if (failures != 0) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("all checks passed\n");
  return 0;
}
