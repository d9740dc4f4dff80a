// mote::dataflow: tasks ordered by the data they touch (OmpSs-2 / OpenMP
// `depend` style), on the workers that fork-join and task groups use.
//
//   mote::dataflow df;                                    // on the default runtime, or df(rt)
//   df.spawn(mote::out(a), [&] { a = make(); });
//   df.spawn(mote::in(a), mote::inout(b), [&] { b += a; });
//   df.spawn(mote::reduction(std::plus<>{}, sum), [&](auto& s) { s += part(); });
//   df.wait();                                            // rethrows the first exception
//
// A task runs when every earlier task of its scope whose accesses conflict with
// its own has finished. The dependency system is wait-free: one atomic flags
// word per access, every transition a single fetch-or; a task it readies is
// handed to the runtime's scheduler, whose policy decides what that costs
// (docs/dataflow.md has the design, the argument for wait-freedom and for
// every memory order).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <iosfwd>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "mote/detail/dataflow_records.hpp"
#include "mote/detail/worker.hpp"
#include "mote/error.hpp"
#include "mote/runtime.hpp"
#include "mote/task_group.hpp"
#include "mote/trace.hpp"

namespace mote {

// What a task does to a region.
enum class access_type : std::uint8_t {
  in,           // reads: runs beside other adjacent `in`s
  out,          // writes the whole region: after everything before it
  inout,        // reads and writes: after everything before it
  commutative,  // adjacent commutative accesses exclude each other, in any order
  concurrent,   // adjacent concurrent accesses run together (the task synchronizes)
  reduction,    // see mote::reduction
};

// One access: a region (its first byte identifies it, as OpenMP's depend
// does: accesses to one object must name the same first address) and what the
// task does to it. Made by in(), out(), inout(), commutative(), concurrent().
struct access {
  const void* address;
  std::size_t size;
  access_type type;
};

// The accesses, over an object or over n elements from p:
//
//   df.spawn(mote::in(x), mote::out(v.data(), v.size()), [&] { fill(v, x); });
template <class T>
access in(const T& x) noexcept {
  return {std::addressof(x), sizeof(T), access_type::in};
}
template <class T>
access in(const T* p, std::size_t n) noexcept {
  return {p, n * sizeof(T), access_type::in};
}
template <class T>
access out(T& x) noexcept {
  return {std::addressof(x), sizeof(T), access_type::out};
}
template <class T>
access out(T* p, std::size_t n) noexcept {
  return {p, n * sizeof(T), access_type::out};
}
template <class T>
access inout(T& x) noexcept {
  return {std::addressof(x), sizeof(T), access_type::inout};
}
template <class T>
access inout(T* p, std::size_t n) noexcept {
  return {p, n * sizeof(T), access_type::inout};
}
// Mutually exclusive with the adjacent commutative accesses to the same
// region, in any order: `x += f()` from many tasks.
//
//   for (auto& part : parts) df.spawn(mote::commutative(total), [&] { total += sum(part); });
template <class T>
access commutative(T& x) noexcept {
  return {std::addressof(x), sizeof(T), access_type::commutative};
}
template <class T>
access commutative(T* p, std::size_t n) noexcept {
  return {p, n * sizeof(T), access_type::commutative};
}
// Runs together with the adjacent concurrent accesses to the region (the
// tasks synchronize among themselves, with atomics for instance); ordered
// against in, out and inout like a write.
//
//   df.spawn(mote::concurrent(hits), [&] { hits.fetch_add(count(part)); });
template <class T>
access concurrent(T& x) noexcept {
  return {std::addressof(x), sizeof(T), access_type::concurrent};
}
template <class T>
access concurrent(T* p, std::size_t n) noexcept {
  return {p, n * sizeof(T), access_type::concurrent};
}

// The identity of a reduction operator: 0 for plus, minus, bit_or, bit_xor
// and logical_or; 1 for multiplies; all ones for bit_and; true for
// logical_and. Other operators pass their identity to reduction().
template <class Op, class T>
struct reduction_identity {};
template <class U, class T>
struct reduction_identity<std::plus<U>, T> {
  static T value() { return T{}; }
};
template <class U, class T>
struct reduction_identity<std::minus<U>, T> {
  static T value() { return T{}; }
};
template <class U, class T>
struct reduction_identity<std::bit_or<U>, T> {
  static T value() { return T{}; }
};
template <class U, class T>
struct reduction_identity<std::bit_xor<U>, T> {
  static T value() { return T{}; }
};
template <class U, class T>
struct reduction_identity<std::logical_or<U>, T> {
  static T value() { return T{}; }
};
template <class U, class T>
struct reduction_identity<std::multiplies<U>, T> {
  static T value() { return T(1); }
};
template <class U, class T>
struct reduction_identity<std::bit_and<U>, T> {
  static T value() { return static_cast<T>(~T{}); }
};
template <class U, class T>
struct reduction_identity<std::logical_and<U>, T> {
  static T value() { return T(true); }
};

// A task reduction over x, as Nanos6 treats them: the adjacent reduction
// accesses to x with the same operator form one reduction; each worker
// accumulates into a private copy (initialized to the identity), handed to
// the task's callable as a reference, one argument per reduction access in
// order; the copies are combined into x with op when a later access needs x
// (or at wait()). The combined value is op(x, op(copy, copy, ...)), except
// with std::minus, which combines as OpenMP's `-` reduction does: each copy
// starts at 0 and the tasks subtract from it, and the copies are added to x,
// so x ends as x minus everything the tasks subtracted.
//
// An operator that throws while combining fails the reduction as a task that
// throws fails its accesses: the scope's wait rethrows the exception (unless
// another came first), and the tasks after the reduction on x are skipped
// (and those after them), while the other tasks run. x then holds what the
// combine left: the copies folded before the throw are in it, the rest are
// lost, and an operator that took x by value may have left it moved-from
// (valid, unspecified).
//
//   double sum = 0;
//   for (int b = 0; b < blocks; ++b)
//     df.spawn(mote::reduction(std::plus<>{}, sum), [&, b](double& s) { s += part(b); });
//   long left = 100;
//   for (long i = 1; i <= 4; ++i)
//     df.spawn(mote::reduction(std::minus<>{}, left), [i](long& s) { s -= i; });
//   df.wait();   // sum holds the total; left == 90
template <class Op, class T>
struct reduction_access {
  Op op;
  T* target;
  T identity;
};
template <class Op, class T>
reduction_access<Op, T> reduction(Op op, T& x) {
  return {std::move(op), std::addressof(x), reduction_identity<Op, T>::value()};
}
template <class Op, class T>
reduction_access<Op, T> reduction(Op op, T& x, T identity) {
  return {std::move(op), std::addressof(x), std::move(identity)};
}

namespace detail {

// What spawn needs of one argument: an access, or a typed reduction.
template <class A>
constexpr bool is_access_arg_v =
    std::is_same_v<std::decay_t<A>, access> || is_reduction<std::decay_t<A>>::value;

struct df_access_desc {
  access base;
  const reduction_vtable* red;
  const void* spec;  // the reduction_access, alive during the spawn
};

template <class A>
df_access_desc describe(const A& a) noexcept {
  if constexpr (is_reduction<A>::value) {
    using state = reduction_state<decltype(a.op), std::remove_pointer_t<decltype(a.target)>>;
    return {{a.target, sizeof(*a.target), access_type::reduction}, &state::vtable, &a};
  } else {
    return {a, nullptr, nullptr};
  }
}

}  // namespace detail

// A data-flow task's priority, as OpenMP's `priority` clause gives one: a
// hint that the task should run before ready tasks of lower priority. Passed
// first to dataflow::spawn. 0 (the default) is an ordinary task; a ready task
// with a priority above 0 goes to the runtime's urgent list, which every
// worker looks at before its own pool (higher priorities first, then in the
// order they became ready), instead of onto the readying worker's pool,
// whose newest-first order would leave it under the tasks readied after it.
// It also raises the tasks it directly depends on (the last task before it
// on each region it names) to its priority, so that what feeds it is not
// left behind either; one level only. Under MOTE_SCHEDULER=delegation the
// urgent list is the same and is looked at before the delegation queue. A
// negative priority is a usage_error; above 255 counts as 255 (as OpenMP
// caps priorities at omp_get_max_task_priority()). mote::mpi gives the tasks
// that call iwait (and so those that feed them) priority 1 by itself.
//
//   df.spawn(mote::priority(1), mote::in(row), [&] { send(row); });   // before the tiles
struct priority {
  explicit priority(int p) : value(p < 0 ? bad(p) : static_cast<std::uint8_t>(p > 255 ? 255 : p)) {}
  std::uint8_t value;

