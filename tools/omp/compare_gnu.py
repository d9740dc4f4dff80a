#!/usr/bin/env python3
"""Runs one program on GNU's libgomp.so.1 and on mote's, under many settings
of the OpenMP environment variables, and compares what both print.

    tools/omp/compare_gnu.py PROGRAM MOTE_OMP_DIR [--gnu-dir DIR] [--verbose]

PROGRAM is tests/test_omp_abi_smoke.c built with gcc -fopenmp; it is run as
`PROGRAM --print-icvs` with OMP_DISPLAY_ENV=verbose, so the comparison covers
the messages for bad values (stderr, word for word), the OMP_DISPLAY_ENV text
and the ICVs the omp_* routines answer. GNU's library is the one the loader
finds without LD_LIBRARY_PATH (or the one in --gnu-dir). Exits 1 when a case
differs (showing the difference), 77 when GNU's library is not installed.
"""

import argparse
import difflib
import os
import subprocess
import sys

SKIP = 77
GNU_LIBRARY = "/usr/lib/x86_64-linux-gnu/libgomp.so.1"

# Each case: the variables it sets (on top of OMP_DISPLAY_ENV=verbose).
CASES = [
    {},
    # OMP_NUM_THREADS
    {"OMP_NUM_THREADS": "3"},
    {"OMP_NUM_THREADS": " 4 , 3,2 "},
    {"OMP_NUM_THREADS": "4,"},
    {"OMP_NUM_THREADS": "0"},
    {"OMP_NUM_THREADS": "-3"},
    {"OMP_NUM_THREADS": "two"},
    {"OMP_NUM_THREADS": ""},
    {"OMP_NUM_THREADS": "4,,2"},
    # OMP_SCHEDULE
    {"OMP_SCHEDULE": "static"},
    {"OMP_SCHEDULE": "STATIC,4"},
    {"OMP_SCHEDULE": "dynamic"},
    {"OMP_SCHEDULE": "dynamic,0"},
    {"OMP_SCHEDULE": " guided , 7 "},
    {"OMP_SCHEDULE": "auto"},
    {"OMP_SCHEDULE": "auto,5"},
    {"OMP_SCHEDULE": "monotonic:dynamic,3"},
    {"OMP_SCHEDULE": "nonmonotonic : static"},
    {"OMP_SCHEDULE": "nonmonotonic:static,2"},
    {"OMP_SCHEDULE": "monotonic:static"},
    {"OMP_SCHEDULE": "static,-1"},
    {"OMP_SCHEDULE": "static,x"},
    {"OMP_SCHEDULE": "static,"},
    {"OMP_SCHEDULE": "static 4"},
    {"OMP_SCHEDULE": "fast"},
    {"OMP_SCHEDULE": "monotonic dynamic"},
    {"OMP_SCHEDULE": "dynamic,99999999999"},
    # Booleans
    {"OMP_DYNAMIC": "true"},
    {"OMP_DYNAMIC": " TRUE "},
    {"OMP_DYNAMIC": "yes"},
    {"OMP_DYNAMIC": "truex"},
    {"OMP_CANCELLATION": "true"},
    {"OMP_CANCELLATION": "1"},
    {"OMP_DISPLAY_AFFINITY": "true"},
    {"OMP_DISPLAY_AFFINITY": "maybe"},
    # Nesting
    {"OMP_NESTED": "true"},
    {"OMP_NESTED": "false"},
    {"OMP_NESTED": "bad"},
    {"OMP_MAX_ACTIVE_LEVELS": "3"},
    {"OMP_MAX_ACTIVE_LEVELS": "0"},
    {"OMP_MAX_ACTIVE_LEVELS": "1000"},
    {"OMP_MAX_ACTIVE_LEVELS": "x", "OMP_NESTED": "true"},
    {"OMP_MAX_ACTIVE_LEVELS": "2", "OMP_NESTED": "true"},
    {"OMP_NUM_THREADS": "2,2", "OMP_NESTED": "false"},
    # Numbers
    {"OMP_THREAD_LIMIT": "8"},
    {"OMP_THREAD_LIMIT": "0"},
    {"OMP_THREAD_LIMIT": "99999999999"},
    {"OMP_DEFAULT_DEVICE": "0"},
    {"OMP_DEFAULT_DEVICE": "5"},
    {"OMP_DEFAULT_DEVICE": "-1"},
    {"OMP_MAX_TASK_PRIORITY": "10"},
    {"OMP_MAX_TASK_PRIORITY": "3000000000"},
    {"OMP_NUM_TEAMS": "4"},
    {"OMP_NUM_TEAMS": "0"},
    {"OMP_TEAMS_THREAD_LIMIT": "2"},
    {"GOMP_DEBUG": "x"},
    # OMP_PROC_BIND and places
    {"OMP_PROC_BIND": "true"},
    {"OMP_PROC_BIND": "false"},
    {"OMP_PROC_BIND": "close"},
    {"OMP_PROC_BIND": "master"},
    {"OMP_PROC_BIND": "primary,spread,close"},
    {"OMP_PROC_BIND": "spread , master"},
    {"OMP_PROC_BIND": "true,close"},
    {"OMP_PROC_BIND": "close,"},
    {"OMP_PROC_BIND": "nope"},
    {"OMP_PLACES": "threads"},
    {"OMP_PLACES": "cores"},
    {"OMP_PLACES": "sockets"},
    {"OMP_PLACES": "ll_caches"},
    {"OMP_PLACES": "numa_domains"},
    {"OMP_PLACES": " Threads ( 1 ) "},
    {"OMP_PLACES": "threads(0)"},
    {"OMP_PLACES": "threads(2"},
    {"OMP_PLACES": "cores x"},
    {"OMP_PLACES": "{0}"},
    {"OMP_PLACES": "{0},{1}"},
    {"OMP_PLACES": "{0:2}"},
    {"OMP_PLACES": "{0:4}"},
    {"OMP_PLACES": "{0}:2"},
    {"OMP_PLACES": "{0}:4:1"},
    {"OMP_PLACES": "{0}:2:-1"},
    {"OMP_PLACES": "{1}:2:-1"},
    {"OMP_PLACES": "{0,1},!{0,1}"},
    {"OMP_PLACES": "{0,1},!{0}"},
    {"OMP_PLACES": "{0:2,!1}"},
    {"OMP_PLACES": "{0:2, !1}"},
    {"OMP_PLACES": "{!0}"},
    {"OMP_PLACES": "0,1"},
    {"OMP_PLACES": "!0"},
    {"OMP_PLACES": "{100}"},
    {"OMP_PLACES": "{63}"},
    {"OMP_PLACES": "{0:2:-1}"},
    {"OMP_PLACES": "{0}:70000"},
    {"OMP_PLACES": "{0"},
    {"OMP_PLACES": ""},
    {"OMP_PLACES": "bogus"},
    {"OMP_PLACES": "{0},"},
    {"OMP_PLACES": "cores", "OMP_PROC_BIND": "false"},
    {"OMP_PLACES": "bogus", "OMP_PROC_BIND": "false"},
    {"OMP_PLACES": "{0}", "OMP_PROC_BIND": "spread"},
    {"GOMP_CPU_AFFINITY": "0 1"},
    {"GOMP_CPU_AFFINITY": "1,0"},
    {"GOMP_CPU_AFFINITY": "0-1"},
    {"GOMP_CPU_AFFINITY": "0-7:2"},
    {"GOMP_CPU_AFFINITY": "0x1"},
    {"GOMP_CPU_AFFINITY": "x"},
    {"GOMP_CPU_AFFINITY": "2-1"},
    {"GOMP_CPU_AFFINITY": "0", "OMP_PLACES": "{1}"},
    {"GOMP_CPU_AFFINITY": "bad", "OMP_PROC_BIND": "false"},
    # Waiting and stacks
    {"OMP_WAIT_POLICY": "active"},
    {"OMP_WAIT_POLICY": "PASSIVE"},
    {"OMP_WAIT_POLICY": "lazy"},
    {"GOMP_SPINCOUNT": "1000"},
    {"GOMP_SPINCOUNT": "5k"},
    {"GOMP_SPINCOUNT": " 2 M "},
    {"GOMP_SPINCOUNT": "3t"},
    {"GOMP_SPINCOUNT": "99999999999999G"},
    {"GOMP_SPINCOUNT": "infinity"},
    {"GOMP_SPINCOUNT": "INFINITE"},
    {"GOMP_SPINCOUNT": "infinitex"},
    {"GOMP_SPINCOUNT": "5x"},
    {"GOMP_SPINCOUNT": "x", "OMP_WAIT_POLICY": "active"},
    {"OMP_STACKSIZE": "512"},
    {"OMP_STACKSIZE": "16k"},
    {"OMP_STACKSIZE": " 4 M "},
    {"OMP_STACKSIZE": "1g"},
    {"OMP_STACKSIZE": "100B"},
    {"OMP_STACKSIZE": "1B"},
    {"OMP_STACKSIZE": "4X"},
    {"OMP_STACKSIZE": "99999999999999G"},
    {"OMP_STACKSIZE": "4X", "GOMP_STACKSIZE": "2m"},
    {"OMP_STACKSIZE": "1m", "GOMP_STACKSIZE": "bad"},
    {"GOMP_STACKSIZE": "2048"},
    # The rest
    {"OMP_AFFINITY_FORMAT": "thread %n of %N on %A"},
    {"OMP_AFFINITY_FORMAT": ""},
    {"OMP_ALLOCATOR": "omp_large_cap_mem_alloc"},
    {"OMP_ALLOCATOR": " OMP_THREAD_MEM_ALLOC "},
    {"OMP_ALLOCATOR": "omp_default_mem_allocx"},
    {"OMP_ALLOCATOR": "malloc"},
    {"OMP_TARGET_OFFLOAD": "disabled"},
    {"OMP_TARGET_OFFLOAD": "MANDATORY"},
    {"OMP_TARGET_OFFLOAD": "sometimes"},
    {"OMP_DISPLAY_ENV": "true"},
    {"OMP_DISPLAY_ENV": "false"},
    {"OMP_DISPLAY_ENV": "TRUEish"},
    {"OMP_DISPLAY_ENV": "nope"},
    # Several at once: the order of the messages.
    {"OMP_NUM_THREADS": "x", "OMP_SCHEDULE": "x", "OMP_DYNAMIC": "x", "OMP_PROC_BIND": "x", "OMP_PLACES": "x",
     "OMP_STACKSIZE": "x", "OMP_WAIT_POLICY": "x", "GOMP_SPINCOUNT": "x", "OMP_THREAD_LIMIT": "x",
     "OMP_MAX_ACTIVE_LEVELS": "x", "OMP_CANCELLATION": "x", "OMP_DEFAULT_DEVICE": "x",
     "OMP_MAX_TASK_PRIORITY": "x", "OMP_ALLOCATOR": "x", "OMP_TARGET_OFFLOAD": "x", "OMP_NUM_TEAMS": "x",
     "OMP_TEAMS_THREAD_LIMIT": "x", "OMP_DISPLAY_AFFINITY": "x", "OMP_NESTED": "x", "GOMP_CPU_AFFINITY": "x",
     "GOMP_STACKSIZE": "x", "GOMP_DEBUG": "x"},
]

