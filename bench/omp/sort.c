// sort: a parallel merge sort after Cilk's cilksort, as the Barcelona OpenMP
// Tasks Suite describes it: split the array into four quarters and sort them
// as four tasks, merge them pairwise as two tasks, then merge the two halves;
// a merge is itself parallel (split the longer run at its middle, find that
// key's place in the other run by binary search, merge the two sides as
// tasks). Below --sort-cutoff elements a quarter is quicksorted serially
// (insertion sort below 20), below --merge-cutoff a merge is serial.
//
//   OMP_NUM_THREADS=2 ./bench_omp_sort --n 1000000
//
// The answer is checked without a second sort: the array must be in order and
// hold the same values as the input (count, sum and a sum of hashes).
#include "omp_harness.h"

typedef int32_t sort_key;

struct sort_state {
  size_t n;
  size_t sort_cutoff;
  size_t merge_cutoff;
  sort_key* input;
  sort_key* data;
  sort_key* scratch;
  uint64_t input_sum;
  uint64_t input_hash_sum;
};

static uint64_t sort_mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  return x ^ (x >> 33);
}

static void sort_insertion(sort_key* a, size_t n) {
  for (size_t i = 1; i < n; ++i) {
    sort_key v = a[i];
    size_t j = i;
    for (; j > 0 && a[j - 1] > v; --j) a[j] = a[j - 1];
    a[j] = v;
  }
}

static void sort_swap(sort_key* a, sort_key* b) {
  sort_key t = *a;
  *a = *b;
  *b = t;
}

// Quicksort with the median of three as pivot; recurses on the smaller side
// so the stack stays logarithmic.
static void sort_quick(sort_key* a, size_t n) {
  while (n > 20) {
    size_t mid = n / 2;
    if (a[mid] < a[0]) sort_swap(&a[mid], &a[0]);
    if (a[n - 1] < a[0]) sort_swap(&a[n - 1], &a[0]);
    if (a[n - 1] < a[mid]) sort_swap(&a[n - 1], &a[mid]);
    sort_key pivot = a[mid];
    size_t i = 0;
    size_t j = n - 1;
    for (;;) {
      while (a[i] < pivot) ++i;
      while (pivot < a[j]) --j;
      if (i >= j) break;
      sort_swap(&a[i], &a[j]);
      ++i;
      --j;
    }
    // a[0..j] <= pivot <= a[j+1..n)
    size_t left = j + 1;
    if (left < n - left) {
      sort_quick(a, left);
      a += left;
      n -= left;
    } else {
      sort_quick(a + left, n - left);
      n = left;
    }
  }
  sort_insertion(a, n);
}

static void sort_merge_serial(const sort_key* a, size_t na, const sort_key* b, size_t nb,
                              sort_key* out) {
  size_t i = 0;
  size_t j = 0;
  while (i < na && j < nb) *out++ = b[j] < a[i] ? b[j++] : a[i++];
  while (i < na) *out++ = a[i++];
  while (j < nb) *out++ = b[j++];
}