 private:
  [[noreturn]] static std::uint8_t bad(int p) {
    throw usage_error("mote::priority(" + std::to_string(p) + "): a task's priority is 0 or more");
  }
};

// Where a scope's ready tasks go (dataflow::set_locality; docs/dataflow.md,
// "Locality").
enum class dataflow_locality : std::uint8_t {
  // Measured: while the tasks' bodies are shorter than the runtime's own work
  // around each (sampled on the spawning worker), a ready task stays on the
  // worker that readied it; otherwise it goes to that worker's pool, where
  // an idle worker may take it. The default.
  automatic,
  keep,   // always stays on the worker that readied it (no other worker runs it)
  share,  // always goes to the pool (an idle worker may take it)
};

// A data-flow scope: tasks spawned into it run in the order their accesses
// require, on the runtime's workers, and wait() waits for all of them.
//
// Spawn from the frame that created the scope: its thread, and not from
// inside a task or loop body that thread runs meanwhile, such as one of the
// scope's own tasks (mote::usage_error otherwise, whichever thread runs the
// task: a task spawns its own work into a scope it creates). A scope created
// inside a data-flow task is nested: its accesses must lie within the
// accesses of that task, may write only what it writes, and may not touch a
// region the task holds as a reduction (the body works on its private copy;
// mote::usage_error otherwise); its tasks are ordered among themselves, and
// the enclosing task ends when they have (its destructor waits). A scope is
// bound to the task_group or data-flow task that creates it, as task_group
// is: cancelling that cancels this. The scope's destructor waits (see
// ~dataflow), so a nested scope needs no explicit wait().
//
//   df.spawn(mote::inout(v.data(), v.size()), [&] {
//     // df.spawn(...) here throws mote::usage_error, on whichever thread
//     mote::dataflow inner;   // nested: its tasks are children of this one
//     for (auto& x : v) inner.spawn(mote::inout(x), [&x] { x += 1; });
//   });
//
// A task that throws: its exception is kept (the first one is rethrown by
// wait()); the tasks that depend on it, directly or through others, are
// skipped; every other task still runs.
//
//   mote::dataflow df;
//   double a = 0, b = 1;
//   df.spawn(mote::out(a), [&] { a = 2; });
//   df.spawn(mote::in(a), mote::inout(b), [&] { b += a; });
//   df.wait();   // b == 3
class MOTE_API dataflow {
 public:
  // On a worker: a scope of that worker's runtime. Elsewhere: the default one.
  dataflow();
  explicit dataflow(runtime& rt);
  // Waits for the tasks still pending, as wait() does (the implicit wait at
  // the end of a scope, as OmpSs-2 tasks wait for their children): nothing is
  // left running against a destroyed scope. Rethrows the first task
  // exception, unless an exception is already propagating.
  ~dataflow() noexcept(false);  // NOLINT(bugprone-exception-escape): reports a missing wait by design
  dataflow(const dataflow&) = delete;
  dataflow& operator=(const dataflow&) = delete;

