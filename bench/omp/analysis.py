"""The omp suite's analysis: one gcc-built binary per program on three OpenMP
runtimes (GNU's libgomp, LLVM's libomp through its GOMP layer, mote's
libgomp.so.1). Adds the library each runtime really loaded, one table over the
programs (median per runtime at 1 and 2 threads, the 2-vs-1 speedup, mote
against the better of GNU and LLVM), the construct costs in ns, the speedup and
ratio plots, and the aims the suite holds mote to, each met or not met.
"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from benchreport.stats import fmt, med  # noqa: E402
from benchreport.suites import settings  # noqa: E402

SUITE = "omp"

# From the suite's "analysis" entry in suites.json (set by configure):
OMP_GNU = OMP_LLVM = OMP_MOTE = None  # the three runtimes, by name
OMP_POLICIES = []  # mote's libgomp under each scheduler policy (OMP_MOTE first: the default)
OMP_FINE = []     # fine-grained programs without a cut-off: mote must beat both and GNU's 1 thread
OMP_COARSE = []   # every other program: mote no slower than the better of the two
OMP_FINE_VS_GNU1 = 1.5  # a fine program on 2 threads against GNU's 1-thread run
OMP_MICRO = []    # the constructs (ns each)
OMP_MICRO_AIM = []  # the constructs held to OMP_MICRO_NS_MAX and to GNU's cost
OMP_MICRO_NS_MAX = None


def configure(registry):
    """Reads the runtime and kernel lists of the suite's "analysis" entry."""
    global OMP_GNU, OMP_LLVM, OMP_MOTE, OMP_FINE, OMP_COARSE, OMP_MICRO, OMP_MICRO_AIM, OMP_MICRO_NS_MAX
    global OMP_FINE_VS_GNU1, OMP_POLICIES
    cfg = settings(registry, SUITE)
    OMP_GNU, OMP_LLVM, OMP_MOTE = (cfg["runtimes"][k] for k in ("gnu", "llvm", "mote"))
    OMP_POLICIES = list(cfg["runtimes"].get("mote_policies", [OMP_MOTE]))
    OMP_FINE = list(cfg["kernels"]["fine"])
    OMP_COARSE = list(cfg["kernels"]["coarse"])
    OMP_MICRO = list(cfg["kernels"]["micro"])
    OMP_MICRO_AIM = list(cfg["aims"]["micro_kernels"])
    OMP_MICRO_NS_MAX = cfg["aims"]["micro_ns_max"]
    OMP_FINE_VS_GNU1 = cfg["aims"].get("fine_vs_gnu_1thread", 1.5)


def better_peer(idx, kernel, workers):
    """The smaller of GNU's and LLVM's medians (None when neither ran)."""
    peers = [m for m in (med(idx, SUITE, kernel, OMP_GNU, workers), med(idx, SUITE, kernel, OMP_LLVM, workers))
             if m is not None]
    return min(peers) if peers else None


def best_policy(idx, kernel, workers):
    """(median, runtime) of the fastest of mote's policies ((None, None) when none ran)."""
    ran = [(m, rt) for rt in OMP_POLICIES if (m := med(idx, SUITE, kernel, rt, workers)) is not None]
    return min(ran) if ran else (None, None)


def runtimes():
    """GNU, LLVM, then mote under each policy."""
    return (OMP_GNU, OMP_LLVM, *OMP_POLICIES)


def ratio(a, b):
    return a / b if a is not None and b else None


def verdict(ok):
    return "n/a" if ok is None else ("met" if ok else "**not met**")


def figure(value, unit):
    return "not run" if value is None else f"{fmt(value)} {unit}"


def libraries(registry, idx):
    """Which file each runtime's processes loaded (the records' omp_library)."""
    seen = {}
    for (suite, _kernel, rt, _w), r in idx.items():
        if suite != SUITE:
            continue
        ex = r.get("extra", {})
        if ex.get("omp_library"):
            seen.setdefault(rt, set()).add((ex["omp_library"], ex.get("omp_library_real", ex["omp_library"])))
    lines = ["| runtime | library loaded (as the loader names it -> the file) |", "|---|---|"]
    for rt in runtimes():
        libs = seen.get(rt)
        label = registry["runtimes"][rt]["label"]
        if not libs:
            lines.append(f"| {label} | not run |")
            continue
        cell = "; ".join(f"`{a}`" + ("" if a == b else f" -> `{b}`") for a, b in sorted(libs))
        lines.append(f"| {label} | {cell} |")
    return lines


