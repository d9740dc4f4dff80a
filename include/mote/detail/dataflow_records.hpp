// The records behind mote::dataflow (include/mote/dataflow.hpp): a task's
// record and its accesses as the dependency system keeps them, the shared
// state of reductions and commutative groups, the scope's registration table,
// and the compiled side of spawn (src/dataflow/dataflow.cpp). Nothing here is
// named by users; docs/dataflow.md has the design.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

#include "mote/detail/task_alloc.hpp"
#include "mote/detail/worker.hpp"
#include "mote/task_group.hpp"

namespace mote {

// The vocabulary of dataflow.hpp that the records name.
enum class access_type : std::uint8_t;
template <class Op, class T>
struct reduction_access;
class dataflow;

namespace detail {

struct df_task;
struct df_group_info;
struct df_scope_access;  // src/dataflow/dataflow.cpp: the engine's view of a scope
struct df_access_desc;  // dataflow.hpp: one argument of spawn, described

// Type-erased operations of one reduction type (Op, T). Its address tells
// reductions apart: only accesses with the same vtable join one reduction.
struct reduction_vtable {
  // Makes the shared state of a new reduction from the spec (a
  // reduction_access<Op, T>), with `slots` private copies.
  df_group_info* (*make)(const void* spec, unsigned slots);
};

// The operator that folds a reduction's private copies into its target: its
// own, except for minus, whose copies are added (each holds what its tasks
// subtracted from 0, as in OpenMP's `-` reduction).
template <class Op>
struct reduction_combiner {
  static Op& of(Op& op) noexcept { return op; }
};
template <class U>
struct reduction_combiner<std::minus<U>> {
  static std::plus<U> of(std::minus<U>&) noexcept { return {}; }
};

// State shared by the accesses of one group: a reduction's private copies,
// or the token that makes commutative tasks exclude each other.
struct df_group_info {
  virtual ~df_group_info() = default;
  // Reductions: the calling worker's private copy (created on first use).
  virtual void* slot(unsigned index) { (void)index; return nullptr; }
  // Reductions: folds the copies into the target (once, by whoever ends the
  // reduction; every copy's writer has finished).
  virtual void combine() {}
};

template <class Op, class T>
struct reduction_state final : df_group_info {
  struct alignas(cache_line) cell {
    bool used = false;
    alignas(T) unsigned char storage[sizeof(T)];
  };
  Op op;
  T* target;
  T identity;
  unsigned count;
  cell* cells;

