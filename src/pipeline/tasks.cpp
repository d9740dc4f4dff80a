// The pipeline as tasks of the runtime: the item travels, the stage moves on.
//
// A task carries one item through the stages as far as it can (its data
// stays in this core's cache): a parallel stage runs at once; a serial stage
// runs at once when it is free (and, in order, when the item is the next),
// else the item waits at the stage's gate and this task ends. A task that
// ran an item through a serial stage hands the stage on before it goes on:
// the next waiting item, if any, gets a new task (which a thief may take)
// that owns the stage and carries that item. When an item leaves the last
// stage its slot goes back to the first: if that stage is free, the same
// task makes the next item in the slot it just freed.
//
// Every step returns the slot the task should fill next as the owner of the
// first stage, or kNone to end: the task loops (travel) instead of recursing
// from item to item.
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "mote/detail/platform.hpp"
#include "mote/detail/worker.hpp"
#include "mote/task_group.hpp"
#include "pipeline/engine.hpp"

namespace mote::detail::pipeline {
namespace {

// A spin lock on the same line as what it guards: a gate's line moves
// between the cores with the items, once per visit, not once for the lock and
// again for the state. Held for a few instructions; a waiter yields after a
// short backoff (a preempted holder on a crowded machine).
class spin_lock {
 public:
  void lock() noexcept {
    // Acquire: what the last holder wrote under the lock (its release in
    // unlock).
    if (!held_.exchange(true, std::memory_order_acquire)) return;
    backoff b;
    do {
      // Relaxed: only a hint to try the exchange again.
      while (held_.load(std::memory_order_relaxed)) b.pause();
    } while (held_.exchange(true, std::memory_order_acquire));
  }
  // Release: what we wrote under the lock, for the next holder's acquire.
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

// A serial stage's gate: whether a task is running the stage now (it owns
// the stage), and the items that arrived meanwhile, which the owner hands on
// one by one. Under the lock: held for a few instructions per item, and
// contended only by items arriving at once.
struct alignas(cache_line) gate {
  spin_lock m;
  bool busy = false;
  std::uint64_t next_seq = 0;          // in order: the number of the next item
  std::vector<std::uint32_t> waiting;  // in order: by number mod max_in_flight
  std::deque<std::uint32_t> arrived;   // out of order: in arrival order
};

class task_pipeline {
 public:
  task_pipeline(item_slots& items, std::uint32_t max_in_flight, runtime& rt)
      : items_(items),
        modes_(items.modes()),
        n_(static_cast<std::uint32_t>(items.num_stages())),
        max_(max_in_flight),
        rt_(rt),
        gates_(std::make_unique<gate[]>(n_)) {
    for (std::uint32_t i = 0; i < n_; ++i) {
      if (modes_[i] == stage_mode::serial_in_order) gates_[i].waiting.assign(max_, kNone);
    }
    for (std::uint32_t id = max_; id-- > 0;) free_ids_.push_back(id);
  }

 private:
  // A task of the pipeline: whatever leaves it (a stage's exception, or the
  // engine's own: std::bad_alloc from a spawn or a gate's queue, which may
  // lose the item it carried) stops the first stage before it reaches the
  // group, as a stage's exception does. A running task that loops back to the
  // first stage would otherwise go on making items after the failure. (Above
  // its first use: its type is deduced.)
  template <class F>
  auto guarded(F&& f) {
    return [this, f = std::forward<F>(f)]() mutable {
      try {
        f();
      } catch (...) {
        set_failed();
        throw;
      }
    };
  }

 public:
  void run() {
    task_group g(rt_);
    group_ = &g;
    gates_[0].busy = true;  // the first task owns the first stage
    const std::uint32_t first = free_ids_.back();
    free_ids_.pop_back();
    g.spawn(guarded([this, first] { travel(run_source(first)); }));
    g.wait();  // rethrows the first exception (of a stage, or of the engine)
  }

 private:
  bool serial(std::uint32_t i) const noexcept { return modes_[i] != stage_mode::parallel; }

  void travel(std::uint32_t source_slot) {
    while (source_slot != kNone) source_slot = run_source(source_slot);
  }

  // This task owns the first stage: make an item in slot id and carry it.
  std::uint32_t run_source(std::uint32_t id) {
    gate& g = gates_[0];
    bool made = false;
    if (!failed()) {
      try {
        made = items_.produce(id);
      } catch (...) {
        set_failed();
        throw;  // the first stage stays owned: nothing more is made
      }
    }
    std::uint32_t next = kNone;
    {
      std::lock_guard<spin_lock> l(g.m);
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
        // makes the next item where that slot is warm, with no spawn and no
        // steal.
        g.busy = false;
      }
    }
    if (next != kNone) hand_on([this, next] { travel(run_source(next)); });
    return carry(1, id);
  }

