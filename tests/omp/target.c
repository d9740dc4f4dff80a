// target regions with no device (built with -foffload=disable): they run on
// the host (GOMP_target_ext's fallback) as a fresh initial thread, on copies
// of their firstprivate data, with their thread_limit clause's limit, at
// level 0 wherever they are met; with omp_get_num_devices() == 0 and
// omp_is_initial_device() true inside; map clauses, target data, enter/exit
// data and update (GOMP_target_data_ext, GOMP_target_end_data,
// GOMP_target_enter_exit_data, GOMP_target_update_ext) keep host values;
// target teams distribute parallel for computes on the host; a deferred
// target (nowait) with a dependence is a task; the omp_target_* memory
// routines work on the host device.
#include <omp.h>

#include "omp_check.h"

enum { kN = 4096 };

struct pair {
  int s, t;
};
struct aligned_block {
  _Alignas(64) double d[4];
};
int global_scalar = 3;
int global_array[2] = {9, 10};

// firstprivate and private data of a target region (with no device, GNU's
// fallback runs it on the host on copies): the region sees the values the
// construct met, and its writes stay in its copies, whatever their size
// (gcc passes a local int by value, a struct, a double, an array, a global
// by address) and alignment.
static void firstprivate_copies(void) {
  int x = 5, y = 6, err = 0, misaligned = 0;
  struct pair u = {7, 8}, v = {9, 10};
  double s = 11.5, t = 12.5;
  int arr[64];
  struct aligned_block blk = {{1.0, 2.0, 3.0, 4.0}};
  for (int i = 0; i < 64; ++i) arr[i] = i;
#pragma omp target private(x, u, s) map(from : err, misaligned) \
    firstprivate(y, v, t, arr, blk, global_scalar, global_array)
  {
    err = global_scalar != 3 || global_array[1] != 10;
    global_scalar += 1;
    global_array[0] += 2;
    x = y;
    u = v;
    s = t;
    err = err || x != 6 || u.s != 9 || u.t != 10 || s != 12.5 || arr[63] != 63 || blk.d[3] != 4.0;
    misaligned = ((uintptr_t)&blk % 64) != 0;
    y += 2;
    v.t += 4;
    t += 3.0;
    for (int i = 0; i < 64; ++i) arr[i] = -1;
    blk.d[0] = -1.0;
  }
  CHECK(!err, "target firstprivate: the region did not see the values the construct met");
  CHECK(global_scalar == 3 && global_array[0] == 9,
        "target firstprivate: the region's writes reached global variables: %d, %d", global_scalar,
        global_array[0]);
  CHECK(!misaligned, "target firstprivate: a 64-byte aligned object's copy is not aligned");
  CHECK(x == 5 && u.s == 7 && u.t == 8 && s == 11.5,
        "target private: the host's values changed: %d %d %d %g", x, u.s, u.t, s);
  CHECK(y == 6 && v.s == 9 && v.t == 10 && t == 12.5 && arr[0] == 0 && arr[63] == 63 &&
            blk.d[0] == 1.0,
        "target firstprivate: the region's writes reached the host: y %d, v.t %d, t %g, arr[0] %d, "
        "blk.d[0] %g",
        y, v.t, t, arr[0], blk.d[0]);
}

// thread_limit on target: the region's initial thread has that
// thread-limit-var, and its parallel regions are bounded by it.
static void target_thread_limit(void) {
  int limit = -1, outside = omp_get_thread_limit();
#pragma omp target thread_limit(6) map(from : limit)
  limit = omp_get_thread_limit();
  CHECK(limit == 6, "inside target thread_limit(6): omp_get_thread_limit() %d", limit);
  CHECK(omp_get_thread_limit() == outside,
        "after target thread_limit(6): omp_get_thread_limit() %d, %d before",
        omp_get_thread_limit(), outside);
  int inner = -1, inner_limit = -1;
#pragma omp target thread_limit(2) map(from : inner, inner_limit)
#pragma omp parallel num_threads(4)
#pragma omp masked
  {
    inner = omp_get_num_threads();
    inner_limit = omp_get_thread_limit();
  }
  CHECK(inner_limit == 2 && inner >= 1 && inner <= 2,
        "target thread_limit(2) > parallel num_threads(4): omp_get_thread_limit() %d, %d threads",
        inner_limit, inner);
}

