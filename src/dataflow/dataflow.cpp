// The data-flow model's compiled side: registration, the wait-free dependency
// system, a task's run and end, the scope's wait, the graph for dump_dot().
// docs/dataflow.md has the design, and the argument for wait-freedom and for
// the memory orders; the comments here say which step of it each line is.
#include "mote/dataflow.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "mote/detail/adaptive.hpp"
#include "mote/detail/loops.hpp"
#include "core/config.hpp"
#include "core/runtime_impl.hpp"
#include "dataflow/current.hpp"
#include "dataflow/locality.hpp"
#include "wait/event_count.hpp"

namespace mote {

// ---- The access state machine --------------------------------------------
//
// Accesses to one region in one scope form a chain, in spawn order. Adjacent
// accesses that may run together form a group: `in`s; `concurrent`s;
// `commutative`s (which then exclude each other through a token);
// reductions with the same operator. out and inout are groups of one. An
// access is satisfied when every access of the groups before its own has
// finished. Its flags only ever gain bits, each through one fetch-or (a
// "message"); the value before and after a fetch-or tells the thread that
// made it which conditions it alone has just made true, and so which
// messages it alone must send.
namespace {

constexpr std::uint32_t kReady = 1u << 0;       // R: the group is satisfied (from the previous member)
constexpr std::uint32_t kDone = 1u << 1;        // D: every access before this one has finished
constexpr std::uint32_t kPoison = 1u << 2;      // P: a task of an earlier group failed
constexpr std::uint32_t kGroupFail = 1u << 3;   // Q: a task earlier in this group failed (travels with D)
constexpr std::uint32_t kComplete = 1u << 4;    // C: this access's task has finished
constexpr std::uint32_t kFailed = 1u << 5;      // F: ... and failed (or was skipped for poison)
constexpr std::uint32_t kSucc = 1u << 6;        // S: a successor is linked
constexpr std::uint32_t kSuccSame = 1u << 7;    // SS: ... in the same group (set with S)
constexpr std::uint32_t kSealed = 1u << 8;      // E: no successor will come (the scope's wait)
constexpr std::uint32_t kNoReadyMsg = 1u << 9;  // NR: no R message will come (set at creation)
constexpr std::uint32_t kReadySent = 1u << 10;  // RS: the R message to the successor is delivered
constexpr std::uint32_t kDoneSent = 1u << 11;   // DS: the D message to the successor is delivered

constexpr bool has(std::uint32_t f, std::uint32_t bits) { return (f & bits) == bits; }

// The access may run (as far as this region goes).
constexpr bool satisfied(std::uint32_t f) { return (f & (kReady | kDone)) != 0; }
// R goes to a same-group successor once this access is satisfied.
constexpr bool send_ready(std::uint32_t f) { return satisfied(f) && has(f, kSucc | kSuccSame); }
// D goes to the successor once everything up to this access has finished.
constexpr bool send_done(std::uint32_t f) { return has(f, kDone | kComplete | kSucc); }
// The group ends at this access: it is its last member and everything up to
// it has finished. A reduction combines here, a commutative token dies here.
constexpr bool group_ends(std::uint32_t f) {
  return has(f, kDone | kComplete) && ((f & kSealed) != 0 || (f & (kSucc | kSuccSame)) == kSucc);
}
// Does the D message to the successor go unacknowledged? When the access
// expects no R (NR) and sends none (no SS), the fetch-or that sends D is the
// one that brings the last of D, C and S: every message the access expects
// has then arrived, so no other thread will touch it, and the sender may
// read it to the end of its step without an acknowledgement keeping it
// alive. Otherwise another thread's later R (or RS) could make the access
// final while the sender still reads it, and DS holds it until then.
constexpr bool done_unacked(std::uint32_t f) { return (f & (kNoReadyMsg | kSuccSame)) == kNoReadyMsg; }

// Nothing will reach this access any more, and nothing it sent is in flight:
// every message it expects has arrived (R unless NR, D, C, S or E), and the
// deliveries it made have been acknowledged (RS, and DS unless
// done_unacked).
constexpr bool final_state(std::uint32_t f) {
  if (!has(f, kDone | kComplete)) return false;
  if ((f & (kReady | kNoReadyMsg)) == 0) return false;
  if (f & kSealed) return true;
  if ((f & kSucc) == 0) return false;
  if ((f & kDoneSent) == 0 && !done_unacked(f)) return false;
  return (f & kSuccSame) == 0 || (f & kReadySent) != 0;
}

// The conditions above for every value of the flags, one byte each, so that
// a delivery finds what its fetch-or made true with two loads and a mask
// (a condition that became true: set in the value after, clear before).
constexpr std::uint32_t kFlagBits = 12;
static_assert(kDoneSent < (1u << kFlagBits));
constexpr std::uint8_t kIsSatisfied = 1u << 0;
constexpr std::uint8_t kIsSendReady = 1u << 1;
constexpr std::uint8_t kIsSendDone = 1u << 2;
constexpr std::uint8_t kIsGroupEnd = 1u << 3;
constexpr std::uint8_t kIsFinal = 1u << 4;
struct condition_table {
  std::uint8_t of[1u << kFlagBits];
  constexpr condition_table() : of() {
    for (std::uint32_t f = 0; f < (1u << kFlagBits); ++f) {
      of[f] = static_cast<std::uint8_t>(
          (satisfied(f) ? kIsSatisfied : 0) | (send_ready(f) ? kIsSendReady : 0) |
          (send_done(f) ? kIsSendDone : 0) | (group_ends(f) ? kIsGroupEnd : 0) |
          (final_state(f) ? kIsFinal : 0));
    }
  }
};
constexpr condition_table kConditions;
// The conditions that `old | bits` has and `old` has not.
inline std::uint8_t became_true(std::uint32_t old, std::uint32_t now) noexcept {
  constexpr std::uint32_t mask = (1u << kFlagBits) - 1;
  return static_cast<std::uint8_t>(kConditions.of[now & mask] & ~kConditions.of[old & mask]);
}

// Does `next`, the access after `pred` in its region's chain, join pred's group?
bool same_group(const detail::df_access& pred, const detail::df_access& next) {
  if (pred.type != next.type) return false;
  switch (next.type) {
    case access_type::in:
    case access_type::concurrent:
    case access_type::commutative:
      return true;
    case access_type::reduction:
      return pred.red == next.red;
    default:
      return false;  // out, inout: groups of one
  }
}

bool writes(access_type t) { return t != access_type::in; }

// ---- Messages ------------------------------------------------------------------
//
// A delivery makes at most one further one necessary (to the access's
// successor: R, D or both in one message), and an acknowledgement (RS, DS)
// none: so a thread delivers a message and what it leads to in a loop
// (engine::deliver), one at a time, with no queue. A chain of 100 000 `in`s
// readied one by one is 100 000 turns of that loop, not nested calls.
struct message {
  detail::df_access* to;
  std::uint32_t bits;
  detail::df_access* from;  // the sending predecessor, or nullptr (registration, the task's end, wait)
  std::uint32_t ack;        // delivered to `from` after the message; 0: none
};

// The data-flow task whose body this thread is running: detail::tl_df_current
// (dataflow/current.hpp), defined below.

// ---- Locality: ready tasks kept on their worker -----------------------------
//
// A scope in `keep` mode keeps its ready tasks on the worker that readied
// them: the first one a task's end readies runs next there (the immediate
// successor), the others wait among its pool's kept tasks
// (split_deque::keep), which a thief's request does not share and every
// loop that takes the worker's pool work finds (its idle loop, its waits,
// the spawner's throttle); they reach a thief only when the worker goes
// quiet (it computes for long, or blocks) and is not taking them. In
// `share` mode they go to the pool, which shares them when an idle worker
// asks, and the immediate successor is kept only while nobody asks.
//
// Which one pays is measured, as the hand-off itself costs: on two cores
// the tasks of a fine-grained scope that another worker runs move their
// record's and accesses' lines across (the spawner wrote them), and the
// spawner's next link pulls an access's line back, a core-to-core transfer
// each (50 to 600 ns on the machine of the benchmark report); whether the
// other worker's help is worth that depends on the tasks, the graph and the
// round trip of the hour. So the scope's spawner, on a worker, times its
// own progress: the cycle-counter ticks per window of kWindow spawns (its
// registrations, and the tasks its throttle runs while the others run the
// rest), scaled by how many of the window's worth of tasks finished (a
// mode that leaves its tasks pending has not saved their time), one window
// in each mode, then the faster mode, with a window of the other now and
// then (after kProbeWindows, more as probes confirm the faster one) to follow
// changes; a window that only filled the throttle is not a measurement, and
// a probe's window replaces its mode's old figure (dataflow/locality.hpp).
// A new scope starts from what the scopes of the same tasks measured
// (kind_memory).
using detail::df_windows::kWindow;  // dataflow/locality.hpp, with the windows' end
constexpr std::uint32_t kSampleEvery = 16;
constinit thread_local std::uint32_t tl_until_sample __attribute__((tls_model("initial-exec"))) = 1;

// A sampled body's ticks into the scope's moving average (relaxed: an
// estimate; a lost update is a lost sample; one sample moves it at most 4x
// up, since a preemption inside a timed body is not the task's length).
void note_body(detail::df_grain& g, std::uint64_t ticks) noexcept {
  const std::uint64_t old = g.body.load(std::memory_order_relaxed);
  if (old != 0 && ticks > 4 * old) ticks = 4 * old;
  std::uint64_t now = old == 0 ? ticks : (7 * old + ticks) / 8;
  if (now == 0) now = 1;
  if (now > 0xffffffffu) now = 0xffffffffu;
  g.body.store(static_cast<std::uint32_t>(now), std::memory_order_relaxed);
}


// What the scopes of each kind of task (its function, or its name) measured
// in each mode: a new scope of the same tasks starts from there, so a
// program that makes a scope per step does not measure both modes per step.
// Direct-mapped, racy by design (relaxed): a wrong entry is a wrong first
// guess, which the scope's own windows correct.
struct kind_memory {
  static constexpr unsigned kEntries = 256;
  struct entry {
    std::atomic<const void*> what{nullptr};
    std::atomic<std::uint64_t> cost[2] = {};
    std::atomic<std::uint32_t> probe_every{0};  // 0: not known
  };
  entry entries[kEntries];
  static unsigned slot(const void* w) noexcept {
    auto x = reinterpret_cast<std::uintptr_t>(w);
    return static_cast<unsigned>(((x >> 4) * 0x9E3779B97F4A7C15ull) >> 56);
  }
  void load(const void* w, std::uint64_t cost[2], std::uint32_t& probe_every) const noexcept {
    const entry& e = entries[slot(w)];
    if (e.what.load(std::memory_order_relaxed) != w) return;
    cost[0] = e.cost[0].load(std::memory_order_relaxed);
    cost[1] = e.cost[1].load(std::memory_order_relaxed);
    if (const std::uint32_t p = e.probe_every.load(std::memory_order_relaxed); p != 0) probe_every = p;
  }
  void store(const void* w, const std::uint64_t cost[2], std::uint32_t probe_every) noexcept {
    entry& e = entries[slot(w)];
    if (e.what.load(std::memory_order_relaxed) != w) e.what.store(w, std::memory_order_relaxed);
    e.cost[0].store(cost[0], std::memory_order_relaxed);
    e.cost[1].store(cost[1], std::memory_order_relaxed);
    e.probe_every.store(probe_every, std::memory_order_relaxed);
  }
};
constinit kind_memory kinds;

// The kinds of task marked urgent (df_mark_current_urgent): direct-mapped,
// racy by design (relaxed: a hint; a mark lost to a shared slot or read
// torn from its priority costs a task its priority, never correctness).
// `marked` lets a spawn skip the table while nothing was ever marked: one
// relaxed load of a line written once per kind.
struct urgent_kinds {
  static constexpr unsigned kEntries = 64;
  struct entry {
    std::atomic<const void*> what{nullptr};
    std::atomic<std::uint8_t> priority{0};
  };
  entry entries[kEntries];
  std::atomic<std::uint32_t> marked{0};
  static unsigned slot(const void* w) noexcept {
    auto x = reinterpret_cast<std::uintptr_t>(w);
    return static_cast<unsigned>(((x >> 4) * 0x9E3779B97F4A7C15ull) >> 58);
  }
  std::uint8_t find(const void* w) const noexcept {
    const entry& e = entries[slot(w)];
    return e.what.load(std::memory_order_relaxed) == w ? e.priority.load(std::memory_order_relaxed) : 0;
  }
  void mark(const void* w, std::uint8_t p) noexcept {
    entry& e = entries[slot(w)];
    if (e.what.load(std::memory_order_relaxed) == w && e.priority.load(std::memory_order_relaxed) == p) return;
    e.priority.store(p, std::memory_order_relaxed);
    e.what.store(w, std::memory_order_relaxed);
    if (marked.load(std::memory_order_relaxed) == 0) marked.store(1, std::memory_order_relaxed);
  }
};
constinit urgent_kinds urgent;

bool pools_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("MOTE_DATAFLOW_POOLS");
    bool pools;
    const std::string s(v != nullptr ? v : "");
    if (s.empty() || s == "1" || s == "on" || s == "yes") {
      pools = true;
    } else if (s == "0" || s == "off" || s == "no") {
      pools = false;
    } else {
      throw config_error("MOTE_DATAFLOW_POOLS: expected 0 or 1 (pools off or on), got '" + s + "'");
    }
    // Relaxed: a setting; df_allocate_here takes this path until it sees it.
    detail::df_pools_state.store(pools ? 1 : 0, std::memory_order_relaxed);
    return pools;
  }();
  return on;
}

