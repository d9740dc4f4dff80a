// uts: Unbalanced Tree Search, after the Barcelona OpenMP Tasks Suite's uts as
// it is described: count the nodes of a random tree that exists only as a rule
// for making each node's children from the node, one task per child. The tree
// is binomial: the root has --root-children children; every other node has
// --m children with probability q (--q-ppm, in millionths) and none otherwise,
// so subtrees are small on average (q * m < 1) but a few are very deep and
// wide -- the imbalance a scheduler has to even out. The defaults are the
// shape of UTS' T3 tree (2000, 8, 0.124875: 2.6 million nodes). Each task
// hashes its node, makes its children's tasks and adds up their counts.
//
//   OMP_NUM_THREADS=2 ./bench_omp_uts --root-children 2000 --m 8 --q-ppm 124875
//
// Kernels: uts (tied tasks) and uts_untied.
//
// UTS derives a child from its parent with SHA-1; here a node is a 64-bit
// state and child k's state is a mix of the parent's and k (the splitmix64
// finaliser), which is splittable in the same way: every node is the same
// whatever the order the tree is walked in. The count is checked against a
// serial walk made once by the program.
#include "omp_harness.h"

enum { UTS_MAX_M = 64 };

struct uts_state {
  int root_children;
  int m;
  uint64_t q_threshold;  // a node has children when its draw is below this
  long long expected;    // the serial walk's count, 0 until made
  int untied;
};

static uint64_t uts_mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static uint64_t uts_child(uint64_t parent, int k) {
  return uts_mix(parent ^ uts_mix((uint64_t)k + 1));
}

static int uts_children(const struct uts_state* s, uint64_t node) {
  return uts_mix(node) < s->q_threshold ? s->m : 0;
}

static long long uts_serial(const struct uts_state* s, uint64_t node) {
  int children = uts_children(s, node);
  long long count = 1;
  for (int k = 0; k < children; ++k) count += uts_serial(s, uts_child(node, k));
  return count;
}

// One recursion per tiedness (omp_harness.h, "BOTS' variants"; BOTS' uts
// has no cut-off variants: its tree is too unbalanced for one).
#define UTS_TASKS(name, root_name, tiedness)                                                   \
  static long long name(const struct uts_state* s, uint64_t node) {                           \
    int children = uts_children(s, node);                                                      \
    if (children == 0) return 1;                                                               \
    long long counts[UTS_MAX_M];                                                               \
    for (int k = 0; k < children; ++k) {                                                       \
      OMP_BENCH_PRAGMA(omp task firstprivate(k) shared(counts) tiedness)                       \
      counts[k] = name(s, uts_child(node, k));                                                 \
    }                                                                                          \
    OMP_BENCH_PRAGMA(omp taskwait)                                                             \
    long long total = 1;                                                                       \
    for (int k = 0; k < children; ++k) total += counts[k];                                     \
    return total;                                                                              \
  }                                                                                            \
  static long long root_name(const struct uts_state* s) {                                      \
    long long* counts = malloc((size_t)s->root_children * sizeof *counts);                     \
    if (counts == NULL) omp_bench_fail("out of memory");                                       \
    for (int k = 0; k < s->root_children; ++k) {                                               \
      OMP_BENCH_PRAGMA(omp task firstprivate(k) tiedness)                                      \
      counts[k] = name(s, uts_child(uts_root, k));                                             \
    }                                                                                          \
    OMP_BENCH_PRAGMA(omp taskwait)                                                             \
    long long total = 1;                                                                       \
    for (int k = 0; k < s->root_children; ++k) total += counts[k];                             \
    free(counts);                                                                              \
    return total;                                                                              \
  }

static const uint64_t uts_root = 0x13198a2e03707344ULL;

UTS_TASKS(uts_tied, uts_root_tied, )
UTS_TASKS(uts_untied, uts_root_untied, untied)

static int64_t run_uts(void* ctx) {
  const struct uts_state* s = ctx;
  long long count = 0;
#pragma omp parallel
  {
#pragma omp single
    count = s->untied ? uts_root_untied(s) : uts_root_tied(s);
  }
  return count;
}

static int check_uts(void* ctx, int64_t count) {
  struct uts_state* s = ctx;
  if (s->expected == 0) {
    s->expected = 1;
    for (int k = 0; k < s->root_children; ++k) s->expected += uts_serial(s, uts_child(uts_root, k));
  }
  return count == s->expected;
}

int main(int argc, char** argv) {
  struct omp_bench_options o = omp_bench_parse(argc, argv);
  static const char* const kernels[] = {"uts", "uts_untied"};
  omp_bench_known_kernels(&o, kernels, 2);
  struct uts_state s = {0};
  s.root_children = (int)omp_bench_long(&o, "--root-children", 2000);
  s.m = (int)omp_bench_long(&o, "--m", 8);
  // q in parts per million, so that the flag stays an integer.
  long q_ppm = omp_bench_long(&o, "--q-ppm", 124875);
  if (s.root_children < 0) omp_bench_usage_error("--root-children", "negative");
  if (s.m < 1 || s.m > UTS_MAX_M) omp_bench_usage_error("--m", "out of 1..64");
  if (q_ppm < 0 || q_ppm > 1000000) omp_bench_usage_error("--q-ppm", "out of 0..1000000");
  if ((double)q_ppm * s.m >= 1e6)
    omp_bench_usage_error("--q-ppm", "q * m >= 1: the tree may be infinite");
  s.q_threshold = (uint64_t)((double)q_ppm / 1e6 * 18446744073709551616.0);
  for (int v = 0; v < 2; ++v) {
    if (!omp_bench_wants(&o, kernels[v])) continue;
    s.untied = v;
    struct omp_bench_kernel k = {.name = kernels[v], .run = run_uts, .check = check_uts, .ctx = &s};
    omp_bench_extra(&k, "root_children", s.root_children);
    omp_bench_extra(&k, "m", s.m);
    omp_bench_extra(&k, "q_ppm", q_ppm);
    omp_bench_time(&o, &k);
  }
  return 0;
}
