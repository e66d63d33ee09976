#!/bin/bash
# Cold searches (each in a fresh process, search_time_s as parsim plan reports it), alternated A B A B ...:
#   bash results/2026-12-03c-amd-epyc/ab_cold.sh A_TREE B_TREE PAIRS MODEL CLUSTER
A=$1; B=$2; PAIRS=$3; MODEL=$4; CLUSTER=$5
for i in $(seq "$PAIRS"); do
  for side in A B; do
    tree=$([ $side = A ] && echo "$A" || echo "$B")
    (cd "$tree" && PYTHONPATH="$tree" python -m parsim.cli plan "$MODEL" --cluster "$CLUSTER" --json 2>/dev/null \
      | python -c "import json,sys; d=json.load(sys.stdin); print('$side', round(d['search_time_s'], 3), d['simulated'])")
  done
done
