#!/bin/bash
# Cold searches (benchmarks/bench_planner.py --one: a fresh interpreter each), A = a worktree of the base commit
# (PYTHONPATH=$A), B = this tree, alternated A B A B ... for each goal search given; run alone on the host.
#   bash results/2026-12-02f-amd-epyc/ab.sh /tmp/base PAIRS MODEL CLUSTER [MODEL CLUSTER ...]
A=$1; PAIRS=$2; shift 2
B=$(cd "$(dirname "$0")/../.." && pwd)
while [ $# -ge 2 ]; do
  echo "# $1 $2"
  for _ in $(seq "$PAIRS"); do
    for side in A B; do
      tree=$A; [ $side = B ] && tree=$B
      echo "$side $(cd "$tree" && PYTHONPATH=$tree python benchmarks/bench_planner.py --one "$1" "$2" | tail -1)"
    done
  done
  shift 2
done
