"""The mpi suite: the distributed heat solver (bench/mpi/heat.cpp) on mote + MPI
(non-blocking: iwait; blocking: wait), MPI + GNU OpenMP (fork-join per sweep)
and pure MPI, run under mpiexec over loopback, interleaved round by round.
tools/report.py --suite mpi calls run(); it writes into bench/results/mpi/:

  results.json   every sample and the machine
  REPORT.md      one table per layout (block size x variant), the time the
                 threads spent outside the kernel and in MPI waits, the
                 figures the issue asks for, the trace summary
  *.png          time per block size for each layout; a trace of the
                 non-blocking mode (rank 0) showing the overlap

Layouts on this machine's 2 cores ("the same total of cores"): 2 ranks x 1
thread (every variant; pure MPI's own layout), 1 rank x 2 threads (the
threaded variants, no messages), and 4 ranks x 1 thread, oversubscribed
(mpiexec -np 4 --oversubscribe: every variant).
"""

import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

VARIANTS = {
    "iwait": {"label": "mote + MPI, non-blocking (iwait)", "color": "#d62728"},
    "blocking": {"label": "mote + MPI, blocking (wait)", "color": "#ff7f0e"},
    "omp": {"label": "MPI + OpenMP (GNU, fork-join per sweep)", "color": "#2ca02c"},
    "mpi": {"label": "pure MPI (one rank per core)", "color": "#1f77b4"},
}
# (ranks, threads per rank, variants)
LAYOUTS = [
    (2, 1, ["iwait", "blocking", "omp", "mpi"]),
    (1, 2, ["iwait", "blocking", "omp"]),
    (4, 1, ["iwait", "blocking", "omp", "mpi"]),
]


def mpiexec_cmd(ranks):
    cmd = ["mpiexec"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    # Loopback only (shared memory and self); no binding, so that one rank's
    # two threads get both cores; more ranks than cores allowed.
    return cmd + ["-np", str(ranks), "--oversubscribe", "--bind-to", "none", "--mca", "btl", "self,vader"]


def find_exe(bin_dirs):
    for d in bin_dirs:
        p = os.path.join(d, "bench_mpi_heat")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def run_one(exe, ranks, threads, variant, block, size, sweeps, reps, warmup, timeout, env_extra=None, extra=()):
    cmd = mpiexec_cmd(ranks) + [exe, "--variant", variant, "--workers", str(threads), "--block", str(block),
                                "--rows", str(size), "--cols", str(size), "--sweeps", str(sweeps),
                                "--reps", str(reps), "--warmup", str(warmup)] + list(extra)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMP_WAIT_POLICY="passive" if ranks * threads > 2 else os.environ.get("OMP_WAIT_POLICY", ""))
    if not env["OMP_WAIT_POLICY"]:
        del env["OMP_WAIT_POLICY"]
    env.update(env_extra or {})
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s: {' '.join(cmd)}"
    if p.returncode != 0:
        return None, f"exit status {p.returncode}: {' '.join(cmd)}\n{p.stderr.strip()[-1500:]}"
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line), None
    return None, f"no record: {' '.join(cmd)}"


def plan(quick):
    if quick:
        return {"blocks": [32, 128], "size": 512, "sweeps": 4, "reps": 1, "warmup": 0, "rounds": 1}
    return {"blocks": [16, 32, 64, 128, 256], "size": 1024, "sweeps": 20, "reps": 3, "warmup": 1, "rounds": 3}


def run(args, bin_dirs, out_dir, machine):
    exe = find_exe(bin_dirs)
    if exe is None:
        print("bench_mpi_heat not built (configure with -DMOTE_BUILD_BENCH=ON and MPI)", file=sys.stderr)
        return 1
    p = plan(args.quick)
    rounds = args.rounds or p["rounds"]
    jobs = [(r, t, v, b) for (r, t, vs) in LAYOUTS for b in p["blocks"] for v in vs]
    results, failures = {}, []
    t_start = time.monotonic()
    for rnd in range(rounds):
        offset = (rnd * 7) % len(jobs)
        order = jobs[offset:] + jobs[:offset]
        print(f"round {rnd + 1}/{rounds}: {len(order)} jobs", file=sys.stderr, flush=True)
        for (r, t, v, b) in order:
            key = f"{r}x{t}/{v}/b{b}"
            if any(f["key"] == key for f in failures):
                continue
            rec, err = run_one(exe, r, t, v, b, p["size"], p["sweeps"], p["reps"], p["warmup"], args.timeout)
            if err or rec.get("result") != 1:
                failures.append({"key": key, "error": err or "wrong result (differs from the serial solver)"})
                print(f"  FAILED {key}: {failures[-1]['error']}", file=sys.stderr, flush=True)
                continue
            acc = results.setdefault(key, {"ranks": r, "threads": t, "variant": v, "block": b, "samples": [],
                                           "compute_ms": [], "mpi_wait_ms": []})
            acc["samples"].extend(rec["samples"])
            acc["compute_ms"].append(rec["extra"]["compute_ms"])
            acc["mpi_wait_ms"].append(rec["extra"]["mpi_wait_ms"])
            print(f"  {key}: median {statistics.median(rec['samples']):.2f} ms", file=sys.stderr, flush=True)
    trace = make_trace(exe, out_dir, p)
    data = {"machine": machine, "quick": args.quick, "plan": p, "rounds": rounds,
            "duration_s": time.monotonic() - t_start, "records": list(results.values()),
            "failures": failures, "trace": trace}
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(data, f, indent=1)
    write_report(data, out_dir)
    print(f"wrote {os.path.join(out_dir, 'REPORT.md')}", file=sys.stderr)
    return 1 if failures else 0


