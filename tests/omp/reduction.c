// Reductions on parallel regions and loops, every operator (+ * min max & |
// ^ && ||) over integer and floating types, array sections, and a
// user-defined reduction (declare reduction), checked against a serial run.
// The operands are chosen so that every order of combining gives the same
// answer (integers, and floating-point values that add exactly).
#include <limits.h>
#include <omp.h>

#include "omp_check.h"

enum { kN = 10007 };

static long value_of(int i) { return (long)((i * 7919L) % 1000) - 500; }

static void region_reductions(void) {
  int n = omp_get_max_threads();
  long sum = 0, prod = 1, mn = LONG_MAX, mx = LONG_MIN;
  unsigned band = ~0u, bor = 0, bxor = 0;
  int land = 1, lor = 0;
  double dsum = 0.5;
#pragma omp parallel reduction(+ : sum, dsum) reduction(* : prod) reduction(min : mn) \
    reduction(max : mx) reduction(& : band) reduction(| : bor) reduction(^ : bxor)   \
    reduction(&& : land) reduction(|| : lor)
  {
    int id = omp_get_thread_num();
    sum += id + 1;
    dsum += 0.25;
    prod *= 3;
    if (id * 10 < mn) mn = id * 10;
    if (id * 10 > mx) mx = id * 10;
    band &= ~(1u << id);
    bor |= 1u << id;
    bxor ^= 1u << (id % 3);
    land = land && (id < 1000);
    lor = lor || (id == n - 1);
  }
  long want_prod = 1;
  unsigned want_xor = 0, want_and = ~0u, want_or = 0;
  for (int id = 0; id < n; ++id) {
    want_prod *= 3;
    want_xor ^= 1u << (id % 3);
    want_and &= ~(1u << id);
    want_or |= 1u << id;
  }
  CHECK(sum == (long)n * (n + 1) / 2, "region +: %ld", sum);
  CHECK(dsum == 0.5 + 0.25 * n, "region + (double): %g", dsum);
  CHECK(prod == want_prod, "region *: %ld, %ld expected", prod, want_prod);
  CHECK(mn == 0 && mx == (n - 1) * 10, "region min %ld max %ld", mn, mx);
  CHECK(band == want_and && bor == want_or && bxor == want_xor, "region & %x | %x ^ %x", band, bor,
        bxor);
  CHECK(land == 1 && lor == 1, "region && %d || %d", land, lor);
}

