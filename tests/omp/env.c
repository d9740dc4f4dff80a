// The OMP_* (and GOMP_*) environment variables, one check per ctest entry:
// the entry sets a variable and names on the command line what it must
// have done. Where OpenMP has no routine that reads the setting back
// (OMP_WAIT_POLICY, OMP_STACKSIZE, GOMP_SPINCOUNT), the value is read from
// omp_display_env(1)'s output (GNU's format), and the setting's effect is
// checked where it has one (the stack size of the team's threads).
//
//   env num_threads 3                 OMP_NUM_THREADS=3
//   env num_threads_list 2 3          OMP_NUM_THREADS=2,3 (nested)
//   env proc_bind close               OMP_PROC_BIND=close (threads bound to places)
//   env proc_bind_list spread close   OMP_PROC_BIND=spread,close
//   env places cores|threads|LIST...  OMP_PLACES=... ; LIST: the places' CPUs, "0" "1"
//   env wait_policy ACTIVE|PASSIVE    OMP_WAIT_POLICY
//   env stacksize BYTES               OMP_STACKSIZE (each thread uses 3/4 of it)
//   env dynamic 1                     OMP_DYNAMIC=true
//   env max_active_levels N           OMP_MAX_ACTIVE_LEVELS=N
//   env nested 1                      OMP_NESTED=true
//   env thread_limit N                OMP_THREAD_LIMIT=N
//   env cancellation 1                OMP_CANCELLATION=true
//   env max_task_priority N           OMP_MAX_TASK_PRIORITY=N
//   env spincount N                   GOMP_SPINCOUNT=N
//   env print                         prints the ICVs (compared with a run without a bad value)
// Exits 77 (ctest: skipped) when the machine cannot show the setting (the
// CPUs a place list names are not there).
#define _GNU_SOURCE
#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include "omp_check.h"

enum { kSkip = 77 };

// The value omp_display_env(1) shows for a variable ("  NAME = 'value'").
static void displayed(const char* name, char* value, size_t size) {
  fflush(stdout);
  fflush(stderr);
  FILE* capture = tmpfile();
  CHECK(capture != NULL, "tmpfile failed");
  int saved_out = dup(1), saved_err = dup(2);
  dup2(fileno(capture), 1);
  dup2(fileno(capture), 2);
  omp_display_env(1);
  fflush(stdout);
  fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  rewind(capture);
  char line[1024];
  char prefix[128];
  snprintf(prefix, sizeof prefix, "  %s = '", name);
  value[0] = '\0';
  int found = 0;
  while (fgets(line, sizeof line, capture) != NULL) {
    if (strncmp(line, prefix, strlen(prefix)) != 0) continue;
    char* start = line + strlen(prefix);
    char* end = strrchr(start, '\'');
    CHECK(end != NULL, "omp_display_env line without a closing quote: %s", line);
    *end = '\0';
    snprintf(value, size, "%s", start);
    found = 1;
  }
  fclose(capture);
  CHECK(found, "omp_display_env(1) shows no %s", name);
}

static int team_size(int requested) {
  int n = 0;
#pragma omp parallel num_threads(requested)
  {
#pragma omp single
    n = omp_get_num_threads();
  }
  return n;
}

// Barriers with a late thread, and tasks: the wait policy must not matter.
static void waiting_workload(void) {
  long sum = 0;
  int tasks_ran = 0;
  int rounds = OMPT_SIZE(200, 40);
#pragma omp parallel reduction(+ : sum)
  {
    for (int r = 0; r < rounds; ++r) {
      if (omp_get_thread_num() == r % omp_get_num_threads() && r % 50 == 0) ompt_sleep_ms(5);
#pragma omp barrier
      sum += 1;
    }
#pragma omp single
    for (int k = 0; k < 1000; ++k) {
#pragma omp task shared(tasks_ran)
      __atomic_fetch_add(&tasks_ran, 1, __ATOMIC_RELAXED);
    }
  }
  CHECK(sum == (long)rounds * omp_get_max_threads(), "barrier workload counted %ld", sum);
  CHECK(tasks_ran == 1000, "%d of 1000 tasks ran", tasks_ran);
}