// How many unfinished tasks a scope may have before its spawner holds back
// (MOTE_DATAFLOW_THROTTLE; 0: never): on a worker it runs ready tasks from
// its own pool at spawn, outside the runtime it sleeps until half that is
// left. A spawner far ahead of its tasks writes records faster than they
// are run: past a few thousand, their blocks no longer fit in the worker's
// cache, and every task then reads its record back from far away. Nanos6
// throttles its creators for the same reason. The limit is not smaller:
// a window of many sweeps of a stencil is what lets the data flow run
// block b of sweep k + 1 right after blocks b - 1 .. b + 1 of sweep k, in
// cache (the Jacobi of docs/mpi.md, N = 4096 on one worker: 2.1 s with
// 4096, 2.4-2.7 with 1024, 3.3-3.4 with 128; GNU OpenMP 3.0-3.3).
std::uint32_t throttle_limit() {
  static const std::int64_t set = [] {
    const char* v = std::getenv("MOTE_DATAFLOW_THROTTLE");
    if (v == nullptr || *v == '\0') return std::int64_t{-1};
    char* end = nullptr;
    const unsigned long n = std::strtoul(v, &end, 10);
    if (*end != '\0' || n > 0xffffffffUL || *v == '-') {
      throw config_error(std::string("MOTE_DATAFLOW_THROTTLE: expected a number of tasks (0: off), got '") + v +
                         "'");
    }
    return static_cast<std::int64_t>(n);
  }();
  return set >= 0 ? static_cast<std::uint32_t>(set) : 4096;
}

// MOTE_DATAFLOW_LOCALITY: every scope's locality until set_locality().
dataflow_locality default_locality() {
  static const dataflow_locality l = [] {
    const char* v = std::getenv("MOTE_DATAFLOW_LOCALITY");
    if (v == nullptr || *v == '\0') return dataflow_locality::automatic;
    const std::string s(v);
    if (s == "auto") return dataflow_locality::automatic;
    if (s == "keep") return dataflow_locality::keep;
    if (s == "share") return dataflow_locality::share;
    throw config_error("MOTE_DATAFLOW_LOCALITY: expected auto, keep or share, got '" + s + "'");
  }();
  return l;
}

std::atomic<std::uint64_t> next_trace_id{1};

// Commutative tasks of one group exclude each other through this token. A
// task takes the tokens of all its commutative accesses, in address order,
// before it runs: when one is held it waits in that token's list, keeping
// the ones it has, and the holder hands the task to the scheduler again when
// it releases. The list is linked through the tasks (a task waits for one
// token at a time), so that waiting allocates nothing.
struct commutative_token final : detail::df_group_info {
  std::mutex mutex;
  bool held = false;
  detail::df_task* first_waiting = nullptr;  // oldest first, through df_task::next_waiting
  detail::df_task* last_waiting = nullptr;
};

}  // namespace

namespace detail {

std::atomic<std::int8_t> df_pools_state{-1};

struct df_scope_access {
  static df_grain& grain(dataflow& df) noexcept { return df.grain_; }
  static const runtime_impl* runtime(const dataflow& df) noexcept { return df.runtime_; }
  // The scope's spawner cache, made on first use (throws std::bad_alloc),
  // or nullptr when the calling thread is not the scope's: only that
  // thread may own it (task_cache's owner-only side). A spawn from another
  // thread is refused at registration; its block has no home.
  static task_cache* spawner_cache(dataflow& df) {
    if (thread_token() != df.spawner_) return nullptr;
    if (!df.spawner_cache_) df.spawner_cache_ = std::make_unique<task_cache>();
    return df.spawner_cache_.get();
  }

