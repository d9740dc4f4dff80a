// sparselu: LU factorisation (no pivoting) of a sparse matrix of nb x nb
// blocks, each bs x bs floats or absent, after the Barcelona OpenMP Tasks
// Suite's sparselu as it is described. Step kk factors the diagonal block,
// then updates its row blocks (fwd) and its column blocks (bdiv) as tasks,
// then every trailing block (ii, jj) with both a column and a row block
// present (bmod, allocating it when absent: fill-in) as tasks. Two kernels
// differ in who creates the tasks:
//
//   sparselu_single   one thread, inside a single; a taskwait ends each phase
//   sparselu_for      every thread, inside worksharing loops over the blocks;
//                     a loop's implicit barrier ends each phase
//
//   sparselu_single_untied, sparselu_for_untied   the same with untied tasks
//
//   OMP_NUM_THREADS=2 ./bench_omp_sparselu --kernel sparselu_for --nb 30 --bs 32
//
// The factors are checked against a serial factorisation of the same matrix
// done once by the program (the same operations, block by block).
#include <math.h>

#include "omp_harness.h"

struct sparselu_state {
  int nb;
  int bs;
  float** initial;   // nb * nb blocks as generated (NULL: absent)
  float** blocks;    // the matrix being factored
  float** expected;  // the serial factorisation, made on the first check
};

static float* sparselu_block(int bs) {
  float* p = malloc((size_t)bs * bs * sizeof(float));
  if (p == NULL) omp_bench_fail("out of memory");
  return p;
}

// In-place LU of a diagonal block: L (unit diagonal) below, U on and above.
static void sparselu_lu0(float* d, int bs) {
  for (int k = 0; k < bs; ++k) {
    for (int i = k + 1; i < bs; ++i) {
      d[i * bs + k] /= d[k * bs + k];
      float lik = d[i * bs + k];
      for (int j = k + 1; j < bs; ++j) d[i * bs + j] -= lik * d[k * bs + j];
    }
  }
}

// Row block: r = L^-1 r, L the unit lower factor in d.
static void sparselu_fwd(const float* d, float* r, int bs) {
  for (int k = 0; k < bs; ++k) {
    for (int i = k + 1; i < bs; ++i) {
      float lik = d[i * bs + k];
      for (int j = 0; j < bs; ++j) r[i * bs + j] -= lik * r[k * bs + j];
    }
  }
}

// Column block: c = c U^-1, U the upper factor in d.
static void sparselu_bdiv(const float* d, float* c, int bs) {
  for (int i = 0; i < bs; ++i) {
    for (int k = 0; k < bs; ++k) {
      c[i * bs + k] /= d[k * bs + k];
      float cik = c[i * bs + k];
      for (int j = k + 1; j < bs; ++j) c[i * bs + j] -= cik * d[k * bs + j];
    }
  }
}

// Trailing block: a -= c * r.
static void sparselu_bmod(const float* c, const float* r, float* a, int bs) {
  for (int i = 0; i < bs; ++i) {
    for (int k = 0; k < bs; ++k) {
      float cik = c[i * bs + k];
      for (int j = 0; j < bs; ++j) a[i * bs + j] -= cik * r[k * bs + j];
    }
  }
}

static float* sparselu_fill_in(float** m, int index, int bs) {
  if (m[index] == NULL) {
    m[index] = sparselu_block(bs);
    memset(m[index], 0, (size_t)bs * bs * sizeof(float));
  }
  return m[index];
}

