// The assistant thread: the consumer side of the ring, parking, hints, and
// the choice of CPU. docs/assistant.md has the protocol and its orderings.
#include "mote/assistant.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "mote/error.hpp"
#include "mote/join.hpp"
#include "mote/topology.hpp"
#include "mote/trace.hpp"
#include "core/config.hpp"
#include "core/extension.hpp"
#include "wait/idle.hpp"
#include "core/runtime_impl.hpp"
#include "wait/event_count.hpp"

namespace mote {

namespace detail {
namespace {
constinit thread_local bool assistant_thread = false;
}  // namespace
bool on_assistant_thread() noexcept { return assistant_thread; }
}  // namespace detail

struct assistant::state {
  std::thread thread;
  std::atomic<bool> stop{false};
  // The first exception a task threw since the last wait(). Written by the
  // assistant only while has_error_ is 0, then published by has_error_'s
  // release store; read and cleared by the owner in wait(), when no task is in
  // flight (tail_pub_ == head_), so the two never overlap.
  std::exception_ptr error;
  // The first exception of a task the owner ran itself (adaptive, or a full
  // ring) since the last wait(). Owner only.
  std::exception_ptr owner_error;
  int cpu = -1;
  std::int64_t idle_park_ns = 0;
  // The assistant shares the owner's CPU (a one-CPU process, or pinning
  // failed): then neither side may spin, or each would wait for the other's
  // time slice. The assistant parks as soon as it is idle and the owner
  // yields while it waits. Relaxed: a hint, set once before any task runs.
  std::atomic<bool> shared{false};
  // The fork generation it was created in (see current_fork_generation()).
  std::uint64_t generation = 0;

  static void main(assistant* a);
  static void park(assistant* a, std::uint64_t tail);
};

namespace {

// The CPU this thread runs on: its only allowed CPU when it is pinned, else
// where it is now.
int owner_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) == 1) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) return c;
    }
  }
  return sched_getcpu();
}

// /sys/devices/system/cpu/online, e.g. "0-3,8".
std::vector<int> online_cpus() {
  std::vector<int> cpus;
  std::FILE* f = std::fopen("/sys/devices/system/cpu/online", "r");
  if (f == nullptr) return cpus;
  char buf[256] = {};
  const bool ok = std::fgets(buf, sizeof buf, f) != nullptr;
  std::fclose(f);
  if (!ok) return cpus;
  const char* p = buf;
  while (*p >= '0' && *p <= '9') {
    char* end = nullptr;
    const long lo = std::strtol(p, &end, 10);
    long hi = lo;
    p = end;
    if (*p == '-') {
      hi = std::strtol(p + 1, &end, 10);
      p = end;
    }
    for (long c = lo; c <= hi && c < 4096; ++c) cpus.push_back(static_cast<int>(c));
    if (*p == ',') ++p;
  }
  return cpus;
}

int choose_cpu(const assistant_options& options) {
  if (!options.pin) return -1;
  const topology& topo = topology::system();
  if (options.cpu >= 0) {
    if (topo.find(options.cpu) == nullptr) {
      throw config_error("assistant_options::cpu=" + std::to_string(options.cpu) + ": cpu " +
                         std::to_string(options.cpu) + " is not available to this process");
    }
    return options.cpu;
  }
  const int own = owner_cpu();
  const std::vector<int> siblings = topo.smt_siblings(own);
  if (!siblings.empty()) return siblings.front();
  const cpu_info* me = topo.find(own);
  const std::vector<int> busy = detail::cpus_with_spinners();
  int best = -1;
  int best_distance = 0;
  bool best_free = false;
  for (const cpu_info& c : topo.cpus) {
    if (c.os_index == own) continue;
    const bool free = std::find(busy.begin(), busy.end(), c.os_index) == busy.end();
    const int distance = me ? std::abs(c.core - me->core) : 0;
    // Prefer CPUs without a worker, then the nearest core.
    if (best < 0 || (free && !best_free) || (free == best_free && distance < best_distance)) {
      best = c.os_index;
      best_distance = distance;
      best_free = free;
    }
  }
  if (best >= 0) return best;
  // The owner's affinity (which the topology follows when the owner pinned
  // itself before first use) may hide the other CPUs. Any online CPU will
  // do: the assistant thread sets its own affinity.
  for (int c : online_cpus()) {
    if (c == own) continue;
    const int distance = std::abs(c - own);
    if (best < 0 || distance < best_distance) {
      best = c;
      best_distance = distance;
    }
  }
  return best >= 0 ? best : own;  // a one-CPU machine: share it (see `shared`)
}

}  // namespace

