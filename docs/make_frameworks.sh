#!/bin/bash
# Regenerates docs/frameworks.md's worked examples under results/frameworks/ (deterministic: plans
# priced by the analytical model, exports of them, and a published config priced as given).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=.
out=results/frameworks
mkdir -p "$out"
# Megatron-LM: a GPT (fused attention, bf16, Adam) on 8 H100s, tp 2 with sequence parallelism, pp 2, ZeRO-1
cat > "$out/gpt_tiny_sdpa.yaml" <<'YAML'
schema_version: 1
name: gpt-tiny-sdpa
model: gpt
args: {preset: gpt-tiny, dropout: 0.0, attention: sdpa}
training: {global_batch_size: 16, dtype: bf16, optimizer: adam}
YAML
parsim simulate "$out/gpt_tiny_sdpa.yaml" --cluster dgx-h100:1x8 --dp 2 --pp 2 --tp 2 --tp-layout megatron-sp \
    --microbatches 4 --zero 1 --recompute selective --placement dp-inner -o "$out/gpt_plan.json" > /dev/null
parsim export "$out/gpt_plan.json" --to megatron -o "$out/gpt_plan.megatron.args"
# the priced configs' files open with their command (`$ `), which tests/test_quoted_outputs.py runs again
quoted() {   # quoted FILE ARGS...: `$ parsim ARGS` and what it prints, into FILE
  local file=$1; shift
  { echo "\$ parsim $*"; parsim "$@"; } > "$file"
}
quoted "$out/gpt_plan.megatron.simulate.txt" simulate --from megatron "$out/gpt_plan.megatron.args" --cluster dgx-h100:1x8
# torchtitan: its llama3 debugmodel, DDP 2 x tp 2 x pp 2, full recomputation (read from a TOML, planned, exported)
parsim plan --from torchtitan examples/torchtitan/debugmodel_dp2_tp2_pp2.toml --cluster dgx-h100:1x8 --top 5 \
    --schedule 1f1b --zero 0 \
    -o "$out/llama_debug_plan.json" > "$out/llama_debug.plan.txt"
parsim export "$out/llama_debug_plan.json" --to torchtitan -o "$out/llama_debug_plan.torchtitan.toml"
# DeepSpeed: parsim's small GPT on two local CPU nodes, dp 2 x pp 2, ZeRO-1, its buckets after the backward
# (as DeepSpeed's pipeline engine reduces them)
parsim simulate examples/gpt_tiny_local.yaml --cluster local-cpu:2x2 --dp 2 --pp 2 --split 0,3,6 --microbatches 2 \
    --zero 1 --placement dp-inner --no-overlap-grad-reduce -o "$out/gpt_tiny_plan.json" > /dev/null
parsim export "$out/gpt_tiny_plan.json" --to deepspeed -o "$out/gpt_tiny_plan.deepspeed.json"
# MindSpore: the seeds' data-parallel ResNet-50 at 32 px on 2 CPU workers, and the seeds' MLP strategies
parsim simulate examples/resnet50_cifar10_local.yaml --cluster local-cpu:1x2 --dp 2 -o "$out/rn50_dp2_plan.json" > /dev/null
parsim export "$out/rn50_dp2_plan.json" --to mindspore -o "$out/rn50_dp2_plan.mindspore.py"
parsim simulate examples/mlp_semi_auto.yaml --cluster local-cpu:2x2 --dp 2 --microbatches 2 -o "$out/mlp_tp2_plan.json" > /dev/null
parsim export "$out/mlp_tp2_plan.json" --to mindspore -o "$out/mlp_tp2_plan.mindspore.py"
# a published config priced as given: torchtitan's llama3_8b.toml (commit 9dec370) with the benchmark's local batch 2
quoted "$out/torchtitan_llama3_8b_h100x8.simulate.txt" simulate --from torchtitan examples/torchtitan/llama3_8b.toml \
    --set training.batch_size=2 --cluster dgx-h100:1x8
