// strassen: C = A * B for n x n matrices by Strassen's recursion, the seven
// half-size products of each level as seven tasks and the four quadrants of C
// assembled as four more (the Barcelona OpenMP Tasks Suite's strassen, as it
// is described: tasks on blocks). Blocks of at most --cutoff rows (or of odd
// size) are multiplied by the plain triple loop.
//
//   OMP_NUM_THREADS=2 ./bench_omp_strassen --n 512 --cutoff 64
//
// The answer is checked by Freivalds' test, O(n^2) a vector: for random x,
// C x must equal A (B x), here with two vectors.
#include <math.h>

#include "omp_harness.h"

struct strassen_state {
  int n;
  int cutoff;
  double* a;
  double* b;
  double* c;
};

// C = A + sign * B, h x h blocks with their leading dimensions.
static void strassen_add(int h, const double* a, int lda, const double* b, int ldb, double sign,
                         double* c, int ldc) {
  for (int i = 0; i < h; ++i) {
    for (int j = 0; j < h; ++j) c[i * ldc + j] = a[i * lda + j] + sign * b[i * ldb + j];
  }
}

// C = A * B by the triple loop (i, k, j: unit stride through B and C).
static void strassen_plain(int n, const double* a, int lda, const double* b, int ldb, double* c,
                           int ldc) {
  for (int i = 0; i < n; ++i) {
    double* ci = c + i * ldc;
    for (int j = 0; j < n; ++j) ci[j] = 0;
    for (int k = 0; k < n; ++k) {
      double aik = a[i * lda + k];
      const double* bk = b + k * ldb;
      for (int j = 0; j < n; ++j) ci[j] += aik * bk[j];
    }
  }
}

static double* strassen_alloc(size_t count) {
  double* p = malloc(count * sizeof(double));
  if (p == NULL) omp_bench_fail("out of memory");
  return p;
}

static void strassen_tasks(int n, const double* a, int lda, const double* b, int ldb, double* c,
                           int ldc, int cutoff);

// M = (X1 + sx * X2) * (Y1 + sy * Y2), with X2 or Y2 NULL for a lone operand.
static void strassen_product(int h, const double* x1, const double* x2, double sx, int ldx,
                             const double* y1, const double* y2, double sy, int ldy, double* m,
                             int cutoff) {
  double* xs = NULL;
  double* ys = NULL;
  const double* x = x1;
  const double* y = y1;
  int ldxs = ldx;
  int ldys = ldy;
  if (x2 != NULL) {
    xs = strassen_alloc((size_t)h * h);
    strassen_add(h, x1, ldx, x2, ldx, sx, xs, h);
    x = xs;
    ldxs = h;
  }
  if (y2 != NULL) {
    ys = strassen_alloc((size_t)h * h);
    strassen_add(h, y1, ldy, y2, ldy, sy, ys, h);
    y = ys;
    ldys = h;
  }
  strassen_tasks(h, x, ldxs, y, ldys, m, h, cutoff);
  free(xs);
  free(ys);
}

static void strassen_tasks(int n, const double* a, int lda, const double* b, int ldb, double* c,
                           int ldc, int cutoff) {
  if (n <= cutoff || n % 2 != 0) {
    strassen_plain(n, a, lda, b, ldb, c, ldc);
    return;
  }
  int h = n / 2;
  const double* a11 = a;
  const double* a12 = a + h;
  const double* a21 = a + h * lda;
  const double* a22 = a + h * lda + h;
  const double* b11 = b;
  const double* b12 = b + h;
  const double* b21 = b + h * ldb;
  const double* b22 = b + h * ldb + h;
  size_t block = (size_t)h * h;
  double* m = strassen_alloc(7 * block);
  double* m1 = m;
  double* m2 = m + block;
  double* m3 = m + 2 * block;
  double* m4 = m + 3 * block;
  double* m5 = m + 4 * block;
  double* m6 = m + 5 * block;
  double* m7 = m + 6 * block;
#pragma omp task
  strassen_product(h, a11, a22, 1, lda, b11, b22, 1, ldb, m1, cutoff);
#pragma omp task
  strassen_product(h, a21, a22, 1, lda, b11, NULL, 0, ldb, m2, cutoff);
#pragma omp task
  strassen_product(h, a11, NULL, 0, lda, b12, b22, -1, ldb, m3, cutoff);
#pragma omp task
  strassen_product(h, a22, NULL, 0, lda, b21, b11, -1, ldb, m4, cutoff);
#pragma omp task
  strassen_product(h, a11, a12, 1, lda, b22, NULL, 0, ldb, m5, cutoff);
#pragma omp task
  strassen_product(h, a21, a11, -1, lda, b11, b12, 1, ldb, m6, cutoff);
  strassen_product(h, a12, a22, -1, lda, b21, b22, 1, ldb, m7, cutoff);
#pragma omp taskwait
  // C11 = M1 + M4 - M5 + M7, C12 = M3 + M5, C21 = M2 + M4, C22 = M1 - M2 + M3 + M6.
#pragma omp task
  for (int i = 0; i < h; ++i) {
    for (int j = 0; j < h; ++j) {
      size_t k = (size_t)i * h + j;
      c[i * ldc + j] = m1[k] + m4[k] - m5[k] + m7[k];
    }
  }
#pragma omp task
  for (int i = 0; i < h; ++i) {
    for (int j = 0; j < h; ++j) {
      size_t k = (size_t)i * h + j;
      c[i * ldc + h + j] = m3[k] + m5[k];
    }
  }
#pragma omp task
  for (int i = 0; i < h; ++i) {
    for (int j = 0; j < h; ++j) {
      size_t k = (size_t)i * h + j;
      c[(h + i) * ldc + j] = m2[k] + m4[k];
    }
  }
  for (int i = 0; i < h; ++i) {
    for (int j = 0; j < h; ++j) {
      size_t k = (size_t)i * h + j;
      c[(h + i) * ldc + h + j] = m1[k] - m2[k] + m3[k] + m6[k];
    }
  }
#pragma omp taskwait
  free(m);
}

