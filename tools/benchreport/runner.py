"""The runner: plans one job per (suite, kernel, runtime, workers) from the
registry, runs them interleaved round by round (each round every job once, in
an order rotated each round, so that all runtimes share the machine's noise),
pools the samples and checks every runtime's answer against the baseline's.

    jobs, skipped = plan_jobs(registry, quick=False, only_suites=None, bin_dirs=dirs)
    data = run_all(registry, args, dirs)   # {"rounds", "records", "failures", ...}
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from .stats import fmt


def find_exe(name, bin_dirs):
    for d in bin_dirs:
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def runtime_env(rinfo, exe, workers):
    """A runtime's own environment ("env" in the registry), with {exe_dir} (the
    executable's directory) and {workers} filled in."""
    def fill(text):
        return text.replace("{exe_dir}", os.path.dirname(exe)).replace("{workers}", str(workers))
    return {k: fill(v) for k, v in rinfo.get("env", {}).items()}


def plan_jobs(registry, quick, only_suites, bin_dirs):
    """The list of (suite, job, runtime, workers, exe) to run each round."""
    jobs, skipped = [], []
    missing_reported = set()
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
                # reruns fork_join and micro under other conditions), or name
                # one executable that every runtime runs, the runtimes then
                # differing by their env alone (the omp suite: one gcc-built
                # program on three libgomp.so.1).
                exe_name = job.get("exe") or f"bench_{job.get('exe_suite', suite['name'])}_{rinfo['exe_suffix']}"
                exe = find_exe(exe_name, bin_dirs)
                # A serial runtime runs once, with 1 worker, whatever the job's counts.
                workers = job["workers"] if rinfo.get("parallel", True) else [1]
                for w in workers:
                    key = (suite["name"], job["kernel"], rt, w)
                    if exe is None:
                        skipped.append({"key": list(key), "reason": f"{exe_name} not built"})
                        continue
                    # A runtime that needs a file (a library it loads instead of
                    # the linked one) is skipped, with one line, while it is missing.
                    needs = rinfo.get("requires")
                    if needs:
                        path = os.path.normpath(needs.replace("{exe_dir}", os.path.dirname(exe)))
                        if not os.path.exists(path):
                            reason = f"{path} missing" + (f": {rinfo['requires_why']}" if "requires_why" in rinfo else "")
                            skipped.append({"key": list(key), "reason": reason})
                            if (rt, path) not in missing_reported:
                                missing_reported.add((rt, path))
                                print(f"skipping runtime {rt}: {reason}", file=sys.stderr, flush=True)
                            continue
                    jobs.append({"suite": suite, "spec": spec, "runtime": rt, "workers": w,
                                 "exe": exe, "key": key, "env": runtime_env(rinfo, exe, w)})
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
    env.update(job.get("env", {}))
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
    if "exe" in spec:
        # One executable for several runtimes: its records name the runtime
        # it found itself running on, which must be the one asked for (a
        # missing library would otherwise file the linked one's times here).
        for rec in records:
            if rec.get("runtime") != job["runtime"] or rec.get("workers") != job["workers"]:
                lib = rec.get("extra", {}).get("omp_library_real", "?")
                return None, (f"ran on {rec.get('runtime')} ({lib}) with {rec.get('workers')} workers, "
                              f"asked for {job['runtime']} with {job['workers']}: {' '.join(cmd)}")
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