assistant::assistant() : assistant(assistant_options{}) {}

assistant::assistant(const assistant_options& options)
    : capacity_(options.capacity), owner_token_(detail::thread_token()) {
  if (options.capacity < 2 || options.capacity > 65536 ||
      (options.capacity & (options.capacity - 1)) != 0) {
    throw config_error("assistant_options::capacity=" + std::to_string(options.capacity) +
                       " is not a power of two from 2 to 65536");
  }
  if (options.idle_park.count() < 0) {
    throw config_error("assistant_options::idle_park=" + std::to_string(options.idle_park.count()) +
                       "us is negative");
  }
  // Explicit, then MOTE_ADAPTIVE (a bad value is a config_error naming it), then on.
  const bool adaptive = options.adaptive ? *options.adaptive : detail::env_adaptive().value_or(true);
  mask_ = capacity_ - 1;
  const int cpu = choose_cpu(options);
  slots_ = new detail::assistant_slot[capacity_];
  state_ = new state;
  state_->generation = detail::current_fork_generation();
  generation_ = state_->generation;
  state_->cpu = cpu;
  state_->shared.store(cpu >= 0 && cpu == owner_cpu(), std::memory_order_relaxed);
  state_->idle_park_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(options.idle_park).count();
  // It spins when idle: count it, so that spinners everywhere know when the
  // machine is oversubscribed.
  detail::register_spinners({cpu});
  try {
    state_->thread = std::thread(&state::main, this);
  } catch (...) {
    detail::unregister_spinners({cpu});
    delete state_;
    delete[] slots_;
    throw;
  }
  if (adaptive) {
    // Re-probe within half the idle-park window, so that an assistant whose
    // owner runs everything in place is still awake when the next probe
    // comes (a probe to a parked assistant measures its wake-up).
    const std::int64_t park_us = options.idle_park.count();
    const std::uint64_t probe_us = park_us > 0 ? std::clamp<std::int64_t>(park_us / 2, 20, 500) : 500;
    model_ = new detail::offload_model(detail::offload_model::defaults(probe_us));
    if (trace::enabled()) {
      trace_ = detail::current_worker != nullptr ? detail::current_worker->trace() : detail::outside_trace_buffer();
    }
    try {
      measure_at_start();
    } catch (...) {
      // A wait() of an empty task does not throw; nothing else can.
    }
  }
}

void assistant::measure_at_start() {
  // A few empty probes, one at a time; the median of those that measured a
  // hand-off (the first one also meets a thread that may not run yet).
  std::uint64_t samples[9];
  int n = 0;
  for (int i = 0; i < 9; ++i) {
    probe_.at_start = true;
    if (!submit_timed(nullptr, [] {})) break;
    wait();
    if (probe_.start_sample != ~std::uint64_t{0}) samples[n++] = probe_.start_sample;
  }
  if (n == 0) return;  // the first real probes measure it
  for (int i = 1; i < n; ++i) {  // insertion sort: nine at most
    for (int j = i; j > 0 && samples[j - 1] > samples[j]; --j) std::swap(samples[j - 1], samples[j]);
  }
  // Slow as it may be (a shared core, a busy host): the median of the lot is
  // what a hand-off costs now, and the probes correct it.
  const std::uint64_t median = samples[n / 2];
  model_->set_handoff(median != 0 ? median : 1);
}

