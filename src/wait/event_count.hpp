// The event count: the one way a mote thread sleeps until another thread
// makes something true. Every wait in the tree (an idle worker, a join waiting
// for its thief, a task group, runtime::run, a loop's leader, a queue or a
// channel, a ticket lock, an assistant and its owner) spins first on
// idle_wait (wait/idle.hpp: the spin window, the yields, the machine's
// oversubscription, the doubling timeouts) and then sleeps here. Nothing else
// calls the futex.
//
// A wait has four steps, and a wake-up one:
//
//   waiter:    prepare  (announce: "I am about to sleep")
//              look     (the caller's own test of its condition)
//              cancel   (the condition holds: take the announcement back)
//           or commit   (sleep, unless a notifier came since prepare)
//   notifier:  [the store that makes the condition true]
//              notify   (if someone announced: wake it, or cancel it)
//
// It comes in three forms, one protocol:
//
//  - event_count: one shared futex word (an epoch) and a count of waiters.
//    Any number of waiters, woken all at once or one at a time. A queue's
//    wait point, a ticket lock's slot, a barrier, a polling service.
//  - waiter_slot: a word per waiter (awake / announced / asleep), and
//    optionally a count of waiters shared by a set of them. The notifier
//    chooses whom to wake (an idle worker pinned to the caller's CPU, the
//    next one round the ring), never spends a wake-up on a waiter that is
//    awake or already woken, and can cancel an announcement instead of
//    sleeping and waking. A worker's park word, an assistant's.
//  - event_word: the word is the condition itself (a task's state, a group's
//    count, a loop's pending count, a flag): the waiter announces by a
//    read-modify-write on it (a "parked" state or bit) and sleeps while it
//    holds the announced value; the notifier's own read-modify-write tells it
//    whether anyone is parked. One location, so its modification order alone
//    decides who comes first: no fence, and no Dekker pair.
//
// ---- Why no wake-up is lost (the two forms with a separate announcement) ---
//
// The waiter and the notifier each write one location and then read the
// other's; the store-load pattern of Dekker's algorithm:
//
//   waiter                               notifier
//   A: announce (waiters += 1, or        C: store the condition
//      its word = announced)             Y: seq_cst fence
//   X: seq_cst fence                     N: load the announcement
//   L: look at the condition
//
// Claim: L sees C, or N sees A (or something later in its location's order).
// Suppose neither: L reads a value before C (L is coherence-ordered before
// C), and N reads a value before A (N is coherence-ordered before A). C++20
// [atomics.order] p4 puts the seq_cst fences in the single total order S
// with: if a fence F happens before an operation P, P is coherence-ordered
// before Q, and Q happens before a fence G, then F precedes G in S. With
// F = X, P = L, Q = C, G = Y: X precedes Y. With F = Y, P = N, Q = A (A is
// sequenced before X), G = X: Y precedes X. Both cannot hold, so one side
// sees the other:
//   - L sees C: the waiter cancels, never sleeps;
//   - N sees A: the notifier wakes it. If the waiter has not slept yet, the
//     wake-up still reaches it: event_count's notifier moves the epoch, and
//     the futex sleeps only while the epoch is the one the waiter read before
//     announcing; waiter_slot's notifier moves the word out of "announced",
//     so the waiter's commit (a CAS from announced to asleep) fails, and a
//     word moved out of "asleep" ends the sleep the same way.
// A notifier that sees the announcement after the waiter has left (it found
// the condition, or was woken by another) spends one futex call for
// nothing; never more.
//
// The fences are the event count's: prepare ends with X (event_count_fence),
// and notify_one/notify_all/notify begin with Y. Two cheaper notifier halves
// keep hot paths as they are; the same argument covers them, with the
// seq_cst operation in S in place of the fence:
//   - the condition's store C is itself a seq_cst store or read-modify-write
//     and N a seq_cst load (a split deque's sharing CAS, the injection count,
//     a ticket lock's grant): C precedes N in S, X precedes C (the rule above
//     with F = X, P = L, Q = C and G replaced by the seq_cst C), and N
//     precedes X (N seq_cst, coherence-ordered before A, A happens before
//     X): a cycle again. has_waiters_seq_cst(), state_seq_cst().
//   - asymmetric: the waiter's X is heavy_barrier() (membarrier(2): every
//     running thread of the process executes a full fence) and the
//     notifier's Y only a compiler fence, so that a queue's push pays no
//     fence at all (include/mote/detail/queue_wait.hpp). Where membarrier is
//     refused, the waiter commits with a timeout instead.
//
// Memory ordering of what the condition publishes is the caller's: the
// look must read it with acquire loads that pair with the notifier's release
// (or stronger) store. The event count orders only the announcement.
//
// A commit may return without a notify (a futex's spurious return, a timeout,
// a notify meant for another waiter of the same word): the caller loops
// (spin, prepare, look again). A waiter whose wake-up does not cover all it
// watches (new work elsewhere wakes nobody who is in a join) commits with a
// timeout (commit_wait_for, commit_for), taken from idle_wait's doubling
// next_park_timeout().
//
// The futex's wake is keyed by address alone and reads no memory there, so a
// notifier may wake a word whose object the waiter has just destroyed (a
// finished task, a finished group): what lives there next sees a spurious
// return at worst.
//
// A use, the shared form (a flag another thread sets):
//
//   while (!flag.load(std::memory_order_acquire)) {   // after idle_wait's spin
//     const std::uint32_t key = ec.prepare_wait();
//     if (flag.load(std::memory_order_acquire)) { ec.cancel_wait(); break; }
//     ec.commit_wait(key);
//   }
//   // the other thread:
//   flag.store(true, std::memory_order_release);
//   ec.notify_all();
#pragma once

