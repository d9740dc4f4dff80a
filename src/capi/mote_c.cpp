// The C API (include/mote.h) over the C++ API.
//
// No C++ exception crosses this boundary: every entry point catches everything
// and turns it into a mote_status, and the detail goes to a per-thread message
// that mote_last_error() returns. The message keeps errno's rule: it is written
// when a call fails and left alone when a call succeeds.

#include "mote.h"

#include <atomic>
#include <cstring>
#include <chrono>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "mote/assistant.hpp"
#include "mote/dataflow.hpp"
#include "mote/error.hpp"
#include "mote/join.hpp"
#include "mote/loops.hpp"
#include "mote/runtime.hpp"
#include "mote/task_group.hpp"

struct mote_runtime {
  explicit mote_runtime(const mote::runtime_options& options) : rt(options) {}

  mote::runtime rt;
  // Task groups created on this runtime and not yet destroyed; finalize refuses
  // while any is alive, because a group points into the runtime. Relaxed: the
  // count is only a usage check, and destroy/finalize on different threads
  // without other synchronisation is a usage error anyway.
  std::atomic<long> live_groups{0};
};

struct mote_task_group {
  explicit mote_task_group(mote_runtime* r) : owner(r), group(r->rt) {}

  mote_runtime* owner;
  mote::task_group group;
  // True from a spawn until the next wait() that completes. destroy refuses
  // while it is set, so the task_group destructor never has to cancel and
  // throw missing_wait. Set after a spawn succeeded, so a failed spawn leaves
  // it as it was. Spawns may come from inside the group's own tasks; those set
  // it before they finish, so before wait() returns, and clearing the flag
  // after wait() is right. A wait that throws waited for nothing and leaves it
  // alone. Relaxed: wait() itself orders the tasks' effects; this is a usage
  // check.
  std::atomic<bool> needs_wait{false};
};

struct mote_dataflow {
  explicit mote_dataflow(mote_runtime* r) : owner(r), scope(r->rt) {}
  mote_runtime* owner;
  mote::dataflow scope;
};

struct mote_assistant {
  explicit mote_assistant(const mote::assistant_options& options) : a(options) {}
  mote::assistant a;
};

namespace {

// The detailed message of this thread's last failure. When even recording the
// message fails (out of memory), a fixed text stands in for it.
thread_local std::string last_error_text;
thread_local const char* last_error_fixed = nullptr;

mote_status fail(mote_status status, const char* message) noexcept {
  try {
    last_error_text.assign(message);
    last_error_fixed = nullptr;
  } catch (...) {
    last_error_fixed = "out of memory while recording an error message";
  }
  return status;
}

mote_status fail(mote_status status, const std::string& prefix, const char* detail) noexcept {
  try {
    last_error_text.assign(prefix);
    last_error_text.append(detail);
    last_error_fixed = nullptr;
  } catch (...) {
    last_error_fixed = "out of memory while recording an error message";
  }
  return status;
}

// Maps the exception being handled to a status and a message: config_error to
// MOTE_ECONFIG, usage_error to MOTE_EUSAGE, bad_alloc to MOTE_ENOMEM, anything
// else to for_other. With as_task_failure every exception is a task's, so the
// status is MOTE_ETASK. Called only from inside a catch (...) block.
mote_status fail_current(const char* where, mote_status for_other,
                         bool as_task_failure = false) noexcept {
  const std::string prefix = [where]() noexcept {
    try {
      return std::string(where) + ": ";
    } catch (...) {
      return std::string();
    }
  }();
  try {
    throw;
  } catch (const mote::config_error& e) {
    if (as_task_failure) return fail(MOTE_ETASK, prefix, e.what());
    return fail(MOTE_ECONFIG, e.what());
  } catch (const mote::usage_error& e) {
    // Before std::exception: usage_error is a std::logic_error.
    return fail(as_task_failure ? MOTE_ETASK : MOTE_EUSAGE, prefix, e.what());
  } catch (const std::bad_alloc&) {
    return fail(as_task_failure ? MOTE_ETASK : MOTE_ENOMEM, prefix, "out of memory");
  } catch (const std::exception& e) {
    return fail(for_other, prefix, e.what());
  } catch (...) {
    return fail(for_other, prefix, "an exception that is not a std::exception");
  }
}

// A C function that failed (a C++ exception escaped it), on its way through
// runtime::run, mote::join or the assistant, which rethrow it to the caller.
// Wrapping keeps the two channels apart: whatever else those calls throw
// (usage_error, bad_alloc, config_error) is mote's, not the task's. Not a
// std::exception, so no handler but ours takes it for something else.
struct task_failure {
  std::exception_ptr error;
};

// Calls fn(arg) with anything it throws wrapped in a task_failure.
void call_task(void (*fn)(void*), void* arg) {
  try {
    fn(arg);
  } catch (...) {
    throw task_failure{std::current_exception()};
  }
}

// Records a task's exception as MOTE_ETASK, with its message.
mote_status fail_task(const std::exception_ptr& error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (...) {
    return fail_current("a task failed", MOTE_ETASK, /*as_task_failure=*/true);
  }
}

}  // namespace

