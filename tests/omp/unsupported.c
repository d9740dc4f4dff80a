// An entry point of GNU's libgomp.so.1 that mote's does not implement:
// GOMP_offload_register_ver, which a program built for offloading calls to
// register its device images. mote's libgomp.so.1 has a stub for it that
// prints `mote: libgomp entry point GOMP_offload_register_ver is not
// implemented` on stderr and aborts; the ctest entry checks both. (Run only
// on mote's library: GNU's registers the image and returns.)
#include <stdio.h>

// libgomp's own declaration (gcc emits the call; no header declares it).
void GOMP_offload_register_ver(unsigned version, const void* host_table, int target_type,
                               const void* target_data);

int main(void) {
  // An empty host table: four pointers, all null (no functions, no variables).
  static const void* const host_table[4] = {0, 0, 0, 0};
  GOMP_offload_register_ver(1u << 16, host_table, 5 /* nvptx */, NULL);
  fprintf(stderr,
          "unsupported: GOMP_offload_register_ver returned; the stub should have aborted\n");
  return 1;
}
