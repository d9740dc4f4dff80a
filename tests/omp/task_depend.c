// GOMP_task with depend clauses: 100 000 tasks with random dependences (in,
// out, inout, mutexinoutset) on a few addresses, written both as plain
// clauses and with depend iterators. Each task records the values it found
// at the addresses it depends on (out and inout tasks also change them, in a
// way that depends on order; mutexinoutset tasks add, which does not); a
// serial replay in program order computes what each task must have found.
// While a task runs, flags check that nothing the dependences exclude runs
// beside it.
#include <omp.h>

#include "omp_check.h"

enum { kObjects = 16, kMaxDeps = 3 };
enum dep_type { kIn, kOut, kInout, kMutex };

struct task_desc {
  int n;
  int obj[kMaxDeps];
  enum dep_type type[kMaxDeps];
  // For the depend iterators: the objects of each type.
  int n_in, n_out, n_inout, n_mutex;
  int in[kMaxDeps], out[kMaxDeps], inout[kMaxDeps], mutex[kMaxDeps];
  int plain;  // 1: written with plain clauses, when there is one dependence
};

static long objs[kObjects];            // the addresses the tasks depend on
static unsigned long value[kObjects];  // what the tasks read and write
static int writers[kObjects];          // out/inout/mutexinoutset tasks running
static int readers[kObjects];          // in tasks running
static struct task_desc* descs;
static unsigned long* seen;  // per task: a hash of the values it found

static unsigned long mix(unsigned long v, long t) {
  return (v ^ (unsigned long)t) * 0x9E3779B97F4A7C15ul + 1;
}

static void describe(struct task_desc* d, uint64_t* rng) {
  memset(d, 0, sizeof *d);
  d->n = 1 + (int)(ompt_random(rng) % kMaxDeps);
  for (int k = 0; k < d->n; ++k) {
    int o;
    int fresh;
    do {  // distinct objects within one task
      o = (int)(ompt_random(rng) % kObjects);
      fresh = 1;
      for (int j = 0; j < k; ++j) fresh &= d->obj[j] != o;
    } while (!fresh);
    unsigned r = (unsigned)(ompt_random(rng) % 100);
    enum dep_type type = r < 40 ? kIn : r < 55 ? kOut : r < 80 ? kInout : kMutex;
    d->obj[k] = o;
    d->type[k] = type;
    switch (type) {
      case kIn:
        d->in[d->n_in++] = o;
        break;
      case kOut:
        d->out[d->n_out++] = o;
        break;
      case kInout:
        d->inout[d->n_inout++] = o;
        break;
      case kMutex:
        d->mutex[d->n_mutex++] = o;
        break;
    }
  }
  d->plain = d->n == 1 && (ompt_random(rng) & 1);
}

// What the task does, in the task (checked = 1) or in the serial replay.
static unsigned long apply(long t, const struct task_desc* d, int checked) {
  if (checked) {
    for (int k = 0; k < d->n; ++k) {
      int o = d->obj[k];
      if (d->type[k] == kIn) {
        __atomic_fetch_add(&readers[o], 1, __ATOMIC_SEQ_CST);
        CHECK(__atomic_load_n(&writers[o], __ATOMIC_SEQ_CST) == 0,
              "task %ld (in on object %d) runs beside a task that writes it", t, o);
      } else {
        CHECK(__atomic_exchange_n(&writers[o], 1, __ATOMIC_SEQ_CST) == 0,
              "task %ld (%s on object %d) runs beside another writer of it", t,
              d->type[k] == kMutex ? "mutexinoutset" : "out/inout", o);
        CHECK(__atomic_load_n(&readers[o], __ATOMIC_SEQ_CST) == 0,
              "task %ld (%s on object %d) runs beside a reader of it", t,
              d->type[k] == kMutex ? "mutexinoutset" : "out/inout", o);
      }
    }
  }
  unsigned long h = 0;
  for (int k = 0; k < d->n; ++k) {
    int o = d->obj[k];
    switch (d->type[k]) {
      case kIn:
        h = mix(h, (long)value[o]);
        break;
      case kOut:
      case kInout:
        h = mix(h, (long)value[o]);
        value[o] = mix(value[o], t);
        break;
      case kMutex:
        value[o] += (unsigned long)t * 2654435761ul;  // commutative: any order in the set
        break;
    }
  }
  if (checked) {
    for (int k = 0; k < d->n; ++k) {
      int o = d->obj[k];
      if (d->type[k] == kIn) {
        __atomic_fetch_sub(&readers[o], 1, __ATOMIC_SEQ_CST);
      } else {
        __atomic_store_n(&writers[o], 0, __ATOMIC_SEQ_CST);
      }
    }
  }
  return h;
}