  // Adds a task: its accesses first, its callable last. The callable takes one
  // reference per reduction access (its worker's private copy), in order, and
  // nothing else. Any number of accesses; the same region twice in one task is
  // one access of the stronger type (a reduction must be the region's only
  // access in its task). Throws mote::usage_error for misuse, what copying
  // the callable or a reduction's identity throws, and std::bad_alloc; then
  // nothing was added: the scope is as if the call had not been made.
  //
  //   df.spawn(mote::in(a), mote::in(b), mote::out(c), [&] { c = a + b; });
  template <class... Args>
  void spawn(Args&&... args);
  // With a priority first (mote::priority): the same task, run before ready
  // tasks of lower priority.
  //
  //   df.spawn(mote::priority(1), mote::out(halo), [&] { post_receive(halo); });
  template <class... Args>
  void spawn(priority p, Args&&... args);

  // The same with accesses known only at run time (no reductions):
  //
  //   std::vector<mote::access> acc = {mote::in(a), mote::out(c)};
  //   df.spawn_accesses(acc, [&] { c = a; });
  template <class F>
  void spawn_accesses(std::span<const access> accesses, F&& f);
  template <class F>
  void spawn_accesses(priority p, std::span<const access> accesses, F&& f);

  // Waits until every task spawned so far has finished (or was skipped),
  // combines the reductions, and rethrows the first task exception. The scope
  // is then empty: later tasks depend on nothing before this point. From the
  // scope's own thread only, and not from inside one of its tasks.
  //
  //   df.wait();
  task_group_status wait();

