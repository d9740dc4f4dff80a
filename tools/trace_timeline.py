#!/usr/bin/python3
"""Draw a mote trace (MOTE_TRACE=file.json, Chrome trace-event JSON) as a timeline.

    tools/trace_timeline.py trace.json timeline.png [--title T] [--max-ms X]
    tools/trace_timeline.py --check trace.json

One row per thread (workers first); tasks are coloured bars, nested tasks drawn
thinner inside their parents; waits are hatched (join, group, MPI), parks (idle) grey; steals
are green marks and failed steals small red ticks above the row; mote::mpi's
completions blue diamonds and iwaits purple ticks below it. --max-ms keeps
the first X milliseconds. --check validates the file (valid JSON, required
fields, non-negative durations, spans nested per thread) and prints a summary.
"""

import argparse
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402


def load(path):
    with open(path) as f:
        return json.load(f)


def check_trace(path):
    """Validates a mote trace; returns (ok, messages, summary)."""
    msgs = []
    try:
        d = load(path)
    except (OSError, json.JSONDecodeError) as e:
        return False, [f"not valid JSON: {e}"], {}
    if not isinstance(d, dict) or not isinstance(d.get("traceEvents"), list):
        return False, ["no traceEvents array"], {}
    counts = defaultdict(int)
    spans = defaultdict(list)
    for i, e in enumerate(d["traceEvents"]):
        for key in ("ph", "name", "pid", "tid"):
            if key not in e:
                msgs.append(f"event {i} has no {key}")
        ph = e.get("ph")
        if ph == "M":
            continue
        if "ts" not in e:
            msgs.append(f"event {i} has no ts")
            continue
        if ph == "X":
            if e.get("dur", -1) < 0:
                msgs.append(f"event {i} has a negative or missing dur")
            spans[e["tid"]].append((e["ts"], e.get("dur", 0)))
        counts[(ph, e.get("cat", ""))] += 1
    for tid, lst in spans.items():
        lst.sort(key=lambda x: (x[0], -x[1]))
        ends = []
        for ts, dur in lst:
            while ends and ts >= ends[-1] - 0.003:
                ends.pop()
            if ends and ts + dur > ends[-1] + 0.003:
                msgs.append(f"thread {tid}: span at {ts} us overlaps its enclosing span")
                break
            ends.append(ts + dur)
    summary = {f"{ph}/{cat}": n for (ph, cat), n in sorted(counts.items())}
    summary["otherData"] = d.get("otherData", {})
    return not msgs, msgs, summary


