// The OpenMP internal control variables (ICVs) and the environment variables
// that set them, read as GNU's libgomp (gcc 12) reads them: the same syntax,
// the same defaults, the same messages for a bad value (a script that matches
// libgomp's stderr matches mote's).
//
// Internal API of libmote, for the libgomp.so.1 front end (src/omp/gomp/) and
// the team layer. Parsed once, on first use; libgomp.so.1's constructor calls
// initialize() so that the messages and OMP_DISPLAY_ENV come at start-up, as
// GNU's do.
//
//   const mote::omp::global_icvs& g = mote::omp::globals();
//   unsigned n = mote::omp::current_icvs().nthreads;  // omp_get_max_threads()
//   mote::omp::writable_icvs().nthreads = 4;          // omp_set_num_threads(4)
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mote/export.hpp"

namespace mote::omp {

// run_sched's codes: omp_sched_t's numbering, the monotonic modifier in bit 31
// (abi.hpp holds the same values under the ABI's names).
inline constexpr int sched_static = 1;
inline constexpr int sched_dynamic = 2;
inline constexpr int sched_guided = 3;
inline constexpr int sched_auto = 4;
inline constexpr unsigned sched_monotonic = 0x80000000u;

// bind's codes: omp_proc_bind_t.
inline constexpr int bind_false = 0;
inline constexpr int bind_true = 1;
inline constexpr int bind_primary = 2;  // also "master"
inline constexpr int bind_close = 3;
inline constexpr int bind_spread = 4;

// The deepest nesting of active parallel regions (omp_get_supported_active_levels).
inline constexpr unsigned supported_active_levels = 255;

// The data-environment ICVs: every task has its own copy, its creator's as it
// was when the task was made (icv.cpp: shared until one of them changes it),
// and a region's implicit tasks start from the encountering task's
// (team_icvs). Plain values; the lists' storage is in globals(), which lives
// as long as the process.
struct task_icvs {
  unsigned nthreads = 1;  // nthreads-var of this level (omp_get_max_threads)
  // The rest of the OMP_NUM_THREADS list: the nthreads of the next nested
  // levels, in order (a region at this level gives its tasks nthreads_rest[0]
  // and the rest after it).
  const unsigned* nthreads_rest = nullptr;
  unsigned nthreads_rest_len = 0;
  bool dyn = false;                // dyn-var (OMP_DYNAMIC, omp_set_dynamic)
  int run_sched = sched_dynamic;   // run-sched-var, with sched_monotonic
  int run_chunk = 1;               // its chunk size
  int bind = bind_false;           // bind-var of this level
  const int* bind_rest = nullptr;  // the rest of the OMP_PROC_BIND list
  unsigned bind_rest_len = 0;
  unsigned thread_limit = 0xffffffffu;  // thread-limit-var (unlimited)
  unsigned max_active_levels = 1;       // max-active-levels-var
  int default_device = 0;               // default-device-var
};

// A place: the OS numbers of its CPUs, ascending.
using place = std::vector<int>;

// Everything the environment sets, once for the process. Holds the storage
// that task_icvs' list pointers point into; it moves, it does not copy.
struct global_icvs {
  global_icvs() = default;
  global_icvs(const global_icvs&) = delete;
  global_icvs& operator=(const global_icvs&) = delete;
  global_icvs(global_icvs&&) = default;
  global_icvs& operator=(global_icvs&&) = default;
  ~global_icvs() = default;