// A target region's initial thread starts a contention group of its own: the
// threads of the region that encountered it do not count against its thread
// limit (here teams thread_limit(2), then a parallel region of 2).
static void target_contention_group(void) {
  // First a region of 4 (mote's library then has room for 4 threads), then
  // one of 2 whose thread 1 opens the target region.
  int four = 0;
#pragma omp parallel num_threads(4)
#pragma omp atomic
  four++;
  int inner = -1, inner_limit = -1, region = 0;
#pragma omp parallel num_threads(2)
  {
    if (omp_get_thread_num() == omp_get_num_threads() - 1) {
      region = omp_get_num_threads();
#pragma omp target map(from : inner, inner_limit)
#pragma omp teams num_teams(1) thread_limit(2)
#pragma omp parallel num_threads(2)
#pragma omp masked
      {
        inner = omp_get_num_threads();
        inner_limit = omp_get_thread_limit();
      }
    }
  }
  CHECK(inner_limit == 2, "target > teams thread_limit(2) > parallel: omp_get_thread_limit() %d",
        inner_limit);
  if (four == 4 && region == 2) {
    CHECK(inner == 2,
          "target > teams thread_limit(2) > parallel num_threads(2), from thread 1 of a region of "
          "2: %d threads (the encountering region's threads count against the target region's "
          "limit)",
          inner);
  }
}

// A target region in a nested parallel region: its initial thread is at
// level 0 (no enclosing region), and a parallel region inside it at level 1.
static void target_levels(void) {
  int bad = 0;
#pragma omp parallel num_threads(2)
#pragma omp masked
  {
#pragma omp target map(tofrom : bad)
    {
      if (omp_in_parallel() || omp_get_level() != 0 || omp_get_active_level() != 0 ||
          omp_get_ancestor_thread_num(0) != 0 || omp_get_ancestor_thread_num(1) != -1 ||
          omp_get_num_threads() != 1 || omp_get_thread_num() != 0) {
        bad = 1;
      }
#pragma omp parallel num_threads(2)
      {
        int n = omp_get_num_threads();
        if (omp_get_level() != 1 || omp_get_active_level() != (n > 1) ||
            omp_in_parallel() != (n > 1) || omp_get_ancestor_thread_num(0) != 0 ||
            omp_get_ancestor_thread_num(1) != omp_get_thread_num() ||
            omp_get_ancestor_thread_num(2) != -1) {
          __atomic_store_n(&bad, 1, __ATOMIC_RELAXED);
        }
      }
    }
  }
  CHECK(!bad, "levels and ancestors inside a target region in a parallel region are wrong");
}

// A target region with teams and a parallel loop, opened by one thread of a
// region while the others wait at the region's barrier; repeated, so that
// the region's thread 0 opens it too (its team must outlive the target's).
static void target_in_region(void) {
  static int p[240];
  for (int i = 0; i < 240; ++i) p[i] = i;
  for (int rep = 0; rep < 20; ++rep) {
#pragma omp parallel
    {
      if (omp_get_thread_num() == rep % omp_get_num_threads()) {
#pragma omp target teams distribute parallel for map(tofrom : p [0:240])
        for (int i = 0; i < 240; ++i) p[i] += 1;
      }
#pragma omp barrier
#pragma omp single
#pragma omp target teams distribute parallel for map(tofrom : p [0:240])
      for (int i = 0; i < 240; ++i) p[i] += 1;
    }
  }
  for (int i = 0; i < 240; ++i)
    CHECK(p[i] == i + 40, "target in a region: p[%d] = %d, %d expected", i, p[i], i + 40);
}

static int wanted(int argc, char** argv, const char* part) {
  if (argc < 2) return 1;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], part) == 0) return 1;
  }
  return 0;
}