static void sparselu_serial(float** m, int nb, int bs) {
  for (int kk = 0; kk < nb; ++kk) {
    sparselu_lu0(m[kk * nb + kk], bs);
    for (int jj = kk + 1; jj < nb; ++jj) {
      if (m[kk * nb + jj] != NULL) sparselu_fwd(m[kk * nb + kk], m[kk * nb + jj], bs);
    }
    for (int ii = kk + 1; ii < nb; ++ii) {
      if (m[ii * nb + kk] != NULL) sparselu_bdiv(m[kk * nb + kk], m[ii * nb + kk], bs);
    }
    for (int ii = kk + 1; ii < nb; ++ii) {
      if (m[ii * nb + kk] == NULL) continue;
      for (int jj = kk + 1; jj < nb; ++jj) {
        if (m[kk * nb + jj] == NULL) continue;
        sparselu_bmod(m[ii * nb + kk], m[kk * nb + jj], sparselu_fill_in(m, ii * nb + jj, bs), bs);
      }
    }
  }
}

#define SPARSELU_SINGLE(name, tiedness)                                                              \
static void name(float** m, int nb, int bs) {                                                        \
OMP_BENCH_PRAGMA(omp parallel)                                                                       \
OMP_BENCH_PRAGMA(omp single)                                                                         \
  for (int kk = 0; kk < nb; ++kk) {                                                                  \
    sparselu_lu0(m[kk * nb + kk], bs);                                                               \
    for (int jj = kk + 1; jj < nb; ++jj) {                                                           \
      if (m[kk * nb + jj] != NULL) {                                                                 \
OMP_BENCH_PRAGMA(omp task firstprivate(kk, jj) tiedness)                                             \
        sparselu_fwd(m[kk * nb + kk], m[kk * nb + jj], bs);                                          \
      }                                                                                              \
    }                                                                                                \
    for (int ii = kk + 1; ii < nb; ++ii) {                                                           \
      if (m[ii * nb + kk] != NULL) {                                                                 \
OMP_BENCH_PRAGMA(omp task firstprivate(kk, ii) tiedness)                                             \
        sparselu_bdiv(m[kk * nb + kk], m[ii * nb + kk], bs);                                         \
      }                                                                                              \
    }                                                                                                \
OMP_BENCH_PRAGMA(omp taskwait)                                                                       \
    for (int ii = kk + 1; ii < nb; ++ii) {                                                           \
      if (m[ii * nb + kk] == NULL) continue;                                                         \
      for (int jj = kk + 1; jj < nb; ++jj) {                                                         \
        if (m[kk * nb + jj] == NULL) continue;                                                       \
        float* a = sparselu_fill_in(m, ii * nb + jj, bs);                                            \
OMP_BENCH_PRAGMA(omp task firstprivate(kk, ii, jj, a) tiedness)                                      \
        sparselu_bmod(m[ii * nb + kk], m[kk * nb + jj], a, bs);                                      \
      }                                                                                              \
    }                                                                                                \
OMP_BENCH_PRAGMA(omp taskwait)                                                                       \
  }                                                                                                  \
}
SPARSELU_SINGLE(sparselu_single, )
SPARSELU_SINGLE(sparselu_single_untied, untied)

