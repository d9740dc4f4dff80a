// health: a simulation of a hierarchical health-care system, after the
// Barcelona OpenMP Tasks Suite's health as it is described: a tree of villages,
// each with a hospital; people fall ill in their village, wait for a member of
// staff, are assessed, then treated there or referred to the hospital of the
// village above. Each time step visits the tree with one task per village
// (a village's task spawns its children's, waits for them, then runs its own
// hospital): a task is a few list operations, so the time is the runtime's
// per-task cost on an irregular, repeated fork-join.
//
//   OMP_NUM_THREADS=2 ./bench_omp_health --levels 5 --branch 4 --steps 800
//
// Kernels: BOTS' six variants (omp_harness.h): health (a task per village),
// health_if_clause (villages at level >= --cutoff, default 2, are if(0)
// tasks), health_manual (those are visited serially), each also _untied.
//
// The outcome does not depend on the schedule: each village draws from its
// own random generator and takes its children's referrals in child order once
// they are done. The statistics are checked against a serial run of the same
// simulation made once by the program.
#include "omp_harness.h"

enum {
  HEALTH_ASSESS_STEPS = 2,  // steps a member of staff spends assessing a patient
  HEALTH_TREAT_STEPS = 6,   // steps a treatment takes (the staff member stays busy)
  HEALTH_POPULATION = 8,    // people per village who may fall ill each step
};
// Chance that a person falls ill in a step, and that an assessment ends in a
// treatment here rather than a referral upwards.
#define HEALTH_ILL_CHANCE 0.03
#define HEALTH_TREAT_HERE_CHANCE 0.6

struct health_patient {
  long long id;
  int hospitals;  // hospitals that have seen the patient
  int time;       // steps since falling ill
  int time_left;  // steps left in the current stage
  struct health_patient* next;
};

struct health_list {
  struct health_patient* head;
  struct health_patient* tail;
};

struct health_stats {
  long long treated;
  long long total_time;
  long long total_hospitals;
  long long referred;
  long long ill;
};

struct health_village {
  int id;
  int level;  // 0: the root, whose hospital refers no one
  int staff;
  int free_staff;
  int children;
  struct health_village* child;
  uint64_t random;
  long long next_patient;
  struct health_list waiting, assessing, treating;
  struct health_list referred;  // to the village above, collected by it after this step
  struct health_stats stats;
};

struct health_state {
  int levels;
  int branch;
  int steps;
  struct health_village* root;
  struct health_village* reference;  // the serial run's tree, made on the first check
  struct health_stats expected;
  long long villages;
  int cutoff;  // the level from which the if_clause and manual variants stop making tasks
  enum omp_bench_cut cut;
  int untied;
};

static double health_uniform(struct health_village* v) {
  v->random = v->random * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(v->random >> 11) / 9007199254740992.0;
}

static void health_push(struct health_list* list, struct health_patient* p) {
  p->next = NULL;
  if (list->tail != NULL) {
    list->tail->next = p;
  } else {
    list->head = p;
  }
  list->tail = p;
}

static void health_append(struct health_list* to, struct health_list* from) {
  if (from->head == NULL) return;
  if (to->tail != NULL) {
    to->tail->next = from->head;
  } else {
    to->head = from->head;
  }
  to->tail = from->tail;
  from->head = NULL;
  from->tail = NULL;
}

static void health_free_list(struct health_list* list) {
  while (list->head != NULL) {
    struct health_patient* p = list->head;
    list->head = p->next;
    free(p);
  }
  list->tail = NULL;
}

// Every patient in the list ages a step and comes one step nearer the end
// of its stage; those whose stage ended are moved to `done`, in order.
static void health_tick(struct health_list* list, struct health_list* done) {
  struct health_patient** link = &list->head;
  struct health_patient* last = NULL;
  while (*link != NULL) {
    struct health_patient* p = *link;
    p->time++;
    if (--p->time_left > 0) {
      last = p;
      link = &p->next;
      continue;
    }
    *link = p->next;
    health_push(done, p);
  }
  list->tail = last;
}