def make_trace(exe, out_dir, p):
    """A trace of the non-blocking mode, 2 ranks x 1 worker, one file per rank
    (MOTE_TRACE with %r), summarised and drawn for rank 0."""
    path = os.path.join(out_dir, "trace_heat.%r.json")
    # No serial reference in this run (--check 0): the timeline is the solve.
    rec, err = run_one(exe, 2, 1, "iwait", 64, 512, 4, 1, 0, 120, {"MOTE_TRACE": path}, ["--check", "0"])
    files = [path.replace("%r", str(k)) for k in range(2)]
    if err or not all(os.path.exists(f) for f in files):
        return {"error": err or "no trace files"}
    summary = {"files": [os.path.basename(f) for f in files]}
    for k, f in enumerate(files):
        with open(f) as fh:
            ev = json.load(fh)["traceEvents"]
        tasks = sum(e["dur"] for e in ev if e.get("ph") == "X" and e.get("cat") == "task") / 1000.0
        waits = sum(e["dur"] for e in ev if e.get("ph") == "X" and e.get("name") == "mpi wait") / 1000.0
        parks = sum(e["dur"] for e in ev if e.get("ph") == "X" and e.get("cat") == "idle") / 1000.0
        done = [e for e in ev if e.get("ph") == "i" and e.get("name") == "mpi done"]
        iw = [e for e in ev if e.get("ph") == "i" and e.get("name") == "mpi iwait"]
        summary[f"rank{k}"] = {"task_ms": round(tasks, 3), "mpi_wait_ms": round(waits, 3),
                               "park_ms": round(parks, 3), "mpi_done_events": len(done),
                               "requests_completed": sum(e["args"]["requests"] for e in done),
                               "iwait_events": len(iw)}
    # The picture spans the tasks: the worker's parks while MPI starts up and
    # finalises are clipped off.
    with open(files[0]) as fh:
        whole = json.load(fh)
    starts = [e["ts"] for e in whole["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "task"]
    ends = [e["ts"] + e["dur"] for e in whole["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "task"]
    window = ["--max-ms", f"{(max(ends) - min(starts) + 400.0) / 1000.0:.3f}"] if starts else []
    if starts:
        t0, t1 = min(starts) - 200.0, max(ends) + 200.0
        kept = []
        for e in whole["traceEvents"]:
            if "ts" in e and e.get("ph") != "M":
                end = e["ts"] + e.get("dur", 0)
                if end < t0:
                    continue
                if e["ts"] > t1:
                    continue
                if e["ts"] < t0:
                    e = dict(e, ts=t0, dur=end - t0)
                if e.get("ph") == "X" and e["ts"] + e["dur"] > t1:
                    e = dict(e, dur=t1 - e["ts"])
            kept.append(e)
        whole["traceEvents"] = kept
    clipped = os.path.join(out_dir, "trace_heat.clipped.json")
    with open(clipped, "w") as fh:
        json.dump(whole, fh)
    files.append(clipped)
    png = os.path.join(out_dir, "mpi_trace_rank0.png")
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "trace_timeline.py"), clipped, png,
                    "--title", "heat, mote + MPI non-blocking, rank 0 of 2 (tiles 64, 4 sweeps)"] + window,
                   capture_output=True, text=True)
    summary["png"] = os.path.basename(png) if os.path.exists(png) else None
    # The trace files themselves are large; the summary and the picture stay.
    for f in files:
        os.remove(f)
    return summary


def med(v):
    return statistics.median(v) if v else float("nan")


def write_report(data, out_dir):
    recs = {(r["ranks"], r["threads"], r["variant"], r["block"]): r for r in data["records"]}
    p = data["plan"]
    lines = ["# The mpi suite: task-aware MPI", ""]
    lines.append(f"The distributed Gauss-Seidel heat solver (`bench/mpi/heat.cpp`, the kernel of "
                 f"`examples/mpi_heat/heat.hpp`): a {p['size']} x {p['size']} grid, {p['sweeps']} sweeps, split "
                 f"by rows over the ranks, tiles of b x b. Times are wall milliseconds of the whole solve (the "
                 f"slowest rank's), median over {data['rounds']} round(s) x {p['reps']} repetition(s); every "
                 f"repetition is checked bit for bit against the serial solver. Machine: "
                 f"{data['machine'].get('cpu_model', '?')}, {data['machine'].get('nproc', '?')} CPUs; mpiexec over "
                 f"loopback (`--mca btl self,vader --bind-to none`).")
    lines.append("")
    lines.append("*Outside the kernel*: the threads' time not spent relaxing tiles (threads x wall - compute), "
                 "as a share of threads x wall: waiting for messages, idling for dependencies, and the "
                 "runtime's own work. *In MPI waits*: time in blocking MPI calls (MPI + OpenMP: counted for "
                 "every thread of the rank, all idle outside the parallel region; pure MPI: its receives and "
                 "waits; mote blocking: the spans of `mote::mpi::wait` summed over workers, which include the "
                 "tasks the worker ran meanwhile and nested waits; mote non-blocking: none, by design).")
    lines.append("")
    for (r, t, vs) in LAYOUTS:
        title = f"{r} rank{'s' if r > 1 else ''} x {t} thread{'s' if t > 1 else ''}"
        if r * t > 2:
            title += " (oversubscribed: 4 threads on 2 cores)"
        lines.append(f"## {title}")
        lines.append("")
        lines.append("| b | " + " | ".join(VARIANTS[v]["label"] for v in vs) + " |")
        lines.append("|---:|" + "---:|" * len(vs))
        for b in p["blocks"]:
            row = [str(b)]
            for v in vs:
                rec = recs.get((r, t, v, b))
                if rec is None:
                    row.append("failed")
                    continue
                wall = med(rec["samples"])
                comp = med(rec["compute_ms"])
                outside = max(0.0, 1 - comp / (wall * r * t)) if wall > 0 else float("nan")
                wait = med(rec["mpi_wait_ms"])
                row.append(f"{wall:.1f} ms ({outside * 100:.0f}% outside, {wait:.1f} ms in waits)")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        if r > 1:
            verdicts = []
            for b in p["blocks"]:
                mine = recs.get((r, t, "iwait", b))
                others = [recs.get((r, t, v, b)) for v in ("omp", "mpi") if v in vs]
                others = [o for o in others if o is not None]
                if mine is None or not others:
                    continue
                best = min(med(o["samples"]) for o in others)
                ratio = med(mine["samples"]) / best
                verdicts.append(f"b={b}: {ratio:.2f}x the better of MPI + OpenMP and pure MPI"
                                f" ({'faster' if ratio < 1 else 'slower' if ratio > 1.05 else 'even'})")
            if verdicts:
                lines.append("Non-blocking mote against the better baseline: " + "; ".join(verdicts) + ".")
                lines.append("")
        png = f"mpi_{r}x{t}.png"
        if draw(recs, r, t, vs, p["blocks"], os.path.join(out_dir, png), title):
            lines.append(f"![{title}]({png})")
            lines.append("")
    tr = data.get("trace") or {}
    lines.append("## The overlap in the trace")
    lines.append("")
    if "error" in tr:
        lines.append(f"No trace: {tr['error']}")
    else:
        lines.append("`MOTE_TRACE=trace_heat.%r.json` (one file per rank), the non-blocking mode at 2 ranks x 1 "
                     "worker, tiles of 64, 512 x 512, 4 sweeps (this run skips the serial check). Per rank: time in tasks, parked, in MPI waits "
                     "(none: nothing blocks), the polls that found requests complete and the iwaits:")
        lines.append("")
        lines.append("| rank | tasks | parked | MPI waits | polls with completions | requests completed | iwaits |")
        lines.append("|---:|---:|---:|---:|---:|---:|---:|")
        for k in range(2):
            s = tr.get(f"rank{k}", {})
            lines.append(f"| {k} | {s.get('task_ms', 0):.2f} ms | {s.get('park_ms', 0):.2f} ms | "
                         f"{s.get('mpi_wait_ms', 0):.2f} ms | {s.get('mpi_done_events', 0)} | "
                         f"{s.get('requests_completed', 0)} | {s.get('iwait_events', 0)} |")
        lines.append("")
        if tr.get("png"):
            lines.append("Rank 0's timeline: tiles (red) run while halo messages travel; the blue diamonds are "
                         "the polls that completed requests (their tasks' successors become ready there), the "
                         "purple ticks the iwaits of the message tasks, which return at once.")
            lines.append("")
            lines.append(f"![trace]({tr['png']})")
            lines.append("")
    if data["failures"]:
        lines.append("## Failures")
        lines.append("")
        for f in data["failures"]:
            lines.append(f"- {f['key']}: {f['error'][:300]}")
        lines.append("")
    with open(os.path.join(out_dir, "REPORT.md"), "w") as f:
        f.write("\n".join(lines))


def draw(recs, r, t, vs, blocks, path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for v in vs:
        xs, ys, lo, hi = [], [], [], []
        for b in blocks:
            rec = recs.get((r, t, v, b))
            if rec is None:
                continue
            xs.append(b)
            ys.append(med(rec["samples"]))
            lo.append(ys[-1] - min(rec["samples"]))
            hi.append(max(rec["samples"]) - ys[-1])
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=VARIANTS[v]["label"],
                        color=VARIANTS[v]["color"])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(blocks)
    ax.set_xticklabels([str(b) for b in blocks])
    ax.set_xlabel("tile size b (b x b points)")
    ax.set_ylabel("ms per solve (median, min..max)")
    ax.set_title(f"heat solver, {title}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
