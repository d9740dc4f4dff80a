// GOMP_parallel: team sizes (num_threads, if(0), the nthreads-var of a
// thread inside a region), nested regions under omp_set_max_active_levels,
// the proc_bind clause, and what a thread learns of its team:
// omp_get_thread_num, num_threads, level, active_level, ancestor_thread_num,
// team_size, in_parallel.
#include <omp.h>

#include "omp_check.h"

enum { kMaxTeam = 8 };

// A team of exactly n threads, numbered 0..n-1, each once.
static void team_of(int n) {
  int seen[kMaxTeam] = {0};
  int bad_size = -1;
#pragma omp parallel num_threads(n)
  {
    int id = omp_get_thread_num();
    if (omp_get_num_threads() != n) {
#pragma omp atomic write
      bad_size = omp_get_num_threads();
    }
    CHECK(id >= 0 && id < n, "thread number %d in a team of %d", id, n);
#pragma omp atomic
    seen[id]++;
    CHECK(omp_get_level() == 1, "level %d in a region at level 1", omp_get_level());
    CHECK(omp_get_active_level() == (n > 1 ? 1 : 0), "active level %d in a team of %d",
          omp_get_active_level(), n);
    CHECK(omp_in_parallel() == (n > 1), "omp_in_parallel() %d in a team of %d", omp_in_parallel(),
          n);
    CHECK(omp_get_team_size(1) == n, "omp_get_team_size(1) %d, team of %d", omp_get_team_size(1),
          n);
    CHECK(omp_get_ancestor_thread_num(1) == id, "omp_get_ancestor_thread_num(1) %d, thread %d",
          omp_get_ancestor_thread_num(1), id);
    CHECK(omp_get_ancestor_thread_num(0) == 0, "omp_get_ancestor_thread_num(0) %d",
          omp_get_ancestor_thread_num(0));
  }
  CHECK(bad_size < 0, "num_threads(%d) gave a team of %d", n, bad_size);
  for (int i = 0; i < n; ++i)
    CHECK(seen[i] == 1, "team of %d: thread %d ran %d times", n, i, seen[i]);
}

static void if_clause(void) {
  volatile int zero = 0;
  int ran = 0;
#pragma omp parallel if (zero) num_threads(4)
  {
    CHECK(omp_get_num_threads() == 1, "if(0) region has %d threads", omp_get_num_threads());
    CHECK(omp_get_thread_num() == 0, "if(0) region: thread %d", omp_get_thread_num());
    CHECK(omp_get_level() == 1, "if(0) region: level %d", omp_get_level());
    CHECK(omp_get_active_level() == 0, "if(0) region: active level %d", omp_get_active_level());
    CHECK(!omp_in_parallel(), "if(0) region is not active, omp_in_parallel() says it is");
    ran++;
  }
  CHECK(ran == 1, "if(0) region ran %d times", ran);

  int one = 1, count = 0;
#pragma omp parallel if (one) num_threads(3)
  {
#pragma omp atomic
    count++;
  }
  CHECK(count == 3, "if(1) num_threads(3) region ran %d times", count);
}

// Two levels, both active (max_active_levels 2): every (outer, inner) pair
// once, and what each thread sees of its ancestors.
static void nested_active(void) {
  omp_set_max_active_levels(2);
  CHECK(omp_get_max_active_levels() == 2, "max_active_levels %d after setting 2",
        omp_get_max_active_levels());
  int pairs[2][3] = {{0}};
#pragma omp parallel num_threads(2)
  {
    int outer = omp_get_thread_num();
#pragma omp parallel num_threads(3)
    {
      int inner = omp_get_thread_num();
      CHECK(omp_get_num_threads() == 3, "inner team of %d threads, asked 3", omp_get_num_threads());
      CHECK(omp_get_level() == 2, "inner level %d", omp_get_level());
      CHECK(omp_get_active_level() == 2, "inner active level %d", omp_get_active_level());
      CHECK(omp_get_ancestor_thread_num(0) == 0, "ancestor at level 0: %d",
            omp_get_ancestor_thread_num(0));
      CHECK(omp_get_ancestor_thread_num(1) == outer, "ancestor at level 1: %d, outer thread %d",
            omp_get_ancestor_thread_num(1), outer);
      CHECK(omp_get_ancestor_thread_num(2) == inner, "ancestor at level 2: %d, thread %d",
            omp_get_ancestor_thread_num(2), inner);
      CHECK(omp_get_ancestor_thread_num(3) == -1, "ancestor at level 3 (deeper than this): %d",
            omp_get_ancestor_thread_num(3));
      CHECK(omp_get_team_size(0) == 1, "team size at level 0: %d", omp_get_team_size(0));
      CHECK(omp_get_team_size(1) == 2, "team size at level 1: %d", omp_get_team_size(1));
      CHECK(omp_get_team_size(2) == 3, "team size at level 2: %d", omp_get_team_size(2));
      CHECK(omp_get_team_size(3) == -1, "team size at level 3: %d", omp_get_team_size(3));
      CHECK(omp_in_parallel(), "omp_in_parallel() false in a nested active region");
#pragma omp atomic
      pairs[outer][inner]++;
    }
  }
  for (int o = 0; o < 2; ++o) {
    for (int i = 0; i < 3; ++i) {
      CHECK(pairs[o][i] == 1, "nested pair (%d,%d) ran %d times", o, i, pairs[o][i]);
    }
  }

  // A third level, beyond max_active_levels 2: inactive, a team of one.
  int third = 0;
#pragma omp parallel num_threads(2)
#pragma omp parallel num_threads(2)
#pragma omp parallel num_threads(2)
  {
    CHECK(omp_get_level() == 3, "third level reports level %d", omp_get_level());
    CHECK(omp_get_active_level() == 2, "third level reports active level %d",
          omp_get_active_level());
    CHECK(omp_get_num_threads() == 1, "a region beyond max_active_levels has %d threads",
          omp_get_num_threads());
#pragma omp atomic
    third++;
  }
  CHECK(third == 4, "the third level ran %d times, 2 x 2 x 1 expected", third);
}

