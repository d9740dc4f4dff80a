"""The command line of tools/report.py: run the suites (or reread
results.json) and write the report.

    sys.exit(main(__doc__))    # tools/report.py
"""

import argparse
import json
import os
import sys

from .machine import machine_info
from .markdown import write_report
from .paths import DEFAULT_BIN_DIRS, DEFAULT_OUT, DEFAULT_REGISTRY
from .runner import make_traces, run_all
from .suites import load_registry


def main(description=None):
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: one round, few repetitions")
    ap.add_argument("--rounds", type=int, default=0, help="rounds (default 3; 1 with --quick)")
    ap.add_argument("--registry", default=DEFAULT_REGISTRY)
    ap.add_argument("--bin-dir", action="append", default=None,
                    help="where the bench_* executables are (repeatable; default: build/bench/bench/bin "
                         "and build/bench-llvmomp/bin)")
    ap.add_argument("--out-dir", default=None, help="default bench/results (the mpi suite: bench/results/mpi)")
    ap.add_argument("--suite", action="append", default=None, help="run only this suite (repeatable)")
    ap.add_argument("--timeout", type=int, default=180, help="seconds before one process is killed")
    ap.add_argument("--max-minutes", type=float, default=30.0,
                    help="start no round that would end the run after this many minutes (default 30)")
    ap.add_argument("--from-json", action="store_true", help="only redraw the report from results.json")
    args = ap.parse_args()

    if args.suite == ["mpi"]:
        return run_mpi_suite(args)
    if args.suite and "mpi" in args.suite:
        print("the mpi suite runs alone (--suite mpi): it writes its own report", file=sys.stderr)
        return 2
    args.out_dir = args.out_dir or DEFAULT_OUT
    registry = load_registry(args.registry)
    os.makedirs(args.out_dir, exist_ok=True)
    results_path = os.path.join(args.out_dir, "results.json")

    if args.from_json:
        with open(results_path) as f:
            data = json.load(f)
    else:
        bin_dirs = [os.path.abspath(d) for d in (args.bin_dir or DEFAULT_BIN_DIRS)]
        machine = machine_info()
        data = run_all(registry, args, bin_dirs)
        try:
            machine["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
        except OSError:
            pass
        data = {"machine": machine, "quick": args.quick, "bin_dirs": bin_dirs, **data}
        data["traces"] = make_traces(bin_dirs, args.out_dir)
        with open(results_path, "w") as f:
            json.dump(data, f, indent=1)
    write_report(registry, data, args.out_dir)
    print(f"wrote {os.path.join(args.out_dir, 'REPORT.md')}", file=sys.stderr)
    if data["failures"]:
        print(f"{len(data['failures'])} benchmark(s) failed; see REPORT.md", file=sys.stderr)
        return 1
    return 0



def run_mpi_suite(args):
    """The mpi suite (bench/mpi/suite.py): its programs run under mpiexec, with
    layouts of ranks x threads rather than worker counts, so it has its own
    runner and report, written to bench/results/mpi/."""
    import importlib.util
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location("mote_mpi_suite", os.path.join(here, "bench", "mpi", "suite.py"))
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    out_dir = args.out_dir or os.path.join(DEFAULT_OUT, "mpi")
    os.makedirs(out_dir, exist_ok=True)
    bin_dirs = [os.path.abspath(d) for d in (args.bin_dir or DEFAULT_BIN_DIRS)]
    if args.from_json:
        with open(os.path.join(out_dir, "results.json")) as f:
            data = json.load(f)
        suite.write_report(data, out_dir)
        return 1 if data["failures"] else 0
    return suite.run(args, bin_dirs, out_dir, machine_info())
