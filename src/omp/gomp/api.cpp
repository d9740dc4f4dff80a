// The omp_* routines whose answers do not depend on the team the caller is in
// (or ask the team layer through omp/omp.hpp): the ICVs, places, devices, the
// affinity format, time, pausing, memory allocators and the target memory
// routines of a host without offload devices. Each answers as GNU's libgomp
// (gcc 12) answers on such a host; the signatures are omp.h's (types from
// abi.hpp, checked against gcc's omp.h by layout_check.c).
//
//   omp_set_num_threads(4);
//   int n = omp_get_max_threads();   // 4
#include <sched.h>
#include <unistd.h>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <initializer_list>
#include <mutex>
#include <string>
#include <vector>

#include "omp/gomp/abi.hpp"
#include "omp/icv.hpp"
#include "omp/omp.hpp"

// Team-dependent entry points that the affinity format asks (%t, %T): the
// team layer's, or their stubs until it implements them.
extern "C" int omp_get_team_num(void);
extern "C" int omp_get_num_teams(void);

namespace {

using mote::omp::globals;
using mote::omp::current_icvs;
using mote::omp::writable_icvs;

// GNU's fatal errors: the message, then exit(EXIT_FAILURE).
[[noreturn]] void fatal(const std::string& message) {
  const std::string text = "\nlibgomp: " + message + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::exit(EXIT_FAILURE);
}

// ---- ICVs with one copy per device (not per task) ------------------------------------

// nteams-var and teams-thread-limit-var, from OMP_NUM_TEAMS and
// OMP_TEAMS_THREAD_LIMIT. Relaxed: independent values with no data behind them.
struct device_icvs {
  std::atomic<int> num_teams;
  std::atomic<int> teams_thread_limit;
};
device_icvs& device() {
  static device_icvs icvs{globals().num_teams, globals().teams_thread_limit};
  return icvs;
}

// affinity-format-var: OMP_AFFINITY_FORMAT, replaced by omp_set_affinity_format.
struct affinity_format {
  std::mutex lock;
  std::string text;
};
affinity_format& format_var() {
  static affinity_format f{{}, globals().affinity_format};
  return f;
}
std::string current_format() {
  affinity_format& f = format_var();
  const std::lock_guard<std::mutex> hold(f.lock);
  return f.text;
}

// The text of one field of an affinity format, for the calling thread.
std::string affinity_field(char code) {
  char buffer[64];
  switch (code) {
    case 't':
      return std::to_string(omp_get_team_num());
    case 'T':
      return std::to_string(omp_get_num_teams());
    case 'L':
      return std::to_string(mote::omp::level());
    case 'n':
      return std::to_string(mote::omp::thread_num());
    case 'N':
      return std::to_string(mote::omp::num_threads());
    case 'a': {
      const int level = mote::omp::level();
      return std::to_string(level > 0 ? mote::omp::ancestor_thread_num(level - 1) : -1);
    }
    case 'H': {
      if (::gethostname(buffer, sizeof buffer - 1) == 0) {
        buffer[sizeof buffer - 1] = '\0';
        return buffer;
      }
      return "node";
    }
    case 'P':
      return std::to_string(::getpid());
    case 'i':
      std::snprintf(buffer, sizeof buffer, "0x%lx", static_cast<unsigned long>(::pthread_self()));
      return buffer;
    case 'A': {
      // The thread's place, or every CPU the process may use when unbound.
      const int place = mote::omp::place_num();
      const auto& places = globals().places;
      if (place >= 0 && static_cast<std::size_t>(place) < places.size()) {
        return mote::omp::cpu_ranges(places[static_cast<std::size_t>(place)]);
      }
      return mote::omp::cpu_ranges(globals().allowed_cpus);
    }
    default:
      return {};
  }
}

// Expands `format` (the current one when null or empty); GNU's message and
// exit on a malformed one.
std::string capture_affinity(const char* format) {
  const std::string current =
      format == nullptr || *format == '\0' ? current_format() : std::string();
  std::string out;
  std::string error;
  if (!mote::omp::expand_affinity_format(current.empty() ? format : current.c_str(), affinity_field,
                                         out, error)) {
    fatal(error);
  }
  return out;
}

// ---- Memory allocators ----------------------------------------------------------------

// An allocator made by omp_init_allocator; its handle is its address. The
// traits mote honours: alignment, pool_size (with the bytes in use counted),
// fallback and fb_data. The others are validated and kept, as GNU keeps them.
struct allocator_data {
  std::uintptr_t memspace = MOTE_OMP_DEFAULT_MEM_SPACE;
  std::uintptr_t alignment = 1;
  std::uintptr_t pool_size = ~std::uintptr_t{0};
  // Bytes of the pool in use. Relaxed: a count, nothing published through it.
  std::atomic<std::uintptr_t> used{0};
  std::uintptr_t fb_data = MOTE_OMP_NULL_ALLOCATOR;
  std::uintptr_t sync_hint = MOTE_OMP_ATV_CONTENDED;
  std::uintptr_t access = MOTE_OMP_ATV_ALL;
  std::uintptr_t fallback = MOTE_OMP_ATV_DEFAULT_MEM_FB;
  std::uintptr_t partition = MOTE_OMP_ATV_ENVIRONMENT;
  bool pinned = false;

