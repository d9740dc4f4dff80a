// Work-first fork-join: mote::join and mote::parallel_invoke.
#pragma once

#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "mote/detail/worker.hpp"
#include "mote/runtime.hpp"
#include "mote/trace.hpp"

namespace mote {

// Stands in for the result of a void callable in join's pair of results.
struct empty {};

namespace detail {

template <class F>
using join_result_t = std::conditional_t<std::is_void_v<std::invoke_result_t<F&>>, empty,
                                         std::invoke_result_t<F&>>;

template <class F>
join_result_t<F> invoke_for_result(F& f) {
  if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
    f();
    return empty{};
  } else {
    return f();
  }
}

template <class G>
struct is_named : std::false_type {};
template <class G>
struct is_named<named_fn<G>> : std::true_type {};

// The record of join's second callable. It lives in join's frame. The result
// and error slots are raw storage, constructed only by a thief that runs the
// callable; the fast path initializes three words and nothing else. A
// callable that returns a reference leaves a pointer there.
template <class G>
struct join_task : task {
  using result_type = join_result_t<G>;
  using stored_type = stored_result_t<result_type>;
  G* fn;
  alignas(stored_type) unsigned char result_bytes[sizeof(stored_type)];
  alignas(std::exception_ptr) unsigned char error_bytes[sizeof(std::exception_ptr)];

  explicit join_task(G* g) noexcept : fn(g) { init(&join_task::run_stolen); }

  stored_type* result() noexcept { return std::launder(reinterpret_cast<stored_type*>(result_bytes)); }
  std::exception_ptr* error() noexcept {
    return std::launder(reinterpret_cast<std::exception_ptr*>(error_bytes));
  }

  static void run_stolen(task* base, worker& w) noexcept {
    auto* self = static_cast<join_task*>(base);
    if constexpr (is_named<G>::value) {
      if (MOTE_UNLIKELY(w.instrumented())) w.note_task_name(self->fn->name);
    }
    bool failed = false;
    try {
      if constexpr (std::is_reference_v<result_type>) {
        ::new (static_cast<void*>(self->result_bytes)) stored_type(std::addressof(invoke_for_result(*self->fn)));
      } else {
        ::new (static_cast<void*>(self->result_bytes)) stored_type(invoke_for_result(*self->fn));
      }
    } catch (...) {
      ::new (static_cast<void*>(self->error_bytes)) std::exception_ptr(std::current_exception());
      failed = true;
    }
    self->finish(failed);
  }

