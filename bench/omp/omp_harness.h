// The harness of the omp suite's C programs: options, timing, answer checks,
// and the JSON Lines records tools/report.py reads -- the fields of
// bench/common/harness.hpp's emit(), so the report's runner reads both alike:
//
//   {"suite":"omp","kernel":"fib","runtime":"omp_gnu","workers":2,"unit":"ms",
//    "samples":[41.2,40.8],"result":832040,"extra":{"omp_library":"...",...}}
//
// Each program is compiled once, with gcc -fopenmp against GNU's libgomp, and
// runs unmodified on whichever libgomp.so.1 the loader finds first (GNU's,
// LLVM's libomp through its GOMP layer, mote's): the runtime is not a build
// option but what the process really loaded, so the record names the runtime
// from the library it finds itself running on (omp_bench_runtime below), and
// the runner rejects a record whose runtime is not the one its job asked for.
//
// Command line of every program (the same flags as the C++ harness):
//   --workers N     the team size expected from OMP_NUM_THREADS: the program
//                   stops when the runtime gives another (default: whatever
//                   the runtime gives)
//   --reps R        timed repetitions (default 5)
//   --warmup W      untimed repetitions first (default 1)
//   --budget-ms B   stop repeating once the timed repetitions took B ms
//   --kernel NAME   run only this kernel (default: every kernel of the program)
// and its own size flags, read with omp_bench_long().
//
//   static int64_t run_fib(void* ctx) { ... return answer; }
//   static int check_fib(void* ctx, int64_t answer) { return answer == known; }
//
//   int main(int argc, char** argv) {
//     struct omp_bench_options o = omp_bench_parse(argc, argv);
//     struct fib_state s = {.n = (int)omp_bench_long(&o, "--n", 30)};
//     struct omp_bench_kernel k = {.name = "fib", .run = run_fib, .check = check_fib, .ctx = &s};
//     omp_bench_extra(&k, "n", s.n);
//     omp_bench_time(&o, &k);   // warm-up, timed repetitions, checks, one record
//     return 0;
//   }
//
// A wrong answer, or a team of another size than --workers, ends the program
// with a nonzero status: a wrong answer makes every time meaningless.
#ifndef MOTE_BENCH_OMP_HARNESS_H
#define MOTE_BENCH_OMP_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // dladdr, dl_iterate_phdr, realpath (set by CMake too)
#endif

#include <dlfcn.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <omp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct omp_bench_options {
  int workers;  // 0: not asked for
  int reps;
  int warmup;
  double budget_ms;    // 0: no limit
  const char* kernel;  // NULL: every kernel
  int argc;
  char** argv;
};

enum { OMP_BENCH_MAX_SAMPLES = 1000, OMP_BENCH_EXTRA_CHARS = 512 };

// One timed kernel. run() computes the answer and returns its checksum (the
// record's "result"; the same on every runtime and team size, which the runner
// checks); check() verifies the answer run() left in ctx, untimed, and returns
// nonzero when it is right. prepare(), when set, restores the input before each
// call, untimed. ops(), when set, makes the samples nanoseconds per operation
// (the micro-kernels: it returns how many operations the last call did);
// otherwise they are milliseconds per call.
struct omp_bench_kernel {
  const char* name;
  int64_t (*run)(void* ctx);
  int (*check)(void* ctx, int64_t result);
  void (*prepare)(void* ctx);
  void* ctx;
  double (*ops)(void* ctx);
  char extra[OMP_BENCH_EXTRA_CHARS];  // JSON members for "extra", built by omp_bench_extra
};

static inline void omp_bench_usage_error(const char* what, const char* value) {
  fprintf(stderr, "bench: bad %s '%s'\n", what, value != NULL ? value : "(missing)");
  exit(2);
}

static inline long omp_bench_parse_long(const char* text, const char* what) {
  if (text == NULL || *text == '\0') omp_bench_usage_error(what, text);
  char* end = NULL;
  long v = strtol(text, &end, 10);
  if (*end != '\0') omp_bench_usage_error(what, text);
  return v;
}

