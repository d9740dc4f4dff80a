#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "mote/runtime.hpp"
#include "mote/topology.hpp"
#include "runtime/runtime_impl.hpp"

namespace mote {
namespace detail {

runtime_impl::runtime_impl(const resolved_config& config, runtime* facade)
    : config_(config), facade_(facade), spin_ns_(config.spin.count()) {
  const unsigned n = config_.num_workers;
  workers_.reserve(n);
  for (unsigned i = 0; i < n; ++i) {
    workers_.push_back(std::make_unique<worker>(*this, i, config_.deque_capacity));
  }
  threads_.reserve(n);
  try {
    for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this, i] { worker_main(i); });
  } catch (...) {
    stop_.store(true, std::memory_order_seq_cst);
    idle_epoch_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(&idle_epoch_, -1);
    for (auto& t : threads_) t.join();
    throw;
  }
}

runtime_impl::~runtime_impl() {
  stop_.store(true, std::memory_order_seq_cst);
  // Wake every parked worker: each sees stop_ after its futex returns.
  idle_epoch_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&idle_epoch_, -1);
  for (auto& t : threads_) t.join();
  if (const char* v = std::getenv("MOTE_STATS"); v != nullptr && v[0] == '1') print_stats();
}

void runtime_impl::print_stats() const {
  std::fprintf(stderr, "mote: %u workers\n", num_workers());
  std::fprintf(stderr, "%6s %12s %14s %10s %10s %12s %8s %9s\n", "worker", "steals", "failed_steals",
               "shares", "shrinks", "stolen_pops", "parks", "injected");
  for (const auto& w : workers_) {
    const worker_stats& s = w->stats_;
    std::fprintf(stderr, "%6u %12llu %14llu %10llu %10llu %12llu %8llu %9llu\n", w->index(),
                 static_cast<unsigned long long>(s.steals),
                 static_cast<unsigned long long>(s.failed_steals),
                 static_cast<unsigned long long>(s.shares), static_cast<unsigned long long>(s.shrinks),
                 static_cast<unsigned long long>(s.stolen_pops),
                 static_cast<unsigned long long>(s.parks), static_cast<unsigned long long>(s.injected));
  }
}

void runtime_impl::submit(task* t) {
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
  // seq_cst increment, then a seq_cst look for work: see notify_one().
  idle_sleepers_.fetch_add(1, std::memory_order_seq_cst);
  const std::uint32_t epoch = idle_epoch_.load(std::memory_order_seq_cst);
  if (!stop_.load(std::memory_order_seq_cst) && !work_visible(self)) {
    ++self.stats_.parks;
    futex_wait(&idle_epoch_, epoch);
  }
  idle_sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

void runtime_impl::worker_main(unsigned index) {
  worker& self = *workers_[index];
  const int cpu = config_.worker_cpus.empty() ? -1 : config_.worker_cpus[index];
  if (cpu >= 0) pin_current_thread(cpu);
  current_worker = &self;

  for (;;) {
    if (task* t = find_work(self)) {
      self.run_foreign(t);
      continue;
    }
    if (stop_.load(std::memory_order_acquire)) break;
    // Spin for the window, looking for work between short pauses; then park.
    // The occasional yield keeps an oversubscribed machine moving.
    const std::int64_t deadline = now_ns() + spin_ns_;
    task* found = nullptr;
    for (unsigned round = 1; found == nullptr && now_ns() < deadline; ++round) {
      for (int i = 0; i < 64; ++i) cpu_pause();
      if ((round & 15) == 0) thread_yield();
      found = find_work(self);
      if (stop_.load(std::memory_order_relaxed)) break;
    }
    if (found != nullptr) {
      self.run_foreign(found);
      continue;
    }
    if (stop_.load(std::memory_order_acquire)) continue;  // drain, then leave above
    park(self);
  }
  current_worker = nullptr;
}

void submit_and_wait(runtime_impl& rt, external_task& t) {
  rt.submit(&t);
  // Acquire: pairs with complete_external()'s release store; the result and
  // error written by the task are visible after this loop.
  while (t.finished.load(std::memory_order_acquire) == 0) futex_wait(&t.finished, 0);
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
  return instance;
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
