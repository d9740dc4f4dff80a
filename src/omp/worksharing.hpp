// OpenMP's worksharing constructs on a team (loops, sections, single,
// ordered, doacross) and the critical sections: what the GOMP_loop_*,
// GOMP_sections_*, GOMP_single_*, GOMP_ordered_*, GOMP_doacross_*,
// GOMP_critical_* and GOMP_atomic_* entry points of src/omp/gomp/ call.
//
// The threads of a team meet its worksharing constructs in one order (the
// OpenMP rule), so a thread numbers them as it meets them, and construct k
// lives in slot k mod kWsRing of a ring in the team (ws_team_state). The
// first thread to arrive at k claims the slot with one CAS and describes the
// construct there (the loop's bounds and schedule, its shared counters);
// the others find it described and join. Each thread counts itself out when
// it leaves (a nowait construct: at once, without waiting for the others);
// the last one out frees the slot for construct k + kWsRing. A thread that
// gets more than kWsRing constructs ahead of the slowest waits for the slot.
//
// Loops are handed out in chunks of logical iterations [lo, hi) of
// [0, count), turned back into the loop's own values at the entry point's
// edge. Schedules:
//   static          a block per thread, or chunks round robin: computed by
//                   each thread alone, nothing shared;
//   dynamic         (monotonic) one shared counter, one fetch-and-add a chunk;
//   nonmonotonic    (dynamic without the monotonic modifier, and auto) a
//                   stripe per thread, claimed with fetch-and-add, and the
//                   other threads' stripes once one's own is empty (the
//                   distribution of mote's loops, detail::loop_stripe);
//   guided          one shared counter, moved by CAS: chunks of
//                   ceil(remaining / n) iterations, at least the chunk size;
//   runtime         whichever the run-sched-var ICV names.
// No lock on any of these paths.
//
//   // every thread of a team, for `#pragma omp for schedule(dynamic, 4)`:
//   namespace omp = mote::omp;
//   const omp::schedule_request s{omp::schedule_kind::dynamic, omp::monotonicity::monotonic, 4};
//   std::uint64_t lo, hi;
//   if (omp::loop_start(omp::loop_bounds::of_long(0, n, 1), s, omp::loop_flavour::plain, &lo, &hi,
//                       nullptr)) {
//     do {
//       for (long i = static_cast<long>(lo); i < static_cast<long>(hi); ++i) body(i);
//     } while (omp::loop_next(&lo, &hi));
//   }
//   omp::loop_end();  // with the implicit barrier (loop_end_nowait: without)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "mote/detail/loops.hpp"
#include "mote/detail/platform.hpp"
#include "mote/export.hpp"
#include "wait/event_count.hpp"

namespace mote::omp {

using detail::cache_line;

struct team;  // team.hpp

// ---- What an entry point asks for --------------------------------------------------

// A loop as gcc passes it: the first value, the bound (never reached: the
// loop runs while v < end upward, v > end downward) and the step. Values are
// the two's-complement images of the long or unsigned long long arguments.
struct loop_bounds {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::uint64_t incr = 1;  // a downward step as its two's complement (-3: 2^64 - 3)
  bool up = true;          // the direction (the _ull entry points' `up` flag)
  bool is_signed = true;   // compare start and end as long (else as unsigned long long)

