// The OpenMP locks: omp_{init,destroy,set,unset,test}_{lock,nest_lock}, in
// both symbol versions (OMP_3.0, the default, and OMP_1.0, the OpenMP 2.5
// forms that old binaries call).
//
// A lock is one futex word in the omp_lock_t the program owns (4 bytes, so
// mote::ticket_lock, which needs cache lines of its own, does not fit):
// 0 free, 1 held, 2 held and someone may sleep on it. A waiter spins briefly
// (pause, a yield now and then), then sleeps on the word with the core's
// event count in its one-word form (src/wait/event_count.hpp): the word is
// both the condition and the announcement, so its modification order alone
// decides who comes first. The argument, once:
//   - a waiter announces by exchange(2) and sleeps only while the word is 2;
//   - the holder releases by exchange(0) and wakes one sleeper when it saw 2.
//   Both are read-modify-writes of the one word: either the release comes
//   first (the waiter's exchange returns 0: it holds the lock, never sleeps),
//   or the announcement does (the release returns 2 and wakes; a waiter that
//   has not slept yet finds the word changed and the futex refuses to sleep).
//   A woken waiter exchanges 2 again: it cannot know whether others sleep,
//   so it keeps the word at "someone may" (one wake-up spent for nothing at
//   worst).
//
// A nest lock adds its owner and a count. The owner is the task that set it
// (OpenMP 3.0 on): the OpenMP model's current task on the calling thread,
// implicit, undeferred or explicit. So a task if(0) does not own its
// parent's lock, nor does a task that the task scheduling constraint lets
// start on top of the owner (a descendant at taskwait). The OpenMP 2.5
// versions (OMP_1.0) keep 2.5's rule: the owner is the thread.
//
//   omp_lock_t l; omp_init_lock(&l);
//   omp_set_lock(&l); ... omp_unset_lock(&l);
//   omp_destroy_lock(&l);
#include <atomic>
#include <cstdint>
#include <new>

#include "mote/detail/platform.hpp"
#include "omp/gomp/abi.hpp"
#include "omp/team.hpp"
#include "wait/event_count.hpp"

namespace {

using mote::detail::event_word;

constexpr std::uint32_t kFree = 0;
constexpr std::uint32_t kHeld = 1;
constexpr std::uint32_t kMaySleep = 2;

// How long a waiter spins before it sleeps, and how often it yields while it
// spins (mote's lock policy: src/sync/ticket_wait.cpp).
constexpr std::int64_t kSpinNs = 100'000;
constexpr std::int64_t kYieldEveryNs = 20'000;

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
              alignof(std::atomic<std::uint32_t>) <= alignof(mote_omp_lock_t));
static_assert(sizeof(std::atomic<void*>) == sizeof(void*) &&
              alignof(std::atomic<void*>) <= alignof(mote_omp_nest_lock_t));
static_assert(sizeof(mote_omp_lock_t) == 4 && sizeof(mote_omp_nest_lock_25_t) == 8);

// The word inside a lock the program owns. Created by the omp_init_* call
// (placement new), used by every other.
std::atomic<std::uint32_t>* word_at(void* storage) {
  return std::launder(static_cast<std::atomic<std::uint32_t>*>(storage));
}
void make_word(void* storage, std::uint32_t value) {
  new (storage) std::atomic<std::uint32_t>(value);
}

// ---- A plain lock on one word ------------------------------------------------------

bool try_take(std::atomic<std::uint32_t>& w) {
  std::uint32_t expected = kFree;
  // Acquire: pairs with release()'s exchange; the last holder's critical
  // section happens before ours.
  return w.compare_exchange_strong(expected, kHeld, std::memory_order_acquire,
                                   std::memory_order_relaxed);
}

// The spin before the sleep: true once the word was seen free and taken.
bool spin_take(std::atomic<std::uint32_t>& w) {
  const std::int64_t start = mote::detail::now_ns();
  std::int64_t last_yield = start;
  for (unsigned looks = 1;; ++looks) {
    // Relaxed: only a hint that the CAS may succeed; the CAS acquires.
    if (w.load(std::memory_order_relaxed) == kFree && try_take(w)) return true;
    mote::detail::cpu_pause();
    mote::detail::cpu_pause();
    if ((looks & 15) != 0) continue;
    const std::int64_t now = mote::detail::now_ns();
    if (now - start >= kSpinNs) return false;
    if (now - last_yield >= kYieldEveryNs) {
      // The holder may be waiting for this CPU.
      mote::detail::thread_yield();
      last_yield = now;
    }
  }
}

