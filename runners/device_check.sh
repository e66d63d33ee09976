#!/usr/bin/env bash
# Issue 38's GPU check, prepared as one command for a lent GPU machine (the device tool's `run`,
# which sets OUT and brings back what is written under it): `parsim profile-device` on the GPU at
# hand, then ResNet-50 and a GPT simulated on one device with the measured profile and with the
# shipped one, so the two can be compared.  The machine's own torch runs parsim from this checkout
# (PYTHONPATH): nothing is installed there.
#
#   bash runners/device_check.sh                                  # there: a 6-minute grid, then seconds
#   DEVICE=cpu QUICK=1 OUT=/tmp/check bash runners/device_check.sh  # here: the script itself, in seconds
#
# Settings (environment): DEVICE cuda|cpu (cuda; profile-device refuses npu, not timed yet);
# SHIPPED the shipped profile to compare with (dgx-h200, the lent kind's; local-cpu on the CPU);
# PEAK the datasheet peaks for --peak (H200 SXM: BF16/FP16 989 and FP32 67 TFLOPS dense, NVIDIA's
# H200 datasheet, as H100 SXM's); BUDGET the grid's minutes (6, under the tool's 10-minute command
# limit); QUICK=1 the small grid.  Not yet run on a GPU: the machine's torch (2.11 when last seen)
# is older than the pin, which PYTHONPATH does not check.
# What comes back (at most 8 files): env.txt, profile-device.log, measured.yaml,
# measured.kernels/{gemm,conv,device}.csv, compare.txt.
set -euo pipefail
: "${OUT:?set OUT to the folder to write into (the device tool sets it)}"
DEVICE=${DEVICE:-cuda}
case "$DEVICE" in
    cuda) SHIPPED=${SHIPPED:-dgx-h200}; PEAK=${PEAK:-fp16=989,fp32=67} ;;
    *)    SHIPPED=${SHIPPED:-local-cpu}; PEAK=${PEAK:-} ;;
esac
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
parsim() { python3 -c 'import sys; from parsim.cli import main; sys.exit(main(sys.argv[1:]))' "$@"; }

{
    date -u
    git rev-parse HEAD 2>/dev/null || true
    nvidia-smi -L 2>/dev/null || true
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available() and torch.cuda.get_device_name(0))'
} > "$OUT/env.txt" 2>&1

flags=(--device "$DEVICE" -o "$OUT/measured.yaml" --name "measured-$DEVICE" --budget-minutes "${BUDGET:-6}")
[ -n "$PEAK" ] && flags+=(--peak "$PEAK")
[ "${QUICK:-0}" = 1 ] && flags+=(--quick)
start=$(date +%s)
parsim profile-device "${flags[@]}" 2>&1 | tee "$OUT/profile-device.log"
echo "profile-device took $(( $(date +%s) - start )) s" | tee -a "$OUT/profile-device.log"

# one device each: the measured profile's numbers against the shipped profile's, on two models
# (ResNet-50 at 256 images a micro-batch, its global batch of 32768 in 128; the GPT whole), in one
# process so that each model is built once
python3 - "$OUT/measured.yaml" "$SHIPPED:1x1" > "$OUT/compare.txt" 2>&1 <<'PY'
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
