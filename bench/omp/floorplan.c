// floorplan: branch-and-bound placement of cells, after the Barcelona OpenMP
// Tasks Suite's floorplan as it is described: cells are placed one after the
// other, each in one of its shapes, touching the cell placed before it; the
// aim is the smallest bounding rectangle. Every candidate placement (shape x
// side of the previous cell) that fits and whose bound beats the best area
// found so far is a task with its own copy of the placement; the best area is
// read atomically and lowered in a critical section. Most tasks do a few
// overlap tests and die at the bound: the time is the runtime's per-task cost
// under an irregular, pruned search.
//
//   OMP_NUM_THREADS=2 ./bench_omp_floorplan --cells 8
//
// Kernels: BOTS' six variants (omp_harness.h): floorplan (a task per
// candidate), floorplan_if_clause (cells at depth >= --cutoff, default 5,
// are placed by if(0) tasks), floorplan_manual (those are searched serially),
// each also _untied. The best area is checked against a serial search made once by the
// program (the minimum does not depend on the order the tree is searched in).
#include <limits.h>

#include "omp_harness.h"

enum { FLOORPLAN_MAX_CELLS = 24, FLOORPLAN_MAX_SHAPES = 3, FLOORPLAN_ANCHORS = 8 };

struct floorplan_cell {
  int shapes;
  int w[FLOORPLAN_MAX_SHAPES];
  int h[FLOORPLAN_MAX_SHAPES];
  int area;
};

struct floorplan_placement {
  int x[FLOORPLAN_MAX_CELLS];
  int y[FLOORPLAN_MAX_CELLS];
  int w[FLOORPLAN_MAX_CELLS];
  int h[FLOORPLAN_MAX_CELLS];
  int x0, y0, x1, y1;  // bounding rectangle [x0, x1) x [y0, y1)
  int area_placed;     // the cells' own area so far
};

struct floorplan_state {
  int cells;
  int cutoff;  // the depth from which the if_clause and manual variants stop making tasks
  enum omp_bench_cut cut;
  int untied;
  struct floorplan_cell cell[FLOORPLAN_MAX_CELLS];
  int area_after[FLOORPLAN_MAX_CELLS + 1];  // the cells' area from cell i on
  int best;                                 // shared by the search's tasks
  int expected;                             // the serial search's answer, 0 until made
};

static int floorplan_min(int a, int b) { return a < b ? a : b; }
static int floorplan_max(int a, int b) { return a > b ? a : b; }

// Where cell `i` of shape w x h may go: beside, below or above the previous
// cell, aligned with one of its edges.
static void floorplan_anchor(const struct floorplan_placement* p, int prev, int anchor, int w,
                             int h, int* x, int* y) {
  int px = p->x[prev];
  int py = p->y[prev];
  int pw = p->w[prev];
  int ph = p->h[prev];
  switch (anchor) {
    case 0:
      *x = px + pw, *y = py;
      break;
    case 1:
      *x = px + pw, *y = py + ph - h;
      break;
    case 2:
      *x = px - w, *y = py;
      break;
    case 3:
      *x = px - w, *y = py + ph - h;
      break;
    case 4:
      *x = px, *y = py + ph;
      break;
    case 5:
      *x = px + pw - w, *y = py + ph;
      break;
    case 6:
      *x = px, *y = py - h;
      break;
    default:
      *x = px + pw - w, *y = py - h;
      break;
  }
}

static int floorplan_overlaps(const struct floorplan_placement* p, int placed, int x, int y, int w,
                              int h) {
  for (int j = 0; j < placed; ++j) {
    if (x < p->x[j] + p->w[j] && p->x[j] < x + w && y < p->y[j] + p->h[j] && p->y[j] < y + h)
      return 1;
  }
  return 0;
}

