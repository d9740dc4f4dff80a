// target regions with no device (built with -foffload=disable): they run on
// the host (GOMP_target_ext's fallback), with omp_get_num_devices() == 0 and
// omp_is_initial_device() true inside; map clauses, target data, enter/exit
// data and update (GOMP_target_data_ext, GOMP_target_end_data,
// GOMP_target_enter_exit_data, GOMP_target_update_ext) keep host values;
// target teams distribute parallel for computes on the host; a deferred
// target (nowait) with a dependence is a task; the omp_target_* memory
// routines work on the host device.
#include <omp.h>

#include "omp_check.h"

enum { kN = 4096 };

int main(void) {
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
