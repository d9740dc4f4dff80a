// A runtime's creation and destruction, and the public facade.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>

#include "mote/runtime.hpp"
#include "mote/topology.hpp"
#include "wait/idle.hpp"
#include "core/runtime_impl.hpp"
#include "trace/trace_impl.hpp"

namespace mote {
namespace detail {

runtime_impl::runtime_impl(const resolved_config& config, runtime* facade)
    : config_(config),
      facade_(facade),
      spin_ns_(config.spin.count()),
      generation_(current_fork_generation()) {
  trace_check_config();
  const unsigned n = config_.num_workers;
  const std::uint32_t instrument =
      (config_.stats ? kInstrumentStats : 0) | (trace_on() ? kInstrumentTrace : 0);
  const std::uint32_t join_bits = instrument | (config_.adaptive ? kJoinAdaptive : 0);
  const int id = instrument & kInstrumentTrace ? trace_next_runtime_id() : 0;
  policy_ = make_scheduler(*this, config_);
  const bool delegating = policy_->takes_spawns();
  workers_.reserve(n);
  for (unsigned i = 0; i < n; ++i) {
    trace_buffer* trace = nullptr;
    if (instrument & kInstrumentTrace) {
      const std::string label =
          (id == 0 ? std::string() : "rt" + std::to_string(id) + " ") + "worker " + std::to_string(i);
      trace = trace_new_buffer(label);
    }
    workers_.push_back(std::make_unique<worker>(*this, i, config_.deque_capacity, join_bits, trace));
    // Before the thread starts (its creation publishes it): task_group's
    // spawns on this worker go through schedule().
    workers_.back()->set_delegating(delegating);
  }
  // The models' states and slots, before the threads start: their creation
  // publishes them to every worker.
  models_.make(*this, workers_);
  threads_.reserve(n);
  register_spinners(spinner_cpus());
  try {
    // With a caller seat, worker 0's thread is whoever enters the seat.
    for (unsigned i = first_thread(); i < n; ++i) {
      threads_.emplace_back(config_.stack_size, [this, i] { worker_main(i); });
    }
  } catch (...) {
    stop_.store(true, std::memory_order_seq_cst);
    wake_all();
    for (auto& t : threads_) t.join();
    unregister_spinners(spinner_cpus());
    throw;
  }
}

runtime_impl::~runtime_impl() {
  if (orphaned()) {
    // In a child process after fork(): the threads do not exist, so there is
    // nothing to stop or join (and the child forgot them as spinners).
    threads_.clear();  // os_thread leaves a thread it never joined alone
    return;
  }
  if (current_worker != nullptr && &current_worker->runtime() == this) {
    // A worker cannot join itself; a destructor cannot throw. Say what
    // happened rather than let std::thread end the process unexplained.
    std::fprintf(stderr,
                 "mote: a runtime was destroyed from a task running on one of its own workers; "
                 "destroy it from a thread outside it\n");
    std::abort();
  }
  if (seat_taken_.load(std::memory_order_acquire)) {
    std::fprintf(stderr, "mote: a runtime was destroyed while a thread sat in its caller seat (worker 0)\n");
    std::abort();
  }
  stop_.store(true, std::memory_order_seq_cst);
  // Wake every parked worker: each sees stop_ after its futex returns.
  wake_all();
  for (auto& t : threads_) t.join();
  unregister_spinners(spinner_cpus());
  if (config_.stats) print_stats();
}

std::vector<int> runtime_impl::spinner_cpus() const {
  // The CPUs of the threads this runtime starts (a caller seat's thread is
  // the caller's, not a spinner of this runtime).
  std::vector<int> cpus = config_.worker_cpus;
  cpus.resize(workers_.size(), -1);
  if (first_thread() != 0 && !cpus.empty()) cpus.erase(cpus.begin());
  return cpus;
}

bool runtime_impl::place_workers(const std::vector<int>& cpus) {
  if (config_.bind_chosen || cpus.empty()) return false;
  std::lock_guard<std::mutex> lock(placement_mutex_);
  const std::vector<int> before = spinner_cpus();
  bool all = true;
  for (unsigned i = first_thread(), k = 0; i < workers_.size(); ++i, ++k) {
    const int cpu = cpus[k % cpus.size()];
    cpu_set_t set;
    CPU_ZERO(&set);
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      all = false;
      break;
    }
    CPU_SET(cpu, &set);
    // A thread that has not reached its own pinning yet reads the new CPU
    // under the mutex when it does.
    if (pthread_setaffinity_np(threads_[i - first_thread()].native(), sizeof set, &set) != 0) {
      all = false;
      break;
    }
    config_.worker_cpus[i] = cpu;
  }
  // The seat's CPU stays the occupant's only while no worker is placed there
  // (written only then: the occupant reads it, keep_seat_apart).
  if (config_.seat_cpu >= 0 && std::find(config_.worker_cpus.begin() + first_thread(), config_.worker_cpus.end(),
                                         config_.seat_cpu) != config_.worker_cpus.end()) {
    config_.seat_cpu = -1;
  }
  unregister_spinners(before);
  register_spinners(spinner_cpus());
  return all;
}

worker* runtime_impl::enter_seat() {
  if (!config_.caller_seat) throw std::logic_error("mote: this runtime has no caller seat");
  worker* const previous = current_worker;
  if (previous == workers_[0].get()) {
    throw std::logic_error("mote: the caller seat was entered twice by one thread");
  }
  // One thread at a time: a second one sleeps on the mutex until the first
  // leaves. The mutex's acquire orders what the previous occupant left in
  // worker 0 (its deques are empty: leave_seat's precondition) before this
  // thread uses it.
  seat_mutex_.lock();
  seat_taken_.store(true, std::memory_order_relaxed);
  current_worker = workers_[0].get();
  keep_seat_apart();
  return previous;
}

void runtime_impl::keep_seat_apart() noexcept {
  // The occupant is not pinned, and the kernel may put it on a CPU a worker
  // is pinned to (a woken thread often goes where the thread that woke it
  // runs): the two then share that CPU while the one the binding left to
  // the seat idles, and the kernel can move only the occupant, which it did
  // after tens of milliseconds (an OpenMP program of short regions, fib with
  // a cut-off, ran 0.42 ms a region on 2 threads then, 0.18 when apart; 0.31
  // on one thread). A thread found on a worker's CPU is moved to the seat's
  // for the rest of its stay. One look at the CPU (a few ns) otherwise.
  // Moved already: pinned there, nothing can displace it.
  if (config_.seat_cpu < 0 || seat_moved_) return;
  const int here = sched_getcpu();
  if (here < 0 || here == config_.seat_cpu ||
      std::find(config_.worker_cpus.begin() + 1, config_.worker_cpus.end(), here) == config_.worker_cpus.end()) {
    return;
  }
  cpu_set_t seat;
  CPU_ZERO(&seat);
  CPU_SET(config_.seat_cpu, &seat);
  // Refused (a cpuset without that CPU): the thread stays where it is.
  seat_moved_ = sched_getaffinity(0, sizeof seat_affinity_, &seat_affinity_) == 0 &&
                sched_setaffinity(0, sizeof seat, &seat) == 0;
}

void runtime_impl::leave_seat(worker* previous) noexcept {
  if (seat_moved_) {
    (void)sched_setaffinity(0, sizeof seat_affinity_, &seat_affinity_);
    seat_moved_ = false;
  }
  current_worker = previous;
  seat_taken_.store(false, std::memory_order_relaxed);
  seat_mutex_.unlock();
}

}  // namespace detail

runtime::runtime() : runtime(runtime_options{}) {}

runtime::runtime(const runtime_options& options)
    : impl_(new detail::runtime_impl(detail::resolve_config(options, options.machine ? *options.machine : topology::system()), this)) {}

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
  std::lock_guard<std::mutex> lock(detail::default_runtime_mutex());
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
