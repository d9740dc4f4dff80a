// teams on the host (GOMP_teams_reg; also for num_teams(lo:hi) in gcc 12):
// num_teams and thread_limit, omp_get_team_num and omp_get_num_teams,
// omp_get_thread_limit inside a team, distribute (static split across
// teams), distribute parallel for, and a parallel region inside a team.
#include <limits.h>
#include <omp.h>

#include "omp_check.h"

enum { kN = 10007, kMaxTeams = 8 };

int main(void) {
  CHECK(omp_get_num_teams() == 1 && omp_get_team_num() == 0, "outside teams: team %d of %d",
        omp_get_team_num(), omp_get_num_teams());
  for (int rep = 0; rep < OMPT_SIZE(5, 2); ++rep) {
    int seen[kMaxTeams] = {0};
    int num_teams = -1, limit_ok = 1, team_sizes_ok = 1;
#pragma omp teams num_teams(3) thread_limit(2)
    {
      int team = omp_get_team_num();
      if (team == 0) num_teams = omp_get_num_teams();
      if (team >= 0 && team < kMaxTeams) __atomic_fetch_add(&seen[team], 1, __ATOMIC_RELAXED);
        // A parallel region in a team: no more threads than the team's limit.
        // (The runtime calls a team may make outside one are only these two.)
#pragma omp parallel num_threads(4)
      {
        if (omp_get_thread_limit() > 2) __atomic_store_n(&limit_ok, 0, __ATOMIC_RELAXED);
        if (omp_get_num_threads() > 2 || omp_get_team_num() != team) {
          __atomic_store_n(&team_sizes_ok, 0, __ATOMIC_RELAXED);
        }
      }
    }
    CHECK(num_teams >= 1 && num_teams <= 3, "num_teams(3) made %d teams", num_teams);
    for (int t = 0; t < num_teams; ++t) {
      CHECK(seen[t] == 1, "team %d of %d ran its region %d times", t, num_teams, seen[t]);
    }
    for (int t = num_teams; t < kMaxTeams; ++t) CHECK(seen[t] == 0, "a team numbered %d ran", t);
    CHECK(limit_ok, "omp_get_thread_limit() in a team with thread_limit(2) is above 2");
    CHECK(team_sizes_ok,
          "a parallel region in a team with thread_limit(2) had more than 2 threads");

    // distribute: each iteration once, each team a contiguous block.
    static int owner[kN];
    static int runs[kN];
    memset(runs, 0, sizeof runs);
    int teams_used = 0;
#pragma omp teams num_teams(4)
    {
      if (omp_get_team_num() == 0) teams_used = omp_get_num_teams();
#pragma omp distribute
      for (int i = 0; i < kN; ++i) {
        owner[i] = omp_get_team_num();
        __atomic_fetch_add(&runs[i], 1, __ATOMIC_RELAXED);
      }
    }
    for (int i = 0; i < kN; ++i) {
      CHECK(runs[i] == 1, "distribute: iteration %d ran %d times", i, runs[i]);
      CHECK(i == 0 || owner[i] >= owner[i - 1],
            "distribute: iteration %d ran on team %d after iteration %d on team %d", i, owner[i],
            i - 1, owner[i - 1]);
    }
    CHECK(owner[kN - 1] < teams_used, "distribute used team %d of %d", owner[kN - 1], teams_used);

    // distribute parallel for, with a reduction across teams.
    long sum = 0;
#pragma omp teams distribute parallel for num_teams(2) reduction(+ : sum) schedule(dynamic, 16)
    for (int i = 0; i < kN; ++i) sum += i;
    CHECK(sum == (long)kN * (kN - 1) / 2, "teams distribute parallel for reduction: %ld", sum);

    // num_teams with a lower and an upper bound (OpenMP 5.1).
    int lohi = -1;
#pragma omp teams num_teams(2 : 3)
    {
      if (omp_get_team_num() == 0) lohi = omp_get_num_teams();
    }
    CHECK(lohi >= 2 && lohi <= 3, "num_teams(2:3) made %d teams", lohi);
  }

  // The program's nteams-var and teams-thread-limit-var (omp_set_num_teams,
  // omp_set_teams_thread_limit) bound a teams construct without clauses (as
  // GNU's testsuite, libgomp.c-c++-common/icv-3.c).
  omp_set_num_teams(2);
  omp_set_teams_thread_limit(3);
  CHECK(omp_get_max_teams() == 2 && omp_get_teams_thread_limit() == 3,
        "omp_get_max_teams %d, omp_get_teams_thread_limit %d after setting 2 and 3", omp_get_max_teams(),
        omp_get_teams_thread_limit());
  int made = -1, limit = -1, vars_ok = 1;
#pragma omp teams
  {
    // (gcc allows these calls in a team only inside a region of its own.)
#pragma omp parallel if (0)
    {
      if (omp_get_team_num() == 0) {
        made = omp_get_num_teams();
        limit = omp_get_thread_limit();
      }
      if (omp_get_max_teams() != 2 || omp_get_teams_thread_limit() != 3) {
        __atomic_store_n(&vars_ok, 0, __ATOMIC_RELAXED);
      }
    }
  }
  CHECK(made >= 1 && made <= 2, "teams with nteams-var 2 made %d teams", made);
  CHECK(limit >= 1 && limit <= 3, "omp_get_thread_limit() in a team with teams-thread-limit-var 3: %d", limit);
  CHECK(vars_ok, "the device's nteams-var or teams-thread-limit-var changed inside teams");
  // A clause wins over the variables.
  made = -1;
  limit = -1;
#pragma omp teams num_teams(4) thread_limit(5)
  {
#pragma omp parallel if (0)
    if (omp_get_team_num() == 0) {
      made = omp_get_num_teams();
      limit = omp_get_thread_limit();
    }
  }
  CHECK(made >= 1 && made <= 4, "num_teams(4) with nteams-var 2 made %d teams", made);
  CHECK(limit >= 1 && limit <= 5, "thread_limit(5) with teams-thread-limit-var 3: omp_get_thread_limit %d",
        limit);
  CHECK(omp_get_thread_limit() == INT_MAX, "the teams construct changed the initial task's thread-limit-var: %d",
        omp_get_thread_limit());
  puts("teams: ok");
  return 0;
}
