#!/usr/bin/env python3
"""Tests the mote-omp launcher: its usage, its errors, and that the program it
runs finds mote's libgomp.so.1 and the thread count it was given.

    tools/omp/test_launcher.py MOTE_OMP SMOKE LIBGOMP

MOTE_OMP is the launcher, SMOKE tests/test_omp_abi_smoke.c built with
gcc -fopenmp, LIBGOMP the libgomp.so.1 the launcher must make it use.
"""

import os
import subprocess
import sys

failures = []


def run(argv, env_extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_") and k != "LD_LIBRARY_PATH"}
    env.update(env_extra or {})
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)


def expect(label, result, code, stdout=None, stderr_has=None):
    problems = []
    if result.returncode != code:
        problems.append("exit %d, not %d" % (result.returncode, code))
    if stdout is not None and result.stdout != stdout:
        problems.append("stdout %r, not %r" % (result.stdout, stdout))
    if stderr_has is not None and stderr_has not in result.stderr:
        problems.append("stderr %r lacks %r" % (result.stderr, stderr_has))
    if problems:
        failures.append("%s: %s" % (label, "; ".join(problems)))


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    launcher, smoke, library = sys.argv[1:]
    smoke_args = [smoke, "--library", library, "--print-max-threads"]

    r = run([launcher, "--help"])
    expect("--help", r, 0)
    if not r.stdout.startswith("usage: mote-omp [--threads N] [--] program [arguments...]"):
        failures.append("--help: the usage line is %r" % r.stdout.splitlines()[:1])

    expect("no program", run([launcher]), 2, stderr_has="mote-omp: no program to run")
    expect("--threads 0", run([launcher, "--threads", "0", smoke]), 2,
           stderr_has="mote-omp: --threads needs a positive number, not '0'")
    expect("--threads x", run([launcher, "--threads=x", smoke]), 2,
           stderr_has="mote-omp: --threads needs a positive number, not 'x'")
    expect("--threads alone", run([launcher, "--threads"]), 2, stderr_has="mote-omp: --threads needs a number")
    expect("unknown option", run([launcher, "--bogus", smoke]), 2,
           stderr_has="mote-omp: unknown option '--bogus'")

    # The program runs on mote's library (it checks where omp_get_max_threads
    # comes from) with the thread count asked for.
    expect("--threads 3", run([launcher, "--threads", "3", "--"] + smoke_args), 0, stdout="3\n")
    expect("--threads=2", run([launcher, "--threads=2"] + smoke_args), 0, stdout="2\n")
    # Without --threads, the environment's OMP_NUM_THREADS stands.
    expect("OMP_NUM_THREADS kept", run([launcher] + smoke_args, {"OMP_NUM_THREADS": "5"}), 0, stdout="5\n")
    # The program's exit status is the launcher's.
    expect("exit status", run([launcher, smoke, "--bogus-mode"]), 2)

    for f in failures:
        print("FAILED " + f)
    if failures:
        return 1
    print("test_launcher: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
