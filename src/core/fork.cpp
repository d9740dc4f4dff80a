// fork(): a child process has only the thread that called fork(); the
// workers of every runtime and every assistant are gone.
//
// The child handler bumps the fork generation, which marks every runtime
// created before as orphaned (runtime_impl::orphaned()); an orphaned runtime
// refuses work with mote::usage_error and is destroyed without joining
// threads that do not exist; the default runtime is replaced on first use.
// The locks that the child may take are held across fork() by the prepare
// handler, so the child never inherits one locked by a thread it does not
// have.
#include <pthread.h>

#include <atomic>
#include <mutex>

#include "mote/error.hpp"
#include "core/runtime_impl.hpp"
#include "trace/trace_impl.hpp"

namespace mote::detail {

std::atomic<std::uint64_t> fork_generation{0};

namespace {

void before_fork() noexcept {
  default_runtime_mutex().lock();
  spinner_registry_mutex().lock();
}
void after_fork_in_parent() noexcept {
  spinner_registry_mutex().unlock();
  default_runtime_mutex().unlock();
}
void after_fork_in_child() noexcept {
  forget_spinners_in_child();
  spinner_registry_mutex().unlock();
  default_runtime_mutex().unlock();
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

std::mutex& default_runtime_mutex() {
  static std::mutex m;
  return m;
}

std::uint64_t current_fork_generation() {
  install_fork_handlers();
  return fork_generation.load(std::memory_order_relaxed);
}

bool runtime_impl::orphaned() const noexcept {
  return generation_ != fork_generation.load(std::memory_order_relaxed);
}

void runtime_impl::check_not_orphaned() const {
  if (MOTE_UNLIKELY(orphaned())) {
    throw usage_error(
        "mote: this runtime was created before fork(); its workers do not exist in the child "
        "process. Create a new runtime in the child (the default runtime is replaced on its own)");
  }
}

}  // namespace mote::detail
