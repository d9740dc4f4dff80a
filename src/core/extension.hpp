// How a model attaches to the runtime without the core naming it: a table of
// hooks per model, listed once in src/models.cpp.
//
// A model may keep state per runtime (made when the runtime starts, before its
// workers) and per worker (in an extension slot of its own, made before the
// worker's thread starts, or on that thread as it starts), and it may be a
// source of work that idle workers help with. The core calls the hooks; it
// never includes a model's header. Any hook may be nullptr.
//
//   // src/loops/loops.cpp: the model defines its table,
//   extern const model_hooks loops_model;
//   const model_hooks loops_model = {.name = "loops", .slot = kLoopsSlot, ...};
//   // src/models.cpp: declares it and lists it.
//   extern const model_hooks loops_model;
//   const model_hooks* const kModels[] = {&loops_model, ...};
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "mote/detail/worker.hpp"

namespace mote::detail {

class runtime_impl;

// For a model without per-worker state.
inline constexpr unsigned kNoSlot = ~0u;

struct model_hooks {
  const char* name;
  // The worker slot the model keeps its per-worker state in (< worker::kSlots,
  // its own), or kNoSlot.
  unsigned slot;

  // ---- State ------------------------------------------------------------------
  // Per runtime: made when the runtime starts, before its workers (nullptr
  // return: none); freed after every worker's state. May throw: the runtime
  // then does not start.
  void* (*make_runtime)(runtime_impl& rt);
  void (*free_runtime)(void* state) noexcept;
  // Per worker, into its slot, before its thread starts (so every thread of
  // the runtime sees it): rt_state is what make_runtime made. May throw.
  void* (*make_worker)(worker& w, void* rt_state);
  // Frees what is in the slot after the thread ended (also when the slot
  // holds nullptr).
  void (*free_worker)(void* state) noexcept;
  // On the worker's thread, first thing / last thing (a model whose state
  // must be made there: set_slot). Reports its own failures.
  void (*thread_begin)(worker& w) noexcept;
  void (*thread_end)(worker& w) noexcept;

  // ---- A source of work ---------------------------------------------------------
  // help: an idle worker runs some of the model's work (after its own pool,
  // the policy's queue and injected work, before stealing); true when it ran
  // any. visible: the last look before a worker sleeps, with seq_cst loads
  // that pair with the model's publication of work, which is followed by a
  // wake-up through runtime_impl::wake_idle() or notify_one().
  bool (*help)(worker& self) noexcept;
  bool (*visible)(worker& self) noexcept;
};

// Every model, in the order idle workers ask their work sources
// (src/models.cpp).
std::span<const model_hooks* const> registered_models() noexcept;

// A runtime's instances of the registered models: their per-runtime states,
// the workers' slots, and the work sources to ask. Frees everything it made
// when destroyed (the runtime's workers' threads have ended by then).
class model_set {
 public:
  model_set() = default;
  ~model_set() { clear(); }
  model_set(const model_set&) = delete;
  model_set& operator=(const model_set&) = delete;

  // Makes every model's state for rt and its workers. Throws what a hook
  // throws, having freed what it made.
  void make(runtime_impl& rt, const std::vector<std::unique_ptr<worker>>& workers) {
    models_ = registered_models();
    check_slots();
    workers_ = &workers;
    states_.assign(models_.size(), nullptr);
    try {
      for (std::size_t m = 0; m < models_.size(); ++m) {
        const model_hooks& h = *models_[m];
        if (h.make_runtime != nullptr) states_[m] = h.make_runtime(rt);
        if (h.help != nullptr) help_.push_back(h.help);
        if (h.visible != nullptr) visible_.push_back(h.visible);
      }
      for (const auto& w : workers) {
        for (std::size_t m = 0; m < models_.size(); ++m) {
          const model_hooks& h = *models_[m];
          if (h.make_worker != nullptr) w->set_slot(h.slot, h.make_worker(*w, states_[m]));
        }
      }
    } catch (...) {
      clear();
      throw;
    }
  }

  // On worker w's thread.
  void thread_begin(worker& w) noexcept {
    for (const model_hooks* h : models_) {
      if (h->thread_begin != nullptr) h->thread_begin(w);
    }
  }
  void thread_end(worker& w) noexcept {
    for (std::size_t m = models_.size(); m-- > 0;) {
      if (models_[m]->thread_end != nullptr) models_[m]->thread_end(w);
    }
  }

  bool help(worker& self) noexcept {
    for (auto* f : help_) {
      if (f(self)) return true;
    }
    return false;
  }
  bool visible(worker& self) noexcept {
    for (auto* f : visible_) {
      if (f(self)) return true;
    }
    return false;
  }

 private:
  void check_slots() const noexcept {
    // A model's slot number is its own constant; two that share one would
    // overwrite each other's state. A defect of the list, so it stops here.
    bool used[worker::kSlots] = {};
    for (const model_hooks* h : models_) {
      if (h->slot == kNoSlot) continue;
      if (h->slot >= worker::kSlots || used[h->slot]) {
        std::fprintf(stderr, "mote: model %s has slot %u, which is out of range or taken\n", h->name, h->slot);
        std::abort();
      }
      used[h->slot] = true;
    }
  }

  void clear() noexcept {
    if (workers_ != nullptr) {
      for (const auto& w : *workers_) {
        for (std::size_t m = models_.size(); m-- > 0;) {
          const model_hooks& h = *models_[m];
          if (h.slot == kNoSlot) continue;
          if (h.free_worker != nullptr) h.free_worker(w->slot(h.slot));
          w->set_slot(h.slot, nullptr);
        }
      }
    }
    for (std::size_t m = states_.size(); m-- > 0;) {
      if (models_[m]->free_runtime != nullptr) models_[m]->free_runtime(states_[m]);
    }
    states_.clear();
    help_.clear();
    visible_.clear();
  }

  std::span<const model_hooks* const> models_;
  const std::vector<std::unique_ptr<worker>>* workers_ = nullptr;
  std::vector<void*> states_;  // per model: its per-runtime state
  std::vector<bool (*)(worker&) noexcept> help_;
  std::vector<bool (*)(worker&) noexcept> visible_;
};

}  // namespace mote::detail