static void run_task(long t) { seen[t] = apply(t, &descs[t], 1); }

static void create_task(long t) {
  const struct task_desc* d = &descs[t];
  if (d->plain) {
    int o = d->obj[0];
    switch (d->type[0]) {
      case kIn:
#pragma omp task firstprivate(t) depend(in : objs[o])
        run_task(t);
        break;
      case kOut:
#pragma omp task firstprivate(t) depend(out : objs[o])
        run_task(t);
        break;
      case kInout:
#pragma omp task firstprivate(t) depend(inout : objs[o])
        run_task(t);
        break;
      case kMutex:
#pragma omp task firstprivate(t) depend(mutexinoutset : objs[o])
        run_task(t);
        break;
    }
    return;
  }
#pragma omp task firstprivate(t) depend(iterator(j = 0                                 \
                                                 : d->n_in),                           \
                                        in                                             \
                                        : objs[d->in[j]]) depend(iterator(j = 0        \
                                                                          : d->n_out), \
                                                                 out                   \
                                                                 : objs[d->out[j]])    \
    depend(iterator(j = 0                                                              \
                    : d->n_inout),                                                     \
           inout                                                                       \
           : objs[d->inout[j]]) depend(iterator(j = 0                                  \
                                                : d->n_mutex),                         \
                                       mutexinoutset                                   \
                                       : objs[d->mutex[j]])
  run_task(t);
}

int main(void) {
  const long tasks = OMPT_SIZE(100000, 10000);
  descs = malloc((size_t)tasks * sizeof *descs);
  seen = malloc((size_t)tasks * sizeof *seen);
  CHECK(descs != NULL && seen != NULL, "out of memory");
  uint64_t rng = 20240601;
  for (long t = 0; t < tasks; ++t) describe(&descs[t], &rng);

  // Two rounds: tasks created by one thread while the others run them, the
  // creator waiting for all of them after every 2000 (then every 500). GNU's
  // libgomp slows down more than linearly as a graph of pending tasks grows:
  // one graph of 100 000 tasks took it minutes on one thread.
  for (int round = 0; round < 2; ++round) {
    memset(value, 0, sizeof value);
    memset(seen, 0, (size_t)tasks * sizeof *seen);
#pragma omp parallel
#pragma omp single
    {
      for (long t = 0; t < tasks; ++t) {
        create_task(t);
        if (t % (round == 0 ? 2000 : 500) == 499) {
#pragma omp taskwait
        }
      }
    }
    unsigned long final_values[kObjects];
    memcpy(final_values, value, sizeof value);

    memset(value, 0, sizeof value);
    for (long t = 0; t < tasks; ++t) {
      unsigned long want = apply(t, &descs[t], 0);
      if (seen[t] != want) {
        const struct task_desc* d = &descs[t];
        FAIL(
            "round %d: task %ld (%d dependences, first: object %d type %d, %s) found %lx, the "
            "serial replay %lx",
            round, t, d->n, d->obj[0], (int)d->type[0], d->plain ? "plain" : "iterator", seen[t],
            want);
      }
    }
    for (int o = 0; o < kObjects; ++o) {
      CHECK(final_values[o] == value[o], "round %d: object %d ends as %lx, the serial replay %lx",
            round, o, final_values[o], value[o]);
    }
  }
  free(descs);
  free(seen);
  puts("task_depend: ok");
  return 0;
}