// Parses the common flags; a program's own flags (a flag and its value) are
// skipped here and read with omp_bench_long.
static inline struct omp_bench_options omp_bench_parse(int argc, char** argv) {
  struct omp_bench_options o = {0, 5, 1, 0.0, NULL, argc, argv};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--workers") == 0) {
      o.workers = (int)omp_bench_parse_long(next, a);
      if (o.workers < 1) omp_bench_usage_error(a, next);
      ++i;
    } else if (strcmp(a, "--reps") == 0) {
      o.reps = (int)omp_bench_parse_long(next, a);
      if (o.reps < 1 || o.reps > OMP_BENCH_MAX_SAMPLES) omp_bench_usage_error(a, next);
      ++i;
    } else if (strcmp(a, "--warmup") == 0) {
      o.warmup = (int)omp_bench_parse_long(next, a);
      if (o.warmup < 0) omp_bench_usage_error(a, next);
      ++i;
    } else if (strcmp(a, "--budget-ms") == 0) {
      o.budget_ms = (double)omp_bench_parse_long(next, a);
      ++i;
    } else if (strcmp(a, "--kernel") == 0) {
      if (next == NULL) omp_bench_usage_error(a, next);
      o.kernel = next;
      ++i;
    } else if (strncmp(a, "--", 2) == 0 && next != NULL && strncmp(next, "--", 2) != 0) {
      ++i;  // a program's own flag with its value
    } else {
      omp_bench_usage_error("argument", a);
    }
  }
  return o;
}

// The value of a program's own flag such as "--n", or `fallback`.
static inline long omp_bench_long(const struct omp_bench_options* o, const char* flag,
                                  long fallback) {
  for (int i = 1; i + 1 < o->argc; ++i) {
    if (strcmp(o->argv[i], flag) == 0) return omp_bench_parse_long(o->argv[i + 1], flag);
  }
  return fallback;
}

static inline int omp_bench_wants(const struct omp_bench_options* o, const char* name) {
  return o->kernel == NULL || strcmp(o->kernel, name) == 0;
}

// Stops with status 2 when --kernel names none of the program's kernels (a
// typo in the registry would otherwise print nothing and look like a crash).
static inline void omp_bench_known_kernels(const struct omp_bench_options* o,
                                           const char* const* names, int count) {
  if (o->kernel == NULL) return;
  for (int i = 0; i < count; ++i) {
    if (strcmp(o->kernel, names[i]) == 0) return;
  }
  omp_bench_usage_error("--kernel", o->kernel);
}

// ---- BOTS' variants ------------------------------------------------------------
// A recursive program of the Barcelona OpenMP Tasks Suite comes in up to six
// variants: where it stops making tasks (no cut-off: a task per call;
// if_clause: calls at depth >= the cut-off are tasks with if(0), undeferred;
// manual: calls at depth >= the cut-off are plain serial calls), each with
// tied or untied tasks. A program registers one kernel per variant, named
// <program><suffix> (fib, fib_untied, fib_if_clause, ...); its recursion is
// written once in a macro instantiated for tied and untied (the clause is
// part of the pragma, so it cannot be a run-time value):
//
//   #define FIB(name, tiedness) ... OMP_BENCH_PRAGMA(omp task shared(x) if(spawn) tiedness) ...
//   FIB(fib_tied, )
//   FIB(fib_untied, untied)
enum omp_bench_cut { OMP_BENCH_NO_CUTOFF, OMP_BENCH_IF_CLAUSE, OMP_BENCH_MANUAL };
struct omp_bench_variant {
  const char* suffix;
  enum omp_bench_cut cut;
  int untied;
};
enum { OMP_BENCH_VARIANTS = 6 };
static const struct omp_bench_variant omp_bench_variants[OMP_BENCH_VARIANTS] = {
    {"", OMP_BENCH_NO_CUTOFF, 0},         {"_untied", OMP_BENCH_NO_CUTOFF, 1},
    {"_if_clause", OMP_BENCH_IF_CLAUSE, 0}, {"_if_clause_untied", OMP_BENCH_IF_CLAUSE, 1},
    {"_manual", OMP_BENCH_MANUAL, 0},       {"_manual_untied", OMP_BENCH_MANUAL, 1},
};
#define OMP_BENCH_PRAGMA(x) _Pragma(#x)

// The kernel name of `base` in variant v (in a buffer of the caller's).
static inline const char* omp_bench_variant_name(char* buf, size_t size, const char* base,
                                                 const struct omp_bench_variant* v) {
  snprintf(buf, size, "%s%s", base, v->suffix);
  return buf;
}

