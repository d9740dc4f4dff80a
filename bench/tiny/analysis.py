"""The tiny suite's analysis: speedups over serial per kernel and task size, the
fine sweep against the bound of a one-round-trip hand-off, and the adaptive
offload's figures and aims, round by round.
"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from benchreport.stats import fmt, geomean, med, round_medians  # noqa: E402
from benchreport.suites import settings  # noqa: E402


# The figures for two tasks of 0.1 / 0.5 / 1 / 5 us (speedup over serial),
# in the order of the sweep kernels in suites.json ("analysis" / "kernels" / "sweep").
TINY_QUOTED = {"best general runtime": [0.55, 1.31, 1.56, 1.91],
               "hand-written SPSC assistant": [0.62, 1.58, 1.76, 1.93]}
TINY_AIM = [0.75, 1.75, 1.85, 1.95]
TINY_GEOMEAN_AIM = 1.5
TINY_ADAPTIVE_VS_SERIAL = 0.97     # every kernel and sweep size, every round
TINY_ADAPTIVE_VS_PLAIN = 0.95      # against the better of TINY_PLAIN, where that one beat serial
# The tiny-kernel geometric mean the adaptive variants aim at, by the round trip
# of the round: 1.3x at <= 150 ns, 1.0x at >= 300 ns, straight in between.
TINY_ADAPTIVE_GEOMEAN_BANDS = ((150.0, 1.3), (300.0, 1.0))

# From the suite's "analysis" entry in suites.json (set by configure):
TINY_KERNELS = []   # the graph kernels and json
TINY_SWEEP = []     # [(kernel, us)]: the four quoted sweep sizes
TINY_MOTE = []      # every mote variant
# The adaptive offload (assistant_options::adaptive, runtime_options::adaptive):
# the plain variants run with it off, their twins with it on.
TINY_PLAIN = []
TINY_ADAPTIVE = []
TINY_TWIN = {}      # adaptive variant -> the same code with the offload off


def configure(registry):
    """Reads the runtime and kernel lists of the suite's "analysis" entry."""
    global TINY_KERNELS, TINY_SWEEP, TINY_MOTE, TINY_PLAIN, TINY_ADAPTIVE, TINY_TWIN
    cfg = settings(registry, "tiny")
    TINY_KERNELS = list(cfg["kernels"]["graph"])
    TINY_SWEEP = [(k, float(us)) for k, us in cfg["kernels"]["sweep"]]
    TINY_MOTE = list(cfg["runtimes"]["mote"])
    TINY_PLAIN = list(cfg["runtimes"]["plain"])
    TINY_ADAPTIVE = list(cfg["runtimes"]["adaptive"])
    TINY_TWIN = dict(cfg["twins"])


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


def derived(registry, idx, out_dir):
    configure(registry)
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