  // Where ready tasks go from now on; the default is MOTE_DATAFLOW_LOCALITY
  // (auto, keep or share), else automatic. A task that another worker could
  // run faster is not lost under `keep`, only run later, by the worker that
  // readied it:
  //
  //   df.set_locality(mote::dataflow_locality::share);   // always let idle workers help
  void set_locality(dataflow_locality l) noexcept;

  // Tasks that have not started will not run (their successors are released
  // as they would have been). Ends at the next wait().
  void cancel() noexcept { group_.cancel(); }
  bool is_cancelled() const noexcept { return group_.is_cancelled(); }

  // Keeps the graph of the tasks spawned from now on (until clear_graph()),
  // for dump_dot(). Costs a few stores per dependency while on.
  //
  //   df.record_graph();  /* spawn ... */  df.dump_dot(std::cout);
  void record_graph(bool on = true);
  void clear_graph() noexcept;
  // Writes the recorded graph in Graphviz's dot language: one node per task
  // (its name, when it has one: mote::named), one edge per dependency,
  // labelled with the region's address and the access types.
  //
  //   std::ofstream f("graph.dot"); df.dump_dot(f);   // dot -Tsvg graph.dot
  void dump_dot(std::ostream& out) const;

 private:
  template <class F, class... A>
  void spawn_record(F&& f, const detail::df_access_desc* descs, std::uint32_t n, std::uint8_t prio);
  template <class... Args>
  void spawn_with(std::uint8_t prio, Args&&... args);
  void construct();
  std::exception_ptr finish_wait(task_group_status* status);