void assistant::finish_probe(bool waited) noexcept {
  const std::uint64_t seen = detail::cycle_clock();
  probe_.pending = false;
  // Written by the assistant before its release store of tail_pub_, which
  // wait() acquired.
  const std::uint64_t run = probe_ticks_;
  const std::uint64_t total = seen - probe_.submitted;
  const std::uint64_t handoff = total > run ? total - run : 0;
  // The hand-off is total - run only if the owner was already waiting when
  // the probe ended (else `seen` is late by the owner's own work), no entry
  // came after it, and none was ahead of it.
  const bool measured = waited && probe_.clean && probe_.index + 1 == head_;
  if (probe_.at_start) {
    probe_.at_start = false;
    probe_.start_sample = measured ? handoff : ~std::uint64_t{0};
    return;
  }
  detail::offload_model::entry& e = model_->find(probe_.key);
  model_->note_work(e, run);
  if (measured) {
    model_->note_handoff(e, handoff);
  } else {
    model_->no_handoff(e);
  }
}

void assistant::keep_owner_error() noexcept {
  if (!owner_failed_) {
    state_->owner_error = std::current_exception();
    owner_failed_ = true;
  }
}

void assistant::note_inlined(site* s) noexcept { trace_->put(detail::trace_kind::inlined, 0, s->name()); }

double assistant::handoff_ns() const noexcept {
  if (model_ == nullptr) return 0;
  return static_cast<double>(model_->handoff()) * 1000.0 / static_cast<double>(detail::ticks_per_us());
}

assistant::~assistant() {
  if (state_->generation != detail::current_fork_generation()) {
    // In a child process after fork(): the thread does not exist. A
    // std::thread that was never joined cannot be destroyed, so it is left
    // behind (a few words); the ring is freed.
    new std::thread(std::move(state_->thread));  // NOLINT: deliberately leaked
    delete model_;
    delete state_;
    delete[] slots_;
    return;
  }
  try {
    if (owner_token_ == detail::thread_token()) wait();
  } catch (...) {
    // Destructors do not throw; wait() first to see a task's exception.
  }
  // Every entry has run (or the owner is gone and nothing more arrives): stop,
  // wake it if parked, and join.
  state_->stop.store(true, std::memory_order_release);
  wake();
  state_->thread.join();
  detail::unregister_spinners({state_->cpu});
  delete model_;  // adds its sites' counts to their totals
  delete state_;
  delete[] slots_;
}

bool assistant::refresh_tail() noexcept {
  // Acquire: pairs with the assistant's release store of tail_pub_ after an
  // entry ran, so its closure is destroyed before we overwrite the slot.
  tail_cache_ = tail_pub_.load(std::memory_order_acquire);
  return head_ - tail_cache_ < capacity_;
}

void assistant::wake() noexcept {
  static_assert(kAwake == detail::waiter_slot::kAwake && kParking == detail::waiter_slot::kAnnounced);
  // Wakes the assistant if it sleeps, cancels its announcement if it is
  // parking: either way it looks at the ring again.
  detail::waiter_slot::notify_always(park_state_);
}

void assistant::wake_up_hint() noexcept {
  sleep_requested_.store(0, std::memory_order_relaxed);
  if (park_state_.load(std::memory_order_relaxed) != kAwake) wake();
}

void assistant::sleep_hint() noexcept { sleep_requested_.store(1, std::memory_order_relaxed); }