  bool cancellation = false;              // OMP_CANCELLATION
  int max_task_priority = 0;              // OMP_MAX_TASK_PRIORITY
  std::size_t stacksize = 0;              // OMP_STACKSIZE / GOMP_STACKSIZE in bytes; 0: the default
  int wait_policy = -1;                   // OMP_WAIT_POLICY: -1 unset, 0 passive, 1 active
  unsigned long long spincount = 300000;  // GOMP_SPINCOUNT, or what the wait policy implies
  bool spincount_set = false;             // GOMP_SPINCOUNT was given (and valid)
  std::vector<place> places;              // place-partition-var at start; empty: no places
  unsigned num_procs = 1;                 // CPUs this process may use (at start)
  std::vector<int> allowed_cpus;          // which ones, ascending
  int display_env = 0;                    // OMP_DISPLAY_ENV: 0 no, 1 true, 2 verbose
  bool display_affinity = false;          // OMP_DISPLAY_AFFINITY
  std::string affinity_format = "level %L thread %i affinity %A";  // OMP_AFFINITY_FORMAT
  std::uintptr_t default_allocator = 1;  // OMP_ALLOCATOR (omp_default_mem_alloc)
  int num_teams = 0;                     // OMP_NUM_TEAMS (nteams-var; 0: unset)
  int teams_thread_limit = 0;            // OMP_TEAMS_THREAD_LIMIT (0: unset)
  int target_offload = 0;                // OMP_TARGET_OFFLOAD: 0 default, 1 mandatory, 2 disabled
  int debug = 0;                         // GOMP_DEBUG
  task_icvs initial;                     // the initial task's ICVs

  // The lists behind initial's pointers, whole (element 0 is the first level).
  std::vector<unsigned> nthreads_list;
  std::vector<int> bind_list;
  // OMP_NUM_THREADS as given, for OMP_DISPLAY_ENV (nthreads saturates at INT_MAX).
  std::vector<unsigned long> nthreads_given;
};

// Where parse_environment reads. Empty members mean the process's own:
// getenv, sched_getaffinity, /sys/devices/system. Tests pass their own.
struct environment {
  std::function<const char*(const char*)> getenv;
  std::vector<int> allowed_cpus;
  std::string sysfs = "/sys/devices/system";
};

// Parses every variable. The messages for bad values are appended to
// `messages`, each as GNU's libgomp writes it to stderr (a newline, then
// "libgomp: ...", then a newline); a bad value leaves the default, as GNU's.
// Never throws but std::bad_alloc.
MOTE_API global_icvs parse_environment(const environment& from, std::string& messages);

// The text of omp_display_env / OMP_DISPLAY_ENV for these ICVs, as GNU prints
// it (blank line, BEGIN, one line per variable, END).
MOTE_API std::string display_env_text(const global_icvs& icvs, bool verbose);

// The process's ICVs: parsed on the first call (thread-safe), the messages
// written to stderr then. Never throws: out of memory while parsing leaves
// the defaults.
MOTE_API const global_icvs& globals() noexcept;

// globals(), then OMP_DISPLAY_ENV's output when it asks for one. Once per
// process; libgomp.so.1's constructor calls it.
MOTE_API void initialize() noexcept;

// The calling task's ICVs (any thread; a thread in no region is in its
// initial task, which starts with globals().initial). The omp_get_* routines
// read them.
MOTE_API const task_icvs& current_icvs() noexcept;
// The calling task's ICVs, to change (the omp_set_* routines): its own copy,
// made on the first change while it shares its creator's (icv.cpp). The same
// object on every call until the task makes a child, which then shares it;
// a change after that copies again, so the child keeps what it was given.
// Out of memory stops the program with a message.
MOTE_API task_icvs& writable_icvs() noexcept;

// omp_display_env: display_env_text(globals(), verbose) on stderr.
MOTE_API void display_env(bool verbose) noexcept;

// ---- The affinity format (OMP_AFFINITY_FORMAT, omp_capture_affinity) ----------

// A CPU list as omp_capture_affinity's %A shows it: "0-3,8,10-11".
MOTE_API std::string cpu_ranges(const place& cpus);

// Expands an affinity format. field(c) gives the text of the field whose short
// name is c (t T L n N a H P i A, a long name {thread_num} maps to its short
// one); asked only for the fields the format uses. False, with GNU's message
// in `error` (without "libgomp: "), for a malformed format; GNU then exits.
MOTE_API bool expand_affinity_format(const char* format,
                                     const std::function<std::string(char)>& field,
                                     std::string& out, std::string& error);

}  // namespace mote::omp
