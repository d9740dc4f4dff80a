#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

#include "mote/assistant.hpp"
#include "mote/runtime.hpp"
#include "mote/topology.hpp"
#include "runtime/runtime_impl.hpp"
#include "runtime/trace_impl.hpp"

namespace mote {
namespace detail {

namespace {
std::mutex worker_cpu_mutex;
std::vector<int> worker_cpu_registry;  // every live runtime's pinned CPUs

void register_worker_cpus(const std::vector<int>& cpus) {
  std::lock_guard<std::mutex> lock(worker_cpu_mutex);
  for (int c : cpus) {
    if (c >= 0) worker_cpu_registry.push_back(c);
  }
}

void unregister_worker_cpus(const std::vector<int>& cpus) {
  std::lock_guard<std::mutex> lock(worker_cpu_mutex);
  for (int c : cpus) {
    auto it = std::find(worker_cpu_registry.begin(), worker_cpu_registry.end(), c);
    if (it != worker_cpu_registry.end()) worker_cpu_registry.erase(it);
  }
}
}  // namespace

std::vector<int> cpus_with_workers() {
  std::lock_guard<std::mutex> lock(worker_cpu_mutex);
  return worker_cpu_registry;
}

// ---- fork() ------------------------------------------------------------------
// A child process has only the thread that called fork(): the workers of every
// runtime are gone. The child handler bumps the fork generation, which marks
// every runtime created before as orphaned (runtime_impl::orphaned()); an
// orphaned runtime refuses work with std::logic_error and is destroyed without
// joining threads that do not exist; the default runtime is replaced on first
// use. The locks that the child may take are held across fork() by the
// prepare handler, so the child never inherits one locked by a thread it
// does not have.

namespace {
std::atomic<std::uint64_t> fork_generation{0};
std::mutex default_runtime_mutex;

void before_fork() noexcept {
  default_runtime_mutex.lock();
  worker_cpu_mutex.lock();
}
void after_fork_in_parent() noexcept {
  worker_cpu_mutex.unlock();
  default_runtime_mutex.unlock();
}
void after_fork_in_child() noexcept {
  worker_cpu_mutex.unlock();
  default_runtime_mutex.unlock();
  // Relaxed: the child has one thread.
  fork_generation.fetch_add(1, std::memory_order_relaxed);
  // A fork() from inside a task leaves this thread looking like a worker of a
  // runtime that has no workers here; make it an outside thread instead.
  current_worker = nullptr;
  trace_after_fork_in_child();
}

void install_fork_handlers() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child); });
}
}  // namespace

std::uint64_t current_fork_generation() {
  install_fork_handlers();
  return fork_generation.load(std::memory_order_relaxed);
}

bool runtime_impl::orphaned() const noexcept {
  return generation_ != fork_generation.load(std::memory_order_relaxed);
}

void runtime_impl::check_not_orphaned() const {
  if (MOTE_UNLIKELY(orphaned())) {
    throw std::logic_error(
        "mote: this runtime was created before fork(); its workers do not exist in the child "
        "process. Create a new runtime in the child (the default runtime is replaced on its own)");
  }
}

runtime_impl::runtime_impl(const resolved_config& config, runtime* facade)
    : config_(config),
      facade_(facade),
      spin_ns_(config.spin.count()),
      generation_(fork_generation.load(std::memory_order_relaxed)) {
  install_fork_handlers();
  trace_check_config();
  const unsigned n = config_.num_workers;
  const std::uint32_t instrument =
      (config_.stats ? kInstrumentStats : 0) | (trace_on() ? kInstrumentTrace : 0);
  const int id = instrument & kInstrumentTrace ? trace_next_runtime_id() : 0;
  workers_.reserve(n);
  for (unsigned i = 0; i < n; ++i) {
    workers_.push_back(std::make_unique<worker>(*this, i, config_.deque_capacity));
    worker& w = *workers_.back();
    w.instrument_ = instrument;
    if (instrument & kInstrumentTrace) {
      const std::string label =
          (id == 0 ? std::string() : "rt" + std::to_string(id) + " ") + "worker " + std::to_string(i);
      w.trace_ = trace_new_buffer(label);
    }
  }
  threads_.reserve(n);
  register_worker_cpus(config_.worker_cpus);
  try {
    for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this, i] { worker_main(i); });
  } catch (...) {
    stop_.store(true, std::memory_order_seq_cst);
    wake_all();
    for (auto& t : threads_) t.join();
    unregister_worker_cpus(config_.worker_cpus);
    throw;
  }
}

