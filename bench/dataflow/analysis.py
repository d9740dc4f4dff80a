"""The dataflow suite's analysis: dependent tasks per second on the chains against
the quoted figures, fine-grained kernels against serial, and efficiency against
task size (the swept block sizes).
"""

import os
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from benchreport.stats import fmt, med  # noqa: E402
from benchreport.suites import settings  # noqa: E402


# The figures for chains_empty (dynamically created dependent tasks per
# second, 2 workers): mote's aim and the OpenMPs as quoted.
DATAFLOW_QUOTED_MTASKS = {"mote_aim": 10.0, "GNU OpenMP": 2.7, "LLVM OpenMP": 1.3}

# From the suite's "analysis" entry in suites.json (set by configure):
DATAFLOW_CHAINS = []          # the chain kernels (tasks per second)
DATAFLOW_FAMILIES = []        # the swept kernel families, in table order
DATAFLOW_AGAINST_SERIAL = []  # [(kernel, workers)] of the fine-grained table
DATAFLOW_MOTE = []            # mote's variants


def configure(registry):
    """Reads the kernel and runtime lists of the suite's "analysis" entry."""
    global DATAFLOW_CHAINS, DATAFLOW_FAMILIES, DATAFLOW_AGAINST_SERIAL, DATAFLOW_MOTE
    cfg = settings(registry, "dataflow")
    DATAFLOW_CHAINS = list(cfg["kernels"]["chains"])
    DATAFLOW_FAMILIES = list(cfg["kernels"]["families"])
    DATAFLOW_AGAINST_SERIAL = [(k, w) for k, w in cfg["kernels"]["against_serial"]]
    DATAFLOW_MOTE = list(cfg["runtimes"]["mote"])


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


def derived(registry, idx, out_dir):
    configure(registry)
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
    lines += ["### Against serial: fine-grained tasks", "",
              "Serial median / runtime median (higher is better; 2 workers can reach 2x). wavefront_8 "
              "tasks are 64-point Gauss-Seidel blocks (well under 1 us), chains_1us tasks ~1 us.", "",
              "| kernel | workers | " + " | ".join(labels[rt] for rt in rts) + " |",
              "|" + "---|" * (len(rts) + 2)]
    for k, w in DATAFLOW_AGAINST_SERIAL:
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
    order = [f for f in DATAFLOW_FAMILIES if f in fams]
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
