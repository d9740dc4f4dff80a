// Fine-grain parallel loops: mote::parallel_for, mote::parallel_reduce and
// mote::per_worker.
//
// A loop runs on a team of workers. Its iterations are split evenly into one
// stripe per worker of the team; each worker claims batches from its own
// stripe with one fetch-and-add, then from the other stripes of its domain
// (a socket, or a group of nearby cores), then from other domains through a
// request combiner: one waiting worker claims for all the waiting workers of
// its domain at once. With no grain given, each worker sizes its batches to
// about 2K time-stamp-counter ticks of body work (about 1K cycles on most
// machines), measured as the loop runs. The loop's starter wakes at most one
// parked worker per batch, with one futex call each, and the end of a loop is
// a two-level tree: per domain, then the starter.
//
// Nested loops: a loop started inside the body of a loop runs on the sub-team
// of the next level of the machine (the whole machine, then the socket, then
// the core's hardware threads) that holds the worker it starts on; when the
// machine has no finer level, on the same team again. Workers join a loop
// only when they are idle, so nothing is oversubscribed: a nested loop whose
// team is busy simply runs on the worker that started it. docs/loops.md has
// the design and the measured figures.
//
// A body runs in its loop's starter's context on every worker: a task_group
// made in a body is bound to the group the starter runs in (the task_group
// whose task called the loop, if any), and a mote::dataflow made in a body is
// nested in the starter's data-flow task. When that group is cancelled (its
// cancel(), a task of it failing, or a group it is bound to cancelled), no
// new batch starts on any worker; batches that started finish, and the loop
// returns normally: its group's wait() then says task_group_status::canceled.
#pragma once

#include <algorithm>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "mote/detail/loops.hpp"
#include "mote/detail/platform.hpp"
#include "mote/detail/worker.hpp"
#include "mote/error.hpp"
#include "mote/join.hpp"
#include "mote/runtime.hpp"

namespace mote {

// The batch of a loop: the number of iterations a worker claims at a time
// (for parallel_reduce, also the block whose partial result is computed from
// the identity). Must be at least 1.
//
//   mote::parallel_for(0, n, mote::grain(256), [&](int i) { y[i] += a * x[i]; });
struct grain {
  constexpr explicit grain(std::uint64_t n) noexcept : value(n) {}
  std::uint64_t value;
};

namespace detail {

template <class I>
concept loop_index = (std::integral<I> && !std::same_as<std::remove_cv_t<I>, bool>) ||
                     std::random_access_iterator<I>;

// Iterations in [first, last): 0 when last <= first.
template <class I>
std::uint64_t loop_size(const I& first, const I& last) {
  if constexpr (std::integral<I>) {
    if (!(first < last)) return 0;
    using U = std::make_unsigned_t<I>;
    return static_cast<std::uint64_t>(static_cast<U>(static_cast<U>(last) - static_cast<U>(first)));
  } else {
    const auto d = last - first;
    return d > 0 ? static_cast<std::uint64_t>(d) : 0;
  }
}

// first advanced by `offset` iterations (offset <= the loop's size).
template <class I>
I loop_at(const I& first, std::uint64_t offset) {
  if constexpr (std::integral<I>) {
    using U = std::make_unsigned_t<I>;
    // Modular in the unsigned type; the conversion back is modular too (C++20).
    return static_cast<I>(static_cast<U>(static_cast<U>(first) + static_cast<U>(offset)));
  } else {
    return first + static_cast<std::iter_difference_t<I>>(offset);
  }
}

inline std::uint64_t checked_grain(grain g) {
  if (g.value == 0) throw usage_error("mote: grain(0): a loop's grain must be at least 1");
  return g.value;
}

// Runs job: on the calling worker's team, on the default runtime when the
// caller is not a worker, alone on an assistant thread. Rethrows the first
// exception of a body.
MOTE_API void start_loop(loop_job& job);

template <class I, class F>
struct for_job : loop_job {
  I first;
  F* body;

