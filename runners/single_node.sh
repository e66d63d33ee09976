#!/usr/bin/env bash
# One node, N processes: plan for this machine, then run it.
#   bash runners/single_node.sh examples/resnet50_cifar10_local.yaml local-cpu [steps]
set -euo pipefail
MODEL=${1:?model.yaml}; CLUSTER=${2:-local-cpu}; STEPS=${3:-20}
OUT=${OUT:-runs/single_node}
mkdir -p "$OUT"
parsim plan "$MODEL" --cluster "$CLUSTER" -o "$OUT/plan.json"
parsim run "$OUT/plan.json" --steps "$STEPS" --out "$OUT"