static void health_hospital(struct health_village* v) {
  struct health_list done = {NULL, NULL};
  health_tick(&v->treating, &done);
  while (done.head != NULL) {
    struct health_patient* p = done.head;
    done.head = p->next;
    v->free_staff++;
    v->stats.treated++;
    v->stats.total_time += p->time;
    v->stats.total_hospitals += p->hospitals;
    free(p);
  }
  done.tail = NULL;
  health_tick(&v->assessing, &done);
  while (done.head != NULL) {
    struct health_patient* p = done.head;
    done.head = p->next;
    if (v->level == 0 || health_uniform(v) < HEALTH_TREAT_HERE_CHANCE) {
      p->time_left = HEALTH_TREAT_STEPS;
      health_push(&v->treating, p);
    } else {
      v->free_staff++;
      v->stats.referred++;
      health_push(&v->referred, p);
    }
  }
  for (struct health_patient* p = v->waiting.head; p != NULL; p = p->next) p->time++;
  while (v->free_staff > 0 && v->waiting.head != NULL) {
    struct health_patient* p = v->waiting.head;
    v->waiting.head = p->next;
    if (v->waiting.head == NULL) v->waiting.tail = NULL;
    v->free_staff--;
    p->hospitals++;
    p->time_left = HEALTH_ASSESS_STEPS;
    health_push(&v->assessing, p);
  }
  for (int person = 0; person < HEALTH_POPULATION; ++person) {
    if (health_uniform(v) >= HEALTH_ILL_CHANCE) continue;
    struct health_patient* p = malloc(sizeof *p);
    if (p == NULL) omp_bench_fail("out of memory");
    p->id = (long long)v->id << 32 | v->next_patient++;
    p->hospitals = 0;
    p->time = 0;
    p->time_left = 0;
    v->stats.ill++;
    health_push(&v->waiting, p);
  }
}

static void health_step_serial(struct health_village* v) {
  for (int c = 0; c < v->children; ++c) health_step_serial(&v->child[c]);
  for (int c = 0; c < v->children; ++c) health_append(&v->waiting, &v->child[c].referred);
  health_hospital(v);
}

// One recursion per tiedness (omp_harness.h, "BOTS' variants"): villages at
// levels at or past the cut-off are if(0) tasks (if_clause) or visited
// serially (manual).
#define HEALTH_STEP_TASKS(name, tiedness)                                                      \
  static void name(struct health_village* v, const struct health_state* s) {                  \
    if (s->cut == OMP_BENCH_MANUAL && v->level >= s->cutoff) {                                 \
      health_step_serial(v);                                                                   \
      return;                                                                                  \
    }                                                                                          \
    for (int c = 0; c < v->children; ++c) {                                                    \
      struct health_village* child = &v->child[c];                                             \
      const int spawn = s->cut != OMP_BENCH_IF_CLAUSE || child->level < s->cutoff;             \
      OMP_BENCH_PRAGMA(omp task firstprivate(child) if(spawn) tiedness)                        \
      name(child, s);                                                                          \
    }                                                                                          \
    OMP_BENCH_PRAGMA(omp taskwait)                                                             \
    for (int c = 0; c < v->children; ++c) health_append(&v->waiting, &v->child[c].referred);   \
    health_hospital(v);                                                                        \
  }
HEALTH_STEP_TASKS(health_step_tied, )
HEALTH_STEP_TASKS(health_step_untied, untied)

static long long health_build(struct health_village* v, int level, int levels, int branch,
                              int* next_id) {
  memset(v, 0, sizeof *v);
  v->id = (*next_id)++;
  v->level = level;
  v->staff = 2 * (levels - level);  // more staff higher up, where referrals gather
  v->free_staff = v->staff;
  v->random = 0x243f6a8885a308d3ULL ^ (uint64_t)v->id * 0x9e3779b97f4a7c15ULL;
  long long count = 1;
  if (level + 1 < levels) {
    v->children = branch;
    v->child = malloc((size_t)branch * sizeof *v->child);
    if (v->child == NULL) omp_bench_fail("out of memory");
    for (int c = 0; c < branch; ++c)
      count += health_build(&v->child[c], level + 1, levels, branch, next_id);
  }
  return count;
}

// Back to the state health_build made, keeping the tree.
static void health_reset(struct health_village* v) {
  for (int c = 0; c < v->children; ++c) health_reset(&v->child[c]);
  health_free_list(&v->waiting);
  health_free_list(&v->assessing);
  health_free_list(&v->treating);
  health_free_list(&v->referred);
  v->free_staff = v->staff;
  v->random = 0x243f6a8885a308d3ULL ^ (uint64_t)v->id * 0x9e3779b97f4a7c15ULL;
  v->next_patient = 0;
  memset(&v->stats, 0, sizeof v->stats);
}

static void health_destroy(struct health_village* v) {
  health_reset(v);
  for (int c = 0; c < v->children; ++c) health_destroy(&v->child[c]);
  free(v->child);
}