// The CPUs of a place, as a mask.
static void place_mask(int place, cpu_set_t* mask) {
  CPU_ZERO(mask);
  int n = omp_get_place_num_procs(place);
  int ids[CPU_SETSIZE];
  CHECK(n >= 1 && n <= CPU_SETSIZE, "place %d has %d processors", place, n);
  omp_get_place_proc_ids(place, ids);
  for (int k = 0; k < n; ++k) CPU_SET(ids[k], mask);
}

// Every thread of a region of `threads` is bound: it has a place, runs on
// one of its CPUs, and may run on no other.
static void threads_bound(int threads) {
  int places = omp_get_num_places();
  CHECK(places >= 1, "threads should be bound, but there are %d places", places);
  char problem[256] = "";
#pragma omp parallel num_threads(threads)
  {
    int p = omp_get_place_num();
    cpu_set_t mine, want;
    if (p < 0 || p >= places) {
#pragma omp critical
      snprintf(problem, sizeof problem, "thread %d has place %d of %d", omp_get_thread_num(), p,
               places);
    } else {
      // Its place is in its place partition.
      int partition = omp_get_partition_num_places(), in_partition = 0;
      int nums[CPU_SETSIZE];
      if (partition >= 1 && partition <= CPU_SETSIZE) {
        omp_get_partition_place_nums(nums);
        for (int k = 0; k < partition; ++k) in_partition |= nums[k] == p;
      }
      if (!in_partition) {
#pragma omp critical
        snprintf(problem, sizeof problem, "thread %d: place %d is not in its partition of %d",
                 omp_get_thread_num(), p, partition);
      }
      place_mask(p, &want);
      CHECK(pthread_getaffinity_np(pthread_self(), sizeof mine, &mine) == 0, "getaffinity failed");
      int cpu = sched_getcpu();
      if (!CPU_EQUAL(&mine, &want) || !CPU_ISSET(cpu, &want)) {
#pragma omp critical
        snprintf(problem, sizeof problem,
                 "thread %d (place %d, running on CPU %d) may run on %d CPUs, its place has %d",
                 omp_get_thread_num(), p, cpu, CPU_COUNT(&mine), CPU_COUNT(&want));
      }
    }
  }
  CHECK(problem[0] == '\0', "%s", problem);
}

// The CPUs this program may use. Not its own mask: with OMP_PLACES set the
// runtime has already bound the initial thread to the first place. The
// parent's (ctest's, or a shell's) is the one the program started with.
static void available_cpus(cpu_set_t* mask) {
  if (sched_getaffinity(getppid(), sizeof *mask, mask) != 0) {
    CHECK(sched_getaffinity(0, sizeof *mask, mask) == 0, "sched_getaffinity failed");
  }
}

static int cores_available(void) {
  cpu_set_t mask;
  available_cpus(&mask);
  // (package, core) pairs among the CPUs we may use.
  long seen[CPU_SETSIZE];
  int count = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &mask)) continue;
    char path[128];
    long package = 0, core = cpu;
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
    FILE* f = fopen(path, "r");
    if (f != NULL) {
      if (fscanf(f, "%ld", &package) != 1) package = 0;
      fclose(f);
    }
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
    f = fopen(path, "r");
    if (f != NULL) {
      if (fscanf(f, "%ld", &core) != 1) core = cpu;
      fclose(f);
    }
    long key = package * 100000 + core;
    int fresh = 1;
    for (int k = 0; k < count; ++k) fresh &= seen[k] != key;
    if (fresh) seen[count++] = key;
  }
  return count;
}