  // The throttle of a spawner outside the runtime, which cannot run the
  // scope's tasks: past the limit it sleeps until half of it is left. The
  // task whose end brings the count there wakes it (wake_throttled); a
  // wake-up that comes too late costs a timed sleep at worst.
  //
  // The announcement (throttle_at_) and the count are two locations, and
  // the finisher must read the announcement before its count-down, after
  // which the scope may be gone (its wait may return). So a finisher that
  // reads the announcement just before the spawner makes it, and counts
  // down just after the spawner's look, wakes nobody; every later end reads
  // it, and the last pending task's end brings the count to 0, below any
  // target: a wake-up is late, never lost while tasks are pending. The
  // sleep is timed (kThrottleNapNs) for an end that is itself the last one
  // in that window. Both sides read the count with acquire loads
  // (pending_for_others), and the announcement is a seq_cst store, so that
  // the look that follows it is not done before it.
  //
  // The throttle never waits for tasks that wait for something else: a nap
  // in which no task ended, after which every worker of the runtime sleeps
  // (all pending tasks behind an event this thread is to fulfil, say), ends
  // the throttle, and it holds back no more until a task ends
  // (throttle_stalled_). A worker that is merely slow (preempted, or in a
  // long task) is awake: the spawner naps on.
  static constexpr std::int64_t kThrottleNapNs = 500'000;
  static bool every_worker_asleep(const runtime_impl& rt) noexcept {
    for (unsigned i = 0; i < rt.num_workers(); ++i) {
      if (!rt.worker_asleep(i)) return false;
    }
    return true;
  }
  static void throttle_outside(dataflow& df) noexcept {
    task_group& g = df.group_;
    const std::uint32_t limit = df.throttle_;
    std::uint32_t pending = group_access::pending_for_others(g);
    if (pending <= limit || df.spawned_since_wait_ - pending == df.throttle_stalled_) return;
    const std::uint32_t target = std::max(limit / 2, 1u);
    bool napped = false;
    for (;;) {
      // Acquire: pairs with the waker's release increment (nothing rides on
      // it but the key).
      const std::uint32_t key = df.throttle_epoch_.load(std::memory_order_acquire);
      df.throttle_at_.store(target, std::memory_order_seq_cst);
      const std::uint32_t now = group_access::pending_for_others(g);
      if (now <= target) break;
      if (napped && now == pending && every_worker_asleep(*df.runtime_)) {
        df.throttle_stalled_ = df.spawned_since_wait_ - now;
        break;
      }
      pending = now;
      napped = true;
      event_word::commit_for(&df.throttle_epoch_, key, kThrottleNapNs);
      if (df.throttle_epoch_.load(std::memory_order_acquire) != key) break;  // woken
    }
    // Relaxed: a finisher that still reads the target wakes nobody who sleeps.
    df.throttle_at_.store(0, std::memory_order_relaxed);
  }
  // At the end of a task of df counted by others, before its count-down:
  // wakes a throttled spawner when the count, this task gone, is down to
  // its target. Relaxed load: see throttle_outside().
  static void wake_throttled(dataflow& df) noexcept {
    const std::uint32_t at = df.throttle_at_.load(std::memory_order_relaxed);
    if (MOTE_LIKELY(at == 0)) return;
    if (group_access::pending_for_others(df.group_) > at + 1) return;
    // One waker: the exchange takes the announcement.
    if (df.throttle_at_.exchange(0, std::memory_order_relaxed) == 0) return;
    // Release: see throttle_outside()'s acquire.
    df.throttle_epoch_.fetch_add(1, std::memory_order_release);
    event_word::notify(&df.throttle_epoch_, 1);
  }
};

// ---- Registration table ------------------------------------------------------

df_table::~df_table() {
  if (slots != inline_) delete[] slots;
}

void df_table::grow(std::uint32_t more) {
  // At most 3/4 full with `more` new entries.
  std::uint64_t size = std::uint64_t{mask} + 1;
  std::uint32_t log = 64 - shift;
  while ((std::uint64_t{used} + more) * 4 > size * 3) {
    size *= 2;
    ++log;
  }
  if (size == std::uint64_t{mask} + 1) return;
  // Rehash into the bigger table; the allocation is the only step that throws.
  auto* bigger = new entry[size]();
  const std::uint32_t old_size = mask + 1;
  entry* old = slots;
  mask = static_cast<std::uint32_t>(size - 1);
  shift = 64 - log;
  slots = bigger;
  for (std::uint32_t i = 0; i < old_size; ++i) {
    if (old[i].address == nullptr) continue;
    std::uint32_t j = home_slot(old[i].address);
    while (slots[j].address != nullptr) j = (j + 1) & mask;
    slots[j] = old[i];
  }
  if (old != inline_) delete[] old;
}

const df_table::entry* df_table::find(const void* address) const noexcept {
  if (MOTE_UNLIKELY(address == nullptr)) return null_used ? &null_region : nullptr;
  std::uint32_t i = home_slot(address);
  while (slots[i].address != nullptr && slots[i].address != address) i = (i + 1) & mask;
  return slots[i].address != nullptr ? &slots[i] : nullptr;
}

df_table::entry& df_table::null_entry() noexcept {
  // The null region: its own entry (nullptr marks the slots' empty ones).
  if (!null_used) {
    null_used = true;
    null_region.last = nullptr;
    ++used;
  }
  return null_region;
}

void df_table::clear() noexcept {
  for (std::uint32_t i = 0; i <= mask; ++i) slots[i] = entry{nullptr, nullptr};
  null_region = entry{nullptr, nullptr};
  null_used = false;
  used = 0;
}

// ---- The engine ---------------------------------------------------------------

namespace {

struct engine {
  worker* w;                // the calling thread's worker (any runtime), or nullptr
  runtime_impl* rt;         // the scope's runtime
  trace_buffer* trace;      // w's trace buffer when tracing, else nullptr
  // The task whose end this thread is delivering: its accesses that become
  // final here are counted, and `live` drops once for all of them (and the
  // body's share) at the end, instead of once each. nullptr: none.
  df_task* ending = nullptr;
  std::int32_t ending_finals = 0;
  // The immediate successor: the first task that the end of `ending`
  // readies is kept here and run next on this worker (its inputs are warm
  // in this cache), unless a thief has asked this worker for work.
  // nullptr `successor_slot`: none kept (registration, a fulfil elsewhere).
  df_task** successor_slot = nullptr;
  // The scope's wait (its seal), after the group's wait is over: where a
  // reduction's combine that throws leaves its exception (the first one).
  // nullptr: into the scope's group, whose wait is still to come.
  std::exception_ptr* combine_error = nullptr;

  // Delivers `bits` to `a` and every message that leads to, in turn, with
  // each one's acknowledgement after it (see "Messages").
  // Inline where a task registers and ends: a call's saving and restoring
  // of registers cost a fifth of a one-access delivery.
  __attribute__((always_inline)) void deliver(df_access* a, std::uint32_t bits) noexcept {
    message m{a, bits, nullptr, 0};
    for (;;) {
      message next{nullptr, 0, nullptr, 0};  // written by apply when it returns true
      const bool more = apply(m.to, m.bits, m.from != nullptr, &next);
      if (m.ack != 0) acknowledge(m.from, m.ack);
      if (!more) return;
      m = next;
    }
  }

  // An acknowledgement (RS, DS): it can only make the access final.
  void acknowledge(df_access* a, std::uint32_t bits) noexcept {
    // acq_rel, as apply's fetch-or.
    const std::uint32_t old = a->flags.fetch_or(bits, std::memory_order_acq_rel);
    if (became_true(old, old | bits) & kIsFinal) release_access(a->task);
  }