void take(std::atomic<std::uint32_t>& w) {
  if (MOTE_LIKELY(try_take(w)) || spin_take(w)) return;
  // Acquire: as in try_take (an exchange that returns kFree takes the lock).
  while (w.exchange(kMaySleep, std::memory_order_acquire) != kFree)
    event_word::commit(&w, kMaySleep);
}

void release(std::atomic<std::uint32_t>& w) {
  // Release: hands the critical section to the next holder's acquire.
  if (w.exchange(kFree, std::memory_order_release) == kMaySleep) event_word::notify(&w, 1);
}

// ---- Owners ------------------------------------------------------------------------------

// The calling task, as a nest lock's owner: its record's address (unique
// among the tasks that exist; a task that ends holding a nest lock is the
// program's error, as in OpenMP).
void* this_owner() { return mote::omp::current().task; }

// The OpenMP 2.5 nest lock has no room for a pointer: its word holds the
// owner's number (low 31 bits) and a may-sleep flag (bit 31); 0 is free.
constexpr std::uint32_t kOwnerMask = 0x7fffffffu;
constexpr std::uint32_t kSleepBit = 0x80000000u;

std::uint32_t this_owner_number() {
  static std::atomic<std::uint32_t> next{1};
  // Relaxed: a unique number is all it gives.
  static thread_local const std::uint32_t number = [] {
    std::uint32_t n = next.fetch_add(1, std::memory_order_relaxed) & kOwnerMask;
    return n == 0 ? 1 : n;
  }();
  return number;
}

bool try_take_25(std::atomic<std::uint32_t>& w, std::uint32_t me) {
  std::uint32_t expected = kFree;
  // Acquire: as try_take.
  return w.compare_exchange_strong(expected, me, std::memory_order_acquire,
                                   std::memory_order_relaxed);
}

void take_25(std::atomic<std::uint32_t>& w, std::uint32_t me) {
  if (try_take_25(w, me)) return;
  const std::int64_t start = mote::detail::now_ns();
  for (unsigned looks = 1;; ++looks) {
    // Relaxed: a hint, as in spin_take.
    if (w.load(std::memory_order_relaxed) == kFree && try_take_25(w, me)) return;
    mote::detail::cpu_pause();
    if ((looks & 15) == 0 && mote::detail::now_ns() - start >= kSpinNs) break;
  }
  // The same protocol as take(), with the flag beside the owner: announce by
  // setting the flag (a CAS from the value seen), sleep while the word still
  // holds that owner with the flag; a free word is taken with the flag set.
  std::uint32_t seen = w.load(std::memory_order_relaxed);  // the CASes below decide
  for (;;) {
    if (seen == kFree) {
      // Acquire: as try_take.
      if (w.compare_exchange_weak(seen, me | kSleepBit, std::memory_order_acquire,
                                  std::memory_order_relaxed)) {
        return;
      }
      continue;
    }
    if ((seen & kSleepBit) == 0 &&
        !w.compare_exchange_weak(seen, seen | kSleepBit, std::memory_order_relaxed,
                                 std::memory_order_relaxed)) {
      continue;  // seen is the new value: look again
    }
    event_word::commit(&w, seen | kSleepBit);
    seen = w.load(std::memory_order_relaxed);
  }
}

void release_25(std::atomic<std::uint32_t>& w) {
  // Release: as release().
  if ((w.exchange(kFree, std::memory_order_release) & kSleepBit) != 0) event_word::notify(&w, 1);
}

// ---- The OpenMP 3.0 nest lock: word, count, owner ---------------------------------

struct nest_lock {
  std::atomic<std::uint32_t> word;
  std::uint32_t count;  // the owner's alone
  // Read by any task that asks whether it owns the lock; only the owner
  // writes its own address there, so a task sees itself only when it is the
  // owner (coherence: a task runs on one thread, which never reads back its
  // own older store).
  std::atomic<void*> owner;
};
static_assert(sizeof(nest_lock) <= sizeof(mote_omp_nest_lock_t) &&
              alignof(nest_lock) <= alignof(mote_omp_nest_lock_t));

nest_lock* nest_at(void* storage) { return std::launder(static_cast<nest_lock*>(storage)); }

}  // namespace