// Stops with status 2 when --kernel names none of base's variants.
static inline void omp_bench_known_variants(const struct omp_bench_options* o, const char* base) {
  if (o->kernel == NULL) return;
  char name[64];
  for (int i = 0; i < OMP_BENCH_VARIANTS; ++i) {
    if (strcmp(o->kernel, omp_bench_variant_name(name, sizeof name, base, &omp_bench_variants[i])) == 0) return;
  }
  omp_bench_usage_error("--kernel", o->kernel);
}

// Adds "key":value to the record's extra members (the kernel's parameters).
static inline void omp_bench_extra(struct omp_bench_kernel* k, const char* key, long long value) {
  size_t used = strlen(k->extra);
  snprintf(k->extra + used, sizeof k->extra - used, "%s\"%s\":%lld", used ? "," : "", key, value);
}

static inline int64_t omp_bench_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// Reports a wrong answer (printf-style) and stops with status 1.
static inline void omp_bench_fail(const char* format, ...) {
  va_list args;
  va_start(args, format);
  fputs("bench: ", stderr);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  exit(1);
}

// A 64-bit FNV-1a hash over bytes: the checksum of an answer too large to be
// the result itself (a matrix, a spectrum). Equal answers hash equal, so the
// runner's check that every runtime computed the same result holds only when
// the computation is deterministic, which every kernel here is: each output
// element is computed by the same operations in the same order whatever the
// schedule.
static inline uint64_t omp_bench_hash(uint64_t h, const void* bytes, size_t n) {
  const unsigned char* p = (const unsigned char*)bytes;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}
#define OMP_BENCH_HASH_SEED 14695981039346656037ULL

// A hash as a record's "result", which is a signed 64-bit field: its top 63 bits.
static inline int64_t omp_bench_result(uint64_t h) { return (int64_t)(h >> 1); }

// ---- which runtime this process runs on -----------------------------------

static inline int omp_bench_find_libmote(struct dl_phdr_info* info, size_t size, void* found) {
  (void)size;
  const char* slash = info->dlpi_name != NULL ? strrchr(info->dlpi_name, '/') : NULL;
  const char* base = slash != NULL ? slash + 1 : info->dlpi_name;
  if (base != NULL && strncmp(base, "libmote", 7) == 0) {
    *(int*)found = 1;
    return 1;
  }
  return 0;
}

struct omp_bench_library {
  char path[PATH_MAX];  // the file the loader mapped, as it names it
  char real[PATH_MAX];  // the same with symbolic links resolved
  const char* runtime;  // the registry's name: omp_gnu, omp_llvm, omp_mote or omp_mote_<policy>
};

// The shared object that defines omp_get_num_threads, and the runtime it is:
// LLVM's when the file is libomp*, mote's when libmote is loaded (mote's
// libgomp.so.1 links it) or the file lies outside the system's library
// directories, GNU's otherwise. dlsym, not &omp_get_num_threads: the address
// of an imported function may be the executable's own PLT entry.
static inline struct omp_bench_library omp_bench_runtime(void) {
  struct omp_bench_library lib;
  strcpy(lib.path, "unknown");
  strcpy(lib.real, "unknown");
  void* symbol = dlsym(RTLD_DEFAULT, "omp_get_num_threads");
  Dl_info where;
  if (symbol != NULL && dladdr(symbol, &where) != 0 && where.dli_fname != NULL) {
    snprintf(lib.path, sizeof lib.path, "%s", where.dli_fname);
    if (realpath(where.dli_fname, lib.real) == NULL)
      snprintf(lib.real, sizeof lib.real, "%s", lib.path);
  }
  const char* slash = strrchr(lib.real, '/');
  const char* base = slash != NULL ? slash + 1 : lib.real;
  int libmote = 0;
  dl_iterate_phdr(omp_bench_find_libmote, &libmote);
  int system_dir = strncmp(lib.real, "/usr/lib", 8) == 0 || strncmp(lib.real, "/lib", 4) == 0;
  if (strncmp(base, "libomp", 6) == 0) {
    lib.runtime = "omp_llvm";
  } else if (libmote || !system_dir) {
    // mote's scheduler policy is chosen by MOTE_SCHEDULER (the runtime stops
    // on a value it does not know): each policy is a runtime of its own.
    const char* policy = getenv("MOTE_SCHEDULER");
    if (policy == NULL || policy[0] == '\0') {
      lib.runtime = "omp_mote";
    } else if (strcasecmp(policy, "steal") == 0) {
      lib.runtime = "omp_mote_steal";
    } else if (strcasecmp(policy, "delegation") == 0) {
      lib.runtime = "omp_mote_delegation";
    } else if (strcasecmp(policy, "mesh") == 0) {
      lib.runtime = "omp_mote_mesh";
    } else {
      lib.runtime = "omp_mote_unknown_policy";
    }
  } else {
    lib.runtime = "omp_gnu";
  }
  return lib;
}