static void check_places(int argc, char** argv) {
  cpu_set_t mask;
  available_cpus(&mask);
  int places = omp_get_num_places();
  if (strcmp(argv[2], "threads") == 0) {
    CHECK(places == CPU_COUNT(&mask), "OMP_PLACES=threads: %d places, %d CPUs", places,
          CPU_COUNT(&mask));
  } else if (strcmp(argv[2], "cores") == 0) {
    CHECK(places == cores_available(), "OMP_PLACES=cores: %d places, %d cores", places,
          cores_available());
  } else {
    // A list: argv[2..] are the CPUs of each place (one CPU per place here).
    for (int k = 2; k < argc; ++k) {
      if (!CPU_ISSET(atoi(argv[k]), &mask)) {
        printf("env: CPU %s is not available here: skipped\n", argv[k]);
        exit(kSkip);
      }
    }
    CHECK(places == argc - 2, "OMP_PLACES=%s: %d places, %d expected", getenv("OMP_PLACES"), places,
          argc - 2);
    for (int p = 0; p < places; ++p) {
      int ids[CPU_SETSIZE];
      CHECK(omp_get_place_num_procs(p) == 1, "place %d has %d CPUs, 1 expected", p,
            omp_get_place_num_procs(p));
      omp_get_place_proc_ids(p, ids);
      CHECK(ids[0] == atoi(argv[p + 2]), "place %d is CPU %d, %s expected", p, ids[0], argv[p + 2]);
    }
  }
  // OMP_PLACES set, OMP_PROC_BIND unset: GNU binds (proc_bind true).
  CHECK(omp_get_proc_bind() != omp_proc_bind_false, "OMP_PLACES set, but bind-var is false");
  threads_bound(places);
}

// Each thread other than the primary one has a stack of at least `bytes`,
// and uses three quarters of it.
static void check_stacksize(long bytes) {
  char shown[64];
  displayed("OMP_STACKSIZE", shown, sizeof shown);
  CHECK(atol(shown) == bytes, "OMP_STACKSIZE=%s shows '%s', %ld expected", getenv("OMP_STACKSIZE"),
        shown, bytes);
  int bad = 0;
  long smallest = -1;
#pragma omp parallel num_threads(3) reduction(+ : bad)
  {
    if (omp_get_thread_num() != 0) {
      pthread_attr_t attr;
      size_t size = 0;
      CHECK(pthread_getattr_np(pthread_self(), &attr) == 0, "pthread_getattr_np failed");
      pthread_attr_getstacksize(&attr, &size);
      pthread_attr_destroy(&attr);
      if ((long)size < bytes) {
        bad++;
#pragma omp critical
        smallest = (long)size;
      } else {
        volatile char* big = __builtin_alloca((size_t)bytes / 4 * 3);
        for (long i = 0; i < bytes / 4 * 3; i += 4096) big[i] = (char)i;
        if (big[4096] != (char)4096) bad++;
      }
    }
  }
  CHECK(bad == 0, "OMP_STACKSIZE=%s: a thread's stack is %ld bytes", getenv("OMP_STACKSIZE"),
        smallest);
}

static void print_icvs(void) {
  omp_sched_t kind;
  int chunk;
  omp_get_schedule(&kind, &chunk);
  printf("max_threads %d\nteam %d\ndynamic %d\nnested %d\nmax_active_levels %d\n",
         omp_get_max_threads(), team_size(omp_get_max_threads()), omp_get_dynamic(),
         omp_get_nested(), omp_get_max_active_levels());
  printf("schedule %#x %d\nthread_limit %d\nproc_bind %d\nplaces %d\ncancellation %d\n",
         (unsigned)kind, chunk, omp_get_thread_limit(), (int)omp_get_proc_bind(),
         omp_get_num_places(), omp_get_cancellation());
  printf("max_task_priority %d\ndefault_device %d\n", omp_get_max_task_priority(),
         omp_get_default_device());
  // The ones no routine reads back.
  const char* shown[] = {"OMP_STACKSIZE", "OMP_WAIT_POLICY", NULL};
  for (int k = 0; shown[k] != NULL; ++k) {
    char value[256];
    displayed(shown[k], value, sizeof value);
    printf("%s %s\n", shown[k], value);
  }
}