void assistant::wait_ring() {
  if (MOTE_UNLIKELY(state_->generation != detail::current_fork_generation())) {
    throw usage_error(
        "mote::assistant::wait: this assistant was created before fork(); its thread does not "
        "exist in the child process. Create a new assistant in the child");
  }
  bool waited = false;  // the entries were not all done when we came
  bool slept = false;
  if (tail_pub_.load(std::memory_order_acquire) != head_) {
    waited = true;
    // Spin (the tasks are meant to be tiny), looking at every pause.
    // publish() looked at park_state_ with a relaxed load, which can miss an
    // assistant that is just parking and has not seen the last entry (each
    // side's store can still sit in its store buffer while the other loads).
    // So every 64 looks close that race: a seq_cst read-modify-write of
    // head_pub_ and a seq_cst look at park_state_, the event count's
    // notifier half for a seq_cst publication (wait/event_count.hpp), against
    // state::park()'s announcement and look at head_pub_: either the
    // assistant sees the entry and stays awake, or we see it parking and
    // wake it. The fast path, an awake assistant, pays for no fence. After
    // the idle_park window, sleep (park_owner).
    const bool shared = state_->shared.load(std::memory_order_relaxed);
    detail::idle_wait idle(state_->idle_park_ns > 0 ? state_->idle_park_ns : detail::idle_wait::kNeverPark, 1);
    unsigned looks = 0;
    while (tail_pub_.load(std::memory_order_acquire) != head_) {
      if (shared || (++looks & 63) == 0) {
        head_pub_.fetch_add(0, std::memory_order_seq_cst);
        if (detail::waiter_slot::state_seq_cst(park_state_) != kAwake) wake();
      }
      if (shared) {
        detail::thread_yield();  // one CPU for both: hand it over
        continue;
      }
      if (idle.spin()) continue;
      slept = true;
      park_owner(idle.next_park_timeout());
    }
  }
  tail_cache_ = head_;
  if (probe_.pending) finish_probe(waited && !slept);
  if (MOTE_UNLIKELY(owner_failed_)) {
    // A task run here failed: its exception is the one delivered (one run
    // there, if any, is dropped).
    std::exception_ptr e = std::move(state_->owner_error);
    state_->owner_error = nullptr;
    owner_failed_ = false;
    if (has_error_.load(std::memory_order_acquire) != 0) {
      state_->error = nullptr;
      has_error_.store(0, std::memory_order_relaxed);
    }
    std::rethrow_exception(e);
  }
  // Acquire: pairs with the release store in state::main() after it kept the
  // exception.
  if (MOTE_UNLIKELY(has_error_.load(std::memory_order_acquire) != 0)) {
    std::exception_ptr e = std::move(state_->error);
    state_->error = nullptr;
    has_error_.store(0, std::memory_order_relaxed);
    std::rethrow_exception(e);
  }
}

void assistant::park_owner(std::int64_t timeout_ns) noexcept {
  // The event count's waiter_slot: announce, then look. The assistant, the
  // notifier, stores tail_pub_ and then reads owner_parked_ after every
  // task, relaxed, without the notifier's fence, so its read may miss this
  // announcement when both stores sit in store buffers at once: the timeout
  // bounds what that costs. Make sure the assistant is awake first, as in
  // wait().
  detail::waiter_slot::prepare(owner_parked_, nullptr);
  head_pub_.fetch_add(0, std::memory_order_seq_cst);
  if (detail::waiter_slot::state_seq_cst(park_state_) != kAwake) wake();
  // Acquire: pairs with the assistant's release store of tail_pub_.
  if (tail_pub_.load(std::memory_order_acquire) != head_) detail::waiter_slot::commit_for(owner_parked_, timeout_ns);
  detail::waiter_slot::retire(owner_parked_, nullptr);
}

int assistant::cpu() const noexcept { return state_->cpu; }
std::uint32_t assistant::capacity() const noexcept { return capacity_; }
bool assistant::is_owner() const noexcept { return owner_token_ == detail::thread_token(); }

void assistant::not_owner(const char* what) const {
  throw usage_error(std::string("mote::assistant::") + what +
                         ": called from a thread other than the assistant's owner");
}

void assistant::state::park(assistant* a, std::uint64_t tail) {
  // The event count's waiter_slot (wait/event_count.hpp): announce, then look
  // at head_pub_ and stop, against wait()'s read-modify-write of head_pub_
  // and look at park_state_ (and publish()'s relaxed look, which catches the
  // common case). Sleeps until wake() moves the word back to kAwake.
  detail::waiter_slot::prepare(a->park_state_, nullptr);
  // Relaxed: the fence in prepare() orders it; the entries themselves are
  // read through their slots' `ready`.
  if (a->head_pub_.load(std::memory_order_relaxed) == tail && !a->state_->stop.load(std::memory_order_acquire)) {
    detail::waiter_slot::commit(a->park_state_);
  }
  detail::waiter_slot::retire(a->park_state_, nullptr);
}

