// Pipelines: stages connected by channels (the shape of oneTBB's
// parallel_pipeline), and streaming tasks (tasks whose inputs and outputs
// are channels, after the OpenMP stream-computing extension).
//
//   mote::parallel_pipeline(16,
//       mote::make_stage<void, int>(mote::stage_mode::serial_in_order,
//                                   [&](mote::flow_control& fc) {
//                                     if (next == n) fc.stop();
//                                     return next++;
//                                   })
//     & mote::make_stage<int, double>(mote::stage_mode::parallel, [](int i) { return std::sqrt(i); })
//     & mote::make_stage<double, void>(mote::stage_mode::serial_in_order, [&](double x) { sum += x; }));
//
// Stage modes:
//   serial_in_order      one item at a time, in the order the first stage made them
//   serial_out_of_order  one item at a time, in any order
//   parallel             any number of items at once
// The first stage is called serially (flow_control::stop() ends the stream;
// the value returned with it is dropped). At most max_in_flight items are in
// the pipeline at once: that is the back-pressure, and it bounds memory.
//
// How it runs. On mote's workers (the default) an item travels with its task
// through as many stages as it can, and a serial stage moves on to the next
// item in a new task (oneTBB's scheme: the item's data stays in one core's
// cache; no worker ever blocks in a stage). With
// pipeline_options::dedicated_threads every stage instead runs on threads of
// its own (one per serial stage, one per worker for a parallel stage), pinned
// to the runtime's CPUs and connected by channels: channel_kind::spsc, that
// is BatchQueue, between two serial stages (a one-to-one stream, as the
// seed's runtime chooses automatically), MPMC elsewhere. See docs/streams.md.
//
// An exception thrown by a stage stops the first stage, the items in flight
// are dropped (destroyed, nothing leaks), and the exception reaches the
// caller of parallel_pipeline once everything has stopped.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "mote/channel.hpp"
#include "mote/export.hpp"
#include "mote/runtime.hpp"
#include "mote/task_group.hpp"
#include "mote/topology.hpp"

namespace mote {

enum class stage_mode : std::uint8_t { serial_in_order, serial_out_of_order, parallel };

// Passed to the first stage: stop() ends the stream.
//
//   [&](mote::flow_control& fc) { if (done()) { fc.stop(); return 0; } return next(); }
class flow_control {
 public:
  void stop() noexcept { stopped_ = true; }
  bool stopped() const noexcept { return stopped_; }