int main(int argc, char** argv) {
  CHECK(argc >= 2, "usage: env CHECK [VALUES...] (see the comment at the top)");
  const char* what = argv[1];
  int want = argc > 2 ? atoi(argv[2]) : 0;
  if (strcmp(what, "num_threads") == 0) {
    CHECK(omp_get_max_threads() == want, "OMP_NUM_THREADS=%s: max_threads %d",
          getenv("OMP_NUM_THREADS"), omp_get_max_threads());
    CHECK(team_size(want) == want && team_size(0 + omp_get_max_threads()) == want,
          "OMP_NUM_THREADS=%s: a region has %d threads", getenv("OMP_NUM_THREADS"),
          team_size(want));
    int n = 0;
#pragma omp parallel
#pragma omp atomic
    n++;
    CHECK(n == want, "OMP_NUM_THREADS=%s: a region without num_threads has %d threads",
          getenv("OMP_NUM_THREADS"), n);
  } else if (strcmp(what, "num_threads_list") == 0) {
    int inner_want = atoi(argv[3]);
    CHECK(omp_get_max_threads() == want, "OMP_NUM_THREADS=%s: max_threads %d",
          getenv("OMP_NUM_THREADS"), omp_get_max_threads());
    int outer = 0, inner_max = 0, inner_teams = 0;
#pragma omp parallel
    {
#pragma omp single
      {
        outer = omp_get_num_threads();
        inner_max = omp_get_max_threads();
      }
#pragma omp parallel
#pragma omp atomic
      inner_teams++;
    }
    CHECK(outer == want, "OMP_NUM_THREADS=%s: outer team of %d", getenv("OMP_NUM_THREADS"), outer);
    CHECK(inner_max == inner_want, "OMP_NUM_THREADS=%s: max_threads inside the outer region %d",
          getenv("OMP_NUM_THREADS"), inner_max);
    CHECK(inner_teams == want * inner_want,
          "OMP_NUM_THREADS=%s: %d threads in the nested regions, %d expected (nested active)",
          getenv("OMP_NUM_THREADS"), inner_teams, want * inner_want);
  } else if (strcmp(what, "proc_bind") == 0 || strcmp(what, "proc_bind_list") == 0) {
    const char* names[] = {"false", "true", "master", "close", "spread"};
    omp_proc_bind_t kinds[2];
    for (int k = 0; k < 2 && k + 2 < argc; ++k) {
      kinds[k] = omp_proc_bind_false;
      for (int n = 0; n < 5; ++n) {
        if (strcmp(argv[k + 2], names[n]) == 0) kinds[k] = (omp_proc_bind_t)n;
      }
    }
    CHECK(omp_get_proc_bind() == kinds[0], "OMP_PROC_BIND=%s: omp_get_proc_bind() %d, %s expected",
          getenv("OMP_PROC_BIND"), (int)omp_get_proc_bind(), argv[2]);
    if (strcmp(what, "proc_bind_list") == 0) {
      int inside = -1, nested_size = 0;
#pragma omp parallel num_threads(2)
      {
#pragma omp single
        inside = (int)omp_get_proc_bind();
#pragma omp parallel num_threads(2)
#pragma omp atomic
        nested_size++;
      }
      CHECK(inside == (int)kinds[1], "OMP_PROC_BIND=%s: inside the outer region %d, %s expected",
            getenv("OMP_PROC_BIND"), inside, argv[3]);
      CHECK(nested_size == 4, "OMP_PROC_BIND=%s (a list turns nesting on): nested threads %d",
            getenv("OMP_PROC_BIND"), nested_size);
    }
    threads_bound(2);
  } else if (strcmp(what, "places") == 0) {
    CHECK(argc >= 3, "usage: env places cores|threads|CPU...");
    check_places(argc, argv);
  } else if (strcmp(what, "wait_policy") == 0) {
    char shown[64];
    displayed("OMP_WAIT_POLICY", shown, sizeof shown);
    CHECK(strcmp(shown, argv[2]) == 0, "OMP_WAIT_POLICY=%s shows '%s', '%s' expected",
          getenv("OMP_WAIT_POLICY"), shown, argv[2]);
    waiting_workload();
  } else if (strcmp(what, "stacksize") == 0) {
    check_stacksize(atol(argv[2]));
  } else if (strcmp(what, "dynamic") == 0) {
    CHECK(omp_get_dynamic() == want, "OMP_DYNAMIC=%s: omp_get_dynamic() %d", getenv("OMP_DYNAMIC"),
          omp_get_dynamic());
    int n = team_size(omp_get_max_threads());
    CHECK(n >= 1 && n <= omp_get_max_threads(), "a region has %d threads", n);
  } else if (strcmp(what, "max_active_levels") == 0 || strcmp(what, "nested") == 0) {
    if (strcmp(what, "nested") == 0) {
      CHECK(omp_get_nested() == want, "OMP_NESTED=%s: omp_get_nested() %d", getenv("OMP_NESTED"),
            omp_get_nested());
      want = omp_get_max_active_levels();
      CHECK(want > 1, "OMP_NESTED=true, but max_active_levels is %d", want);
    } else {
      CHECK(omp_get_max_active_levels() == want, "OMP_MAX_ACTIVE_LEVELS=%s: %d",
            getenv("OMP_MAX_ACTIVE_LEVELS"), omp_get_max_active_levels());
    }
    // Four levels of 2 threads: levels 1..want active, deeper ones teams of 1.
    int sizes[4] = {0, 0, 0, 0};
#pragma omp parallel num_threads(2)
#pragma omp parallel num_threads(2)
#pragma omp parallel num_threads(2)
#pragma omp parallel num_threads(2)
    {
      for (int level = 1; level <= 4; ++level) {
        int s = omp_get_team_size(level);
        __atomic_store_n(&sizes[level - 1], s, __ATOMIC_RELAXED);
      }
    }
    for (int level = 1; level <= 4; ++level) {
      int expected = level <= want ? 2 : 1;
      CHECK(sizes[level - 1] == expected, "max_active_levels %d: team size at level %d is %d", want,
            level, sizes[level - 1]);
    }
  } else if (strcmp(what, "thread_limit") == 0) {
    CHECK(omp_get_thread_limit() == want, "OMP_THREAD_LIMIT=%s: omp_get_thread_limit() %d",
          getenv("OMP_THREAD_LIMIT"), omp_get_thread_limit());
    int n = team_size(want + 3);
    CHECK(n >= 1 && n <= want, "OMP_THREAD_LIMIT=%d: num_threads(%d) gave %d threads", want,
          want + 3, n);
    // A nested region while the outer team's other thread is busy: the two
    // teams together stay within the limit. (One nested region at a time:
    // GNU's libgomp may exceed the limit when several start at once.)
    omp_set_max_active_levels(2);
    int inner = 0;
#pragma omp parallel num_threads(2)
    {
      if (omp_get_thread_num() == 0) {
#pragma omp parallel num_threads(want)
#pragma omp atomic
        inner++;
      }
    }
    CHECK(inner >= 1 && inner <= want - 1,
          "OMP_THREAD_LIMIT=%d: a nested team of %d beside a busy thread", want, inner);
  } else if (strcmp(what, "cancellation") == 0) {
    CHECK(omp_get_cancellation() == want, "OMP_CANCELLATION=%s: omp_get_cancellation() %d",
          getenv("OMP_CANCELLATION"), omp_get_cancellation());
  } else if (strcmp(what, "max_task_priority") == 0) {
    CHECK(omp_get_max_task_priority() == want, "OMP_MAX_TASK_PRIORITY=%s: %d",
          getenv("OMP_MAX_TASK_PRIORITY"), omp_get_max_task_priority());
  } else if (strcmp(what, "spincount") == 0) {
    char shown[64];
    displayed("GOMP_SPINCOUNT", shown, sizeof shown);
    CHECK(strcmp(shown, argv[2]) == 0, "GOMP_SPINCOUNT=%s shows '%s', '%s' expected",
          getenv("GOMP_SPINCOUNT"), shown, argv[2]);
    waiting_workload();
  } else if (strcmp(what, "print") == 0) {
    print_icvs();
    return 0;
  } else {
    FAIL("unknown check %s", what);
  }
  printf("env %s: ok\n", what);
  return 0;
}