def program_table(registry, idx):
    """Per program: the three runtimes' medians at 1 and 2 threads, then, on 2
    threads, mote against the better peer, against GNU's 1-thread run, and
    against mote's own 1-thread run; then the best of mote's policies against
    the better peer."""
    rts = runtimes()
    labels = {rt: registry["runtimes"][rt]["label"] for rt in rts}
    head = "| program | " + " | ".join(f"{labels[rt]} 1 / 2 threads (ms)" for rt in rts)
    head += " | mote 2 / better peer 2 | GNU 1 / mote 2 | mote 1 / mote 2 | best policy 2 / better peer 2 |"
    lines = [head, "|" + "---|" * (len(rts) + 5)]
    for kernel in OMP_FINE + OMP_COARSE:
        if not any(k[0] == SUITE and k[1] == kernel for k in idx):
            continue
        cells = [f"{fmt(med(idx, SUITE, kernel, rt, 1))} / {fmt(med(idx, SUITE, kernel, rt, 2))}" for rt in rts]
        m1, m2 = med(idx, SUITE, kernel, OMP_MOTE, 1), med(idx, SUITE, kernel, OMP_MOTE, 2)
        for r in (ratio(m2, better_peer(idx, kernel, 2)), ratio(med(idx, SUITE, kernel, OMP_GNU, 1), m2),
                  ratio(m1, m2)):
            cells.append(f"{fmt(r)}x" if r else "n/a")
        best, best_rt = best_policy(idx, kernel, 2)
        r = ratio(best, better_peer(idx, kernel, 2))
        cells.append(f"{fmt(r)}x ({registry['runtimes'][best_rt]['label']})" if r else "n/a")
        grain = "fine, no cut-off" if kernel in OMP_FINE else "other"
        lines.append(f"| {kernel} ({grain}) | " + " | ".join(cells) + " |")
    return lines


def micro_table(registry, idx):
    rts = runtimes()
    head = "| construct | " + " | ".join(f"{registry['runtimes'][rt]['label']}, {w} thread{'s' if w > 1 else ''}"
                                         for rt in rts for w in (1, 2)) + " |"
    lines = [head, "|" + "---|" * (2 * len(rts) + 1)]
    for kernel in OMP_MICRO:
        if not any(k[0] == SUITE and k[1] == kernel for k in idx):
            continue
        cells = [fmt(med(idx, SUITE, kernel, rt, w)) for rt in rts for w in (1, 2)]
        lines.append(f"| {kernel} | " + " | ".join(cells) + " |")
    return lines


