#!/usr/bin/env bash
# The GPU check, prepared as one command for a lent GPU machine (the device tool's `run`, which sets
# OUT and brings back what is written under it), in the order of what it is worth:
#   1. runs: each model of MODELS planned on one device of the shipped profile, then trained by
#      parsim's executor for STEPS steps; the prediction beside the measured step time and peak
#      memory (the executor times a step from an idle GPU to an idle GPU: parsim.exec.groups.synchronize);
#      then the model profiled at the run's micro-batch size and the same plan priced by the profiled
#      model (a PROFILED line: on the H200, 2026-12-04, it came within 4% and 11% where the analytical
#      model was 6% and 34% off, results/2026-12-04e-amd-epyc/h200/rerun); then a BANDS section: each
#      run's measured step against the analytical and the profiled model's 90% bands, and how many held;
#   2. attention's batched GEMMs timed by head dimension, aligned to 8 elements or not
#      (runners/gemm_alignment.py), and fused attention timed by sequence length, causal or not, on
#      each backend (runners/attention_seq.py), both into compare.txt: seconds, so before step 3;
#   3. `parsim profile-device` on the device at hand (kernel tables and a hardware profile);
#   4. ResNet-50 and a GPT simulated on one device with the measured profile and with the shipped one.
# The machine's own torch runs parsim from this checkout (PYTHONPATH): nothing is installed there.
#
#   bash runners/device_check.sh                                  # there: runs, a 3-minute grid, then seconds
#   DEVICE=cpu QUICK=1 OUT=/tmp/check bash runners/device_check.sh  # here: the script itself, in seconds
#
# Settings (environment): DEVICE cuda|cpu (cuda; profile-device refuses npu, not timed yet);
# SHIPPED the shipped profile to compare with (dgx-h100 on an H100, else dgx-h200; local-cpu on the CPU);
# MODELS the model files to run (runners/gpu_models/*.yaml on a GPU: a 1.3B GPT, Llama 3.2 1B and
# ResNet-50 on ImageNet, bf16; the tiny bf16 GPT on the CPU); STEPS the steps a run (20, 5 of them
# warm-up); PEAK the datasheet peaks for --peak (H200 SXM: BF16/FP16 989 and FP32 67 TFLOPS dense,
# NVIDIA's H200 datasheet, as H100 SXM's); BUDGET the grid's minutes (3, so that the whole check
# stays inside the tool's 10-minute command limit); QUICK=1 the small grid.  The machine's torch
# (2.11 when last seen) is older than the pin, which PYTHONPATH does not check.
# What comes back (at most 8 files): env.txt, runs.txt, profile-device.log, measured.yaml,
# measured.kernels/{gemm,conv,device}.csv, compare.txt.
set -euo pipefail
: "${OUT:?set OUT to the folder to write into (the device tool sets it)}"
DEVICE=${DEVICE:-cuda}
cd "$(dirname "$0")/.."
case "$DEVICE" in
    cuda) case "$(nvidia-smi -L 2>/dev/null)" in *H100*) gpu=dgx-h100 ;; *) gpu=dgx-h200 ;; esac
          SHIPPED=${SHIPPED:-$gpu}; PEAK=${PEAK:-fp16=989,fp32=67}; MODELS=${MODELS:-$(echo runners/gpu_models/*.yaml)} ;;
    *)    SHIPPED=${SHIPPED:-local-cpu}; PEAK=${PEAK:-}; MODELS=${MODELS:-examples/gpt_tiny_local_bf16.yaml} ;;
esac
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
parsim() { python3 -c 'import sys; from parsim.cli import main; sys.exit(main(sys.argv[1:]))' "$@"; }

{
    date -u
    git rev-parse HEAD 2>/dev/null || true
    nvidia-smi -L 2>/dev/null || true
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available() and torch.cuda.get_device_name(0))'
} > "$OUT/env.txt" 2>&1

# 1. runs: a failed run is reported in runs.txt and the check goes on
work=$(mktemp -d)
for model in $MODELS; do
    name=$(basename "$model" .yaml)
    {
        echo "=== $model"
        parsim plan "$model" --cluster "$SHIPPED:1x1" --dp 1 --pp 1 --top 3 -o "$work/$name.json" \
            && parsim run "$work/$name.json" --steps "${STEPS:-20}" --warmup 5 --out "$work/$name" \
            || echo "(rc $?)"
        python3 runners/band_coverage.py --result "$model" "$work/$name/measured.json" "$work/$name.json" || true
        # the profiled model on the same plan: the model profiled at the run's micro-batch size, then priced
        if [ -f "$work/$name/measured.json" ]; then
            read -r b m < <(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["microbatch_size"], d["config"]["microbatches"])' "$work/$name/measured.json")
            parsim profile "$model" --device "$DEVICE" --microbatch-sizes "$b" --nproc 1 --budget 25 --min-rounds 2 \
                    --max-rounds 4 -o "$work/$name.profile.json" > "$work/$name.profile.log" 2>&1 \
                && echo "PROFILED $(parsim simulate "$model" --cluster "$SHIPPED:1x1" --profile "$work/$name.profile.json" \
                        --dp 1 --pp 1 --microbatches "$m" -o "$work/$name.profiled.json" 2>&1 \
                        | grep -E '^step |^step-time band' | tr '\n' ' ')" \
                && python3 runners/band_coverage.py --profiled "$model" "$work/$name.profiled.json" \
                || { echo "(rc $?: profile)"; tail -3 "$work/$name.profile.log"; }
        fi
    } >> "$OUT/runs.txt" 2>&1
done
rm -rf "$work"
# each run's measured step against both models' 90% bands, and how many each held (runners/band_coverage.py)
python3 runners/band_coverage.py "$OUT/runs.txt" >> "$OUT/runs.txt" 2>&1 || echo "(rc $?: band_coverage)" >> "$OUT/runs.txt"

# 2. attention's two batched GEMMs by head dimension, aligned to 8 elements or not (runners/gemm_alignment.py:
# the alignment term parsim's kernel model lacks, results/2026-12-05d-intel-xeon/bloom-alignment.txt), into
# compare.txt; then fused attention by sequence length (runners/attention_seq.py: does the one rate parsim
# prices it at hold from 2K to 64K tokens, causal or not?)
if [ "$DEVICE" = cuda ]; then
    for dtype in bf16 fp16; do
        python3 runners/gemm_alignment.py --device cuda --dtype "$dtype" || echo "(rc $?: gemm_alignment)"
    done >> "$OUT/compare.txt" 2>&1
    { python3 runners/attention_seq.py --device cuda || echo "(rc $?: attention_seq)"; } >> "$OUT/compare.txt" 2>&1
else
    { python3 runners/gemm_alignment.py --device cpu --seq 128 --batch 4 --reps 3 || echo "(rc $?: gemm_alignment)"
      python3 runners/attention_seq.py --device cpu --tokens 512 --heads 2 --head-dim 16 --seqs 128,256 --reps 2 \
          || echo "(rc $?: attention_seq)"; } >> "$OUT/compare.txt" 2>&1
fi

# 3. the device's kernel tables
flags=(--device "$DEVICE" -o "$OUT/measured.yaml" --name "measured-$DEVICE" --budget-minutes "${BUDGET:-3}")
[ -n "$PEAK" ] && flags+=(--peak "$PEAK")
[ "${QUICK:-0}" = 1 ] && flags+=(--quick)
start=$(date +%s)
parsim profile-device "${flags[@]}" 2>&1 | tee "$OUT/profile-device.log"
echo "profile-device took $(( $(date +%s) - start )) s" | tee -a "$OUT/profile-device.log"

# 4. one device each: the measured profile's numbers against the shipped profile's, on two models
# (ResNet-50 at 256 images a micro-batch, its global batch of 32768 in 128; the GPT whole), in one
# process so that each model is built once
python3 - "$OUT/measured.yaml" "$SHIPPED:1x1" >> "$OUT/compare.txt" 2>&1 <<'PY'
import sys
from parsim.cli import main
for model, m in (("examples/resnet50_imagenet.yaml", "128"), ("examples/gpt_small_local.yaml", "1")):
    for cluster in sys.argv[1:]:
        argv = ["simulate", model, "--cluster", cluster, "--dp", "1", "--pp", "1", "--microbatches", m]
        print("$ parsim " + " ".join(argv), flush=True)
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
        if code:
            print(f"(rc {code})", flush=True)
PY
echo "wrote $(ls "$OUT" | tr '\n' ' ')"