 private:
  bool stopped_ = false;
};

// One stage: its input and output types (void at the ends), its mode and its
// function. Made by make_stage, composed with operator&.
template <class In, class Out, class F>
struct stage {
  using input_type = In;
  using output_type = Out;
  stage_mode mode;
  F fn;
};

// A stage from a function: Out f(In) in the middle, Out f(flow_control&)
// first, void f(In) last.
//
//   auto square = mote::make_stage<int, int>(mote::stage_mode::parallel, [](int x) { return x * x; });
template <class In, class Out, class F>
stage<In, Out, std::decay_t<F>> make_stage(stage_mode mode, F&& f) {
  if constexpr (std::is_void_v<In>) {
    static_assert(std::is_invocable_v<std::decay_t<F>&, flow_control&>,
                  "the first stage is called as f(flow_control&)");
  } else {
    static_assert(std::is_invocable_v<std::decay_t<F>&, In&&>, "a stage is called as f(In)");
  }
  return {mode, std::forward<F>(f)};
}

// Stages in order.
template <class... S>
struct stage_chain {
  std::tuple<S...> stages;
};

namespace detail {
template <class T>
struct is_stage : std::false_type {};
template <class I, class O, class F>
struct is_stage<stage<I, O, F>> : std::true_type {};
template <class T>
struct is_chain : std::false_type {};
template <class... S>
struct is_chain<stage_chain<S...>> : std::true_type {};
template <class T>
concept stage_or_chain = is_stage<std::decay_t<T>>::value || is_chain<std::decay_t<T>>::value;

template <class T>
auto as_tuple(T&& t) {
  if constexpr (is_chain<std::decay_t<T>>::value) {
    return std::forward<T>(t).stages;
  } else {
    return std::tuple<std::decay_t<T>>(std::forward<T>(t));
  }
}
}  // namespace detail

// Joins stages (or chains) into one chain; the output type of the left
// must be the input type of the right.
//
//   auto chain = first & middle & last;
template <detail::stage_or_chain A, detail::stage_or_chain B>
auto operator&(A&& a, B&& b) {
  auto t = std::tuple_cat(detail::as_tuple(std::forward<A>(a)), detail::as_tuple(std::forward<B>(b)));
  return std::apply([](auto&&... s) { return stage_chain<std::decay_t<decltype(s)>...>{{std::move(s)...}}; },
                    std::move(t));
}

struct pipeline_options {
  // Items in the pipeline at once; 0: four per worker.
  std::size_t max_in_flight = 0;
  // Run every stage on threads of its own, pinned to the runtime's CPUs,
  // instead of as tasks on its workers.
  bool dedicated_threads = false;
  // The runtime whose workers (or CPUs) run the stages; null: the current
  // worker's runtime, else the default one.
  runtime* rt = nullptr;
};

namespace detail {

template <class T>
using stored_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <class Chain>
class pipeline_exec;

template <class... S>
class pipeline_exec<std::tuple<S...>> {
  static constexpr std::size_t N = sizeof...(S);
  template <std::size_t I>
  using stage_t = std::tuple_element_t<I, std::tuple<S...>>;
  template <std::size_t I>
  using out_t = typename stage_t<I>::output_type;
  using values = std::tuple<std::optional<stored_t<typename S::output_type>>...>;
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};

  // One item in flight: its number in the stream and the value each stage
  // produced (a stage destroys its input as it makes its output).
  struct slot {
    std::uint64_t seq = 0;
    values v;
  };

  // On dedicated threads, the input side of stage I (I >= 1): a channel of
  // slot numbers, and for an in-order stage the items that came early.
  struct alignas(cache_line) input {
    std::unique_ptr<channel<std::uint32_t>> ch;
    std::uint64_t next_seq = 0;
    std::vector<std::uint32_t> waiting;
    std::atomic<std::size_t> running{0};  // the stage's threads still running
  };

  // As tasks, a serial stage's gate: whether a task is running the stage
  // now (it owns the stage), and the items that arrived meanwhile, which the
  // owner hands on one by one. Under the mutex: held for a few instructions
  // per item, and contended only by items arriving at once.
  struct alignas(cache_line) gate {
    // A spin lock on the same line as what it guards: a gate's line moves
    // between the cores with the items, once per visit, not once for the
    // lock and again for the state. Held for a few instructions; a waiter
    // yields after a short backoff (a preempted holder on a crowded
    // machine).
    struct spin_lock {
      std::atomic<bool> held{false};
      void lock() noexcept {
        // Acquire: what the last holder wrote under the lock.
        if (!held.exchange(true, std::memory_order_acquire)) return;
        detail::backoff b;
        do {
          while (held.load(std::memory_order_relaxed)) b.pause();
        } while (held.exchange(true, std::memory_order_acquire));
      }
      // Release: what we wrote under the lock, for the next holder.
      void unlock() noexcept { held.store(false, std::memory_order_release); }
    } m;
    bool busy = false;
    std::uint64_t next_seq = 0;           // in order: the number of the next item
    std::vector<std::uint32_t> waiting;   // in order: by number mod max_in_flight
    std::deque<std::uint32_t> arrived;    // out of order: in arrival order
  };

