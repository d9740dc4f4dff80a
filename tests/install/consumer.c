/* The C API from outside mote's tree (the pkg-config consumer builds it). */
#include <mote.h>

#include <stdio.h>

static void add(void* arg) { __atomic_fetch_add((long*)arg, 1, __ATOMIC_RELAXED); }

int main(void) {
  mote_options options;
  mote_runtime* rt;
  mote_task_group* g;
  long count = 0;
  int i;
  mote_options_init(&options);
  options.num_workers = 2;
  options.bind = "none";
  if (mote_init(&options, &rt) != MOTE_OK) {
    fprintf(stderr, "mote_init: %s\n", mote_last_error());
    return 1;
  }
  if (mote_task_group_create(rt, &g) != MOTE_OK) return 2;
  for (i = 0; i < 100; ++i) mote_task_group_spawn(g, add, &count);
  if (mote_task_group_wait(g) != MOTE_OK || count != 100) return 3;
  if (mote_task_group_destroy(g) != MOTE_OK || mote_finalize(rt) != MOTE_OK) return 4;
  puts("c consumer: ok");
  return 0;
}
