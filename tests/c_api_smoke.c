/* Compiled as C (C99, -Wpedantic -Werror): proves that include/mote.h is valid
 * C and that a C program can drive a runtime through it. */
#include <mote.h>

#include <stdio.h>
#include <string.h>

static void square(void* arg) {
  long* v = (long*)arg;
  *v = *v * *v;
}

/* Squares two halves of an array with mote_join, inside mote_run. */
struct halves {
  long* values;
  int n;
  mote_status status;
};

static void square_range(void* arg) {
  struct halves* h = (struct halves*)arg;
  int i;
  for (i = 0; i < h->n; ++i) square(&h->values[i]);
}

static void square_both_halves(void* arg) {
  struct halves* all = (struct halves*)arg;
  struct halves lo, hi;
  lo.values = all->values;
  lo.n = all->n / 2;
  hi.values = all->values + lo.n;
  hi.n = all->n - lo.n;
  all->status = mote_join(square_range, &lo, square_range, &hi);
}

static void increment(void* p) { *(long*)p += 1; }

/* mote_parallel_for: doubles values[begin - offset .. end - offset). */
struct doubling {
  long* values;
  long long offset;
};

static void double_range(void* ctx, long long begin, long long end) {
  struct doubling* d = (struct doubling*)ctx;
  long long i;
  for (i = begin; i < end; ++i) d->values[i - d->offset] *= 2;
}

static void count_calls(void* ctx, long long begin, long long end) {
  (void)begin;
  (void)end;
  *(long*)ctx += 1;
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
  if (strcmp(mote_strerror(MOTE_EUSAGE), "unknown status") == 0) return 9;

  /* mote_run on a worker, and mote_join there. */
  {
    struct halves all;
    all.values = values;
    all.n = 64;
    all.status = MOTE_EINTERNAL;
    for (i = 0; i < 64; ++i) values[i] = i;
    if (mote_run(rt, square_both_halves, &all) != MOTE_OK) return 19;
    if (all.status != MOTE_OK) return 20;
    sum = 0;
    for (i = 0; i < 64; ++i) sum += values[i];
    if (sum != 63L * 64 * 127 / 6) return 21;
    if (mote_run(NULL, square, NULL) != MOTE_EINVAL) return 22;
    if (mote_join(NULL, NULL, square, NULL) != MOTE_EINVAL) return 23;
  }

  /* Data-flow: a chain of 100 increments of one counter, in spawn order. */
  {
    mote_dataflow* df = NULL;
    mote_access acc;
    long counter = 0;
    acc.address = &counter;
    acc.size = sizeof counter;
    acc.type = MOTE_INOUT;
    if (mote_dataflow_create(rt, &df) != MOTE_OK) return 24;
    for (i = 0; i < 100; ++i) {
      if (mote_dataflow_spawn(df, &acc, 1, increment, &counter) != MOTE_OK) return 25;
    }
    if (mote_dataflow_wait(df) != MOTE_OK) return 26;
    if (counter != 100) return 27;
    acc.type = (mote_access_type)9;
    if (mote_dataflow_spawn(df, &acc, 1, increment, &counter) != MOTE_EINVAL) return 28;
    if (mote_dataflow_destroy(df) != MOTE_OK) return 29;
  }

  /* mote_parallel_for over a negative range, with and without a grain. */
  {
    struct doubling d;
    long calls = 0;
    d.values = values;
    d.offset = -32;
    for (i = 0; i < 64; ++i) values[i] = i;
    if (mote_parallel_for(rt, -32, 32, 0, double_range, &d) != MOTE_OK) return 30;
    if (mote_parallel_for(rt, -32, 32, 5, double_range, &d) != MOTE_OK) return 31;
    sum = 0;
    for (i = 0; i < 64; ++i) sum += values[i];
    if (sum != 4L * 63 * 64 / 2) return 32;
    if (mote_parallel_for(rt, 10, 10, 0, count_calls, &calls) != MOTE_OK || calls != 0) return 33;
    if (mote_parallel_for(rt, 10, 0, 3, count_calls, &calls) != MOTE_OK || calls != 0) return 34;
    if (mote_parallel_for(rt, 0, 10, 0, NULL, NULL) != MOTE_EINVAL) return 35;
    if (mote_parallel_for(NULL, 0, 10, 0, count_calls, &calls) != MOTE_EINVAL) return 36;
    if (mote_parallel_for(rt, 0, 10, -1, count_calls, &calls) != MOTE_EINVAL || calls != 0)
      return 37;
  }

  if (mote_task_group_destroy(group) != MOTE_OK) return 10;
  if (mote_finalize(rt) != MOTE_OK) return 11;

  /* The assistant: half of the squares there, half here. */
  {
    mote_assistant_options aopt;
    mote_assistant* helper = NULL;
    mote_assistant_options_init(&aopt);
    aopt.capacity = 16;
    if (mote_assistant_create(&aopt, &helper) != MOTE_OK) return 12;
    mote_assistant_wake_up_hint(helper);
    for (i = 0; i < 64; ++i) {
      values[i] = i;
      if (i % 2 == 0) {
        if (mote_assistant_submit(helper, square, &values[i]) != MOTE_OK) return 13;
      } else {
        square(&values[i]);
      }
    }
    if (mote_assistant_wait(helper) != MOTE_OK) return 14;
    mote_assistant_sleep_hint(helper);
    sum = 0;
    for (i = 0; i < 64; ++i) sum += values[i];
    if (sum != 63L * 64 * 127 / 6) return 15;
    aopt.capacity = 3; /* not a power of two */
    {
      mote_assistant* bad = NULL;
      if (mote_assistant_create(&aopt, &bad) != MOTE_ECONFIG || bad != NULL) return 16;
    }
    if (mote_assistant_submit(NULL, square, NULL) != MOTE_EINVAL) return 17;
    if (mote_assistant_destroy(helper) != MOTE_OK) return 18;
  }
  puts("c_api_smoke: ok");
  return 0;
}
