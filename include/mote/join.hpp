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

// The record of join's second callable. It lives in join's frame. The result
// and error slots are raw storage, constructed only by a thief that runs the
// callable; the fast path initializes three words and nothing else.
template <class G>
struct join_task : task {
  using result_type = join_result_t<G>;
  G* fn;
  alignas(result_type) unsigned char result_bytes[sizeof(result_type)];
  alignas(std::exception_ptr) unsigned char error_bytes[sizeof(std::exception_ptr)];

  explicit join_task(G* g) noexcept : fn(g) { init(&join_task::run_stolen); }

  result_type* result() noexcept { return std::launder(reinterpret_cast<result_type*>(result_bytes)); }
  std::exception_ptr* error() noexcept {
    return std::launder(reinterpret_cast<std::exception_ptr*>(error_bytes));
  }

  static void run_stolen(task* base, worker&) noexcept {
    auto* self = static_cast<join_task*>(base);
    bool failed = false;
    try {
      ::new (static_cast<void*>(self->result_bytes)) result_type(invoke_for_result(*self->fn));
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
    result_type r = std::move(*result());
    result()->~result_type();
    return r;
  }
  // After a stolen run whose result nobody wants (f failed).
  void discard(std::uint32_t final_state) noexcept {
    if (final_state == task::kFailed) {
      error()->~exception_ptr();
    } else {
      result()->~result_type();
    }
  }
};

// f threw: cancel g if nobody stole it, else wait for the thief (g's record
// is in our frame) and drop g's outcome; the caller rethrows f's exception.
template <class G>
MOTE_NOINLINE void unwind_join(worker* w, join_task<G>& record) noexcept {
  if (!w->pop()) record.discard(w->wait_for(&record));
}

template <class G>
MOTE_NOINLINE join_result_t<G> finish_stolen_join(worker* w, join_task<G>& record) {
  return record.take(w->wait_for(&record));
}

template <class F, class G>
MOTE_ALWAYS_INLINE auto join_on(worker* w, F& f, G& g) {
  using RF = join_result_t<F>;
  using RG = join_result_t<G>;
  constexpr bool both_void = std::is_void_v<std::invoke_result_t<F&>> &&
                             std::is_void_v<std::invoke_result_t<G&>>;

  join_task<G> record(&g);
  if (MOTE_UNLIKELY(!w->push(&record))) {
    // Deque full: run both here, in order. Nothing is lost.
    if constexpr (both_void) {
      f();
      g();
      return;
    } else {
      RF a = invoke_for_result(f);
      return std::pair<RF, RG>(std::move(a), invoke_for_result(g));
    }
  }

  if constexpr (both_void) {
    try {
      f();
    } catch (...) {
      unwind_join(w, record);
      throw;
    }
    if (MOTE_LIKELY(w->pop())) {
      g();
    } else {
      finish_stolen_join(w, record);
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
    if (MOTE_LIKELY(w->pop())) return std::pair<RF, RG>(std::move(a), invoke_for_result(g));
    return std::pair<RF, RG>(std::move(a), finish_stolen_join(w, record));
  }
}

}  // namespace detail

// Runs f and g, possibly in parallel, and returns when both are done. When
// either returns a value, join returns a std::pair of both results (a void
// callable contributes mote::empty). g's record lives in this frame; taking it
// back when nobody stole it costs no atomic read-modify-write. If f throws, g
// is cancelled when it has not started; the first exception (f's, else g's)
// is rethrown once both are done. Called on a thread that is not a worker, it
// runs on the default runtime and blocks until done.
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
  return runtime::default_runtime().run([&] { return detail::join_on(detail::current_worker, f, g); });
}

// Runs every callable, possibly in parallel, and returns when all are done.
// Exceptions as for join: the first one is rethrown, unstarted work cancelled.
//
//   mote::parallel_invoke([&] { a(); }, [&] { b(); }, [&] { c(); });
template <class F, class... Rest>
void parallel_invoke(F&& f, Rest&&... rest) {
  if constexpr (sizeof...(Rest) == 0) {
    detail::worker* w = detail::current_worker;
    if (w != nullptr) {
      f();
    } else {
      runtime::default_runtime().run([&] { f(); });
    }
  } else {
    join([&] { (void)f(); }, [&] { parallel_invoke(std::forward<Rest>(rest)...); });
  }
}

}  // namespace mote