runtime_impl::~runtime_impl() {
  if (orphaned()) {
    // In a child process after fork(): the threads do not exist, so there is
    // nothing to stop or join. std::thread objects that were never joined
    // cannot be destroyed, so they are left behind (a few words each).
    new std::vector<std::thread>(std::move(threads_));  // NOLINT: deliberately leaked
    return;
  }
  stop_.store(true, std::memory_order_seq_cst);
  // Wake every parked worker: each sees stop_ after its futex returns.
  wake_all();
  for (auto& t : threads_) t.join();
  unregister_worker_cpus(config_.worker_cpus);
  if (config_.stats) print_stats();
}

void runtime_impl::print_stats() const {
  // busy = the worker's lifetime minus its idle time (looking for work,
  // spinning, or parked); tasks and spawns count join and task_group work.
  std::fprintf(stderr, "mote: runtime with %u workers (MOTE_STATS)\n", num_workers());
  std::fprintf(stderr, "%6s %12s %12s %10s %14s %8s %11s %11s %8s %9s %11s %9s\n", "worker",
               "tasks", "spawns", "steals", "failed_steals", "parks", "busy_ms", "idle_ms", "shares",
               "shrinks", "stolen_pops", "injected");
  worker_stats total;
  for (const auto& w : workers_) {
    const worker_stats& s = w->stats_;
    const std::int64_t life = s.ended_ns - s.started_ns;
    const double busy_ms = static_cast<double>(life - s.idle_ns) / 1e6;
    const double idle_ms = static_cast<double>(s.idle_ns) / 1e6;
    std::fprintf(stderr, "%6u %12llu %12llu %10llu %14llu %8llu %11.3f %11.3f %8llu %9llu %11llu %9llu\n",
                 w->index(), static_cast<unsigned long long>(s.tasks),
                 static_cast<unsigned long long>(s.spawns), static_cast<unsigned long long>(s.steals),
                 static_cast<unsigned long long>(s.failed_steals),
                 static_cast<unsigned long long>(s.parks), busy_ms, idle_ms,
                 static_cast<unsigned long long>(s.shares), static_cast<unsigned long long>(s.shrinks),
                 static_cast<unsigned long long>(s.stolen_pops),
                 static_cast<unsigned long long>(s.injected));
    total.tasks += s.tasks;
    total.spawns += s.spawns;
    total.steals += s.steals;
    total.failed_steals += s.failed_steals;
    total.parks += s.parks;
  }
  std::fprintf(stderr, "%6s %12llu %12llu %10llu %14llu %8llu\n", "all",
               static_cast<unsigned long long>(total.tasks), static_cast<unsigned long long>(total.spawns),
               static_cast<unsigned long long>(total.steals),
               static_cast<unsigned long long>(total.failed_steals),
               static_cast<unsigned long long>(total.parks));
}

void runtime_impl::submit(task* t) {
  check_not_orphaned();
  {
    std::lock_guard<std::mutex> lock(inject_mutex_);
    inject_.push_back(t);
    // seq_cst store, after the push and inside the lock: pairs with the
    // seq_cst increment in park() like grow_shared()'s CAS does.
    inject_count_.store(inject_.size(), std::memory_order_seq_cst);
  }
  notify_one();
}

task* runtime_impl::take_injected() noexcept {
  std::lock_guard<std::mutex> lock(inject_mutex_);
  if (inject_.empty()) return nullptr;
  task* t = inject_.front();
  inject_.pop_front();
  inject_count_.store(inject_.size(), std::memory_order_relaxed);
  return t;
}

task* runtime_impl::find_work(worker& self) noexcept {
  // Relaxed: a stale zero only delays the pick-up to the next look; the mutex
  // in take_injected() orders the task's contents.
  if (inject_count_.load(std::memory_order_relaxed) != 0) {
    if (task* t = take_injected()) {
      ++self.stats_.injected;
      return t;
    }
  }
  const auto n = static_cast<unsigned>(workers_.size());
  if (n < 2) return nullptr;
  const unsigned start = static_cast<unsigned>(self.next_random() % n);
  for (unsigned k = 0; k < n; ++k) {
    const unsigned v = (start + k) % n;
    if (v == self.index()) continue;
    if (task* t = self.steal_from(*workers_[v])) return t;
  }
  return nullptr;
}