// The size of the team a parallel region really gets; with --workers, a
// different size stops the program (OMP_NUM_THREADS not honoured would file
// one runtime's times under another team size).
static inline int omp_bench_team_size(const struct omp_bench_options* o) {
  int team = 0;
#pragma omp parallel
  {
#pragma omp single
    team = omp_get_num_threads();
  }
  if (o->workers != 0 && team != o->workers) {
    fprintf(stderr,
            "bench: --workers %d but a parallel region got %d threads (omp_get_max_threads() = %d; "
            "is OMP_NUM_THREADS=%d set?)\n",
            o->workers, team, omp_get_max_threads(), o->workers);
    exit(2);
  }
  return team;
}

static inline void omp_bench_json_string(const char* s) {
  putchar('"');
  for (; *s != '\0'; ++s) {
    if (*s == '"' || *s == '\\') {
      printf("\\%c", *s);
    } else if ((unsigned char)*s < 0x20) {
      printf("\\u%04x", (unsigned char)*s);
    } else {
      putchar(*s);
    }
  }
  putchar('"');
}

// Runs one kernel: o->warmup untimed calls, then up to o->reps timed ones
// (stopping early once o->budget_ms is spent), each call's answer checked,
// then prints its record and flushes (a crash later loses nothing).
static inline void omp_bench_time(const struct omp_bench_options* o, struct omp_bench_kernel* k) {
  struct omp_bench_library lib = omp_bench_runtime();
  int team = omp_bench_team_size(o);
  static double samples[OMP_BENCH_MAX_SAMPLES];
  int count = 0;
  int64_t result = 0;
  double warm_ms = 0;
  for (int i = 0; i < o->warmup; ++i) {
    if (k->prepare != NULL) k->prepare(k->ctx);
    int64_t t0 = omp_bench_now_ns();
    int64_t got = k->run(k->ctx);
    warm_ms += (double)(omp_bench_now_ns() - t0) / 1e6;
    if (!k->check(k->ctx, got))
      omp_bench_fail("%s on %s: wrong answer (warm-up)", k->name, lib.runtime);
    // A slow kernel needs no second warm-up; its first call warmed everything.
    if (o->budget_ms > 0 && warm_ms > o->budget_ms / 2) break;
  }
  double spent_ms = 0;
  for (int i = 0; i < o->reps; ++i) {
    if (k->prepare != NULL) k->prepare(k->ctx);
    int64_t t0 = omp_bench_now_ns();
    int64_t got = k->run(k->ctx);
    int64_t t1 = omp_bench_now_ns();
    if (!k->check(k->ctx, got))
      omp_bench_fail("%s on %s: wrong answer (repetition %d)", k->name, lib.runtime, i);
    double ns = (double)(t1 - t0);
    samples[count++] = k->ops != NULL ? ns / k->ops(k->ctx) : ns / 1e6;
    result = got;
    spent_ms += ns / 1e6;
    if (o->budget_ms > 0 && spent_ms >= o->budget_ms) break;
  }
  printf("{\"suite\":\"omp\",\"kernel\":");
  omp_bench_json_string(k->name);
  printf(",\"runtime\":\"%s\",\"workers\":%d,\"unit\":\"%s\",\"samples\":[", lib.runtime, team,
         k->ops != NULL ? "ns" : "ms");
  for (int i = 0; i < count; ++i) printf("%s%.9g", i == 0 ? "" : ",", samples[i]);
  printf("],\"result\":%" PRId64 ",\"extra\":{\"omp_library\":", result);
  omp_bench_json_string(lib.path);
  printf(",\"omp_library_real\":");
  omp_bench_json_string(lib.real);
  printf(",\"openmp_version\":%d%s%s}}\n", _OPENMP, k->extra[0] ? "," : "", k->extra);
  fflush(stdout);
}

// Keeps the compiler from deleting a computation or an empty task body (gcc
// removes an OpenMP task whose body is empty, leaving only the taskwait).
#define OMP_BENCH_KEEP(value) __asm__ __volatile__("" : : "r"(value) : "memory")
#define OMP_BENCH_EMPTY() __asm__ __volatile__("" : : : "memory")

#endif  // MOTE_BENCH_OMP_HARNESS_H