def draw(path, out, title=None, max_ms=None):
    d = load(path)
    events = d["traceEvents"]
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[e["tid"]] = e["args"]["name"]
    tids = sorted({e["tid"] for e in events if e.get("ph") in ("X", "i") and e.get("s") != "g"},
                  key=lambda t: (0 if "worker" in names.get(t, "") else 1, t))
    row = {t: i for i, t in enumerate(tids)}
    t0 = min((e["ts"] for e in events if "ts" in e and e.get("ph") != "M"), default=0.0)
    limit = None if max_ms is None else t0 + max_ms * 1000.0

    def ms(ts):
        return (ts - t0) / 1000.0

    bars = defaultdict(list)  # (kind, depth) -> [(row, start, width)]
    marks = defaultdict(list)  # kind -> [(x, row)]
    depth_of = defaultdict(list)
    xs = [e for e in events if e.get("ph") == "X" and e["tid"] in row]
    xs.sort(key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    for e in xs:
        if limit is not None and e["ts"] > limit:
            continue
        stack = depth_of[e["tid"]]
        while stack and e["ts"] >= stack[-1] - 0.003:
            stack.pop()
        depth = len(stack)
        stack.append(e["ts"] + e["dur"])
        cat = e.get("cat", "")
        kind = {"task": "task", "idle": "park", "wait": "wait"}.get(cat, "other")
        bars[(kind, min(depth, 3))].append((row[e["tid"]], ms(e["ts"]), max(e["dur"] / 1000.0, 1e-4)))
    for e in events:
        if e.get("ph") != "i" or e.get("tid") not in row or e.get("s") == "g":
            continue
        if limit is not None and e["ts"] > limit:
            continue
        if e.get("cat") == "steal":
            marks["steal" if e["name"] == "steal" else "failed"].append((ms(e["ts"]), row[e["tid"]]))
        elif e.get("cat") == "mpi":
            # mote::mpi: a poll that found requests complete, an iwait that bound some.
            marks["mpi_done" if e["name"] == "mpi done" else "mpi_iwait"].append((ms(e["ts"]), row[e["tid"]]))

    fig, ax = plt.subplots(figsize=(11, 1.6 + 0.7 * max(1, len(tids))))
    colors = {"task": ["#d62728", "#ff7f0e", "#e6a43a", "#f2cf80"], "park": ["#b0b0b0"] * 4,
              "wait": ["#9ecae1"] * 4, "other": ["#7f7f7f"] * 4}
    for (kind, depth), items in sorted(bars.items()):
        height = 0.7 * (0.85 ** depth)
        by_row = defaultdict(list)
        for r, start, width in items:
            by_row[r].append((start, width))
        for r, segs in by_row.items():
            ax.broken_barh(segs, (r - height / 2, height), facecolors=colors[kind][depth],
                           hatch="//" if kind == "wait" else None, linewidth=0)
    if marks["steal"]:
        x, y = zip(*marks["steal"])
        ax.scatter(x, [v + 0.42 for v in y], marker="v", s=14, color="#2ca02c", zorder=3)
    if marks["failed"]:
        x, y = zip(*marks["failed"])
        ax.scatter(x, [v + 0.45 for v in y], marker="|", s=8, color="#d62728", alpha=0.35, zorder=2)
    if marks["mpi_done"]:
        x, y = zip(*marks["mpi_done"])
        ax.scatter(x, [v - 0.42 for v in y], marker="D", s=10, color="#1f77b4", zorder=3)
    if marks["mpi_iwait"]:
        x, y = zip(*marks["mpi_iwait"])
        ax.scatter(x, [v - 0.45 for v in y], marker="|", s=10, color="#9467bd", alpha=0.6, zorder=2)
    ax.set_yticks(range(len(tids)))
    ax.set_yticklabels([names.get(t, f"tid {t}") for t in tids])
    ax.invert_yaxis()
    ax.set_xlabel("ms since the first event")
    other = d.get("otherData", {})
    lost = other.get("events_lost", 0)
    ax.set_title((title or path) + (f"  ({lost} events lost to wrapping)" if lost else ""), fontsize=9)
    ax.legend(handles=[Patch(color=colors["task"][0], label="task"),
                       Patch(color=colors["task"][1], label="nested task"),
                       Patch(facecolor=colors["wait"][0], hatch="//", label="waiting (join/group)"),
                       Patch(color=colors["park"][0], label="parked (idle)"),
                       Line2D([], [], marker="v", color="#2ca02c", linestyle="", label="steal"),
                       Line2D([], [], marker="|", color="#d62728", linestyle="", label="failed steal")]
              + ([Line2D([], [], marker="D", color="#1f77b4", linestyle="", label="MPI completions"),
                  Line2D([], [], marker="|", color="#9467bd", linestyle="", label="MPI iwait")]
                 if marks["mpi_done"] or marks["mpi_iwait"] else []),
              fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=8, frameon=False)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--title")
    ap.add_argument("--max-ms", type=float)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if a.check:
        ok, msgs, summary = check_trace(a.trace)
        for m in msgs[:20]:
            print(m)
        print(json.dumps(summary, indent=1))
        return 0 if ok else 1
    if not a.out:
        ap.error("give an output PNG (or --check)")
    draw(a.trace, a.out, a.title, a.max_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