 public:
  pipeline_exec(std::tuple<S...>& stages, std::size_t max_in_flight, runtime& rt, bool threads)
      : stages_(stages),
        max_(static_cast<std::uint32_t>(max_in_flight)),
        rt_(rt),
        threads_(threads),
        slots_(max_in_flight) {
    static_assert(std::is_void_v<typename stage_t<0>::input_type>, "the first stage takes no input (In = void)");
    static_assert(std::is_void_v<out_t<N - 1>>, "the last stage returns nothing (Out = void)");
    check_links(std::make_index_sequence<N - 1>{});
    std::apply([this](auto&... st) { (modes_.push_back(st.mode), ...); }, stages_);
    modes_[0] = stage_mode::serial_in_order;  // the first stage is called serially
    for (std::size_t i = 0; i < N; ++i) {
      if (threads_) {
        inputs_.push_back(std::make_unique<input>());
        if (i == 0) continue;
        // Between two serial stages a one-to-one stream: BatchQueue.
        const bool one_to_one = serial(i - 1) && serial(i);
        inputs_.back()->ch = std::make_unique<channel<std::uint32_t>>(
            std::max<std::size_t>(2, max_), one_to_one ? channel_kind::spsc : channel_kind::mpmc);
        if (modes_[i] == stage_mode::serial_in_order) inputs_.back()->waiting.assign(max_, kNone);
      } else {
        gates_.push_back(std::make_unique<gate>());
        if (modes_[i] == stage_mode::serial_in_order) gates_.back()->waiting.assign(max_, kNone);
      }
    }
    if (threads_) {
      free_ = std::make_unique<channel<std::uint32_t>>(std::max<std::size_t>(2, std::size_t{max_} + 1),
                                                       channel_kind::mpmc);
    } else {
      for (std::uint32_t id = max_; id-- > 0;) free_ids_.push_back(id);
    }
  }

  pipeline_exec(const pipeline_exec&) = delete;
  pipeline_exec& operator=(const pipeline_exec&) = delete;

  void run() {
    if (threads_) {
      for (std::uint32_t id = 0; id < max_; ++id) free_->push(id);
      run_threads();
      return;
    }
    task_group g(rt_);
    group_ = &g;
    gates_[0]->busy = true;  // the first task owns the first stage
    const std::uint32_t first = free_ids_.back();
    free_ids_.pop_back();
    g.spawn([this, first] { travel(run_source(first)); });
    g.wait();  // rethrows the first exception of a stage
  }

 private:
  template <std::size_t... I>
  static void check_links(std::index_sequence<I...>) {
    static_assert((std::is_same_v<out_t<I>, typename stage_t<I + 1>::input_type> && ...),
                  "each stage's output type must be the next stage's input type");
  }

  bool serial(std::size_t i) const noexcept { return modes_[i] != stage_mode::parallel; }

  // ---- One item through one stage ---------------------------------------------

  // Runs stage I (I >= 1) on slot id: its input value becomes its output.
  template <std::size_t I>
  void run_stage(std::uint32_t id) {
    values& v = slots_[id].v;
    auto& in = std::get<I - 1>(v);
    auto& fn = std::get<I>(stages_).fn;
    if constexpr (std::is_void_v<out_t<I>>) {
      fn(std::move(*in));
    } else {
      std::get<I>(v).emplace(fn(std::move(*in)));
    }
    in.reset();
  }

  // Makes the first stage's next item in slot id; false at the end.
  bool produce(std::uint32_t id) {
    flow_control fc;
    slot& s = slots_[id];
    s.seq = next_source_seq_;
    auto& fn = std::get<0>(stages_).fn;
    if constexpr (std::is_void_v<out_t<0>>) {
      fn(fc);
    } else {
      auto& out = std::get<0>(s.v);
      out.emplace(fn(fc));
      if (fc.stopped()) out.reset();
    }
    if (fc.stopped()) return false;
    ++next_source_seq_;
    return true;
  }

  // ---- As tasks: the item travels, the stage moves on ----------------------------
  //
  // A task carries one item through the stages as far as it can (its data
  // stays in this core's cache): a parallel stage runs at once; a serial
  // stage runs at once when it is free (and, in order, when the item is the
  // next), else the item waits at the stage's gate and this task ends. A
  // task that ran an item through a serial stage hands the stage on before
  // it goes on: the next waiting item, if any, gets a new task (which a
  // thief may take) that owns the stage and carries that item. When an item
  // leaves the last stage its slot goes back to the first: if that stage is
  // free, the same task makes the next item in the slot it just freed.
  //
  // Every step returns the slot the task should fill next as the owner of
  // the first stage, or kNone to end: the task loops (travel) instead of
  // recursing from item to item.

