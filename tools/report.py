#!/usr/bin/python3
"""Run mote's benchmark suites side by side and write the report.

Reads the suite registry (bench/suites.json), runs every benchmark executable
it names, interleaved round by round (for each round, every job once, in an
order rotated each round) so that all runtimes share the same noise, and
writes into bench/results/:

  results.json   every sample, the machine, tool versions, failures
  REPORT.md      machine, issue targets beside our figures, one table per
                 kernel, the plots
  *.png          bar plots (median, whiskers min..max)

Adding a suite is one entry in bench/suites.json (plus its executables in
bench/CMakeLists.txt). Suite-specific derived tables (e.g. the per-spawn cost
derived from fib) live beside the suite, in bench/<suite>/analysis.py; the
runner, statistics, plots and report writer are the package tools/benchreport/.

  tools/report.py                 full run (about 7 minutes on 2 cores)
  tools/report.py --quick         smoke run: one round, few repetitions
  tools/report.py --from-json     redraw REPORT.md and plots from results.json

Exits nonzero when a benchmark failed or computed a wrong answer (the report
is still written, with the failures listed).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchreport.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(__doc__))