static int64_t run_strassen(void* ctx) {
  struct strassen_state* s = ctx;
#pragma omp parallel
  {
#pragma omp single
    strassen_tasks(s->n, s->a, s->n, s->b, s->n, s->c, s->n, s->cutoff);
  }
  return omp_bench_result(
      omp_bench_hash(OMP_BENCH_HASH_SEED, s->c, (size_t)s->n * s->n * sizeof(double)));
}

// y = M x for an n x n matrix.
static void strassen_matvec(int n, const double* m, const double* x, double* y) {
  for (int i = 0; i < n; ++i) {
    double sum = 0;
    for (int j = 0; j < n; ++j) sum += m[(size_t)i * n + j] * x[j];
    y[i] = sum;
  }
}

static int check_strassen(void* ctx, int64_t result) {
  (void)result;
  const struct strassen_state* s = ctx;
  int n = s->n;
  double* x = strassen_alloc((size_t)n);
  double* bx = strassen_alloc((size_t)n);
  double* abx = strassen_alloc((size_t)n);
  double* cx = strassen_alloc((size_t)n);
  uint64_t seed = 0x9e3779b97f4a7c15ULL;
  int ok = 1;
  for (int trial = 0; trial < 2 && ok; ++trial) {
    for (int j = 0; j < n; ++j) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      x[j] = (double)(seed >> 11) / 9007199254740992.0 - 0.5;
    }
    strassen_matvec(n, s->b, x, bx);
    strassen_matvec(n, s->a, bx, abx);
    strassen_matvec(n, s->c, x, cx);
    // Entries of A and B lie in [-1, 1): rounding stays far below 1e-9 * n^2,
    // while one wrong entry of C moves C x by about that entry times x_j.
    double tolerance = 1e-9 * (double)n * (double)n;
    for (int i = 0; i < n && ok; ++i) {
      if (!(fabs(abx[i] - cx[i]) <= tolerance)) {
        fprintf(stderr, "bench: strassen (C x)[%d] = %g, A (B x) = %g\n", i, cx[i], abx[i]);
        ok = 0;
      }
    }
  }
  free(x);
  free(bx);
  free(abx);
  free(cx);
  return ok;
}

int main(int argc, char** argv) {
  struct omp_bench_options o = omp_bench_parse(argc, argv);
  static const char* const kernels[] = {"strassen"};
  omp_bench_known_kernels(&o, kernels, 1);
  struct strassen_state s = {(int)omp_bench_long(&o, "--n", 512),
                             (int)omp_bench_long(&o, "--cutoff", 64), NULL, NULL, NULL};
  if (s.n < 1 || s.n > 8192) omp_bench_usage_error("--n", "out of 1..8192");
  size_t count = (size_t)s.n * s.n;
  s.a = strassen_alloc(count);
  s.b = strassen_alloc(count);
  s.c = strassen_alloc(count);
  uint64_t x = 0x853c49e6748fea9bULL;
  for (size_t i = 0; i < count; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    s.a[i] = (double)(x >> 11) / 4503599627370496.0 - 1.0;
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    s.b[i] = (double)(x >> 11) / 4503599627370496.0 - 1.0;
  }
  struct omp_bench_kernel k = {
      .name = "strassen", .run = run_strassen, .check = check_strassen, .ctx = &s};
  omp_bench_extra(&k, "n", s.n);
  omp_bench_extra(&k, "cutoff", s.cutoff);
  omp_bench_time(&o, &k);
  free(s.a);
  free(s.b);
  free(s.c);
  return 0;
}