def aims(idx):
    """[(aim, kernel, mote's figure, the figure it is held to, met or None)]."""
    rows = []
    for kernel in OMP_FINE:
        m2 = med(idx, SUITE, kernel, OMP_MOTE, 2)
        gnu1 = med(idx, SUITE, kernel, OMP_GNU, 1)
        peer = better_peer(idx, kernel, 2)
        rows.append((f"fine-grained, no cut-off, 2 threads: {fmt(OMP_FINE_VS_GNU1)}x GNU's 1-thread run or faster",
                     kernel, figure(m2, "ms"),
                     "<= " + figure(None if gnu1 is None else gnu1 / OMP_FINE_VS_GNU1, "ms"),
                     None if m2 is None or gnu1 is None else gnu1 / m2 >= OMP_FINE_VS_GNU1))
        rows.append(("fine-grained, no cut-off, 2 threads: faster than the better of GNU and LLVM", kernel,
                     figure(m2, "ms"), "< " + figure(peer, "ms"),
                     None if m2 is None or peer is None else m2 < peer))
    for kernel in OMP_COARSE:
        m2 = med(idx, SUITE, kernel, OMP_MOTE, 2)
        peer = better_peer(idx, kernel, 2)
        rows.append(("2 threads: no slower than the better of GNU and LLVM", kernel, figure(m2, "ms"),
                     "<= " + figure(peer, "ms"), None if m2 is None or peer is None else m2 <= peer))
    for kernel in OMP_FINE + OMP_COARSE:
        m1, m2 = med(idx, SUITE, kernel, OMP_MOTE, 1), med(idx, SUITE, kernel, OMP_MOTE, 2)
        if m1 is None and m2 is None:
            continue
        rows.append(("mote: faster on 2 threads than on 1", kernel, figure(m2, "ms"),
                     "mote on 1 thread: " + figure(m1, "ms"),
                     None if m1 is None or m2 is None else m2 < m1))
    if len(OMP_POLICIES) > 1:
        for kernel in OMP_FINE + OMP_COARSE:
            best, best_rt = best_policy(idx, kernel, 2)
            peer = better_peer(idx, kernel, 2)
            if best is None and peer is None:
                continue
            rows.append(("the best of mote's policies, 2 threads: no slower than the better of GNU and LLVM",
                         kernel, figure(best, "ms") + (f" ({best_rt})" if best_rt else ""),
                         "<= " + figure(peer, "ms"), None if best is None or peer is None else best <= peer))
    for kernel in OMP_MICRO_AIM:
        m2 = med(idx, SUITE, kernel, OMP_MOTE, 2)
        gnu = med(idx, SUITE, kernel, OMP_GNU, 2)
        rows.append((f"construct, 2 threads: under {fmt(OMP_MICRO_NS_MAX)} ns", kernel, figure(m2, "ns"),
                     f"< {fmt(OMP_MICRO_NS_MAX)} ns", None if m2 is None else m2 < OMP_MICRO_NS_MAX))
        rows.append(("construct, 2 threads: no slower than GNU's", kernel, figure(m2, "ns"),
                     "<= " + figure(gnu, "ns"), None if m2 is None or gnu is None else m2 <= gnu))
    return rows


def derived(registry, idx, out_dir):
    configure(registry)
    if not any(k[0] == SUITE for k in idx):
        return []
    lines = ["### Libraries loaded", "",
             "Every record names the shared object that defines `omp_get_num_threads` in its process "
             "(`dladdr`), and the runner rejects a record whose runtime is not the one its job asked for, "
             "so a library missing from `LD_LIBRARY_PATH` fails the job instead of filing GNU's times "
             "under another runtime.", ""]
    lines += libraries(registry, idx) + [""]
    lines += ["### Programs side by side", "",
              "Medians in ms. On 2 threads: `mote 2 / better peer 2` = mote's median / the smaller of "
              "GNU's and LLVM's (below 1: mote is faster); `GNU 1 / mote 2` = GNU's 1-thread median / "
              "mote's 2-thread one (the aim for the fine-grained programs without a cut-off: 1.5x or "
              "more); `mote 1 / mote 2` = mote's own 2-vs-1 speedup (above 1: 2 threads are faster); "
              "these three are of mote's default policy (work stealing). `best policy 2 / better peer 2` = "
              "the fastest of mote's scheduler policies (`MOTE_SCHEDULER` = steal, mesh, delegation; "
              "docs/scheduler.md) against the better peer.", ""]
    lines += program_table(registry, idx) + [""]
    png = plot_ratios(registry, idx, out_dir)
    if png:
        lines += [f"![omp speedups and ratios]({png})", ""]
    lines += ["### Constructs (ns each)", "",
              "`parallel`: an empty region (entry and exit); `barrier`: one barrier inside a region; "
              "`for_static`: a `schedule(static)` loop of 1000 empty iterations with its implicit "
              "barrier; `task_spawn`: one thread spawns 1000 empty tasks and waits (per task); "
              "`parallel_barrier`: a region holding one barrier.", ""]
    lines += micro_table(registry, idx) + [""]
    png = plot_micro(registry, idx, out_dir)
    if png:
        lines += [f"![omp constructs]({png})", ""]
    rows = aims(idx)
    measured = [r for r in rows if r[4] is not None]
    lines += ["### Aims", "",
              f"{sum(1 for r in measured if r[4])} of {len(rows)} met, "
              f"{sum(1 for r in measured if not r[4])} not met, {len(rows) - len(measured)} not measured "
              "(n/a: a runtime did not run, e.g. mote's libgomp.so.1 not built). Medians of this run; "
              "a strict comparison, with no allowance for noise: read the spread in the kernel tables.", "",
              "| aim | kernel | mote | held to | verdict |", "|---|---|---|---|---|"]
    for aim, kernel, ours, target, ok in rows:
        lines.append(f"| {aim} | {kernel} | {ours} | {target} | {verdict(ok)} |")
    lines.append("")
    return lines


