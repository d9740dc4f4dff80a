/* The C API: status codes in, a message from mote_last_error() out. A task
 * group for independent tasks, then mote_run and mote_join for a recursion. */
#include <mote.h>

#include <stdio.h>

static void square(void* arg) {
  long* v = (long*)arg;
  *v = *v * *v;
}

struct fib_arg {
  int n;
  long result;
};

/* Inside mote_run this is on a worker, so each mote_join splits right there. */
static void fib(void* p) {
  struct fib_arg* a = (struct fib_arg*)p;
  struct fib_arg x, y;
  if (a->n < 2) {
    a->result = a->n;
    return;
  }
  x.n = a->n - 1;
  y.n = a->n - 2;
  mote_join(fib, &x, fib, &y); /* C functions do not throw: it cannot fail here */
  a->result = x.result + y.result;
}

int main(void) {
  mote_options options;
  mote_runtime* rt;
  mote_task_group* group;
  long values[100];
  long sum = 0;
  int i;
  mote_status status;
  mote_status run_status;
  struct fib_arg top;

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

  top.n = 25;
  top.result = 0;
  run_status = mote_run(rt, fib, &top);
  if (run_status != MOTE_OK) fprintf(stderr, "mote_run: %s\n", mote_last_error());
  printf("fib(%d) = %ld\n", top.n, top.result);

  mote_finalize(rt);
  return status == MOTE_OK && sum == 328350 && run_status == MOTE_OK && top.result == 75025 ? 0 : 1;
}
