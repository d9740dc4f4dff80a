#!/usr/bin/python3
"""Counts the instructions each runtime spends per spawn, with callgrind.

Wall-clock figures on a shared machine move with its load; instruction counts
do not. For every fork-join executable this runs fib(n) on one worker for two
sizes under `valgrind --tool=callgrind`, takes the difference of the totals
(which cancels start-up and runtime creation) and divides by the difference in
spawns. The serial twin gives the cost of the kernel itself, so
"runtime minus serial" is the runtime's cost per spawn+join.

    tools/callgrind_spawn.py [--bin-dir build/bench/bench/bin ...] [--out bench/results/callgrind.json]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchreport.runner import find_exe  # noqa: E402  (the tools folder is the package's root)

RUNTIMES = [("serial", "serial"), ("mote", "mote"), ("onetbb", "tbb"),
            ("gnu_omp", "gomp"), ("llvm_omp", "llvmomp")]
SIZES = (20, 24)


def fib_spawns(n):
    # One spawn per call with n >= 2: fib(n + 1) - 1.
    a, b = 0, 1
    for _ in range(n + 1):
        a, b = b, a + b
    return a - 1




def instructions(exe, n):
    """Total instructions (Ir) of one fib(n) run on one worker."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
               exe, "--kernel", "fib", "--fib-n", str(n), "--workers", "1",
               "--reps", "1", "--warmup", "0"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=600)
        total = 0
        with open(out) as f:
            for line in f:
                m = re.match(r"^(summary|totals):\s+(\d+)", line)
                if m:
                    total = max(total, int(m.group(2)))
        return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", action="append", default=None)
    ap.add_argument("--out", default="bench/results/callgrind.json")
    args = ap.parse_args()
    bin_dirs = args.bin_dir or ["build/bench/bench/bin", "build/bench-llvmomp/bin",
                                "build/bench-llvmomp/bench/bin"]
    if shutil.which("valgrind") is None:
        print("callgrind_spawn: valgrind not found; skipped", file=sys.stderr)
        return 0
    rows = []
    d_spawns = fib_spawns(SIZES[1]) - fib_spawns(SIZES[0])
    for key, suffix in RUNTIMES:
        exe = find_exe("bench_fork_join_" + suffix, bin_dirs)
        if exe is None:
            print(f"callgrind_spawn: no executable for {key}; skipped", file=sys.stderr)
            continue
        small, large = (instructions(exe, n) for n in SIZES)
        per_spawn = (large - small) / d_spawns
        rows.append({"runtime": key, "instructions": {str(SIZES[0]): small, str(SIZES[1]): large},
                     "per_spawn": per_spawn})
        print(f"{key:10s} {per_spawn:8.1f} instructions per spawn (fib {SIZES[0]} -> {SIZES[1]})")
    serial = next((r["per_spawn"] for r in rows if r["runtime"] == "serial"), None)
    for r in rows:
        r["over_serial"] = None if serial is None else r["per_spawn"] - serial
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"kernel": "fib", "sizes": list(SIZES), "spawns_difference": d_spawns,
                   "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
