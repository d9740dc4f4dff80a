"""The mpi suite: two distributed solvers on mote + MPI, MPI + GNU OpenMP and
pure MPI, run under mpiexec over loopback, interleaved round by round.
tools/report.py --suite mpi calls run(); it writes into bench/results/mpi/:

  results.json   every sample, the machine, the load average around each job
  REPORT.md      per solver and layout a table (size x variant): wall time,
                 the threads' time outside the kernel and in MPI waits, the
                 load average; the verdicts against the better baseline; the
                 trace summary
  *.png          time per size for each solver and layout; a trace of the
                 heat solver's non-blocking mode (rank 0)

The solvers:
  heat    bench/mpi/heat.cpp: the Gauss-Seidel heat solver of examples/mpi_heat
          (1024 x 1024, 20 sweeps, tiles b x b for b = 16..256); variants iwait
          (mote, non-blocking), blocking (mote, mote::mpi::wait), omp, mpi
  jacobi  bench/mpi/jacobi.cpp: a 5-point Jacobi written from docs/mpi.md
          (N x N for N = 1024 and 4096, 100 iterations, blocks of rows);
          variants mote, omp, mpi; checked against the serial solver's hash

Layouts on this machine's 2 cores, the same flags for every variant of both
solvers (mpiexec --oversubscribe --mca btl self,vader):
  2x1  2 ranks x 1 thread, under mpiexec's default binding (a core each)
  1x2  1 rank x 2 threads, --bind-to none (the rank needs both cores)
  2x2  2 ranks x 2 threads, --bind-to none: oversubscribed, 4 threads on 2
       cores
Pure MPI runs a rank per thread: 2 ranks for 2x1 and 1x2 (the same cores),
4 ranks for 2x2 (the same oversubscription).
"""

import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORES = os.cpu_count() or 2

VARIANTS = {
    "iwait": {"label": "mote + MPI, non-blocking (iwait)", "color": "#d62728"},
    "mote": {"label": "mote + MPI (iwait, from docs/mpi.md)", "color": "#d62728"},
    "blocking": {"label": "mote + MPI, blocking (wait)", "color": "#ff7f0e"},
    "omp": {"label": "MPI + OpenMP (GNU)", "color": "#2ca02c"},
    "mpi": {"label": "pure MPI (a rank per thread)", "color": "#1f77b4"},
}
MOTE_VARIANTS = ("iwait", "mote", "blocking")

# name, ranks, threads per rank, binding flags
LAYOUTS = [
    ("2x1", 2, 1, []),
    ("1x2", 1, 2, ["--bind-to", "none"]),
    ("2x2", 2, 2, ["--bind-to", "none"]),
]
LAYOUT_TITLES = {
    "2x1": "2 ranks x 1 thread (mpiexec's default binding: a core each)",
    "1x2": "1 rank x 2 threads (--bind-to none)",
    "2x2": "2 ranks x 2 threads (--bind-to none; oversubscribed: 4 threads on 2 cores)",
}

PROGRAMS = {
    "heat": {"exe": "bench_mpi_heat", "variants": ["iwait", "blocking", "omp", "mpi"], "mote": "iwait",
             "size_name": "b", "size_title": "tile size b (b x b points)"},
    "jacobi": {"exe": "bench_mpi_jacobi", "variants": ["mote", "omp", "mpi"], "mote": "mote",
               "size_name": "N", "size_title": "grid N (N x N points)"},
}


def plan(quick):
    if quick:
        return {"heat": {"sizes": [32, 128], "grid": 512, "sweeps": 4},
                "jacobi": {"sizes": [512], "iters": 10},
                "reps": 1, "warmup": 0, "rounds": 1}
    return {"heat": {"sizes": [16, 32, 64, 128, 256], "grid": 1024, "sweeps": 20},
            "jacobi": {"sizes": [1024, 4096], "iters": 100},
            "reps": 3, "warmup": 1, "rounds": 3}


def jacobi_block(n, ranks):
    """Rows per task: 16 (tasks of 15-70 us here; 64 to 256 blocks per rank
    and iteration). The only setting of the mote variant; the others take
    none."""
    return 16