static void loop_reductions(void) {
  long sum = 0, mn = LONG_MAX, mx = LONG_MIN;
  unsigned long prod = 1, band = ~0ul, bor = 0, bxor = 0;
  int land = 1, lor = 0, land2 = 1, lor2 = 0;
  double dsum = 0, dmin = 1e300, dmax = -1e300;
  float fsum = 0;
#pragma omp parallel for schedule(dynamic, 13) reduction(+ : sum, dsum, fsum)                   \
    reduction(* : prod) reduction(min : mn, dmin) reduction(max : mx, dmax) reduction(& : band) \
    reduction(| : bor) reduction(^ : bxor) reduction(&& : land, land2) reduction(|| : lor, lor2)
  for (int i = 0; i < kN; ++i) {
    long v = value_of(i);
    sum += v;
    dsum += (double)v * 0.5;             // exact: halves of small integers
    fsum += 1.0f;                        // exact below 2^24
    prod *= (unsigned long)(2 * i + 1);  // odd factors: wraps, but the same in any order
    if (v < mn) mn = v;
    if (v > mx) mx = v;
    if (v * 0.5 < dmin) dmin = v * 0.5;
    if (v * 0.5 > dmax) dmax = v * 0.5;
    band &= ~(1ul << (i % 61));
    bor |= 1ul << (i % 37);
    bxor ^= (unsigned long)i * 0x9E3779B97F4A7C15ul;
    land = land && (v > -1000);
    land2 = land2 && (i != 4321);
    lor = lor || (i == 9999);
    lor2 = lor2 || (v > 1000);
  }
  long s_sum = 0, s_mn = LONG_MAX, s_mx = LONG_MIN;
  unsigned long s_prod = 1, s_and = ~0ul, s_or = 0, s_xor = 0;
  for (int i = 0; i < kN; ++i) {
    long v = value_of(i);
    s_sum += v;
    s_prod *= (unsigned long)(2 * i + 1);
    if (v < s_mn) s_mn = v;
    if (v > s_mx) s_mx = v;
    s_and &= ~(1ul << (i % 61));
    s_or |= 1ul << (i % 37);
    s_xor ^= (unsigned long)i * 0x9E3779B97F4A7C15ul;
  }
  CHECK(sum == s_sum, "for +: %ld, serial %ld", sum, s_sum);
  CHECK(dsum == (double)s_sum * 0.5, "for + (double): %.17g, serial %.17g", dsum, s_sum * 0.5);
  CHECK(fsum == (float)kN, "for + (float): %g", (double)fsum);
  CHECK(prod == s_prod, "for *: %lx, serial %lx", prod, s_prod);
  CHECK(mn == s_mn && mx == s_mx, "for min %ld max %ld, serial %ld %ld", mn, mx, s_mn, s_mx);
  CHECK(dmin == s_mn * 0.5 && dmax == s_mx * 0.5, "for min/max (double) %g %g", dmin, dmax);
  CHECK(band == s_and && bor == s_or && bxor == s_xor, "for & %lx | %lx ^ %lx, serial %lx %lx %lx",
        band, bor, bxor, s_and, s_or, s_xor);
  CHECK(land == 1 && land2 == 0 && lor == 1 && lor2 == 0, "for && %d %d || %d %d", land, land2, lor,
        lor2);
}

// A reduction over an array section, in a worksharing loop inside a region.
static void array_reduction(void) {
  long hist[16] = {0};
  long want[16] = {0};
  for (int i = 0; i < kN; ++i) want[(i * 31) % 16] += i;
#pragma omp parallel
  {
#pragma omp for reduction(+ : hist [0:16]) schedule(static, 5)
    for (int i = 0; i < kN; ++i) hist[(i * 31) % 16] += i;
  }
  for (int b = 0; b < 16; ++b) {
    CHECK(hist[b] == want[b], "histogram bin %d: %ld, serial %ld", b, hist[b], want[b]);
  }
}

// declare reduction: the smallest value and the first index where it occurs.
struct argmin {
  long value;
  int index;
};

static void argmin_combine(struct argmin* out, const struct argmin* in) {
  if (in->value < out->value || (in->value == out->value && in->index < out->index)) *out = *in;
}

#pragma omp declare reduction(argmin_op                            \
                              : struct argmin                      \
                              : argmin_combine(&omp_out, &omp_in)) \
    initializer(omp_priv = (struct argmin){LONG_MAX, INT_MAX})

static void user_defined_reduction(void) {
  struct argmin best = {LONG_MAX, INT_MAX};
#pragma omp parallel for reduction(argmin_op : best) schedule(guided, 3)
  for (int i = 0; i < kN; ++i) {
    struct argmin here = {value_of(i), i};
    argmin_combine(&best, &here);
  }
  struct argmin want = {LONG_MAX, INT_MAX};
  for (int i = 0; i < kN; ++i) {
    struct argmin here = {value_of(i), i};
    argmin_combine(&want, &here);
  }
  CHECK(best.value == want.value && best.index == want.index,
        "declare reduction: (%ld at %d), serial (%ld at %d)", best.value, best.index, want.value,
        want.index);
}

int main(void) {
  for (int r = 0; r < OMPT_SIZE(10, 2); ++r) {
    region_reductions();
    loop_reductions();
    array_reduction();
    user_defined_reduction();
  }
  puts("reduction: ok");
  return 0;
}
