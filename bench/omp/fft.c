// fft: a recursive radix-2 Cooley-Tukey FFT with tasks (the Barcelona OpenMP
// Tasks Suite's fft is a recursive Cooley-Tukey with tasks; this one is the
// plain radix-2 form). A transform of length n splits into the transforms of
// the even and the odd samples, two tasks, then combines them with butterflies,
// in tasks over slices of --cutoff butterflies; transforms of at most --cutoff
// points run serially.
//
//   OMP_NUM_THREADS=2 ./bench_omp_fft --log2n 19
//
// The answer is checked against a known answer that costs O(n) each: eight
// spectral bins computed directly as sums (the DFT's definition), and
// Parseval's identity over the whole spectrum.
#include <math.h>

#include "omp_harness.h"

struct fft_complex {
  double re;
  double im;
};

struct fft_state {
  size_t n;
  size_t cutoff;
  struct fft_complex* input;
  struct fft_complex* output;
  struct fft_complex* twiddle;  // twiddle[m] = exp(-2 pi i m / n), m < n
};

static struct fft_complex fft_mul(struct fft_complex a, struct fft_complex b) {
  struct fft_complex r = {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
  return r;
}

// out[k] and out[k + half] from the half-length transforms in place, for k in
// [lo, hi); the twiddles of a length-2*half transform are every step-th entry.
static void fft_butterflies(struct fft_complex* out, size_t half, size_t lo, size_t hi,
                            const struct fft_complex* twiddle, size_t step) {
  for (size_t k = lo; k < hi; ++k) {
    struct fft_complex t = fft_mul(twiddle[k * step], out[k + half]);
    struct fft_complex e = out[k];
    out[k].re = e.re + t.re;
    out[k].im = e.im + t.im;
    out[k + half].re = e.re - t.re;
    out[k + half].im = e.im - t.im;
  }
}

// out[0..n) = the DFT of in[0], in[stride], ..., in[(n - 1) * stride].
static void fft_serial(const struct fft_complex* in, size_t stride, struct fft_complex* out,
                       size_t n, const struct fft_complex* twiddle, size_t step) {
  if (n == 1) {
    out[0] = in[0];
    return;
  }
  size_t half = n / 2;
  fft_serial(in, 2 * stride, out, half, twiddle, 2 * step);
  fft_serial(in + stride, 2 * stride, out + half, half, twiddle, 2 * step);
  fft_butterflies(out, half, 0, half, twiddle, step);
}

static void fft_tasks(const struct fft_complex* in, size_t stride, struct fft_complex* out,
                      size_t n, const struct fft_complex* twiddle, size_t step, size_t cutoff) {
  if (n <= cutoff) {
    fft_serial(in, stride, out, n, twiddle, step);
    return;
  }
  size_t half = n / 2;
#pragma omp task
  fft_tasks(in, 2 * stride, out, half, twiddle, 2 * step, cutoff);
  fft_tasks(in + stride, 2 * stride, out + half, half, twiddle, 2 * step, cutoff);
#pragma omp taskwait
  for (size_t lo = 0; lo < half; lo += cutoff) {
    size_t hi = lo + cutoff < half ? lo + cutoff : half;
#pragma omp task firstprivate(lo, hi)
    fft_butterflies(out, half, lo, hi, twiddle, step);
  }
#pragma omp taskwait
}

static int64_t run_fft(void* ctx) {
  struct fft_state* s = ctx;
#pragma omp parallel
  {
#pragma omp single
    fft_tasks(s->input, 1, s->output, s->n, s->twiddle, 1, s->cutoff);
  }
  return omp_bench_result(omp_bench_hash(OMP_BENCH_HASH_SEED, s->output, s->n * sizeof *s->output));
}

static int check_fft(void* ctx, int64_t result) {
  (void)result;
  const struct fft_state* s = ctx;
  size_t n = s->n;
  // A bin is a sum of n terms of magnitude at most sqrt(2): rounding, in the
  // transform and in the direct sum, stays far below 1e-9 * n, while a wrong
  // twiddle or a misplaced half moves a bin by about sqrt(n).
  double tolerance = 1e-9 * (double)n;
  size_t bins[8] = {0, 1, 2, n / 2, n - 1, n / 3, (n / 7) * 3 + 1, n / 2 + 5};
  for (int b = 0; b < 8; ++b) {
    size_t k = bins[b] % n;
    double re = 0;
    double im = 0;
    size_t m = 0;  // (j * k) mod n, kept incrementally
    for (size_t j = 0; j < n; ++j) {
      struct fft_complex t = fft_mul(s->input[j], s->twiddle[m]);
      re += t.re;
      im += t.im;
      m += k;
      if (m >= n) m -= n;
    }
    if (fabs(re - s->output[k].re) > tolerance || fabs(im - s->output[k].im) > tolerance) {
      fprintf(stderr, "bench: fft bin %zu is (%g, %g), its sum (%g, %g)\n", k, s->output[k].re,
              s->output[k].im, re, im);
      return 0;
    }
  }
  double energy_in = 0;
  double energy_out = 0;
  for (size_t j = 0; j < n; ++j) {
    energy_in += s->input[j].re * s->input[j].re + s->input[j].im * s->input[j].im;
    energy_out += s->output[j].re * s->output[j].re + s->output[j].im * s->output[j].im;
  }
  // Parseval: the sum of |X_k|^2 is n times the sum of |x_j|^2.
  return fabs(energy_out - (double)n * energy_in) <= 1e-9 * (double)n * energy_in;
}

int main(int argc, char** argv) {
  struct omp_bench_options o = omp_bench_parse(argc, argv);
  static const char* const kernels[] = {"fft"};
  omp_bench_known_kernels(&o, kernels, 1);
  long log2n = omp_bench_long(&o, "--log2n", 19);
  if (log2n < 1 || log2n > 26) omp_bench_usage_error("--log2n", "out of 1..26");
  struct fft_state s = {0};
  s.n = (size_t)1 << log2n;
  s.cutoff = (size_t)omp_bench_long(&o, "--cutoff", 1024);
  if (s.cutoff < 1) s.cutoff = 1;
  s.input = malloc(s.n * sizeof *s.input);
  s.output = malloc(s.n * sizeof *s.output);
  s.twiddle = malloc(s.n * sizeof *s.twiddle);
  if (s.input == NULL || s.output == NULL || s.twiddle == NULL) omp_bench_fail("out of memory");
  const double two_pi = 6.283185307179586476925286766559;
  for (size_t m = 0; m < s.n; ++m) {
    double angle = -two_pi * (double)m / (double)s.n;
    s.twiddle[m].re = cos(angle);
    s.twiddle[m].im = sin(angle);
  }
  uint64_t x = 0x2545f4914f6cdd1dULL;
  for (size_t j = 0; j < s.n; ++j) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;  // a fixed input in [-1, 1)
    s.input[j].re = (double)(x >> 11) / 4503599627370496.0 - 1.0;
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    s.input[j].im = (double)(x >> 11) / 4503599627370496.0 - 1.0;
  }
  struct omp_bench_kernel k = {.name = "fft", .run = run_fft, .check = check_fft, .ctx = &s};
  omp_bench_extra(&k, "n", (long long)s.n);
  omp_bench_extra(&k, "cutoff", (long long)s.cutoff);
  omp_bench_time(&o, &k);
  free(s.input);
  free(s.output);
  free(s.twiddle);
  return 0;
}
