// GOMP_task's copy-function and alignment arguments: firstprivate of a
// large type with a 64-byte aligned member and a copy constructor makes gcc
// pass a cpyfn, an arg_size of several kilobytes and an arg_align of 64.
// Undeferred tasks (if(0)) run to completion before the encountering task
// goes on, deferred ones work on a snapshot taken when they were created;
// in both every copy is aligned, constructed once and destroyed once. An
// undeferred task with a dependence waits for the task it depends on.
#include <omp.h>

#include <atomic>
#include <cstdint>

#include "omp_check.h"

namespace {

std::atomic<long> constructed{0};
std::atomic<long> destroyed{0};

struct big {
  alignas(64) double values[500];
  int tag;
  big* self;  // where this object was constructed: it must not be moved by memcpy

  explicit big(int t) : tag(t), self(this) {
    for (int i = 0; i < 500; ++i) values[i] = t + i * 0.5;
    constructed.fetch_add(1, std::memory_order_relaxed);
  }
  big(const big& other) : tag(other.tag), self(this) {
    for (int i = 0; i < 500; ++i) values[i] = other.values[i];
    constructed.fetch_add(1, std::memory_order_relaxed);
  }
  big& operator=(const big&) = delete;
  ~big() { destroyed.fetch_add(1, std::memory_order_relaxed); }

  bool intact(int t) const {
    if (tag != t || self != this) return false;
    for (int i = 0; i < 500; i += 37) {
      if (values[i] != t + i * 0.5) return false;
    }
    return true;
  }
};
static_assert(alignof(big) == 64, "the member's alignment makes the type's");

bool aligned(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }

}  // namespace

int main() {
  const int tasks = OMPT_SIZE(20000, 2000);
  int bad_undeferred = 0, bad_deferred = 0, late = 0;
#pragma omp parallel reduction(+ : bad_undeferred, bad_deferred, late)
#pragma omp single
  {
    for (int k = 0; k < tasks; ++k) {
      big b(k);
      int ran = 0;
#pragma omp task if (0) firstprivate(b) shared(ran, bad_undeferred)
      {
        if (!aligned(&b) || !b.intact(k)) bad_undeferred++;
        ran = 1;
      }
      // Undeferred: done before the encountering task goes on.
      if (ran != 1) late++;
#pragma omp task firstprivate(b, k) shared(bad_deferred)
      {
        if (!aligned(&b) || !b.intact(k)) {
#pragma omp atomic
          bad_deferred++;
        }
      }
      // The deferred task copied b when it was created: this change is not its.
      b.tag = -1;
    }
  }
  CHECK(bad_undeferred == 0,
        "%d undeferred tasks found their firstprivate copy misaligned or wrong", bad_undeferred);
  CHECK(late == 0, "%d undeferred tasks had not run when the encountering task went on", late);
  CHECK(bad_deferred == 0, "%d deferred tasks found their firstprivate copy misaligned or wrong",
        bad_deferred);
  long made = constructed.load(), gone = destroyed.load();
  CHECK(made == gone, "%ld objects constructed, %ld destroyed", made, gone);
  // Each task's copy once (the originals are one per iteration too).
  CHECK(made == 3L * tasks, "%ld constructions for %d iterations of one original and two tasks",
        made, tasks);

  // An undeferred task with a dependence waits for its predecessor.
  int stale = 0;
#pragma omp parallel reduction(+ : stale)
#pragma omp single
  {
    for (int k = 0; k < OMPT_SIZE(2000, 200); ++k) {
      long x = 0;
#pragma omp task depend(out : x) shared(x)
      {
        volatile long work = 0;
        for (int i = 0; i < 1000; ++i) work = work + i;
        x = k + 1;
      }
#pragma omp task if (0) depend(in : x) shared(x, stale)
      {
        if (x != k + 1) stale++;
      }
#pragma omp taskwait
    }
  }
  CHECK(stale == 0, "%d undeferred tasks with depend(in) ran before their writer", stale);
  puts("task_undeferred: ok");
  return 0;
}