  task_group group_;
  detail::runtime_impl* runtime_;
  // The frame that spawns: the thread that created the scope
  // (detail::thread_token()), the data-flow task whose body it was running
  // (any runtime's, or nullptr) and, on a worker, the group of the task it
  // was running and its loop depth. A task or loop body that this thread
  // runs later differs in one of the last three.
  const void* spawner_;
  const detail::df_task* spawner_task_;
  const task_group* spawner_group_;
  unsigned spawner_loop_depth_;
  detail::df_task* parent_;      // the data-flow task whose body made this scope, or nullptr
  std::uint64_t spawned_since_wait_ = 0;
  std::uint32_t throttle_ = 0;   // MOTE_DATAFLOW_THROTTLE, read when the scope is made
  // A spawner outside the runtime, throttled, sleeps on throttle_epoch_
  // until a task's end finds no more than throttle_at_ pending (0: none
  // sleeps); src/dataflow/dataflow.cpp, throttle_outside(). Every end that
  // its scope's owner does not count reads throttle_at_: a line of its own,
  // which the spawner writes only when it holds back (the fields around are
  // written at every spawn).
  alignas(detail::cache_line) std::atomic<std::uint32_t> throttle_at_{0};
  std::atomic<std::uint32_t> throttle_epoch_{0};
  // The tasks finished since the last wait when the throttle last saw none
  // end over a nap (they wait for something else, perhaps this thread): it
  // holds back no more until one does.
  alignas(detail::cache_line) std::uint64_t throttle_stalled_ = ~std::uint64_t{0};
  detail::df_grain grain_;
  detail::df_table table_;
  struct graph;
  std::unique_ptr<graph> graph_;
  // The records of tasks spawned from this scope's thread outside the
  // runtime (a program's main thread): made at the first such spawn, their
  // home until the scope ends (df_allocate). Workers that free them push
  // them onto its return stack; without it each would be a malloc on the
  // spawner and a free on a worker.
  std::unique_ptr<detail::task_cache> spawner_cache_;
  friend MOTE_API void detail::df_register(dataflow&, detail::df_task*, const detail::df_access_desc*,
                                           std::uint32_t);
  friend MOTE_API void detail::df_task_run(detail::task*, detail::worker&) noexcept;
  friend struct detail::df_scope_access;
};

// An event that the running data-flow task's end waits for, as OmpSs-2's
// external events and TAMPI's non-blocking mode use them: the task's body
// may return, but its accesses are released (its successors run) and
// dataflow::wait() counts it finished only when every event it opened is
// fulfilled. Open one inside a data-flow task's body; fulfil it once, from
// any thread (a worker, the thread that learns a transfer has completed, a
// thread outside the runtime).
//
//   df.spawn(mote::out(buf), [&] {
//     auto ev = mote::dataflow_event::open();      // the task now waits for ev too
//     start_transfer(buf, std::move(ev));          // its completion calls ev.fulfill()
//   });                                            // successors of buf run after fulfill()
//   df.spawn(mote::in(buf), [&] { use(buf); });
class MOTE_API dataflow_event {
 public:
  // Opens an event of the data-flow task whose body the calling thread runs.
  // Throws mote::usage_error outside a data-flow task's body.
  static dataflow_event open();
  dataflow_event() noexcept = default;
  dataflow_event(dataflow_event&& other) noexcept : task_(other.task_) { other.task_ = nullptr; }
  dataflow_event& operator=(dataflow_event&& other) noexcept {
    std::swap(task_, other.task_);
    return *this;
  }
  // An event never fulfilled would hold its task (and the scope's wait)
  // forever: destroying an open one reports it and aborts.
  ~dataflow_event();
  // Fulfils it and empties the handle: the last of the task's events (or its
  // body's return, whichever comes later) ends the task on this thread.
  // Fulfilling an empty handle is a usage_error.
  void fulfill();
  // Fulfils it as failed: the task fails as a task that throws e does (its
  // successors are skipped, e reaches the scope's wait unless another
  // exception came first), once its body has returned and its other events
  // are fulfilled. For a transfer that did not complete (mote::mpi binds a
  // failed request's error to its task this way). An empty handle or a null
  // e is a usage_error.
  //
  //   if (status.MPI_ERROR != MPI_SUCCESS) ev.fail(std::make_exception_ptr(my_error(status)));
  void fail(std::exception_ptr e);
  explicit operator bool() const noexcept { return task_ != nullptr; }

