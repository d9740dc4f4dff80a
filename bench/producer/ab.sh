#!/bin/bash
# The producer suite's policies alternated on one machine state: work stealing, the mesh under
# each MOTE_MESH_BALANCE, and delegation, 6 times each, per kernel; prints each run's JSON line
# after its configuration, and the load average before and after. A summary of the medians:
#   bench/producer/ab.sh build/release/bench/bin > ab.log   (then read the samples from ab.log)
set -euo pipefail
bin=${1:-build/release/bench/bin}/bench_producer_mote
uptime
for k in task_100ns task_1us; do
  for i in 1 2 3 4 5 6; do
    for cfg in steal mesh:none mesh:redirect mesh:steal mesh:both delegation; do
      s=${cfg%%:*}
      b=${cfg#*:}
      [[ $b == "$cfg" ]] && b=both
      MOTE_SCHEDULER=$s MOTE_MESH_BALANCE=$b "$bin" --workers 2 --reps 5 --warmup 1 --kernel "$k" | sed -e "s/^/$cfg /"
    done
  done
done
uptime