  bool has_pool() const { return pool_size != ~std::uintptr_t{0}; }
};

allocator_data* data_of(std::uintptr_t handle) {
  return handle > MOTE_OMP_LAST_PREDEFINED_ALLOC ? reinterpret_cast<allocator_data*>(handle)
                                                 : nullptr;
}

// In front of every block: where malloc's block starts, its size, and which
// allocator it counts against. 32 bytes, so the payload keeps malloc's
// 16-byte alignment.
struct block_header {
  void* base;
  std::size_t size;
  std::uintptr_t allocator;
  void* unused;
};
static_assert(sizeof(block_header) == 32);

block_header* header_of(void* payload) { return static_cast<block_header*>(payload) - 1; }

// def-allocator-var of the calling thread's implicit task (0 until set:
// then OMP_ALLOCATOR's); a region's threads start with the encountering one's.
std::uintptr_t default_allocator() {
  const std::uintptr_t mine = mote::omp::current().def_allocator;
  return mine == MOTE_OMP_NULL_ALLOCATOR ? globals().default_allocator : mine;
}

bool reserve(allocator_data* data, std::size_t bytes) {
  if (data == nullptr || !data->has_pool()) return true;
  if (bytes > data->pool_size) return false;
  // Relaxed: see allocator_data::used.
  std::uintptr_t used = data->used.load(std::memory_order_relaxed);
  for (;;) {
    std::uintptr_t next = 0;
    if (__builtin_add_overflow(used, bytes, &next) || next > data->pool_size) return false;
    if (data->used.compare_exchange_weak(used, next, std::memory_order_relaxed)) return true;
  }
}

void unreserve(allocator_data* data, std::size_t bytes) {
  // Relaxed: see allocator_data::used.
  if (data != nullptr && data->has_pool()) data->used.fetch_sub(bytes, std::memory_order_relaxed);
}

// omp_aligned_alloc and omp_aligned_calloc: `size` bytes (zeroed when `zero`)
// aligned to at least `alignment` and the allocator's alignment trait. When
// the allocator cannot, its fallback trait decides: the default allocator,
// null, abort (reported with `reported_size`), or the fb_data allocator.
void* allocate(std::size_t alignment, std::size_t size, std::uintptr_t allocator, bool zero,
               std::size_t reported_size) {
  for (;;) {
    if (allocator == MOTE_OMP_NULL_ALLOCATOR) allocator = default_allocator();
    allocator_data* const data = data_of(allocator);
    std::size_t align =
        std::max<std::size_t>(alignment, data != nullptr ? data->alignment : sizeof(void*));
    align = std::max(align, sizeof(void*));
    // Room for the header, and to move the payload up to its alignment
    // (malloc's blocks are at least pointer-aligned).
    std::size_t total = sizeof(block_header) + (align > sizeof(void*) ? align - sizeof(void*) : 0);
    bool ok = !__builtin_add_overflow(size, total, &total) && reserve(data, total);
    if (ok) {
      void* base = zero ? std::calloc(1, total) : std::malloc(total);
      if (base != nullptr) {
        const auto start = reinterpret_cast<std::uintptr_t>(base) + sizeof(block_header);
        auto* payload = reinterpret_cast<void*>((start + align - 1) & ~(std::uintptr_t{align} - 1));
        *header_of(payload) = block_header{base, total, allocator, nullptr};
        return payload;
      }
      unreserve(data, total);
    }
    if (data == nullptr) return nullptr;
    switch (data->fallback) {
      case MOTE_OMP_ATV_DEFAULT_MEM_FB:
        // The default allocator can do better only without this one's
        // alignment or pool; else it was tried already.
        if ((align > sizeof(void*) && align > alignment) || data->has_pool()) {
          allocator = MOTE_OMP_DEFAULT_MEM_ALLOC;
          continue;
        }
        return nullptr;
      case MOTE_OMP_ATV_NULL_FB:
        return nullptr;
      case MOTE_OMP_ATV_ALLOCATOR_FB:
        allocator = data->fb_data;
        continue;
      default:
        fatal("Out of memory allocating " + std::to_string(reported_size) + " bytes");
    }
  }
}

void deallocate(void* payload) {
  if (payload == nullptr) return;
  const block_header h = *header_of(payload);
  unreserve(data_of(h.allocator), h.size);
  std::free(h.base);
}

// ---- Devices: the host is the only one -------------------------------------------------

constexpr int kInitialDevice = 0;  // omp_get_num_devices(): no offload devices

// A device number that names no device: GNU's resolve_device, which stops the
// program under OMP_TARGET_OFFLOAD=MANDATORY.
void no_such_device(int device) {
  if (globals().target_offload == 1 && device != GOMP_DEVICE_HOST_FALLBACK &&
      device != kInitialDevice) {
    fatal("OMP_TARGET_OFFLOAD is set to MANDATORY, but device not found");
  }
}

// A device number of a memory routine: true for the host; false for a
// negative one (quietly) or another (through no_such_device).
bool is_host(int device) {
  if (device == kInitialDevice) return true;
  if (device >= 0) no_such_device(device);
  return false;
}

int copy_rect(char* dst, const char* src, std::size_t element, int dims, const std::size_t* volume,
              const std::size_t* dst_offsets, const std::size_t* src_offsets,
              const std::size_t* dst_dims, const std::size_t* src_dims) {
  if (dims == 1) {
    std::size_t length = 0;
    std::size_t dst_off = 0;
    std::size_t src_off = 0;
    if (__builtin_mul_overflow(element, volume[0], &length) ||
        __builtin_mul_overflow(element, dst_offsets[0], &dst_off) ||
        __builtin_mul_overflow(element, src_offsets[0], &src_off)) {
      return EINVAL;
    }
    std::memcpy(dst + dst_off, src + src_off, length);
    return 0;
  }
  // One slice of the outermost dimension after another.
  std::size_t dst_slice = element;
  std::size_t src_slice = element;
  for (int i = 1; i < dims; ++i) {
    if (__builtin_mul_overflow(dst_slice, dst_dims[i], &dst_slice) ||
        __builtin_mul_overflow(src_slice, src_dims[i], &src_slice)) {
      return EINVAL;
    }
  }
  std::size_t dst_off = 0;
  std::size_t src_off = 0;
  if (__builtin_mul_overflow(dst_slice, dst_offsets[0], &dst_off) ||
      __builtin_mul_overflow(src_slice, src_offsets[0], &src_off)) {
    return EINVAL;
  }
  for (std::size_t j = 0; j < volume[0]; ++j) {
    const int err = copy_rect(dst + dst_off, src + src_off, element, dims - 1, volume + 1,
                              dst_offsets + 1, src_offsets + 1, dst_dims + 1, src_dims + 1);
    if (err != 0) return err;
    dst_off += dst_slice;
    src_off += src_slice;
  }
  return 0;
}

}  // namespace