def mpiexec_cmd(ranks, bind):
    cmd = ["mpiexec"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd + ["-np", str(ranks), "--oversubscribe", "--mca", "btl", "self,vader"] + list(bind)


def find_exe(bin_dirs, name):
    for d in bin_dirs:
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def loadavg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def job_ranks(layout, variant):
    """Ranks and threads per rank a job runs with (pure MPI: a rank per thread)."""
    _, r, t, bind = next(x for x in LAYOUTS if x[0] == layout)
    if variant == "mpi":
        return r * t, 1, bind if r * t <= CORES else ["--bind-to", "none"]
    return r, t, bind


def run_cmd(cmd, env_extra, timeout):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.update(env_extra)
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


def job_env(variant, ranks, threads):
    env = {}
    if ranks * threads > CORES:
        env["OMP_WAIT_POLICY"] = "passive"
    if variant in MOTE_VARIANTS:
        env["MOTE_NUM_THREADS"] = str(threads)
    return env


def run_job(exes, prog, layout, variant, size, p, hashes, timeout, env_extra=None, extra=()):
    ranks, threads, bind = job_ranks(layout, variant)
    env = job_env(variant, ranks, threads)
    env.update(env_extra or {})
    if prog == "heat":
        hp = p["heat"]
        args = ["--variant", variant, "--workers", str(threads), "--block", str(size), "--rows", str(hp["grid"]),
                "--cols", str(hp["grid"]), "--sweeps", str(hp["sweeps"])]
    else:
        jp = p["jacobi"]
        args = ["--variant", variant, "--workers", str(threads), "--n", str(size), "--iters", str(jp["iters"]),
                "--block", str(jacobi_block(size, ranks)), "--expect", hashes[size]]
    args += ["--reps", str(p["reps"]), "--warmup", str(p["warmup"])] + list(extra)
    return run_cmd(mpiexec_cmd(ranks, bind) + [exes[prog]] + args, env, timeout)


def serial_hashes(exe, p, timeout):
    out = {}
    for n in p["jacobi"]["sizes"]:
        r = subprocess.run([exe, "--variant", "serial", "--n", str(n), "--iters", str(p["jacobi"]["iters"])],
                           capture_output=True, text=True, timeout=timeout)
        out[n] = r.stdout.strip()
        print(f"  jacobi serial N={n}: hash {out[n]}", file=sys.stderr, flush=True)
    return out


def run(args, bin_dirs, out_dir, machine):
    exes = {prog: find_exe(bin_dirs, spec["exe"]) for prog, spec in PROGRAMS.items()}
    missing = [PROGRAMS[k]["exe"] for k, v in exes.items() if v is None]
    if missing:
        print(f"{', '.join(missing)} not built (configure with -DMOTE_BUILD_BENCH=ON and MPI)", file=sys.stderr)
        return 1
    p = plan(args.quick)
    rounds = args.rounds or p["rounds"]
    hashes = serial_hashes(exes["jacobi"], p, args.timeout)
    jobs = [(prog, lay[0], v, s) for lay in LAYOUTS for prog, spec in PROGRAMS.items()
            for s in p[prog]["sizes"] for v in spec["variants"]]
    results, failures = {}, []
    t_start = time.monotonic()
    for rnd in range(rounds):
        offset = (rnd * 7) % len(jobs)
        order = jobs[offset:] + jobs[:offset]
        print(f"round {rnd + 1}/{rounds}: {len(order)} jobs", file=sys.stderr, flush=True)
        for (prog, lay, v, s) in order:
            key = f"{prog}/{lay}/{v}/{s}"
            if any(f["key"] == key for f in failures):
                continue
            load_before = loadavg()
            rec, err = run_job(exes, prog, lay, v, s, p, hashes, args.timeout)
            load_after = loadavg()
            if err or rec.get("result") != 1:
                failures.append({"key": key, "error": err or "wrong result (differs from the serial solver)"})
                print(f"  FAILED {key}: {failures[-1]['error']}", file=sys.stderr, flush=True)
                continue
            ranks, threads, _ = job_ranks(lay, v)
            acc = results.setdefault(key, {"program": prog, "layout": lay, "variant": v, "size": s,
                                           "ranks": ranks, "threads": threads, "samples": [],
                                           "compute_ms": [], "mpi_wait_ms": [], "load": []})
            acc["samples"].extend(rec["samples"])
            acc["compute_ms"].append(rec["extra"]["compute_ms"])
            acc["mpi_wait_ms"].append(rec["extra"]["mpi_wait_ms"])
            acc["load"].append(round((load_before + load_after) / 2, 2))
            print(f"  {key}: median {statistics.median(rec['samples']):.2f} ms (load {load_after:.2f})",
                  file=sys.stderr, flush=True)
    trace = make_trace(exes, out_dir, p, hashes)
    data = {"machine": machine, "quick": args.quick, "plan": p, "rounds": rounds, "hashes": hashes,
            "duration_s": time.monotonic() - t_start, "records": list(results.values()),
            "failures": failures, "trace": trace}
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(data, f, indent=1)
    write_report(data, out_dir)
    print(f"wrote {os.path.join(out_dir, 'REPORT.md')}", file=sys.stderr)
    return 1 if failures else 0


def make_trace(exes, out_dir, p, hashes):
    """A trace of the heat solver's non-blocking mode, 2 ranks x 1 worker, one
    file per rank (MOTE_TRACE with %r), summarised and drawn for rank 0."""
    path = os.path.join(out_dir, "trace_heat.%r.json")
    tp = dict(p, reps=1, warmup=0, heat={"sizes": [64], "grid": 512, "sweeps": 4})
    # No serial reference in this run (--check 0): the timeline is the solve.
    rec, err = run_job(exes, "heat", "2x1", "iwait", 64, tp, hashes, 120, {"MOTE_TRACE": path}, ["--check", "0"])
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


def cell(rec):
    wall = med(rec["samples"])
    comp = med(rec["compute_ms"])
    threads = rec["ranks"] * rec["threads"]
    outside = max(0.0, 1 - comp / (wall * threads)) if wall > 0 else float("nan")
    wait = med(rec["mpi_wait_ms"])
    load = med(rec.get("load", []))
    return (f"{wall:.1f} ms ({outside * 100:.0f}% outside, {wait:.1f} ms in waits; "
            f"load {load:.1f})")


def write_report(data, out_dir):
    recs = {(r["program"], r["layout"], r["variant"], r["size"]): r for r in data["records"]}
    p = data["plan"]
    lines = ["# The mpi suite: task-aware MPI", ""]
    loads = [x for r in data["records"] for x in r.get("load", [])]
    lines.append(
        f"Two distributed solvers, each on mote + MPI, MPI + GNU OpenMP and pure MPI, run under mpiexec over "
        f"loopback (`--oversubscribe --mca btl self,vader`, the layout's binding), every variant interleaved "
        f"round by round: {data['rounds']} round(s) x {p['reps']} repetition(s) after {p['warmup']} warm-up, "
        f"medians. Times are wall milliseconds of the whole solve (the slowest rank's). Machine: "
        f"{data['machine'].get('cpu_model', '?')}, {data['machine'].get('nproc', '?')} CPUs, **shared with "
        f"other builds**: the 1-minute load average around each job is beside its figure (over the run "
        f"{min(loads) if loads else float('nan'):.1f} to {max(loads) if loads else float('nan'):.1f}; "
        f"above 2 the machine was busy with other work, and the figures are noisy).")
    lines.append("")
    lines.append(
        f"- **heat** (`bench/mpi/heat.cpp`, the kernel of `examples/mpi_heat/heat.hpp`): Gauss-Seidel, "
        f"{p['heat']['grid']} x {p['heat']['grid']}, {p['heat']['sweeps']} sweeps, split by rows, tiles of b x b; "
        f"checked bit for bit against the serial solver.")
    lines.append(
        f"- **jacobi** (`bench/mpi/jacobi.cpp`): a 5-point Jacobi written from docs/mpi.md alone (double-buffered, "
        f"blocks of rows per task, halos received by tasks bound with `mote::mpi::iwait`, tasks spawned from the "
        f"main thread), N x N, {p['jacobi']['iters']} iterations, beside the same solver in pure MPI "
        f"(Isend/Irecv, the rows that need no halo computed meanwhile) and MPI + OpenMP (exchange, then a "
        f"`parallel for`); checked against the serial solver's hash of the whole grid.")
    lines.append("")
    lines.append("*Outside the kernel*: the threads' time not spent computing (threads x wall - kernel), as a share "
                 "of threads x wall: waiting for messages, idling for dependencies, the runtime's own work. *In MPI "
                 "waits*: time in blocking MPI calls (MPI + OpenMP: counted for every thread of the rank, all idle "
                 "meanwhile; pure MPI: its waits; mote blocking: the spans of `mote::mpi::wait` summed over workers, "
                 "which include the tasks run meanwhile; mote non-blocking: none, by design). Pure MPI runs a rank "
                 "per thread of the layout: 2 ranks in 2x1 and 1x2, 4 in 2x2.")
    lines.append("")
    verdicts_all = []
    for prog, spec in PROGRAMS.items():
        lines.append(f"## {prog}")
        lines.append("")
        for (lay, _, _, _) in LAYOUTS:
            vs = spec["variants"]
            title = LAYOUT_TITLES[lay]
            lines.append(f"### {prog}: {title}")
            lines.append("")
            lines.append(f"| {spec['size_name']} | " + " | ".join(VARIANTS[v]["label"] for v in vs) + " |")
            lines.append("|---:|" + "---:|" * len(vs))
            for s in p[prog]["sizes"]:
                row = [str(s)]
                for v in vs:
                    rec = recs.get((prog, lay, v, s))
                    row.append("failed" if rec is None else cell(rec))
                lines.append("| " + " | ".join(row) + " |")
            lines.append("")
            verdicts = []
            for s in p[prog]["sizes"]:
                mine = recs.get((prog, lay, spec["mote"], s))
                others = [recs.get((prog, lay, v, s)) for v in ("omp", "mpi")]
                others = [o for o in others if o is not None]
                if mine is None or not others:
                    continue
                best = min(med(o["samples"]) for o in others)
                ratio = med(mine["samples"]) / best
                word = "faster" if ratio < 0.97 else "slower" if ratio > 1.03 else "even"
                verdicts.append(f"{spec['size_name']}={s}: {ratio:.2f}x ({word})")
                verdicts_all.append((prog, lay, s, ratio))
            if verdicts:
                lines.append("mote against the better of MPI + OpenMP and pure MPI: " + "; ".join(verdicts) + ".")
                lines.append("")
            png = f"mpi_{prog}_{lay}.png"
            if draw(recs, prog, lay, vs, p[prog]["sizes"], os.path.join(out_dir, png), f"{prog}, {title}",
                    spec["size_title"]):
                lines.append(f"![{prog}, {title}]({png})")
                lines.append("")
    tr = data.get("trace") or {}
    lines.append("## The overlap in the trace")
    lines.append("")
    if "error" in tr:
        lines.append(f"No trace: {tr['error']}")
    else:
        lines.append("`MOTE_TRACE=trace_heat.%r.json` (one file per rank), the heat solver's non-blocking mode at 2 "
                     "ranks x 1 worker, tiles of 64, 512 x 512, 4 sweeps (this run skips the serial check). Per "
                     "rank: time in tasks, parked, in MPI waits (none: nothing blocks), the polls that found "
                     "requests complete and the iwaits:")
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


def draw(recs, prog, lay, vs, sizes, path, title, xlabel):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for v in vs:
        xs, ys, lo, hi = [], [], [], []
        for s in sizes:
            rec = recs.get((prog, lay, v, s))
            if rec is None:
                continue
            xs.append(s)
            ys.append(med(rec["samples"]))
            lo.append(ys[-1] - min(rec["samples"]))
            hi.append(max(rec["samples"]) - ys[-1])
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=VARIANTS[v]["label"],
                        color=VARIANTS[v]["color"])
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes)
    ax.set_xticklabels([str(s) for s in sizes])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("ms per solve (median, min..max)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
