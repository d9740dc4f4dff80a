// The fork-join kernels, written once for every runtime.
//
// A kernel is a template over a parallel wrapper `Par`, the only thing that
// differs between runtimes. A wrapper provides two static functions:
//
//   Par::fork2(f, g)        run f() and g(), possibly in parallel; return when
//                           both are done. g is the spawned one: a runtime that
//                           spawns one side spawns g and runs f itself.
//   Par::spawn_each(n, f)   run f(0) ... f(n-1), each as its own task; return
//                           when all are done.
//
// The serial backend (bench/backends/serial.hpp) calls them in order, so the serial twin is the same
// source with every spawn turned into a plain call.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

namespace mote_bench::fork_join {

// ---- fib: the classic spawn-cost kernel. No cutoff: every call with n >= 2
// spawns, so the runtime's spawn and join are almost all the work.

template <class Par>
std::int64_t fib(int n) {
  if (n < 2) return n;
  std::int64_t a = 0;
  std::int64_t b = 0;
  Par::fork2([&] { a = fib<Par>(n - 1); }, [&] { b = fib<Par>(n - 2); });
  return a + b;
}

// The answer, computed without recursion, to check fib against.
constexpr std::int64_t fib_expected(int n) {
  std::int64_t a = 0;
  std::int64_t b = 1;
  for (int i = 0; i < n; ++i) {
    std::int64_t next = a + b;
    a = b;
    b = next;
  }
  return a;
}

// The number of fork2 calls fib(n) makes: one per call with n >= 2. Counted by
// walking the same recursion (fib(33) - 1 = 3524577 for n = 32).
inline std::int64_t fib_spawns(int n) {
  if (n < 2) return 0;
  return 1 + fib_spawns(n - 1) + fib_spawns(n - 2);
}

// ---- nqueens: count the placements of n non-attacking queens, as in BOTS:
// at each row spawn one task per column; the task copies its parent's board,
// places its queen, and when the placement is legal recurses into the next row.

constexpr int kMaxQueens = 16;

struct board {
  std::array<std::int8_t, kMaxQueens> column;  // column[r]: the queen of row r
};

// Whether the queen just placed on row `row` is attacked by one above it.
inline bool queen_is_safe(const board& b, int row) {
  const int c = b.column[row];
  for (int r = 0; r < row; ++r) {
    const int d = b.column[r] - c;
    if (d == 0 || d == row - r || d == r - row) return false;
  }
  return true;
}

template <class Par>
std::int64_t nqueens_from(int n, int row, const board& parent) {
  if (row == n) return 1;
  std::array<std::int64_t, kMaxQueens> solutions{};
  Par::spawn_each(n, [&](int col) {
    board b;  // this task's own copy of the board, as in BOTS
    std::memcpy(b.column.data(), parent.column.data(), static_cast<std::size_t>(row));
    b.column[row] = static_cast<std::int8_t>(col);
    if (queen_is_safe(b, row)) solutions[col] = nqueens_from<Par>(n, row + 1, b);
  });
  std::int64_t total = 0;
  for (int c = 0; c < n; ++c) total += solutions[c];
  return total;
}

template <class Par>
std::int64_t nqueens(int n) {
  board empty_board{};
  return nqueens_from<Par>(n, 0, empty_board);
}

// Known solution counts (OEIS A000170), to check nqueens against.
constexpr std::int64_t nqueens_expected(int n) {
  constexpr std::int64_t known[] = {1,   1,    0,     0,     2,      10,     4,      40,    92,
                                    352, 724,  2680,  14200, 73712,  365596, 2279184, 14772512};
  return n >= 0 && n <= 16 ? known[n] : -1;
}

// The number of tasks nqueens(n) spawns: n per row visited short of the last.
inline std::int64_t nqueens_tasks_from(int n, int row, board& b) {
  if (row == n) return 0;
  std::int64_t tasks = n;
  for (int c = 0; c < n; ++c) {
    b.column[row] = static_cast<std::int8_t>(c);
    if (queen_is_safe(b, row)) tasks += nqueens_tasks_from(n, row + 1, b);
  }
  return tasks;
}

inline std::int64_t nqueens_tasks(int n) {
  board b{};
  return nqueens_tasks_from(n, 0, b);
}

}  // namespace mote_bench::fork_join