  // Item id has left stage i - 1: on into stage i, and through the parallel
  // stages after it until a serial one.
  std::uint32_t carry(std::uint32_t i, std::uint32_t id) {
    for (; i < n_; ++i) {
      if (!serial(i)) {
        guarded_run(i, id);
        continue;
      }
      gate& g = gates_[i];
      {
        std::lock_guard<spin_lock> l(g.m);
        const bool in_order = modes_[i] == stage_mode::serial_in_order;
        if (g.busy || (in_order && items_.seq(id) != g.next_seq)) {
          // The stage's owner, or the task of the item before this one,
          // takes it from here. At most max_in_flight items are in flight,
          // so no two share a place in `waiting`.
          if (in_order) {
            g.waiting[items_.seq(id) % max_] = id;
          } else {
            if (MOTE_UNLIKELY(task_engine_allocates != nullptr)) task_engine_allocates(task_alloc_site::gate_queue);
            g.arrived.push_back(id);
          }
          return kNone;
        }
        g.busy = true;
      }
      return run_owned(i, id);
    }
    return finish(id);
  }

  // This task owns serial stage i: item id through it, the stage handed on,
  // the item carried on.
  std::uint32_t run_owned(std::uint32_t i, std::uint32_t id) {
    for (;;) {
      guarded_run(i, id);  // on a failure the stage stays owned: nothing more enters
      const std::uint32_t next = next_waiting(i);
      if (i + 1 == n_) {
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
        hand_on([this, i, next] { travel(run_owned(i, next)); });
        return source;
      }
      if (next != kNone) hand_on([this, i, next] { travel(run_owned(i, next)); });
      return carry(i + 1, id);
    }
  }

  // The owner of serial stage i is done with an item: the next one waiting
  // for the stage, which the owner keeps the stage for, or kNone (the stage
  // is free again).
  std::uint32_t next_waiting(std::uint32_t i) {
    gate& g = gates_[i];
    std::uint32_t next = kNone;
    std::lock_guard<spin_lock> l(g.m);
    if (modes_[i] == stage_mode::serial_in_order) {
      ++g.next_seq;
      std::uint32_t& w = g.waiting[g.next_seq % max_];
      if (w != kNone && items_.seq(w) == g.next_seq) next = std::exchange(w, kNone);
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
    gate& g = gates_[0];
    std::lock_guard<spin_lock> l(g.m);
    if (g.busy || source_done_ || failed()) {
      free_ids_.push_back(id);
      return kNone;
    }
    g.busy = true;
    return id;
  }

  // Is another worker looking for work (it asked this worker's pool to
  // share)? Off a worker, assume so.
  static bool someone_idle() noexcept {
    worker* w = current_worker;
    return w == nullptr || w->pool().asked();
  }

  // Spawns the task that takes a stage on, stealable at once: this task goes
  // on with its item for a while, and another worker should not wait for it
  // to share its pool.
  template <class F>
  void hand_on(F&& f) {
    // (On a worker of another runtime the spawn goes elsewhere, and that
    // worker's next push is shared early: harmless.)
    if (worker* w = current_worker) w->pool().share_next_push();
    if (MOTE_UNLIKELY(task_engine_allocates != nullptr)) task_engine_allocates(task_alloc_site::hand_on);
    group_->spawn(guarded(std::forward<F>(f)));
  }

  // Runs stage i on item id; a failure stops the first stage before it
  // reaches the caller (through the task group).
  void guarded_run(std::uint32_t i, std::uint32_t id) {
    try {
      items_.run(i, id);
    } catch (...) {
      set_failed();
      throw;
    }
  }

  // Relaxed: a hint that stops the first stage early; the exception travels
  // in the task group, and nothing is read on the strength of the flag, so
  // seeing it late only makes a few more items.
  bool failed() const noexcept { return failed_.load(std::memory_order_relaxed); }
  void set_failed() noexcept { failed_.store(true, std::memory_order_relaxed); }

  item_slots& items_;
  const std::vector<stage_mode> modes_;
  std::uint32_t n_;
  std::uint32_t max_;
  runtime& rt_;
  // A gate per stage; the first stage's guards free_ids_ and source_done_ too.
  std::unique_ptr<gate[]> gates_;
  task_group* group_ = nullptr;
  std::atomic<bool> failed_{false};
  // Written once per item: on a line of their own, away from the fields
  // above that every task reads once per stage.
  alignas(cache_line) std::vector<std::uint32_t> free_ids_;
  bool source_done_ = false;
};

}  // namespace

void run_as_tasks(item_slots& items, std::uint32_t max_in_flight, runtime& rt) {
  task_pipeline(items, max_in_flight, rt).run();
}

}  // namespace mote::detail::pipeline