  // One message: one fetch-or, then what it alone made true. Returns true
  // with the message to the successor that it makes necessary in *next.
  __attribute__((always_inline)) bool apply(df_access* a, std::uint32_t bits, bool from_predecessor,
                                            message* next) noexcept {
    // acq_rel: acquire, so that this thread sees what the senders of earlier
    // messages to `a` published (the successor pointer, the data their tasks
    // wrote, a reduction's copies); release, so that whoever delivers a later
    // message to `a` sees what this thread did before. Each decision below is
    // taken by exactly one thread: the one whose fetch-or moved the
    // condition from false to true.
    //
    // Lifetime: once this fetch-or is done, `a` may be freed by the thread
    // whose message makes it final, unless this thread still holds it. It
    // does in each branch below: the task cannot finish (C) before its last
    // satisfaction is counted; a successor message is not acknowledged yet
    // (DS, RS are part of the final state); a group ends with S and no SS
    // only together with the D message (same fetch-or), or with E, which the
    // scope's wait sends when no message is in flight. So fields of `a` are
    // read in those branches only, never after.
    const std::uint32_t old = a->flags.fetch_or(bits, std::memory_order_acq_rel);
    const std::uint32_t now = old | bits;
    const std::uint8_t became = became_true(old, now);

    if (became & kIsSatisfied) {
      df_task* t = a->task;
      if (now & kPoison) t->poisoned.store(true, std::memory_order_relaxed);  // published by `blocked`
      if (from_predecessor && (bits & kDone) != 0) {
        a->pred_task_link = true;  // published by `blocked`, read by the task's run
        if (MOTE_UNLIKELY(trace != nullptr)) trace->put(trace_kind::flow_out, flow_id(a));
      }
      // acq_rel: the last satisfaction sees every earlier one's writes (the
      // poison flag, the links), and publishes them to the thread that runs
      // the task (through the scheduler's own release/acquire).
      if (t->blocked.fetch_sub(1, std::memory_order_acq_rel) == 1) ready(t);
    }

    const bool r = (became & kIsSendReady) != 0;
    const bool d = (became & kIsSendDone) != 0;
    bool combine_failed = false;
    if ((became & kIsGroupEnd) != 0 && a->group != nullptr) {
      // Every member has finished (D and C here): their writes to the shared
      // state happened before the fetch-ors that brought D to this access.
      if (a->type == access_type::reduction) combine_failed = !combine(a);
      delete a->group;
    }
    if (r || d) {
      // The successor pointer was written before S was set (release, by the
      // registrant); this fetch-or read a value with S, so it is visible.
      df_access* succ = a->successor;
      std::uint32_t msg = 0;
      std::uint32_t ack = 0;
      const bool same = (now & kSuccSame) != 0;
      if (r) {
        msg |= kReady | (now & kPoison);
        ack |= kReadySent;
      }
      if (d) {
        msg |= kDone;
        const bool failed_here = (now & (kFailed | kGroupFail)) != 0;
        if (same) {
          msg |= (now & kPoison) | (failed_here ? kGroupFail : 0);
        } else {
          // A reduction whose combine failed ends here, in this fetch-or (the
          // group ends at S without SS together with D): what follows it
          // reads a target it left half combined, and is skipped.
          msg |= ((now & kPoison) != 0 || failed_here || combine_failed) ? kPoison : 0;
        }
        if (!done_unacked(now)) ack |= kDoneSent;
      }
      // `from` says the message comes from the predecessor (trace arrows,
      // pred_task_link); without an acknowledgement it is never dereferenced
      // (the access may be freed by then).
      *next = {succ, msg, a, ack};
    }
    // Final: nothing else will touch `a`; this thread alone may read it now.
    if (became & kIsFinal) release_access(a->task);
    return r || d;
  }

  static std::uint64_t flow_id(const df_access* a) { return (a->task->trace_id << 16) | a->index; }

  // Folds the copies of the reduction that ends at `a` into its target. An
  // operator that throws fails the scope's wait as a task that throws does
  // (its exception, unless an earlier one came first); false then.
  bool combine(df_access* a) noexcept {
    try {
      a->group->combine();
      return true;
    } catch (...) {
      if (combine_error != nullptr) {
        if (!*combine_error) *combine_error = std::current_exception();
      } else {
        // Before the count-down of the task whose end (or registration, on
        // the scope's own thread) got here, which the scope's wait follows.
        group_access::record_exception_only(*a->task->group, std::current_exception());
      }
      return false;
    }
  }

  void ready(df_task* t) noexcept;
  void release_access(df_task* t) noexcept;
};

void free_record(df_task* t, worker* w) noexcept {
  // The callable was destroyed when the task ran (or failed to register);
  // what is left is trivially destructible.
  give_record_home(t, t->tag, t->home, w != nullptr ? &w->cache() : nullptr);
}

void engine::release_access(df_task* t) noexcept {
  if (t == ending) {
    ++ending_finals;  // end_task drops them with the body's share
    return;
  }
  // acq_rel: the last release sees every access's final state; nothing
  // touches the record after it.
  if (t->live.fetch_sub(1, std::memory_order_acq_rel) == 1) free_record(t, w);
}

// The k-th commutative access of t in address order (the order in which its
// tokens are taken, so that two tasks never wait for each other's).
df_access* nth_token(df_task* t, std::uint16_t k) {
  const void* after = nullptr;
  df_access* pick = nullptr;
  for (std::uint16_t step = 0; step <= k; ++step) {
    pick = nullptr;
    for (std::uint16_t i = 0; i < t->num_accesses; ++i) {
      df_access& a = t->accesses[i];
      if (a.type != access_type::commutative || a.group == nullptr) continue;
      if (step > 0 && std::less<>{}(a.address, after)) continue;
      if (step > 0 && a.address == after) continue;
      if (pick == nullptr || std::less<>{}(a.address, pick->address)) pick = &a;
    }
    if (pick == nullptr) return nullptr;
    after = pick->address;
  }
  return pick;
}

// Takes t's tokens in address order, from where it stopped; on one that is
// held, waits in its list (keeping the ones taken: with one global order no
// two tasks wait for each other) and returns false. The holder hands it back
// to ready() when it gives the token up.
bool take_tokens(df_task* t) {
  for (;;) {
    df_access* a = nth_token(t, t->tokens_taken);
    if (a == nullptr) return true;
    auto* token = static_cast<commutative_token*>(a->group);
    std::lock_guard<std::mutex> lock(token->mutex);
    if (token->held) {
      t->next_waiting = nullptr;
      if (token->last_waiting != nullptr) {
        token->last_waiting->next_waiting = t;
      } else {
        token->first_waiting = t;
      }
      token->last_waiting = t;
      return false;
    }
    token->held = true;
    ++t->tokens_taken;
  }
}

__attribute__((always_inline)) inline void engine::ready(df_task* t) noexcept {
  if (MOTE_UNLIKELY(t->commutative) && t->poisoned.load(std::memory_order_relaxed)) {
    t->commutative = false;  // skipped anyway: takes no tokens, so gives none back
  }
  if (MOTE_UNLIKELY(t->commutative)) {
    bool ok;
    try {
      ok = take_tokens(t);
    } catch (...) {
      std::abort();  // a mutex that cannot lock
    }
    if (!ok) return;  // waits in a token's list
  }
  // The last task that a task's end readies runs next on this worker (the
  // immediate successor: the order the pool's newest-first pops would give),
  // without a trip through the pool, unless the scope shares its tasks and a
  // thief is asking this worker for work (then it goes to the pool, whose
  // next push shares). The one it displaces goes on. Not under delegation,
  // whose queue decides where every ready task goes (successor_slot is then
  // nullptr).
  // A task with a priority goes to the runtime's urgent list, which every
  // worker looks at before its pool (under either policy): not the
  // successor slot, whose task runs after the rest of this end, nor the
  // pool, where the tasks readied after it would run first. Relaxed: a
  // hint, set by the spawner (and raised by later spawns) before it links.
  if (const std::uint8_t prio = t->priority.load(std::memory_order_relaxed); MOTE_UNLIKELY(prio != 0)) {
    rt->schedule_urgent(t, prio);
    return;
  }
  const bool keep = w != nullptr && rt->num_workers() > 1 &&
                    df_scope_access::grain(*t->scope).keep_local.load(std::memory_order_relaxed);
  if (successor_slot != nullptr && (keep || !w->pool().asked())) {
    df_task* displaced = *successor_slot;
    *successor_slot = t;
    if (displaced == nullptr) return;
    t = displaced;
  }
  // Kept: this worker's pool pops find it, and a thief only if this worker
  // goes quiet (split_deque::keep). No room there: scheduled as any other.
  if (keep && w->pool().keep(t)) return;
  // Under work stealing: this worker's pool (a chain stays where its data is
  // warm, and an idle worker steals it). Only the spawning thread readies
  // tasks from outside the runtime, and submit() throws only in a forked
  // child or without memory.
  try {
    rt->schedule(t, w);
  } catch (...) {
    std::abort();
  }
}

void give_tokens(df_task* t, engine& e) noexcept {
  // The waiters of every token, one list: each waits in one token's list
  // only, so its link is free to chain the lists together.
  df_task* retry = nullptr;
  df_task** tail = &retry;
  for (std::uint16_t k = 0; k < t->tokens_taken; ++k) {
    auto* token = static_cast<commutative_token*>(nth_token(t, k)->group);
    std::lock_guard<std::mutex> lock(token->mutex);
    token->held = false;
    if (token->first_waiting != nullptr) {
      *tail = token->first_waiting;
      tail = &token->last_waiting->next_waiting;
      token->first_waiting = token->last_waiting = nullptr;
    }
  }
  t->tokens_taken = 0;
  // Every waiter tries again; one gets the token, the others wait again
  // (ready() may link a waiter into a list anew: its next is read first).
  for (df_task* x = retry; x != nullptr;) {
    df_task* next = x->next_waiting;
    e.ready(x);
    x = next;
  }
}

}  // namespace

void* reduction_slot(df_access& acc, worker& w) { return acc.group->slot(w.index()); }

// ---- Allocation -----------------------------------------------------------------

df_block df_allocate(const df_spawn_info& info, std::uint32_t n, worker* w, dataflow& scope) {
  const std::size_t align = alignof(df_access);
  const std::size_t head = (info.record_size + align - 1) / align * align;
  const std::size_t bytes = head + n * sizeof(df_access);
  const record_tag tag = pools_enabled() ? record_tag::of(bytes, info.record_align)
                                         : record_tag::uncached(info.record_align);
  homed_record block;
  if (w == nullptr) {
    // The scope's thread outside the runtime: from the scope's own cache
    // (its slabs; a worker that frees the record pushes it back with one
    // CAS), which the scope keeps until its last wait has returned.
    task_cache* mine = tag.cached() ? df_scope_access::spawner_cache(scope) : nullptr;
    block = take_record_with_home(tag, bytes, mine);
  } else if (&w->runtime() == df_scope_access::runtime(scope)) {
    block = take_record_with_home(tag, bytes, &w->cache());
  } else {
    // A worker of another runtime, which may end before the scope frees the
    // record: the block comes from its cache, but has no home to go back to
    // (a home must outlive the record; the scope's runtime does).
    block = {take_record(tag, bytes, w->cache()), nullptr};
  }
  auto* accesses = reinterpret_cast<df_access*>(static_cast<char*>(block.memory) + head);
  return {block.memory, accesses, tag, block.home};
}

void df_deallocate(const df_block& block) noexcept {
  worker* w = current_worker;
  give_record_home(block.memory, block.tag, block.home, w != nullptr ? &w->cache() : nullptr);
}

}  // namespace detail