  void travel(std::uint32_t source_slot) {
    while (source_slot != kNone) source_slot = run_source(source_slot);
  }

  // This task owns the first stage: make an item in slot id and carry it.
  std::uint32_t run_source(std::uint32_t id) {
    gate& g = *gates_[0];
    bool made = false;
    if (!failed_.load(std::memory_order_relaxed)) {
      try {
        made = produce(id);
      } catch (...) {
        failed_.store(true, std::memory_order_relaxed);
        throw;  // the first stage stays owned: nothing more is made
      }
    }
    std::uint32_t next = kNone;
    {
      std::lock_guard<typename gate::spin_lock> l(g.m);
      if (!made) {
        source_done_ = true;
        free_ids_.push_back(id);
        g.busy = false;
        return kNone;
      }
      if (!free_ids_.empty() && someone_idle()) {
        next = free_ids_.back();
        free_ids_.pop_back();
      } else {
        // Nobody is looking for work: the first stage waits, free, for the
        // task that finishes an item next (finish() takes it), which then
        // makes the next item where that slot is warm, with no spawn and
        // no steal.
        g.busy = false;
      }
    }
    if (next != kNone) hand_on([this, next] { travel(run_source(next)); });
    return carry<1>(id);
  }

  // Item id has left stage I - 1: on into stage I.
  template <std::size_t I>
  std::uint32_t carry(std::uint32_t id) {
    if constexpr (I == N) {
      return finish(id);
    } else {
      if (!serial(I)) {
        guarded([&] { run_stage<I>(id); });
        return carry<I + 1>(id);
      }
      gate& g = *gates_[I];
      {
        std::lock_guard<typename gate::spin_lock> l(g.m);
        const bool in_order = modes_[I] == stage_mode::serial_in_order;
        if (g.busy || (in_order && slots_[id].seq != g.next_seq)) {
          // The stage's owner, or the task of the item before this one,
          // takes it from here. At most max_in_flight items are in flight,
          // so no two share a place in `waiting`.
          if (in_order) {
            g.waiting[slots_[id].seq % max_] = id;
          } else {
            g.arrived.push_back(id);
          }
          return kNone;
        }
        g.busy = true;
      }
      return run_owned<I>(id);
    }
  }

  // This task owns serial stage I: item id through it, the stage handed on,
  // the item carried on.
  template <std::size_t I>
  std::uint32_t run_owned(std::uint32_t id) {
    for (;;) {
      guarded([&] { run_stage<I>(id); });  // on a failure the stage stays owned: nothing more enters
      const std::uint32_t next = next_waiting<I>();
      if constexpr (I + 1 == N) {
        // The last stage: what is left of an item here is its slot's return,
        // so the waiting items are run here rather than handed to a new task
        // (a spawn and a steal cost more than the rest of their way), until
        // this task gets the first stage to run.
        const std::uint32_t source = finish(id);
        if (next == kNone) return source;
        if (source == kNone) {
          id = next;
          continue;
        }
        hand_on([this, next] { travel(run_owned<I>(next)); });
        return source;
      } else {
        if (next != kNone) hand_on([this, next] { travel(run_owned<I>(next)); });
        return carry<I + 1>(id);
      }
    }
  }

  // The owner of serial stage I is done with an item: the next one waiting
  // for the stage, which the owner keeps the stage for, or kNone (the stage
  // is free again).
  template <std::size_t I>
  std::uint32_t next_waiting() {
    gate& g = *gates_[I];
    std::uint32_t next = kNone;
    std::lock_guard<typename gate::spin_lock> l(g.m);
    if (modes_[I] == stage_mode::serial_in_order) {
      ++g.next_seq;
      std::uint32_t& w = g.waiting[g.next_seq % max_];
      if (w != kNone && slots_[w].seq == g.next_seq) next = std::exchange(w, kNone);
    } else if (!g.arrived.empty()) {
      next = g.arrived.front();
      g.arrived.pop_front();
    }
    if (next == kNone) g.busy = false;
    return next;
  }

