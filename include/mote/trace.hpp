// Tracing and task names.
//
// MOTE_TRACE=<file> turns tracing on for the process: every worker (and every
// other thread that hands work to a runtime) appends fixed-size records to a
// buffer of its own, without locks or allocation, and at exit, or when
// mote::trace::flush() is called, mote writes them as Chrome trace-event JSON
// (open it in https://ui.perfetto.dev or chrome://tracing). A full buffer wraps:
// the oldest events are dropped, counted, and the file says so.
// MOTE_TRACE_EVENTS=<n> sets the records per thread (default 1048576).
//
// When tracing and MOTE_STATS are both off, an event site costs one branch
// that is never taken: the fast path of join pays for one, for all its events.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "mote/detail/platform.hpp"
#include "mote/export.hpp"

namespace mote {

// A callable with a name for the trace. Works wherever a callable is spawned:
// join, parallel_invoke, task_group::spawn. The name must outlive the trace
// (a string literal, typically); it is escaped when written.
//
//   mote::join(mote::named("left", [&] { left(); }), mote::named("right", [&] { right(); }));
//   group.spawn(mote::named("tile", [&, i] { tile(i); }));
template <class F>
struct named_fn {
  const char* name;
  F fn;
  decltype(auto) operator()() { return fn(); }
  decltype(auto) operator()() const { return fn(); }
};

// Gives f a name in the trace (see named_fn).
template <class F>
named_fn<std::decay_t<F>> named(const char* name, F&& f) {
  return named_fn<std::decay_t<F>>{name, std::forward<F>(f)};
}

namespace trace {

// Is MOTE_TRACE set (and usable) in this process?
//
//   if (mote::trace::enabled()) std::puts("tracing");
MOTE_API bool enabled() noexcept;

// Writes every event recorded so far to the MOTE_TRACE file now (the file is
// rewritten whole, so it always holds one valid trace). Safe while runtimes
// run; events recorded during the write appear in the next one. Does nothing
// when tracing is off. Throws std::runtime_error when the file cannot be
// written.
//
//   mote::trace::flush();   // e.g. before a long phase you do not want traced
MOTE_API void flush();

// The rank that replaces %r in MOTE_TRACE (one file per MPI rank:
// MOTE_TRACE=heat.%r.json). mote::mpi::init and attach call it; before them,
// the rank comes from the launcher's environment (OMPI_COMM_WORLD_RANK,
// PMIX_RANK, PMI_RANK) when there is one. Called after the trace file was
// created under another name, it moves the trace to the new name. Throws
// std::runtime_error when the new file cannot be written.
//
//   mote::trace::set_file_rank(rank);   // after MPI_Comm_rank
MOTE_API void set_file_rank(int rank);

}  // namespace trace

namespace detail {

// What a trace record says. Begin/end pairs nest per thread.
enum class trace_kind : std::uint8_t {
  task_begin,    // what: the task's function (or its name, aux = 1)
  task_end,
  task_name,     // what: a name for the task begun last (aux unused)
  spawn,         // what: the spawned task's function (or name, aux = 1)
  steal,         // aux: the victim worker's index
  failed_steal,  // aux: the victim worker's index
  park_begin,    // the worker sleeps on a futex
  park_end,
  wait_begin,    // aux: 0 join, 1 task group, 2 runtime::run from outside, 3 assistant, 4 MPI
  wait_end,
  barrier_begin,
  barrier_end,
  task_fn,       // what: a function that names the task begun last (a data-flow task's callable)
  flow_out,      // aux: a flow id; an arrow starts here (a satisfied data-flow dependency)
  flow_in,       // aux: a flow id; the arrow ends at the task begun last
  channel,       // what: a channel; aux: the queue it uses (0 BatchQueue, 1 MPMC, 2 switched to MPMC)
  inlined,       // what: the site's name (const char*); aux: 0 assistant submit, 1 join. A task that
                 // adaptive offloading ran in place (docs/adaptive.md)
  mpi_iwait,     // aux: requests a data-flow task's end was bound to (mote::mpi::iwait)
  mpi_done,      // aux: requests a poll of the MPI layer found complete
  mesh_redirect, // aux: the worker a spawn was steered to (MOTE_SCHEDULER=mesh, NA-RP)
  mesh_migrate,  // aux: tasks moved << 16 | the other worker (mesh: a steal answered, or a rescue)
};

// Cycle counter for timestamps: cheaper than the clock, converted to
// nanoseconds when the trace is written.
inline std::uint64_t trace_clock() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  return static_cast<std::uint64_t>(now_ns());
#endif
}

// One thread's ring of records. The owning thread appends; the writer
// (flush) copies concurrently and keeps only the records it can prove were
// not overwritten while it copied (docs/tracing.md). Every access to a record
// is atomic (std::atomic_ref), so the overlap is not a data race; on x86 these
// are plain moves. The ring is zero pages from calloc until used, so
// an idle thread's buffer costs address space, not memory.
class MOTE_API trace_buffer {
 public:
  static constexpr std::size_t kWords = 3;  // time, kind | aux << 8, what

  trace_buffer(std::uint64_t capacity, int id, std::string_view label);
  ~trace_buffer();
  trace_buffer(const trace_buffer&) = delete;
  trace_buffer& operator=(const trace_buffer&) = delete;

  // Owner thread only.
  void put(trace_kind k, std::uint64_t aux = 0, const void* what = nullptr) noexcept {
    const std::uint64_t i = count_;
    std::uint64_t* r = words_ + (i & mask_) * kWords;
    // Release stores: a writer whose acquire load reads any of them also sees
    // published_ >= i (stored before them, by the previous put), so it knows
    // the slot may hold record i and drops the older record it expected there.
    // On x86 a release store is a plain move.
    std::atomic_ref<std::uint64_t>(r[0]).store(trace_clock(), std::memory_order_release);
    std::atomic_ref<std::uint64_t>(r[1]).store(static_cast<std::uint64_t>(k) | (aux << 8),
                                               std::memory_order_release);
    std::atomic_ref<std::uint64_t>(r[2]).store(reinterpret_cast<std::uintptr_t>(what),
                                               std::memory_order_release);
    count_ = i + 1;
    // Release: record i is complete for a writer that acquires this count.
    published_.store(i + 1, std::memory_order_release);
  }

  int id() const noexcept { return id_; }
  const char* label() const noexcept { return label_; }
  std::uint64_t capacity() const noexcept { return mask_ + 1; }
  // The writer's copy: appends to `out` the records it could validate, in
  // order, kWords words each, and returns the index of the first one (records
  // before it were lost to wrapping). Any thread.
  std::uint64_t snapshot(std::vector<std::uint64_t>& out) const;

 private:
  std::uint64_t count_ = 0;  // owner-private
  std::uint64_t mask_;
  std::uint64_t* words_;
  int id_;
  char label_[48] = {};
  alignas(cache_line) std::atomic<std::uint64_t> published_{0};
};

// The calling thread's buffer when it is not a worker (created on first use),
// or nullptr when tracing is off.
MOTE_API trace_buffer* outside_trace_buffer() noexcept;

}  // namespace detail
}  // namespace mote