bool runtime_impl::work_visible(worker& self) noexcept {
  if (inject_count_.load(std::memory_order_seq_cst) != 0) return true;
  bool found = false;
  for (auto& w : workers_) {
    if (w.get() != &self && self.has_shared_work(*w)) found = true;  // visit all: ask each to share
  }
  return found;
}

void runtime_impl::park(worker& self) noexcept {
  // Announce (seq_cst stores), then look for work and for stop_ (seq_cst
  // loads): the Dekker pair of wake_one()'s and the destructor's, which
  // publish first and look at the announcement second. Either we see the
  // work (or stop_) below, or they see parked_ == 1 and wake us.
  self.parked_.store(1, std::memory_order_seq_cst);
  idle_sleepers_.fetch_add(1, std::memory_order_seq_cst);
  if (!stop_.load(std::memory_order_seq_cst) && !work_visible(self)) {
    ++self.stats_.parks;
    // Idle time is counted by worker_main around the whole idle stretch.
    if (MOTE_UNLIKELY(self.trace_ != nullptr)) self.trace_->put(trace_kind::park_begin);
    // Acquire: pairs with the waker's exchange; nothing else is published
    // through parked_, the work itself is found by the next look.
    while (self.parked_.load(std::memory_order_acquire) == 1) futex_wait(&self.parked_, 1);
    if (MOTE_UNLIKELY(self.trace_ != nullptr)) self.trace_->put(trace_kind::park_end);
  }
  self.parked_.store(0, std::memory_order_relaxed);
  idle_sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

void runtime_impl::wake_one() noexcept {
  // Which sleeper: for a thread outside the runtime (runtime::run, a foreign
  // spawn), the one pinned to the CPU the caller runs on, if it sleeps. Such
  // a caller usually blocks right after handing in work, and handing its CPU
  // to a thread there is a local wake-up, while waking a halted CPU takes an
  // inter-processor interrupt: on the virtual machine of the benchmark report
  // that is the difference between a median of about 10 us and 1-8 us from
  // submit to start. A caller that keeps running hands in more work, and the
  // next notification wakes the next sleeper. From a worker: the ones after
  // it, round the ring. Falls back to any sleeper.
  worker* const me = current_worker;
  const bool outside = me == nullptr || me->runtime_ != this;
  const int here = outside && !config_.worker_cpus.empty() ? sched_getcpu() : -1;
  const auto n = static_cast<unsigned>(workers_.size());
  const unsigned start = outside ? 0 : me->index_ + 1;
  for (int pass = here >= 0 ? 0 : 1; pass < 2; ++pass) {
    for (unsigned k = 0; k < n; ++k) {
      const unsigned i = (start + k) % n;
      if (pass == 0 && config_.worker_cpus[i] != here) continue;
      worker& w = *workers_[i];
      // Look before the exchange, so that awake workers' lines stay put.
      // seq_cst exchange: the Dekker pair of park()'s announcement (see there).
      if (w.parked_.load(std::memory_order_seq_cst) == 1 &&
          w.parked_.exchange(0, std::memory_order_seq_cst) == 1) {
        futex_wake(&w.parked_, 1);
        return;
      }
    }
  }
}

void runtime_impl::wake_all() noexcept {
  for (auto& w : workers_) {
    // seq_cst: after the caller's seq_cst store of stop_ (see park()).
    if (w->parked_.exchange(0, std::memory_order_seq_cst) == 1) futex_wake(&w->parked_, 1);
  }
}

void runtime_impl::worker_main(unsigned index) {
  worker& self = *workers_[index];
  const int cpu = config_.worker_cpus.empty() ? -1 : config_.worker_cpus[index];
  if (cpu >= 0) pin_current_thread(cpu);
  current_worker = &self;
  std::unique_ptr<assistant> helper;
  if (config_.assistants) {
    try {
      helper = std::make_unique<assistant>();
      self.assistant_ = helper.get();
    } catch (const std::exception& e) {
      // Without an assistant this worker still runs its tasks; a task asking
      // this_worker_assistant() gets nullptr and splits nothing. Say so once
      // per worker rather than fail silently.
      std::fprintf(stderr, "mote: worker %u runs without an assistant: %s\n", index, e.what());
    }
  }

  const bool timed = self.instrument_ != 0;
  if (timed) self.stats_.started_ns = now_ns();
  for (;;) {
    if (task* t = find_work(self)) {
      self.run_foreign(t);
      continue;
    }
    if (stop_.load(std::memory_order_acquire)) break;
    const std::int64_t idle_from = timed ? now_ns() : 0;
    // Spin for the window, looking for work between short pauses; then park.
    // The occasional yield keeps an oversubscribed machine moving.
    // Probes come every few pauses (a few hundred nanoseconds at most): a
    // task shared for a thief lasts only until its owner's next pop, which
    // for sub-microsecond tasks is soon. Reading victims' words that do not
    // change costs no coherence traffic. The clock is read every 16 probes.
    const std::int64_t start = now_ns();
    std::int64_t now = start;
    std::int64_t last_yield = start;
    task* found = nullptr;
    for (unsigned round = 1; found == nullptr && now - start < spin_ns_; ++round) {
      for (int i = 0; i < 4; ++i) cpu_pause();
      found = find_work(self);
      if ((round & 15) == 0) {
        if (stop_.load(std::memory_order_relaxed)) break;
        now = now_ns();
        if (now - last_yield > 20'000) {
          thread_yield();
          last_yield = now;
        }
      }
    }
    if (found == nullptr && !stop_.load(std::memory_order_acquire)) park(self);
    if (timed) self.stats_.idle_ns += now_ns() - idle_from;
    if (found != nullptr) self.run_foreign(found);
    // After a park or a stop: look again (drain, then leave above).
  }
  if (timed) self.stats_.ended_ns = now_ns();
  self.assistant_ = nullptr;
  helper.reset();
  current_worker = nullptr;
}

void submit_and_wait(runtime_impl& rt, external_task& t) {
  rt.submit(&t);
  trace_buffer* trace = outside_trace_buffer();
  if (MOTE_UNLIKELY(trace != nullptr)) trace->put(trace_kind::wait_begin, 2);
  // Acquire: pairs with complete_external()'s release store; the result and
  // error written by the task are visible after this loop.
  while (t.finished.load(std::memory_order_acquire) == 0) futex_wait(&t.finished, 0);
  if (MOTE_UNLIKELY(trace != nullptr)) trace->put(trace_kind::wait_end);
}

void complete_external(external_task& t) noexcept {
  t.finished.store(1, std::memory_order_release);
  // Address only: the waiter may already have returned (see task::finish).
  futex_wake(&t.finished, 1);
}

runtime_impl* runtime_of(const worker* w) noexcept { return w ? &w->runtime() : nullptr; }

}  // namespace detail

