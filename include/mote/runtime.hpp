// mote::runtime: a set of worker threads, pinned one per core by default, and
// the scheduler that feeds them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "mote/detail/worker.hpp"
#include "mote/error.hpp"
#include "mote/export.hpp"
#include "mote/topology.hpp"

namespace mote {

// Where workers run. Parsed from MOTE_BIND: `none`, `cores`, `threads`, or a
// CPU list such as `0,2,4-7`.
//
//   mote::binding b = mote::binding::parse("0-1", "MOTE_BIND");
struct MOTE_API binding {
  enum class kind {
    none,     // no pinning: the kernel places workers
    cores,    // one worker per core (its first hardware thread), wrapping around
    threads,  // one worker per hardware thread, wrapping around
    list,     // the CPUs in `cpus`, in order, wrapping around
  };
  kind mode = kind::cores;
  std::vector<int> cpus;  // for kind::list

  // Throws config_error naming `what` and the text when it cannot be parsed.
  static binding parse(std::string_view text, std::string_view what = "MOTE_BIND");
  std::string to_string() const;
};

// How ready tasks are distributed; chosen when a runtime starts, never per
// task. MOTE_SCHEDULER=steal|delegation|mesh. docs/scheduler.md compares them.
enum class scheduler_policy {
  // Split deques, random victims, leapfrogging joins: a task_group spawn goes
  // on the spawning worker's own pool. The default.
  work_stealing,
  // Nanos6's synchronized scheduler: task_group spawns (and data-flow tasks)
  // go through bounded add-queues, one per NUMA node and one for threads
  // outside the runtime, into one ready queue behind a mote::delegation_lock
  // whose holder hands tasks to the workers waiting in line. join's records
  // are still stolen from the frames deques.
  delegation,
  // XQueue's mesh: every worker owns one lock-less SPSC queue per producing
  // worker (N x N), producers spread task_group spawns and data-flow tasks
  // round-robin, and MOTE_MESH_BALANCE picks the balancing (none, redirect,
  // steal, both; default both). join's records are still stolen.
  //
  //   mote::runtime_options o;
  //   o.scheduler = mote::scheduler_policy::mesh;  // or MOTE_SCHEDULER=mesh
  mesh,
};

// Options for a runtime. An option left empty is taken from its environment
// variable, and failing that from the topology.
//
//   mote::runtime_options o;
//   o.num_workers = 2;
//   o.spin = std::chrono::microseconds(50);
//   mote::runtime rt(o);
struct runtime_options {
  std::optional<unsigned> num_workers;           // MOTE_NUM_THREADS; default: one per core
  std::optional<binding> bind;                   // MOTE_BIND; default: cores
  std::optional<std::chrono::microseconds> spin; // MOTE_SPIN_US; default: 100 us
  std::optional<scheduler_policy> scheduler;     // MOTE_SCHEDULER; default: work_stealing
  std::optional<std::uint32_t> deque_capacity;   // tasks per worker deque (each of its two); default 16384
  // Give every worker a mote::assistant of its own (pinned to the worker's SMT
  // sibling, or the nearest CPU without a worker), reached from a task through
  // mote::this_worker_assistant(): coarse tasks go to workers, and each worker
  // splits its task further with its assistant. A worker whose assistant
  // cannot start says so on stderr and runs without one (nullptr).
  bool assistants = false;
  // MOTE_ADAPTIVE=0|1; default: off. mote::join runs both callables in place,
  // one after the other, when the second one's call site is short against
  // the current cost of handing it to another worker (docs/adaptive.md).
  // Off, join takes its plain work-first path (about a nanosecond). Set
  // either way (here or by MOTE_ADAPTIVE), it also applies to the workers'
  // assistants (`assistants`), which are adaptive when it is unset.
  std::optional<bool> adaptive;
  // Worker 0 gets no thread of its own: a thread outside the runtime becomes
  // worker 0 for a while (the OpenMP front end's primary thread, which must
  // take part in its own parallel region), and nobody is worker 0 otherwise.
  // It is not pinned (the thread keeps its own affinity); the workers after
  // it are placed as usual, from the second CPU of the binding on. A thread
  // that enters on a CPU a worker is pinned to is moved to the binding's
  // first CPU until it leaves (its own affinity back then). Only the
  // front ends inside mote take the seat (the runtime's internal interface).
  // It needs at least 2 workers (config_error otherwise, naming this option
  // and where the count of 1 came from): with one, no worker would have a
  // thread, and run() or a task_group of the runtime would wait forever
  // while nobody sits in the seat.
  //
  //   mote::runtime_options o;
  //   o.caller_seat = true;
  //   o.num_workers = 2;  // worker 0: the seat; worker 1: a thread of its own
  bool caller_seat = false;
  // The stack of each worker thread, in bytes (0: the system's default, 8 MiB
  // on Debian). Deep recursion inside tasks (a task that waits for a child
  // that waits for its own, thousands deep) needs more.
  //
  //   o.stack_size = 64 << 20;   // 64 MiB per worker
  std::size_t stack_size = 0;
  // The machine as the runtime should see it (default: topology::system()).
  // Workers are placed, and loop teams formed, from it. For trying the shape
  // of another machine, with bind = none (its CPUs need not exist here).
  std::optional<mote::topology> machine;
};

namespace detail {
class runtime_impl;
struct runtime_access;

// Where a callable's result waits for its caller: the value itself, or, for
// a callable that returns a reference, a pointer to what it refers to.
template <class R>
using stored_result_t = std::conditional_t<std::is_reference_v<R>, std::remove_reference_t<R>*, R>;

// A task submitted by a thread that is not a worker of the runtime; the
// submitter sleeps on `finished` (or, when it is a worker of another runtime,
// helps that runtime) until a worker has run it.
struct external_task : queued_task {
  std::atomic<std::uint32_t> finished{0};
  std::exception_ptr error;
};

MOTE_API void submit_and_wait(runtime_impl& rt, external_task& t);
// rt.schedule(t, w): the scheduler policy's entry (runtime_impl::schedule), for
// inline code that only knows the runtime by pointer (task_group::spawn
// under scheduler_policy::delegation).
MOTE_API void schedule_task(runtime_impl& rt, queued_task* t, worker* w);
// Marks t finished and wakes its submitter; the task's last access to t.
MOTE_API void complete_external(external_task& t) noexcept;
}  // namespace detail

// A set of workers. Create as many as you like, one after another or at once;
// destroying one joins its workers. Work enters a runtime through run(), or
// through join / task_group / parallel_invoke called on one of its workers;
// called elsewhere, those use the default runtime.
//
//   mote::runtime rt(mote::runtime_options{.num_workers = 2});
//   int v = rt.run([] { return 6 * 7; });   // runs on a worker, returns 42
class MOTE_API runtime {
 public:
  // Options from MOTE_NUM_THREADS, MOTE_BIND, MOTE_SPIN_US and MOTE_SCHEDULER,
  // else defaults.
  // Throws config_error when a variable cannot be parsed or names CPUs this
  // process may not use.
  runtime();
  explicit runtime(const runtime_options& options);
  // Joins the workers. Work submitted through run() has finished by then,
  // because run() blocks; destroying a runtime while another thread is inside
  // run() on it is a usage error.
  ~runtime();
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  unsigned num_workers() const noexcept;
  // The CPU each worker is pinned to, or -1 when it is not pinned.
  std::vector<int> worker_cpus() const;
  std::chrono::microseconds spin() const noexcept;

