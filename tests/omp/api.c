// The omp_* query and setting routines, with no OMP_* variable set but
// OMP_NUM_THREADS: set/get num_threads, dynamic, nested, max_active_levels
// (and omp_get_supported_active_levels), schedule, thread_limit, num_procs,
// max_threads, proc_bind, places, cancellation, max_task_priority, the
// device numbers, omp_pause_resource[_all] (the region after a pause works),
// teams ICVs, and omp_display_env(0), whose output is captured and checked
// for its frame. Defaults that OpenMP leaves to the implementation are
// checked as GNU's libgomp has them, where a program may reasonably rely on
// them (said at each).
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>

#include "omp_check.h"

static int team_size(void) {
  int n = 0;
#pragma omp parallel
  {
#pragma omp single
    n = omp_get_num_threads();
  }
  return n;
}

static void num_threads_and_dynamic(void) {
  int initial = omp_get_max_threads();
  const char* env = getenv("OMP_NUM_THREADS");
  if (env != NULL) CHECK(initial == atoi(env), "OMP_NUM_THREADS=%s, max_threads %d", env, initial);
  omp_set_num_threads(3);
  CHECK(omp_get_max_threads() == 3, "max_threads %d after omp_set_num_threads(3)",
        omp_get_max_threads());
  CHECK(team_size() == 3, "a region after omp_set_num_threads(3) has %d threads", team_size());
  omp_set_num_threads(initial);

  CHECK(omp_get_dynamic() == 0, "dyn-var is %d by default (GNU: false)", omp_get_dynamic());
  omp_set_dynamic(1);
  CHECK(omp_get_dynamic() == 1, "omp_get_dynamic() %d after omp_set_dynamic(1)", omp_get_dynamic());
  int n = team_size();
  CHECK(n >= 1 && n <= initial, "with dyn-var true a region has %d threads (at most %d)", n,
        initial);
  omp_set_dynamic(0);
  CHECK(omp_get_dynamic() == 0, "omp_get_dynamic() %d after omp_set_dynamic(0)", omp_get_dynamic());
}

static void levels(void) {
  int supported = omp_get_supported_active_levels();
  CHECK(supported >= 1, "omp_get_supported_active_levels() %d", supported);
  CHECK(omp_get_max_active_levels() == 1,
        "max-active-levels-var is %d by default (GNU 12: 1 unless OMP_NESTED, "
        "OMP_MAX_ACTIVE_LEVELS or an OMP_NUM_THREADS list says otherwise)",
        omp_get_max_active_levels());
  omp_set_max_active_levels(3);
  CHECK(omp_get_max_active_levels() == (supported < 3 ? supported : 3),
        "max_active_levels %d after setting 3", omp_get_max_active_levels());
  omp_set_max_active_levels(supported + 5);
  CHECK(omp_get_max_active_levels() == supported,
        "setting max_active_levels above the supported %d gives %d", supported,
        omp_get_max_active_levels());
  omp_set_max_active_levels(2);
  omp_set_max_active_levels(-1);  // ignored
  CHECK(omp_get_max_active_levels() == 2, "a negative max_active_levels changed it to %d",
        omp_get_max_active_levels());

  // omp_set_nested (deprecated): true allows more than one active level.
  omp_set_max_active_levels(1);
  CHECK(omp_get_nested() == 0, "omp_get_nested() %d with max_active_levels 1", omp_get_nested());
  omp_set_nested(1);
  CHECK(omp_get_nested() == 1, "omp_get_nested() %d after omp_set_nested(1)", omp_get_nested());
  CHECK(omp_get_max_active_levels() > 1, "omp_set_nested(1) left max_active_levels at %d",
        omp_get_max_active_levels());
  int inner = 0;
#pragma omp parallel num_threads(2)
#pragma omp parallel num_threads(2)
  {
#pragma omp atomic
    inner += omp_get_num_threads();
  }
  CHECK(inner == 8, "with nesting on, 2 x 2 nested threads counted %d (4 threads x 2 expected)",
        inner);
  omp_set_nested(0);
  CHECK(omp_get_nested() == 0 && omp_get_max_active_levels() == 1,
        "omp_set_nested(0): nested %d, max_active_levels %d", omp_get_nested(),
        omp_get_max_active_levels());
}

static void schedule_and_limits(void) {
  omp_sched_t kind;
  int chunk;
  omp_get_schedule(&kind, &chunk);
  CHECK(kind == omp_sched_dynamic && chunk == 1,
        "run-sched-var is (%#x, %d) by default (GNU: dynamic, 1)", (unsigned)kind, chunk);
  omp_set_schedule(omp_sched_guided, 7);
  omp_get_schedule(&kind, &chunk);
  CHECK(kind == omp_sched_guided && chunk == 7, "omp_get_schedule after (guided, 7): (%#x, %d)",
        (unsigned)kind, chunk);
  omp_set_schedule((omp_sched_t)(omp_sched_dynamic | omp_sched_monotonic), 3);
  omp_get_schedule(&kind, &chunk);
  CHECK(kind == (omp_sched_t)(omp_sched_dynamic | omp_sched_monotonic) && chunk == 3,
        "omp_get_schedule after (monotonic:dynamic, 3): (%#x, %d)", (unsigned)kind, chunk);
  omp_set_schedule(omp_sched_dynamic, 1);

  CHECK(omp_get_thread_limit() >= omp_get_max_threads(), "thread_limit %d below max_threads %d",
        omp_get_thread_limit(), omp_get_max_threads());
  cpu_set_t mask;
  CHECK(sched_getaffinity(0, sizeof mask, &mask) == 0, "sched_getaffinity failed");
  CHECK(omp_get_num_procs() == CPU_COUNT(&mask), "omp_get_num_procs() %d, %d CPUs available",
        omp_get_num_procs(), CPU_COUNT(&mask));
}