  static void run(loop_job& base, loop_claimer& claims) {
    auto& self = static_cast<for_job&>(base);
    std::uint64_t b = 0;
    std::uint64_t e = 0;
    try {
      while (claims.next(&b, &e)) {
        if constexpr (std::is_invocable_v<F&, I, I>) {
          (*self.body)(loop_at(self.first, b), loop_at(self.first, e));
        } else {
          I i = loop_at(self.first, b);
          for (std::uint64_t k = b; k < e; ++k, ++i) (*self.body)(i);
        }
      }
    } catch (...) {
      loop_fail(base, claims);
    }
  }
};

// The identity of a body type, for the grain learnt from its last loop.
template <class F>
inline constexpr char loop_site_tag = 0;

template <class I, class F>
void run_for(I first, I last, std::uint64_t g, F& body) {
  std::uint64_t left = loop_size(first, last);
  while (left != 0) {
    const std::uint64_t units = left < kMaxLoopUnits ? left : kMaxLoopUnits;
    for_job<I, F> job;
    job.participate = &for_job<I, F>::run;
    job.units = units;
    job.grain = g;
    job.site = &loop_site_tag<F>;
    job.first = first;
    job.body = &body;
    start_loop(job);
    left -= units;
    first = loop_at(first, units);
  }
}

// parallel_reduce's partial results: blocks of `block` iterations, each
// reduced from the identity, combined along one fixed binary tree over the
// block indices. A participant folds the blocks of a run of consecutive
// batches as far up the tree as the run allows; what it cannot fold (the
// edges of its run) it leaves as pieces, which the starter folds at the end.
// So the result depends only on the range and the block size, never on which
// worker ran what.
template <class T>
struct reduce_piece {
  unsigned level;       // the node covers blocks [index << level, (index + 1) << level)
  std::uint64_t index;
  T value;
};

template <class T, class Combine>
class reduce_tree {
 public:
  reduce_tree(std::uint64_t blocks, Combine* combine) : blocks_(blocks), combine_(combine) {}

  // Adds node (level, index): folds it with its left sibling when that is
  // the top of the stack, or lifts it when it has no right sibling.
  void push(std::vector<reduce_piece<T>>& stack, unsigned level, std::uint64_t index, T value) const {
    for (;;) {
      if ((index & 1) != 0 && !stack.empty() && stack.back().level == level &&
          stack.back().index == index - 1) {
        T merged = (*combine_)(std::move(stack.back().value), std::move(value));
        stack.pop_back();
        value = std::move(merged);
        index >>= 1;
        ++level;
        continue;
      }
      if ((index & 1) == 0 && lone(level, index)) {
        index >>= 1;
        ++level;
        continue;
      }
      stack.push_back(reduce_piece<T>{level, index, std::move(value)});
      return;
    }
  }

  // Folds every piece of every participant into the root. After a
  // cancellation the pieces may leave gaps: then it folds what is there, in
  // block order (identity when nothing ran).
  T finish(std::vector<reduce_piece<T>>& pieces, const T& identity) const {
    std::sort(pieces.begin(), pieces.end(), [](const reduce_piece<T>& a, const reduce_piece<T>& b) {
      return a.index << a.level < b.index << b.level;
    });
    // In block order the pieces tile [0, blocks); one pass with a stack folds
    // each with its sibling exactly as push() does within a run.
    std::vector<reduce_piece<T>> stack;
    for (auto& p : pieces) push(stack, p.level, p.index, std::move(p.value));
    if (stack.empty()) return identity;
    T result = std::move(stack.front().value);
    for (std::size_t k = 1; k < stack.size(); ++k) {
      result = (*combine_)(std::move(result), std::move(stack[k].value));
    }
    return result;
  }

  bool is_root(unsigned level, std::uint64_t index) const noexcept {
    return index == 0 && (std::uint64_t{1} << level) >= blocks_;
  }

 private:
  // Node (level, index) with index even has no right sibling: the sibling's
  // first block lies past the end. The root has none either.
  bool lone(unsigned level, std::uint64_t index) const noexcept {
    if (is_root(level, index)) return false;
    return ((index + 1) << level) >= blocks_;
  }

  std::uint64_t blocks_;
  Combine* combine_;
};

template <class I, class T, class Body, class Combine>
struct reduce_job : loop_job {
  I first;
  std::uint64_t size;   // iterations
  std::uint64_t block;  // iterations per block
  const T* identity;
  Body* body;
  Combine* combine;
  reduce_tree<T, Combine>* tree;
  std::mutex mutex;  // guards pieces
  std::vector<reduce_piece<T>> pieces;