  // After a stolen run: take the result, or rethrow the thief's exception.
  result_type take(std::uint32_t final_state) {
    if (final_state == task::kFailed) {
      std::exception_ptr e = std::move(*error());
      error()->~exception_ptr();
      std::rethrow_exception(std::move(e));
    }
    if constexpr (std::is_reference_v<result_type>) {
      return static_cast<result_type>(**result());
    } else {
      result_type r = std::move(*result());
      result()->~stored_type();
      return r;
    }
  }
  // After a stolen run whose result nobody wants (f failed).
  void discard(std::uint32_t final_state) noexcept {
    if (final_state == task::kFailed) {
      error()->~exception_ptr();
    } else {
      result()->~stored_type();
    }
  }
};

// f threw: cancel g if nobody stole it, else wait for the thief (g's record
// is in our frame) and drop g's outcome; the caller rethrows f's exception.
template <class G>
MOTE_NOINLINE void unwind_join(worker* w, join_task<G>& record) noexcept {
  if (worker* thief = w->pop()) record.discard(w->wait_for(&record, *thief));
}

template <class G>
MOTE_NOINLINE join_result_t<G> finish_stolen_join(worker* w, worker* thief, join_task<G>& record) {
  return record.take(w->wait_for(&record, *thief));
}

// The trace's name for a callable: its name when it is a named_fn, else the
// function that runs it as a stolen task.
template <class G>
const void* trace_what(G& g) noexcept {
  if constexpr (is_named<G>::value) {
    return g.name;
  } else {
    return reinterpret_cast<const void*>(&join_task<G>::run_stolen);
  }
}

// Ends a traced task or wait phase on every way out, exceptions included.
struct task_end_note {
  worker* w;
  ~task_end_note() { w->note_task_end(); }
};
struct wait_end_note {
  worker* w;
  ~wait_end_note() { w->note_wait_end(); }
};

// join's body. Instrumented (MOTE_STATS=1 or MOTE_TRACE): the same steps with
// event hooks between them, in an out-of-line copy, so that the plain one
// carries no trace of them.
template <bool Instrumented, class F, class G>
MOTE_ALWAYS_INLINE auto join_body(worker* w, F& f, G& g) {
  using RF = join_result_t<F>;
  using RG = join_result_t<G>;
  constexpr bool both_void = std::is_void_v<std::invoke_result_t<F&>> &&
                             std::is_void_v<std::invoke_result_t<G&>>;
  // g, run here: traced as a task when instrumented.
  auto run_g = [&]() -> RG {
    if constexpr (Instrumented) {
      w->note_task_begin(trace_what(g), is_named<G>::value);
      task_end_note end{w};
      return invoke_for_result(g);
    } else {
      return invoke_for_result(g);
    }
  };

  join_task<G> record(&g);
  if constexpr (Instrumented) w->note_spawn(trace_what(g), is_named<G>::value);
  if (MOTE_UNLIKELY(!w->push(&record))) {
    // Deque full: run both here, in order. Nothing is lost.
    if constexpr (both_void) {
      f();
      run_g();
      return;
    } else {
      RF a = invoke_for_result(f);
      return std::pair<RF, RG>(std::forward<RF>(a), run_g());
    }
  }

  // After f, when g was stolen: wait for it (the join wait phase).
  auto stolen = [&](worker* thief) -> RG {
    if constexpr (Instrumented) {
      w->note_wait_begin(0);
      wait_end_note end{w};
      return finish_stolen_join(w, thief, record);
    } else {
      return finish_stolen_join(w, thief, record);
    }
  };

  if constexpr (both_void) {
    try {
      f();
    } catch (...) {
      unwind_join(w, record);
      throw;
    }
    worker* thief = w->pop();
    if (MOTE_LIKELY(thief == nullptr)) {
      run_g();
    } else {
      stolen(thief);
    }
  } else {
    RF a = [&]() -> RF {
      try {
        return invoke_for_result(f);
      } catch (...) {
        unwind_join(w, record);
        throw;
      }
    }();
    worker* thief = w->pop();
    if (MOTE_LIKELY(thief == nullptr)) return std::pair<RF, RG>(std::forward<RF>(a), run_g());
    return std::pair<RF, RG>(std::forward<RF>(a), stolen(thief));
  }
}

template <class F, class G>
MOTE_NOINLINE auto join_instrumented(worker* w, F& f, G& g) {
  return join_body<true>(w, f, g);
}

template <class F, class G>
MOTE_ALWAYS_INLINE auto join_on(worker* w, F& f, G& g) {
  // The one event site of the fast path: never taken unless MOTE_STATS=1 or
  // MOTE_TRACE is set.
  if (MOTE_UNLIKELY(w->instrumented())) return join_instrumented(w, f, g);
  return join_body<false>(w, f, g);
}

// Is the calling thread an assistant (mote::assistant's helper thread)?
MOTE_API bool on_assistant_thread() noexcept;

// join on a thread that is not a worker.
template <class F, class G>
MOTE_NOINLINE auto join_outside(F& f, G& g) {
  if (on_assistant_thread()) {
    // An assistant runs one small piece for a thread that waits for it:
    // handing part of the piece to a runtime would only add a round trip to
    // that wait (and with a one-worker runtime whose worker is that thread,
    // never finish). Both run here, in order; if f throws, g does not run.
    if constexpr (std::is_void_v<std::invoke_result_t<F&>> && std::is_void_v<std::invoke_result_t<G&>>) {
      f();
      g();
      return;
    } else {
      using RF = join_result_t<F>;
      using RG = join_result_t<G>;
      RF a = invoke_for_result(f);
      return std::pair<RF, RG>(std::forward<RF>(a), invoke_for_result(g));
    }
  } else {
    return runtime::default_runtime().run([&] { return join_on(current_worker, f, g); });
  }
}

}  // namespace detail

// Runs f and g, possibly in parallel, and returns when both are done. When
// either returns a value, join returns a std::pair of both results (a void
// callable contributes mote::empty; a callable that returns a reference
// contributes that reference). g's record lives in this frame; taking it back
// when nobody stole it, and no thief asked this worker to share, costs no
// atomic read-modify-write. If f throws, g is cancelled when it has not
// started; the first exception (f's, else g's) is rethrown once both are
// done. Called on a thread that is not a worker, it runs on the default
// runtime and blocks until done; on an assistant thread it runs f, then g,
// right there.
//
//   int fib(int n) {
//     if (n < 2) return n;
//     auto [a, b] = mote::join([&] { return fib(n - 1); }, [&] { return fib(n - 2); });
//     return a + b;
//   }
template <class F, class G>
auto join(F&& f, G&& g) {
  detail::worker* w = detail::current_worker;
  if (MOTE_LIKELY(w != nullptr)) return detail::join_on(w, f, g);
  return detail::join_outside(f, g);
}

// Runs every callable, possibly in parallel, and returns when all are done.
// Exceptions as for join: the first one is rethrown, unstarted work cancelled.
//
//   mote::parallel_invoke([&] { a(); }, [&] { b(); }, [&] { c(); });
template <class F, class... Rest>
void parallel_invoke(F&& f, Rest&&... rest) {
  if constexpr (sizeof...(Rest) == 0) {
    detail::worker* w = detail::current_worker;
    if (w != nullptr || detail::on_assistant_thread()) {
      f();
    } else {
      runtime::default_runtime().run([&] { f(); });
    }
  } else {
    join([&] { (void)f(); }, [&] { parallel_invoke(std::forward<Rest>(rest)...); });
  }
}

}  // namespace mote