def plot_ratios(registry, idx, out_dir):
    """Left: the 2-vs-1 speedup per program and runtime. Right: each runtime's
    2-thread median against the better of GNU and LLVM."""
    kernels = [k for k in OMP_FINE + OMP_COARSE if any(key[0] == SUITE and key[1] == k for key in idx)]
    rts = [rt for rt in runtimes() if any(k[0] == SUITE and k[2] == rt for k in idx)]
    if not kernels or not rts:
        return None
    fig, (left, right) = plt.subplots(2, 1, figsize=(15, 8.5))
    width = 0.8 / len(rts)
    for ri, rt in enumerate(rts):
        info = registry["runtimes"][rt]
        xs = [i + (ri - (len(rts) - 1) / 2) * width for i in range(len(kernels))]
        speedups = [ratio(med(idx, SUITE, k, rt, 1), med(idx, SUITE, k, rt, 2)) or 0 for k in kernels]
        left.bar(xs, speedups, width, color=info["color"], edgecolor="black", label=info["label"])
        ratios = [ratio(med(idx, SUITE, k, rt, 2), better_peer(idx, k, 2)) or 0 for k in kernels]
        right.bar(xs, ratios, width, color=info["color"], edgecolor="black", label=info["label"])
    left.axhline(1, color="black", linewidth=0.8)
    left.axhline(2, color="grey", linestyle="--", linewidth=0.8)
    left.set_ylabel("median 1 thread / median 2 threads")
    left.set_title("2-vs-1 speedup (higher is better; 2 = ideal)", fontsize=9)
    right.axhline(1, color="black", linewidth=0.8)
    right.set_yscale("log")
    right.set_ylabel("median / better of GNU and LLVM")
    right.set_title("2 threads, against the better of GNU and LLVM (lower is better)", fontsize=9)
    for ax in (left, right):
        ax.set_xticks(range(len(kernels)))
        ax.set_xticklabels(kernels, rotation=35, ha="right", fontsize=8)
        ax.grid(axis="y", which="both", alpha=0.3)
    left.legend(fontsize=8)
    fig.tight_layout()
    name = "omp_speedups.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return name


def plot_micro(registry, idx, out_dir):
    kernels = [k for k in OMP_MICRO if any(key[0] == SUITE and key[1] == k for key in idx)]
    rts = [rt for rt in runtimes() if any(k[0] == SUITE and k[2] == rt for k in idx)]
    if not kernels or not rts:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.8))
    width = 0.8 / len(rts)
    for ri, rt in enumerate(rts):
        info = registry["runtimes"][rt]
        xs = [i + (ri - (len(rts) - 1) / 2) * width for i in range(len(kernels))]
        hs = [med(idx, SUITE, k, rt, 2) or 0 for k in kernels]
        ax.bar(xs, hs, width, color=info["color"], edgecolor="black", label=info["label"])
    ax.axhline(OMP_MICRO_NS_MAX, color="red", linestyle="--", linewidth=1,
               label=f"aim: {fmt(OMP_MICRO_NS_MAX)} ns")
    ax.set_xticks(range(len(kernels)))
    ax.set_xticklabels(kernels, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("ns each (median)")
    ax.set_title("OpenMP constructs on 2 threads", fontsize=9)
    ax.grid(axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    name = "omp_constructs.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return name