extern "C" {

MOTE_C_API void mote_options_init(mote_options* options) {
  if (options == nullptr) return;
  options->num_workers = 0;
  options->bind = nullptr;
  options->spin_us = -1;
  options->adaptive = -1;
}

MOTE_C_API mote_status mote_init(const mote_options* options, mote_runtime** out) {
  if (out == nullptr) return fail(MOTE_EINVAL, "mote_init: out is NULL");
  *out = nullptr;
  try {
    mote::runtime_options o;
    if (options != nullptr) {
      if (options->num_workers != 0) o.num_workers = options->num_workers;
      if (options->bind != nullptr) {
        o.bind = mote::binding::parse(options->bind, "mote_options.bind");
      }
      if (options->spin_us >= 0) o.spin = std::chrono::microseconds(options->spin_us);
      if (options->adaptive >= 0) o.adaptive = options->adaptive != 0;
    }
    *out = new mote_runtime(o);
    return MOTE_OK;
  } catch (...) {
    return fail_current("mote_init", MOTE_EINTERNAL);
  }
}

MOTE_C_API mote_status mote_finalize(mote_runtime* rt) {
  if (rt == nullptr) return fail(MOTE_EINVAL, "mote_finalize: runtime is NULL");
  if (rt->live_groups.load(std::memory_order_relaxed) != 0) {
    return fail(MOTE_EBUSY, "mote_finalize: task groups of this runtime are not destroyed yet");
  }
  // A worker would wait to join itself (and the runtime's destructor cannot
  // report that: it would terminate the process).
  if (mote::runtime::current() == &rt->rt) {
    return fail(MOTE_EUSAGE, "mote_finalize: called from a task of the runtime it would finalize");
  }
  try {
    delete rt;
    return MOTE_OK;
  } catch (...) {
    return fail_current("mote_finalize", MOTE_EINTERNAL);
  }
}

MOTE_C_API unsigned mote_num_workers(const mote_runtime* rt) {
  if (rt == nullptr) {
    fail(MOTE_EINVAL, "mote_num_workers: runtime is NULL");
    return 0;
  }
  return rt->rt.num_workers();
}

MOTE_C_API mote_status mote_task_group_create(mote_runtime* rt, mote_task_group** out) {
  if (out == nullptr) return fail(MOTE_EINVAL, "mote_task_group_create: out is NULL");
  *out = nullptr;
  if (rt == nullptr) return fail(MOTE_EINVAL, "mote_task_group_create: runtime is NULL");
  try {
    *out = new mote_task_group(rt);
    rt->live_groups.fetch_add(1, std::memory_order_relaxed);
    return MOTE_OK;
  } catch (...) {
    return fail_current("mote_task_group_create", MOTE_EINTERNAL);
  }
}

MOTE_C_API mote_status mote_task_group_spawn(mote_task_group* g, void (*fn)(void*), void* arg) {
  if (g == nullptr) return fail(MOTE_EINVAL, "mote_task_group_spawn: task group is NULL");
  if (fn == nullptr) return fail(MOTE_EINVAL, "mote_task_group_spawn: function is NULL");
  try {
    // A C function does not throw; a C++ one called through this API may, and
    // then the task_group records the exception and wait() reports MOTE_ETASK.
    // From a worker of the group's runtime this is a push on its own pool.
    g->group.spawn([fn, arg] { fn(arg); });
  } catch (...) {
    // Nothing was added (a forked child's runtime, out of memory), and
    // needs_wait is still what it was.
    return fail_current("mote_task_group_spawn", MOTE_EINTERNAL);
  }
  // After the spawn: the flag must be set by the time the task could be
  // waited for, and a spawn from a task sets it before that task finishes.
  // Read first, so that spawns from many workers do not all write one line.
  if (!g->needs_wait.load(std::memory_order_relaxed)) {
    g->needs_wait.store(true, std::memory_order_relaxed);
  }
  return MOTE_OK;
}

MOTE_C_API mote_status mote_task_group_wait(mote_task_group* g) {
  if (g == nullptr) return fail(MOTE_EINVAL, "mote_task_group_wait: task group is NULL");
  std::exception_ptr error;
  mote::task_group_status status = mote::task_group_status::complete;
  try {
    error = mote::detail::group_access::wait_for_all(g->group, &status);
  } catch (...) {
    // usage_error (another thread waits, or the tasks were left behind by
    // fork()) and anything else thrown here: nothing was waited for, so the
    // tasks may still be pending and needs_wait stays as it is.
    return fail_current("mote_task_group_wait", MOTE_EINTERNAL);
  }
  // Every task is done and the group is ready for reuse, failed or not.
  g->needs_wait.store(false, std::memory_order_relaxed);
  if (error) return fail_task(error);
  if (status == mote::task_group_status::canceled) {
    return fail(MOTE_ECANCELED,
                "mote_task_group_wait: the group was cancelled; tasks that had not started did "
                "not run");
  }
  return MOTE_OK;
}

MOTE_C_API mote_status mote_task_group_cancel(mote_task_group* g) {
  if (g == nullptr) return fail(MOTE_EINVAL, "mote_task_group_cancel: task group is NULL");
  g->group.cancel();
  return MOTE_OK;
}

MOTE_C_API int mote_task_group_is_cancelled(const mote_task_group* g) {
  if (g == nullptr) {
    fail(MOTE_EINVAL, "mote_task_group_is_cancelled: task group is NULL");
    return 0;
  }
  return g->group.is_cancelled() ? 1 : 0;
}

MOTE_C_API mote_status mote_task_group_destroy(mote_task_group* g) {
  if (g == nullptr) return fail(MOTE_EINVAL, "mote_task_group_destroy: task group is NULL");
  // In a forked child the pending tasks belong to the parent's workers: they
  // never run here and nothing can touch the group, whose destructor then
  // returns without waiting. Anywhere else, pending tasks point at the group.
  if (g->needs_wait.load(std::memory_order_relaxed) &&
      !mote::detail::group_access::orphaned(g->group)) {
    return fail(MOTE_EBUSY,
                "mote_task_group_destroy: tasks were spawned since the last "
                "mote_task_group_wait; wait for them first");
  }
  mote_runtime* owner = g->owner;
  try {
    delete g;  // the deallocation happens even if the destructor throws
    owner->live_groups.fetch_sub(1, std::memory_order_relaxed);
    return MOTE_OK;
  } catch (...) {
    owner->live_groups.fetch_sub(1, std::memory_order_relaxed);
    return fail_current("mote_task_group_destroy", MOTE_EINTERNAL);
  }
}

// ---- Data-flow tasks ------------------------------------------------------------

MOTE_C_API mote_status mote_dataflow_create(mote_runtime* rt, mote_dataflow** out) {
  if (out == nullptr) return fail(MOTE_EINVAL, "mote_dataflow_create: out is NULL");
  *out = nullptr;
  if (rt == nullptr) return fail(MOTE_EINVAL, "mote_dataflow_create: runtime is NULL");
  try {
    *out = new mote_dataflow(rt);
    // Counted with the groups: finalize refuses while a scope lives.
    rt->live_groups.fetch_add(1, std::memory_order_relaxed);
    return MOTE_OK;
  } catch (...) {
    return fail_current("mote_dataflow_create", MOTE_EINTERNAL);
  }
}

MOTE_C_API mote_status mote_dataflow_spawn(mote_dataflow* df, const mote_access* accesses, size_t n,
                                           void (*fn)(void*), void* arg) {
  if (df == nullptr) return fail(MOTE_EINVAL, "mote_dataflow_spawn: scope is NULL");
  if (fn == nullptr) return fail(MOTE_EINVAL, "mote_dataflow_spawn: function is NULL");
  if (n != 0 && accesses == nullptr) return fail(MOTE_EINVAL, "mote_dataflow_spawn: accesses is NULL");
  try {
    std::vector<mote::access> list(n);
    for (size_t i = 0; i < n; ++i) {
      // Read as an int: a C caller may store any int in the enum, and loading
      // an out-of-range value as the C++ enum type is undefined.
      static_assert(sizeof(mote_access_type) == sizeof(int));
      int type = 0;
      std::memcpy(&type, &accesses[i].type, sizeof type);
      if (type < MOTE_IN || type > MOTE_CONCURRENT) {
        return fail(MOTE_EINVAL, "mote_dataflow_spawn: an access type is not one of MOTE_IN .. MOTE_CONCURRENT");
      }
      list[i] = {accesses[i].address, accesses[i].size, static_cast<mote::access_type>(type)};
    }
    df->scope.spawn_accesses(list, [fn, arg] { fn(arg); });
    return MOTE_OK;
  } catch (...) {
    return fail_current("mote_dataflow_spawn", MOTE_EINTERNAL);
  }
}

MOTE_C_API mote_status mote_dataflow_wait(mote_dataflow* df) {
  if (df == nullptr) return fail(MOTE_EINVAL, "mote_dataflow_wait: scope is NULL");
  try {
    df->scope.wait();
    return MOTE_OK;
  } catch (const mote::usage_error&) {
    return fail_current("mote_dataflow_wait", MOTE_EINTERNAL);
  } catch (...) {
    // Anything else came from a task (wait() itself throws only usage_error).
    return fail_current("mote_dataflow_wait", MOTE_ETASK, true);
  }
}

MOTE_C_API mote_status mote_dataflow_destroy(mote_dataflow* df) {
  if (df == nullptr) return fail(MOTE_EINVAL, "mote_dataflow_destroy: scope is NULL");
  mote_runtime* owner = df->owner;
  mote_status status = MOTE_OK;
  try {
    df->scope.wait();
  } catch (...) {
    status = fail_current("mote_dataflow_destroy", MOTE_ETASK, true);
  }
  try {
    delete df;
  } catch (...) {
    status = fail_current("mote_dataflow_destroy", MOTE_EINTERNAL);
  }
  owner->live_groups.fetch_sub(1, std::memory_order_relaxed);
  return status;
}

// ---- Fork-join ---------------------------------------------------------------

MOTE_C_API mote_status mote_run(mote_runtime* rt, void (*fn)(void*), void* arg) {
  if (rt == nullptr) return fail(MOTE_EINVAL, "mote_run: runtime is NULL");
  if (fn == nullptr) return fail(MOTE_EINVAL, "mote_run: function is NULL");
  try {
    // From a worker of rt, run() calls the lambda right here.
    rt->rt.run([fn, arg] { call_task(fn, arg); });
    return MOTE_OK;
  } catch (const task_failure& f) {
    return fail_task(f.error);
  } catch (...) {
    return fail_current("mote_run", MOTE_EINTERNAL);
  }
}

MOTE_C_API mote_status mote_join(void (*f)(void*), void* a, void (*g)(void*), void* b) {
  if (f == nullptr || g == nullptr) return fail(MOTE_EINVAL, "mote_join: function is NULL");
  try {
    // Through task_failure rather than caught in the lambdas, so that join
    // still cancels g when f fails before g started.
    mote::join([f, a] { call_task(f, a); }, [g, b] { call_task(g, b); });
    return MOTE_OK;
  } catch (const task_failure& e) {
    return fail_task(e.error);
  } catch (...) {
    return fail_current("mote_join", MOTE_EINTERNAL);  // e.g. a bad MOTE_* for the default runtime
  }
}

// ---- Parallel loops -------------------------------------------------------------

MOTE_C_API mote_status mote_parallel_for(mote_runtime* rt, long long first, long long last, long long grain,
                                         void (*body)(void* ctx, long long begin, long long end), void* ctx) {
  if (rt == nullptr) return fail(MOTE_EINVAL, "mote_parallel_for: runtime is NULL");
  if (body == nullptr) return fail(MOTE_EINVAL, "mote_parallel_for: body is NULL");
  if (grain < 0) return fail(MOTE_EINVAL, "mote_parallel_for: grain is negative (0 means automatic)");
  if (last <= first) return MOTE_OK;
  try {
    // From a worker of rt, run() calls the lambda right here: a nested loop.
    rt->rt.run([=] {
      auto call = [body, ctx](long long b, long long e) {
        try {
          body(ctx, b, e);
        } catch (...) {
          throw task_failure{std::current_exception()};
        }
      };
      if (grain == 0) {
        mote::parallel_for(first, last, call);
      } else {
        mote::parallel_for(first, last, mote::grain(static_cast<std::uint64_t>(grain)), call);
      }
    });
    return MOTE_OK;
  } catch (const task_failure& f) {
    return fail_task(f.error);
  } catch (...) {
    return fail_current("mote_parallel_for", MOTE_EINTERNAL);
  }
}

// ---- The assistant -----------------------------------------------------------

MOTE_C_API void mote_assistant_options_init(mote_assistant_options* options) {
  if (options == nullptr) return;
  const mote::assistant_options d;
  options->capacity = d.capacity;
  options->cpu = d.cpu;
  options->pin = d.pin ? 1 : 0;
  options->idle_park_us = static_cast<long>(d.idle_park.count());
  options->adaptive = -1;
}

MOTE_C_API mote_status mote_assistant_create(const mote_assistant_options* options,
                                             mote_assistant** out) {
  if (out == nullptr) return fail(MOTE_EINVAL, "mote_assistant_create: out is NULL");
  *out = nullptr;
  try {
    mote::assistant_options o;
    if (options != nullptr) {
      o.capacity = options->capacity;
      o.cpu = options->cpu;
      o.pin = options->pin != 0;
      o.idle_park = std::chrono::microseconds(options->idle_park_us);
      if (options->adaptive >= 0) o.adaptive = options->adaptive != 0;
    }
    *out = new mote_assistant(o);
    return MOTE_OK;
  } catch (...) {
    return fail_current("mote_assistant_create", MOTE_EINTERNAL);
  }
}

MOTE_C_API mote_status mote_assistant_submit(mote_assistant* a, void (*fn)(void*), void* arg) {
  if (a == nullptr) return fail(MOTE_EINVAL, "mote_assistant_submit: assistant is NULL");
  if (fn == nullptr) return fail(MOTE_EINVAL, "mote_assistant_submit: function is NULL");
  if (!a->a.is_owner()) {
    return fail(MOTE_ENOTOWNER, "mote_assistant_submit: called from a thread other than the owner");
  }
  try {
    // Wrapped, so that wait() tells a task's exception (task_failure) from
    // its own usage_error. The closure is two pointers: it fits in the ring.
    a->a.submit([fn, arg] { call_task(fn, arg); });
    return MOTE_OK;
  } catch (const task_failure& f) {
    return fail_task(f.error);  // the ring was full and fn ran here
  } catch (...) {
    return fail_current("mote_assistant_submit", MOTE_EINTERNAL);
  }
}

MOTE_C_API mote_status mote_assistant_wait(mote_assistant* a) {
  if (a == nullptr) return fail(MOTE_EINVAL, "mote_assistant_wait: assistant is NULL");
  if (!a->a.is_owner()) {
    return fail(MOTE_ENOTOWNER, "mote_assistant_wait: called from a thread other than the owner");
  }
  try {
    a->a.wait();
    return MOTE_OK;
  } catch (const task_failure& f) {
    return fail_task(f.error);
  } catch (...) {
    return fail_current("mote_assistant_wait", MOTE_EINTERNAL);  // usage_error after fork()
  }
}

MOTE_C_API mote_status mote_assistant_wake_up_hint(mote_assistant* a) {
  if (a == nullptr) return fail(MOTE_EINVAL, "mote_assistant_wake_up_hint: assistant is NULL");
  a->a.wake_up_hint();
  return MOTE_OK;
}

MOTE_C_API mote_status mote_assistant_sleep_hint(mote_assistant* a) {
  if (a == nullptr) return fail(MOTE_EINVAL, "mote_assistant_sleep_hint: assistant is NULL");
  a->a.sleep_hint();
  return MOTE_OK;
}

MOTE_C_API int mote_assistant_cpu(const mote_assistant* a) {
  if (a == nullptr) {
    fail(MOTE_EINVAL, "mote_assistant_cpu: assistant is NULL");
    return -1;
  }
  return a->a.cpu();
}

MOTE_C_API mote_status mote_assistant_destroy(mote_assistant* a) {
  if (a == nullptr) return fail(MOTE_EINVAL, "mote_assistant_destroy: assistant is NULL");
  if (!a->a.is_owner()) {
    return fail(MOTE_ENOTOWNER,
                "mote_assistant_destroy: called from a thread other than the owner");
  }
  delete a;  // waits for the submitted tasks; never throws
  return MOTE_OK;
}

MOTE_C_API const char* mote_strerror(int status) {
  switch (status) {
    case MOTE_OK:
      return "success";
    case MOTE_EINVAL:
      return "invalid argument";
    case MOTE_ECONFIG:
      return "invalid configuration";
    case MOTE_ENOMEM:
      return "out of memory";
    case MOTE_ETASK:
      return "a task failed";
    case MOTE_EBUSY:
      return "object still in use";
    case MOTE_EINTERNAL:
      return "internal error";
    case MOTE_ENOTOWNER:
      return "called from a thread that does not own the object";
    case MOTE_EUSAGE:
      return "a use that mote does not allow";
    case MOTE_ECANCELED:
      return "the group was cancelled";
  }
  return "unknown status";
}

MOTE_C_API const char* mote_last_error(void) {
  return last_error_fixed != nullptr ? last_error_fixed : last_error_text.c_str();
}

}  // extern "C"