# Variables of the caller's environment that would change the answers.
def clean_environment():
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("OMP_") or k.startswith("GOMP_") or k == "LD_LIBRARY_PATH")}
    return env


def run(program, library_dir, case):
    env = clean_environment()
    env["OMP_DISPLAY_ENV"] = "verbose"
    env.update(case)
    if library_dir:
        env["LD_LIBRARY_PATH"] = library_dir
    p = subprocess.run([program, "--print-icvs"], env=env, capture_output=True, text=True, timeout=60)
    return "exit %d\n--- stdout\n%s--- stderr\n%s" % (p.returncode, p.stdout, p.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("program")
    ap.add_argument("mote_dir")
    ap.add_argument("--gnu-dir", default="", help="a directory holding GNU's libgomp.so.1 (default: the loader's)")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    if not args.gnu_dir and not os.path.exists(GNU_LIBRARY):
        print("compare_gnu: GNU's libgomp.so.1 is not installed: skipped")
        return SKIP
    differ = 0
    for case in CASES:
        gnu = run(args.program, args.gnu_dir, case)
        mote = run(args.program, args.mote_dir, case)
        label = " ".join("%s=%r" % kv for kv in case.items()) or "(no variables)"
        if gnu != mote:
            differ += 1
            print("DIFFERS: %s" % label)
            sys.stdout.writelines(difflib.unified_diff(gnu.splitlines(True), mote.splitlines(True),
                                                       "GNU", "mote"))
        elif args.verbose:
            print("same: %s" % label)
    if differ:
        print("compare_gnu: %d of %d cases differ" % (differ, len(CASES)))
        return 1
    print("compare_gnu: all %d cases print the same on GNU's libgomp and mote's" % len(CASES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