  static loop_bounds of_long(long start, long end, long incr) noexcept {
    return {static_cast<std::uint64_t>(start), static_cast<std::uint64_t>(end),
            static_cast<std::uint64_t>(incr), incr > 0, true};
  }
  static loop_bounds of_ull(bool up, unsigned long long start, unsigned long long end,
                            unsigned long long incr) noexcept {
    return {start, end, incr, up, false};
  }
};

// The schedule clause. chunk 0: none given.
enum class schedule_kind : std::uint8_t { static_, dynamic, guided, auto_, runtime };
// The clause's modifier. `unspecified` is schedule(runtime) without one: the
// run-sched-var ICV's own modifier decides (nonmonotonic when it has none).
enum class monotonicity : std::uint8_t { monotonic, nonmonotonic, unspecified };
struct schedule_request {
  schedule_kind kind = schedule_kind::static_;
  monotonicity mono = monotonicity::monotonic;
  std::uint64_t chunk = 0;
};
// The run-sched-var ICV as GOMP_loop_start's `sched` and omp_sched_t code it:
// 1 static, 2 dynamic, 3 guided, 4 auto, bit 31 the monotonic modifier.
inline constexpr unsigned kSchedStatic = 1;
inline constexpr unsigned kSchedDynamic = 2;
inline constexpr unsigned kSchedGuided = 3;
inline constexpr unsigned kSchedAuto = 4;
inline constexpr unsigned kSchedMonotonic = 0x80000000u;

// What the loop carries besides its iterations (doacross loops have an entry
// point of their own, loop_doacross_start).
enum class loop_flavour : std::uint8_t {
  plain,
  ordered,  // ordered regions (GOMP_ordered_start/end) run in iteration order
};

// ---- The state behind the constructs -----------------------------------------------

// Constructs a team may have in flight at once (a thread this many constructs
// ahead of the slowest waits). A power of two.
inline constexpr unsigned kWsRing = 8;

// How a described loop hands out its iterations.
enum class ws_sched : std::uint8_t { static_block, static_chunked, dynamic, guided, stealing };

// One slot of the ring: the construct it holds now. Written by the thread
// that describes the construct before the others may read it (published by
// the release store of `state`), then read-only, but for the counters on
// lines of their own.
struct alignas(cache_line) ws_construct {
  // The construct: written by its initialiser, then read-only.
  // (number << 2) | phase: free for construct `number`, being described, or
  // described (kWsFree, kWsBusy, kWsReady in worksharing.cpp).
  std::atomic<std::uint64_t> state{0};
  ws_sched sched = ws_sched::static_block;
  bool ordered = false;
  bool cas_claims = false;  // a range so large that fetch-and-add could wrap: claims use CAS
  unsigned n = 1;           // the team's threads
  std::uint64_t count = 0;  // logical iterations
  std::uint64_t chunk = 1;
  std::uint64_t start = 0;  // the loop's own first value, step and bound
  std::uint64_t incr = 1;
  std::uint64_t end = 0;
  void* mem = nullptr;   // the shared memory of GOMP_loop_start's `mem`, or nullptr
  void* copy = nullptr;  // single copyprivate: the winner's data (read after a barrier)
  // Doacross: the dimensions' iteration counts, and a word per block of
  // iterations (a thread's, a chunk's or an iteration's, by schedule) that
  // holds 1 + the linear number of the block's last posted iteration.
  unsigned dims = 0;    // 0: no doacross waits (none needed, or none possible)
  unsigned stride = 1;  // words between two blocks' words (a cache line when few)
  const std::uint64_t* radix = nullptr;
  std::atomic<std::uint64_t>* posted = nullptr;

  // The shared claim counter (dynamic, guided, sections).
  alignas(cache_line) std::atomic<std::uint64_t> next{0};

  // Ordered: the first iteration whose chunk has not had its turn yet. The
  // sleepers of ordered and doacross waits.
  alignas(cache_line) std::atomic<std::uint64_t> ordered_next{0};
  detail::event_count waits;

  // Leaving: the threads still in the construct.
  alignas(cache_line) std::atomic<unsigned> remaining{0};
  // Task reductions (GOMP_loop_start's `reductions`): the describer's
  // registration, which the other threads' registrations share (tasks.hpp).
  std::uintptr_t* task_reductions = nullptr;

  // Storage the slot keeps for its next constructs (its describers' only).
  alignas(cache_line) std::unique_ptr<detail::loop_stripe[]> stripes;  // n, for stealing
  std::unique_ptr<std::uint64_t[]> mem_words;
  std::size_t mem_capacity = 0;  // in words
  std::unique_ptr<std::atomic<std::uint64_t>[]> posted_words;
  std::size_t posted_capacity = 0;
  std::vector<std::uint64_t> radix_storage;
};

// A team's constructs in flight (team::ws). Made with the team; a team kept
// for the next region carries its ring over (every thread met the same
// constructs, so the threads' counts still agree with the slots), except
// after a cancelled region, whose threads may have skipped constructs:
// reset_worksharing (below) starts it afresh.
struct ws_team_state {
  explicit ws_team_state(unsigned n);
  ws_team_state(const ws_team_state&) = delete;
  ws_team_state& operator=(const ws_team_state&) = delete;