// ---- The scope's graph (dump_dot) ---------------------------------------------

struct dataflow::graph {
  struct node {
    std::uint64_t id;
    const void* what;
    bool named;
  };
  struct edge {
    std::uint64_t from, to;
    const void* address;
    access_type from_type, to_type;
  };
  // Per region: the tasks of its current group and of the group before, so
  // that an edge joins a task to the tasks it really waits for (two readers
  // in a row are not ordered, though their accesses are chained).
  struct chain {
    std::vector<std::uint64_t> before, current;
  };
  std::vector<node> nodes;
  std::vector<edge> edges;
  std::unordered_map<const void*, chain> chains;
  std::uint64_t next_id = 1;
  bool on = false;

  // Room for v to take `more` elements more, growing geometrically.
  template <class T>
  static void reserve_more(std::vector<T>& v, std::size_t more) {
    if (v.capacity() - v.size() < more) v.reserve(std::max(v.size() + more, 2 * v.capacity()));
  }

  // Makes room for what add_task() and add() will store for t (its accesses'
  // chains, their edges, its node), so that they cannot throw. May throw;
  // then forget() takes back the chains it made.
  void prepare(const detail::df_task& t, const detail::df_table& table) {
    std::size_t more_edges = 0;
    for (std::uint16_t i = 0; i < t.num_accesses; ++i) {
      const detail::df_access& a = t.accesses[i];
      if (a.flags.load(std::memory_order_relaxed) != 0) continue;  // merged away (relaxed: private)
      const detail::df_table::entry* slot = table.find(a.address);
      const detail::df_access* pred = slot != nullptr ? slot->last : nullptr;
      chain& c = chains[a.address];
      if (pred != nullptr && same_group(*pred, a)) {
        more_edges += c.before.size();
        reserve_more(c.current, 1);
      } else {
        // add() swaps the two, clears the new current and appends to it.
        more_edges += c.current.size();
        reserve_more(c.before, 1);
      }
    }
    reserve_more(edges, more_edges);
    reserve_more(nodes, 1);
  }
  // Undoes prepare() for t: drops the chains it made (a chain that add()
  // has touched is never empty).
  void forget(const detail::df_task& t) noexcept {
    for (std::uint16_t i = 0; i < t.num_accesses; ++i) {
      const auto it = chains.find(t.accesses[i].address);
      if (it != chains.end() && it->second.before.empty() && it->second.current.empty())
        chains.erase(it);
    }
  }
  std::uint64_t add_task(const detail::df_task& t) noexcept {
    const std::uint64_t id = next_id++;
    nodes.push_back({id, t.trace_what, t.trace_named});
    return id;
  }
  void add(const void* address, std::uint64_t task, access_type type, access_type pred_type,
           bool same) noexcept {
    chain& c = chains.find(address)->second;
    if (!same) {
      c.before.swap(c.current);
      c.current.clear();
    }
    for (std::uint64_t from : c.before) edges.push_back({from, task, address, pred_type, type});
    c.current.push_back(task);
  }
};

namespace {

const char* type_name(access_type t) {
  switch (t) {
    case access_type::in: return "in";
    case access_type::out: return "out";
    case access_type::inout: return "inout";
    case access_type::commutative: return "commutative";
    case access_type::concurrent: return "concurrent";
    case access_type::reduction: return "reduction";
  }
  return "?";
}

// Stronger of two accesses to one region by one task.
access_type merge_types(access_type a, access_type b) {
  if (a == b) return a;
  if ((a == access_type::in && b == access_type::out) || (a == access_type::out && b == access_type::in)) {
    return access_type::inout;
  }
  if (a == access_type::in) {
    return b == access_type::concurrent || b == access_type::commutative ? access_type::inout : b;
  }
  if (b == access_type::in) {
    return a == access_type::concurrent || a == access_type::commutative ? access_type::inout : a;
  }
  return access_type::inout;
}

// Is the caller the frame that created the scope? Its thread, and no task or
// loop body started since on that thread: one of the scope's own tasks that
// happens to run there is refused as it is on any other thread.
bool in_spawning_frame(const void* spawner, const detail::df_task* spawner_task,
                       const task_group* spawner_group, unsigned spawner_loop_depth) noexcept {
  if (detail::thread_token() != spawner || detail::tl_df_current != spawner_task) return false;
  const detail::worker* w = detail::current_worker;
  return w == nullptr ||
         (w->current_group() == spawner_group && detail::loops_of(*w).depth == spawner_loop_depth);
}

// Do [lo, lo + size) and [plo, plo + psize) share a byte (or the first one)?
bool overlaps(const char* lo, std::size_t size, const char* plo, std::size_t psize) {
  return lo == plo || (lo < plo + psize && plo < lo + size);
}

}  // namespace

namespace {

// The locality windows (above, "Locality"), at every 64th spawn of the
// scope's owner: `spawned` spawns so far, `what` the kind of the last one.
void next_window(detail::df_grain& g, std::uint64_t spawned, const void* what, std::uint32_t pending) noexcept {
  const std::uint64_t now = detail::cycle_clock();
  if (spawned == 64) {
    // The first look: what scopes of these tasks measured before, and the
    // faster mode by that (share while nothing is known); time from here.
    if (g.cost[0] == 0 && g.cost[1] == 0) {
      kinds.load(what, g.cost, g.probe_every);
      g.until_probe = g.probe_every;
    }
    g.keep_local.store(g.cost[1] != 0 && (g.cost[0] == 0 || g.cost[1] < g.cost[0]),
                       std::memory_order_relaxed);
    g.window_start = now;
    g.window_pending = pending;
    return;
  }
  if (spawned % kWindow != 0) return;
  // Keep is tried only for tasks whose bodies take less than a microsecond
  // (sampled on the runtime's workers): longer ones pay for a hand-off on any machine
  // mote targets, and a window of keep would run them one by one.
  static const std::uint64_t try_keep_below = detail::ticks_per_us();
  if (detail::df_windows::end_window(g, now, pending, g.body.load(std::memory_order_relaxed), try_keep_below))
    kinds.store(what, g.cost, g.probe_every);
}

}  // namespace