  reduction_state(const reduction_access<Op, T>& spec, unsigned slots)
      : op(spec.op), target(spec.target), identity(spec.identity), count(slots), cells(new cell[slots]) {}
  ~reduction_state() override {
    for (unsigned i = 0; i < count; ++i) {
      if (cells[i].used) std::launder(reinterpret_cast<T*>(cells[i].storage))->~T();
    }
    delete[] cells;
  }
  void* slot(unsigned index) override {
    cell& c = cells[index];
    if (!c.used) {
      ::new (c.storage) T(identity);
      c.used = true;
    }
    return std::launder(reinterpret_cast<T*>(c.storage));
  }
  void combine() override {
    auto&& fold = reduction_combiner<Op>::of(op);
    for (unsigned i = 0; i < count; ++i) {
      if (cells[i].used)
        *target = fold(std::move(*target), *std::launder(reinterpret_cast<T*>(cells[i].storage)));
    }
  }
  static df_group_info* make(const void* spec, unsigned slots) {
    return new reduction_state(*static_cast<const reduction_access<Op, T>*>(spec), slots);
  }
  static constexpr reduction_vtable vtable{&reduction_state::make};
};

// One access of a task, as the dependency system keeps it. Only `flags` is
// shared; the rest is written by the registering thread before the access is
// published (by the fetch-or that links it to its predecessor, or that makes
// its task ready) and read-only afterwards, except `successor`, written once
// by the registrant of the next access before it sets the successor bit.
struct df_access {
  std::atomic<std::uint32_t> flags;
  access_type type;
  bool pred_task_link;   // readied by a predecessor task (trace flows, the graph)
  std::uint16_t index;   // in its task
  const void* address;
  std::size_t size;
  df_access* successor;
  df_task* task;
  df_group_info* group;  // reduction or commutative state, shared along the group
  const reduction_vtable* red;  // reductions: the operator's vtable
};

// A data-flow task record: a task_group task (counted in the scope's group)
// with its accesses and its callable, in one block from the worker's cache.
struct df_task : group_task_base {
  // Accesses not yet satisfied, plus one while registering. Whoever takes it
  // to zero hands the task to the scheduler.
  std::atomic<std::int32_t> blocked;
  // Accesses not yet final, plus one until the task has finished running.
  // Whoever takes it to zero frees the record.
  std::atomic<std::int32_t> live;
  // The body, plus one per open event (mote::dataflow_event): whoever takes
  // it to zero ends the task (releases its accesses and counts it down).
  std::atomic<std::int32_t> events;
  // Set before the task is readied (published by `blocked`): a predecessor
  // failed, so this one is skipped and fails its successors in turn.
  std::atomic<bool> poisoned;
  // 0, or the priority it is handed to the runtime's urgent list with when
  // ready (mote::priority; a kind of task marked with df_mark_current_urgent;
  // raised by a later task with a priority that depends on it). Written by
  // the scope's spawner, read by whoever readies the task (relaxed: a hint).
  std::atomic<std::uint8_t> priority;
  std::uint16_t num_accesses;
  record_tag tag;             // how the block was allocated (task_alloc.hpp)
  bool commutative;           // holds commutative accesses: takes their tokens before running
  std::uint16_t tokens_taken; // commutative tokens held, in address order (under their mutexes)
  df_task* next_waiting;      // the next task in the waiting list of a token (under its mutex)
  df_access* accesses;
  dataflow* scope;
  task_cache* home;           // the cache the block goes back to (the scope's runtime's), or nullptr
  std::uint64_t trace_id;     // MOTE_TRACE: flow arrows
  const void* trace_what;     // the task's function (or name) for the trace
  bool trace_named;
  // With a worker: runs the callable (not the dependency work), and may
  // throw what it throws. With nullptr: destroys the callable (never
  // throws). One pointer for both keeps a one-access record of a small
  // callable within three cache lines.
  void (*body)(df_task*, worker*);
};

// The locality of a scope's ready tasks (src/dataflow/dataflow.cpp,
// "Locality"): whether they stay on the worker that readied them, and what
// the scope's owner measured to decide it. On a line of its own, away from
// the registration table the spawner writes.
struct alignas(cache_line) df_grain {
  // Ready tasks stay on the worker that readied them. Written by the owner,
  // read by every worker that readies a task (relaxed: a hint).
  std::atomic<bool> keep_local{false};
  // Automatic (else set_locality fixed keep_local). Relaxed: a setting.
  std::atomic<bool> measured{true};
  // A task's body, a moving average of samples on the runtime's workers
  // (cycle-counter ticks; 0: none yet). Relaxed: an estimate.
  std::atomic<std::uint32_t> body{0};
  // The owner's alone: when the current window began, and the moving average
  // of a window's ticks in each mode (0: share, 1: keep; 0 ticks: not
  // measured yet), windows until the next probe of the slower mode and
  // between probes, whether a probe is on, whether the current window
  // follows a change of mode (not measured: the tasks the last mode left
  // pending are still draining or building up), and whether the last one
  // was left unmeasured as filling (src/dataflow/locality.hpp).
  std::uint64_t window_start = 0;
  std::uint32_t window_pending = 0;  // the scope's pending tasks when it began
  std::uint64_t cost[2] = {0, 0};
  std::uint32_t until_probe = 16;
  std::uint32_t probe_every = 16;
  bool probing = false;
  bool settling = false;
  bool filling = false;
};

// The registration table of a scope: first address -> last access, owned by
// the spawning thread. Open addressing; starts inline, grows on the heap (in
// reserve() only, so that a registration that has begun to link cannot fail).
// A slot's address nullptr marks it empty, so the region at nullptr (an empty
// vector's data(), a null pointer in a depend clause) has an entry of its own
// beside the slots, `null_region`, and is otherwise a region like any other.
struct df_table {
  struct entry {
    const void* address;
    df_access* last;
  };
  static constexpr std::uint32_t kInline = 16;
  entry* slots = inline_;
  std::uint32_t mask = kInline - 1;
  std::uint32_t used = 0;  // entries in use, null_region's among them
  // 64 - log2(slots): the hash is the top bits of the address times a
  // Fibonacci constant, which spreads objects laid out at a regular stride
  // (one row of a grid, an array of chains' heads) over the whole table.
  std::uint32_t shift = 64 - 4;
  entry inline_[kInline] = {};
  entry null_region = {nullptr, nullptr};
  bool null_used = false;

