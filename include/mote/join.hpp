// Work-first fork-join: mote::join and mote::parallel_invoke.
#pragma once

#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "mote/detail/adaptive.hpp"
#include "mote/detail/worker.hpp"
#include "mote/runtime.hpp"
#include "mote/site.hpp"
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

// f, then g, here (adaptive offloading chose to run the pair in place). If
// f throws, g does not run. With `ticks`: the shorter of the two runs, in
// cycle-counter ticks (what running them in parallel could save).
template <class F, class G>
auto join_in_place(F& f, G& g, std::uint64_t* ticks) {
  using RF = join_result_t<F>;
  using RG = join_result_t<G>;
  const std::uint64_t t0 = ticks != nullptr ? cycle_clock() : 0;
  RF a = invoke_for_result(f);
  const std::uint64_t t1 = ticks != nullptr ? cycle_clock() : 0;
  RG b = invoke_for_result(g);
  if (ticks != nullptr) {
    const std::uint64_t t2 = cycle_clock();
    *ticks = t1 - t0 < t2 - t1 ? t1 - t0 : t2 - t1;
  }
  if constexpr (std::is_void_v<std::invoke_result_t<F&>> && std::is_void_v<std::invoke_result_t<G&>>) {
    return;
  } else {
    return std::pair<RF, RG>(std::forward<RF>(a), std::forward<RG>(b));
  }
}

// A callable timed in cycle-counter ticks: when it started and ended, and on
// which thread (exceptions included). Read by the joining worker after the
// join returned (a thief's writes are published by its finish()).
template <class F>
struct timed_fn {
  F& fn;
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  const void* thread = nullptr;
  decltype(auto) operator()() {
    thread = thread_token();
    start = cycle_clock();
    struct stamp {
      std::uint64_t& at;
      ~stamp() { at = cycle_clock(); }
    } s{end};
    return fn();
  }
};

// Keeps the worker's depth of adaptive joins (a part of a site's key).
struct adaptive_depth_guard {
  std::uint32_t& depth;
  explicit adaptive_depth_guard(std::uint32_t& d) noexcept : depth(d) { ++depth; }
  ~adaptive_depth_guard() { --depth; }
};

// join under runtime_options::adaptive (docs/adaptive.md): the worker's
// offload model decides, from the site's duration estimate and the
// worker's hand-off estimate, whether g is offered to thieves (the plain
// work-first path) or the pair runs here. A timed offload whose g was
// stolen measures the hand-off as the time the pair took beyond f's run.
template <bool Instrumented, class F, class G>
auto join_adaptive(worker* w, join_offload& o, site* s, F& f, G& g) {
  offload_model& m = o.model;
  const std::uint32_t salt = o.depth;
  offload_model::entry& e = m.find(s, salt);
  adaptive_depth_guard depth(o.depth);
  switch (m.decide(e)) {
    case offload_model::choice::here:
      if constexpr (Instrumented) w->note_inlined(s->name());
      return join_in_place(f, g, nullptr);
    case offload_model::choice::here_timed: {
      if constexpr (Instrumented) w->note_inlined(s->name());
      std::uint64_t ticks = 0;
      if constexpr (std::is_void_v<decltype(join_in_place(f, g, nullptr))>) {
        join_in_place(f, g, &ticks);
        // Found again: a nested join may have taken the entry meanwhile.
        m.note_work(m.find(s, salt), ticks);
        return;
      } else {
        auto r = join_in_place(f, g, &ticks);
        m.note_work(m.find(s, salt), ticks);
        return r;
      }
    }
    case offload_model::choice::away:
      break;
    case offload_model::choice::away_timed: {
      timed_fn<F> tf{f};
      timed_fn<G> tg{g};
      const std::uint64_t pushed = cycle_clock();
      auto measure = [&] {
        const std::uint64_t seen = cycle_clock();
        offload_model::entry& now = m.find(s, salt);
        const std::uint64_t df = tf.end - tf.start, dg = tg.end - tg.start;
        m.note_work(now, df < dg ? df : dg);
        // Stolen: what the pair cost beyond f, which ran here, is what
        // handing g over cost, all of it (the push, the thief's reaction,
        // g's data moving to the thief's cache, the news of its end coming
        // back): (seen - pushed) - f. Near zero when g ended long before f.
        if (tg.thread != thread_token() && seen - pushed >= df) {
          m.note_handoff(now, (seen - pushed) - df);
        } else {
          m.no_handoff(now);
        }
      };
      if constexpr (std::is_void_v<decltype(join_body<Instrumented>(w, tf, tg))>) {
        join_body<Instrumented>(w, tf, tg);
        measure();
        return;
      } else {
        auto r = join_body<Instrumented>(w, tf, tg);
        measure();
        return r;
      }
    }
  }
  return join_body<Instrumented>(w, f, g);
}