  static void run(loop_job& base, loop_claimer& claims) {
    auto& self = static_cast<reduce_job&>(base);
    std::vector<reduce_piece<T>> stack;
    std::uint64_t run_end = ~std::uint64_t{0};
    auto hand_in = [&] {
      if (stack.empty()) return;
      std::lock_guard<std::mutex> lock(self.mutex);
      for (auto& p : stack) self.pieces.push_back(std::move(p));
      stack.clear();
    };
    try {
      std::uint64_t b = 0;
      std::uint64_t e = 0;
      while (claims.next(&b, &e)) {
        if (b != run_end) hand_in();  // not contiguous with the last batch: a new run
        for (std::uint64_t k = b; k < e; ++k) {
          const std::uint64_t lo = k * self.block;
          const std::uint64_t hi = self.size - lo < self.block ? self.size : lo + self.block;
          T partial = (*self.body)(loop_at(self.first, lo), loop_at(self.first, hi), T(*self.identity));
          self.tree->push(stack, 0, k, std::move(partial));
        }
        run_end = e;
      }
      hand_in();
    } catch (...) {
      loop_fail(base, claims);
    }
  }
};

template <class I, class T, class Body, class Combine>
T run_reduce(I first, std::uint64_t size, std::uint64_t g, const T& identity, Body& body, Combine& combine) {
  // The block: the grain, else a size fixed by the range alone (so that the
  // result is too), about 4096 blocks.
  const std::uint64_t block = g != 0 ? g : std::bit_floor(std::max<std::uint64_t>(1, size / 4096));
  const std::uint64_t blocks = size / block + (size % block != 0 ? 1 : 0);
  reduce_tree<T, Combine> tree(blocks, &combine);
  reduce_job<I, T, Body, Combine> job;
  job.participate = &reduce_job<I, T, Body, Combine>::run;
  job.units = blocks;
  job.grain = g != 0 ? 1 : 0;
  job.site = &loop_site_tag<Body>;
  job.first = first;
  job.size = size;
  job.block = block;
  job.identity = &identity;
  job.body = &body;
  job.combine = &combine;
  job.tree = &tree;
  start_loop(job);
  return tree.finish(job.pieces, identity);
}

// [first, first + size) with blocks of g iterations (0: chosen from size).
// More than 2^62 blocks (a grain that small on a range of a 64-bit type):
// two halves split on a block boundary, combined in order.
template <class I, class T, class Body, class Combine>
T reduce_range(I first, std::uint64_t size, std::uint64_t g, const T& identity, Body& body, Combine& combine) {
  if (size == 0) return identity;
  if (g != 0) {
    const std::uint64_t blocks = size / g + (size % g != 0 ? 1 : 0);
    if (blocks > kMaxLoopUnits) {
      const std::uint64_t half = blocks / 2 * g;
      T a = run_reduce(first, half, g, identity, body, combine);
      return combine(std::move(a), reduce_range(loop_at(first, half), size - half, g, identity, body, combine));
    }
  }
  return run_reduce(first, size, g, identity, body, combine);
}

}  // namespace detail

// Runs body over [first, last), possibly in parallel, and returns when every
// iteration has run. I is an integral type (signed or unsigned, any width)
// or a random-access iterator. body is called either as body(i) for each i,
// or, when it accepts two arguments, as body(begin, end) for sub-ranges.
// Without a grain the batch adapts to the body's cost as the loop runs.
// Called on a thread that is not a worker, the loop runs on the default
// runtime (the caller blocks). The first exception a body throws stops the
// claiming of new batches and is rethrown here once running batches end.
// A cancellation of the group the caller runs in stops it the same way, but
// returns normally (some iterations did not run; see the top of this file).
//
//   std::vector<double> x(1 << 20, 1.0);
//   mote::parallel_for(std::size_t{0}, x.size(), [&](std::size_t i) { x[i] *= 2; });
//   mote::parallel_for(x.begin(), x.end(), [](auto b, auto e) { std::fill(b, e, 0.0); });
//
//   mote::task_group g;  // a search that stops at the first hit
//   g.spawn([&] { mote::parallel_for(0, n, [&](int i) { if (hit(i)) g.cancel(); }); });
//   bool stopped = g.wait() == mote::task_group_status::canceled;
template <class I, class F>
  requires detail::loop_index<I> && (std::invocable<F&, I> || std::invocable<F&, I, I>)
void parallel_for(I first, I last, F&& body) {
  detail::run_for(first, last, 0, body);
}

// The same with a fixed batch of g iterations (a sub-range body is never
// given more than g at once).
//
//   mote::parallel_for(0, n, mote::grain(64), [&](int b, int e) { for (int i = b; i < e; ++i) y[i] = f(i); });
template <class I, class F>
  requires detail::loop_index<I> && (std::invocable<F&, I> || std::invocable<F&, I, I>)
void parallel_for(I first, I last, grain g, F&& body) {
  detail::run_for(first, last, detail::checked_grain(g), body);
}

// Reduces [first, last): body(begin, end, acc) folds a sub-range into acc
// and returns it; combine(a, b) merges the partial result of an earlier part
// of the range (a) with a later one (b). Each block of the range (the grain,
// or a size fixed by the length of the range when none is given) is reduced
// from a copy of identity, and the blocks' results are combined along a
// binary tree fixed by the length and the block: the result is the same on
// every run, whatever the number of workers and whoever ran what, even for
// floating-point sums. It equals the serial fold when combine is associative
// and identity is its identity. combine need not be commutative. After a
// cancellation of the caller's group the result is unspecified (the blocks
// that ran, combined in order).
//
//   double sum = mote::parallel_reduce(std::size_t{0}, x.size(), 0.0,
//       [&](std::size_t b, std::size_t e, double acc) { for (; b < e; ++b) acc += x[b]; return acc; },
//       std::plus<>());
template <class I, class T, class Body, class Combine>
  requires detail::loop_index<I> && std::invocable<Body&, I, I, T> && std::invocable<Combine&, T, T>
T parallel_reduce(I first, I last, T identity, Body&& body, Combine&& combine) {
  return detail::reduce_range(first, detail::loop_size(first, last), 0, identity, body, combine);
}

// The same with blocks (and batches) of g iterations.
//
//   long hits = mote::parallel_reduce(0, n, mote::grain(1024), 0L,
//       [&](int b, int e, long acc) { for (int i = b; i < e; ++i) acc += test(i); return acc; },
//       [](long a, long b) { return a + b; });
template <class I, class T, class Body, class Combine>
  requires detail::loop_index<I> && std::invocable<Body&, I, I, T> && std::invocable<Combine&, T, T>
T parallel_reduce(I first, I last, grain g, T identity, Body&& body, Combine&& combine) {
  const std::uint64_t block = detail::checked_grain(g);
  return detail::reduce_range(first, detail::loop_size(first, last), block, identity, body, combine);
}

// One T per worker, made on first use by the worker that uses it, for
// accumulating in loop bodies without atomics; visit them after the loop.
// A per_worker belongs to one runtime: the caller's when it is made on a
// worker, else the default runtime. local() from any other thread is a
// usage_error. for_each and clear must not run while a loop uses local().
//
//   mote::per_worker<std::vector<long>> hist([] { return std::vector<long>(256); });
//   mote::parallel_for(std::size_t{0}, data.size(), [&](std::size_t i) { ++hist.local()[data[i]]; });
//   std::vector<long> total(256);
//   hist.for_each([&](std::vector<long>& h) { for (int b = 0; b < 256; ++b) total[b] += h[b]; });
template <class T>
class per_worker {
 public:
  per_worker()
    requires std::default_initializable<T>
      : per_worker([] { return T(); }) {}
  template <class Init>
    requires std::invocable<Init&> && std::constructible_from<T, std::invoke_result_t<Init&>>
  explicit per_worker(Init init) : per_worker(home_runtime(), std::move(init)) {}
  // Bound to rt (its workers' local() copies).
  template <class Init>
    requires std::invocable<Init&> && std::constructible_from<T, std::invoke_result_t<Init&>>
  per_worker(runtime& rt, Init init)
      : runtime_(&detail::runtime_access::impl(rt)),
        slots_(std::make_unique<slot[]>(rt.num_workers())),
        count_(rt.num_workers()),
        make_(std::make_unique<maker<Init>>(std::move(init))) {}