  // Item id is through: its slot goes back to the first stage, which this
  // task runs next if it is free.
  std::uint32_t finish(std::uint32_t id) {
    gate& g = *gates_[0];
    std::lock_guard<typename gate::spin_lock> l(g.m);
    if (g.busy || source_done_ || failed_.load(std::memory_order_relaxed)) {
      free_ids_.push_back(id);
      return kNone;
    }
    g.busy = true;
    return id;
  }

  // Is another worker looking for work (it asked this worker's pool to
  // share)? Off a worker, assume so.
  static bool someone_idle() noexcept {
    detail::worker* w = detail::current_worker;
    return w == nullptr || w->pool().asked();
  }

  // Spawns the task that takes a stage on, stealable at once: this task goes
  // on with its item for a while, and another worker should not wait for it
  // to share its pool.
  template <class F>
  void hand_on(F&& f) {
    // (On a worker of another runtime the spawn goes elsewhere, and that
    // worker's next push is shared early: harmless.)
    if (detail::worker* w = detail::current_worker) w->pool().share_next_push();
    group_->spawn(std::forward<F>(f));
  }

  // Runs f; a failure stops the first stage before it reaches the caller.
  template <class F>
  void guarded(F&& f) {
    try {
      f();
    } catch (...) {
      failed_.store(true, std::memory_order_relaxed);
      throw;
    }
  }

  // ---- On dedicated threads ------------------------------------------------------

  // Slot id is done with stage I - 1: to stage I's threads.
  template <std::size_t I>
  void deliver(std::uint32_t id) {
    if constexpr (I == N) {
      free_->push(id);  // never full: it holds every slot number
    } else {
      inputs_[I]->ch->push(id);
    }
  }

  // Runs item id through stage I (I >= 1) and passes it on; false when the
  // stage (or the hand-over) threw: then this item, the one that failed, is
  // dropped, and no other.
  template <std::size_t I>
  bool pass(std::uint32_t id) {
    try {
      run_stage<I>(id);
      deliver<I + 1>(id);
      return true;
    } catch (...) {
      fail(std::current_exception());
      drop(id);
      return false;
    }
  }

  // Item id has come to serial_in_order stage I (I >= 1): it waits for its
  // turn, or runs, followed by the items that waited for theirs. After a
  // failure here no turn comes again: the items still waiting are dropped at
  // the end of the stream.
  template <std::size_t I>
  void in_order(input& in, std::uint32_t id) {
    const std::uint64_t seq = slots_[id].seq;
    if (seq != in.next_seq) {
      in.waiting[seq % max_] = id;  // at most max_ in flight: no two share a place
      return;
    }
    while (pass<I>(id)) {
      ++in.next_seq;
      std::uint32_t& next = in.waiting[in.next_seq % max_];
      if (next == kNone) return;
      id = std::exchange(next, kNone);
    }
  }

  void run_threads() {
    std::vector<int> cpus = rt_.worker_cpus();
    std::vector<std::thread> threads;
    std::size_t next_cpu = 0;
    auto start = [&](auto&& body) {
      const int cpu = cpus.empty() ? -1 : cpus[next_cpu++ % cpus.size()];
      threads.emplace_back([this, cpu, body] {
        const bool pinned = cpu >= 0 && pin_current_thread(cpu);  // refused: it runs unpinned
        spinner_scope spinning(pinned ? cpu : -1);
        body();
      });
    };
    try {
      start_stages(start, std::make_index_sequence<N>{});
    } catch (...) {
      fail(std::current_exception());
      close_all();
      for (std::thread& t : threads) t.join();
      throw;
    }
    for (std::thread& t : threads) t.join();
    if (error_) std::rethrow_exception(error_);
  }