// The first position in b[0..n) whose key is not less than `key`.
static size_t sort_lower_bound(const sort_key* b, size_t n, sort_key key) {
  size_t lo = 0;
  size_t hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (b[mid] < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

static void sort_merge(const sort_key* a, size_t na, const sort_key* b, size_t nb, sort_key* out,
                       size_t cutoff) {
  if (na < nb) {
    const sort_key* t = a;
    a = b;
    b = t;
    size_t tn = na;
    na = nb;
    nb = tn;
  }
  if (na + nb <= cutoff || nb == 0) {
    sort_merge_serial(a, na, b, nb, out);
    return;
  }
  size_t ma = na / 2;
  size_t mb = sort_lower_bound(b, nb, a[ma]);
  out[ma + mb] = a[ma];
#pragma omp task
  sort_merge(a, ma, b, mb, out, cutoff);
  sort_merge(a + ma + 1, na - ma - 1, b + mb, nb - mb, out + ma + mb + 1, cutoff);
#pragma omp taskwait
}

// Sorts a[0..n) in place, with tmp[0..n) as scratch.
static void sort_tasks(sort_key* a, sort_key* tmp, size_t n, const struct sort_state* s) {
  if (n <= s->sort_cutoff) {
    sort_quick(a, n);
    return;
  }
  size_t q = n / 4;
  sort_key* a1 = a;
  sort_key* a2 = a + q;
  sort_key* a3 = a + 2 * q;
  sort_key* a4 = a + 3 * q;
#pragma omp task
  sort_tasks(a1, tmp, q, s);
#pragma omp task
  sort_tasks(a2, tmp + q, q, s);
#pragma omp task
  sort_tasks(a3, tmp + 2 * q, q, s);
  sort_tasks(a4, tmp + 3 * q, n - 3 * q, s);
#pragma omp taskwait
#pragma omp task
  sort_merge(a1, q, a2, q, tmp, s->merge_cutoff);
  sort_merge(a3, q, a4, n - 3 * q, tmp + 2 * q, s->merge_cutoff);
#pragma omp taskwait
  sort_merge(tmp, 2 * q, tmp + 2 * q, n - 2 * q, a, s->merge_cutoff);
}

static void prepare_sort(void* ctx) {
  struct sort_state* s = ctx;
  memcpy(s->data, s->input, s->n * sizeof(sort_key));
}

static int64_t run_sort(void* ctx) {
  struct sort_state* s = ctx;
#pragma omp parallel
  {
#pragma omp single
    sort_tasks(s->data, s->scratch, s->n, s);
  }
  // Position-weighted, so a misplaced key changes it.
  uint64_t h = 0;
  for (size_t i = 0; i < s->n; ++i) h += (uint64_t)(uint32_t)s->data[i] * (i + 1);
  return omp_bench_result(h);
}

static int check_sort(void* ctx, int64_t result) {
  (void)result;
  const struct sort_state* s = ctx;
  uint64_t sum = 0;
  uint64_t hash_sum = 0;
  for (size_t i = 0; i < s->n; ++i) {
    if (i > 0 && s->data[i - 1] > s->data[i]) return 0;
    sum += (uint32_t)s->data[i];
    hash_sum += sort_mix((uint32_t)s->data[i]);
  }
  return sum == s->input_sum && hash_sum == s->input_hash_sum;
}

int main(int argc, char** argv) {
  struct omp_bench_options o = omp_bench_parse(argc, argv);
  static const char* const kernels[] = {"sort"};
  omp_bench_known_kernels(&o, kernels, 1);
  struct sort_state s = {0};
  long n = omp_bench_long(&o, "--n", 1000000);
  if (n < 4) omp_bench_usage_error("--n", "below 4");
  s.n = (size_t)n;
  s.sort_cutoff = (size_t)omp_bench_long(&o, "--sort-cutoff", 2048);
  s.merge_cutoff = (size_t)omp_bench_long(&o, "--merge-cutoff", 2048);
  if (s.sort_cutoff < 4) s.sort_cutoff = 4;  // a quarter of fewer than one key would not shrink
  s.input = malloc(s.n * sizeof(sort_key));
  s.data = malloc(s.n * sizeof(sort_key));
  s.scratch = malloc(s.n * sizeof(sort_key));
  if (s.input == NULL || s.data == NULL || s.scratch == NULL) omp_bench_fail("out of memory");
  uint64_t x = 88172645463325252ULL;
  for (size_t i = 0; i < s.n; ++i) {
    x ^= x << 13;  // xorshift64: a fixed, reproducible input
    x ^= x >> 7;
    x ^= x << 17;
    s.input[i] = (sort_key)(uint32_t)(x >> 32);
    s.input_sum += (uint32_t)s.input[i];
    s.input_hash_sum += sort_mix((uint32_t)s.input[i]);
  }
  struct omp_bench_kernel k = {
      .name = "sort", .run = run_sort, .check = check_sort, .prepare = prepare_sort, .ctx = &s};
  omp_bench_extra(&k, "n", (long long)s.n);
  omp_bench_extra(&k, "sort_cutoff", (long long)s.sort_cutoff);
  omp_bench_extra(&k, "merge_cutoff", (long long)s.merge_cutoff);
  omp_bench_time(&o, &k);
  free(s.input);
  free(s.data);
  free(s.scratch);
  return 0;
}