// join off its plain path: instrumented, adaptive, or both.
template <class F, class G>
MOTE_NOINLINE auto join_slow(worker* w, site* s, F& f, G& g) {
  if (auto* o = static_cast<join_offload*>(w->slot(kAdaptiveSlot))) {
    if (w->instrumented()) return join_adaptive<true>(w, *o, s, f, g);
    return join_adaptive<false>(w, *o, s, f, g);
  }
  return join_body<true>(w, f, g);
}

// join on a worker, the tasks counted as site s's when adaptive (nullptr: the
// site of g's closure type).
template <class F, class G>
MOTE_ALWAYS_INLINE auto join_on(worker* w, F& f, G& g, site* s = nullptr) {
  // The one test of the fast path: never taken unless MOTE_STATS=1,
  // MOTE_TRACE or runtime_options::adaptive is set.
  if (MOTE_UNLIKELY(w->join_slow())) return join_slow(w, s != nullptr ? s : &type_site<std::decay_t<G>>, f, g);
  return join_body<false>(w, f, g);
}

// Is the calling thread an assistant (mote::assistant's helper thread)?
MOTE_API bool on_assistant_thread() noexcept;

// join on a thread that is not a worker.
template <class F, class G>
MOTE_NOINLINE auto join_outside(F& f, G& g, site* s = nullptr) {
  if (on_assistant_thread()) {
    // An assistant runs one small piece for a thread that waits for it:
    // handing part of the piece to a runtime would only add a round trip to
    // that wait (and with a one-worker runtime whose worker is that thread,
    // never finish). Both run here, in order; if f throws, g does not run.
    return join_in_place(f, g, nullptr);
  } else {
    return runtime::default_runtime().run([&] { return join_on(current_worker, f, g, s); });
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
// right there. Under runtime_options::adaptive (MOTE_ADAPTIVE=1), a pair
// whose call site (g's closure type) is short against the measured cost of
// handing g to another worker runs in place, f then g (docs/adaptive.md); so
// does a site's first pair, which measures how long its pairs are.
//
// join offers parallelism and never promises it (as oneTBB's
// parallel_invoke and Cilk's spawn): g may run after f, on the same thread,
// on any runtime (always on one worker; whenever no worker takes g; on an
// adaptive site's first call). f must not wait for something that only g
// does; two pieces that must run at the same time need threads of their own.
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

// join with the duration estimate of site s (see mote::site): under
// runtime_options::adaptive, the pair runs in place while s's pairs are short
// against the cost of handing g to another worker. Otherwise as join(f, g).
//
//   static mote::site leaf{"leaf pair"};
//   auto [a, b] = mote::join(leaf, [&] { return small(x); }, [&] { return small(y); });
template <class F, class G>
auto join(site& s, F&& f, G&& g) {
  detail::worker* w = detail::current_worker;
  if (MOTE_LIKELY(w != nullptr)) return detail::join_on(w, f, g, &s);
  return detail::join_outside(f, g, &s);
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
