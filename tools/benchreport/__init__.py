"""The benchmark report as a package: tools/report.py is its command line.

  paths.py     where the registry, executables and results live
  suites.py    the registry (bench/suites.json) and each suite's analysis
               (bench/<suite>/analysis.py), loaded by suite name
  runner.py    the job plan and the interleaved run
  machine.py   what the report says about the machine
  stats.py     medians, quantiles, the record index, number formatting
  plots.py     the generic per-kernel plot
  markdown.py  REPORT.md

    from benchreport.stats import med, fmt   # in a suite's analysis.py
"""
