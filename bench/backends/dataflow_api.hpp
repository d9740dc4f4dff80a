// What the data-flow suite's kernels (bench/dataflow/kernels.hpp) and the
// backends' data-flow parts share: the accesses a task names, and the serial
// flow, the reference every runtime's answer is checked against.
//
// A kernel issues its tasks, in program order, through a flow `w`:
//
//   w.spawn(f, dep::inout(x), dep::in(p, n), ...)   a task running f(); its
//                                accesses follow the callable (the flow
//                                reorders them as its runtime wants)
//   dep::in / dep::inout         reads / reads and writes (an object, or n
//                                elements from a pointer; as in OpenMP's
//                                depend, only the first address identifies
//                                the data)
//   dep::commutative             read-modify-write that may run in any order
//                                but not at the same time as its neighbours
//   dep::sum(x)                  a task reduction with + into the double x:
//                                f then takes a double& (this task's private
//                                copy) per sum, in order
//   w.reduction_scope(x, body)   the spawns of body that reduce into x; only
//                                OpenMP needs it (taskgroup task_reduction,
//                                which waits at its end), the others just
//                                call body()
//   w.wait()                     (the driver's) every task has finished
#pragma once

#include <array>
#include <cstddef>
#include <utility>

namespace mote_bench::dataflow {

// ---------------------------------------------------------------- accesses

namespace dep {

template <class T>
struct in_t {
  T* p;
  std::size_t n;  // 0: an object, else a range of n elements
};
template <class T>
struct inout_t {
  T* p;
  std::size_t n;
};
template <class T>
struct commutative_t {
  T* p;
  std::size_t n;
};
struct sum_t {
  double* target;
};

template <class T>
in_t<T> in(T& x) {
  return {&x, 0};
}
template <class T>
in_t<T> in(T* p, std::size_t n) {
  return {p, n};
}
template <class T>
inout_t<T> inout(T& x) {
  return {&x, 0};
}
template <class T>
inout_t<T> inout(T* p, std::size_t n) {
  return {p, n};
}
template <class T>
commutative_t<T> commutative(T& x) {
  return {&x, 0};
}
template <class T>
commutative_t<T> commutative(T* p, std::size_t n) {
  return {p, n};
}
inline sum_t sum(double& x) { return {&x}; }

// Which kind an access is, for the flows that count them.
template <class A>
struct kind {
  static constexpr int in = 0, inout = 0, commutative = 0, sum = 0;
};
template <class T>
struct kind<in_t<T>> {
  static constexpr int in = 1, inout = 0, commutative = 0, sum = 0;
};
template <class T>
struct kind<inout_t<T>> {
  static constexpr int in = 0, inout = 1, commutative = 0, sum = 0;
};
template <class T>
struct kind<commutative_t<T>> {
  static constexpr int in = 0, inout = 0, commutative = 1, sum = 0;
};
template <>
struct kind<sum_t> {
  static constexpr int in = 0, inout = 0, commutative = 0, sum = 1;
};

template <class... A>
inline constexpr int count_sums = (0 + ... + kind<A>::sum);

// The reduction targets of an access list, in order.
template <class... A>
std::array<double*, count_sums<A...>> sum_targets(const A&... a) {
  std::array<double*, count_sums<A...>> out{};
  [[maybe_unused]] std::size_t i = 0;
  (
      [&] {
        if constexpr (kind<A>::sum == 1) out[i++] = a.target;
      }(),
      ...);
  return out;
}

// f(*slot(0), *slot(1), ...): a task's callable with one double& per sum.
template <std::size_t N, class F, class Slot>
void call_with_sums(F& f, Slot&& slot) {
  [&]<std::size_t... I>(std::index_sequence<I...>) { f(slot(I)...); }(std::make_index_sequence<N>{});
}

}  // namespace dep

// Runs every task at once, in program order: the serial twin, and the
// reference every runtime's answer is checked against.
struct serial_flow {
  template <class F, class... A>
  void spawn(F&& f, const A&... a) {
    auto targets = dep::sum_targets(a...);
    dep::call_with_sums<targets.size()>(f, [&](std::size_t i) -> double& { return *targets[i]; });
  }
  template <class Body>
  void reduction_scope(double&, Body&& body) {
    body();
  }
  void wait() {}
};

}  // namespace mote_bench::dataflow