  df_table() = default;
  ~df_table();
  df_table(const df_table&) = delete;
  df_table& operator=(const df_table&) = delete;
  // Room for `more` new addresses: that many find_or_insert() calls follow
  // without growing. Throws std::bad_alloc (then the table is unchanged).
  void reserve(std::uint32_t more) {
    // At most 3/4 full with `more` new entries.
    if (MOTE_UNLIKELY((std::uint64_t{used} + more) * 4 > (std::uint64_t{mask} + 1) * 3)) grow(more);
  }
  // The first slot to look at for a (non-null) address.
  std::uint32_t home_slot(const void* address) const noexcept {
    return static_cast<std::uint32_t>(
        (reinterpret_cast<std::uintptr_t>(address) * 0x9E3779B97F4A7C15ull) >> shift);
  }
  // The entry of address, or nullptr.
  MOTE_API const entry* find(const void* address) const noexcept;
  // The entry of address, made (with no last access) when missing; needs
  // room (reserve()).
  entry& find_or_insert(const void* address) noexcept {
    if (MOTE_UNLIKELY(address == nullptr)) return null_entry();
    std::uint32_t i = home_slot(address);
    while (slots[i].address != address) {
      if (slots[i].address == nullptr) {
        slots[i].address = address;
        slots[i].last = nullptr;
        ++used;
        break;
      }
      i = (i + 1) & mask;
    }
    return slots[i];
  }
  MOTE_API void grow(std::uint32_t more);
  MOTE_API entry& null_entry() noexcept;
  MOTE_API void clear() noexcept;
  // Calls f(entry&) for every entry in use (null_region's too).
  template <class F>
  void for_each(F&& f) {
    for (std::uint32_t i = 0; i <= mask; ++i) {
      if (slots[i].address != nullptr) f(slots[i]);
    }
    if (null_used) f(null_region);
  }
};

// Is an argument of spawn a typed reduction (mote::reduction)?
template <class A>
struct is_reduction : std::false_type {};
template <class Op, class T>
struct is_reduction<reduction_access<Op, T>> : std::true_type {};

// The worker's private copy for the reduction access acc (an argument of the
// callable).
MOTE_API void* reduction_slot(df_access& acc, worker& w);

template <std::size_t I, class A>
auto reduction_arg(df_access* acc, worker& w) {
  if constexpr (is_reduction<A>::value) {
    using T = std::remove_pointer_t<decltype(std::declval<A>().target)>;
    return std::tuple<T&>(*static_cast<T*>(reduction_slot(acc[I], w)));
  } else {
    return std::tuple<>();
  }
}

template <class F, class... A>
struct df_record final : df_task {
  F fn;

  struct from_callable {};
  template <class G>
  df_record(from_callable, G&& g) : fn(std::forward<G>(g)) {}

