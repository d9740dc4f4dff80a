"""The loops suite's analysis: speedup against grain, what a batch and a loop cost
beside the core-to-core round trip, and the graph kernels' speedups.
"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from benchreport.stats import fmt, med, round_medians  # noqa: E402
from benchreport.suites import settings  # noqa: E402


# From the suite's "analysis" entry in suites.json (set by configure):
LOOPS_GRAINS = []   # the grains of the _g<G> kernels
LOOPS_SIZES = []    # the array sizes of the update_ / sum_ kernels
# The suite's variants in table order; labels that say which schedule each one
# is (the registry's labels are shared with the other suites); what each one's
# automatic choice (the _auto kernels) is; the schedules drawn dashed.
LOOPS_RTS = []
LOOPS_LABELS = {}
LOOPS_AUTO = {}
LOOPS_DASHED = []
LOOPS_GRAPH = []    # the kernels run with the automatic grain only


def configure(registry):
    """Reads the kernel and runtime lists of the suite's "analysis" entry."""
    global LOOPS_GRAINS, LOOPS_SIZES, LOOPS_RTS, LOOPS_LABELS, LOOPS_AUTO, LOOPS_DASHED, LOOPS_GRAPH
    cfg = settings(registry, "loops")
    LOOPS_GRAINS = list(cfg["grains"])
    LOOPS_SIZES = list(cfg["sizes"])
    LOOPS_RTS = list(cfg["runtimes"]["table"])
    LOOPS_DASHED = list(cfg["runtimes"]["dashed"])
    LOOPS_LABELS = dict(cfg["labels"])
    LOOPS_AUTO = dict(cfg["automatic"])
    LOOPS_GRAPH = list(cfg["kernels"]["graph"])


def loops_label(registry, rt):
    return LOOPS_LABELS.get(rt, registry["runtimes"][rt]["label"])


def loops_speedup(idx, kernel, rt, w):
    base = med(idx, "loops", kernel, "serial", 1)
    m = med(idx, "loops", kernel, rt, w)
    return base / m if base and m else None


def derived(registry, idx, out_dir):
    configure(registry)
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
            style = "--" if rt in LOOPS_DASHED else "-"
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
