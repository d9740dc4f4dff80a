"""The suite registry (bench/suites.json) and the suites' own analyses.

A suite may keep an analysis beside its sources, bench/<suite>/analysis.py.
The report loads it by the suite's name and calls, when the module defines
them:

    preamble(registry, idx)          -> Markdown lines for the report's opening
                                        (before any suite; called even without data)
    derived(registry, idx, out_dir)  -> Markdown lines after the suite's kernel tables

A suite without one gets the generic table and plot per kernel only. The data
an analysis needs (which runtimes a section compares, its kernel lists, labels)
sits in the suite's "analysis" entry in suites.json, read with `settings`:

    registry = load_registry("bench/suites.json")
    cfg = settings(registry, "tiny")          # the tiny suite's "analysis" entry
    cfg["runtimes"]["adaptive"]               # ["mote_adaptive", ...]
"""

import importlib.util
import json
import os
import sys

from .paths import ROOT, TOOLS


def load_registry(path):
    with open(path) as f:
        registry = json.load(f)
    # A runtime with "alongside": "<runtime>" and "suites": [...] runs in every
    # job of those suites that lists the other runtime, right after it: a new
    # peer is one entry here, not one edit per job.
    for rt, info in registry["runtimes"].items():
        if "alongside" not in info:
            continue
        for suite in registry["suites"]:
            if suite["name"] not in info.get("suites", []):
                continue
            for job in suite["jobs"]:
                runtimes = job["runtimes"]
                if info["alongside"] in runtimes and rt not in runtimes:
                    runtimes.insert(runtimes.index(info["alongside"]) + 1, rt)
    # A job with "as_kernel" runs kernel "kernel" of its executable and is filed
    # (and drawn) under the other name.
    for suite in registry["suites"]:
        for job in suite["jobs"]:
            if "as_kernel" in job:
                job["kernel_cli"] = job["kernel"]
                job["kernel"] = job["as_kernel"]
    return registry


def settings(registry, suite_name):
    """The "analysis" entry of one suite in the registry ({} when it has none)."""
    suite = next((s for s in registry["suites"] if s["name"] == suite_name), None)
    return (suite or {}).get("analysis", {})


def labels(registry):
    """{runtime: label} over the registry's runtimes."""
    return {k: v["label"] for k, v in registry["runtimes"].items()}


_loaded = {}


def analysis(suite_name):
    """bench/<suite>/analysis.py as a module, or None when the suite has none."""
    if suite_name in _loaded:
        return _loaded[suite_name]
    path = os.path.join(ROOT, "bench", suite_name, "analysis.py")
    module = None
    if os.path.isfile(path):
        # The analyses import this package as `benchreport`.
        if TOOLS not in sys.path:
            sys.path.insert(0, TOOLS)
        spec = importlib.util.spec_from_file_location(f"bench_analysis_{suite_name}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    _loaded[suite_name] = module
    return module