extern "C" {

// ---- ICVs of the current task ----------------------------------------------------------

MOTE_GOMP_EXPORT void omp_set_num_threads(int n) {
  writable_icvs().nthreads = n > 0 ? static_cast<unsigned>(n) : 1U;
}
MOTE_GOMP_EXPORT int omp_get_max_threads(void) { return static_cast<int>(current_icvs().nthreads); }

MOTE_GOMP_EXPORT void omp_set_dynamic(int on) { writable_icvs().dyn = on != 0; }
MOTE_GOMP_EXPORT int omp_get_dynamic(void) { return current_icvs().dyn ? 1 : 0; }

// Deprecated in OpenMP 5.0: nesting is max-active-levels above 1.
MOTE_GOMP_EXPORT void omp_set_nested(int on) {
  mote::omp::task_icvs& icvs = writable_icvs();
  if (on != 0) {
    icvs.max_active_levels = mote::omp::supported_active_levels;
  } else if (icvs.max_active_levels > 1) {
    icvs.max_active_levels = 1;
  }
}
MOTE_GOMP_EXPORT int omp_get_nested(void) {
  const unsigned levels = current_icvs().max_active_levels;
  return levels > 1 && levels > static_cast<unsigned>(mote::omp::active_level()) ? 1 : 0;
}

MOTE_GOMP_EXPORT void omp_set_schedule(int kind, int chunk) {
  mote::omp::task_icvs icvs = current_icvs();
  switch (static_cast<unsigned>(kind) & ~mote::omp::sched_monotonic) {
    case MOTE_OMP_SCHED_STATIC:
      icvs.run_chunk = chunk < 1 ? 0 : chunk;
      break;
    case MOTE_OMP_SCHED_DYNAMIC:
    case MOTE_OMP_SCHED_GUIDED:
      icvs.run_chunk = chunk < 1 ? 1 : chunk;
      break;
    case MOTE_OMP_SCHED_AUTO:
      break;  // no chunk
    default:
      return;  // not a schedule: ignored
  }
  icvs.run_sched = kind;
  mote::omp::task_icvs& mine = writable_icvs();
  mine.run_sched = icvs.run_sched;
  mine.run_chunk = icvs.run_chunk;
}
MOTE_GOMP_EXPORT void omp_get_schedule(int* kind, int* chunk) {
  const mote::omp::task_icvs& icvs = current_icvs();
  *kind = icvs.run_sched;
  *chunk = icvs.run_chunk;
}

MOTE_GOMP_EXPORT int omp_get_thread_limit(void) {
  const unsigned limit = current_icvs().thread_limit;
  return limit > static_cast<unsigned>(INT_MAX) ? INT_MAX : static_cast<int>(limit);
}

MOTE_GOMP_EXPORT void omp_set_max_active_levels(int levels) {
  if (levels < 0) return;
  writable_icvs().max_active_levels =
      std::min(static_cast<unsigned>(levels), mote::omp::supported_active_levels);
}
MOTE_GOMP_EXPORT int omp_get_max_active_levels(void) {
  return static_cast<int>(current_icvs().max_active_levels);
}
MOTE_GOMP_EXPORT int omp_get_supported_active_levels(void) {
  return static_cast<int>(mote::omp::supported_active_levels);
}

MOTE_GOMP_EXPORT int omp_get_proc_bind(void) { return current_icvs().bind; }

MOTE_GOMP_EXPORT void omp_set_default_device(int device) {
  writable_icvs().default_device = device >= 0 ? device : 0;
}
MOTE_GOMP_EXPORT int omp_get_default_device(void) { return current_icvs().default_device; }

// ---- ICVs of the whole program -------------------------------------------------------------

MOTE_GOMP_EXPORT int omp_get_cancellation(void) { return globals().cancellation ? 1 : 0; }
MOTE_GOMP_EXPORT int omp_get_max_task_priority(void) { return globals().max_task_priority; }

// Relaxed, these four: see device_icvs.
MOTE_GOMP_EXPORT void omp_set_num_teams(int n) {
  if (n >= 0) device().num_teams.store(n, std::memory_order_relaxed);
}
MOTE_GOMP_EXPORT int omp_get_max_teams(void) {
  return device().num_teams.load(std::memory_order_relaxed);
}
MOTE_GOMP_EXPORT void omp_set_teams_thread_limit(int n) {
  if (n >= 0) device().teams_thread_limit.store(n, std::memory_order_relaxed);
}
MOTE_GOMP_EXPORT int omp_get_teams_thread_limit(void) {
  return device().teams_thread_limit.load(std::memory_order_relaxed);
}

MOTE_GOMP_EXPORT void omp_display_env(int verbose) { mote::omp::display_env(verbose != 0); }

// ---- Processors and places ---------------------------------------------------------------

// The CPUs the process may use now; with places, those it could use at start
// (the team layer binds threads, which changes the mask of each).
MOTE_GOMP_EXPORT int omp_get_num_procs(void) {
  if (!globals().places.empty()) return static_cast<int>(globals().num_procs);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(CPU_COUNT(&set), 1);
  return static_cast<int>(globals().num_procs);
}

MOTE_GOMP_EXPORT int omp_get_num_places(void) { return static_cast<int>(globals().places.size()); }

MOTE_GOMP_EXPORT int omp_get_place_num_procs(int place) {
  const auto& places = globals().places;
  if (place < 0 || static_cast<std::size_t>(place) >= places.size()) return 0;
  return static_cast<int>(places[static_cast<std::size_t>(place)].size());
}

MOTE_GOMP_EXPORT void omp_get_place_proc_ids(int place, int* ids) {
  const auto& places = globals().places;
  if (place < 0 || static_cast<std::size_t>(place) >= places.size()) return;
  const mote::omp::place& cpus = places[static_cast<std::size_t>(place)];
  std::copy(cpus.begin(), cpus.end(), ids);
}

MOTE_GOMP_EXPORT int omp_get_place_num(void) {
  return globals().places.empty() ? -1 : mote::omp::place_num();
}

// The calling thread's place partition: the whole list, which is the initial
// thread's (the team layer narrows it inside regions with spread binding).
MOTE_GOMP_EXPORT int omp_get_partition_num_places(void) {
  return static_cast<int>(globals().places.size());
}
MOTE_GOMP_EXPORT void omp_get_partition_place_nums(int* places) {
  const int n = static_cast<int>(globals().places.size());
  for (int i = 0; i < n; ++i) places[i] = i;
}

// ---- The affinity format ------------------------------------------------------------------

MOTE_GOMP_EXPORT void omp_set_affinity_format(const char* format) {
  affinity_format& f = format_var();
  const std::lock_guard<std::mutex> hold(f.lock);
  f.text = format;
}

// The format's length; the buffer gets as much as fits, NUL-terminated.
MOTE_GOMP_EXPORT std::size_t omp_get_affinity_format(char* buffer, std::size_t size) {
  const std::string text = current_format();
  if (size != 0) {
    const std::size_t n = std::min(text.size(), size - 1);
    std::memcpy(buffer, text.data(), n);
    buffer[n] = '\0';
  }
  return text.size();
}

MOTE_GOMP_EXPORT std::size_t omp_capture_affinity(char* buffer, std::size_t size,
                                                  const char* format) {
  const std::string text = capture_affinity(format);
  if (size != 0) {
    const std::size_t n = std::min(text.size(), size - 1);
    std::memcpy(buffer, text.data(), n);
    buffer[n] = '\0';
  }
  return text.size();
}

MOTE_GOMP_EXPORT void omp_display_affinity(const char* format) {
  const std::string text = capture_affinity(format) + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
}

}  // extern "C"