// max_active_levels 1: the inner region is inactive.
static void nested_inactive(void) {
  omp_set_max_active_levels(1);
  int inner_runs = 0;
#pragma omp parallel num_threads(2)
  {
    int outer = omp_get_thread_num();
#pragma omp parallel num_threads(3)
    {
      CHECK(omp_get_num_threads() == 1, "inactive inner region has %d threads",
            omp_get_num_threads());
      CHECK(omp_get_level() == 2, "inactive inner region: level %d", omp_get_level());
      CHECK(omp_get_active_level() == 1, "inactive inner region: active level %d",
            omp_get_active_level());
      CHECK(omp_get_ancestor_thread_num(1) == outer, "ancestor at level 1: %d, outer %d",
            omp_get_ancestor_thread_num(1), outer);
      CHECK(omp_get_ancestor_thread_num(2) == 0, "ancestor at level 2: %d",
            omp_get_ancestor_thread_num(2));
      CHECK(omp_get_team_size(2) == 1, "team size at level 2: %d", omp_get_team_size(2));
      CHECK(omp_in_parallel(), "inside an active outer region, omp_in_parallel() is false");
#pragma omp atomic
      inner_runs++;
    }
  }
  CHECK(inner_runs == 2, "inactive inner regions ran %d times, 2 expected", inner_runs);
}

// omp_set_num_threads inside a region sets that thread's nthreads-var only:
// its nested regions, not its siblings', and not the initial thread's.
static void per_thread_num_threads(void) {
  omp_set_max_active_levels(2);
  int before = omp_get_max_threads();
  int inner_size[2] = {0, 0};
#pragma omp parallel num_threads(2)
  {
    int outer = omp_get_thread_num();
    omp_set_num_threads(outer + 2);
#pragma omp barrier
    CHECK(omp_get_max_threads() == outer + 2, "thread %d: max_threads %d after setting %d", outer,
          omp_get_max_threads(), outer + 2);
#pragma omp parallel
    {
#pragma omp single
      inner_size[outer] = omp_get_num_threads();
    }
  }
  CHECK(inner_size[0] == 2 && inner_size[1] == 3,
        "nested teams of %d and %d threads; each outer thread asked for its own (2, 3)",
        inner_size[0], inner_size[1]);
  CHECK(omp_get_max_threads() == before, "the initial thread's max_threads changed from %d to %d",
        before, omp_get_max_threads());
}

static void proc_bind_clauses(void) {
  int places = omp_get_num_places();
  int count = 0;
#pragma omp parallel num_threads(2) proc_bind(close)
  {
    int p = omp_get_place_num();
    CHECK(p >= -1 && p < places, "proc_bind(close): place %d of %d", p, places);
#pragma omp atomic
    count++;
  }
#pragma omp parallel num_threads(2) proc_bind(spread)
  {
    int p = omp_get_place_num();
    CHECK(p >= -1 && p < places, "proc_bind(spread): place %d of %d", p, places);
#pragma omp atomic
    count++;
  }
#pragma omp parallel num_threads(2) proc_bind(master)
  {
    int p = omp_get_place_num();
    CHECK(p >= -1 && p < places, "proc_bind(master): place %d of %d", p, places);
    omp_proc_bind_t b = omp_get_proc_bind();
    CHECK(b >= omp_proc_bind_false && b <= omp_proc_bind_spread, "omp_get_proc_bind() %d", (int)b);
#pragma omp atomic
    count++;
  }
  CHECK(count == 6, "three proc_bind regions of 2 threads ran %d bodies", count);
}

// Many short regions of changing sizes, each with its own count.
static void many_regions(void) {
  int regions = OMPT_SIZE(400, 100);
  for (int r = 0; r < regions; ++r) {
    int n = 1 + r % 4;
    int count = 0;
#pragma omp parallel num_threads(n)
    {
#pragma omp atomic
      count += omp_get_thread_num() + 1;
    }
    CHECK(count == n * (n + 1) / 2, "region %d of %d threads: sum of ids+1 %d", r, n, count);
  }
}

int main(void) {
  CHECK(!omp_in_parallel(), "omp_in_parallel() true outside any region");
  CHECK(omp_get_level() == 0 && omp_get_active_level() == 0, "level %d, active level %d outside",
        omp_get_level(), omp_get_active_level());
  CHECK(omp_get_thread_num() == 0 && omp_get_num_threads() == 1,
        "outside any region: thread %d of %d", omp_get_thread_num(), omp_get_num_threads());
  CHECK(omp_get_ancestor_thread_num(1) == -1, "ancestor at level 1 outside any region: %d",
        omp_get_ancestor_thread_num(1));
  CHECK(omp_get_team_size(-1) == -1, "team size at level -1: %d", omp_get_team_size(-1));

  // The default team: omp_get_max_threads() threads (OMP_NUM_THREADS).
  int max = omp_get_max_threads();
  int size = 0;
#pragma omp parallel
  {
#pragma omp single
    size = omp_get_num_threads();
  }
  CHECK(size == max, "default team of %d threads, omp_get_max_threads() %d", size, max);

  for (int n = 1; n <= 6; ++n) team_of(n);
  if_clause();
  nested_active();
  nested_inactive();
  per_thread_num_threads();
  proc_bind_clauses();
  many_regions();
  puts("parallel: ok");
  return 0;
}