  // Runs f on a worker of this runtime and returns its result (a reference
  // when f returns one); exceptions from f are rethrown here. Called from a
  // worker of this runtime, it simply calls f. From a worker of another
  // runtime, that worker keeps running its own runtime's tasks until f is
  // done (so a runtime that calls into another and is called back does not
  // deadlock); any other thread sleeps meanwhile. Any number of threads may
  // call run() at once.
  template <class F>
  std::invoke_result_t<F&> run(F&& f);

  // The runtime created on first use (options from the environment).
  static runtime& default_runtime();
  // The runtime of the calling worker, or nullptr on any other thread.
  static runtime* current() noexcept;
  // The index of the calling worker in its runtime, or -1.
  static int current_worker_index() noexcept;

 private:
  friend struct detail::runtime_access;
  detail::runtime_impl* impl_;
};

namespace detail {
// The library's own way to a runtime's insides.
struct runtime_access {
  static runtime_impl& impl(const runtime& rt) noexcept { return *rt.impl_; }
};

MOTE_API runtime_impl* runtime_of(const worker* w) noexcept;

template <class F, class R>
struct external_call : external_task {
  F* fn;
  std::optional<std::conditional_t<std::is_void_v<R>, char, stored_result_t<R>>> result;

  explicit external_call(F* f) : fn(f) { init(&external_call::run); }
  static void run(task* base, worker&) noexcept {
    auto* self = static_cast<external_call*>(base);
    try {
      if constexpr (std::is_void_v<R>) {
        (*self->fn)();
      } else if constexpr (std::is_reference_v<R>) {
        self->result.emplace(std::addressof((*self->fn)()));
      } else {
        self->result.emplace((*self->fn)());
      }
    } catch (...) {
      self->error = std::current_exception();
    }
    complete_external(*self);
  }
};
}  // namespace detail

template <class F>
std::invoke_result_t<F&> runtime::run(F&& f) {
  using R = std::invoke_result_t<F&>;
  detail::worker* w = detail::current_worker;
  if (w != nullptr && &w->runtime() == impl_) return f();
  detail::external_call<std::remove_reference_t<F>, R> call(&f);
  detail::submit_and_wait(*impl_, call);
  if (call.error) std::rethrow_exception(call.error);
  if constexpr (std::is_reference_v<R>) {
    return static_cast<R>(**call.result);
  } else if constexpr (!std::is_void_v<R>) {
    return std::move(*call.result);
  }
}

}  // namespace mote