namespace mote::omp {

// OMP_DISPLAY_AFFINITY: the calling thread's line (the affinity format, as
// omp_display_affinity shows it) as it starts a region, when it differs
// from the last line it showed at that nesting level: upon its first region,
// and whenever what the format shows changed (the team size, the thread's
// number, its place ...). Each thread shows its own line; the team layer
// calls this (set_region_start_hook; init.cpp sets it).
void display_affinity_on_change() {
  static thread_local std::vector<std::string> shown;  // the last line, per level
  const std::string text = capture_affinity(nullptr);
  const auto level = static_cast<std::size_t>(mote::omp::level());
  if (shown.size() <= level) shown.resize(level + 1);
  if (shown[level] == text) return;
  shown[level] = text;
  const std::string line = text + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace mote::omp

extern "C" {

// ---- Time ------------------------------------------------------------------------------------

MOTE_GOMP_EXPORT double omp_get_wtime(void) {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}
MOTE_GOMP_EXPORT double omp_get_wtick(void) {
  timespec t{};
  ::clock_getres(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

// ---- Pausing ----------------------------------------------------------------------------------

// As GNU's library, a soft and a hard pause alike end the threads of the
// OpenMP runtime (the next region starts new ones); refused inside a
// parallel region (team.hpp, pause_host).
MOTE_GOMP_EXPORT int omp_pause_resource(int /*kind*/, int device) {
  if (device != kInitialDevice) return -1;
  return mote::omp::pause_host();
}
MOTE_GOMP_EXPORT int omp_pause_resource_all(int /*kind*/) { return mote::omp::pause_host(); }

// ---- Devices ------------------------------------------------------------------------------------

MOTE_GOMP_EXPORT int omp_get_num_devices(void) { return 0; }
MOTE_GOMP_EXPORT int omp_get_initial_device(void) { return kInitialDevice; }
MOTE_GOMP_EXPORT int omp_is_initial_device(void) { return 1; }
MOTE_GOMP_EXPORT int omp_get_device_num(void) { return kInitialDevice; }

MOTE_GOMP_EXPORT void* omp_target_alloc(std::size_t size, int device) {
  return is_host(device) ? std::malloc(size) : nullptr;
}
MOTE_GOMP_EXPORT void omp_target_free(void* ptr, int device) {
  if (ptr != nullptr && is_host(device)) std::free(ptr);
}
MOTE_GOMP_EXPORT int omp_target_is_present(const void* ptr, int device) {
  if (ptr == nullptr) return 1;
  return is_host(device) ? 1 : 0;
}
MOTE_GOMP_EXPORT int omp_target_memcpy(void* dst, const void* src, std::size_t length,
                                       std::size_t dst_offset, std::size_t src_offset,
                                       int dst_device, int src_device) {
  if (!is_host(dst_device) || !is_host(src_device)) return EINVAL;
  std::memcpy(static_cast<char*>(dst) + dst_offset, static_cast<const char*>(src) + src_offset,
              length);
  return 0;
}
// With neither pointer: the most dimensions it copies (no limit).
MOTE_GOMP_EXPORT int omp_target_memcpy_rect(
    void* dst, const void* src, std::size_t element, int dims, const std::size_t* volume,
    const std::size_t* dst_offsets, const std::size_t* src_offsets, const std::size_t* dst_dims,
    const std::size_t* src_dims, int dst_device, int src_device) {
  if (dst == nullptr && src == nullptr) return INT_MAX;
  if (!is_host(dst_device) || !is_host(src_device) || dims < 1) return EINVAL;
  return copy_rect(static_cast<char*>(dst), static_cast<const char*>(src), element, dims, volume,
                   dst_offsets, src_offsets, dst_dims, src_dims);
}
// Host memory is not associated with itself.
MOTE_GOMP_EXPORT int omp_target_associate_ptr(const void* /*host*/, const void* /*device_ptr*/,
                                              std::size_t /*size*/, std::size_t /*offset*/,
                                              int device) {
  if (device != kInitialDevice && device >= 0) no_such_device(device);
  return EINVAL;
}
MOTE_GOMP_EXPORT int omp_target_disassociate_ptr(const void* /*ptr*/, int device) {
  if (device != kInitialDevice && device >= 0) no_such_device(device);
  return EINVAL;
}

// ---- Memory allocators
// ---------------------------------------------------------------------------

// A new allocator, or omp_null_allocator for a memory space or a trait value
// mote does not offer (as GNU: high-bandwidth memory and pinned memory).
MOTE_GOMP_EXPORT mote_omp_allocator_handle_t omp_init_allocator(
    mote_omp_memspace_handle_t memspace, int ntraits, const mote_omp_alloctrait_t traits[]) {
  allocator_data data;
  data.memspace = memspace;
  if (memspace > MOTE_OMP_LOW_LAT_MEM_SPACE) return MOTE_OMP_NULL_ALLOCATOR;
  const auto one_of = [](std::uintptr_t v, std::initializer_list<std::uintptr_t> allowed) {
    return std::find(allowed.begin(), allowed.end(), v) != allowed.end();
  };
  for (int i = 0; i < ntraits; ++i) {
    const std::uintptr_t v = traits[i].value;
    const bool dflt = v == MOTE_OMP_ATV_DEFAULT;
    switch (traits[i].key) {
      case MOTE_OMP_ATK_SYNC_HINT:
        if (!dflt && !one_of(v, {MOTE_OMP_ATV_CONTENDED, MOTE_OMP_ATV_UNCONTENDED,
                                 MOTE_OMP_ATV_SERIALIZED, MOTE_OMP_ATV_PRIVATE})) {
          return MOTE_OMP_NULL_ALLOCATOR;
        }
        data.sync_hint = dflt ? MOTE_OMP_ATV_CONTENDED : v;
        break;
      case MOTE_OMP_ATK_ALIGNMENT:
        if (!dflt && (v == 0 || (v & (v - 1)) != 0)) return MOTE_OMP_NULL_ALLOCATOR;
        data.alignment = dflt ? 1 : v;
        break;
      case MOTE_OMP_ATK_ACCESS:
        if (!dflt && !one_of(v, {MOTE_OMP_ATV_ALL, MOTE_OMP_ATV_CGROUP, MOTE_OMP_ATV_PTEAM,
                                 MOTE_OMP_ATV_THREAD})) {
          return MOTE_OMP_NULL_ALLOCATOR;
        }
        data.access = dflt ? MOTE_OMP_ATV_ALL : v;
        break;
      case MOTE_OMP_ATK_POOL_SIZE:
        data.pool_size = dflt ? ~std::uintptr_t{0} : v;
        break;
      case MOTE_OMP_ATK_FALLBACK:
        if (!dflt && !one_of(v, {MOTE_OMP_ATV_DEFAULT_MEM_FB, MOTE_OMP_ATV_NULL_FB,
                                 MOTE_OMP_ATV_ABORT_FB, MOTE_OMP_ATV_ALLOCATOR_FB})) {
          return MOTE_OMP_NULL_ALLOCATOR;
        }
        data.fallback = dflt ? MOTE_OMP_ATV_DEFAULT_MEM_FB : v;
        break;
      case MOTE_OMP_ATK_FB_DATA:
        data.fb_data = v;
        break;
      case MOTE_OMP_ATK_PINNED:
        if (!dflt && v != MOTE_OMP_ATV_FALSE && v != MOTE_OMP_ATV_TRUE)
          return MOTE_OMP_NULL_ALLOCATOR;
        data.pinned = v == MOTE_OMP_ATV_TRUE;
        break;
      case MOTE_OMP_ATK_PARTITION:
        if (!dflt && !one_of(v, {MOTE_OMP_ATV_ENVIRONMENT, MOTE_OMP_ATV_NEAREST,
                                 MOTE_OMP_ATV_BLOCKED, MOTE_OMP_ATV_INTERLEAVED})) {
          return MOTE_OMP_NULL_ALLOCATOR;
        }
        data.partition = dflt ? MOTE_OMP_ATV_ENVIRONMENT : v;
        break;
      default:
        return MOTE_OMP_NULL_ALLOCATOR;
    }
  }
  data.alignment = std::max<std::uintptr_t>(data.alignment, sizeof(void*));
  if (data.pinned || data.memspace == MOTE_OMP_HIGH_BW_MEM_SPACE) return MOTE_OMP_NULL_ALLOCATOR;
  auto* made = new (std::nothrow) allocator_data;
  if (made == nullptr) return MOTE_OMP_NULL_ALLOCATOR;
  made->memspace = data.memspace;
  made->alignment = data.alignment;
  made->pool_size = data.pool_size;
  made->fb_data = data.fb_data;
  made->sync_hint = data.sync_hint;
  made->access = data.access;
  made->fallback = data.fallback;
  made->partition = data.partition;
  return reinterpret_cast<mote_omp_allocator_handle_t>(made);
}

MOTE_GOMP_EXPORT void omp_destroy_allocator(mote_omp_allocator_handle_t allocator) {
  delete data_of(allocator);
}

MOTE_GOMP_EXPORT void omp_set_default_allocator(mote_omp_allocator_handle_t allocator) {
  mote::omp::current().def_allocator =
      allocator == MOTE_OMP_NULL_ALLOCATOR ? MOTE_OMP_DEFAULT_MEM_ALLOC : allocator;
}
MOTE_GOMP_EXPORT mote_omp_allocator_handle_t omp_get_default_allocator(void) {
  return default_allocator();
}

MOTE_GOMP_EXPORT void* omp_aligned_alloc(std::size_t alignment, std::size_t size,
                                         mote_omp_allocator_handle_t allocator) {
  if (size == 0) return nullptr;
  return allocate(alignment, size, allocator, false, size);
}
MOTE_GOMP_EXPORT void* omp_alloc(std::size_t size, mote_omp_allocator_handle_t allocator) {
  return omp_aligned_alloc(1, size, allocator);
}

MOTE_GOMP_EXPORT void* omp_aligned_calloc(std::size_t alignment, std::size_t count,
                                          std::size_t size, mote_omp_allocator_handle_t allocator) {
  if (count == 0 || size == 0) return nullptr;
  std::size_t bytes = 0;
  // An overflowing product fails as an allocation that is too big.
  if (__builtin_mul_overflow(count, size, &bytes)) bytes = ~std::size_t{0};
  return allocate(alignment, bytes, allocator, true, count * size);
}
MOTE_GOMP_EXPORT void* omp_calloc(std::size_t count, std::size_t size,
                                  mote_omp_allocator_handle_t allocator) {
  return omp_aligned_calloc(1, count, size, allocator);
}

MOTE_GOMP_EXPORT void omp_free(void* ptr, mote_omp_allocator_handle_t /*allocator*/) {
  deallocate(ptr);
}

// The block's own allocator when `allocator` is null (free_allocator is
// the block's own by the spec's rule: the header says which, as GNU reads
// it); the old block stays, as it was, when the new one cannot be had.
MOTE_GOMP_EXPORT void* omp_realloc(void* ptr, std::size_t size,
                                   mote_omp_allocator_handle_t allocator,
                                   mote_omp_allocator_handle_t free_allocator) {
  if (ptr == nullptr) return omp_aligned_alloc(1, size, allocator);
  if (size == 0) {
    omp_free(ptr, free_allocator);
    return nullptr;
  }
  const block_header old = *header_of(ptr);
  if (allocator == MOTE_OMP_NULL_ALLOCATOR) allocator = old.allocator;
  // In place (malloc's realloc) when the block stays in the same allocator
  // with no alignment beyond malloc's, before and after: a pool then counts
  // only the difference, so a block of 3000 bytes of a 4096-byte pool can
  // grow to 3001 (a new block beside the old one would need both).
  allocator_data* const data = data_of(allocator);
  const std::size_t plain = sizeof(block_header);
  const bool old_plain = static_cast<char*>(ptr) - static_cast<char*>(old.base) == static_cast<std::ptrdiff_t>(plain);
  std::size_t total = 0;
  if (allocator == old.allocator && old_plain && (data == nullptr || data->alignment <= sizeof(void*)) &&
      !__builtin_add_overflow(size, plain, &total)) {
    // Growth is counted before the block grows, shrinking after it shrank.
    if (total <= old.size || reserve(data, total - old.size)) {
      void* base = std::realloc(old.base, total);
      if (base != nullptr) {
        if (total < old.size) unreserve(data, old.size - total);
        void* payload = static_cast<char*>(base) + plain;
        *header_of(payload) = block_header{base, total, allocator, nullptr};
        return payload;
      }
      // realloc failed and left the old block as it was: so is its count.
      if (total > old.size) unreserve(data, total - old.size);
    }
    // What the allocator cannot do in place its fallback decides, as for a
    // new block: the default allocator (without the pool), null, abort, or
    // the fb_data allocator.
    if (data == nullptr) return nullptr;
    switch (data->fallback) {
      case MOTE_OMP_ATV_DEFAULT_MEM_FB:
        if (!data->has_pool()) return nullptr;  // malloc itself failed
        allocator = MOTE_OMP_DEFAULT_MEM_ALLOC;
        break;
      case MOTE_OMP_ATV_NULL_FB:
        return nullptr;
      case MOTE_OMP_ATV_ALLOCATOR_FB:
        allocator = data->fb_data;
        break;
      default:
        fatal("Out of memory allocating " + std::to_string(size) + " bytes");
    }
  }
  // A new block (its allocator's fallback applies), the contents copied,
  // the old block freed (its pool, if any, gets its bytes back).
  void* fresh = allocate(1, size, allocator, false, size);
  if (fresh == nullptr) return nullptr;
  const std::size_t old_size =
      old.size - static_cast<std::size_t>(static_cast<char*>(ptr) - static_cast<char*>(old.base));
  std::memcpy(fresh, ptr, std::min(old_size, size));
  deallocate(ptr);
  return fresh;
}

// The allocate clause and directive: as omp_aligned_alloc, but running out of
// memory stops the program whatever the fallback.
MOTE_GOMP_EXPORT void* GOMP_alloc(std::size_t alignment, std::size_t size,
                                  std::uintptr_t allocator) {
  void* p = omp_aligned_alloc(alignment, size, allocator);
  if (p == nullptr && size != 0)
    fatal("Out of memory allocating " + std::to_string(size) + " bytes");
  return p;
}
MOTE_GOMP_EXPORT void GOMP_free(void* ptr, std::uintptr_t allocator) { omp_free(ptr, allocator); }

}  // extern "C"