static void binding_and_places(void) {
  CHECK(omp_get_proc_bind() == omp_proc_bind_false,
        "bind-var is %d with OMP_PROC_BIND and OMP_PLACES unset (GNU: false)",
        (int)omp_get_proc_bind());
  int places = omp_get_num_places();
  CHECK(places >= 0, "omp_get_num_places() %d", places);
  for (int p = 0; p < places; ++p) {
    int procs = omp_get_place_num_procs(p);
    CHECK(procs >= 1, "place %d has %d processors", p, procs);
    int ids[256];
    if (procs <= 256) {
      omp_get_place_proc_ids(p, ids);
      for (int k = 0; k < procs; ++k) CHECK(ids[k] >= 0, "place %d lists processor %d", p, ids[k]);
    }
  }
  CHECK(omp_get_place_num_procs(places) == 0 && omp_get_place_num_procs(-1) == 0,
        "a place number out of range has processors");
  int place = omp_get_place_num();
  CHECK(place >= -1 && place < places, "omp_get_place_num() %d of %d", place, places);
  int partition = omp_get_partition_num_places();
  CHECK(partition >= 0 && partition <= places, "partition of %d places of %d", partition, places);
  int nums[256];
  if (partition <= 256) {
    omp_get_partition_place_nums(nums);
    for (int k = 0; k < partition; ++k) {
      CHECK(nums[k] >= 0 && nums[k] < places, "partition place %d is place %d of %d", k, nums[k],
            places);
    }
  }
}

static void tasks_devices_teams(void) {
  CHECK(omp_get_cancellation() == 0, "cancel-var is %d with OMP_CANCELLATION unset",
        omp_get_cancellation());
  CHECK(omp_get_max_task_priority() == 0, "max-task-priority-var is %d by default",
        omp_get_max_task_priority());
  CHECK(omp_get_default_device() == 0, "default-device-var is %d (GNU: 0)",
        omp_get_default_device());
  omp_set_default_device(0);
  CHECK(omp_get_initial_device() == omp_get_num_devices(),
        "omp_get_initial_device() %d, omp_get_num_devices() %d", omp_get_initial_device(),
        omp_get_num_devices());
  CHECK(omp_is_initial_device(), "omp_is_initial_device() false on the host");
  CHECK(omp_get_max_teams() >= 0 && omp_get_teams_thread_limit() >= 0,
        "max_teams %d, teams_thread_limit %d", omp_get_max_teams(), omp_get_teams_thread_limit());
  omp_set_num_teams(3);
  omp_set_teams_thread_limit(2);
  CHECK(omp_get_max_teams() == 3 && omp_get_teams_thread_limit() == 2,
        "after setting 3 and 2: max_teams %d, teams_thread_limit %d", omp_get_max_teams(),
        omp_get_teams_thread_limit());
}

static void pause_resources(void) {
  int before = team_size();
  CHECK(omp_pause_resource(omp_pause_soft, omp_get_initial_device()) == 0,
        "omp_pause_resource(soft, host) failed");
  CHECK(team_size() == before, "after a soft pause a region has %d threads, %d before", team_size(),
        before);
  CHECK(omp_pause_resource_all(omp_pause_hard) == 0, "omp_pause_resource_all(hard) failed");
  CHECK(team_size() == before, "after a hard pause a region has %d threads, %d before", team_size(),
        before);
  CHECK(omp_pause_resource(omp_pause_soft, 1000) != 0,
        "omp_pause_resource on device 1000 (there is none) succeeded");
}

// omp_display_env(0) prints the ICVs between GNU's frame lines, on stderr
// (captured here through a temporary file).
static void display_env(void) {
  fflush(stdout);
  fflush(stderr);
  FILE* capture = tmpfile();
  CHECK(capture != NULL, "tmpfile failed");
  int saved_out = dup(1), saved_err = dup(2);
  CHECK(saved_out >= 0 && saved_err >= 0, "dup failed");
  dup2(fileno(capture), 1);
  dup2(fileno(capture), 2);
  omp_display_env(0);
  fflush(stdout);
  fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  char text[8192];
  rewind(capture);
  size_t len = fread(text, 1, sizeof text - 1, capture);
  text[len] = '\0';
  fclose(capture);
  CHECK(strstr(text, "OPENMP DISPLAY ENVIRONMENT BEGIN") != NULL &&
            strstr(text, "OPENMP DISPLAY ENVIRONMENT END") != NULL,
        "omp_display_env(0) printed no frame:\n%s", text);
  CHECK(strstr(text, "_OPENMP") != NULL && strstr(text, "OMP_NUM_THREADS") != NULL,
        "omp_display_env(0) printed no _OPENMP or OMP_NUM_THREADS:\n%s", text);
}

int main(void) {
  num_threads_and_dynamic();
  levels();
  schedule_and_limits();
  binding_and_places();
  tasks_devices_teams();
  pause_resources();
  display_env();
  puts("api: ok");
  return 0;
}