  template <class Start, std::size_t... I>
  void start_stages(Start& start, std::index_sequence<I...>) {
    (start_stage<I>(start), ...);
  }

  template <std::size_t I, class Start>
  void start_stage(Start& start) {
    const std::size_t copies = serial(I) ? 1 : std::max(1U, rt_.num_workers());
    // Relaxed: stored before the stage's threads start (thread creation
    // orders it before them); they count down with acq_rel below.
    inputs_[I]->running.store(copies, std::memory_order_relaxed);
    for (std::size_t c = 0; c < copies; ++c) start([this] { stage_thread<I>(); });
  }

  template <std::size_t I>
  void stage_thread() {
    if constexpr (I == 0) {
      try {
        while (!failed_.load(std::memory_order_relaxed)) {
          std::optional<std::uint32_t> id = free_->pop();
          if (!id || *id == kNone) break;  // kNone: a failure woke us
          if (!produce(*id)) {
            free_->push(*id);
            break;
          }
          deliver<1>(*id);
        }
      } catch (...) {
        fail(std::current_exception());
      }
    } else {
      input& in = *inputs_[I];
      while (std::optional<std::uint32_t> id = in.ch->pop()) {
        if (failed_.load(std::memory_order_relaxed)) {
          drop(*id);
        } else if (modes_[I] == stage_mode::serial_in_order) {
          in_order<I>(in, *id);
        } else {
          pass<I>(*id);
        }
      }
      // Closed and drained. Items still waiting for their turn were
      // overtaken by a failure: drop them.
      for (std::uint32_t& w : in.waiting) {
        if (w != kNone) drop(std::exchange(w, kNone));
      }
    }
    // The last thread of a stage ends the stream of the next.
    if (inputs_[I]->running.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      if constexpr (I + 1 < N) inputs_[I + 1]->ch->close();
    }
  }

  void drop(std::uint32_t id) {
    std::apply([](auto&... o) { (o.reset(), ...); }, slots_[id].v);
    free_->push(id);
  }

  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> g(error_lock_);
    if (!error_) error_ = std::move(e);
    if (!failed_.exchange(true, std::memory_order_relaxed) && threads_) {
      // The first stage may be waiting for a slot that a stage holds back
      // for its turn: wake it so that it stops (room for one more: below).
      free_->try_push(kNone);
    }
  }

  void close_all() {
    for (std::size_t i = 1; i < N; ++i) inputs_[i]->ch->close();
    free_->close();
  }

  std::tuple<S...>& stages_;
  std::uint32_t max_;
  runtime& rt_;
  bool threads_;
  std::vector<slot> slots_;
  std::vector<stage_mode> modes_;
  // The first stage's own (it runs one item at a time, as any serial stage).
  std::uint64_t next_source_seq_ = 0;
  // As tasks: a gate per stage (the first stage's guards free_ids_ and
  // source_done_ too), and the group of the pipeline's tasks.
  std::vector<std::unique_ptr<gate>> gates_;
  std::vector<std::uint32_t> free_ids_;
  bool source_done_ = false;
  task_group* group_ = nullptr;
  // On dedicated threads: each stage's input, and the free slots.
  std::vector<std::unique_ptr<input>> inputs_;
  std::unique_ptr<channel<std::uint32_t>> free_;
  // The first failure (as tasks, the group keeps the exception itself).
  // Relaxed everywhere: a hint that stops the first stage early and makes
  // stage threads drop items; the exception travels under error_lock_ (or
  // in the task group), and nothing is read on the strength of the flag, so
  // seeing it late only makes a few more items.
  std::atomic<bool> failed_{false};
  std::mutex error_lock_;
  std::exception_ptr error_;
};

}  // namespace detail

// Runs the chain of stages with at most max_in_flight items at once, as
// tasks of the current worker's runtime (else the default runtime's), and
// returns when the first stage has stopped and every item is through.
// Rethrows the first exception of a stage.
//
//   mote::parallel_pipeline(8, read & transform & write);
template <class Chain>
  requires detail::stage_or_chain<Chain>
