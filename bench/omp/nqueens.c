// nqueens: counts the ways to place n queens on an n x n board, row by row,
// one task per column that fits at each row, each task with its own copy of
// the board so far (the Barcelona OpenMP Tasks Suite's nqueens, as it is
// described). A task is a handful of comparisons and a copy of a few bytes.
//
//   OMP_NUM_THREADS=2 ./bench_omp_nqueens --n 11 --kernel nqueens_manual
//
// Kernels: BOTS' six variants (omp_harness.h): nqueens (a task per fitting
// column at every row), nqueens_if_clause (rows at or past --cutoff, default
// 3 as in BOTS, make if(0) tasks), nqueens_manual (those rows recurse
// serially), each also _untied. The count is checked against the known number of
// solutions (OEIS A000170).
#include "omp_harness.h"

enum { QUEENS_MAX = 16 };

static const long long queens_known[QUEENS_MAX + 1] = {
    1, 1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596, 2279184, 14772512};

struct queens_state {
  int n;
  int cutoff;
  enum omp_bench_cut cut;
  int untied;
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
// returns; each child copies it before adding its own queen. One recursion
// per tiedness (omp_harness.h, "BOTS' variants"): rows at or past the cut-off
// make if(0) tasks (if_clause) or recurse serially (manual).
#define QUEENS_TASKS(name, tiedness)                                                           \
  static long long name(int n, int row, const signed char* cols, const struct queens_state* s) { \
    if (row == n) return 1;                                                                    \
    if (s->cut == OMP_BENCH_MANUAL && row >= s->cutoff) {                                      \
      signed char board[QUEENS_MAX];                                                           \
      if (row > 0) memcpy(board, cols, (size_t)row); /* cols is NULL at row 0 */               \
      return queens_serial(n, row, board);                                                     \
    }                                                                                          \
    const int spawn = s->cut != OMP_BENCH_IF_CLAUSE || row < s->cutoff;                        \
    long long counts[QUEENS_MAX] = {0};                                                        \
    for (int col = 0; col < n; ++col) {                                                        \
      if (!queens_fits(cols, row, col)) continue;                                              \
      OMP_BENCH_PRAGMA(omp task firstprivate(col) shared(counts) if(spawn) tiedness)           \
      {                                                                                        \
        signed char board[QUEENS_MAX];                                                         \
        if (row > 0) memcpy(board, cols, (size_t)row);                                         \
        board[row] = (signed char)col;                                                         \
        counts[col] = name(n, row + 1, board, s);                                              \
      }                                                                                        \
    }                                                                                          \
    OMP_BENCH_PRAGMA(omp taskwait)                                                             \
    long long total = 0;                                                                       \
    for (int col = 0; col < n; ++col) total += counts[col];                                    \
    return total;                                                                              \
  }
QUEENS_TASKS(queens_tied, )
QUEENS_TASKS(queens_untied, untied)

static int64_t run_queens(void* ctx) {
  const struct queens_state* s = ctx;
  long long answer = 0;
#pragma omp parallel
  {
#pragma omp single
    answer = s->untied ? queens_untied(s->n, 0, NULL, s) : queens_tied(s->n, 0, NULL, s);
  }
  return answer;
}

static int check_queens(void* ctx, int64_t answer) {
  const struct queens_state* s = ctx;
  return answer == queens_known[s->n];
}

int main(int argc, char** argv) {
  struct omp_bench_options o = omp_bench_parse(argc, argv);
  omp_bench_known_variants(&o, "nqueens");
  int n = (int)omp_bench_long(&o, "--n", 11);
  if (n < 1 || n > QUEENS_MAX) omp_bench_usage_error("--n", "out of 1..16");
  const int cutoff = (int)omp_bench_long(&o, "--cutoff", 3);
  for (int v = 0; v < OMP_BENCH_VARIANTS; ++v) {
    const struct omp_bench_variant* var = &omp_bench_variants[v];
    char name[64];
    omp_bench_variant_name(name, sizeof name, "nqueens", var);
    if (!omp_bench_wants(&o, name)) continue;
    struct queens_state s = {n, cutoff, var->cut, var->untied};
    struct omp_bench_kernel k = {.name = name, .run = run_queens, .check = check_queens, .ctx = &s};
    omp_bench_extra(&k, "n", s.n);
    omp_bench_extra(&k, "cutoff", var->cut == OMP_BENCH_NO_CUTOFF ? -1 : cutoff);
    omp_bench_time(&o, &k);
  }
  return 0;
}
