#!/usr/bin/env bash
# The seeds' run_pipeline.sh, for parsim: the 2-stage ResNet-50 pipeline (head..layer2 | layer3..fc)
# on one 8-device node.  The seeds start one process per device by hand; torchrun does that here.
#   bash runners/run_pipeline.sh [DATA_PATH] [Ascend|GPU|CPU]
set -euo pipefail
DATA_PATH=${1:-}
TARGET=${2:-CPU}
OUT=runs/pipeline
mkdir -p "$OUT"
case "$TARGET" in
  Ascend) CLUSTER=ascend910:1x8; NPROC=8 ;;
  GPU)    CLUSTER=dgx-a100:1x8;  NPROC=8 ;;
  CPU)    CLUSTER=local-cpu;     NPROC=2 ;;
  *) echo "run_pipeline.sh: target must be Ascend, GPU or CPU" >&2; exit 2 ;;
esac
DP=$((NPROC / 2))
parsim simulate examples/resnet50_cifar10_seeds_split.yaml --cluster "$CLUSTER" --dp "$DP" --pp 2 \
  --split manual -o "$OUT/plan.json"
torchrun --standalone --nproc-per-node "$NPROC" -m parsim.run "$OUT/plan.json" --out "$OUT" \
  ${DATA_PATH:+--data "$DATA_PATH"} && echo "training success" || { echo "training failed"; exit 2; }