void detail::df_register(dataflow& df, df_task* t, const df_access_desc* descs, std::uint32_t n) {
  if (MOTE_UNLIKELY(!in_spawning_frame(df.spawner_, df.spawner_task_, df.spawner_group_,
                                       df.spawner_loop_depth_))) {
    throw usage_error(
        "mote::dataflow::spawn: called from another thread than the one that created the scope, "
        "or from a task or loop body it runs meanwhile (such as one of the scope's own tasks); a "
        "scope's tasks are ordered by spawn order, which only the frame that created it defines: "
        "a task spawns its own work into a scope it creates");
  }
  if (n > 0xffff) throw usage_error("mote::dataflow::spawn: more than 65535 accesses in one task");
  worker* w = current_worker;
  if (w != nullptr && &w->runtime() != df.runtime_) w = nullptr;  // another runtime's worker: an outsider here
  // Misuse first, before anything is linked: a nested scope's accesses must
  // lie within its parent task's, write only what it writes, and keep off
  // what it reduces; a region named twice in one task is merged, except
  // reductions.
  if (df.parent_ != nullptr) {
    const df_task* p = df.parent_;
    for (std::uint32_t i = 0; i < n; ++i) {
      const auto* lo = static_cast<const char*>(descs[i].base.address);
      bool covered = false;
      for (std::uint16_t k = 0; k < p->num_accesses; ++k) {
        const df_access& pa = p->accesses[k];
        const auto* plo = static_cast<const char*>(pa.address);
        if (pa.type == access_type::reduction) {
          // The target belongs to the reduction until its group ends; the
          // parent's siblings in the group run meanwhile.
          if (overlaps(lo, descs[i].base.size, plo, pa.size)) {
            throw usage_error(
                "mote::dataflow::spawn: a nested task's access touches a region that its parent "
                "task holds as a reduction, whose target the parent's siblings in the reduction "
                "may be combining into; the parent works on the private copy its body receives");
          }
          continue;
        }
        if (lo >= plo && lo + descs[i].base.size <= plo + pa.size &&
            (!writes(descs[i].base.type) || writes(pa.type))) {
          covered = true;
        }
      }
      if (!covered) {
        throw usage_error(
            std::string("mote::dataflow::spawn: a nested task's ") + type_name(descs[i].base.type) +
            " access is not within an access of its parent task that allows it (a nested scope's "
            "accesses are children of the parent's, as in OmpSs-2)");
      }
    }
  }
  task_group& g = df.group_;
  t->execute = &df_task_run;
  t->group = &g;
  t->scope = &df;
  t->num_accesses = static_cast<std::uint16_t>(n);
  // Relaxed, the record's atomics here and in the description loop: the
  // record is private until the first link (an acq_rel fetch-or on a
  // predecessor) or the hand-off to the scheduler publishes it.
  t->poisoned.store(false, std::memory_order_relaxed);
  t->commutative = false;
  t->tokens_taken = 0;
  t->next_waiting = nullptr;
  t->trace_id = 0;

  // Describe every access; merge repeats of a region into the first one.
  std::uint32_t counted = 0;  // accesses that take part (not merged away)
  bool group_state = false;   // a reduction or commutative access (its group's state may be made)
  for (std::uint32_t i = 0; i < n; ++i) {
    df_access& a = t->accesses[i];
    a.type = descs[i].base.type;
    a.address = descs[i].base.address;
    a.size = descs[i].base.size;
    a.index = static_cast<std::uint16_t>(i);
    a.successor = nullptr;
    a.task = t;
    a.group = nullptr;
    a.red = descs[i].red;
    a.pred_task_link = false;
    bool merged = false;
    for (std::uint32_t k = 0; k < i; ++k) {
      df_access& b = t->accesses[k];
      // The first access with this address is the region's first one,
      // never merged away (a repeat would have met it first).
      if (b.address == a.address) {
        // So every repeat meets the first one here, before any merge could
        // hide a reduction. Misuse: nothing is linked yet, and the caller
        // destroys the record.
        if (MOTE_UNLIKELY(b.type == access_type::reduction || a.type == access_type::reduction)) {
          throw usage_error(
              "mote::dataflow::spawn: a region with a reduction access is named twice in one task");
        }
        b.type = merge_types(b.type, a.type);
        b.size = std::max(b.size, a.size);
        merged = true;
        break;
      }
    }
    // Merged away: final from the start, no part in the counts.
    a.flags.store(merged ? kReady | kDone | kComplete | kSealed | kNoReadyMsg : 0,
                  std::memory_order_relaxed);
    counted += merged ? 0 : 1;
    group_state |= a.type == access_type::reduction || a.type == access_type::commutative;
  }

  // Everything that may throw, before anything is shared: room in the table
  // (and the graph) for every access, and the state of each group that an
  // access begins (a reduction's copies, a commutative token). Whether an
  // access begins a group or joins its predecessor's is read from the table,
  // which only this thread changes. On a throw, undo it all: the scope is as
  // it was.
  dataflow::graph* graph = df.graph_ && df.graph_->on ? df.graph_.get() : nullptr;
  try {
    df.table_.reserve(counted);
    if (MOTE_UNLIKELY(graph != nullptr)) graph->prepare(*t, df.table_);
    for (std::uint32_t i = 0; MOTE_UNLIKELY(group_state) && i < n; ++i) {
      df_access& a = t->accesses[i];
      if (a.type != access_type::reduction && a.type != access_type::commutative) continue;
      if (a.flags.load(std::memory_order_relaxed) != 0) continue;  // merged away
      const df_table::entry* slot = df.table_.find(a.address);
      if (slot != nullptr && slot->last != nullptr && same_group(*slot->last, a))
        continue;  // joins
      if (a.type == access_type::reduction) {
        a.group = descs[i].red->make(descs[i].spec, df.runtime_->num_workers());
      } else {
        a.group = new commutative_token;
      }
    }
  } catch (...) {
    for (std::uint32_t i = 0; i < n; ++i) {
      delete t->accesses[i].group;
      t->accesses[i].group = nullptr;
    }
    if (graph != nullptr) graph->forget(*t);
    throw;
  }

  // Nothing below throws.
  // Its priority: the spawn's, else its kind's (df_mark_current_urgent).
  std::uint8_t prio = t->priority.load(std::memory_order_relaxed);
  if (MOTE_UNLIKELY(urgent.marked.load(std::memory_order_relaxed) != 0) && prio == 0) {
    prio = urgent.find(t->trace_what);
    t->priority.store(prio, std::memory_order_relaxed);
  }
  const bool traced = (w != nullptr && w->trace() != nullptr) || (w == nullptr && trace::enabled());
  // Relaxed: the id only needs to be unique.
  if (MOTE_UNLIKELY(traced)) t->trace_id = next_trace_id.fetch_add(1, std::memory_order_relaxed);
  // Relaxed: the record is private until the first link below publishes it
  // (acq_rel fetch-ors on the predecessors).
  t->blocked.store(static_cast<std::int32_t>(counted) + 1, std::memory_order_relaxed);
  t->live.store(static_cast<std::int32_t>(counted) + 1, std::memory_order_relaxed);
  t->local = group_access::count_in(g, w);
  ++df.spawned_since_wait_;
  const std::uint64_t node_id = graph != nullptr ? graph->add_task(*t) : 0;

  engine e{w, df.runtime_, w != nullptr ? w->trace() : nullptr};
  std::int32_t satisfied_now = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    df_access& a = t->accesses[i];
    if (a.flags.load(std::memory_order_relaxed) != 0) continue;  // merged away
    df_table::entry& slot = df.table_.find_or_insert(a.address);
    df_access* pred = slot.last;
    const bool same = pred != nullptr && same_group(*pred, a);
    // Relaxed, these stores: `a` is private until the link below publishes it.
    if (pred == nullptr) {
      // First in the chain: satisfied at once.
      a.flags.store(kDone | kNoReadyMsg, std::memory_order_relaxed);
      ++satisfied_now;
    } else if (same) {
      a.group = pred->group;  // alive: a group cannot end while its last member has no S
    } else {
      a.flags.store(kNoReadyMsg, std::memory_order_relaxed);
    }
    if (a.type == access_type::commutative) t->commutative = true;
    if (graph != nullptr) {
      graph->add(a.address, node_id, a.type, pred != nullptr ? pred->type : a.type, same);
    }
    slot.last = &a;
    if (MOTE_UNLIKELY(prio != 0) && pred != nullptr) {
      // What feeds a task with a priority gets it too (one level): it runs
      // before the ordinary tasks readied with it. Relaxed, a hint: the
      // predecessor is alive (its access has no S yet), and may be ready,
      // running or done already, when this comes too late to matter.
      std::atomic<std::uint8_t>& pp = pred->task->priority;
      if (pp.load(std::memory_order_relaxed) < prio) pp.store(prio, std::memory_order_relaxed);
    }
    if (pred != nullptr) {
      // Link, then tell the predecessor (S, with SS when the group goes on).
      // The plain store is published by the fetch-or's release.
      pred->successor = &a;
      e.deliver(pred, kSucc | (same ? kSuccSame : 0));
    }
  }
  // Registration is over: drop its hold. Whoever takes `blocked` to zero
  // (this thread now, or the last predecessor to finish) readies the task.
  const std::int32_t drop = satisfied_now + 1;
  if (t->blocked.fetch_sub(drop, std::memory_order_acq_rel) == drop) e.ready(t);
  // Every 16 spawns on the scope's own worker: the spawner is alive, so the
  // tasks it keeps stay its own (a thief's request to its kept tasks is
  // answered, and they are forced out only when it goes quiet for
  // split_deque::kForceAfterNs: a spawn costs about a microsecond). Every 64
  // (the count's shared half is read then only): the locality windows, then
  // the throttle: the owner far ahead of its tasks runs ready ones from its
  // pool until half the limit is left, or nothing is ready here. It never
  // waits: tasks blocked elsewhere are left to their predecessors.
  if (MOTE_UNLIKELY((df.spawned_since_wait_ & 63) == 0) && w == nullptr && df.throttle_ != 0 &&
      current_worker == nullptr) {
    // A spawner outside every runtime (a program's main thread) cannot run
    // tasks: it sleeps (df_scope_access::throttle_outside).
    df_scope_access::throttle_outside(df);
    return;
  }
  if (MOTE_UNLIKELY((df.spawned_since_wait_ & 15) == 0) && w != nullptr && w == group_access::owner(g)) {
    w->kept().share_if_asked();
    if ((df.spawned_since_wait_ & 63) != 0) return;
    const std::uint64_t spawned = df.spawned_since_wait_;
    if ((spawned == 64 || spawned % kWindow == 0) && df.grain_.measured.load(std::memory_order_relaxed) &&
        w->runtime().num_workers() > 1)
      next_window(df.grain_, spawned, t->trace_what, group_access::pending_for_owner(g));
    const std::uint32_t limit = df.throttle_;
    if (limit != 0 && group_access::pending_for_owner(g) > limit) {
      while (group_access::pending_for_owner(g) > limit / 2) {
        // Urgent tasks first, as every worker's look takes them.
        task* r = MOTE_UNLIKELY(w->runtime().urgent_waiting()) ? w->runtime().take_urgent() : nullptr;
        if (r == nullptr) r = w->pool().pop_any();
        // Under delegation the ready tasks wait in the policy's queue.
        if (r == nullptr && MOTE_UNLIKELY(w->delegating())) r = w->runtime().policy().take(*w);
        if (r == nullptr) break;
        w->run_task(r, nullptr);
      }
    }
  }
}