  unsigned n;
  ws_construct ring[kWsRing];
  // Threads waiting for a slot (the ring is full, or the construct is being
  // described).
  alignas(cache_line) detail::event_count ring_waits;
  // single (without copyprivate) constructs won so far: the winner of single
  // k moves it from k to k + 1, so no slot is needed.
  alignas(cache_line) std::atomic<std::uint64_t> singles{0};
};

// A thread's place in its team's constructs (thread_state::ws). Owner only.
struct ws_thread_state {
  std::uint64_t index = 0;      // ring constructs met so far: the next one's number
  std::uint64_t singles = 0;    // single constructs met so far
  ws_construct* cur = nullptr;  // the construct this thread is in, or nullptr
  std::uint64_t trip = 0;       // static schedules: chunks this thread has taken
  unsigned victim = 0;          // stealing: the stripe being emptied
  bool took_last = false;       // stealing: this thread ran the loop's last chunk
  // Ordered: the chunk being run, and whether it has had its turn.
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  bool holds_chunk = false;
  bool has_turn = false;
};

// Every slot free, no single won, every thread of tm at its first construct:
// for a team kept for its next region after a cancelled one (team.cpp), or
// always. Only while no thread is in the team (between its regions); the
// slots keep their storage.
MOTE_API void reset_worksharing(team& tm) noexcept;

// ---- Loops -------------------------------------------------------------------------

// Every thread of the team calls these, in the same order. Values come back
// as the two's-complement images of the loop's type: run v from *istart
// while v < *iend (downward: v > *iend), stepping by the loop's step.

// Enters the next construct of the calling thread's team, a loop, and takes
// its first chunk: false when there is none for this thread. istart
// nullptr: enter only (GOMP_loop_start's "initialise"), true. mem (may be
// nullptr): *mem holds a size in bytes; it comes back as memory of that size
// shared by the team for this construct, zeroed by whoever described it.
// reductions (may be nullptr): the loop's task reductions, gcc's array
// (`for reduction(task, ...)`); the loop opens a taskgroup that
// GOMP_workshare_task_reduction_unregister closes after the loop's end.
MOTE_API bool loop_start(const loop_bounds& b, schedule_request s, loop_flavour f,
                         std::uint64_t* istart, std::uint64_t* iend, void** mem,
                         std::uintptr_t* reductions = nullptr);
// A doacross loop (ordered(dims)): iterations [0, counts[0]) of the
// outermost loop, counts[1..] the inner ordered loops' iteration counts.
// mem and reductions as above.
MOTE_API bool loop_doacross_start(unsigned dims, const std::uint64_t* counts, schedule_request s,
                                  std::uint64_t* istart, std::uint64_t* iend, void** mem,
                                  std::uintptr_t* reductions = nullptr);
// The next chunk, or false when the loop has no more for this thread (or it
// was cancelled).
MOTE_API bool loop_next(std::uint64_t* istart, std::uint64_t* iend);
// Leaves the loop, then waits at the team's barrier.
MOTE_API void loop_end();
// Leaves the loop without waiting.
MOTE_API void loop_end_nowait();
// Leaves the loop, then waits at the barrier; true when the region was
// cancelled (GOMP_loop_end_cancel).
MOTE_API bool loop_end_cancel();

// The parallel region of GOMP_parallel_loop_*: every thread enters the loop
// before it runs fn(data), which takes its chunks with loop_next.
MOTE_API void parallel_loop(void (*fn)(void*), void* data, unsigned nthreads, unsigned flags,
                            const loop_bounds& b, schedule_request s);

// ---- Ordered and doacross ----------------------------------------------------------

// Waits until every chunk before the calling thread's has had its turn.
MOTE_API void ordered_start();
MOTE_API void ordered_end() noexcept;
// The doacross loop's dimensions, 0 when its waits need nothing (one thread,
// or an empty dimension): how many values post and wait read.
MOTE_API unsigned doacross_dims() noexcept;
// depend(source): marks iteration v (dims logical indices, the outermost
// first) done. depend(sink: v): waits until iteration v is.
MOTE_API void doacross_post(const std::uint64_t* v) noexcept;
MOTE_API void doacross_wait(const std::uint64_t* v);

// ---- Sections, single --------------------------------------------------------------

// The number (1-based) of the first section this thread runs, 0: none. mem
// and reductions as loop_start's.
MOTE_API unsigned sections_start(unsigned count, void** mem, std::uintptr_t* reductions = nullptr);
MOTE_API unsigned sections_next();
// Enters the next construct, a sections of `count`, taking no section (the
// threads of a region started by GOMP_parallel_sections_start).
MOTE_API void sections_enter(unsigned count);
// GOMP_sections_end*: as loop_end*.
// The region of GOMP_parallel_sections, as parallel_loop.
MOTE_API void parallel_sections(void (*fn)(void*), void* data, unsigned nthreads, unsigned flags,
                                unsigned count);

// The scope construct with task reductions (GOMP_scope_start): every thread
// runs its body; the first to arrive registers the reductions and the others
// share them, as for a loop's. The thread leaves the construct at once (gcc
// emits the barrier and GOMP_workshare_task_reduction_unregister after the
// body).
MOTE_API void scope_start(std::uintptr_t* reductions);

// True in the one thread that runs the single construct.
MOTE_API bool single_start() noexcept;
// copyprivate: nullptr in the thread that runs the construct (it then calls
// single_copy_end with its data); the others get that data, after a barrier.
MOTE_API void* single_copy_start();
MOTE_API void single_copy_end(void* data);

// ---- Cancellation of a loop or sections (GOMP_cancel, GOMP_cancellation_point) -----

// Cancels the calling thread's construct: nobody gets another chunk or
// section. False when the thread is in no construct of a team. The flag is
// the team's (team::ws_cancelled), cleared when the next construct is
// described: a cancellable construct has no nowait (OpenMP's rule), so every
// thread has passed its end barrier by then.
MOTE_API bool cancel_construct() noexcept;
MOTE_API bool construct_cancelled() noexcept;

// ---- Critical sections -------------------------------------------------------------

// One lock for every unnamed critical construct, one per name (*name is the
// pointer-sized slot gcc reserves for it, .gomp_critical_user_<name>; the
// lock is made there on first use), one for GOMP_atomic_start/end. FIFO
// locks that spin, then sleep (mote::ticket_lock).
MOTE_API void critical_start();
MOTE_API void critical_end();
MOTE_API void critical_name_start(void** name);
MOTE_API void critical_name_end(void** name);
MOTE_API void atomic_start();
MOTE_API void atomic_end();

}  // namespace mote::omp
