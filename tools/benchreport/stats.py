"""Statistics over samples, number formatting, and the index of records the
report and the suite analyses read (key: suite, kernel, runtime, workers).

    idx = index(records)
    med(idx, "fork_join", "fib", "mote", 2)    # median of that row, or None
"""

import statistics


def quantile(xs, q):
    s = sorted(xs)
    if not s:
        return float("nan")
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary(xs):
    return {
        "n": len(xs),
        "median": statistics.median(xs),
        "min": min(xs),
        "max": max(xs),
        "p10": quantile(xs, 0.10),
        "p90": quantile(xs, 0.90),
        "q1": quantile(xs, 0.25),
        "q3": quantile(xs, 0.75),
    }


def fmt(v, digits=3):
    if v is None or v != v:
        return "n/a"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.{digits - 1}f}" if a < 10 else f"{v:.1f}"
    return f"{v:.{digits}g}"



def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    if not xs:
        return None
    prod = 1.0
    for x in xs:
        prod *= x
    return prod ** (1.0 / len(xs))



def index(records):
    return {(r["suite"], r["kernel"], r["runtime"], r["workers"]): r for r in records}


def med(idx, *key):
    r = idx.get(tuple(key))
    return statistics.median(r["samples"]) if r and r["samples"] else None



def round_medians(rec):
    """The median of each round's samples of one record (rounds in run order)."""
    if not rec or not rec.get("runs"):
        return []
    n = len(rec["samples"]) // rec["runs"]
    if n == 0 or n * rec["runs"] != len(rec["samples"]):
        return []
    return [statistics.median(rec["samples"][i * n:(i + 1) * n]) for i in range(rec["runs"])]