// ---- Running a task -------------------------------------------------------------

namespace {

}  // namespace

constinit thread_local detail::df_task* detail::tl_df_current __attribute__((tls_model("initial-exec"))) = nullptr;

detail::df_task* detail::df_current_task() noexcept { return detail::tl_df_current; }



detail::df_task* detail::df_exchange_current_task(df_task* t) noexcept {
  df_task* previous = detail::tl_df_current;
  detail::tl_df_current = t;
  return previous;
}

namespace {

// The end of a task whose body has returned and whose events are fulfilled,
// on the calling thread (w: its worker of the scope's runtime, or nullptr):
// give back its tokens, send C (and F) to each access, drop the body's share
// of `live`, count it down in the group.
__attribute__((always_inline)) inline detail::df_task* end_task(detail::df_task* t,
                                                                detail::worker* w, bool failed,
                                                                bool keep_successor) noexcept {
  using namespace detail;
  task_group& g = *t->group;
  dataflow& scope = *t->scope;  // t may be freed below
  const bool counted_by_owner = t->local && w != nullptr && w == group_access::owner(g);
  engine e{w, &group_access::runtime_of(g), w != nullptr ? w->trace() : nullptr};
  e.ending = t;
  df_task* next = nullptr;
  if (keep_successor) e.successor_slot = &next;
  if (MOTE_UNLIKELY(t->commutative)) give_tokens(t, e);
  // Finish every access: C (and F), delivered one by one with what follows.
  const std::uint32_t done = kComplete | (failed ? kFailed : 0);
  for (std::uint16_t i = t->num_accesses; i-- > 0;) {
    df_access& a = t->accesses[i];
    // Relaxed: only a merged-away access has C before this point (set at
    // registration, published with the task); C comes from nowhere else.
    if ((a.flags.load(std::memory_order_relaxed) & kComplete) != 0) continue;  // merged away
    e.deliver(&a, done);
  }
  // The body's share of `live`, with the accesses that became final above.
  // acq_rel, as release_access.
  const std::int32_t drop = e.ending_finals + 1;
  if (t->live.fetch_sub(drop, std::memory_order_acq_rel) == drop) free_record(t, w);
  // The task's last access to its scope: once counted down, wait() may return.
  if (counted_by_owner) {
    group_access::finish_local(g);
  } else {
    df_scope_access::wake_throttled(scope);  // the scope is alive until the count-down
    group_access::finish_remote(g);
  }
  return next;
}

}  // namespace

namespace {

// Ends the callable's lifetime (the rest of the record is trivially
// destructible). body(t, nullptr) only destroys, and a destructor that
// throws ends the program, as it would anywhere in a noexcept path.
void destroy_callable(detail::df_task* t) noexcept { t->body(t, nullptr); }

}  // namespace

namespace {

// One data-flow task on worker w: its body, then its end unless an event
// holds it. Returns the immediate successor that its end readied, or nullptr.
detail::df_task* run_one(detail::df_task* t, detail::worker& w) noexcept {
  using namespace detail;
  task_group& g = *t->group;
  trace_buffer* trace = w.trace();
  if (MOTE_UNLIKELY(trace != nullptr)) {
    if (t->trace_named) {
      trace->put(trace_kind::task_name, 0, t->trace_what);
    } else {
      trace->put(trace_kind::task_fn, 0, t->trace_what);
    }
    for (std::uint16_t i = 0; i < t->num_accesses; ++i) {
      if (t->accesses[i].pred_task_link) trace->put(trace_kind::flow_in, engine::flow_id(&t->accesses[i]));
    }
  }
  bool failed = t->poisoned.load(std::memory_order_relaxed);
  // Relaxed: only this thread touches `events` until the body opens an event
  // (dataflow_event::open, on this thread), whose fulfilment elsewhere is
  // ordered after it by the fetch_sub below.
  t->events.store(1, std::memory_order_relaxed);
  // One body in kSampleEvery that runs on a worker of the scope's runtime
  // (its record has a home there) is timed, for the locality's choice of
  // what to try (next_window): the owner alone may run none of them (share
  // mode hands them all to a thief), and a scope whose bodies are never
  // measured never tries keep.
  const bool sampled = t->home != nullptr && --tl_until_sample == 0;
  const std::uint64_t t0 = MOTE_UNLIKELY(sampled) ? cycle_clock() : 0;
  // Relaxed: as in a task_group task, cancellation is a request.
  if (!failed && (MOTE_LIKELY(group_cancels_active.load(std::memory_order_relaxed) == 0) || !g.is_cancelled())) {
    const std::uint32_t level = w.enter_group(&g);
    df_task* outer = detail::tl_df_current;
    detail::tl_df_current = t;
    try {
      t->body(t, &w);
    } catch (...) {
      group_access::record_exception_only(g, std::current_exception());
      failed = true;
    }
    detail::tl_df_current = outer;
    w.leave_group(level);
  }
  if (MOTE_UNLIKELY(sampled)) {
    tl_until_sample = kSampleEvery;
    note_body(df_scope_access::grain(*t->scope), cycle_clock() - t0);
  }
  destroy_callable(t);  // the record stays until its accesses are final
  if (failed) t->poisoned.store(true, std::memory_order_relaxed);  // read by whoever ends it
  // acq_rel: the thread that ends the task (the last of the body and the
  // events) sees what the others did before their count-down (the body's
  // writes, a transfer's data). The load first spares the read-modify-write
  // when only the body is left; acquire, since a 1 there may be what the
  // last fulfil left, whose writes this thread must then see (the data its
  // successors read, and the record it may free).
  if (MOTE_UNLIKELY(t->events.load(std::memory_order_acquire) != 1) &&
      t->events.fetch_sub(1, std::memory_order_acq_rel) != 1) {
    return nullptr;  // the last event's fulfil ends it
  }
  // An event that failed (dataflow_event::fail) fails the task as a throw
  // does; its store of the flag came before its count-down, which the load
  // or the fetch-sub above acquired.
  return end_task(t, &w, t->poisoned.load(std::memory_order_relaxed), !w.delegating());
}

}  // namespace