void parallel_pipeline(const pipeline_options& options, Chain&& chain) {
  auto stages = detail::as_tuple(std::forward<Chain>(chain));
  runtime& rt = options.rt != nullptr            ? *options.rt
                : runtime::current() != nullptr ? *runtime::current()
                                                : runtime::default_runtime();
  std::size_t max = options.max_in_flight;
  if (max == 0) max = 4 * std::size_t{std::max(1U, rt.num_workers())};
  if (max > (std::size_t{1} << 30)) throw std::invalid_argument("mote::parallel_pipeline: max_in_flight too large");
  detail::pipeline_exec<decltype(stages)> exec(stages, max, rt, options.dedicated_threads);
  exec.run();
}

template <class Chain>
  requires detail::stage_or_chain<Chain>
void parallel_pipeline(std::size_t max_in_flight, Chain&& chain) {
  if (max_in_flight == 0) throw std::invalid_argument("mote::parallel_pipeline: max_in_flight must be at least 1");
  parallel_pipeline(pipeline_options{.max_in_flight = max_in_flight}, std::forward<Chain>(chain));
}

// ---- Streaming tasks -------------------------------------------------------------

// The channels a streaming task reads (one value from each per call) and
// writes (one value to each per call).
template <class... T>
struct stream_inputs {
  std::tuple<channel<T>&...> ch;
};
template <class... T>
struct stream_outputs {
  std::tuple<channel<T>&...> ch;
};
template <class... T>
stream_inputs<T...> inputs(channel<T>&... c) {
  return {std::tuple<channel<T>&...>(c...)};
}
template <class... T>
stream_outputs<T...> outputs(channel<T>&... c) {
  return {std::tuple<channel<T>&...>(c...)};
}

// Tasks whose inputs and outputs are streams, after the OpenMP
// stream-computing extension (`#pragma omp task input(state) output(x,
// state)`): each task is called once per set of input values, as they
// arrive, and its results go to its output channels. A task ends when one of
// its inputs is closed and drained, and then closes its outputs, so the end
// of a stream flows down the graph. A task with no inputs is a source: it is
// called with a flow_control until it calls stop(). A value a task both
// reads and writes (state carried from one call to the next) is a channel
// in both lists, primed with its first value.
//
// Every task runs on a thread of its own, pinned to the runtime's CPUs in
// turn (a streaming task waits on its channels, which a worker must not do).
// An exception in a task stops every task (each closes its channels, which
// wakes those waiting on them), and wait() rethrows it.
//
//   mote::channel<int> xs(256), ys(256);
//   mote::stream_graph g;
//   int next = 0;
//   g.task(mote::inputs(), mote::outputs(xs), [&](mote::flow_control& fc) {
//     if (next == 1000) fc.stop();
//     return next++;
//   });
//   g.task(mote::inputs(xs), mote::outputs(ys), [](int x) { return 2 * x; });
//   long sum = 0;
//   g.task(mote::inputs(ys), mote::outputs(), [&](int y) { sum += y; });
//   g.wait();
class stream_graph {
 public:
  // The tasks' threads are pinned to rt's CPUs (null: the default runtime's).
  explicit stream_graph(runtime* rt = nullptr)
      : cpus_((rt != nullptr ? *rt : runtime::default_runtime()).worker_cpus()) {}
  stream_graph(const stream_graph&) = delete;
  stream_graph& operator=(const stream_graph&) = delete;
  // Waits for the tasks that are still running (an error they raised is
  // lost then: call wait() to see it).
  ~stream_graph() {
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }

  // Starts a task. fn takes one value of each input (or a flow_control& when
  // there are none) and returns nothing (no outputs), a value (one output)
  // or a std::tuple with one value per output.
  //
  //   g.task(mote::inputs(a, b), mote::outputs(sum), [](int x, int y) { return x + y; });
  template <class... I, class... O, class F>
  void task(stream_inputs<I...> in, stream_outputs<O...> out, F fn) {
    const int cpu = cpus_.empty() ? -1 : cpus_[threads_.size() % cpus_.size()];
    threads_.emplace_back([this, in, out, fn = std::move(fn), cpu]() mutable {
      const bool pinned = cpu >= 0 && pin_current_thread(cpu);
      detail::spinner_scope spinning(pinned ? cpu : -1);
      run_task(in, out, fn);
    });
  }

