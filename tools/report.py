#!/usr/bin/python3
"""Run mote's benchmark suites side by side and write the report.

Reads the suite registry (bench/suites.json), runs every benchmark executable
it names, interleaved round by round (for each round, every job once, in an
order rotated each round) so that all runtimes share the same noise, and
writes into bench/results/:

  results.json   every sample, the machine, tool versions, failures
  REPORT.md      machine, issue targets beside our figures, one table per
                 kernel, the plots
  *.png          bar plots (median, whiskers min..max)

Adding a suite is one entry in bench/suites.json (plus its executables in
bench/CMakeLists.txt). Suite-specific derived tables (e.g. the per-spawn cost
derived from fib) are optional functions in DERIVED below.

  tools/report.py                 full run (about 7 minutes on 2 cores)
  tools/report.py --quick         smoke run: one round, few repetitions
  tools/report.py --from-json     redraw REPORT.md and plots from results.json

Exits nonzero when a benchmark failed or computed a wrong answer (the report
is still written, with the failures listed).
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_REGISTRY = os.path.join(ROOT, "bench", "suites.json")
DEFAULT_BIN_DIRS = [
    os.path.join(ROOT, "build", "bench", "bench", "bin"),   # in-tree build (g++)
    os.path.join(ROOT, "build", "bench-llvmomp", "bin"),    # LLVM OpenMP build (clang++)
]
DEFAULT_OUT = os.path.join(ROOT, "bench", "results")

# Figures quoted by the issue. Lace and Taskflow are not measured here.
QUOTED = {
    "serial_fib32_ms": 2.7,
    "spawn_ns": [("Lace", 0.9), ("LLVM OpenMP", 47), ("GNU OpenMP", 56), ("Taskflow", 60), ("oneTBB", 102)],
    "fib32_2threads_ms": [("Lace", "4.0"), ("Taskflow", "113"), ("oneTBB", "184"), ("OpenMP", "620-700")],
    "mote_spawn_ns_max": 1.5,
    "mote_fib_speedup_min": 1.7,
    "mote_fib_vs_serial_max": 1.5,
}


# ---------------------------------------------------------------- statistics

def quantile(xs, q):
    s = sorted(xs)
    if not s:
        return float("nan")
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary(xs):
    return {
        "n": len(xs),
        "median": statistics.median(xs),
        "min": min(xs),
        "max": max(xs),
        "p10": quantile(xs, 0.10),
        "p90": quantile(xs, 0.90),
        "q1": quantile(xs, 0.25),
        "q3": quantile(xs, 0.75),
    }


def fmt(v, digits=3):
    if v is None or v != v:
        return "n/a"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.{digits - 1}f}" if a < 10 else f"{v:.1f}"
    return f"{v:.{digits}g}"


# ---------------------------------------------------------------- machine

def sh(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def dpkg_version(pkg):
    return sh(["dpkg-query", "-W", "-f=${Version}", pkg]) or None


def machine_info():
    model = ""
    for line in sh(["lscpu"]).splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
    first = lambda s: s.splitlines()[0] if s else None  # noqa: E731
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu_model": model,
        "nproc": int(sh(["nproc"]) or 0),
        "kernel": sh(["uname", "-srvmo"]),
        "gxx": first(sh(["g++", "--version"])),
        "clangxx": first(sh(["clang++", "--version"])),
        "python": platform.python_version(),
        "matplotlib": matplotlib.__version__,
        "packages": {p: dpkg_version(p) for p in
                     ["libtbb-dev", "libtbb12", "libomp-dev", "libomp5-14", "libgomp1", "libhwloc-dev"]},
        "mote_commit": sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]) or None,
        "loadavg_start": load,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


# ---------------------------------------------------------------- running

def find_exe(name, bin_dirs):
    for d in bin_dirs:
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def plan_jobs(registry, quick, only_suites, bin_dirs):
    """The list of (suite, job, runtime, workers, exe) to run each round."""
    jobs, skipped = [], []
    for suite in registry["suites"]:
        if only_suites and suite["name"] not in only_suites:
            continue
        for job in suite["jobs"]:
            spec = dict(job)
            if quick:
                spec.update(job.get("quick", {}))
            for rt in job["runtimes"]:
                rinfo = registry["runtimes"][rt]
                # A job may run another suite's executables (the robust suite
                # reruns fork_join and micro under other conditions).
                exe_name = f"bench_{job.get('exe_suite', suite['name'])}_{rinfo['exe_suffix']}"
                exe = find_exe(exe_name, bin_dirs)
                # A serial runtime runs once, with 1 worker, whatever the job's counts.
                workers = job["workers"] if rinfo.get("parallel", True) else [1]
                for w in workers:
                    key = (suite["name"], job["kernel"], rt, w)
                    if exe is None:
                        skipped.append({"key": list(key), "reason": f"{exe_name} not built"})
                        continue
                    jobs.append({"suite": suite, "spec": spec, "runtime": rt, "workers": w,
                                 "exe": exe, "key": key})
    return jobs, skipped


def run_job(job, samples_so_far, timeout):
    spec = job["spec"]
    warmup = spec.get("warmup", 1)
    budget = spec.get("budget_ms")
    # A kernel slower than its budget needs no warm-up call before each sample:
    # its first call warms everything, and a warm-up would double the cost.
    if budget and spec.get("unit") == "ms" and samples_so_far and statistics.median(samples_so_far) > budget:
        warmup = 0
    cmd = [job["exe"], "--kernel", spec.get("kernel_cli", spec["kernel"]), "--workers", str(job["workers"]),
           "--reps", str(spec.get("reps", 5)), "--warmup", str(warmup)]
    if budget:
        cmd += ["--budget-ms", str(budget)]
    cmd += [str(a) for a in spec.get("args", [])]
    env = dict(os.environ)
    scratch = tempfile.mkdtemp(prefix="mote-bench-")
    for k, v in spec.get("env", {}).items():
        env[k] = v.replace("{scratch}", scratch)
    scenario = spec.get("scenario", "plain")
    copies = 2 if scenario == "two_processes" else 1
    busy = None
    t0 = time.monotonic()
    try:
        if scenario == "busy_core":
            # Another program, pinned to CPU 0, that never sleeps.
            busy = subprocess.Popen(["taskset", "-c", "0", "/bin/sh", "-c", "while :; do :; done"])
            time.sleep(0.05)
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                 for _ in range(copies)]
        outs = []
        for p in procs:
            try:
                outs.append(p.communicate(timeout=timeout))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                return None, f"timed out after {timeout} s: {' '.join(cmd)}"
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
        shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.monotonic() - t0
    records = []
    for p, (stdout, stderr) in zip(procs, outs):
        if p.returncode != 0:
            return None, (f"exit status {p.returncode}: {' '.join(cmd)}\n{stderr.strip()[-1500:]}")
        for line in stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    return None, f"unparsable output line: {line[:200]}"
    if not records:
        return None, f"no record printed: {' '.join(cmd)}"
    if "kernel_cli" in spec or "exe_suite" in spec or copies > 1:
        # Rerun of another suite's kernel: file it under this job's name; the
        # two processes of one job pool their samples.
        merged = dict(records[0])
        merged["samples"] = [x for r in records for x in r["samples"]]
        merged["suite"] = job["suite"]["name"]
        merged["kernel"] = spec["kernel"]
        records = [merged]
    return {"records": records, "seconds": elapsed, "cmd": cmd}, None


def run_all(registry, args, bin_dirs):
    jobs, skipped = plan_jobs(registry, args.quick, args.suite, bin_dirs)
    rounds = args.rounds or (1 if args.quick else 3)
    results = {}   # key -> record with accumulated samples
    failures = []
    failed_keys = set()
    t_start = time.monotonic()
    round_seconds = []
    for r in range(rounds):
        elapsed = time.monotonic() - t_start
        if round_seconds and elapsed + max(round_seconds) > 60 * args.max_minutes:
            print(f"stopping after {r} rounds: another would pass --max-minutes {args.max_minutes}",
                  file=sys.stderr, flush=True)
            rounds = r
            break
        round_start = time.monotonic()
        # Rotate the order so that no runtime always runs right after the same neighbour.
        offset = (r * 7) % max(1, len(jobs))
        order = jobs[offset:] + jobs[:offset]
        print(f"round {r + 1}/{rounds}: {len(order)} jobs", file=sys.stderr, flush=True)
        for job in order:
            key = job["key"]
            if key in failed_keys:
                continue
            prev = results.get(key, {}).get("samples", [])
            out, err = run_job(job, prev, args.timeout)
            label = f"{key[0]}/{key[1]} {key[2]} x{key[3]}"
            if err:
                print(f"  FAILED {label}: {err}", file=sys.stderr, flush=True)
                failures.append({"key": list(key), "error": err})
                failed_keys.add(key)
                continue
            for rec in out["records"]:
                k = (rec["suite"], rec["kernel"], rec["runtime"], rec["workers"])
                acc = results.setdefault(k, {**rec, "samples": [], "runs": 0, "results": []})
                acc["samples"].extend(rec["samples"])
                acc["runs"] += 1
                acc["results"].append(rec["result"])
            med = statistics.median(out["records"][0]["samples"]) if out["records"][0]["samples"] else float("nan")
            print(f"  {label}: median {fmt(med)} {out['records'][0]['unit']} "
                  f"({len(out['records'][0]['samples'])} samples, {out['seconds']:.1f} s)",
                  file=sys.stderr, flush=True)
        round_seconds.append(time.monotonic() - round_start)
    # Every runtime must compute the same answer as the baseline (or, without
    # one, as each other) for the timing-kernels; the executables check the
    # known answers themselves.
    for suite in registry["suites"]:
        base = suite.get("baseline")
        if not base:
            continue
        for job in suite["jobs"]:
            ref = results.get((suite["name"], job["kernel"], base, 1))
            if ref is None:
                continue
            for k, rec in results.items():
                if k[0] == suite["name"] and k[1] == job["kernel"] and set(rec["results"]) != {ref["result"]}:
                    failures.append({"key": list(k), "error": f"result {rec['results']} != {base} {ref['result']}"})
    return {
        "rounds": rounds,
        "duration_s": time.monotonic() - t_start,
        "records": sorted(results.values(), key=lambda x: (x["suite"], x["kernel"], x["runtime"], x["workers"])),
        "failures": failures,
        "skipped": skipped,
    }


# ---------------------------------------------------------------- derived figures

def index(records):
    return {(r["suite"], r["kernel"], r["runtime"], r["workers"]): r for r in records}


def med(idx, *key):
    r = idx.get(tuple(key))
    return statistics.median(r["samples"]) if r and r["samples"] else None


def spawn_costs(registry, idx):
    """Per runtime: spawn+join ns from the empty-task loop (1 and 2 workers)
    and derived from fib: (t_fib(1 worker) - t_fib(serial)) / spawns."""
    serial = idx.get(("fork_join", "fib", "serial", 1))
    rows = []
    for rt in registry["runtimes"]:
        if rt == "serial":
            continue
        fib1 = med(idx, "fork_join", "fib", rt, 1)
        derived = None
        if serial and fib1 is not None:
            spawns = serial.get("extra", {}).get("spawns")
            if spawns:
                derived = (fib1 - statistics.median(serial["samples"])) * 1e6 / spawns
        rows.append({"runtime": rt, "loop_1w": med(idx, "micro", "spawn", rt, 1),
                     "loop_2w": med(idx, "micro", "spawn", rt, 2), "fib_derived_1w": derived})
    return rows


def targets_section(registry, idx):
    labels = {k: v["label"] for k, v in registry["runtimes"].items()}
    q = QUOTED
    out = ["## Targets from the issue, beside our figures", "",
           "The quoted figures come from the issue (from other machines and papers). Lace and "
           "Taskflow are **quoted only, not measured here**; oneTBB and the OpenMPs are measured "
           "below on this machine. Ours are medians of this run.", ""]
    serial = med(idx, "fork_join", "fib", "serial", 1)
    out += ["| figure | quoted | ours (this machine) |", "|---|---|---|",
            f"| serial fib(32) | {q['serial_fib32_ms']} ms | {fmt(serial)} ms |"]
    costs = {r["runtime"]: r for r in spawn_costs(registry, idx)
             if any(r[k] is not None for k in ("loop_1w", "loop_2w", "fib_derived_1w"))}
    quoted_spawn = ", ".join(f"{n} {v} ns" for n, v in q["spawn_ns"])
    ours = "; ".join(f"{labels[rt]} {fmt(c['fib_derived_1w'])} ns (fib) / {fmt(c['loop_1w'])} ns (loop)"
                     for rt, c in costs.items())
    out.append(f"| per-spawn cost, 1 thread | {quoted_spawn} | {ours} |")
    quoted_fib2 = ", ".join(f"{n} {v} ms" for n, v in q["fib32_2threads_ms"])
    ours = "; ".join(f"{labels[rt]} {fmt(med(idx, 'fork_join', 'fib', rt, 2))} ms"
                     for rt in registry["runtimes"]
                     if rt != "serial" and med(idx, "fork_join", "fib", rt, 2) is not None)
    out.append(f"| fib(32) on 2 threads | {quoted_fib2} | {ours} |")
    out += ["", "mote's own aims:", "", "| aim | target | ours | met? |", "|---|---|---|---|"]

    def verdict(ok):
        return "n/a" if ok is None else ("yes" if ok else "**no**")

    spawn = costs.get("mote", {}).get("loop_1w")
    out.append(f"| spawn+join on one worker (empty join loop) | <= {q['mote_spawn_ns_max']} ns | "
               f"{fmt(spawn)} ns | {verdict(None if spawn is None else spawn <= q['mote_spawn_ns_max'])} |")
    f1, f2 = med(idx, "fork_join", "fib", "mote", 1), med(idx, "fork_join", "fib", "mote", 2)
    sp = f1 / f2 if f1 and f2 else None
    out.append(f"| fib(32): 2 workers vs 1 worker | >= {q['mote_fib_speedup_min']}x faster | "
               f"{fmt(sp)}x | {verdict(None if sp is None else sp >= q['mote_fib_speedup_min'])} |")
    vs = f2 / serial if f2 and serial else None
    out.append(f"| fib(32) on 2 workers vs serial | within {q['mote_fib_vs_serial_max']}x | "
               f"{fmt(vs)}x | {verdict(None if vs is None else vs <= q['mote_fib_vs_serial_max'])} |")
    out.append("")
    return out


def micro_derived(registry, idx, out_dir):
    labels = {k: v["label"] for k, v in registry["runtimes"].items()}
    rows = [r for r in spawn_costs(registry, idx)
            if any(r[k] is not None for k in ("loop_1w", "loop_2w", "fib_derived_1w"))]
    lines = ["### Spawn+join cost (ns per spawn)", "",
             "`loop`: the empty spawn+join loop of the micro suite, median. `from fib`: "
             "(median fib(32) on 1 worker - median serial fib(32)) / number of spawns, the spawns "
             "counted by walking the serial recursion (calls with n >= 2).", "",
             "| runtime | loop, 1 worker | loop, 2 workers | from fib, 1 worker |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {labels[r['runtime']]} | {fmt(r['loop_1w'])} | {fmt(r['loop_2w'])} | "
                     f"{fmt(r['fib_derived_1w'])} |")
    lines.append("")
    png = plot_spawn_costs(registry, rows, out_dir)
    if png:
        lines += [f"![spawn cost]({png})", ""]
    lines += policy_side_by_side(idx)
    return lines


def policy_side_by_side(idx):
    """mote's spawn and group_spawn loops under MOTE_SCHEDULER=steal (the
    default) and =delegation (the *_delegation jobs), in one table."""
    rows = []
    for kernel in ("spawn", "group_spawn"):
        for w in (1, 2):
            steal = med(idx, "micro", kernel, "mote", w)
            deleg = med(idx, "micro", f"{kernel}_delegation", "mote", w)
            if steal is None and deleg is None:
                continue
            ratio = fmt(deleg / steal) + "x" if steal and deleg else "n/a"
            rows.append(f"| {kernel} | {w} | {fmt(steal)} | {fmt(deleg)} | {ratio} |")
    if not rows:
        return []
    return ["### mote's scheduler policies side by side (ns per task, median)", "",
            "MOTE_SCHEDULER=steal (work stealing, the default) against =delegation "
            "(docs/scheduler.md). `spawn` is join's fast path, which the policy does not touch; "
            "`group_spawn` sends every task through the delegation scheduler under delegation.", "",
            "| loop | workers | steal | delegation | delegation / steal |", "|---|---|---|---|---|"] + rows + [""]


TINY_KERNELS = ["bc", "bfs", "cc", "pr", "sssp", "tc", "json"]
TINY_SWEEP = [("sweep_0.1", 0.1), ("sweep_0.5", 0.5), ("sweep_1", 1.0), ("sweep_5", 5.0)]
# The figures for two tasks of 0.1 / 0.5 / 1 / 5 us (speedup over serial).
TINY_QUOTED = {"best general runtime": [0.55, 1.31, 1.56, 1.91],
               "hand-written SPSC assistant": [0.62, 1.58, 1.76, 1.93]}
TINY_AIM = [0.75, 1.75, 1.85, 1.95]
TINY_GEOMEAN_AIM = 1.5
TINY_MOTE = ["mote_assistant", "mote", "mote_assistant_adaptive", "mote_adaptive"]
# The adaptive offload (assistant_options::adaptive, runtime_options::adaptive):
# today's two variants run with it off, their twins with it on.
TINY_PLAIN = ["mote", "mote_assistant"]
TINY_ADAPTIVE = ["mote_adaptive", "mote_assistant_adaptive"]
TINY_TWIN = {"mote_adaptive": "mote", "mote_assistant_adaptive": "mote_assistant"}  # the same code, offload off
TINY_ADAPTIVE_VS_SERIAL = 0.97     # every kernel and sweep size, every round
TINY_ADAPTIVE_VS_PLAIN = 0.95      # against the better of TINY_PLAIN, where that one beat serial
# The tiny-kernel geometric mean the adaptive variants aim at, by the round trip
# of the round: 1.3x at <= 150 ns, 1.0x at >= 300 ns, straight in between.
TINY_ADAPTIVE_GEOMEAN_BANDS = ((150.0, 1.3), (300.0, 1.0))


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    if not xs:
        return None
    prod = 1.0
    for x in xs:
        prod *= x
    return prod ** (1.0 / len(xs))


def tiny_speedups(registry, idx, kernels):
    """{kernel: {runtime: serial median / runtime median}} for the tiny suite."""
    out = {}
    for k in kernels:
        base = med(idx, "tiny", k, "serial", 1)
        row = {}
        for rt in registry["runtimes"]:
            if rt == "serial":
                continue
            m = med(idx, "tiny", k, rt, 2)
            if base and m:
                row[rt] = base / m
        out[k] = row
    return out


def tiny_derived(registry, idx, out_dir):
    labels = {k: v["label"] for k, v in registry["runtimes"].items()}
    rts = [rt for rt in registry["runtimes"] if rt != "serial"
           and any(k[0] == "tiny" and k[2] == rt for k in idx)]
    if not rts:
        return []
    peers = [rt for rt in rts if rt not in TINY_MOTE]
    sp = tiny_speedups(registry, idx, TINY_KERNELS)
    lines = ["### Speedup over serial, per kernel", "",
             "Serial median ns per pair / runtime median ns per pair (higher is better; 1.0 = no "
             "gain). `task` is one instance on one thread (half the serial pair), the size of each "
             "task. Geometric means over the kernels; \"without negative outliers\" leaves out, per "
             "runtime, the kernels on which it lost to serial (speedup < 1), as the study this suite "
             "repeats does in its Fig. 4. The last column compares the best mote variant (adaptive "
             "offload on or off) with the best peer on that kernel.", ""]
    head = "| kernel | task (us) | " + " | ".join(labels[rt] for rt in rts) + " | mote >= best peer? |"
    lines += [head, "|" + "---|" * (len(rts) + 3)]
    for k in TINY_KERNELS:
        base = med(idx, "tiny", k, "serial", 1)
        if base is None:
            continue
        row = sp[k]
        best = max(row.values()) if row else None
        cells = []
        for rt in rts:
            v = row.get(rt)
            cells.append("n/a" if v is None else (f"**{v:.2f}x**" if v == best else f"{v:.2f}x"))
        mote_best = max((row[rt] for rt in TINY_MOTE if rt in row), default=None)
        peer_best = max((row[rt] for rt in peers if rt in row), default=None)
        verdict = "n/a" if mote_best is None or peer_best is None else (
            "yes" if mote_best >= peer_best else f"**no** ({mote_best:.2f} vs {peer_best:.2f})")
        lines.append(f"| {k} | {base / 2000:.2f} | " + " | ".join(cells) + f" | {verdict} |")
    g_all, g_pos = [], []
    for rt in rts:
        vals = [sp[k][rt] for k in TINY_KERNELS if rt in sp.get(k, {})]
        g_all.append(geomean(vals))
        g_pos.append(geomean([v for v in vals if v >= 1.0]))
    lines.append("| **geometric mean** | | " + " | ".join(fmt(g) + "x" if g else "n/a" for g in g_all) + " | |")
    lines.append("| geometric mean without negative outliers | | " +
                 " | ".join(fmt(g) + "x" if g else "n/a" for g in g_pos) + " | |")
    lines.append("")
    ga = dict(zip(rts, g_all))
    best_mote_g = max((ga[rt] for rt in TINY_MOTE if ga.get(rt)), default=None)
    lines.append(f"Aim: a tiny-kernel geometric mean of at least {TINY_GEOMEAN_AIM}x. Ours: "
                 + ", ".join(f"{labels[rt]} {fmt(ga[rt])}x" for rt in TINY_MOTE if ga.get(rt))
                 + (f" -> **{'met' if best_mote_g >= TINY_GEOMEAN_AIM else 'not met'}**." if best_mote_g else "."))
    lines.append("")

    ssp = tiny_speedups(registry, idx, [k for k, _ in TINY_SWEEP])
    lines += ["### The synthetic sweep: two tasks of calibrated busy work", "",
              "| task | " + " | ".join(labels[rt] for rt in rts) + " | quoted: best general runtime | "
              "quoted: hand-written SPSC assistant | aim (mote) | met? |",
              "|" + "---|" * (len(rts) + 5)]
    for i, (k, us) in enumerate(TINY_SWEEP):
        row = ssp.get(k, {})
        if not row:
            continue
        cells = [f"{row[rt]:.2f}x" if rt in row else "n/a" for rt in rts]
        mote_best = max((row[rt] for rt in TINY_MOTE if rt in row), default=None)
        verdict = "n/a" if mote_best is None else ("yes" if mote_best >= TINY_AIM[i] else "**no**")
        lines.append(f"| {us} us | " + " | ".join(cells) +
                     f" | {TINY_QUOTED['best general runtime'][i]}x | "
                     f"{TINY_QUOTED['hand-written SPSC assistant'][i]}x | >= {TINY_AIM[i]}x | {verdict} |")
    rt_ns = med(idx, "tiny", "roundtrip", "serial", 1)
    rt_rec = idx.get(("tiny", "roundtrip", "serial", 1))
    per_run = ""
    if rt_rec and rt_rec.get("runs"):
        n = len(rt_rec["samples"]) // rt_rec["runs"]
        if n:
            per_run = (" Per round, in order: " + "; ".join(
                ", ".join(f"{x:.0f}" for x in rt_rec["samples"][i * n:(i + 1) * n])
                for i in range(rt_rec["runs"])) + " ns. The round trip is a property of the "
                "host at that moment (other tenants share it): every speedup in this section moves "
                "with it, for every runtime alike.")
    lines += ["", f"Cache-line round trip between the two cores, measured in this run: "
              f"**{fmt(rt_ns)} ns** median (the issue quotes 49 ns).{per_run} A pair of tasks handed "
              "to another thread costs at least one round trip (the task goes there, the news of "
              "its end comes back), so tasks shorter than a few round trips cannot gain.", ""]
    lines += tiny_per_round(registry, idx, rts)
    png = plot_tiny(registry, rts, sp, ssp, out_dir)
    if png:
        lines += [f"![tiny speedups]({png})", ""]
    lines += tiny_fine_sweep(registry, idx, rts, out_dir)
    lines += tiny_adaptive_rounds(registry, idx)
    lines += tiny_adaptive_aims(registry, idx)
    return lines


def round_medians(rec):
    """The median of each round's samples of one record (rounds in run order)."""
    if not rec or not rec.get("runs"):
        return []
    n = len(rec["samples"]) // rec["runs"]
    if n == 0 or n * rec["runs"] != len(rec["samples"]):
        return []
    return [statistics.median(rec["samples"][i * n:(i + 1) * n]) for i in range(rec["runs"])]


