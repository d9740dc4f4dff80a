"""The report writer: REPORT.md with the machine, how it was measured, each
suite's kernel tables and plots followed by what the suite's own analysis adds
(bench/<suite>/analysis.py), the callgrind counts and the traces.

    write_report(registry, data, out_dir)   # data: results.json's contents
"""

import json
import os
import sys

from .paths import ROOT, TOOLS
from .plots import plot_kernel
from .stats import fmt, index, med, summary
from .suites import analysis


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
    notes = os.path.join(ROOT, "docs", "performance.md")
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
              "Every variant is its own executable (the suite's `main.cpp` on the runtime's backend "
              "`bench/backends/<runtime>.hpp`; the queue and lock micro-benchmarks are one source built once per "
              "queue or lock), all compiled with "
              "`-O3 -march=x86-64-v2`; the kernel bodies of a suite are shared (`bench/<suite>/kernels.hpp`), "
              "only the runtime's primitives differ. The runner interleaves the runtimes round by round "
              "(each round runs every job once, in a rotated order), so all share the machine's noise; "
              "each process does its warm-up, then a few timed repetitions, and a row pools the "
              "samples of all rounds. `workers` is the number of threads the runtime may use "
              "(mote: `runtime_options::num_workers`; mote assistant: the owner thread and its "
              "assistant; oneTBB: `global_control` + `task_arena`; OpenMP: `num_threads`). The machine is shared and noisy: read the medians, and the "
              "spread beside them.", ""]
    # A suite's opening table (its aims) only when the run has that suite's
    # records (or those of a suite the table also reads, PREAMBLE_SUITES): a
    # run of other suites would show it with every row n/a.
    ran = {k[0] for k in idx}
    for suite in registry["suites"]:
        module = analysis(suite["name"])
        if module is not None and hasattr(module, "preamble") and \
                ran & set(getattr(module, "PREAMBLE_SUITES", (suite["name"],))):
            lines += module.preamble(registry, idx)
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
        module = analysis(suite["name"])
        if module is not None and hasattr(module, "derived"):
            lines += module.derived(registry, idx, out_dir)
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


def tracing_section(out_dir):
    if TOOLS not in sys.path:
        sys.path.insert(0, TOOLS)
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
