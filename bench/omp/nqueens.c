// nqueens: counts the ways to place n queens on an n x n board, row by row,
// one task per column that fits at each row, each task with its own copy of
// the board so far (the Barcelona OpenMP Tasks Suite's nqueens, as it is
// described). A task is a handful of comparisons and a copy of a few bytes.
//
//   OMP_NUM_THREADS=2 ./bench_omp_nqueens --n 11
//
// Rows at or below --cutoff (default n: every row) spawn tasks; deeper rows
// recurse serially. The count is checked against the known number of
// solutions (OEIS A000170).
#include "omp_harness.h"

enum { QUEENS_MAX = 16 };

static const long long queens_known[QUEENS_MAX + 1] = {
    1, 1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596, 2279184, 14772512};

struct queens_state {
  int n;
  int cutoff;
};

// Whether a queen in `row` at `col` is attacked by one of the rows above.
static int queens_fits(const signed char* cols, int row, int col) {
  for (int r = 0; r < row; ++r) {
    int d = cols[r] - col;
    if (d == 0 || d == row - r || d == r - row) return 0;
  }
  return 1;
}

static long long queens_serial(int n, int row, signed char* cols) {
  if (row == n) return 1;
  long long count = 0;
  for (int col = 0; col < n; ++col) {
    if (!queens_fits(cols, row, col)) continue;
    cols[row] = (signed char)col;
    count += queens_serial(n, row + 1, cols);
  }
  return count;
}

// `cols` lives in the parent's frame, which waits for this task before it
// returns; each child copies it before adding its own queen.
static long long queens_tasks(int n, int row, const signed char* cols, int cutoff) {
  if (row == n) return 1;
  if (row >= cutoff) {
    signed char board[QUEENS_MAX];
    if (row > 0) memcpy(board, cols, (size_t)row);  // cols is NULL at row 0
    return queens_serial(n, row, board);
  }
  long long counts[QUEENS_MAX] = {0};
  for (int col = 0; col < n; ++col) {
    if (!queens_fits(cols, row, col)) continue;
#pragma omp task firstprivate(col) shared(counts)
    {
      signed char board[QUEENS_MAX];
      if (row > 0) memcpy(board, cols, (size_t)row);
      board[row] = (signed char)col;
      counts[col] = queens_tasks(n, row + 1, board, cutoff);
    }
  }
#pragma omp taskwait
  long long total = 0;
  for (int col = 0; col < n; ++col) total += counts[col];
  return total;
}

static int64_t run_queens(void* ctx) {
  const struct queens_state* s = ctx;
  long long answer = 0;
#pragma omp parallel
  {
#pragma omp single
    answer = queens_tasks(s->n, 0, NULL, s->cutoff);
  }
  return answer;
}

static int check_queens(void* ctx, int64_t answer) {
  const struct queens_state* s = ctx;
  return answer == queens_known[s->n];
}

int main(int argc, char** argv) {
  struct omp_bench_options o = omp_bench_parse(argc, argv);
  static const char* const kernels[] = {"nqueens"};
  omp_bench_known_kernels(&o, kernels, 1);
  int n = (int)omp_bench_long(&o, "--n", 11);
  if (n < 1 || n > QUEENS_MAX) omp_bench_usage_error("--n", "out of 1..16");
  struct queens_state s = {n, (int)omp_bench_long(&o, "--cutoff", n)};
  struct omp_bench_kernel k = {
      .name = "nqueens", .run = run_queens, .check = check_queens, .ctx = &s};
  omp_bench_extra(&k, "n", s.n);
  omp_bench_extra(&k, "cutoff", s.cutoff);
  omp_bench_time(&o, &k);
  return 0;
}