// Every thread runs the kk loop; the worksharing loops hand out the blocks,
// and the thread that gets a block creates its task. Fill-in of block (ii, jj)
// is allocated by the thread that got row ii, the only one touching it then.
#define SPARSELU_FOR(name, tiedness)                                                                 \
static void name(float** m, int nb, int bs) {                                                        \
OMP_BENCH_PRAGMA(omp parallel)                                                                       \
  for (int kk = 0; kk < nb; ++kk) {                                                                  \
OMP_BENCH_PRAGMA(omp single)                                                                         \
    sparselu_lu0(m[kk * nb + kk], bs);                                                               \
OMP_BENCH_PRAGMA(omp for nowait)                                                                     \
    for (int jj = kk + 1; jj < nb; ++jj) {                                                           \
      if (m[kk * nb + jj] != NULL) {                                                                 \
OMP_BENCH_PRAGMA(omp task firstprivate(kk, jj) tiedness)                                             \
        sparselu_fwd(m[kk * nb + kk], m[kk * nb + jj], bs);                                          \
      }                                                                                              \
    }                                                                                                \
OMP_BENCH_PRAGMA(omp for)                                                                            \
    for (int ii = kk + 1; ii < nb; ++ii) {                                                           \
      if (m[ii * nb + kk] != NULL) {                                                                 \
OMP_BENCH_PRAGMA(omp task firstprivate(kk, ii) tiedness)                                             \
        sparselu_bdiv(m[kk * nb + kk], m[ii * nb + kk], bs);                                         \
      }                                                                                              \
    }                                                                                                \
    /* The barrier that ended the loop also completed its tasks and the fwd ones. */                 \
OMP_BENCH_PRAGMA(omp for)                                                                            \
    for (int ii = kk + 1; ii < nb; ++ii) {                                                           \
      if (m[ii * nb + kk] == NULL) continue;                                                         \
      for (int jj = kk + 1; jj < nb; ++jj) {                                                         \
        if (m[kk * nb + jj] == NULL) continue;                                                       \
        float* a = sparselu_fill_in(m, ii * nb + jj, bs);                                            \
OMP_BENCH_PRAGMA(omp task firstprivate(kk, ii, jj, a) tiedness)                                      \
        sparselu_bmod(m[ii * nb + kk], m[kk * nb + jj], a, bs);                                      \
      }                                                                                              \
    }                                                                                                \
  }                                                                                                  \
}
SPARSELU_FOR(sparselu_for, )
SPARSELU_FOR(sparselu_for_untied, untied)

// Copies the initial matrix into `m`, dropping the fill-in of a former run.
static void sparselu_restore(const struct sparselu_state* s, float** m) {
  size_t bytes = (size_t)s->bs * s->bs * sizeof(float);
  for (int i = 0; i < s->nb * s->nb; ++i) {
    if (s->initial[i] == NULL) {
      free(m[i]);
      m[i] = NULL;
      continue;
    }
    if (m[i] == NULL) m[i] = sparselu_block(s->bs);
    memcpy(m[i], s->initial[i], bytes);
  }
}

static void prepare_sparselu(void* ctx) {
  struct sparselu_state* s = ctx;
  sparselu_restore(s, s->blocks);
}

static int64_t sparselu_checksum(const struct sparselu_state* s) {
  uint64_t h = OMP_BENCH_HASH_SEED;
  size_t bytes = (size_t)s->bs * s->bs * sizeof(float);
  for (int i = 0; i < s->nb * s->nb; ++i) {
    unsigned char present = s->blocks[i] != NULL;
    h = omp_bench_hash(h, &present, 1);
    if (present) h = omp_bench_hash(h, s->blocks[i], bytes);
  }
  return omp_bench_result(h);
}

static int64_t run_sparselu_single(void* ctx) {
  struct sparselu_state* s = ctx;
  sparselu_single(s->blocks, s->nb, s->bs);
  return sparselu_checksum(s);
}

static int64_t run_sparselu_for(void* ctx) {
  struct sparselu_state* s = ctx;
  sparselu_for(s->blocks, s->nb, s->bs);
  return sparselu_checksum(s);
}

static int64_t run_sparselu_single_untied(void* ctx) {
  struct sparselu_state* s = ctx;
  sparselu_single_untied(s->blocks, s->nb, s->bs);
  return sparselu_checksum(s);
}

static int64_t run_sparselu_for_untied(void* ctx) {
  struct sparselu_state* s = ctx;
  sparselu_for_untied(s->blocks, s->nb, s->bs);
  return sparselu_checksum(s);
}