def tiny_per_round(registry, idx, rts):
    """Speedups computed within each round, beside that round's round trip:
    the pooled medians above mix rounds in which the host behaved differently."""
    labels = {k: v["label"] for k, v in registry["runtimes"].items()}
    rt_rounds = round_medians(idx.get(("tiny", "roundtrip", "serial", 1)))
    if len(rt_rounds) < 2:
        return []
    def speedup(kernel, rt, r):
        base = round_medians(idx.get(("tiny", kernel, "serial", 1)))
        mine = round_medians(idx.get(("tiny", kernel, rt, 2)))
        return base[r] / mine[r] if r < len(base) and r < len(mine) and mine[r] else None
    lines = ["### The same, round by round", "",
             "Each round runs every job once, in turn, so the speedups of one round were measured "
             "under that round's conditions. Per round: the round trip, each runtime's speedup for "
             "the sweep's four sizes (0.1 / 0.5 / 1 / 5 us) and the geometric mean over the seven "
             "kernels.", "",
             "| round | round trip (ns) | " + " | ".join(labels[rt] for rt in rts) + " |",
             "|" + "---|" * (len(rts) + 2)]
    for r, rt_ns in enumerate(rt_rounds):
        cells = []
        for rt in rts:
            sw = [speedup(k, rt, r) for k, _ in TINY_SWEEP]
            g = geomean([speedup(k, rt, r) for k in TINY_KERNELS])
            cells.append(" / ".join("n/a" if v is None else f"{v:.2f}" for v in sw) +
                         f"; geomean {fmt(g)}")
        lines.append(f"| {r + 1} | {rt_ns:.0f} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def plot_tiny(registry, rts, sp, ssp, out_dir):
    groups = [k for k in TINY_KERNELS if sp.get(k)] + [k for k, _ in TINY_SWEEP if ssp.get(k)]
    if not groups:
        return None
    data = {**sp, **ssp}
    fig, ax = plt.subplots(figsize=(10, 3.8))
    width = 0.8 / len(rts)
    for ri, rt in enumerate(rts):
        xs = [gi + (ri - (len(rts) - 1) / 2) * width for gi, k in enumerate(groups) if rt in data[k]]
        hs = [data[k][rt] for k in groups if rt in data[k]]
        ax.bar(xs, hs, width, label=registry["runtimes"][rt]["label"],
               color=registry["runtimes"][rt]["color"], edgecolor="black")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([g.replace("sweep_", "") + (" us" if g.startswith("sweep") else "") for g in groups])
    ax.set_ylabel("speedup over serial")
    ax.set_title("tiny: two tasks in parallel vs back to back (median; higher is better)", fontsize=9)
    ax.legend(fontsize=7, ncol=3)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    name = "tiny_speedups.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return name


def tiny_sweep_kernels(idx):
    """[(kernel, us)] of every sweep_<us> kernel the tiny suite ran, smallest first."""
    out = set()
    for k in idx:
        if k[0] == "tiny" and k[1].startswith("sweep_"):
            try:
                out.add((k[1], float(k[1][len("sweep_"):])))
            except ValueError:
                continue
    return sorted(out, key=lambda x: x[1])


def tiny_name(kernel):
    """bfs -> bfs, sweep_0.02 -> 0.02 us."""
    return kernel[len("sweep_"):] + " us" if kernel.startswith("sweep_") else kernel


def tiny_rounds(idx):
    """The rounds the tiny suite ran, as the round trip of each (ns; None where not measured)."""
    rts = round_medians(idx.get(("tiny", "roundtrip", "serial", 1)))
    n = max((r.get("runs", 0) for k, r in idx.items() if k[0] == "tiny"), default=0)
    return rts[:n] + [None] * (n - len(rts))


def tiny_round_speedup(idx, kernel, rt, r):
    """Serial / rt on one kernel, both medians of round r alone."""
    base = round_medians(idx.get(("tiny", kernel, "serial", 1)))
    mine = round_medians(idx.get(("tiny", kernel, rt, 2)))
    return base[r] / mine[r] if r < len(base) and r < len(mine) and mine[r] else None


def tiny_geomean_aim(rt_ns):
    """(aim, note) for an adaptive variant's tiny-kernel geometric mean in a
    round whose round trip was rt_ns: the band's aim, or between the bands the
    straight line from one to the other."""
    (lo_ns, lo_aim), (hi_ns, hi_aim) = TINY_ADAPTIVE_GEOMEAN_BANDS
    if rt_ns is None:
        return None, "no round trip measured"
    if rt_ns <= lo_ns:
        return lo_aim, f"RT <= {lo_ns:.0f} ns: {lo_aim}x"
    if rt_ns >= hi_ns:
        return hi_aim, f"RT >= {hi_ns:.0f} ns: {hi_aim}x"
    aim = lo_aim + (hi_aim - lo_aim) * (rt_ns - lo_ns) / (hi_ns - lo_ns)
    return aim, f"between the bands: {aim:.2f}x interpolated"


def tiny_adaptive_round(idx, rt, r, kernels):
    """One adaptive variant in round r: its worst speedup over serial over
    `kernels` (value, kernel), its tiny-kernel geometric mean, and its worst
    ratio to the better of today's two variants over the kernels where that
    one beat serial (ratio, kernel, that variant), with how many there were."""
    worst = None
    ratio = None
    twin = None
    compared = 0
    for k in kernels:
        mine = tiny_round_speedup(idx, k, rt, r)
        if mine is None:
            continue
        if worst is None or mine < worst[0]:
            worst = (mine, k)
        own = tiny_round_speedup(idx, k, TINY_TWIN[rt], r)
        if own is not None and own > 1.0 and (twin is None or mine / own < twin[0]):
            twin = (mine / own, k)
        plain = [(v, p) for p in TINY_PLAIN for v in [tiny_round_speedup(idx, k, p, r)] if v is not None]
        if not plain:
            continue
        best, who = max(plain)
        if best > 1.0:
            compared += 1
            if ratio is None or mine / best < ratio[0]:
                ratio = (mine / best, k, who)
    g = geomean([tiny_round_speedup(idx, k, rt, r) for k in TINY_KERNELS])
    return {"worst": worst, "geomean": g, "ratio": ratio, "compared": compared, "twin": twin}


def tiny_adaptive_present(idx):
    return [rt for rt in TINY_ADAPTIVE if any(k[0] == "tiny" and k[2] == rt for k in idx)]


def tiny_fine_sweep(registry, idx, rts, out_dir):
    """Speedup over serial against task size over every sweep_<us> kernel, beside
    the bound a hand-off of one round trip allows; table and tiny_sizes.png."""
    labels = {k: v["label"] for k, v in registry["runtimes"].items()}
    sweeps = tiny_sweep_kernels(idx)
    sp = tiny_speedups(registry, idx, [k for k, _ in sweeps])
    sweeps = [(k, us) for k, us in sweeps if sp.get(k)]
    cols = [rt for rt in rts if any(rt in sp[k] for k, _ in sweeps)]
    if len(sweeps) < 2 or not cols:
        return []
    rt_ns = med(idx, "tiny", "roundtrip", "serial", 1)
    lines = ["### Speedup against task size (the fine sweep)", "",
             f"Two tasks of W us of calibrated busy work, {len(sweeps)} sizes from {sweeps[0][1]:g} to "
             f"{sweeps[-1][1]:g} us; median speedup over serial (pooled over the rounds). `measured` is one "
             "task alone as the process calibrated it (extra.task_ns_measured): serial's, with the range "
             "over every runtime's process in brackets. `bound` = 2W / (W + RT), W the measured task and "
             "RT the round trip measured in this run"
             + (f" ({fmt(rt_ns)} ns, median)" if rt_ns else " (not measured: n/a)") +
             ": the speedup of a pair whose second task reaches the other core and reports back for one "
             "round trip and nothing else. Below W = RT it is under 1, and a runtime that runs the pair in "
             "place there can reach max(1, bound). `-`: not run at that size (the OpenMPs run the four "
             "quoted sizes only).", "",
             "| task (us) | measured (ns) | bound | " + " | ".join(labels[rt] for rt in cols) + " |",
             "|" + "---|" * (len(cols) + 3)]
    for k, us in sweeps:
        row = sp[k]
        best = max(row.values())
        ser = idx.get(("tiny", k, "serial", 1), {}).get("extra", {}).get("task_ns_measured")
        all_w = [r["extra"]["task_ns_measured"] for key, r in idx.items()
                 if key[:2] == ("tiny", k) and "task_ns_measured" in r.get("extra", {})]
        measured = fmt(ser) if ser else "n/a"
        if all_w:
            measured += f" ({fmt(min(all_w))}-{fmt(max(all_w))})"
        w = ser or us * 1000.0
        bound = f"{2 * w / (w + rt_ns):.2f}x" if rt_ns else "n/a"
        cells = []
        for rt in cols:
            v = row.get(rt)
            cells.append("-" if v is None else (f"**{v:.2f}x**" if v == best else f"{v:.2f}x"))
        lines.append(f"| {us:g} | {measured} | {bound} | " + " | ".join(cells) + " |")
    lines.append("")
    png = plot_tiny_sizes(registry, sweeps, cols, sp, rt_ns, out_dir)
    if png:
        lines += [f"![tiny speedup against task size]({png})", ""]
    return lines


def plot_tiny_sizes(registry, sweeps, rts, sp, rt_ns, out_dir):
    fig, ax = plt.subplots(figsize=(10.5, 4.6))
    top = 2.0
    for rt in rts:
        pts = [(us, sp[k][rt]) for k, us in sweeps if rt in sp[k]]
        if not pts:
            continue
        info = registry["runtimes"][rt]
        partial = len(pts) < len(sweeps) / 2
        style = "-" if rt in TINY_ADAPTIVE else ("--" if rt in TINY_PLAIN else ":")
        top = max(top, max(p[1] for p in pts))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", markersize=3.5 if partial else 4.5,
                linewidth=1.0 if partial else 1.6, color=info["color"], label=info["label"],
                alpha=0.6 if partial else 1.0)
    lo, hi = sweeps[0][1], sweeps[-1][1]
    if rt_ns:
        xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
        ax.plot(xs, [2 * x * 1000 / (x * 1000 + rt_ns) for x in xs], color="black", linewidth=1.0,
                linestyle=(0, (5, 2, 1, 2)), label=f"bound 2W/(W+RT), RT = {rt_ns:.0f} ns")
        if lo * 1000 < rt_ns < hi * 1000:
            ax.axvline(rt_ns / 1000, color="grey", linewidth=0.6, linestyle=":", label="W = RT")
    ax.axhline(1.0, color="#7f7f7f", linewidth=1.2, label="serial (1.0)")
    ax.axhline(2.0, color="#7f7f7f", linewidth=0.5, linestyle=":")
    ax.set_xscale("log")
    ticks = [t for t in (0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100) if lo <= t <= hi]
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlim(lo / 1.15, hi * 1.15)
    ax.set_ylim(0, top * 1.07)
    ax.set_xlabel("task size W (us, nominal; log scale)")
    ax.set_ylabel("speedup over serial (median)")
    ax.set_title("tiny: two tasks of W us in parallel vs back to back "
                 "(solid: adaptive offload on; dashed: off)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(which="major", alpha=0.3)
    fig.tight_layout()
    name = "tiny_sizes.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return name


def tiny_adaptive_setup(registry, idx):
    """(labels, adaptive variants run, rounds, sweep kernels, every kernel) for
    the adaptive tables, or None when no adaptive variant ran."""
    labels = {k: v["label"] for k, v in registry["runtimes"].items()}
    adaptive = tiny_adaptive_present(idx)
    rounds = tiny_rounds(idx)
    if not adaptive or not rounds:
        return None
    sweeps = tiny_sweep_kernels(idx)
    return labels, adaptive, rounds, sweeps, TINY_KERNELS + [k for k, _ in sweeps]


def tiny_adaptive_rounds(registry, idx):
    """Per round: the round trip, and per adaptive variant its worst speedup
    over serial, tiny-kernel geometric mean and worst ratio to the better of
    today's two variants."""
    setup = tiny_adaptive_setup(registry, idx)
    if setup is None:
        return []
    labels, adaptive, rounds, sweeps, kernels = setup
    lines = ["### The adaptive offload, round by round", "",
             "Each round runs every job once, so these speedups compare runs made under the same conditions "
             "(serial and the variant, both medians of that round). Per adaptive variant: its worst speedup "
             f"over serial across the {len(TINY_KERNELS)} kernels and the {len(sweeps)} sweep sizes (and "
             f"where), its geometric mean over the {len(TINY_KERNELS)} kernels, and its worst ratio to the "
             f"better of {labels['mote']} and {labels['mote_assistant']} (adaptive offload off; the better "
             "one per kernel and round) over the kernels and sizes where that better one beat serial (and "
             "where, and which one; `n` such kernels and sizes); and its worst ratio to its own twin (the same "
             "code with the offload off: mote adaptive to mote, mote assistant adaptive to mote assistant) where "
             "the twin beat serial.", "",
             "| round | round trip (ns) | variant | worst vs serial | tiny-kernel geomean | "
             "worst vs the better of today's two | n | worst vs its twin |", "|---|---|---|---|---|---|---|---|"]
    for r, rt_ns in enumerate(rounds):
        for rt in adaptive:
            a = tiny_adaptive_round(idx, rt, r, kernels)
            worst = "n/a" if a["worst"] is None else f"{a['worst'][0]:.2f}x ({tiny_name(a['worst'][1])})"
            ratio = "n/a" if a["ratio"] is None else (
                f"{a['ratio'][0]:.2f}x ({tiny_name(a['ratio'][1])}, vs {labels[a['ratio'][2]]})")
            twin = "n/a" if a["twin"] is None else f"{a['twin'][0]:.2f}x ({tiny_name(a['twin'][1])})"
            lines.append(f"| {r + 1} | {'n/a' if rt_ns is None else f'{rt_ns:.0f}'} | {labels[rt]} | {worst} | "
                         f"{fmt(a['geomean'])}x | {ratio} | {a['compared']} | {twin} |")
    lines.append("")
    return lines


def tiny_adaptive_aims(registry, idx):
    """The adaptive offload's aims, each checked in every round."""
    setup = tiny_adaptive_setup(registry, idx)
    if setup is None:
        return []
    labels, adaptive, rounds, sweeps, kernels = setup
    (lo_ns, lo_aim), (hi_ns, hi_aim) = TINY_ADAPTIVE_GEOMEAN_BANDS

    def verdict(oks):
        if not oks or any(ok is None for ok in oks):
            return "n/a"
        return "met" if all(oks) else "**not met**"

    lines = ["### Aims of the adaptive offload", "",
             "Checked for each adaptive variant on its own, in every round (figures of one round against "
             "that round's serial run and that round's round trip); an aim is met when it holds in all "
             f"{len(rounds)} round(s)."
             + (" With one round (as in a quick run, which also has one repetition per process) the "
                "verdicts rest on single samples: they show that the figures are computed more than where "
                "the runtime stands." if len(rounds) == 1 else ""), "",
             "| aim | variant | per round | met? |", "|---|---|---|---|"]
    for rt in adaptive:
        per = [tiny_adaptive_round(idx, rt, r, kernels) for r in range(len(rounds))]
        # 1. never slower than serial by more than 3%.
        oks, figs = [], []
        for r, a in enumerate(per):
            if a["worst"] is None:
                oks.append(None)
                figs.append(f"{r + 1}: n/a")
                continue
            oks.append(a["worst"][0] >= TINY_ADAPTIVE_VS_SERIAL)
            figs.append(f"{r + 1}: worst {a['worst'][0]:.2f}x ({tiny_name(a['worst'][1])})")
        lines.append(f"| >= {TINY_ADAPTIVE_VS_SERIAL}x serial on every kernel and sweep size | {labels[rt]} | "
                     + "; ".join(figs) + f" | {verdict(oks)} |")
        # 2. never much below the better of today's two where they gain, and
        # 2b. the same against its own twin (the same code with the offload off).
        def ratio_aim(key, nothing, describe):
            oks, figs = [], []
            for r, a in enumerate(per):
                if a[key] is None:
                    # Nothing to compare: no such kernel beat serial this round.
                    oks.append(True if a["worst"] is not None else None)
                    figs.append(f"{r + 1}: {nothing}")
                    continue
                oks.append(a[key][0] >= TINY_ADAPTIVE_VS_PLAIN)
                figs.append(f"{r + 1}: worst {a[key][0]:.2f}x ({describe(a)})")
            return "; ".join(figs) + f" | {verdict(oks)} |"

        lines.append(f"| >= {TINY_ADAPTIVE_VS_PLAIN}x the better of {labels['mote']} and "
                     f"{labels['mote_assistant']}, wherever that one beat serial | {labels[rt]} | "
                     + ratio_aim("ratio", "no kernel where today's variants beat serial",
                                 lambda a: f"{tiny_name(a['ratio'][1])}, vs {labels[a['ratio'][2]]}; "
                                           f"{a['compared']} compared"))
        lines.append(f"| >= {TINY_ADAPTIVE_VS_PLAIN}x its twin ({labels[TINY_TWIN[rt]]}), wherever that one beat "
                     f"serial | {labels[rt]} | "
                     + ratio_aim("twin", "its twin beat serial nowhere", lambda a: tiny_name(a["twin"][1])))
        # 3. the tiny-kernel geometric mean, against the aim for that round's round trip.
        oks, figs = [], []
        for r, (a, rt_ns) in enumerate(zip(per, rounds)):
            aim, note = tiny_geomean_aim(rt_ns)
            g = a["geomean"]
            if aim is None or g is None:
                oks.append(None)
                figs.append(f"{r + 1}: {fmt(g)}x ({note})")
                continue
            oks.append(g >= aim)
            both = ""
            if lo_ns < rt_ns < hi_ns:
                both = (f"; against the {hi_aim}x band: {'met' if g >= hi_aim else 'not met'}, "
                        f"against the {lo_aim}x band: {'met' if g >= lo_aim else 'not met'}")
            figs.append(f"{r + 1}: {fmt(g)}x at RT {rt_ns:.0f} ns (aim {note}{both})")
        lines.append(f"| tiny-kernel geometric mean >= {hi_aim}x at RT >= {hi_ns:.0f} ns (about 500 ns), "
                     f">= {lo_aim}x at RT <= {lo_ns:.0f} ns (about 100 ns), interpolated in between | "
                     f"{labels[rt]} | " + "; ".join(figs) + f" | {verdict(oks)} |")
    lines.append("")
    return lines


ROBUST_SCENARIOS = [("quiet", 2), ("oversubscribed", 4), ("oversubscribed", 8), ("oversubscribed", 32),
                    ("two_processes", 2), ("busy_core", 2)]
ROBUST_AIM = 1.5   # 8 workers on 2 cores within 1.5x of 2 workers


def robust_derived(registry, idx, out_dir):
    labels = {k: v["label"] for k, v in registry["runtimes"].items()}
    rts = [rt for rt in registry["runtimes"] if any(k[0] == "robust" and k[2] == rt for k in idx)]
    if not rts:
        return []
    lines = ["### Each scenario against the same runtime's quiet 2-worker time", "",
             "Median time of the scenario / median time of the quiet 2-worker run of the same "
             "runtime and kernel (1.0 = unaffected; two_processes and busy_core share the two cores "
             "with another program, so about 2x is the fair share).", ""]
    for kernel in ("fib", "nqueens"):
        head = f"| {kernel} | " + " | ".join(labels[rt] for rt in rts) + " |"
        lines += [head, "|" + "---|" * (len(rts) + 1)]
        for sc, w in ROBUST_SCENARIOS:
            cells = []
            for rt in rts:
                base = med(idx, "robust", f"{kernel}_quiet", rt, 2)
                m = med(idx, "robust", f"{kernel}_{sc}", rt, w)
                if m is None:
                    cells.append("n/a")
                elif sc == "quiet":
                    cells.append(f"{fmt(m)} ms")
                else:
                    cells.append(f"{fmt(m)} ms ({fmt(m / base)}x)" if base else f"{fmt(m)} ms")
            lines.append(f"| {sc}, {w} workers | " + " | ".join(cells) + " |")
        lines.append("")
    verdicts = []
    for kernel in ("fib", "nqueens"):
        base = med(idx, "robust", f"{kernel}_quiet", "mote", 2)
        m8 = med(idx, "robust", f"{kernel}_oversubscribed", "mote", 8)
        if base and m8:
            verdicts.append(f"{kernel}: {fmt(m8 / base)}x ({'met' if m8 / base <= ROBUST_AIM else '**not met**'})")
    if verdicts:
        lines += [f"Aim: mote with 8 workers on 2 cores within {ROBUST_AIM}x of 2 workers. " + "; ".join(verdicts) + ".", ""]
    # What tracing and statistics cost.
    rows = []
    for name, kernel, unit, ws in (("fib(32)", "fib32", "ms", (1, 2)), ("spawn loop", "spawn", "ns", (1,))):
        for w in ws:
            off = med(idx, "robust", f"{kernel}_off", "mote", w)
            cells = [f"{fmt(off)} {unit}" if off else "n/a"]
            for mode in ("stats", "trace"):
                m = med(idx, "robust", f"{kernel}_{mode}", "mote", w)
                cells.append(f"{fmt(m)} {unit} ({fmt(m / off)}x)" if m and off else "n/a")
            rows.append(f"| {name}, {w} worker{'s' if w > 1 else ''} | " + " | ".join(cells) + " |")
    if rows:
        lines += ["### What statistics and tracing cost (mote)", "",
                  "Off: neither variable set (the event sites cost one untaken branch per join; "
                  "docs/tracing.md has the instruction count). MOTE_STATS=1 and MOTE_TRACE=<file> "
                  "switch every join to the instrumented copy; the trace writes three records per "
                  "join (spawn, task begin, task end).", "",
                  "| measure | off | MOTE_STATS=1 | MOTE_TRACE |", "|---|---|---|---|"] + rows + [""]
    return lines


def make_traces(bin_dirs, out_dir):
    """Traces of a fork-join and a task-group run, for the report's timeline plots."""
    exe = find_exe("bench_fork_join_mote", bin_dirs)
    made = []
    if exe is None:
        return made
    for name, args in (("trace_fib", ["--kernel", "fib", "--fib-n", "24"]),
                       ("trace_group", ["--kernel", "nqueens", "--nqueens-n", "9"])):
        path = os.path.join(out_dir, f"{name}.json")
        env = dict(os.environ, MOTE_TRACE=path)
        proc = subprocess.run([exe, "--workers", "2", "--reps", "1", "--warmup", "0"] + args,
                              env=env, capture_output=True, text=True, timeout=120)
        if proc.returncode == 0 and os.path.exists(path):
            made.append(name)
    return made


def tracing_section(out_dir):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import trace_timeline  # noqa: E402 (tools/trace_timeline.py)
    lines = []
    for name, title in (("trace_fib", "fib(24) on 2 workers, MOTE_TRACE"),
                        ("trace_group", "nqueens(9) (task groups) on 2 workers, MOTE_TRACE")):
        path = os.path.join(out_dir, f"{name}.json")
        if not os.path.exists(path):
            continue
        ok, msgs, summary = trace_timeline.check_trace(path)
        trace_timeline.draw(path, os.path.join(out_dir, f"{name}.png"), title)
        if not lines:
            lines = ["## Tracing", "",
                     "Traces written by `MOTE_TRACE` while the fork-join executable ran once, checked "
                     "(`tools/trace_timeline.py --check`: valid JSON, every event complete, spans nested "
                     "per thread) and drawn by `tools/trace_timeline.py`: one row per thread, tasks as "
                     "bars (nested ones inside), waits hatched, parks grey, steals as marks. The JSON "
                     "files are beside this report; open them in https://ui.perfetto.dev.", ""]
        counts = ", ".join(f"{k}: {v}" for k, v in summary.items() if k != "otherData")
        lines += [f"### {title}", "",
                  f"Valid: **{'yes' if ok else 'no: ' + '; '.join(msgs[:3])}**. Events: {counts}; "
                  f"lost to wrapping: {summary.get('otherData', {}).get('events_lost', 'n/a')}.", "",
                  f"![{name}]({name}.png)", ""]
    return lines


# ---------------------------------------------------------------- dataflow

# The figures for chains_empty (dynamically created dependent tasks per
# second, 2 workers): mote's aim and the OpenMPs as quoted.
DATAFLOW_QUOTED_MTASKS = {"mote_aim": 10.0, "GNU OpenMP": 2.7, "LLVM OpenMP": 1.3}
DATAFLOW_CHAINS = ["chains_empty", "chains_1us"]
DATAFLOW_MOTE = ["mote", "mote_delegation", "mote_malloc", "mote_jemalloc"]


def dataflow_task_us(fam_rows, block):
    """Mean work of one task in us: the family's fastest serial median (the same work at every
    block size) / the tasks at this block size. One serial time for the whole family keeps the
    axis monotone whatever the noise of each serial run."""
    sers = [row[("serial", 1)] for row in fam_rows.values() if row.get(("serial", 1))]
    tasks = fam_rows[block].get("tasks")
    return min(sers) * 1e3 / tasks if sers and tasks else None


def dataflow_sweeps(idx):
    """{family: {block: {"kernel", "tasks", (runtime, workers) -> median ms}}} for the swept kernels."""
    fams = {}
    for (suite, kernel, rt, w), r in idx.items():
        ex = r.get("extra", {})
        if suite != "dataflow" or not r["samples"] or "family" not in ex or kernel.startswith("chains"):
            continue
        row = fams.setdefault(ex["family"], {}).setdefault(ex["block"], {"kernel": kernel, "tasks": ex.get("tasks")})
        row[(rt, w)] = statistics.median(r["samples"])
    return fams


def dataflow_derived(registry, idx, out_dir):
    labels = {k: v["label"] for k, v in registry["runtimes"].items()}
    suite = next((s for s in registry["suites"] if s["name"] == "dataflow"), None)
    if suite is None or not any(k[0] == "dataflow" for k in idx):
        return []
    rts = [rt for rt in suite["jobs"][0]["runtimes"] if rt != "serial"
           and any(k[0] == "dataflow" and k[2] == rt for k in idx)]
    lines = []

    # -- task throughput on the chains
    lines += ["### Dependent tasks per second (chains)", "",
              "64 chains x 1000 tasks, each task inout on its chain's object: millions of tasks per "
              "second = tasks / median wall time of the whole run (spawn, dependencies, execution, "
              "wait). oneTBB's graph is built before the clock starts (its build time in brackets), "
              "so its figure leaves out task creation and dependency resolution.", ""]
    head = "| kernel | workers | serial (bodies only) | " + " | ".join(labels[rt] for rt in rts) + " |"
    lines += [head, "|" + "---|" * (len(rts) + 3)]
    mote_best = None
    for k in DATAFLOW_CHAINS:
        ser = idx.get(("dataflow", k, "serial", 1))
        for w in (1, 2):
            if not any(idx.get(("dataflow", k, rt, w)) for rt in rts):
                continue
            cells = []
            for rt in ["serial"] + rts:
                r = idx.get(("dataflow", k, rt, 1 if rt == "serial" else w))
                if not r or not r["samples"]:
                    cells.append("n/a")
                    continue
                mt = r["extra"]["tasks"] / statistics.median(r["samples"]) / 1e3
                cell = f"{fmt(mt)} M/s"
                if rt == "onetbb" and r["extra"].get("build_ms") is not None:
                    cell += f" ({fmt(r['extra']['build_ms'])} ms)"
                if k == "chains_empty" and w == 2 and rt in DATAFLOW_MOTE:
                    mote_best = max(mote_best or 0, mt)
                cells.append(cell)
            lines.append(f"| {k} | {w} | " + " | ".join(cells) + " |")
    lines.append("")
    q = DATAFLOW_QUOTED_MTASKS
    ours = {rt: idx.get(("dataflow", "chains_empty", rt, 2)) for rt in ("mote", "gnu_omp", "llvm_omp")}
    ours = {rt: (r["extra"]["tasks"] / statistics.median(r["samples"]) / 1e3 if r and r["samples"] else None)
            for rt, r in ours.items()}
    lines += ["| chains_empty, 2 workers | quoted | ours (this machine) |", "|---|---|---|",
              f"| mote | aim >= {q['mote_aim']} M tasks/s | {fmt(ours['mote'])} M/s (best mote variant "
              f"{fmt(mote_best)} M/s): **{'met' if mote_best and mote_best >= q['mote_aim'] else 'not met'}** |",
              f"| GNU OpenMP | ~{q['GNU OpenMP']} M tasks/s | {fmt(ours['gnu_omp'])} M/s |",
              f"| LLVM OpenMP | ~{q['LLVM OpenMP']} M tasks/s | {fmt(ours['llvm_omp'])} M/s |", ""]

    # -- against serial
    picks = [("chains_1us", 2), ("wavefront_8", 1), ("wavefront_8", 2), ("wavefront_32", 2)]
    lines += ["### Against serial: fine-grained tasks", "",
              "Serial median / runtime median (higher is better; 2 workers can reach 2x). wavefront_8 "
              "tasks are 64-point Gauss-Seidel blocks (well under 1 us), chains_1us tasks ~1 us.", "",
              "| kernel | workers | " + " | ".join(labels[rt] for rt in rts) + " |",
              "|" + "---|" * (len(rts) + 2)]
    for k, w in picks:
        base = med(idx, "dataflow", k, "serial", 1)
        if base is None:
            continue
        cells = []
        for rt in rts:
            m = med(idx, "dataflow", k, rt, w)
            cells.append(f"{base / m:.2f}x" if m else "n/a")
        lines.append(f"| {k} | {w} | " + " | ".join(cells) + " |")
    lines.append("")

    # -- efficiency against task size
    fams = dataflow_sweeps(idx)
    order = [f for f in ("wavefront", "heat", "dot", "matmul", "cholesky", "nbody") if f in fams]
    if order:
        lines += ["### Efficiency against task size", "",
                  "As in the Nanos6 paper's figures 4-9: for each kernel, efficiency = performance / the "
                  "best performance of any run of that kernel (every runtime, block size and worker "
                  "count; the work is the same at every block size, so this is the best median time / "
                  "this median time). Task size = the kernel's fastest serial median / the tasks at that "
                  "block size: the mean work of one task. Runtimes on 2 workers, serial dashed.", ""]
        for fam in order:
            blocks = sorted(fams[fam])
            best = min(v for b in blocks for key, v in fams[fam][b].items() if isinstance(key, tuple))
            cols = ["serial"] + rts
            lines += [f"{fam}:", "", "| block | tasks | task size (us) | " +
                      " | ".join(labels[rt] for rt in cols) + " |", "|" + "---|" * (len(cols) + 3)]
            for b in blocks:
                row = fams[fam][b]
                tsize = dataflow_task_us(fams[fam], b)
                cells = []
                for rt in cols:
                    m = row.get((rt, 1 if rt == "serial" else 2))
                    cells.append(f"{best / m:.2f}" if m else "n/a")
                lines.append(f"| {b} | {row['tasks']} | {fmt(tsize)} | " + " | ".join(cells) + " |")
            lines.append("")
        png = plot_dataflow_efficiency(registry, rts, fams, order, out_dir)
        if png:
            lines += [f"![dataflow efficiency]({png})", ""]
    return lines


def plot_dataflow_efficiency(registry, rts, fams, order, out_dir):
    cols = 3
    rows = (len(order) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(12, 3.4 * rows), squeeze=False)
    for ai, fam in enumerate(order):
        ax = axes[ai // cols][ai % cols]
        blocks = sorted(fams[fam])
        best = min(v for b in blocks for key, v in fams[fam][b].items() if isinstance(key, tuple))

        def xs_for(bs):
            return [dataflow_task_us(fams[fam], b) or float(b) for b in bs]
        for rt in ["serial"] + rts:
            w = 1 if rt == "serial" else 2
            bs = [b for b in blocks if fams[fam][b].get((rt, w))]
            if not bs:
                continue
            ys = [best / fams[fam][b][(rt, w)] for b in bs]
            info = registry["runtimes"][rt]
            ax.plot(xs_for(bs), ys, marker="o", markersize=3, color=info["color"], label=info["label"],
                    linestyle="--" if rt == "serial" else "-", linewidth=1.2)
        for x, b in zip(xs_for(blocks), blocks):
            ax.annotate(str(b), (x, 1.02), ha="center", fontsize=6, color="grey")
        ax.set_xscale("log")
        ax.set_ylim(0, 1.1)
        ax.set_title(f"{fam} (block size at the top)", fontsize=9)
        ax.set_xlabel("task size (us of serial work per task)", fontsize=8)
        ax.set_ylabel("efficiency", fontsize=8)
        ax.grid(alpha=0.3, which="both")
    for ai in range(len(order), rows * cols):
        axes[ai // cols][ai % cols].axis("off")
    handles, leg = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, leg, loc="lower center", ncol=min(len(leg), 8), fontsize=8)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    name = "dataflow_efficiency.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return name


# ---------------------------------------------------------------- loops

LOOPS_GRAINS = [64, 256, 1024, 4096]
LOOPS_SIZES = ["1M", "10M"]
# The loops suite's variants in table order; labels that say which schedule
# each one is (the registry's labels are shared with the other suites); what
# each one's automatic choice (the _auto kernels) is.
LOOPS_RTS = ["mote", "gnu_omp", "gnu_omp_dyn", "llvm_omp", "llvm_omp_dyn", "onetbb", "onetbb_simple"]
LOOPS_LABELS = {"gnu_omp": "GNU OpenMP static", "llvm_omp": "LLVM OpenMP static",
                "onetbb": "oneTBB auto_partitioner"}
LOOPS_AUTO = {"mote": "no grain", "gnu_omp": "schedule(static)", "gnu_omp_dyn": "schedule(guided)",
              "llvm_omp": "schedule(static)", "llvm_omp_dyn": "schedule(guided)",
              "onetbb": "blocked_range grain 1"}
LOOPS_GRAPH = ["pr_16", "pr_18", "pr_20", "tc_16", "bc_16", "bc_18", "histogram",
               "nested_4x100000", "nested_64x4096", "nested_1024x256"]


def loops_label(registry, rt):
    return LOOPS_LABELS.get(rt, registry["runtimes"][rt]["label"])


def loops_speedup(idx, kernel, rt, w):
    base = med(idx, "loops", kernel, "serial", 1)
    m = med(idx, "loops", kernel, rt, w)
    return base / m if base and m else None


def loops_derived(registry, idx, out_dir):
    if not any(k[0] == "loops" for k in idx):
        return []
    rts = [rt for rt in LOOPS_RTS if any(k[0] == "loops" and k[2] == rt for k in idx)]
    lines = []

    # -- speedup against grain
    lines += ["### Speedup over serial against grain", "",
              "Serial median / runtime median for each grain (a batch of that many iterations) and for "
              "each runtime's automatic choice (`auto`: "
              + "; ".join(f"{loops_label(registry, rt)}: {LOOPS_AUTO[rt]}" for rt in rts if rt in LOOPS_AUTO)
              + "). 2 workers, 1 worker in brackets (below 1.0: what the runtime costs on one thread). "
                "The serial loop is the same body called once over the whole range.", ""]
    pngs = []
    for op in ("update", "sum"):
        for size in LOOPS_SIZES:
            names = [f"{op}_{size}_g{g}" for g in LOOPS_GRAINS] + [f"{op}_{size}_auto"]
            if not any(med(idx, "loops", k, "serial", 1) for k in names):
                continue
            base = med(idx, "loops", names[0], "serial", 1)
            lines += [f"{op}, {size} doubles (serial {fmt(base)} ms):", "",
                      "| runtime | " + " | ".join(f"g{g}" for g in LOOPS_GRAINS) + " | auto |",
                      "|" + "---|" * (len(LOOPS_GRAINS) + 2)]
            for rt in rts:
                cells = []
                for k in names:
                    s2, s1 = loops_speedup(idx, k, rt, 2), loops_speedup(idx, k, rt, 1)
                    cells.append("n/a" if s2 is None and s1 is None else f"{fmt(s2)}x ({fmt(s1)}x)")
                lines.append(f"| {loops_label(registry, rt)} | " + " | ".join(cells) + " |")
            lines.append("")
        png = plot_loops_grain(registry, idx, rts, op, out_dir)
        if png:
            pngs.append(png)
    for png in pngs:
        lines += [f"![loops {png}]({png})", ""]

    # -- hand-off costs beside the round trip
    rt_rec = idx.get(("loops", "roundtrip", "serial", 1))
    rt_ns = med(idx, "loops", "roundtrip", "serial", 1)
    per_round = ", ".join(f"{x:.0f}" for x in round_medians(rt_rec)) if rt_rec else ""

    def share(kernel, rt):
        r = idx.get(("loops", kernel, rt, 2))
        v = r.get("extra", {}).get("other_thread_share") if r else None
        return "n/a" if v is None else f"{100 * v:.0f}%"
    rows = []
    for rt in rts:
        c1, c2 = med(idx, "loops", "claim", rt, 1), med(idx, "loops", "claim", rt, 2)
        e1, e2 = med(idx, "loops", "empty_loop", rt, 1), med(idx, "loops", "empty_loop", rt, 2)
        if all(v is None for v in (c1, c2, e1, e2)):
            continue
        in_rt = fmt(e2 * 1e3 / rt_ns) if e2 and rt_ns else "n/a"
        rows.append(f"| {loops_label(registry, rt)} | {fmt(c1)} | {fmt(c2)} | {share('claim', rt)} | {fmt(e1)} | "
                    f"{fmt(e2)} | {in_rt} | {share('empty_loop', rt)} |")
    if rows:
        lines += ["### What a batch and a loop cost, beside the round trip", "",
                  f"Core-to-core round trip measured in this run: **{fmt(rt_ns)} ns** median"
                  + (f" (per round: {per_round} ns)" if per_round else "") + ". `claim`: ns per batch of a "
                  "2^20-iteration loop at grain 1 with a near-empty body (time / 2^20; with 2 workers both "
                  "claim at once, so this is throughput, not one claim's latency). `empty loop`: us per loop "
                  "of 2 x workers iterations at grain 1, loops back to back on warm workers (wake, distribute, "
                  "complete), also in round trips. `other thread` is the share of the batches (of the last "
                  "repetition, 2 workers) that ran on another thread than the one that started the loop: a "
                  "runtime that finishes a loop of a few empty batches on its own thread before the other "
                  "joins shows 0% and can beat the round trip.", "",
                  "| runtime | claim ns, 1 worker | claim ns, 2 workers | claim: other thread | "
                  "empty loop us, 1 worker | empty loop us, 2 workers | empty loop, 2 workers, in round trips "
                  "| empty loop: other thread |",
                  "|---|---|---|---|---|---|---|---|"] + rows + [""]

    # -- kernels with the automatic grain
    graph = [k for k in LOOPS_GRAPH if med(idx, "loops", k, "serial", 1)]
    if graph:
        auto_rts = [rt for rt in rts if rt in LOOPS_AUTO]
        lines += ["### Graph kernels, histogram and nested loops: speedup over serial", "",
                  "Serial median / runtime median with each runtime's automatic grain, 2 workers (1 worker "
                  "in brackets).", "",
                  "| kernel | serial ms | " + " | ".join(loops_label(registry, rt) for rt in auto_rts) + " |",
                  "|" + "---|" * (len(auto_rts) + 2)]
        for k in graph:
            cells = []
            best = max((loops_speedup(idx, k, rt, 2) or 0 for rt in auto_rts), default=0)
            for rt in auto_rts:
                s2, s1 = loops_speedup(idx, k, rt, 2), loops_speedup(idx, k, rt, 1)
                cell = "n/a" if s2 is None else (f"**{s2:.2f}x**" if s2 == best else f"{s2:.2f}x")
                cells.append(cell + (f" ({s1:.2f}x)" if s1 is not None else ""))
            lines.append(f"| {k} | {fmt(med(idx, 'loops', k, 'serial', 1))} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def plot_loops_grain(registry, idx, rts, op, out_dir):
    """Speedup over serial against grain, one panel per size, one line per runtime (2 workers);
    each runtime's automatic choice as an unconnected star right of the grains."""
    sizes = [sz for sz in LOOPS_SIZES if med(idx, "loops", f"{op}_{sz}_g{LOOPS_GRAINS[0]}", "serial", 1)]
    if not sizes:
        return None
    fig, axes = plt.subplots(1, len(sizes), figsize=(5.2 * len(sizes), 3.8), squeeze=False)
    auto_x = LOOPS_GRAINS[-1] * 4
    for ax, size in zip(axes[0], sizes):
        for rt in rts:
            info = registry["runtimes"][rt]
            style = "--" if rt.endswith("_dyn") or rt == "onetbb_simple" else "-"
            pts = [(g, loops_speedup(idx, f"{op}_{size}_g{g}", rt, 2)) for g in LOOPS_GRAINS]
            pts = [(g, v) for g, v in pts if v]
            if pts:
                ax.plot([g for g, _ in pts], [v for _, v in pts], marker="o", markersize=3, linestyle=style,
                        color=info["color"], label=loops_label(registry, rt), linewidth=1.2)
            a = loops_speedup(idx, f"{op}_{size}_auto", rt, 2)
            if a:
                ax.plot([auto_x], [a], marker="*", markersize=9, linestyle="none", color=info["color"],
                        markeredgecolor="black", markeredgewidth=0.4)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.axvline(LOOPS_GRAINS[-1] * 2, color="grey", linewidth=0.5, linestyle=":")
        ax.set_xscale("log", base=2)
        ax.set_xticks(LOOPS_GRAINS + [auto_x])
        ax.set_xticklabels([str(g) for g in LOOPS_GRAINS] + ["auto"])
        ax.set_ylim(bottom=0)
        ax.set_xlabel("grain (iterations per batch); stars: automatic", fontsize=8)
        ax.set_ylabel("speedup over serial, 2 workers", fontsize=8)
        ax.set_title(f"{op}, {size} doubles", fontsize=9)
        ax.grid(alpha=0.3, which="both")
    handles, leg = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, leg, loc="lower center", ncol=min(len(leg), 4), fontsize=7)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    name = f"loops_{op}_grain.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return name


# Suite name -> function(registry, index, out_dir) returning extra Markdown lines.
STREAMS_QUEUES = ["boost_spsc", "mote_lamport", "mote_cached", "mote_batch", "mote_mpmc", "mote_channel_spsc",
                  "mote_channel_auto", "mote_channel_mpmc"]
STREAMS_THROUGHPUT = ["comm_8", "comm_8_c8192", "comm_64", "block_8", "block_64", "matrix_8", "matrixblock_64"]
STREAMS_APPS = ["fmradio_64", "fmradio_1024", "trellis_256", "trellis_4096", "template_d1_128", "template_d4_128",
                "template_d1_4096", "template_d4_4096"]
STREAMS_APP_RTS = ["mote", "mote_threads", "onetbb", "gnu_omp", "llvm_omp"]


def streams_derived(registry, idx, out_dir):
    if not any(k[0] == "streams" for k in idx):
        return []
    labels = {k: v["label"] for k, v in registry["runtimes"].items()}
    lines = []
    qrts = [rt for rt in STREAMS_QUEUES if any(k[0] == "streams" and k[2] == rt for k in idx)]
    line_ns = med(idx, "streams", "line", "mote_batch", 2)
    if qrts:
        lines += ["### Queues between the two cores", "",
                  "Medians. Throughput in M items/s (higher is better), latency in ns one way (lower is "
                  "better); `lat / line` divides each latency by the line transfer (`line_ns`) measured in the "
                  "same process just before it. One-way cache-line transfer in this run: "
                  f"**{fmt(line_ns)} ns** (kernel `line`).", "",
                  "| queue | " + " | ".join(STREAMS_THROUGHPUT) + " | latency_8 | lat / line | latency_8_flush |",
                  "|" + "---|" * (len(STREAMS_THROUGHPUT) + 4)]
        for rt in qrts:
            cells = [fmt(med(idx, "streams", k, rt, 2)) if med(idx, "streams", k, rt, 2) else "n/a"
                     for k in STREAMS_THROUGHPUT]
            lat = med(idx, "streams", "latency_8", rt, 2)
            rec = idx.get(("streams", "latency_8", rt, 2))
            ln = rec.get("extra", {}).get("line_ns") if rec else None
            ratio = fmt(lat / ln) if lat and ln else "n/a"
            latf = med(idx, "streams", "latency_8_flush", rt, 2)
            lines.append(f"| {labels[rt]} | " + " | ".join(cells) +
                         f" | {fmt(lat) if lat else 'n/a'} | {ratio} | {fmt(latf) if latf else 'n/a'} |")
        lines.append("")
    apps = [k for k in STREAMS_APPS if med(idx, "streams", k, "serial", 1)]
    if apps:
        arts = [rt for rt in STREAMS_APP_RTS if any(k[0] == "streams" and k[2] == rt for k in idx)]
        lines += ["### Applications: speedup over serial, 2 workers", "",
                  "Serial median / runtime median (1 worker in brackets). `in-process serial` divides by the "
                  "serial run that each mote and oneTBB process makes first (the same stage code, to check "
                  "the checksums), which this compiler sometimes builds faster than the serial executable's.",
                  "",
                  "| kernel | serial ms | " + " | ".join(labels[rt] for rt in arts) +
                  " | mote, in-process serial | oneTBB, in-process serial |",
                  "|" + "---|" * (len(arts) + 4)]
        for k in apps:
            base = med(idx, "streams", k, "serial", 1)
            best = max((base / med(idx, "streams", k, rt, 2) for rt in arts if med(idx, "streams", k, rt, 2)),
                       default=0)
            cells = []
            for rt in arts:
                m2, m1 = med(idx, "streams", k, rt, 2), med(idx, "streams", k, rt, 1)
                if not m2:
                    cells.append("n/a")
                    continue
                s2 = base / m2
                cell = f"**{s2:.2f}x**" if s2 == best else f"{s2:.2f}x"
                cells.append(cell + (f" ({base / m1:.2f}x)" if m1 else ""))
            own = []
            for rt in ("mote", "onetbb"):
                rec = idx.get(("streams", k, rt, 2))
                chk = rec.get("extra", {}).get("serial_check_ms") if rec else None
                m2 = med(idx, "streams", k, rt, 2)
                own.append(f"{chk / m2:.2f}x" if chk and m2 else "n/a")
            lines.append(f"| {k} | {fmt(base)} | " + " | ".join(cells) + " | " + " | ".join(own) + " |")
        lines.append("")
    return lines


DERIVED = {"micro": micro_derived, "tiny": tiny_derived, "robust": robust_derived,
           "dataflow": dataflow_derived, "loops": loops_derived, "streams": streams_derived}


# ---------------------------------------------------------------- plots

def plot_kernel(registry, suite, job, idx, out_dir):
    rts = [rt for rt in job["runtimes"] if any(k[:3] == (suite["name"], job["kernel"], rt) for k in idx)]
    if not rts:
        return None
    workers = job["workers"]
    width = 0.8 / len(workers)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for wi, w in enumerate(workers):
        xs, hs, lo, hi, colors = [], [], [], [], []
        for i, rt in enumerate(rts):
            r = idx.get((suite["name"], job["kernel"], rt, w))
            if not r or not r["samples"]:
                continue
            s = summary(r["samples"])
            xs.append(i + (wi - (len(workers) - 1) / 2) * width)
            hs.append(s["median"])
            lo.append(s["median"] - s["min"])
            hi.append(s["max"] - s["median"])
            colors.append(registry["runtimes"][rt]["color"])
        if xs:
            ax.bar(xs, hs, width, yerr=[lo, hi], capsize=3, color=colors, edgecolor="black",
                   alpha=1.0 if wi == len(workers) - 1 else 0.55)
            for x, h in zip(xs, hs):
                ax.annotate(f"{w}w", (x, h), ha="center", va="bottom", fontsize=6)
    ax.set_xticks(range(len(rts)))
    ax.set_xticklabels([registry["runtimes"][rt]["label"] for rt in rts])
    if job.get("log", True):
        ax.set_yscale("log")
    ax.set_ylabel(job.get("unit", ""))
    ax.set_title(f"{suite['name']}: {job['kernel']} (median; whiskers min..max; "
                 f"pale = fewer workers)" if len(workers) > 1 else
                 f"{suite['name']}: {job['kernel']} (median; whiskers min..max)", fontsize=9)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    name = f"{suite['name']}_{job['kernel']}.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return name


def plot_spawn_costs(registry, rows, out_dir):
    series = [("loop_1w", "loop, 1 worker"), ("loop_2w", "loop, 2 workers"), ("fib_derived_1w", "from fib, 1 worker")]
    if not any(r[k] for r in rows for k, _ in series):
        return None
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.8 / len(series)
    for si, (k, label) in enumerate(series):
        xs = [i + (si - 1) * width for i, r in enumerate(rows) if r[k] is not None and r[k] > 0]
        hs = [r[k] for r in rows if r[k] is not None and r[k] > 0]
        ax.bar(xs, hs, width, label=label, edgecolor="black")
    ax.axhline(QUOTED["mote_spawn_ns_max"], color="red", linestyle="--", linewidth=1, label="mote aim 1.5 ns")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([registry["runtimes"][r["runtime"]]["label"] for r in rows])
    ax.set_yscale("log")
    ax.set_ylim(bottom=0.5)
    ax.set_ylabel("ns per spawn")
    ax.set_title("spawn+join cost (median; values <= 0 not drawn)", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    name = "micro_spawn_cost.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return name


# ---------------------------------------------------------------- Markdown

def kernel_table(registry, suite, job, idx):
    labels = {k: v["label"] for k, v in registry["runtimes"].items()}
    base = suite.get("baseline")
    base_med = med(idx, suite["name"], job["kernel"], base, 1) if base else None
    unit = job.get("unit", "")
    head = f"| runtime | workers | samples (runs) | median {unit} | min | max | p90 | IQR/median |"
    sep = "|---|---|---|---|---|---|---|---|"
    if base:
        head += f" vs {labels[base]} |"
        sep += "---|"
    if suite.get("speedup"):
        head += " 1->2 worker speedup |"
        sep += "---|"
    lines = [head, sep]
    for rt in job["runtimes"]:
        for w in job["workers"]:
            r = idx.get((suite["name"], job["kernel"], rt, w))
            if not r or not r["samples"]:
                continue
            s = summary(r["samples"])
            iqr = (s["q3"] - s["q1"]) / s["median"] * 100 if s["median"] else float("nan")
            row = (f"| {labels[rt]} | {w} | {s['n']} ({r['runs']}) | **{fmt(s['median'])}** | {fmt(s['min'])} | "
                   f"{fmt(s['max'])} | {fmt(s['p90'])} | {iqr:.0f}% |")
            if base:
                row += f" {fmt(s['median'] / base_med)}x |" if base_med else " n/a |"
            if suite.get("speedup"):
                m1 = med(idx, suite["name"], job["kernel"], rt, 1)
                row += f" {fmt(m1 / s['median'])}x |" if (w == 2 and m1) else " |"
            lines.append(row)
    return lines


PARAMETER_KEYS = ("n", "spawns", "iters", "idle_ms", "spin_us")


def kernel_parameters(suite, job, idx):
    """The parameters the executables reported (extra fields), e.g. n=32."""
    seen = {}
    for k, r in idx.items():
        if k[:2] != (suite["name"], job["kernel"]):
            continue
        for key in PARAMETER_KEYS:
            if key in r.get("extra", {}):
                label = f"{key}={r['extra'][key]}" + (f" ({registry_label(k[2])})" if key in ("iters", "spin_us") else "")
                seen.setdefault(key, []).append(label)
    parts = []
    for key in PARAMETER_KEYS:
        vals = sorted(set(seen.get(key, [])))
        parts += vals
    return ", ".join(parts)


_LABELS = {}


def registry_label(rt):
    return _LABELS.get(rt, rt)


def callgrind_section(registry, out_dir):
    """Instructions per spawn from tools/callgrind_spawn.py, when it has run."""
    path = os.path.join(out_dir, "callgrind.json")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        cg = json.load(f)
    a, b = cg["sizes"]
    lines = ["## Instructions per spawn (callgrind)", "",
             f"Counted, not timed: `valgrind --tool=callgrind` on fib({a}) and fib({b}) with one "
             f"worker; the difference of the two totals divided by the difference in spawns "
             f"({cg['spawns_difference']}) cancels start-up. Repeatable whatever the machine's "
             "load. `over serial` is what the runtime adds to the kernel's own instructions.", "",
             "| runtime | instructions per spawn | over serial |", "|---|---|---|"]
    for r in cg["rows"]:
        label = registry["runtimes"].get(r["runtime"], {}).get("label", r["runtime"])
        over = "" if r["over_serial"] is None else f"{r['over_serial']:.1f}"
        lines.append(f"| {label} | {r['per_spawn']:.1f} | {over} |")
    notes = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "performance.md")
    if os.path.exists(notes):
        lines += ["", "Where mote's instructions go, and what would close the gap to the aims: "
                  "[docs/performance.md](../../docs/performance.md)."]
    lines.append("")
    return lines


def write_report(registry, data, out_dir):
    _LABELS.update({k: v["label"] for k, v in registry["runtimes"].items()})
    idx = index(data["records"])
    m = data["machine"]
    lines = ["# mote benchmark report", ""]
    if data.get("quick"):
        lines += ["> **Quick smoke run** (`--quick`: one round, few repetitions, shorter idle "
                  "periods). These figures show that everything runs; they are not the project's "
                  "results. Run `scripts/bench.sh` for those.", ""]
    lines += [f"Generated {m['date']} by `tools/report.py` from `bench/results/results.json`; "
              f"{data['rounds']} round(s), {data['duration_s']:.0f} s of benchmarking.", "",
              "## Machine", "",
              "| | |", "|---|---|",
              f"| CPU | {m['cpu_model']} |", f"| cores (nproc) | {m['nproc']} |",
              f"| kernel | {m['kernel']} |", f"| g++ | {m['gxx']} |", f"| clang++ | {m['clangxx']} |"]
    for p, v in m["packages"].items():
        lines.append(f"| {p} | {v or 'not installed'} |")
    tbb_rt = next((r["extra"].get("tbb_runtime") for r in data["records"] if r.get("extra", {}).get("tbb_runtime")), None)
    if tbb_rt:
        lines.append(f"| oneTBB runtime (TBB_runtime_version) | {tbb_rt} |")
    for rt in ("gnu_omp", "llvm_omp"):
        lib = next((r["extra"].get("omp_library") for r in data["records"]
                    if r["runtime"] == rt and r.get("extra", {}).get("omp_library")), None)
        if lib:
            lines.append(f"| {registry['runtimes'][rt]['label']} library loaded | `{lib}` |")
    lines.append(f"| load average (1, 5, 15 min) at start / end | {m.get('loadavg_start')} / {m.get('loadavg_end')} |")
    lines += ["", "## How this was measured", "",
              "Every variant is its own executable (`bench/<suite>/<runtime>.cpp`), all compiled with "
              "`-O3 -march=x86-64-v2`; the kernel bodies of a suite are shared (`bench/<suite>/kernels.hpp`), "
              "only the parallel wrapper differs. The runner interleaves the runtimes round by round "
              "(each round runs every job once, in a rotated order), so all share the machine's noise; "
              "each process does its warm-up, then a few timed repetitions, and a row pools the "
              "samples of all rounds. `workers` is the number of threads the runtime may use "
              "(mote: `runtime_options::num_workers`; mote assistant: the owner thread and its "
              "assistant; oneTBB: `global_control` + `task_arena`; OpenMP: `num_threads`). The machine is shared and noisy: read the medians, and the "
              "spread beside them.", ""]
    lines += targets_section(registry, idx)
    for suite in registry["suites"]:
        if not any(k[0] == suite["name"] for k in idx):
            continue
        lines += [f"## {suite['title']}", "", suite.get("about", ""), ""]
        for job in suite["jobs"]:
            if not any(k[:2] == (suite["name"], job["kernel"]) for k in idx):
                continue
            lines += [f"### {job['kernel']} ({job.get('unit', '')})", ""]
            lines += kernel_table(registry, suite, job, idx)
            params = kernel_parameters(suite, job, idx)
            if params:
                lines += ["", f"Parameters: {params}."]
            # A suite with many swept kernels (dataflow) draws its own plots instead.
            png = plot_kernel(registry, suite, job, idx, out_dir) if suite.get("kernel_plots", True) else None
            if png:
                lines += ["", f"![{suite['name']} {job['kernel']}]({png})"]
            lines.append("")
        if suite["name"] in DERIVED:
            lines += DERIVED[suite["name"]](registry, idx, out_dir)
    lines += callgrind_section(registry, out_dir)
    lines += tracing_section(out_dir)
    if data["failures"] or data["skipped"]:
        lines += ["## Failures and skipped jobs", ""]
        for f in data["failures"]:
            lines.append(f"- FAILED `{'/'.join(map(str, f['key']))}`: {f['error'].splitlines()[0]}")
        for s in data["skipped"]:
            lines.append(f"- skipped `{'/'.join(map(str, s['key']))}`: {s['reason']}")
        lines.append("")
    with open(os.path.join(out_dir, "REPORT.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: one round, few repetitions")
    ap.add_argument("--rounds", type=int, default=0, help="rounds (default 3; 1 with --quick)")
    ap.add_argument("--registry", default=DEFAULT_REGISTRY)
    ap.add_argument("--bin-dir", action="append", default=None,
                    help="where the bench_* executables are (repeatable; default: build/bench/bench/bin "
                         "and build/bench-llvmomp/bin)")
    ap.add_argument("--out-dir", default=DEFAULT_OUT)
    ap.add_argument("--suite", action="append", default=None, help="run only this suite (repeatable)")
    ap.add_argument("--timeout", type=int, default=180, help="seconds before one process is killed")
    ap.add_argument("--max-minutes", type=float, default=30.0,
                    help="start no round that would end the run after this many minutes (default 30)")
    ap.add_argument("--from-json", action="store_true", help="only redraw the report from results.json")
    args = ap.parse_args()

    with open(args.registry) as f:
        registry = json.load(f)
    # A job with "as_kernel" runs kernel "kernel" of its executable and is filed
    # (and drawn) under the other name.
    for suite in registry["suites"]:
        for job in suite["jobs"]:
            if "as_kernel" in job:
                job["kernel_cli"] = job["kernel"]
                job["kernel"] = job["as_kernel"]
    os.makedirs(args.out_dir, exist_ok=True)
    results_path = os.path.join(args.out_dir, "results.json")

    if args.from_json:
        with open(results_path) as f:
            data = json.load(f)
    else:
        bin_dirs = [os.path.abspath(d) for d in (args.bin_dir or DEFAULT_BIN_DIRS)]
        machine = machine_info()
        data = run_all(registry, args, bin_dirs)
        try:
            machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        except OSError:
            pass
        data = {"machine": machine, "quick": args.quick, "bin_dirs": bin_dirs, **data}
        data["traces"] = make_traces(bin_dirs, args.out_dir)
        with open(results_path, "w") as f:
            json.dump(data, f, indent=1)
    write_report(registry, data, args.out_dir)
    print(f"wrote {os.path.join(args.out_dir, 'REPORT.md')}", file=sys.stderr)
    if data["failures"]:
        print(f"{len(data['failures'])} benchmark(s) failed; see REPORT.md", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