runtime::runtime() : runtime(runtime_options{}) {}

runtime::runtime(const runtime_options& options)
    : impl_(new detail::runtime_impl(detail::resolve_config(options, topology::system()), this)) {}

runtime::~runtime() { delete impl_; }

unsigned runtime::num_workers() const noexcept { return impl_->num_workers(); }

std::vector<int> runtime::worker_cpus() const { return impl_->config().worker_cpus; }

std::chrono::microseconds runtime::spin() const noexcept {
  return std::chrono::duration_cast<std::chrono::microseconds>(impl_->config().spin);
}

runtime& runtime::default_runtime() {
  // Created on first use; a config_error from the environment propagates to
  // the caller, and the next call tries again.
  static runtime instance;
  if (MOTE_LIKELY(!instance.impl_->orphaned())) return instance;
  // In a child process after fork(): a fresh runtime replaces the orphaned
  // one (and any earlier replacement orphaned by a later fork, which is left
  // behind: its threads do not exist here either).
  static std::unique_ptr<runtime> replacement;
  std::lock_guard<std::mutex> lock(detail::default_runtime_mutex);
  if (replacement == nullptr || replacement->impl_->orphaned()) {
    if (replacement != nullptr) (void)replacement.release();  // NOLINT: deliberately leaked
    replacement = std::make_unique<runtime>();
  }
  return *replacement;
}

runtime* runtime::current() noexcept {
  detail::worker* w = detail::current_worker;
  return w ? w->runtime().facade() : nullptr;
}

int runtime::current_worker_index() noexcept {
  detail::worker* w = detail::current_worker;
  return w ? static_cast<int>(w->index()) : -1;
}

}  // namespace mote
