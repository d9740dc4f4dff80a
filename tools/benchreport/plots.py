"""The generic plot every kernel gets: one bar per runtime and worker count
(median, whiskers min..max). Suite analyses draw their own figures beside it.

    png = plot_kernel(registry, suite, job, idx, out_dir)   # file name, or None
"""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .stats import summary  # noqa: E402


def plot_kernel(registry, suite, job, idx, out_dir):
    rts = [rt for rt in job["runtimes"] if any(k[:3] == (suite["name"], job["kernel"], rt) for k in idx)]
    if not rts:
        return None
    workers = job["workers"]
    width = 0.8 / len(workers)
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for wi, w in enumerate(workers):
        xs, hs, lo, hi, colors = [], [], [], [], []
        for i, rt in enumerate(rts):
            r = idx.get((suite["name"], job["kernel"], rt, w))
            if not r or not r["samples"]:
                continue
            s = summary(r["samples"])
            xs.append(i + (wi - (len(workers) - 1) / 2) * width)
            hs.append(s["median"])
            lo.append(s["median"] - s["min"])
            hi.append(s["max"] - s["median"])
            colors.append(registry["runtimes"][rt]["color"])
        if xs:
            ax.bar(xs, hs, width, yerr=[lo, hi], capsize=3, color=colors, edgecolor="black",
                   alpha=1.0 if wi == len(workers) - 1 else 0.55)
            for x, h in zip(xs, hs):
                ax.annotate(f"{w}w", (x, h), ha="center", va="bottom", fontsize=6)
    ax.set_xticks(range(len(rts)))
    ax.set_xticklabels([registry["runtimes"][rt]["label"] for rt in rts])
    if job.get("log", True):
        ax.set_yscale("log")
    ax.set_ylabel(job.get("unit", ""))
    ax.set_title(f"{suite['name']}: {job['kernel']} (median; whiskers min..max; "
                 f"pale = fewer workers)" if len(workers) > 1 else
                 f"{suite['name']}: {job['kernel']} (median; whiskers min..max)", fontsize=9)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    name = f"{suite['name']}_{job['kernel']}.png"
    fig.savefig(os.path.join(out_dir, name), dpi=110)
    plt.close(fig)
    return name