void detail::df_task_run(task* base, worker& w) noexcept {
  auto* t = static_cast<df_task*>(base);
  for (;;) {
    df_task* next = run_one(t, w);
    if (next == nullptr) return;
    // An attached source (MPI's requests) is polled between tasks, here as
    // in the worker's loop: a chain of immediate successors would otherwise
    // leave the transfers it waits for unseen until it ends.
    if (MOTE_UNLIKELY(w.runtime().source().attached())) w.runtime().source().poll_if_due();
    if (MOTE_UNLIKELY(w.runtime().urgent_waiting())) {
      // Urgent tasks came meanwhile: they run first (the worker's next look
      // takes them), the successor from the pool after them.
      w.runtime().schedule(next, &w);
      return;
    }
    // This worker is alive: a thief's request to its kept tasks is
    // answered, so they stay here (one relaxed load; thieves ask at most
    // once per split_deque::kForceAfterNs).
    w.kept().share_if_asked();
    // The immediate successor runs here, as the worker runs a task it takes
    // (its trace event and statistics).
    if (MOTE_UNLIKELY(w.instrumented())) {
      w.note_task_end();
      w.note_task_begin(reinterpret_cast<const void*>(&df_task_run), false);
    }
    t = next;
  }
}



dataflow_event dataflow_event::open() {
  detail::df_task* t = detail::tl_df_current;
  if (t == nullptr) {
    throw usage_error("mote::dataflow_event::open: called outside a data-flow task's body");
  }
  // Relaxed: on the body's thread, before the body's own count-down (acq_rel)
  // that any fulfil must follow to end the task.
  t->events.fetch_add(1, std::memory_order_relaxed);
  return dataflow_event(t);
}

void dataflow_event::fulfill() {
  detail::df_task* t = task_;
  if (t == nullptr) {
    throw usage_error("mote::dataflow_event::fulfill: the event is empty (fulfilled already, or moved from)");
  }
  task_ = nullptr;
  // acq_rel: see df_task_run.
  if (t->events.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  detail::worker* w = detail::current_worker;
  if (w != nullptr && &w->runtime() != &detail::group_access::runtime_of(*t->group)) w = nullptr;
  end_task(t, w, t->poisoned.load(std::memory_order_relaxed), false);
}

void dataflow_event::fail(std::exception_ptr e) {
  detail::df_task* t = task_;
  if (t == nullptr) {
    throw usage_error("mote::dataflow_event::fail: the event is empty (fulfilled already, or moved from)");
  }
  if (!e) throw usage_error("mote::dataflow_event::fail: the exception is null");
  task_ = nullptr;
  detail::group_access::record_exception_only(*t->group, std::move(e));
  // Relaxed: published by the count-down below (acq_rel), which whoever
  // ends the task has acquired before it reads the flag.
  t->poisoned.store(true, std::memory_order_relaxed);
  // acq_rel: see df_task_run.
  if (t->events.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  detail::worker* w = detail::current_worker;
  if (w != nullptr && &w->runtime() != &detail::group_access::runtime_of(*t->group)) w = nullptr;
  end_task(t, w, true, false);
}

void detail::df_mark_current_urgent(std::uint8_t priority) noexcept {
  const df_task* t = detail::tl_df_current;
  if (t == nullptr || priority == 0) return;
  urgent.mark(t->trace_what, priority);
}

dataflow_event::~dataflow_event() {
  if (task_ != nullptr) {
    std::fprintf(stderr,
                 "mote: a mote::dataflow_event was destroyed unfulfilled; its task could never end "
                 "and the scope's wait would never return\n");
    std::abort();
  }
}

// ---- The scope -------------------------------------------------------------------

// The group chose the runtime (the caller's worker's, or the default one).
dataflow::dataflow() : group_(), runtime_(&detail::group_access::runtime_of(group_)) { construct(); }
dataflow::dataflow(runtime& rt) : group_(rt), runtime_(&detail::group_access::runtime_of(group_)) { construct(); }

void dataflow::construct() {
  // The scope's wait looks at urgent tasks and a work source between tasks.
  detail::group_access::set_helps_runtime(group_);
  throttle_ = throttle_limit();
  set_locality(default_locality());
  spawner_ = detail::thread_token();
  detail::df_task* cur = detail::tl_df_current;
  spawner_task_ = cur;
  const detail::worker* w = detail::current_worker;
  spawner_group_ = w != nullptr ? w->current_group() : nullptr;
  spawner_loop_depth_ = w != nullptr ? detail::loops_of(*w).depth : 0;
  // Nested in the innermost data-flow body this thread runs, if this frame is
  // that body's (or a loop body of it, which runs in its group on every
  // worker): not when a task of another group started on top of it since,
  // such as a task that the body's wait for a task_group ran here. Such a
  // task, run on any other worker, sees no data-flow task at all.
  const bool in_body = cur != nullptr && (w == nullptr || w->current_group() == &cur->scope->group_);
  parent_ = (in_body && cur->scope->runtime_ == runtime_) ? cur : nullptr;
}

std::exception_ptr dataflow::finish_wait(task_group_status* status) {
  if (MOTE_UNLIKELY(detail::thread_token() != spawner_)) {
    throw usage_error(
        "mote::dataflow::wait: called from another thread than the one that created the scope");
  }
  std::exception_ptr error = detail::group_access::wait_for_all(group_, status);
  // Every task has finished; seal the chains: their last accesses learn that
  // no successor will come, which ends reductions (combining them into their
  // targets) and frees the records.
  detail::worker* w = detail::current_worker;
  if (w != nullptr && &w->runtime() != runtime_) w = nullptr;
  detail::engine e{w, runtime_, nullptr};
  e.combine_error = &error;
  table_.for_each([&e](detail::df_table::entry& slot) {
    if (slot.last != nullptr) e.deliver(slot.last, kSealed);
  });
  table_.clear();
  if (graph_) graph_->chains.clear();  // later tasks depend on nothing before the wait
  spawned_since_wait_ = 0;
  return error;
}

task_group_status dataflow::wait() {
  task_group_status status = task_group_status::complete;
  if (std::exception_ptr error = finish_wait(&status)) std::rethrow_exception(error);
  return status;
}

// NOLINTNEXTLINE(bugprone-exception-escape): rethrows a task's exception by design
dataflow::~dataflow() noexcept(false) {
  if (spawned_since_wait_ == 0 && table_.used == 0) return;
  // The implicit wait at the end of a scope (OmpSs-2 tasks wait for their
  // children the same way): every task runs; the first exception is rethrown
  // unless one is already propagating.
  task_group_status status = task_group_status::complete;
  std::exception_ptr error;
  if (detail::group_access::orphaned(group_)) {
    // In a child after fork(): its records are never freed; neither is the
    // cache they would go back to.
    (void)spawner_cache_.release();
    return;
  }
  const void* me = detail::thread_token();
  if (me != spawner_) spawner_ = me;  // destroyed elsewhere: still wait, never crash
  try {
    error = finish_wait(&status);
  } catch (...) {
    error = std::current_exception();
  }
  if (error && std::uncaught_exceptions() == 0) std::rethrow_exception(error);
}

void dataflow::set_locality(dataflow_locality l) noexcept {
  // Relaxed: a hint that tasks read when they become ready; set from the
  // scope's frame, between spawns (a task readied meanwhile goes either way).
  grain_.measured.store(l == dataflow_locality::automatic, std::memory_order_relaxed);
  grain_.keep_local.store(l == dataflow_locality::keep, std::memory_order_relaxed);
}

void dataflow::record_graph(bool on) {
  if (!graph_) graph_ = std::make_unique<graph>();
  graph_->on = on;
}

void dataflow::clear_graph() noexcept {
  if (graph_) {
    graph_->nodes.clear();
    graph_->edges.clear();
    graph_->chains.clear();
  }
}

void dataflow::dump_dot(std::ostream& out) const {
  out << "digraph mote_dataflow {\n  node [shape=box, fontname=\"monospace\"];\n";
  if (graph_) {
    for (const auto& nd : graph_->nodes) {
      out << "  t" << nd.id << " [label=\"";
      if (nd.named) {
        for (const char* c = static_cast<const char*>(nd.what); *c != '\0'; ++c) {
          if (*c == '"' || *c == '\\') out << '\\';
          out << *c;
        }
      } else {
        out << "task " << nd.id;
      }
      out << "\"];\n";
    }
    for (const auto& ed : graph_->edges) {
      out << "  t" << ed.from << " -> t" << ed.to << " [label=\"" << ed.address << "\\n" << type_name(ed.from_type)
          << " -> " << type_name(ed.to_type) << "\"];\n";
    }
  }
  out << "}\n";
}

}  // namespace mote