 private:
  explicit dataflow_event(detail::df_task* t) noexcept : task_(t) {}
  detail::df_task* task_ = nullptr;
};

template <class F, class... A>
void dataflow::spawn_record(F&& f, const detail::df_access_desc* descs, std::uint32_t n, std::uint8_t prio) {
  using record = detail::df_record<std::decay_t<F>, std::decay_t<A>...>;
  detail::worker* w = detail::current_worker;
  const void* what;
  bool named;
  if constexpr (detail::is_named_group_fn<std::decay_t<F>>::value) {
    what = f.name;
    named = true;
  } else {
    what = reinterpret_cast<const void*>(&record::run_body);
    named = false;
  }
  const detail::df_spawn_info info{sizeof(record), alignof(record), what, named};
  const detail::df_block block = detail::df_allocate_here(info, n, w, runtime_, *this);
  record* t;
  try {
    t = ::new (block.memory) record(typename record::from_callable{}, std::forward<F>(f));
  } catch (...) {
    detail::df_deallocate(block);
    throw;
  }
  t->accesses = block.accesses;
  t->tag = block.tag;
  t->home = block.home;
  t->body = &record::run_body;
  t->trace_what = what;
  t->trace_named = named;
  // Relaxed: the record is private until df_register publishes it.
  t->priority.store(prio, std::memory_order_relaxed);
  try {
    detail::df_register(*this, t, descs, n);
  } catch (...) {
    t->~record();
    detail::df_deallocate(block);
    throw;
  }
}

template <class... Args>
void dataflow::spawn(Args&&... args) {
  spawn_with(0, std::forward<Args>(args)...);
}

template <class... Args>
void dataflow::spawn(priority p, Args&&... args) {
  spawn_with(p.value, std::forward<Args>(args)...);
}

template <class... Args>
void dataflow::spawn_with(std::uint8_t prio, Args&&... args) {
  static_assert(sizeof...(Args) >= 1, "mote::dataflow::spawn: the callable is missing");
  auto all = std::forward_as_tuple(std::forward<Args>(args)...);
  constexpr std::size_t n = sizeof...(Args) - 1;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    static_assert((detail::is_access_arg_v<std::tuple_element_t<I, std::tuple<Args...>>> && ...),
                  "mote::dataflow::spawn: every argument but the last must be an access "
                  "(mote::in, out, inout, commutative, concurrent, reduction); a mote::priority "
                  "comes first");
    using last = std::tuple_element_t<n, std::tuple<Args...>>;
    if constexpr (n == 0) {
      spawn_record<last>(static_cast<last&&>(std::get<n>(all)), nullptr, 0, prio);
    } else {
      const detail::df_access_desc descs[n] = {detail::describe(std::get<I>(all))...};
      spawn_record<last, std::decay_t<std::tuple_element_t<I, std::tuple<Args...>>>...>(
          static_cast<last&&>(std::get<n>(all)), descs, static_cast<std::uint32_t>(n), prio);
    }
  }(std::make_index_sequence<n>{});
}

template <class F>
void dataflow::spawn_accesses(std::span<const access> accesses, F&& f) {
  spawn_accesses(priority(0), accesses, std::forward<F>(f));
}

template <class F>
void dataflow::spawn_accesses(priority p, std::span<const access> accesses, F&& f) {
  constexpr std::size_t kOnStack = 16;
  detail::df_access_desc small[kOnStack];
  std::unique_ptr<detail::df_access_desc[]> big;
  detail::df_access_desc* descs = small;
  if (accesses.size() > kOnStack) {
    big.reset(new detail::df_access_desc[accesses.size()]);
    descs = big.get();
  }
  for (std::size_t i = 0; i < accesses.size(); ++i) {
    if (accesses[i].type == access_type::reduction) {
      throw usage_error("mote::dataflow::spawn_accesses: reductions need mote::reduction() in spawn()");
    }
    descs[i] = {accesses[i], nullptr, nullptr};
  }
  spawn_record<F>(std::forward<F>(f), descs, static_cast<std::uint32_t>(accesses.size()), p.value);
}

}  // namespace mote