extern "C" {

// ---- OMP_3.0 (the default versions) --------------------------------------------------

MOTE_GOMP_EXPORT void mote_gomp_omp_init_lock_OMP_3_0(mote_omp_lock_t* lock) {
  make_word(lock, kFree);
}
MOTE_GOMP_VERSIONED(omp_init_lock, "OMP_3.0", mote_gomp_omp_init_lock_OMP_3_0, "@@");

MOTE_GOMP_EXPORT void mote_gomp_omp_destroy_lock_OMP_3_0(mote_omp_lock_t* /*lock*/) {}
MOTE_GOMP_VERSIONED(omp_destroy_lock, "OMP_3.0", mote_gomp_omp_destroy_lock_OMP_3_0, "@@");

MOTE_GOMP_EXPORT void mote_gomp_omp_set_lock_OMP_3_0(mote_omp_lock_t* lock) {
  take(*word_at(lock));
}
MOTE_GOMP_VERSIONED(omp_set_lock, "OMP_3.0", mote_gomp_omp_set_lock_OMP_3_0, "@@");

MOTE_GOMP_EXPORT void mote_gomp_omp_unset_lock_OMP_3_0(mote_omp_lock_t* lock) {
  release(*word_at(lock));
}
MOTE_GOMP_VERSIONED(omp_unset_lock, "OMP_3.0", mote_gomp_omp_unset_lock_OMP_3_0, "@@");

MOTE_GOMP_EXPORT int mote_gomp_omp_test_lock_OMP_3_0(mote_omp_lock_t* lock) {
  return try_take(*word_at(lock)) ? 1 : 0;
}
MOTE_GOMP_VERSIONED(omp_test_lock, "OMP_3.0", mote_gomp_omp_test_lock_OMP_3_0, "@@");

MOTE_GOMP_EXPORT void mote_gomp_omp_init_nest_lock_OMP_3_0(mote_omp_nest_lock_t* lock) {
  nest_lock* n = new (lock) nest_lock;
  n->word.store(kFree, std::memory_order_relaxed);  // not shared yet
  n->count = 0;
  n->owner.store(nullptr, std::memory_order_relaxed);
}
MOTE_GOMP_VERSIONED(omp_init_nest_lock, "OMP_3.0", mote_gomp_omp_init_nest_lock_OMP_3_0, "@@");

MOTE_GOMP_EXPORT void mote_gomp_omp_destroy_nest_lock_OMP_3_0(mote_omp_nest_lock_t* /*lock*/) {}
MOTE_GOMP_VERSIONED(omp_destroy_nest_lock, "OMP_3.0", mote_gomp_omp_destroy_nest_lock_OMP_3_0, "@@");

MOTE_GOMP_EXPORT void mote_gomp_omp_set_nest_lock_OMP_3_0(mote_omp_nest_lock_t* lock) {
  nest_lock* n = nest_at(lock);
  void* const me = this_owner();
  // Relaxed: see nest_lock::owner.
  if (n->owner.load(std::memory_order_relaxed) != me) {
    take(n->word);
    n->owner.store(me, std::memory_order_relaxed);
  }
  ++n->count;
}
MOTE_GOMP_VERSIONED(omp_set_nest_lock, "OMP_3.0", mote_gomp_omp_set_nest_lock_OMP_3_0, "@@");

MOTE_GOMP_EXPORT void mote_gomp_omp_unset_nest_lock_OMP_3_0(mote_omp_nest_lock_t* lock) {
  nest_lock* n = nest_at(lock);
  if (--n->count == 0) {
    // Relaxed: the release of the word publishes it with the rest.
    n->owner.store(nullptr, std::memory_order_relaxed);
    release(n->word);
  }
}
MOTE_GOMP_VERSIONED(omp_unset_nest_lock, "OMP_3.0", mote_gomp_omp_unset_nest_lock_OMP_3_0, "@@");

// The new nesting count, or 0 when another owner holds it.
MOTE_GOMP_EXPORT int mote_gomp_omp_test_nest_lock_OMP_3_0(mote_omp_nest_lock_t* lock) {
  nest_lock* n = nest_at(lock);
  void* const me = this_owner();
  // Relaxed: see nest_lock::owner.
  if (n->owner.load(std::memory_order_relaxed) != me) {
    if (!try_take(n->word)) return 0;
    n->owner.store(me, std::memory_order_relaxed);
  }
  return static_cast<int>(++n->count);
}
MOTE_GOMP_VERSIONED(omp_test_nest_lock, "OMP_3.0", mote_gomp_omp_test_nest_lock_OMP_3_0, "@@");

// ---- OMP_1.0 (OpenMP 2.5) ---------------------------------------------------------------
// The plain lock is the same word. The nest lock is two ints: the word
// (owner number and flag) and the count.

MOTE_GOMP_EXPORT void mote_gomp_omp_init_lock_OMP_1_0(mote_omp_lock_t* lock) {
  make_word(lock, kFree);
}
MOTE_GOMP_VERSIONED(omp_init_lock, "OMP_1.0", mote_gomp_omp_init_lock_OMP_1_0, "@");

MOTE_GOMP_EXPORT void mote_gomp_omp_destroy_lock_OMP_1_0(mote_omp_lock_t* /*lock*/) {}
MOTE_GOMP_VERSIONED(omp_destroy_lock, "OMP_1.0", mote_gomp_omp_destroy_lock_OMP_1_0, "@");

MOTE_GOMP_EXPORT void mote_gomp_omp_set_lock_OMP_1_0(mote_omp_lock_t* lock) {
  take(*word_at(lock));
}
MOTE_GOMP_VERSIONED(omp_set_lock, "OMP_1.0", mote_gomp_omp_set_lock_OMP_1_0, "@");

MOTE_GOMP_EXPORT void mote_gomp_omp_unset_lock_OMP_1_0(mote_omp_lock_t* lock) {
  release(*word_at(lock));
}
MOTE_GOMP_VERSIONED(omp_unset_lock, "OMP_1.0", mote_gomp_omp_unset_lock_OMP_1_0, "@");

MOTE_GOMP_EXPORT int mote_gomp_omp_test_lock_OMP_1_0(mote_omp_lock_t* lock) {
  return try_take(*word_at(lock)) ? 1 : 0;
}
MOTE_GOMP_VERSIONED(omp_test_lock, "OMP_1.0", mote_gomp_omp_test_lock_OMP_1_0, "@");

MOTE_GOMP_EXPORT void mote_gomp_omp_init_nest_lock_OMP_1_0(mote_omp_nest_lock_25_t* lock) {
  make_word(&lock->word, kFree);
  lock->count = 0;
}
MOTE_GOMP_VERSIONED(omp_init_nest_lock, "OMP_1.0", mote_gomp_omp_init_nest_lock_OMP_1_0, "@");

MOTE_GOMP_EXPORT void mote_gomp_omp_destroy_nest_lock_OMP_1_0(mote_omp_nest_lock_25_t* /*lock*/) {}
MOTE_GOMP_VERSIONED(omp_destroy_nest_lock, "OMP_1.0", mote_gomp_omp_destroy_nest_lock_OMP_1_0, "@");

MOTE_GOMP_EXPORT void mote_gomp_omp_set_nest_lock_OMP_1_0(mote_omp_nest_lock_25_t* lock) {
  std::atomic<std::uint32_t>& w = *word_at(&lock->word);
  const std::uint32_t me = this_owner_number();
  // Relaxed: only the owner stores its own number (as nest_lock::owner).
  if ((w.load(std::memory_order_relaxed) & kOwnerMask) != me) take_25(w, me);
  ++lock->count;
}
MOTE_GOMP_VERSIONED(omp_set_nest_lock, "OMP_1.0", mote_gomp_omp_set_nest_lock_OMP_1_0, "@");

MOTE_GOMP_EXPORT void mote_gomp_omp_unset_nest_lock_OMP_1_0(mote_omp_nest_lock_25_t* lock) {
  if (--lock->count == 0) release_25(*word_at(&lock->word));
}
MOTE_GOMP_VERSIONED(omp_unset_nest_lock, "OMP_1.0", mote_gomp_omp_unset_nest_lock_OMP_1_0, "@");

MOTE_GOMP_EXPORT int mote_gomp_omp_test_nest_lock_OMP_1_0(mote_omp_nest_lock_25_t* lock) {
  std::atomic<std::uint32_t>& w = *word_at(&lock->word);
  const std::uint32_t me = this_owner_number();
  // Relaxed: as in omp_set_nest_lock.
  if ((w.load(std::memory_order_relaxed) & kOwnerMask) != me && !try_take_25(w, me)) return 0;
  return static_cast<int>(++lock->count);
}
MOTE_GOMP_VERSIONED(omp_test_nest_lock, "OMP_1.0", mote_gomp_omp_test_nest_lock_OMP_1_0, "@");

}  // extern "C"
