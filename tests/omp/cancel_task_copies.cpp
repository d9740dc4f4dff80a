// A cancelled taskgroup and the C++ objects its tasks were given: a task
// made with firstprivate objects (gcc passes a cpyfn that copy-constructs
// them, and puts their destructors at the end of the task's body) is
// counted alive from its creation, so each copy must be destroyed once
// whether the task ran, stopped at a cancellation point, or was cancelled
// before it started (GNU's library runs such a task's body then). Tasks made
// after the cancel make no copy.
//
//   cancel_task_copies on    OMP_CANCELLATION=true must be in force
//   cancel_task_copies off   OMP_CANCELLATION must be unset (or false)
#include <omp.h>

#include <atomic>

#include "omp_check.h"

namespace {

std::atomic<long> live{0};
std::atomic<long> made{0};

struct counted {
  long value = 0;
  counted() { up(); }
  counted(const counted& other) : value(other.value) { up(); }
  counted& operator=(const counted&) = delete;
  ~counted() { live.fetch_sub(1, std::memory_order_relaxed); }
  static void up() {
    live.fetch_add(1, std::memory_order_relaxed);
    made.fetch_add(1, std::memory_order_relaxed);
  }
};

bool enabled = false;

// Some work, so that tasks are still waiting when the taskgroup is cancelled.
void work() {
  volatile long sink = 0;
  for (int i = 0; i < 2000; ++i) sink = sink + i;
}

void cancel_with_pending_copies(int tasks) {
  std::atomic<int> bodies{0};
  {
    counted a, b;
#pragma omp parallel
#pragma omp single
#pragma omp taskgroup
    {
      for (int k = 0; k < tasks; ++k) {
#pragma omp task firstprivate(a, b, k) shared(bodies)
        {
          counted local;
          a.value += k;
          b.value -= k;
          work();
#pragma omp cancellation point taskgroup
          bodies.fetch_add(1, std::memory_order_relaxed);
        }
      }
      // Most of the tasks have not started yet: the undeferred task cancels
      // the taskgroup under them.
#pragma omp task if (0)
      {
#pragma omp cancel taskgroup
      }
      // Made after the cancel: with cancellation on, not made at all.
      for (int k = 0; k < tasks; ++k) {
#pragma omp task firstprivate(a) shared(bodies)
        {
          a.value += 1;
          bodies.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
  }
  CHECK(live.load() == 0,
        "%ld of %ld counted objects are still alive after the taskgroup (%d task bodies went on)",
        live.load(), made.load(), bodies.load());
  if (!enabled)
    CHECK(bodies.load() == 2 * tasks, "cancellation disabled: %d of %d task bodies ran",
          bodies.load(), 2 * tasks);
}

}  // namespace

int main(int argc, char** argv) {
  CHECK(argc == 2 && (strcmp(argv[1], "on") == 0 || strcmp(argv[1], "off") == 0),
        "usage: cancel_task_copies on|off");
  enabled = strcmp(argv[1], "on") == 0;
  CHECK(omp_get_cancellation() == enabled, "omp_get_cancellation() %d", omp_get_cancellation());
  for (int rep = 0; rep < OMPT_SIZE(20, 4); ++rep) cancel_with_pending_copies(OMPT_SIZE(400, 100));
  puts("cancel_task_copies: ok");
  return 0;
}