static void floorplan_place(struct floorplan_placement* p, int i, int x, int y, int w, int h) {
  p->x[i] = x;
  p->y[i] = y;
  p->w[i] = w;
  p->h[i] = h;
  if (i == 0) {
    p->x0 = x, p->y0 = y, p->x1 = x + w, p->y1 = y + h;
  } else {
    p->x0 = floorplan_min(p->x0, x);
    p->y0 = floorplan_min(p->y0, y);
    p->x1 = floorplan_max(p->x1, x + w);
    p->y1 = floorplan_max(p->y1, y + h);
  }
  p->area_placed += w * h;
}

// No completion of `p` (cells 0..i placed) can have a smaller area than this.
static int floorplan_bound(const struct floorplan_state* s, const struct floorplan_placement* p,
                           int i) {
  int box = (p->x1 - p->x0) * (p->y1 - p->y0);
  return floorplan_max(box, p->area_placed + s->area_after[i + 1]);
}

static int floorplan_best(struct floorplan_state* s) {
  int best;
#pragma omp atomic read
  best = s->best;
  return best;
}

static void floorplan_record(struct floorplan_state* s, int area) {
  // Checked again inside: another task may have lowered it meanwhile.
#pragma omp critical(floorplan_best)
  {
    if (area < floorplan_best(s)) {
#pragma omp atomic write
      s->best = area;
    }
  }
}

// Whether cell i may go at (x, y) as w x h; the placement with it in `next`.
static int floorplan_try(struct floorplan_state* s, const struct floorplan_placement* p, int i,
                         int x, int y, int w, int h, struct floorplan_placement* next) {
  if (floorplan_overlaps(p, i, x, y, w, h)) return 0;
  *next = *p;
  floorplan_place(next, i, x, y, w, h);
  return floorplan_bound(s, next, i) < floorplan_best(s);
}

// Places cells i.. after the placement `p` of cells 0..i-1.
static void floorplan_serial(struct floorplan_state* s, const struct floorplan_placement* p,
                             int i) {
  if (i == s->cells) {
    floorplan_record(s, (p->x1 - p->x0) * (p->y1 - p->y0));
    return;
  }
  const struct floorplan_cell* c = &s->cell[i];
  for (int shape = 0; shape < c->shapes; ++shape) {
    for (int anchor = 0; anchor < FLOORPLAN_ANCHORS; ++anchor) {
      int x;
      int y;
      floorplan_anchor(p, i - 1, anchor, c->w[shape], c->h[shape], &x, &y);
      struct floorplan_placement next;
      if (floorplan_try(s, p, i, x, y, c->w[shape], c->h[shape], &next))
        floorplan_serial(s, &next, i + 1);
    }
  }
}

