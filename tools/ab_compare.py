#!/usr/bin/env python3
"""Compare two builds of the same benchmark executables, side by side.

A report taken hours after another cannot be compared with it on a shared
machine (its speed moves by 1.2-1.7x within a day). This runs the executables
of build A and of build B alternately, round by round, in one sitting, and
prints for each job the median of A's per-run medians, B's, and B / A.

    tools/ab_compare.py --a OLD_BIN_DIR --b NEW_BIN_DIR --rounds 7 \\
        --job "bench_fork_join_mote --workers 2 --kernel fib --reps 5" \\
        --job "bench_micro_mote --workers 1 --kernel spawn --reps 5"

A job is an executable name (looked up in each bin dir) and its arguments, as
report.py passes them (bench/common/harness.hpp). Each JSON line an executable
prints is one (kernel, workers) record; its samples' median is that run's
figure. Within a round the order of A and B alternates, so neither always runs
first. --json writes every figure for later reading.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys


def run_once(exe, args, timeout):
    out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{exe} {' '.join(args)} exited with {out.returncode}: {out.stderr[-400:]}")
    figures = {}
    for line in out.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        rec = json.loads(line)
        if not rec.get("samples"):
            continue
        key = f"{rec.get('kernel')} w{rec.get('workers')} [{rec.get('unit', '')}]"
        figures[key] = statistics.median(rec["samples"])
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="bin dir of build A (the reference)")
    ap.add_argument("--b", required=True, help="bin dir of build B (the candidate)")
    ap.add_argument("--job", action="append", required=True, help="executable and arguments (repeatable)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--json", help="write every per-run figure here")
    args = ap.parse_args()

    jobs = [shlex.split(j) for j in args.job]
    per = {}  # (job index, key) -> {"a": [...], "b": [...]}
    for r in range(args.rounds):
        for j, job in enumerate(jobs):
            order = ("a", "b") if (r + j) % 2 == 0 else ("b", "a")
            for side in order:
                exe = os.path.join(getattr(args, side), job[0])
                for key, v in run_once(exe, job[1:], args.timeout).items():
                    per.setdefault((j, key), {"a": [], "b": []})[side].append(v)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    print(f"| job | record | A median | B median | B / A | runs |")
    print("|---|---|---|---|---|---|")
    for (j, key), v in sorted(per.items()):
        if not v["a"] or not v["b"]:
            continue
        a, b = statistics.median(v["a"]), statistics.median(v["b"])
        ratio = b / a if a else float("nan")
        print(f"| {jobs[j][0]} | {key} | {a:.4g} | {b:.4g} | {ratio:.3f} | {len(v['a'])} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({f"{' '.join(jobs[j])} :: {key}": v for (j, key), v in per.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
