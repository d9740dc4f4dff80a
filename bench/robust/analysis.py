"""The robust suite's analysis: each scenario (oversubscription, two processes, a
busy core) against the same runtime's quiet run, and what statistics and
tracing cost mote.
"""

from benchreport.stats import fmt, med
from benchreport.suites import settings


# From the suite's "analysis" entry in suites.json (set by configure):
ROBUST_KERNELS = []     # the kernels every scenario runs
ROBUST_SCENARIOS = []   # [(scenario, workers)]
ROBUST_AIM = 1.5   # 8 workers on 2 cores within 1.5x of 2 workers


def configure(registry):
    """Reads the kernel and scenario lists of the suite's "analysis" entry."""
    global ROBUST_KERNELS, ROBUST_SCENARIOS
    cfg = settings(registry, "robust")
    ROBUST_KERNELS = list(cfg["kernels"])
    ROBUST_SCENARIOS = [(sc, w) for sc, w in cfg["scenarios"]]


def derived(registry, idx, out_dir):
    configure(registry)
    labels = {k: v["label"] for k, v in registry["runtimes"].items()}
    rts = [rt for rt in registry["runtimes"] if any(k[0] == "robust" and k[2] == rt for k in idx)]
    if not rts:
        return []
    lines = ["### Each scenario against the same runtime's quiet 2-worker time", "",
             "Median time of the scenario / median time of the quiet 2-worker run of the same "
             "runtime and kernel (1.0 = unaffected; two_processes and busy_core share the two cores "
             "with another program, so about 2x is the fair share).", ""]
    for kernel in ROBUST_KERNELS:
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
    for kernel in ROBUST_KERNELS:
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