// `p` lives in the parent's frame, which waits for these tasks before it
// returns. One recursion per tiedness (omp_harness.h, "BOTS' variants"):
// cells at depth >= the cut-off are placed by if(0) tasks (if_clause) or
// searched serially (manual).
#define FLOORPLAN_TASKS(name, tiedness)                                                        \
  static void name(struct floorplan_state* s, const struct floorplan_placement* p, int i) {    \
    if (i == s->cells || (s->cut == OMP_BENCH_MANUAL && i >= s->cutoff)) {                     \
      floorplan_serial(s, p, i);                                                               \
      return;                                                                                  \
    }                                                                                          \
    const int spawn = s->cut != OMP_BENCH_IF_CLAUSE || i < s->cutoff;                          \
    const struct floorplan_cell* c = &s->cell[i];                                              \
    for (int shape = 0; shape < c->shapes; ++shape) {                                          \
      for (int anchor = 0; anchor < FLOORPLAN_ANCHORS; ++anchor) {                             \
        OMP_BENCH_PRAGMA(omp task firstprivate(shape, anchor) if(spawn) tiedness)              \
        {                                                                                      \
          int x;                                                                               \
          int y;                                                                               \
          floorplan_anchor(p, i - 1, anchor, c->w[shape], c->h[shape], &x, &y);               \
          struct floorplan_placement next;                                                     \
          if (floorplan_try(s, p, i, x, y, c->w[shape], c->h[shape], &next))                  \
            name(s, &next, i + 1);                                                             \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
    OMP_BENCH_PRAGMA(omp taskwait)                                                             \
  }
FLOORPLAN_TASKS(floorplan_tied, )
FLOORPLAN_TASKS(floorplan_untied, untied)

// The first cell goes at the origin in each of its shapes.
static void floorplan_search(struct floorplan_state* s, int parallel) {
  s->best = INT_MAX;
  const struct floorplan_cell* c = &s->cell[0];
  for (int shape = 0; shape < c->shapes; ++shape) {
    struct floorplan_placement start;
    memset(&start, 0, sizeof start);
    floorplan_place(&start, 0, 0, 0, c->w[shape], c->h[shape]);
    if (parallel) {
      if (s->untied) {
        floorplan_untied(s, &start, 1);
      } else {
        floorplan_tied(s, &start, 1);
      }
    } else {
      floorplan_serial(s, &start, 1);
    }
  }
}

static int64_t run_floorplan(void* ctx) {
  struct floorplan_state* s = ctx;
#pragma omp parallel
  {
#pragma omp single
    floorplan_search(s, 1);
  }
  return s->best;
}

static int check_floorplan(void* ctx, int64_t result) {
  struct floorplan_state* s = ctx;
  if (s->expected == 0) {
    floorplan_search(s, 0);
    s->expected = s->best;
  }
  return result == s->expected;
}

// Cells of area 2..12, each in up to three shapes w x h with w * h >= area
// and neither side above 6, picked by a fixed generator.
static void floorplan_generate(struct floorplan_state* s) {
  uint64_t x = 0xb7e151628aed2a6bULL;
  for (int i = 0; i < s->cells; ++i) {
    struct floorplan_cell* c = &s->cell[i];
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    int area = 2 + (int)((x >> 33) % 11);
    c->shapes = 0;
    c->area = INT_MAX;
    int offset = (int)((x >> 20) % 6);
    for (int k = 0; k < 6 && c->shapes < FLOORPLAN_MAX_SHAPES; ++k) {
      int w = 1 + (offset + k) % 6;
      int h = (area + w - 1) / w;
      if (h > 6) continue;
      c->w[c->shapes] = w;
      c->h[c->shapes] = h;
      c->area = floorplan_min(c->area, w * h);
      c->shapes++;
    }
  }
  s->area_after[s->cells] = 0;
  for (int i = s->cells - 1; i >= 0; --i) s->area_after[i] = s->area_after[i + 1] + s->cell[i].area;
}

int main(int argc, char** argv) {
  struct omp_bench_options o = omp_bench_parse(argc, argv);
  omp_bench_known_variants(&o, "floorplan");
  static struct floorplan_state s;
  s.cells = (int)omp_bench_long(&o, "--cells", 8);
  if (s.cells < 2 || s.cells > FLOORPLAN_MAX_CELLS)
    omp_bench_usage_error("--cells", "out of 2..24");
  s.cutoff = (int)omp_bench_long(&o, "--cutoff", 5);
  floorplan_generate(&s);
  for (int v = 0; v < OMP_BENCH_VARIANTS; ++v) {
    const struct omp_bench_variant* var = &omp_bench_variants[v];
    char name[64];
    omp_bench_variant_name(name, sizeof name, "floorplan", var);
    if (!omp_bench_wants(&o, name)) continue;
    s.cut = var->cut;
    s.untied = var->untied;
    struct omp_bench_kernel k = {.name = name, .run = run_floorplan, .check = check_floorplan, .ctx = &s};
    omp_bench_extra(&k, "cells", s.cells);
    omp_bench_extra(&k, "cutoff", var->cut == OMP_BENCH_NO_CUTOFF ? -1 : s.cutoff);
    omp_bench_time(&o, &k);
  }
  return 0;
}