// The statistics of the whole tree; patients still in a hospital count by
// the time they have spent so far.
static void health_sum(const struct health_village* v, struct health_stats* sum) {
  for (int c = 0; c < v->children; ++c) health_sum(&v->child[c], sum);
  sum->treated += v->stats.treated;
  sum->total_time += v->stats.total_time;
  sum->total_hospitals += v->stats.total_hospitals;
  sum->referred += v->stats.referred;
  sum->ill += v->stats.ill;
  const struct health_list* lists[] = {&v->waiting, &v->assessing, &v->treating, &v->referred};
  for (int l = 0; l < 4; ++l) {
    for (const struct health_patient* p = lists[l]->head; p != NULL; p = p->next) {
      sum->total_time += p->time;
      sum->total_hospitals += p->hospitals;
    }
  }
}

static int64_t health_checksum(const struct health_stats* s) {
  return omp_bench_result(omp_bench_hash(OMP_BENCH_HASH_SEED, s, sizeof *s));
}

static void prepare_health(void* ctx) {
  struct health_state* s = ctx;
  health_reset(s->root);
}

static int64_t run_health(void* ctx) {
  struct health_state* s = ctx;
#pragma omp parallel
  {
#pragma omp single
    for (int step = 0; step < s->steps; ++step) {
      if (s->untied) {
        health_step_untied(s->root, s);
      } else {
        health_step_tied(s->root, s);
      }
    }
  }
  struct health_stats sum = {0};
  health_sum(s->root, &sum);
  return health_checksum(&sum);
}

static int check_health(void* ctx, int64_t result) {
  struct health_state* s = ctx;
  if (s->reference == NULL) {
    s->reference = malloc(sizeof *s->reference);
    if (s->reference == NULL) omp_bench_fail("out of memory");
    int next_id = 0;
    health_build(s->reference, 0, s->levels, s->branch, &next_id);
    for (int step = 0; step < s->steps; ++step) health_step_serial(s->reference);
    health_sum(s->reference, &s->expected);
  }
  struct health_stats got = {0};
  health_sum(s->root, &got);
  if (memcmp(&got, &s->expected, sizeof got) != 0 || result != health_checksum(&s->expected)) {
    fprintf(stderr,
            "bench: health treated %lld, time %lld, hospitals %lld, referred %lld, ill %lld; "
            "serially %lld, %lld, %lld, %lld, %lld\n",
            got.treated, got.total_time, got.total_hospitals, got.referred, got.ill,
            s->expected.treated, s->expected.total_time, s->expected.total_hospitals,
            s->expected.referred, s->expected.ill);
    return 0;
  }
  return 1;
}

int main(int argc, char** argv) {
  struct omp_bench_options o = omp_bench_parse(argc, argv);
  omp_bench_known_variants(&o, "health");
  struct health_state s = {0};
  s.levels = (int)omp_bench_long(&o, "--levels", 5);
  s.branch = (int)omp_bench_long(&o, "--branch", 4);
  s.steps = (int)omp_bench_long(&o, "--steps", 800);
  s.cutoff = (int)omp_bench_long(&o, "--cutoff", 2);
  if (s.levels < 1 || s.levels > 12) omp_bench_usage_error("--levels", "out of 1..12");
  if (s.branch < 1 || s.branch > 64) omp_bench_usage_error("--branch", "out of 1..64");
  if (s.steps < 1) omp_bench_usage_error("--steps", "below 1");
  s.root = malloc(sizeof *s.root);
  if (s.root == NULL) omp_bench_fail("out of memory");
  int next_id = 0;
  s.villages = health_build(s.root, 0, s.levels, s.branch, &next_id);
  for (int v = 0; v < OMP_BENCH_VARIANTS; ++v) {
    const struct omp_bench_variant* var = &omp_bench_variants[v];
    char name[64];
    omp_bench_variant_name(name, sizeof name, "health", var);
    if (!omp_bench_wants(&o, name)) continue;
    s.cut = var->cut;
    s.untied = var->untied;
    struct omp_bench_kernel k = {.name = name,
                                 .run = run_health,
                                 .check = check_health,
                                 .prepare = prepare_health,
                                 .ctx = &s};
    omp_bench_extra(&k, "levels", s.levels);
    omp_bench_extra(&k, "branch", s.branch);
    omp_bench_extra(&k, "steps", s.steps);
    omp_bench_extra(&k, "cutoff", var->cut == OMP_BENCH_NO_CUTOFF ? -1 : s.cutoff);
    omp_bench_time(&o, &k);
  }
  health_destroy(s.root);
  free(s.root);
  if (s.reference != NULL) {
    health_destroy(s.reference);
    free(s.reference);
  }
  return 0;
}