static int check_sparselu(void* ctx, int64_t result) {
  (void)result;
  struct sparselu_state* s = ctx;
  int count = s->nb * s->nb;
  if (s->expected == NULL) {
    s->expected = calloc((size_t)count, sizeof(float*));
    if (s->expected == NULL) omp_bench_fail("out of memory");
    sparselu_restore(s, s->expected);
    sparselu_serial(s->expected, s->nb, s->bs);
  }
  // The same operations in the same order give the same floats; the tolerance
  // only spares a compiler's freedom to contract differently in the two copies.
  for (int b = 0; b < count; ++b) {
    if ((s->blocks[b] == NULL) != (s->expected[b] == NULL)) {
      fprintf(stderr, "bench: sparselu block %d is %s, serially %s\n", b,
              s->blocks[b] ? "present" : "absent", s->expected[b] ? "present" : "absent");
      return 0;
    }
    if (s->blocks[b] == NULL) continue;
    for (int e = 0; e < s->bs * s->bs; ++e) {
      float got = s->blocks[b][e];
      float want = s->expected[b][e];
      if (!(fabsf(got - want) <= 1e-4f * (1.0f + fabsf(want)))) {
        fprintf(stderr, "bench: sparselu block %d element %d is %g, serially %g\n", b, e, got,
                want);
        return 0;
      }
    }
  }
  return 1;
}

// The matrix: the diagonal and the blocks next to it, and about one in ten
// of the others, picked by a hash of the position; values in [-1, 1) with a
// diagonal large enough to need no pivoting.
static void sparselu_generate(struct sparselu_state* s) {
  int nb = s->nb;
  int bs = s->bs;
  uint64_t x = 0x6a09e667f3bcc909ULL;
  for (int ii = 0; ii < nb; ++ii) {
    for (int jj = 0; jj < nb; ++jj) {
      uint64_t h = (uint64_t)(ii * nb + jj + 1) * 0x9e3779b97f4a7c15ULL;
      h ^= h >> 29;
      int present = ii == jj || ii - jj == 1 || jj - ii == 1 || h % 10 == 0;
      if (!present) continue;
      float* block = sparselu_block(bs);
      for (int e = 0; e < bs * bs; ++e) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        block[e] = (float)((double)(x >> 11) / 4503599627370496.0 - 1.0);
      }
      if (ii == jj) {
        for (int d = 0; d < bs; ++d) block[d * bs + d] += (float)(2 * nb * bs);
      }
      s->initial[ii * nb + jj] = block;
    }
  }
}

int main(int argc, char** argv) {
  struct omp_bench_options o = omp_bench_parse(argc, argv);
  static const char* const kernels[] = {"sparselu_single", "sparselu_for", "sparselu_single_untied",
                                        "sparselu_for_untied"};
  int64_t (*const runs[])(void*) = {run_sparselu_single, run_sparselu_for, run_sparselu_single_untied,
                                    run_sparselu_for_untied};
  omp_bench_known_kernels(&o, kernels, 4);
  struct sparselu_state s = {(int)omp_bench_long(&o, "--nb", 30),
                             (int)omp_bench_long(&o, "--bs", 32), NULL, NULL, NULL};
  if (s.nb < 1 || s.nb > 1000) omp_bench_usage_error("--nb", "out of 1..1000");
  if (s.bs < 1 || s.bs > 1000) omp_bench_usage_error("--bs", "out of 1..1000");
  s.initial = calloc((size_t)s.nb * s.nb, sizeof(float*));
  s.blocks = calloc((size_t)s.nb * s.nb, sizeof(float*));
  if (s.initial == NULL || s.blocks == NULL) omp_bench_fail("out of memory");
  sparselu_generate(&s);
  int present = 0;
  for (int i = 0; i < s.nb * s.nb; ++i) present += s.initial[i] != NULL;
  for (int i = 0; i < 4; ++i) {
    if (!omp_bench_wants(&o, kernels[i])) continue;
    struct omp_bench_kernel k = {
        .name = kernels[i], .run = runs[i], .check = check_sparselu, .prepare = prepare_sparselu, .ctx = &s};
    omp_bench_extra(&k, "nb", s.nb);
    omp_bench_extra(&k, "bs", s.bs);
    omp_bench_extra(&k, "blocks", present);
    omp_bench_time(&o, &k);
  }
  for (int i = 0; i < s.nb * s.nb; ++i) {
    free(s.initial[i]);
    free(s.blocks[i]);
    if (s.expected != NULL) free(s.expected[i]);
  }
  free(s.initial);
  free(s.blocks);
  free(s.expected);
  return 0;
}
