#!/usr/bin/env bash
# Several nodes with torchrun's c10d rendezvous.  Run the same command on every node:
#   NNODES=2 NPROC_PER_NODE=8 RDZV_HOST=node0 bash runners/multi_node.sh plan.json [steps]
# The plan must have dp x pp x tp x cp = NNODES x NPROC_PER_NODE (plan.json's parallel section;
# `parsim run` refuses any other number of ranks).  Backend: nccl on CUDA, hccl with torch_npu on
# Ascend (untested here), gloo on CPU.  RDZV_PORT (default 29500) and RDZV_ID (default parsim)
# must be the same on every node.
set -euo pipefail
PLAN=${1:?plan.json}; STEPS=${2:-100}
: "${NNODES:?}" "${NPROC_PER_NODE:?}" "${RDZV_HOST:?}"
torchrun --nnodes "$NNODES" --nproc-per-node "$NPROC_PER_NODE" \
  --rdzv-backend c10d --rdzv-endpoint "$RDZV_HOST:${RDZV_PORT:-29500}" --rdzv-id "${RDZV_ID:-parsim}" \
  -m parsim.run "$PLAN" --steps "$STEPS" --out "${OUT:-runs/multi_node}" ${DATA_PATH:+--data "$DATA_PATH"}
