/* The C API: status codes in, a message from mote_last_error() out. */
#include <mote.h>

#include <stdio.h>

static void square(void* arg) {
  long* v = (long*)arg;
  *v = *v * *v;
}

int main(void) {
  mote_options options;
  mote_runtime* rt;
  mote_task_group* group;
  long values[100];
  long sum = 0;
  int i;
  mote_status status;

  mote_options_init(&options); /* everything from MOTE_* variables... */
  options.num_workers = 2;     /* ...except the worker count */
  status = mote_init(&options, &rt);
  if (status != MOTE_OK) {
    fprintf(stderr, "mote_init: %s: %s\n", mote_strerror(status), mote_last_error());
    return 1;
  }

  mote_task_group_create(rt, &group);
  for (i = 0; i < 100; ++i) {
    values[i] = i;
    mote_task_group_spawn(group, square, &values[i]);
  }
  status = mote_task_group_wait(group);
  if (status != MOTE_OK) fprintf(stderr, "wait: %s\n", mote_last_error());
  for (i = 0; i < 100; ++i) sum += values[i];
  printf("sum of squares below 100 = %ld\n", sum);

  mote_task_group_destroy(group);
  mote_finalize(rt);
  return status == MOTE_OK && sum == 328350 ? 0 : 1;
}
