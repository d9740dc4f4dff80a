"""The streams suite's analysis: the queues between the two cores beside the
one-way line transfer, and the applications' speedups over serial.
"""

from benchreport.stats import fmt, med
from benchreport.suites import settings


# From the suite's "analysis" entry in suites.json (set by configure):
STREAMS_QUEUES = []       # the queue variants, in table order
STREAMS_THROUGHPUT = []   # the queue throughput kernels
STREAMS_APPS = []         # the applications
STREAMS_APP_RTS = []      # the runtimes the applications compare


def configure(registry):
    """Reads the kernel and runtime lists of the suite's "analysis" entry."""
    global STREAMS_QUEUES, STREAMS_THROUGHPUT, STREAMS_APPS, STREAMS_APP_RTS
    cfg = settings(registry, "streams")
    STREAMS_QUEUES = list(cfg["runtimes"]["queues"])
    STREAMS_APP_RTS = list(cfg["runtimes"]["applications"])
    STREAMS_THROUGHPUT = list(cfg["kernels"]["throughput"])
    STREAMS_APPS = list(cfg["kernels"]["applications"])


def derived(registry, idx, out_dir):
    configure(registry)
    if not any(k[0] == "streams" for k in idx):
        return []
    labels = {k: v["label"] for k, v in registry["runtimes"].items()}
    lines = []
    qrts = [rt for rt in STREAMS_QUEUES if any(k[0] == "streams" and k[2] == rt for k in idx)]
    line_ns = med(idx, "streams", "line", "mote_batch", 2)
    if qrts:
        lines += ["### Queues between the two cores", "",
                  "Medians. Throughput in M items/s (higher is better), latency in ns one way (lower is "
                  "better); `lat / line` divides each latency by the line transfer (`line_ns`) measured in the "
                  "same process just before it. One-way cache-line transfer in this run: "
                  f"**{fmt(line_ns)} ns** (kernel `line`).", "",
                  "| queue | " + " | ".join(STREAMS_THROUGHPUT) + " | latency_8 | lat / line | latency_8_flush |",
                  "|" + "---|" * (len(STREAMS_THROUGHPUT) + 4)]
        for rt in qrts:
            cells = [fmt(med(idx, "streams", k, rt, 2)) if med(idx, "streams", k, rt, 2) else "n/a"
                     for k in STREAMS_THROUGHPUT]
            lat = med(idx, "streams", "latency_8", rt, 2)
            rec = idx.get(("streams", "latency_8", rt, 2))
            ln = rec.get("extra", {}).get("line_ns") if rec else None
            ratio = fmt(lat / ln) if lat and ln else "n/a"
            latf = med(idx, "streams", "latency_8_flush", rt, 2)
            lines.append(f"| {labels[rt]} | " + " | ".join(cells) +
                         f" | {fmt(lat) if lat else 'n/a'} | {ratio} | {fmt(latf) if latf else 'n/a'} |")
        lines.append("")
    apps = [k for k in STREAMS_APPS if med(idx, "streams", k, "serial", 1)]
    if apps:
        arts = [rt for rt in STREAMS_APP_RTS if any(k[0] == "streams" and k[2] == rt for k in idx)]
        lines += ["### Applications: speedup over serial, 2 workers", "",
                  "Serial median / runtime median (1 worker in brackets). `in-process serial` divides by the "
                  "serial run that each mote and oneTBB process makes first (the same stage code, to check "
                  "the checksums), which this compiler sometimes builds faster than the serial executable's.",
                  "",
                  "| kernel | serial ms | " + " | ".join(labels[rt] for rt in arts) +
                  " | mote, in-process serial | oneTBB, in-process serial |",
                  "|" + "---|" * (len(arts) + 4)]
        for k in apps:
            base = med(idx, "streams", k, "serial", 1)
            best = max((base / med(idx, "streams", k, rt, 2) for rt in arts if med(idx, "streams", k, rt, 2)),
                       default=0)
            cells = []
            for rt in arts:
                m2, m1 = med(idx, "streams", k, rt, 2), med(idx, "streams", k, rt, 1)
                if not m2:
                    cells.append("n/a")
                    continue
                s2 = base / m2
                cell = f"**{s2:.2f}x**" if s2 == best else f"{s2:.2f}x"
                cells.append(cell + (f" ({base / m1:.2f}x)" if m1 else ""))
            own = []
            for rt in ("mote", "onetbb"):
                rec = idx.get(("streams", k, rt, 2))
                chk = rec.get("extra", {}).get("serial_check_ms") if rec else None
                m2 = med(idx, "streams", k, rt, 2)
                own.append(f"{chk / m2:.2f}x" if chk and m2 else "n/a")
            lines.append(f"| {k} | {fmt(base)} | " + " | ".join(cells) + " | " + " | ".join(own) + " |")
        lines.append("")
    return lines