  // Waits for every task; rethrows the first exception one threw.
  //
  //   g.wait();
  void wait() {
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
    threads_.clear();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  template <class... I, class... O, class F>
  void run_task(stream_inputs<I...>& in, stream_outputs<O...>& out, F& fn) {
    bool failed_here = false;
    try {
      for (;;) {
        if (failed_.load(std::memory_order_relaxed)) break;
        if constexpr (sizeof...(I) == 0) {
          flow_control fc;
          if constexpr (sizeof...(O) == 0) {
            fn(fc);
            if (fc.stopped()) break;
          } else {
            auto r = fn(fc);
            if (fc.stopped()) break;
            push_all(out, std::move(r));
          }
        } else {
          std::optional<std::tuple<I...>> args = pop_all(in, std::index_sequence_for<I...>{});
          if (!args) break;
          if constexpr (sizeof...(O) == 0) {
            std::apply(fn, std::move(*args));
          } else {
            push_all(out, std::apply(fn, std::move(*args)));
          }
        }
      }
    } catch (const usage_error&) {
      // A push to a channel that a failing task closed: stop quietly.
      if (!failed_.load(std::memory_order_relaxed)) {
        record(std::current_exception());
        failed_here = true;
      }
    } catch (...) {
      record(std::current_exception());
      failed_here = true;
    }
    // Our outputs end here. After a failure our inputs are drained (not
    // closed: only a producer may close a channel_kind::spsc channel), so
    // that producers waiting for room go on, see the failure and stop; each
    // then closes its outputs, which ends the drain.
    std::apply([](auto&... c) { (close_quietly(c), ...); }, out.ch);
    if (failed_here || failed_.load(std::memory_order_relaxed)) {
      std::apply([](auto&... c) { (drain_quietly(c), ...); }, in.ch);
    }
  }

  template <class T>
  static void drain_quietly(channel<T>& c) noexcept {
    try {
      while (c.pop()) {
      }
    } catch (...) {
      // a value's move threw: it is gone, and so is the stream
    }
  }

  template <class... I, std::size_t... K>
  static std::optional<std::tuple<I...>> pop_all(stream_inputs<I...>& in, std::index_sequence<K...>) {
    std::tuple<std::optional<I>...> got;
    bool ok = true;
    // One value from each input, in order; stop at the first that has ended.
    ((ok = ok && (std::get<K>(got) = std::get<K>(in.ch).pop()).has_value()), ...);
    if (!ok) return std::nullopt;
    return std::tuple<I...>(std::move(*std::get<K>(got))...);
  }

  template <class... O, class R>
  static void push_all(stream_outputs<O...>& out, R&& r) {
    if constexpr (sizeof...(O) == 1) {
      std::get<0>(out.ch).push(std::forward<R>(r));
    } else {
      std::apply([&](auto&... c) { std::apply([&](auto&&... v) { (c.push(std::move(v)), ...); }, r); }, out.ch);
    }
  }

  template <class T>
  static void close_quietly(channel<T>& c) noexcept {
    try {
      c.close();
    } catch (...) {
      // closing cannot fail but for memory in a switch; nothing more to do
    }
  }

  void record(std::exception_ptr e) {
    std::lock_guard<std::mutex> g(error_lock_);
    if (!error_) error_ = std::move(e);
    failed_.store(true, std::memory_order_relaxed);
  }

  std::vector<int> cpus_;
  std::vector<std::thread> threads_;
  // Relaxed: a hint that makes the tasks stop; the exception itself goes
  // through error_lock_, and wait() reads it after joining every thread.
  std::atomic<bool> failed_{false};
  std::mutex error_lock_;
  std::exception_ptr error_;
};

}  // namespace mote
