// The worksharing constructs (worksharing.hpp): the ring of constructs, the
// loop schedules, ordered and doacross, sections, single, the critical
// sections.
#include "omp/worksharing.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/runtime_impl.hpp"
#include <mutex>

#include "omp/icv.hpp"
#include "omp/tasks.hpp"
#include "omp/team.hpp"
#include "wait/event_count.hpp"
#include "wait/idle.hpp"

namespace mote::omp {

namespace {

// A slot's state: the construct's number, shifted, and a phase.
constexpr std::uint64_t kWsFree = 0;   // free for that construct
constexpr std::uint64_t kWsBusy = 1;   // its first thread is describing it
constexpr std::uint64_t kWsReady = 2;  // described: join it
constexpr std::uint64_t slot_state(std::uint64_t number, std::uint64_t phase) noexcept {
  return (number << 2) | phase;
}

static_assert((kWsRing & (kWsRing - 1)) == 0, "the ring's size is a power of two");
// Slots (and their shared counters) never share a line with a neighbour.
static_assert(alignof(ws_construct) == cache_line && sizeof(ws_construct) % cache_line == 0);
static_assert(alignof(detail::loop_stripe) == cache_line);

// Spin window of a wait when the team has no runtime to ask (a team of one).
constexpr std::int64_t kDefaultSpinNs = 100'000;
// Above this, a fetch-and-add that overshoots the end (by at most a chunk per
// thread) could wrap: such loops claim with CAS.
constexpr std::uint64_t kFetchAddLimit = std::uint64_t{1} << 62;
// A doacross loop with at most this many blocks gives each block's word a
// cache line of its own; more share lines (memory stays linear in blocks).
constexpr std::uint64_t kPaddedBlocks = 1024;
constexpr unsigned kWordsPerLine = static_cast<unsigned>(cache_line / sizeof(std::uint64_t));
// auto: chunks per thread's stripe (stealing evens out the rest).
constexpr std::uint64_t kAutoChunksPerThread = 16;

// The calling thread as the constructs see it: its state, and the ring it
// meets its constructs in (its team's, or, outside every parallel region,
// a ring of its own: the orphaned constructs of a team of one).
struct here {
  thread_state& st;
  ws_thread_state& me;
  ws_team_state& ws;
  team* tm;
  unsigned id;
};

ws_team_state& solo_ring() {
  static thread_local std::unique_ptr<ws_team_state> ring;
  if (MOTE_UNLIKELY(ring == nullptr)) ring = std::make_unique<ws_team_state>(1);
  return *ring;
}

here locate() {
  thread_state& st = current();
  team* tm = st.tm;
  if (MOTE_LIKELY(tm != nullptr)) return {st, st.ws, tm->ws, tm, st.id};
  return {st, st.ws, solo_ring(), nullptr, 0};
}

bool region_cancelled(const here& h) noexcept {
  // Relaxed: a hint, set once; a chunk handed out just after the cancel runs.
  return h.tm != nullptr && MOTE_UNLIKELY(h.tm->cancelled.load(std::memory_order_relaxed));
}

// The region, or the construct the thread is in (GOMP_cancel(LOOP)).
bool claims_cancelled(const here& h) noexcept {
  // Relaxed: as region_cancelled.
  return h.tm != nullptr && MOTE_UNLIKELY(h.tm->ws_cancelled.load(std::memory_order_relaxed) ||
                                          h.tm->cancelled.load(std::memory_order_relaxed));
}

std::int64_t spin_ns(const here& h) noexcept {
  if (h.tm != nullptr && h.tm->rt != nullptr && h.tm->rt->spin_ns() >= 0)
    return h.tm->rt->spin_ns();
  return kDefaultSpinNs;
}

// Waits until done() (which loads with acquire what it tests), spinning on
// the runtime's wait policy, then sleeping in ec, whose notifiers call
// notify_all after the store that makes done() true. When cancellation is on,
// a cancelled region may leave the wait unanswered (its threads leave for the
// region's end instead), so the sleeps are bounded and the region's flag ends
// the wait too: the caller tests again.
template <class Done>
void wait_until(const here& h, detail::event_count& ec, Done&& done) {
  if (done()) return;
  const bool cancellable = globals().cancellation;
  detail::idle_wait idle(spin_ns(h), 2);
  for (;;) {
    if (done() || (cancellable && region_cancelled(h))) return;
    if (idle.spin()) continue;
    const std::uint32_t key = ec.prepare_wait();
    if (done() || (cancellable && region_cancelled(h))) {
      ec.cancel_wait();
      return;
    }
    if (cancellable) {
      ec.commit_wait_for(key, idle.next_park_timeout());
    } else {
      ec.commit_wait(key);
    }
  }
}

// ---- The ring ----------------------------------------------------------------------

// Enters the calling thread's next construct: the first thread to arrive
// describes it (describe(slot)) and gets *first = true. Returns nullptr only
// when the region was cancelled while the thread waited for the slot.
template <class Describe>
ws_construct* enter(const here& h, Describe&& describe, bool* first) {
  const std::uint64_t number = h.me.index++;
  ws_construct& w = h.ws.ring[number & (kWsRing - 1)];
  const std::uint64_t free = slot_state(number, kWsFree);
  const std::uint64_t ready = slot_state(number, kWsReady);
  // Acquire: pairs with the release store of `ready` (the description) and
  // with the last leaver's release store of `free` (every access of the
  // slot's previous construct happens before this one's description).
  std::uint64_t s = w.state.load(std::memory_order_acquire);
  for (;;) {
    if (s == ready) {
      *first = false;
      break;
    }
    if (s == free) {
      // Acquire on success: as the load above. One thread wins the slot.
      if (w.state.compare_exchange_strong(s, slot_state(number, kWsBusy), std::memory_order_acquire,
                                          std::memory_order_acquire)) {
        w.n = h.ws.n;
        describe(w);
        // Relaxed: published by the release store of `ready` below.
        w.remaining.store(h.ws.n, std::memory_order_relaxed);
        // Relaxed: a construct that could be cancelled ends with a barrier
        // (OpenMP allows no nowait on it), which ordered its cancel before
        // this; the joiners read the flag after the release below.
        if (h.tm != nullptr) h.tm->ws_cancelled.store(false, std::memory_order_relaxed);
        // Release: the description happens before any joiner's use of it.
        w.state.store(ready, std::memory_order_release);
        h.ws.ring_waits.notify_all();
        *first = true;
        break;
      }
      continue;  // the CAS loaded the new state into s
    }
    // Another thread is describing construct `number`, or the slot still
    // holds construct number - kWsRing (this thread is that far ahead).
    const std::uint64_t seen = s;
    wait_until(h, h.ws.ring_waits, [&] {
      // Acquire: as the first load.
      s = w.state.load(std::memory_order_acquire);
      return s != seen;
    });
    if (s == seen) return nullptr;  // the region was cancelled
  }
  h.me.cur = &w;
  return &w;
}

// Leaves the calling thread's construct; the last thread out frees the slot
// for the construct kWsRing later.
void leave(const here& h) {
  ws_construct* w = h.me.cur;
  if (w == nullptr) return;
  h.me.cur = nullptr;
  // acq_rel: release, so that this thread's uses of the construct happen
  // before the slot is described again; acquire in the last one out, which
  // then frees the slot for every thread's uses (the decrements form one
  // release sequence).
  if (w->remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // Relaxed: the slot is ours; we wrote its state, or read it with acquire.
  const std::uint64_t number = w->state.load(std::memory_order_relaxed) >> 2;
  // Release: pairs with the acquire CAS of the construct's next describer.
  w->state.store(slot_state(number + kWsRing, kWsFree), std::memory_order_release);
  h.ws.ring_waits.notify_all();
}

// ---- Describing a loop -------------------------------------------------------------

// The number of iterations of b (0 for an empty loop).
std::uint64_t iterations(const loop_bounds& b) noexcept {
  if (b.incr == 0) return 0;
  std::uint64_t distance = 0;
  std::uint64_t step = 0;
  if (b.up) {
    const bool empty = b.is_signed
                           ? static_cast<std::int64_t>(b.start) >= static_cast<std::int64_t>(b.end)
                           : b.start >= b.end;
    if (empty) return 0;
    distance = b.end - b.start;  // modulo 2^64: the true distance, which is below 2^64
    step = b.incr;
  } else {
    const bool empty = b.is_signed
                           ? static_cast<std::int64_t>(b.start) <= static_cast<std::int64_t>(b.end)
                           : b.start <= b.end;
    if (empty) return 0;
    distance = b.start - b.end;
    step = 0 - b.incr;  // the step's magnitude
  }
  return distance / step + (distance % step != 0 ? 1 : 0);
}

struct plan {
  ws_sched sched;
  std::uint64_t chunk;
};

// The schedule a loop runs with. monotonic_only: ordered and doacross loops,
// whose chunks must go out in iteration order.
plan resolve(schedule_request r, bool monotonic_only, unsigned n, std::uint64_t count) {
  schedule_kind kind = r.kind;
  monotonicity mono = r.mono;
  std::uint64_t chunk = r.chunk;
  if (kind == schedule_kind::runtime) {
    const task_icvs& icv = current_icvs();
    const auto code = static_cast<unsigned>(icv.run_sched);
    switch (code & ~kSchedMonotonic) {
      case kSchedStatic:
        kind = schedule_kind::static_;
        break;
      case kSchedGuided:
        kind = schedule_kind::guided;
        break;
      case kSchedAuto:
        kind = schedule_kind::auto_;
        break;
      default:
        kind = schedule_kind::dynamic;
        break;
    }
    chunk = icv.run_chunk > 0 ? static_cast<std::uint64_t>(icv.run_chunk) : 0;
    if (mono == monotonicity::unspecified) {
      mono = (code & kSchedMonotonic) != 0 ? monotonicity::monotonic : monotonicity::nonmonotonic;
    }
  }
  if (monotonic_only) mono = monotonicity::monotonic;
  switch (kind) {
    case schedule_kind::static_:
      return chunk == 0 ? plan{ws_sched::static_block, 0} : plan{ws_sched::static_chunked, chunk};
    case schedule_kind::guided:
      return {ws_sched::guided, std::max<std::uint64_t>(chunk, 1)};
    case schedule_kind::auto_:
      // A monotonic auto loop is the static one (as GNU's); otherwise the
      // stripes, in chunks small enough for stealing to even the end out.
      if (mono == monotonicity::monotonic) return {ws_sched::static_block, 0};
      return {ws_sched::stealing,
              std::max<std::uint64_t>(1, count / (std::uint64_t{n} * kAutoChunksPerThread))};
    case schedule_kind::dynamic:
    case schedule_kind::runtime:
      break;
  }
  chunk = std::max<std::uint64_t>(chunk, 1);
  return {mono == monotonicity::monotonic ? ws_sched::dynamic : ws_sched::stealing, chunk};
}

// Thread `id`'s block of [0, count) under the static schedule: the first
// count % n threads get one iteration more than the others.
void static_block(std::uint64_t count, unsigned n, unsigned id, std::uint64_t* lo,
                  std::uint64_t* hi) noexcept {
  const std::uint64_t q = count / n;
  const std::uint64_t t = count % n;
  if (id < t) {
    *lo = id * (q + 1);
    *hi = *lo + q + 1;
  } else {
    *lo = t * (q + 1) + (id - t) * q;
    *hi = *lo + q;
  }
}

// The thread whose static block holds iteration i (the inverse of static_block).
std::uint64_t static_owner(std::uint64_t count, unsigned n, std::uint64_t i) noexcept {
  const std::uint64_t q = count / n;
  const std::uint64_t t = count % n;
  const std::uint64_t longer = t * (q + 1);  // iterations in the longer blocks
  return i < longer ? i / (q + 1) : t + (i - longer) / q;
}

// Memory of `bytes` shared by the construct's threads, zeroed.
void* shared_memory(ws_construct& w, std::size_t bytes) {
  const std::size_t words =
      std::max<std::size_t>(1, (bytes + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t));
  if (words > w.mem_capacity) {
    w.mem_words = std::make_unique<std::uint64_t[]>(words);
    w.mem_capacity = words;
  }
  std::memset(w.mem_words.get(), 0, words * sizeof(std::uint64_t));
  return w.mem_words.get();
}

// Describes a loop in slot w (its first thread only).
void describe_loop(ws_construct& w, unsigned n, const loop_bounds& b, plan p, bool ordered,
                   void** mem) {
  const std::uint64_t count = iterations(b);
  w.sched = p.sched;
  w.chunk = p.chunk;
  w.ordered = ordered && n > 1;  // a team of one runs its chunks in order anyway
  w.cas_claims = count > kFetchAddLimit || p.chunk > kFetchAddLimit / (std::uint64_t{n} + 1);
  w.count = count;
  w.start = b.start;
  w.incr = b.incr;
  w.end = b.end;
  w.mem = mem != nullptr ? shared_memory(w, reinterpret_cast<std::uintptr_t>(*mem)) : nullptr;
  w.copy = nullptr;
  w.dims = 0;
  w.posted = nullptr;
  // Relaxed: published with the description (enter's release store).
  w.next.store(0, std::memory_order_relaxed);
  w.ordered_next.store(0, std::memory_order_relaxed);
  if (p.sched == ws_sched::stealing) {
    // Whole chunks per stripe: every chunk but the loop's last has `chunk`
    // iterations (OpenMP's rule for dynamic), wherever it is claimed.
    if (w.stripes == nullptr) w.stripes = std::make_unique<detail::loop_stripe[]>(n);
    const std::uint64_t chunks = count / p.chunk + (count % p.chunk != 0 ? 1 : 0);
    for (unsigned i = 0; i < n; ++i) {
      std::uint64_t lo = 0;
      std::uint64_t hi = 0;
      static_block(chunks, n, i, &lo, &hi);
      // Relaxed: as `next` above.
      w.stripes[i].next.store(lo == chunks ? count : lo * p.chunk, std::memory_order_relaxed);
      w.stripes[i].end = hi == chunks ? count : hi * p.chunk;
    }
  }
}

[[noreturn]] void doacross_too_large() {
  std::fprintf(stderr, "mote: a doacross loop nest of 2^64 iterations or more is not supported\n");
  std::fflush(stderr);
  std::abort();
}

// Adds the doacross state to a described loop: a word per block.
void describe_doacross(ws_construct& w, unsigned n, unsigned dims, const std::uint64_t* counts) {
  if (n == 1 || dims == 0) return;  // one thread runs every iteration in order
  std::uint64_t total = 1;
  for (unsigned i = 0; i < dims; ++i) {
    if (counts[i] == 0) return;  // no iteration runs: nothing to post or wait for
    if (__builtin_mul_overflow(total, counts[i], &total)) doacross_too_large();
  }
  std::uint64_t blocks = 0;
  switch (w.sched) {
    case ws_sched::static_block:
    case ws_sched::static_chunked:
      blocks = n;
      break;  // a thread runs its iterations in order
    case ws_sched::dynamic:
      blocks = (counts[0] - 1) / w.chunk + 1;
      break;
    case ws_sched::guided:
    case ws_sched::stealing:
      blocks = counts[0];
      break;  // chunks are not known ahead: an iteration each
  }
  w.stride = blocks <= kPaddedBlocks ? kWordsPerLine : 1;
  const std::size_t words = static_cast<std::size_t>(blocks) * w.stride;
  if (words > w.posted_capacity) {
    w.posted_words = std::make_unique<std::atomic<std::uint64_t>[]>(words);
    w.posted_capacity = words;
  }
  for (std::size_t i = 0; i < words; i += w.stride) {
    // Relaxed: published with the description.
    w.posted_words[i].store(0, std::memory_order_relaxed);
  }
  w.radix_storage.assign(counts, counts + dims);
  w.radix = w.radix_storage.data();
  w.posted = w.posted_words.get();
  w.dims = dims;
}

// ---- Handing out chunks ------------------------------------------------------------

// Claims up to `chunk` units from [*counter, end) with a CAS loop.
bool claim_cas(std::atomic<std::uint64_t>& counter, std::uint64_t end, std::uint64_t chunk,
               std::uint64_t* lo, std::uint64_t* hi) noexcept {
  // Relaxed: a claim needs atomicity only (see claim()).
  std::uint64_t b = counter.load(std::memory_order_relaxed);
  for (;;) {
    if (b >= end) return false;
    const std::uint64_t e = end - b <= chunk ? end : b + chunk;
    if (counter.compare_exchange_weak(b, e, std::memory_order_relaxed, std::memory_order_relaxed)) {
      *lo = b;
      *hi = e;
      return true;
    }
  }
}

// The same with one fetch-and-add (which may move the counter past end by a
// chunk per thread: the limits of describe_loop keep that from wrapping).
bool claim_add(std::atomic<std::uint64_t>& counter, std::uint64_t end, std::uint64_t chunk,
               std::uint64_t* lo, std::uint64_t* hi) noexcept {
  // Relaxed: as claim_cas.
  const std::uint64_t b = counter.fetch_add(chunk, std::memory_order_relaxed);
  if (b >= end) return false;
  *lo = b;
  *hi = end - b <= chunk ? end : b + chunk;
  return true;
}

bool claim_stealing(const here& h, ws_construct& w, std::uint64_t* lo, std::uint64_t* hi) noexcept {
  // The thread that runs the loop's last chunk runs no other after it: gcc's
  // code for lastprivate takes the thread whose last chunk ended at the
  // loop's end for the one that ran the last iteration (true of every
  // monotonic schedule). The others finish the stripes.
  if (h.me.took_last) return false;
  // Own stripe first (victim starts at the thread's id), then the others in
  // turn. A stripe only shrinks, so one seen empty stays empty: a thread
  // gives up after finding all n empty.
  for (unsigned looked = 0; looked < w.n; ++looked) {
    detail::loop_stripe& s = w.stripes[h.me.victim];
    // Relaxed: a look before the fetch-and-add, so a spent stripe is not
    // pushed further past its end by every thread that passes.
    if (s.next.load(std::memory_order_relaxed) < s.end) {
      if (w.cas_claims ? claim_cas(s.next, s.end, w.chunk, lo, hi)
                       : claim_add(s.next, s.end, w.chunk, lo, hi)) {
        h.me.took_last = *hi == w.count;
        return true;
      }
    }
    h.me.victim = h.me.victim + 1 == w.n ? 0 : h.me.victim + 1;
  }
  return false;
}

bool claim_guided(ws_construct& w, std::uint64_t* lo, std::uint64_t* hi) noexcept {
  // Relaxed: as claim_cas.
  std::uint64_t b = w.next.load(std::memory_order_relaxed);
  for (;;) {
    if (b >= w.count) return false;
    const std::uint64_t left = w.count - b;
    std::uint64_t size = left / w.n + (left % w.n != 0 ? 1 : 0);
    size = std::min(std::max(size, w.chunk), left);
    if (w.next.compare_exchange_weak(b, b + size, std::memory_order_relaxed,
                                     std::memory_order_relaxed)) {
      *lo = b;
      *hi = b + size;
      return true;
    }
  }
}

// The calling thread's next chunk of logical iterations. Claims need
// atomicity only: the loop's data is ordered by its start (the description's
// release and acquire) and its end (the barrier), ordered regions by
// ordered_next, doacross waits by the posted words.
bool claim(const here& h, ws_construct& w, std::uint64_t* lo, std::uint64_t* hi) noexcept {
  if (claims_cancelled(h)) return false;
  switch (w.sched) {
    case ws_sched::static_block:
      if (h.me.trip != 0) return false;
      h.me.trip = 1;
      static_block(w.count, w.n, h.id, lo, hi);
      return *lo < *hi;
    case ws_sched::static_chunked: {
      // Chunk trip * n + id, round robin.
      std::uint64_t k = 0;
      std::uint64_t b = 0;
      if (__builtin_mul_overflow(h.me.trip, std::uint64_t{w.n}, &k) ||
          __builtin_add_overflow(k, h.id, &k) || __builtin_mul_overflow(k, w.chunk, &b) ||
          b >= w.count) {
        return false;
      }
      ++h.me.trip;
      *lo = b;
      *hi = w.count - b <= w.chunk ? w.count : b + w.chunk;
      return true;
    }
    case ws_sched::dynamic:
      return w.cas_claims ? claim_cas(w.next, w.count, w.chunk, lo, hi)
                          : claim_add(w.next, w.count, w.chunk, lo, hi);
    case ws_sched::guided:
      return claim_guided(w, lo, hi);
    case ws_sched::stealing:
      return claim_stealing(h, w, lo, hi);
  }
  return false;
}

// ---- Ordered -----------------------------------------------------------------------

// A chunk's turn comes when ordered_next reaches its first iteration; it
// passes to the next chunk when the thread is done with it (when it asks for
// another, or leaves), turn or not: chunks go out in iteration order, so the
// lowest chunk not yet done can always take its turn.

void take_turn(const here& h, ws_construct& w) {
  const std::uint64_t lo = h.me.lo;
  // Acquire: pairs with pass_turn's release store; the ordered regions of
  // the chunks before happen before this one's.
  wait_until(h, w.waits, [&] { return w.ordered_next.load(std::memory_order_acquire) >= lo; });
  h.me.has_turn = true;
}

void pass_turn(const here& h, ws_construct& w) {
  if (!h.me.holds_chunk) return;
  if (!h.me.has_turn) take_turn(h, w);
  h.me.holds_chunk = false;
  h.me.has_turn = false;
  // Release: this chunk's ordered regions happen before the next chunk's.
  w.ordered_next.store(h.me.hi, std::memory_order_release);
  w.waits.notify_all();
}

// ---- Doacross ----------------------------------------------------------------------

// The word of the block that runs iteration i of the outermost loop.
std::atomic<std::uint64_t>& posted_word(const ws_construct& w, std::uint64_t i) noexcept {
  std::uint64_t block = 0;
  switch (w.sched) {
    case ws_sched::static_block:
      block = static_owner(w.count, w.n, i);
      break;
    case ws_sched::static_chunked:
      block = i / w.chunk % w.n;
      break;
    case ws_sched::dynamic:
      block = i / w.chunk;
      break;
    case ws_sched::guided:
    case ws_sched::stealing:
      block = i;
      break;
  }
  return w.posted[block * w.stride];
}

// 1 + the iteration's number in the whole nest (row-major), so 0 is "none".
std::uint64_t doacross_mark(const ws_construct& w, const std::uint64_t* v) noexcept {
  std::uint64_t linear = v[0];
  for (unsigned i = 1; i < w.dims; ++i) linear = linear * w.radix[i] + v[i];
  return linear + 1;
}

// ---- Regions that start with a construct described ---------------------------------

struct loop_region {
  void (*fn)(void*);
  void* data;
  loop_bounds bounds;
  schedule_request sched;
};

void run_loop_region(void* p) {
  auto& r = *static_cast<loop_region*>(p);
  loop_start(r.bounds, r.sched, loop_flavour::plain, nullptr, nullptr, nullptr);
  r.fn(r.data);
}

struct sections_region {
  void (*fn)(void*);
  void* data;
  unsigned count;
};

// Values of a chunk of logical iterations: the last chunk ends at the loop's
// own bound (start + count * incr may not be representable).
bool hand_out(const here& h, ws_construct& w, std::uint64_t* istart, std::uint64_t* iend) {
  if (w.ordered) pass_turn(h, w);
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  if (!claim(h, w, &lo, &hi)) return false;
  if (w.ordered) {
    h.me.lo = lo;
    h.me.hi = hi;
    h.me.holds_chunk = true;
    h.me.has_turn = false;
  }
  *istart = w.start + lo * w.incr;
  *iend = hi == w.count ? w.end : w.start + hi * w.incr;
  return true;
}

void start_claims(const here& h) noexcept {
  h.me.trip = 0;
  h.me.victim = h.id;
  h.me.took_last = false;
  h.me.holds_chunk = false;
  h.me.has_turn = false;
}

// Enters a loop or sections construct (describe(slot) in its first thread),
// with its task reductions and its shared memory (see loop_start). nullptr
// when the region was cancelled while the thread waited for the slot.
template <class Describe>
ws_construct* enter_loop(const here& h, Describe&& describe, void** mem,
                         std::uintptr_t* reductions) {
  // The construct's taskgroup opens on every thread; the first registers the
  // reductions (its copies), before the others may join and share them.
  if (reductions != nullptr) workshare_taskgroup_start();
  bool first = false;
  ws_construct* w = enter(
      h,
      [&](ws_construct& slot) {
        describe(slot);
        slot.task_reductions = reductions;
        if (reductions != nullptr) workshare_reduction_register(reductions, nullptr);
      },
      &first);
  if (reductions != nullptr && !first) {
    // A cancelled region's thread without the construct registers alone, so
    // that the unregistration after the loop finds its copies.
    workshare_reduction_register(reductions, w != nullptr ? w->task_reductions : nullptr);
  }
  if (w == nullptr) return nullptr;
  start_claims(h);
  if (mem != nullptr) *mem = w->mem;
  return w;
}

// Done with the construct's chunks: the ordered turn moves on, the thread leaves.
void finish(const here& h) {
  ws_construct* w = h.me.cur;
  if (w == nullptr) return;
  if (w->ordered) pass_turn(h, *w);
  leave(h);
}

// The locks of critical and atomic. Not FIFO: a ticket lock hands the lock
// to the next ticket's thread even while that thread is descheduled, and an
// OpenMP team may have more threads than the machine has CPUs (then every
// hand-off waits for a time slice: minutes for a contended counter). A
// barging mutex lets whoever runs take it, as GNU's libgomp's does.
using critical_lock = std::mutex;
critical_lock& unnamed_critical() {
  static critical_lock lock;
  return lock;
}
critical_lock& atomic_lock() {
  static critical_lock lock;
  return lock;
}

}  // namespace

ws_team_state::ws_team_state(unsigned threads) : n(threads == 0 ? 1 : threads) {
  // Relaxed: the team reaches its threads through the region's hand-off.
  for (unsigned i = 0; i < kWsRing; ++i)
    ring[i].state.store(slot_state(i, kWsFree), std::memory_order_relaxed);
}

void reset_worksharing(team& tm) noexcept {
  // Relaxed: the next region's hand-off to its threads publishes these.
  for (unsigned i = 0; i < kWsRing; ++i) {
    tm.ws.ring[i].state.store(slot_state(i, kWsFree), std::memory_order_relaxed);
    tm.ws.ring[i].remaining.store(0, std::memory_order_relaxed);
  }
  tm.ws.singles.store(0, std::memory_order_relaxed);
  for (unsigned i = 0; i < tm.n; ++i) tm.threads[i].ws = ws_thread_state{};
}

// ---- Loops -------------------------------------------------------------------------

bool loop_start(const loop_bounds& b, schedule_request s, loop_flavour f, std::uint64_t* istart,
                std::uint64_t* iend, void** mem, std::uintptr_t* reductions) {
  const here h = locate();
  ws_construct* w = enter_loop(
      h,
      [&](ws_construct& slot) {
        const plan p = resolve(s, f != loop_flavour::plain, h.ws.n, iterations(b));
        describe_loop(slot, h.ws.n, b, p, f == loop_flavour::ordered, mem);
      },
      mem, reductions);
  if (w == nullptr) return false;
  if (istart == nullptr) return true;
  return hand_out(h, *w, istart, iend);
}

bool loop_doacross_start(unsigned dims, const std::uint64_t* counts, schedule_request s,
                         std::uint64_t* istart, std::uint64_t* iend, void** mem,
                         std::uintptr_t* reductions) {
  const here h = locate();
  const loop_bounds b = loop_bounds::of_ull(true, 0, dims > 0 ? counts[0] : 0, 1);
  ws_construct* w = enter_loop(
      h,
      [&](ws_construct& slot) {
        const plan p = resolve(s, true, h.ws.n, iterations(b));
        describe_loop(slot, h.ws.n, b, p, false, mem);
        describe_doacross(slot, h.ws.n, dims, counts);
      },
      mem, reductions);
  if (w == nullptr) return false;
  if (istart == nullptr) return true;
  return hand_out(h, *w, istart, iend);
}

bool loop_next(std::uint64_t* istart, std::uint64_t* iend) {
  const here h = locate();
  ws_construct* w = h.me.cur;
  if (w == nullptr) return false;
  return hand_out(h, *w, istart, iend);
}

void loop_end() {
  finish(locate());
  barrier();
}

void loop_end_nowait() { finish(locate()); }

bool loop_end_cancel() {
  finish(locate());
  return barrier();
}

void parallel_loop(void (*fn)(void*), void* data, unsigned nthreads, unsigned flags,
                   const loop_bounds& b, schedule_request s) {
  loop_region r{fn, data, b, s};
  parallel(&run_loop_region, &r, nthreads, flags);
}

// ---- Ordered and doacross ----------------------------------------------------------

void ordered_start() {
  const here h = locate();
  ws_construct* w = h.me.cur;
  if (w == nullptr || !w->ordered || !h.me.holds_chunk || h.me.has_turn) return;
  take_turn(h, *w);
}

void ordered_end() noexcept {
  // The turn is the chunk's until the thread is done with it (it cannot
  // know which of its iterations is the last to run an ordered region).
}

unsigned doacross_dims() noexcept {
  const ws_construct* w = current().ws.cur;
  return w != nullptr && w->posted != nullptr ? w->dims : 0;
}

void doacross_post(const std::uint64_t* v) noexcept {
  ws_construct* w = current().ws.cur;
  if (w == nullptr || w->posted == nullptr) return;
  std::atomic<std::uint64_t>& word = posted_word(*w, v[0]);
  const std::uint64_t mark = doacross_mark(*w, v);
  // Relaxed look: only this thread posts to its block's word (one thread
  // runs a block's iterations, in order).
  if (word.load(std::memory_order_relaxed) >= mark) return;
  // Release: the iteration's writes happen before the waiter's acquire load
  // that reads the mark.
  word.store(mark, std::memory_order_release);
  w->waits.notify_all();
}

void doacross_wait(const std::uint64_t* v) {
  const here h = locate();
  ws_construct* w = h.me.cur;
  if (w == nullptr || w->posted == nullptr) return;
  std::atomic<std::uint64_t>& word = posted_word(*w, v[0]);
  const std::uint64_t mark = doacross_mark(*w, v);
  // Acquire: pairs with doacross_post's release store.
  wait_until(h, w->waits, [&] { return word.load(std::memory_order_acquire) >= mark; });
}

// ---- Sections ----------------------------------------------------------------------

namespace {

// Enters a sections construct of `count` sections: a loop over their
// numbers, one at a time, first come first served.
ws_construct* enter_sections(const here& h, unsigned count, void** mem,
                             std::uintptr_t* reductions) {
  return enter_loop(
      h,
      [&](ws_construct& slot) {
        describe_loop(slot, h.ws.n, loop_bounds::of_ull(true, 0, count, 1), {ws_sched::dynamic, 1},
                      false, mem);
      },
      mem, reductions);
}

void run_sections_region(void* p) {
  auto& r = *static_cast<sections_region*>(p);
  enter_sections(locate(), r.count, nullptr, nullptr);
  r.fn(r.data);
}

}  // namespace

void sections_enter(unsigned count) { (void)enter_sections(locate(), count, nullptr, nullptr); }

unsigned sections_start(unsigned count, void** mem, std::uintptr_t* reductions) {
  if (enter_sections(locate(), count, mem, reductions) == nullptr) return 0;
  return sections_next();
}

unsigned sections_next() {
  const here h = locate();
  ws_construct* w = h.me.cur;
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  if (w == nullptr || !claim(h, *w, &lo, &hi)) return 0;
  return static_cast<unsigned>(lo + 1);
}

void parallel_sections(void (*fn)(void*), void* data, unsigned nthreads, unsigned flags,
                       unsigned count) {
  sections_region r{fn, data, count};
  parallel(&run_sections_region, &r, nthreads, flags);
}

// ---- Scope ---------------------------------------------------------------------------

void scope_start(std::uintptr_t* reductions) {
  const here h = locate();
  // A construct with nothing to hand out: the ring only chooses the thread
  // that registers the reductions.
  enter_loop(
      h,
      [&](ws_construct& slot) {
        describe_loop(slot, h.ws.n, loop_bounds::of_ull(true, 0, 0, 1), {ws_sched::static_block, 0},
                      false, nullptr);
      },
      nullptr, reductions);
  leave(h);
}

// ---- Single ------------------------------------------------------------------------

bool single_start() noexcept {
  thread_state& st = current();
  if (st.tm == nullptr || st.tm->n == 1) return true;
  const std::uint64_t k = st.ws.singles++;
  // Every single before k has been won by now (this thread has met them),
  // so the count is k until some thread wins this one. Relaxed: the winner
  // runs the body; nothing else is handed over.
  std::uint64_t expected = k;
  return st.tm->ws.singles.compare_exchange_strong(expected, k + 1, std::memory_order_relaxed);
}

void* single_copy_start() {
  const here h = locate();
  bool first = false;
  ws_construct* w = enter(
      h, [](ws_construct& slot) { slot.copy = nullptr; }, &first);
  if (w == nullptr || first) return nullptr;
  // The winner stores its data, then waits here too (single_copy_end).
  barrier();
  void* data = w->copy;
  leave(h);
  return data;
}

void single_copy_end(void* data) {
  const here h = locate();
  if (h.me.cur != nullptr) h.me.cur->copy = data;
  barrier();
  leave(h);
}

// ---- Cancellation ------------------------------------------------------------------

bool cancel_construct() noexcept {
  thread_state& st = current();
  if (st.tm == nullptr || st.ws.cur == nullptr) return false;
  // Relaxed: claims test it as a hint (see claim()); the threads meet at the
  // construct's end barrier.
  st.tm->ws_cancelled.store(true, std::memory_order_relaxed);
  return true;
}

bool construct_cancelled() noexcept {
  const thread_state& st = current();
  // Relaxed: as cancel_construct.
  return st.tm != nullptr && st.ws.cur != nullptr &&
         st.tm->ws_cancelled.load(std::memory_order_relaxed);
}

// ---- Critical sections -------------------------------------------------------------

void critical_start() { unnamed_critical().lock(); }
void critical_end() { unnamed_critical().unlock(); }

void critical_name_start(void** name) {
  std::atomic_ref<void*> slot(*name);
  // Acquire: pairs with the CAS that put the lock there (its construction
  // happens before our use).
  void* lock = slot.load(std::memory_order_acquire);
  if (MOTE_UNLIKELY(lock == nullptr)) {
    auto made = std::make_unique<critical_lock>();
    void* expected = nullptr;
    // acq_rel: release publishes our lock; acquire (also on failure) sees
    // the winner's.
    if (slot.compare_exchange_strong(expected, made.get(), std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      lock = made.release();  // lives as long as the program (as the name's slot)
    } else {
      lock = expected;
    }
  }
  static_cast<critical_lock*>(lock)->lock();
}

void critical_name_end(void** name) {
  // Relaxed: this thread loaded the lock's address when it took it.
  void* lock = std::atomic_ref<void*>(*name).load(std::memory_order_relaxed);
  static_cast<critical_lock*>(lock)->unlock();
}

void atomic_start() { atomic_lock().lock(); }
void atomic_end() { atomic_lock().unlock(); }

}  // namespace mote::omp
