"""The micro suite's analysis: the per-spawn cost (from the empty spawn loop and
derived from fork_join's fib), mote's two scheduler policies side by side, and
the report's opening table of the targets the project quotes and aims at.
"""

import os
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from benchreport.stats import fmt, med  # noqa: E402


QUOTED = {
    "serial_fib32_ms": 2.7,
    "spawn_ns": [("Lace", 0.9), ("LLVM OpenMP", 47), ("GNU OpenMP", 56), ("Taskflow", 60), ("oneTBB", 102)],
    "fib32_2threads_ms": [("Lace", "4.0"), ("Taskflow", "113"), ("oneTBB", "184"), ("OpenMP", "620-700")],
    "mote_spawn_ns_max": 1.5,
    "mote_fib_speedup_min": 1.7,
    "mote_fib_vs_serial_max": 1.5,
}


# The suites whose records the report's opening table (preamble) reads: it is
# shown when the run has either.
PREAMBLE_SUITES = ("micro", "fork_join")


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


def preamble(registry, idx):
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


def derived(registry, idx, out_dir):
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
