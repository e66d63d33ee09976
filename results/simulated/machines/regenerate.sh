#!/usr/bin/env bash
# The planning examples of docs/machines.md: each new machine's plan, the H100 plan of the same model
# on as many devices, and each pick simulated on the other machine (why the layout changed).
# Run from the repository root: bash results/simulated/machines/regenerate.sh
# Deterministic (the cost model and the shipped profiles); the search's wall time is cut from the
# header line.
set -euo pipefail
out=results/simulated/machines
run() {   # run FILE COMMAND...: the command's output, after a header naming it
  local file=$1; shift
  { echo "# $(date -u +%F), parsim $(git rev-parse --short HEAD): regenerate with bash $out/regenerate.sh"
    echo "\$ $*"
    "$@" 2>&1 | sed -E 's/, simulated ([0-9]+) in [0-9.]+ s/, simulated \1/'; } > "$out/$file"
}
# Llama 3 70B on 64 Atlas 800T A2 servers (512 Ascend 910B), and on 64 DGX H100
run llama3_70b_atlas-800t-a2_64x8.txt parsim plan examples/llama3_70b.yaml --cluster atlas-800t-a2:64x8
run llama3_70b_dgx-h100_64x8.txt parsim plan examples/llama3_70b.yaml --cluster dgx-h100:64x8
run llama3_70b_h100-pick_on_atlas-800t-a2.txt parsim simulate examples/llama3_70b.yaml --cluster atlas-800t-a2:64x8 \
    --dp 32 --tp 8 --tp-layout megatron-sp --tp-comm-overlap --pp 2 --zero 1 --microbatches 16 --schedule interleaved \
    --chunks 7 --recompute none --placement dp-inner
# DeepSeek-V3 on one CloudMatrix384 (768 Ascend 910C dies), and on 96 DGX H100
run deepseek_v3_cloudmatrix384.txt parsim plan examples/deepseek_v3.yaml --cluster cloudmatrix384:48x16
run deepseek_v3_dgx-h100_96x8.txt parsim plan examples/deepseek_v3.yaml --cluster dgx-h100:96x8
# Llama 3 405B on 8 GB200 NVL72 racks (576 GPUs), and on 72 DGX H100
run llama3_405b_gb200-nvl72_144x4.txt parsim plan examples/llama3_405b.yaml --cluster gb200-nvl72:144x4
run llama3_405b_dgx-h100_72x8.txt parsim plan examples/llama3_405b.yaml --cluster dgx-h100:72x8
# why the layouts changed: each H100 pick simulated on the new machine, and the NVL72 plan kept to one tray
run deepseek_v3_h100-pick_on_cloudmatrix384.txt parsim simulate examples/deepseek_v3.yaml --cluster cloudmatrix384:48x16 \
    --dp 48 --pp 16 --ep 8 --microbatches 320 --schedule 1f1b --recompute full --zero 1 --placement dp-inner
run llama3_405b_h100-pick_on_gb200-nvl72.txt parsim simulate examples/llama3_405b.yaml --cluster gb200-nvl72:144x4 \
    --dp 16 --pp 9 --tp 4 --tp-layout megatron-sp --microbatches 128 --recompute full --zero 1 \
    --placement dp-inner --split 0,14,28,42,56,71,85,99,113,128
run llama3_405b_gb200-nvl72_tp4.txt parsim plan examples/llama3_405b.yaml --cluster gb200-nvl72:144x4 --tp 4