  // The calling worker's T, made by the initializer on its first use.
  T& local() {
    detail::worker* w = detail::current_worker;
    if (MOTE_UNLIKELY(w == nullptr || &w->runtime() != runtime_)) {
      throw usage_error("mote::per_worker::local() called on a thread that is not a worker of its runtime");
    }
    slot& s = slots_[w->index()];
    if (MOTE_UNLIKELY(!s.value)) s.value.emplace(make_->make());
    return *s.value;
  }

  // f(T&) for every T made so far, in worker order.
  template <class F>
  void for_each(F&& f) {
    for (unsigned i = 0; i < count_; ++i) {
      if (slots_[i].value) f(*slots_[i].value);
    }
  }
  // combine over every T made so far, in worker order, starting from init.
  template <class U, class Op>
  U combine(U init, Op&& op) {
    for_each([&](T& v) { init = op(std::move(init), v); });
    return init;
  }
  // Destroys every T; the next local() makes a fresh one.
  void clear() noexcept {
    for (unsigned i = 0; i < count_; ++i) slots_[i].value.reset();
  }

 private:
  struct alignas(detail::cache_line) slot {
    std::optional<T> value;
  };
  struct maker_base {
    virtual ~maker_base() = default;
    virtual T make() = 0;
  };
  template <class Init>
  struct maker final : maker_base {
    explicit maker(Init f) : init(std::move(f)) {}
    T make() override { return T(init()); }
    Init init;
  };
  static runtime& home_runtime() {
    runtime* rt = runtime::current();
    return rt != nullptr ? *rt : runtime::default_runtime();
  }

  detail::runtime_impl* runtime_;
  std::unique_ptr<slot[]> slots_;
  unsigned count_;
  std::unique_ptr<maker_base> make_;
};

}  // namespace mote