void assistant::state::main(assistant* a) {
  detail::assistant_thread = true;
  state* s = a->state_;
  if (s->cpu >= 0 && !pin_current_thread(s->cpu)) s->shared.store(true, std::memory_order_relaxed);
  const std::uint64_t mask = a->mask_;
  detail::assistant_slot* const slots = a->slots_;
  std::uint64_t tail = 0;
  // Idle: look at the next entry every pause; park after idle_park (never,
  // when it is 0: then only after sleep_hint()).
  detail::idle_wait idle(s->idle_park_ns > 0 ? s->idle_park_ns : detail::idle_wait::kNeverPark, 1);
  for (;;) {
    detail::assistant_slot* slot = &slots[tail & mask];
    // Acquire: pairs with publish()'s release store; the entry is complete.
    if (slot->ready.load(std::memory_order_acquire) != tail + 1) {
      if (s->stop.load(std::memory_order_acquire)) {
        // The owner stops us only after its last wait(): nothing is left.
        break;
      }
      if (a->sleep_requested_.load(std::memory_order_relaxed) != 0 ||
          s->shared.load(std::memory_order_relaxed) || !idle.spin()) {
        park(a, tail);
        idle.reset();
      }
      continue;
    }
    try {
      slot->run(slot->closure);
    } catch (...) {
      if (a->has_error_.load(std::memory_order_relaxed) == 0) {
        s->error = std::current_exception();
        // Release: publishes s->error to wait()'s acquire load.
        a->has_error_.store(1, std::memory_order_release);
      }
    }
    ++tail;
    // Release: the entry has run and its closure is destroyed; the owner may
    // reuse the slot (refresh_tail) and sees the task's effects (wait).
    a->tail_pub_.store(tail, std::memory_order_release);
    // An owner asleep in wait(): wake it. Relaxed, no fence: this read may
    // miss an owner that is just going to sleep (see park_owner), whose
    // timeout then covers it; the usual case, an owner that is not asleep,
    // costs a read of a line that stays in this core's cache.
    const std::uint32_t owner = a->owner_parked_.load(std::memory_order_relaxed);
    if (MOTE_UNLIKELY(owner != detail::waiter_slot::kAwake)) detail::waiter_slot::cancel_or_wake(a->owner_parked_, owner);
    idle.reset();
  }
}

namespace detail {
namespace {

// The worker slot that holds a worker's assistant (runtime_options::assistants).
constexpr unsigned kAssistantSlot = 1;

// Made on the worker's thread: an assistant pins itself near its owner's CPU
// and belongs to the thread that made it.
void start_worker_assistant(worker& w) noexcept {
  const resolved_config& config = w.runtime().config();
  if (!config.assistants) return;
  try {
    assistant_options options;
    options.adaptive = config.assistants_adaptive;
    w.set_slot(kAssistantSlot, new assistant(options));
  } catch (const std::exception& e) {
    // Without an assistant this worker still runs its tasks; a task asking
    // this_worker_assistant() gets nullptr and splits nothing. Say so once
    // per worker rather than fail silently.
    std::fprintf(stderr, "mote: worker %u runs without an assistant: %s\n", w.index(), e.what());
  }
}

void stop_worker_assistant(worker& w) noexcept {
  auto* a = static_cast<assistant*>(w.slot(kAssistantSlot));
  w.set_slot(kAssistantSlot, nullptr);
  delete a;
}

}  // namespace

// No free_worker: the slot is empty once the thread has ended (in a child
// process after fork(), where the thread never ends, the assistant is left
// behind with it).
extern const model_hooks assistant_model;
const model_hooks assistant_model = {
    .name = "assistant",
    .slot = kAssistantSlot,
    .make_runtime = nullptr,
    .free_runtime = nullptr,
    .make_worker = nullptr,
    .free_worker = nullptr,
    .thread_begin = start_worker_assistant,
    .thread_end = stop_worker_assistant,
    .help = nullptr,
    .visible = nullptr,
};

}  // namespace detail

assistant* this_worker_assistant() noexcept {
  detail::worker* w = detail::current_worker;
  return w ? static_cast<assistant*>(w->slot(detail::kAssistantSlot)) : nullptr;
}

}  // namespace mote