  static void run_body(df_task* base, worker* w) {
    auto* self = static_cast<df_record*>(base);
    if (w == nullptr) {
      std::destroy_at(&self->fn);
      return;
    }
    call(self, *w, std::index_sequence_for<A...>{});
  }
  template <std::size_t... I>
  static void call(df_record* self, worker& w, std::index_sequence<I...>) {
    auto args = std::tuple_cat(reduction_arg<I, A>(self->accesses, w)...);
    std::apply(self->fn, args);
  }
};

// The compiled side of spawn (src/dataflow/dataflow.cpp).
struct df_spawn_info {
  std::size_t record_size;   // bytes of the record type
  std::size_t record_align;
  const void* trace_what;
  bool trace_named;
};
// A record's block: room for n accesses after `record_size` bytes, from the
// record allocator, and what giving it back needs (df_task's tag and home).
// Every record of a scope is freed before its wait returns (before the count-
// down of the task whose end frees it, or by the wait itself), so a home that
// outlives the wait is alive whenever a record is given back. The home is the
// calling worker w's cache when w is a worker of the scope's runtime (which
// outlives the scope); on the scope's own thread outside the runtime (w
// nullptr), the scope's spawner cache, which the scope frees after its last
// wait; a worker of another runtime, which may end first, lends a block with
// no home.
struct df_block {
  void* memory;
  df_access* accesses;
  record_tag tag;
  task_cache* home;
};
MOTE_API df_block df_allocate(const df_spawn_info& info, std::uint32_t n, worker* w, dataflow& scope);
// Whether records come from the pools (MOTE_DATAFLOW_POOLS): 1 on, 0 off, -1
// not read yet (df_allocate reads it). Relaxed: a setting, read once.
MOTE_API extern std::atomic<std::int8_t> df_pools_state;
// df_allocate on a worker of the scope's runtime with the pools on, inline: a
// block from w's own list, home w's cache (a record type's size and the
// number of accesses are constants where spawn calls it, so the size class
// is too). Anything else takes df_allocate.
MOTE_ALWAYS_INLINE df_block df_allocate_here(const df_spawn_info& info, std::uint32_t n, worker* w,
                                             const runtime_impl* scope_runtime, dataflow& scope) {
  constexpr std::size_t align = alignof(df_access);
  const std::size_t head = (info.record_size + align - 1) / align * align;
  const record_tag tag = record_tag::of(head + n * sizeof(df_access), info.record_align);
  if (MOTE_LIKELY(w != nullptr && tag.cached() && &w->runtime() == scope_runtime &&
                  df_pools_state.load(std::memory_order_relaxed) == 1)) {
    task_cache& mine = w->cache();
    void* memory = mine.take_returnable(tag.cache_class());
    return {memory, reinterpret_cast<df_access*>(static_cast<char*>(memory) + head), tag, &mine};
  }
  return df_allocate(info, n, w, scope);
}
// Gives back a block whose task never registered (on the thread that allocated it).
MOTE_API void df_deallocate(const df_block& block) noexcept;
// Registers t's accesses (already described in descs) and readies it when
// nothing blocks it. Throws mote::usage_error for misuse, and what making the
// task's group state throws (std::bad_alloc, a reduction identity's copy):
// then nothing of t was registered, the scope is as before the call, and the
// caller destroys t.
MOTE_API void df_register(dataflow& df, df_task* t, const df_access_desc* descs, std::uint32_t n);
// A data-flow task's task::execute.
MOTE_API void df_task_run(task* base, worker& w) noexcept;
// The data-flow task whose body the calling thread is running (innermost), or
// nullptr; and setting it (returns the previous one), so that work run for
// that body on another thread (a loop's helpers) nests its scopes as the body
// itself would.
MOTE_API df_task* df_current_task() noexcept;
MOTE_API df_task* df_exchange_current_task(df_task* t) noexcept;
// Marks the kind of the running data-flow task (its callable's type, or its
// name) with a priority: tasks of that kind spawned from now on (by any
// scope) get it unless their spawn gives one, and give it to the tasks they
// directly depend on (df_task::priority). For a library whose tasks start
// communication (mote::mpi's iwait): they, and what feeds them, should not
// wait behind compute tasks readied after them. Outside a data-flow task's
// body it does nothing. Any thread; a racy hint (a kind that shares a slot of
// the table with another may lose its mark).
MOTE_API void df_mark_current_urgent(std::uint8_t priority) noexcept;

}  // namespace detail
}  // namespace mote
