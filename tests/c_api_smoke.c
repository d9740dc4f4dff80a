/* Compiled as C (C99, -Wpedantic -Werror): proves that include/mote.h is valid
 * C and that a C program can drive a runtime through it. */
#include <mote.h>

#include <stdio.h>
#include <string.h>

static void square(void* arg) {
  long* v = (long*)arg;
  *v = *v * *v;
}

int main(void) {
  mote_options options;
  mote_runtime* rt = NULL;
  mote_task_group* group = NULL;
  long values[64];
  long sum = 0;
  int i;
  mote_status status;

  mote_options_init(&options);
  options.num_workers = 2;
  options.bind = "none";
  if (mote_init(&options, &rt) != MOTE_OK) {
    fprintf(stderr, "mote_init: %s\n", mote_last_error());
    return 1;
  }
  if (mote_num_workers(rt) != 2) return 2;
  if (mote_task_group_create(rt, &group) != MOTE_OK) return 3;
  for (i = 0; i < 64; ++i) {
    values[i] = i;
    if (mote_task_group_spawn(group, square, &values[i]) != MOTE_OK) return 4;
  }
  status = mote_task_group_wait(group);
  if (status != MOTE_OK) {
    fprintf(stderr, "wait: %s: %s\n", mote_strerror(status), mote_last_error());
    return 5;
  }
  for (i = 0; i < 64; ++i) sum += values[i];
  if (sum != 63L * 64 * 127 / 6) return 6; /* sum of squares 0..63 */

  /* Errors come back as codes, with a message. */
  if (mote_task_group_spawn(group, NULL, NULL) != MOTE_EINVAL) return 7;
  if (strlen(mote_last_error()) == 0) return 8;
  if (strcmp(mote_strerror((mote_status)99), "unknown status") != 0) return 9;

  if (mote_task_group_destroy(group) != MOTE_OK) return 10;
  if (mote_finalize(rt) != MOTE_OK) return 11;
  puts("c_api_smoke: ok");
  return 0;
}