#include <atomic>
#include <cstdint>

#include "mote/detail/platform.hpp"
#include "mote/detail/queue_wait.hpp"

namespace mote::detail {

// tests/test_event_count.cpp builds a second copy of its hunt with
// MOTE_EVENT_COUNT_UNFENCED defined, to show that the hunt finds the lost
// wake-ups a missing fence causes. The inline namespace keeps that copy's
// code apart from the library's (no mixing of the two at link time).
#if defined(MOTE_EVENT_COUNT_UNFENCED)
inline namespace event_count_unfenced {
#else
inline namespace event_count_fenced {
#endif

// X and Y of the argument above. Only the tests' unfenced copy replaces it
// with a compiler fence (the processor then reorders the store and the load).
inline void event_count_fence() noexcept {
#if defined(MOTE_EVENT_COUNT_UNFENCED)
  std::atomic_signal_fence(std::memory_order_seq_cst);
#elif defined(__SANITIZE_THREAD__) && !defined(__clang__)
  // ThreadSanitizer does not model fences (g++ says so, -Wtsan, at every
  // use). This one orders only atomic accesses (an announcement and a
  // condition), which it checks as atomics all the same.
#  pragma GCC diagnostic push
#  pragma GCC diagnostic ignored "-Wtsan"
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
#  pragma GCC diagnostic pop
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// ---- The shared form ------------------------------------------------------

// An epoch (the futex word, moved by every notify that finds a waiter) and
// the count of announced waiters. Used through the static members on two
// words that live elsewhere (a queue's public wait_point), or as an object.
// Any thread may wait or notify.
class event_count {
 public:
  // ---- Waiter -------------------------------------------------------------
  // Announce. Returns the key for commit_wait: the epoch read before the
  // announcement (acquire: pairs with notify's release increment, so a key
  // that includes a notify also includes the condition it published).
  static std::uint32_t prepare_wait(std::atomic<std::uint32_t>& epoch, std::atomic<std::uint32_t>& waiters) noexcept {
    const std::uint32_t key = epoch.load(std::memory_order_acquire);
    announce(waiters);
    return key;
  }
  // The announcement alone (A and X), for a waiter whose futex word is the
  // condition itself (a ticket lock's grant): it then sleeps with
  // event_word::commit on the value its look saw, and calls cancel_wait.
  static void announce(std::atomic<std::uint32_t>& waiters) noexcept {
    // Relaxed: X below orders it before the look (see the argument above).
    waiters.fetch_add(1, std::memory_order_relaxed);
    event_count_fence();
  }
  // The asymmetric prepare: the fence is heavy_barrier() (see above). False
  // in *fenced when membarrier was refused: then commit with a timeout.
  static std::uint32_t prepare_wait_asymmetric(std::atomic<std::uint32_t>& epoch, std::atomic<std::uint32_t>& waiters,
                                               bool* fenced) noexcept {
    const std::uint32_t key = epoch.load(std::memory_order_acquire);
    // seq_cst: where the kernel refuses the barrier, this is the waiter's
    // half of a plain seq_cst pairing (the timeout covers the notifier's
    // relaxed look). Where it does not, heavy_barrier() is X.
    waiters.fetch_add(1, std::memory_order_seq_cst);
    *fenced = heavy_barrier();
    return key;
  }
  // The condition holds after all (or the commit returned): no longer a
  // waiter. Relaxed: a notifier that still counts us wakes nobody, or us
  // (we look again).
  static void cancel_wait(std::atomic<std::uint32_t>& waiters) noexcept {
    waiters.fetch_sub(1, std::memory_order_relaxed);
  }
  // Sleeps until a notify moves the epoch past key; then cancel_wait.
  static void commit_wait(std::atomic<std::uint32_t>& epoch, std::atomic<std::uint32_t>& waiters,
                          std::uint32_t key) noexcept {
    // Acquire: as in prepare_wait.
    while (epoch.load(std::memory_order_acquire) == key) futex_wait(&epoch, key);
    cancel_wait(waiters);
  }
  // One sleep of at most timeout_ns (or until a notify), then cancel_wait.
  // True when a notify came since prepare_wait.
  static bool commit_wait_for(std::atomic<std::uint32_t>& epoch, std::atomic<std::uint32_t>& waiters,
                              std::uint32_t key, std::int64_t timeout_ns) noexcept {
    futex_wait_for(&epoch, key, timeout_ns);
    cancel_wait(waiters);
    // Acquire: as in prepare_wait.
    return epoch.load(std::memory_order_acquire) != key;
  }

  // ---- Notifier: after the store that makes the condition true -------------
  // Y, then a look at the waiters.
  static bool has_waiters(std::atomic<std::uint32_t>& waiters) noexcept {
    event_count_fence();
    return waiters.load(std::memory_order_relaxed) != 0;
  }
  // Moves the epoch and wakes up to `count` sleepers (all when negative),
  // unconditionally: after has_waiters(), or its asymmetric or seq_cst
  // variant, said yes.
  static void wake(std::atomic<std::uint32_t>& epoch, int count) noexcept {
    // Release: pairs with the waiters' acquire loads of the epoch. seq_cst
    // is not needed: whoever reads the new epoch does not sleep, whoever
    // reads the old one is woken by the futex call below (or refused by it).
    epoch.fetch_add(1, std::memory_order_release);
    futex_wake(&epoch, count);
  }
  static void notify_one(std::atomic<std::uint32_t>& epoch, std::atomic<std::uint32_t>& waiters) noexcept {
    if (has_waiters(waiters)) wake(epoch, 1);
  }
  static void notify_all(std::atomic<std::uint32_t>& epoch, std::atomic<std::uint32_t>& waiters) noexcept {
    if (has_waiters(waiters)) wake(epoch, -1);
  }

  // ---- The same, on this object's own words ---------------------------------
  std::uint32_t prepare_wait() noexcept { return prepare_wait(epoch_, waiters_); }
  void cancel_wait() noexcept { cancel_wait(waiters_); }
  void commit_wait(std::uint32_t key) noexcept { commit_wait(epoch_, waiters_, key); }
  bool commit_wait_for(std::uint32_t key, std::int64_t timeout_ns) noexcept {
    return commit_wait_for(epoch_, waiters_, key, timeout_ns);
  }
  // notify_one wakes one sleeper; every waiter that has announced and not
  // yet slept sees the new epoch and looks again (a notify is never lost,
  // at the price of a spurious look).
  void notify_one() noexcept { notify_one(epoch_, waiters_); }
  void notify_all() noexcept { notify_all(epoch_, waiters_); }
  bool has_waiters() noexcept { return has_waiters(waiters_); }

 private:
  std::atomic<std::uint32_t> epoch_{0};
  std::atomic<std::uint32_t> waiters_{0};
};

// ---- The targeted form ----------------------------------------------------

// A word per waiter, written by its waiter and by notifiers, and optionally a
// count of the waiters of a set of such words (the runtime's idle workers),
// which lets notifiers skip the words when nobody waits. The waiter is the
// word's owner; any thread may notify.
class waiter_slot {
 public:
  static constexpr std::uint32_t kAwake = 0;
  static constexpr std::uint32_t kAnnounced = 1;  // about to sleep, looking one last time
  static constexpr std::uint32_t kSleeping = 2;   // asleep on the futex, or about to be

  // ---- Waiter (the word's owner) --------------------------------------------
  // Announce; `waiters` (may be null) counts it among the set's waiters.
  static void prepare(std::atomic<std::uint32_t>& word, std::atomic<std::uint32_t>* waiters) noexcept {
    // Relaxed both: X orders them before the look.
    word.store(kAnnounced, std::memory_order_relaxed);
    if (waiters != nullptr) waiters->fetch_add(1, std::memory_order_relaxed);
    event_count_fence();
  }
  // Sleeps until a notifier moves the word out of kSleeping. False, at once,
  // when a notifier cancelled the announcement first: look again. Call
  // retire() after either.
  static bool commit(std::atomic<std::uint32_t>& word) noexcept {
    return commit(word, [] {});
  }
  // As commit, calling before_sleep() once the sleep is decided (counters,
  // a trace's park_begin), before it begins.
  template <class F>
  static bool commit(std::atomic<std::uint32_t>& word, F&& before_sleep) noexcept {
    if (!to_sleeping(word)) return false;
    before_sleep();
    // Acquire: pairs with the notifier's CAS; nothing else is published
    // through the word, the caller's next look finds what it waits for.
    while (word.load(std::memory_order_acquire) == kSleeping) futex_wait(&word, kSleeping);
    return true;
  }
  // As commit, but one sleep of at most timeout_ns.
  static bool commit_for(std::atomic<std::uint32_t>& word, std::int64_t timeout_ns) noexcept {
    if (!to_sleeping(word)) return false;
    futex_wait_for(&word, kSleeping, timeout_ns);
    return true;
  }
  // After the look (the condition held: this is the cancel) or a commit.
  static void retire(std::atomic<std::uint32_t>& word, std::atomic<std::uint32_t>* waiters) noexcept {
    // Relaxed: the word is ours again, and a notifier's stale view of it
    // ("announced" or "asleep") costs it a CAS that fails or one wake-up of
    // a thread that is about to look anyway.
    word.store(kAwake, std::memory_order_relaxed);
    // seq_cst: as the notifiers' seq_cst loads of the count (has_waiters_seq_cst);
    // one that still counts us spends a look at the words, or a wake-up, on
    // a waiter about to look anyway.
    if (waiters != nullptr) waiters->fetch_sub(1, std::memory_order_seq_cst);
  }

  // ---- Notifier: after the store that makes the condition true -------------
  // Y, then the look at a waiter's word.
  static std::uint32_t state(const std::atomic<std::uint32_t>& word) noexcept {
    event_count_fence();
    return word.load(std::memory_order_relaxed);
  }
  // The look without Y, for a notifier whose condition store was seq_cst
  // (see the argument above), or one that looks at many words after one
  // has_waiters_seq_cst().
  static std::uint32_t state_seq_cst(const std::atomic<std::uint32_t>& word) noexcept {
    return word.load(std::memory_order_seq_cst);
  }
  // The set's count without Y, as state_seq_cst.
  static bool has_waiters_seq_cst(const std::atomic<std::uint32_t>& waiters) noexcept {
    return waiters.load(std::memory_order_seq_cst) != 0;
  }
  // Wakes the waiter if it was seen asleep and still is: true when this call
  // spent the wake-up. A waiter woken by another notifier is not woken twice.
  static bool wake_sleeper(std::atomic<std::uint32_t>& word, std::uint32_t seen) noexcept {
    // seq_cst: one of the loads and CASes of the word that the argument
    // orders (the waiter's commit CAS is seq_cst too).
    if (seen == kSleeping && word.compare_exchange_strong(seen, kAwake, std::memory_order_seq_cst)) {
      futex_wake(&word, 1);
      return true;
    }
    return false;
  }
  // Cancels the announcement of a waiter seen announced (it looks again
  // instead of sleeping), or wakes it if it committed meanwhile. True when
  // this call did either.
  static bool cancel_or_wake(std::atomic<std::uint32_t>& word, std::uint32_t seen) noexcept {
    if (seen != kAnnounced) return wake_sleeper(word, seen);
    if (word.compare_exchange_strong(seen, kAwake, std::memory_order_seq_cst)) return true;
    return wake_sleeper(word, seen);  // seen is the state the CAS found
  }
  // The whole wake-up of one waiter: Y, the look, and cancel or wake. False
  // when it was awake (or woken already): nothing to do.
  static bool notify(std::atomic<std::uint32_t>& word) noexcept { return cancel_or_wake(word, state(word)); }
  // Wakes it whatever its state, for a notifier that must not rely on the
  // look (a runtime that stops: every word, after the seq_cst store of stop).
  static void notify_always(std::atomic<std::uint32_t>& word) noexcept {
    // seq_cst: after the caller's seq_cst store, in S before the waiter's X
    // or seen by its look.
    if (word.exchange(kAwake, std::memory_order_seq_cst) == kSleeping) futex_wake(&word, 1);
  }

 private:
  // The commit: fails when a notifier cancelled the announcement.
  static bool to_sleeping(std::atomic<std::uint32_t>& word) noexcept {
    std::uint32_t expected = kAnnounced;
    // seq_cst: pairs with the notifiers' CASes (cancel_or_wake); either this
    // one comes first (and their CAS from kAnnounced fails, the one from
    // kSleeping wakes us) or theirs does (and this one fails).
    return word.compare_exchange_strong(expected, kSleeping, std::memory_order_seq_cst, std::memory_order_seq_cst);
  }
};

// ---- The one-word form ----------------------------------------------------

// The word carries the condition and the announcement (see the top). The
// waiter has announced with a read-modify-write of the word that left it at
// `parked`; these sleep while it still holds that value. Any thread.
struct event_word {
  // One sleep: returns when the word differs from `parked`, is woken, or
  // spuriously. The caller looks again.
  // The word is passed by address, as futex_low_half() gives it.
  static void commit(std::atomic<std::uint32_t>* word, std::uint32_t parked) noexcept { futex_wait(word, parked); }
  // One sleep of at most timeout_ns.
  static void commit_for(std::atomic<std::uint32_t>* word, std::uint32_t parked, std::int64_t timeout_ns) noexcept {
    futex_wait_for(word, parked, timeout_ns);
  }
  // After the read-modify-write that saw a waiter parked (or, for a word
  // whose waiter does not announce, after every store of the condition):
  // wakes up to `count` (all when negative). Uses the address only: the
  // word may be gone.
  static void notify(std::atomic<std::uint32_t>* word, int count) noexcept { futex_wake(word, count); }
};

}  // inline namespace

}  // namespace mote::detail