// target [part...]: every part when none is named (firstprivate,
// thread_limit, contention, levels, in_region, basics).
int main(int argc, char** argv) {
  if (wanted(argc, argv, "firstprivate")) firstprivate_copies();
  if (wanted(argc, argv, "thread_limit")) target_thread_limit();
  if (wanted(argc, argv, "contention")) target_contention_group();
  if (wanted(argc, argv, "levels")) target_levels();
  if (wanted(argc, argv, "in_region")) target_in_region();
  if (!wanted(argc, argv, "basics")) {
    puts("target: ok");
    return 0;
  }
  CHECK(omp_get_num_devices() == 0, "omp_get_num_devices() %d on a machine without devices",
        omp_get_num_devices());
  CHECK(omp_is_initial_device(), "omp_is_initial_device() false on the host");
  CHECK(omp_get_initial_device() == omp_get_num_devices(),
        "omp_get_initial_device() %d, omp_get_num_devices() %d", omp_get_initial_device(),
        omp_get_num_devices());
  CHECK(omp_get_device_num() == omp_get_initial_device(), "omp_get_device_num() %d on the host",
        omp_get_device_num());

  // The device memory routines on the host device (as GNU's libgomp answers
  // them with no offload device: host memory, plain copies).
  int host = omp_get_initial_device();
  char* mem = omp_target_alloc(100, host);
  CHECK(mem != NULL, "omp_target_alloc on the host device returned NULL");
  char src[100];
  memset(src, 7, sizeof src);
  CHECK(omp_target_memcpy(mem, src, 100, 0, 0, host, host) == 0, "omp_target_memcpy failed");
  CHECK(mem[0] == 7 && mem[99] == 7, "omp_target_memcpy copied %d, %d", mem[0], mem[99]);
  CHECK(omp_target_memcpy(mem, src, 10, 50, 0, host, host) == 0 && mem[50] == 7,
        "omp_target_memcpy with an offset failed");
  CHECK(omp_target_is_present(mem, host) != 0, "host memory is not present on the host device");
  CHECK(omp_target_associate_ptr(src, mem, 100, 0, host) != 0,
        "omp_target_associate_ptr on the host device succeeded (GNU: EINVAL, nothing to map)");
  CHECK(omp_target_disassociate_ptr(src, host) != 0,
        "omp_target_disassociate_ptr on the host device succeeded (GNU: EINVAL)");
  omp_target_free(mem, host);
  int grid_src[4][5], grid_dst[4][5];
  for (int i = 0; i < 20; ++i) ((int*)grid_src)[i] = i, ((int*)grid_dst)[i] = -1;
  size_t volume[2] = {2, 3}, dst_offset[2] = {1, 1}, src_offset[2] = {2, 2};
  size_t dims[2] = {4, 5};
  CHECK(omp_target_memcpy_rect(grid_dst, grid_src, sizeof(int), 2, volume, dst_offset, src_offset,
                               dims, dims, host, host) == 0,
        "omp_target_memcpy_rect failed");
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 5; ++j) {
      int inside = i >= 1 && i < 3 && j >= 1 && j < 4;
      int want = inside ? grid_src[i + 1][j + 1] : -1;
      CHECK(grid_dst[i][j] == want, "omp_target_memcpy_rect: (%d,%d) is %d, %d expected", i, j,
            grid_dst[i][j], want);
    }
  }
  CHECK(omp_target_memcpy_rect(NULL, NULL, 0, 0, NULL, NULL, NULL, NULL, NULL, host, host) >= 2,
        "omp_target_memcpy_rect's query of the dimensions it supports gave fewer than 2");

  static double a[kN], b[kN];
  for (int i = 0; i < kN; ++i) a[i] = i, b[i] = 0;
  int initial = 0, devices = -1, device_num = -2;
#pragma omp target map(tofrom : initial, devices, device_num)
  {
    initial = omp_is_initial_device();
    devices = omp_get_num_devices();
    device_num = omp_get_device_num();
  }
  CHECK(initial == 1 && devices == 0, "inside target: initial device %d, %d devices", initial,
        devices);
  CHECK(device_num == omp_get_initial_device(), "inside target: device number %d", device_num);

  for (int rep = 0; rep < OMPT_SIZE(5, 2); ++rep) {
#pragma omp target teams distribute parallel for map(to : a) map(from : b)
    for (int i = 0; i < kN; ++i) b[i] = 2 * a[i] + rep;
    for (int i = 0; i < kN; ++i) {
      CHECK(b[i] == 2.0 * i + rep, "target teams distribute parallel for: b[%d] = %g", i, b[i]);
    }

    double sum = 0;
#pragma omp target data map(to : a) map(tofrom : sum)
    {
#pragma omp target map(tofrom : sum)
      for (int i = 0; i < kN; ++i) sum += a[i];
#pragma omp target update from(a)
    }
    CHECK(sum == (double)kN * (kN - 1) / 2, "target data + target: sum %g", sum);

#pragma omp target enter data map(to : b)
#pragma omp target
    for (int i = 0; i < kN; ++i) b[i] += 1;
#pragma omp target exit data map(from : b)
    CHECK(b[7] == 2.0 * 7 + rep + 1, "enter/exit data: b[7] = %g", b[7]);

    // A deferred target region is a task: depend orders it, taskwait waits.
    int x = 0, y = 0;
#pragma omp parallel
#pragma omp single
    {
#pragma omp target nowait depend(out : x) map(tofrom : x)
      x = 5;
#pragma omp task depend(in : x) shared(x, y)
      y = x + 1;
#pragma omp taskwait
    }
    CHECK(x == 5 && y == 6, "target nowait with depend: x %d y %d", x, y);
  }
  puts("target: ok");
  return 0;
}
