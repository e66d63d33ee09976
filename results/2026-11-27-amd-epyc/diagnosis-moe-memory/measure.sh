#!/usr/bin/env bash
# Step peaks of set moe-2026-11-27d's model (results/heldout/models/olmoe_small.yaml) with the
# experts split over ep=2 at 1, 2 and 5 micro-batches, and dp=2 without ep at 2, against the
# prediction; run from the repository root: bash results/2026-11-27-amd-epyc/diagnosis-moe-memory/measure.sh
set -e
M=results/heldout/models/olmoe_small.yaml
D=results/2026-11-27-amd-epyc/diagnosis-moe-memory
for cfg in "--dp 2 --microbatches 2:dp2-m2" "--dp 2 --ep 2 --microbatches 1:dp2-ep2-m1" \
           "--dp 2 --ep 2 --microbatches 2:dp2-ep2-m2" "--dp 2 --ep 2 --microbatches 5:dp2-ep2-m5"; do
  flags=${cfg%%:*}; label=${cfg##*:}
  parsim simulate $M --cluster local-cpu:1x2 $flags -o /tmp/$label.plan.json > /dev/null
  parsim run /tmp/$label.plan.json --steps 6 --warmup 3 --out /tmp/$label.run > /dev/null 2>&1
  cp /tmp/$label.run/measured.json $D/$label.measured.json
  python - "$D/$label.measured.json" "$label" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
mib = lambda b: round(b / 2**20, 2)
print(f"{sys.argv[2]:12s} static {mib(d['peak_memory_parts'][0]['static_bytes'])} MiB, step peak measured "
      f"{[mib(p['step_peak_bytes']) for p in d['peak_memory_parts']]} MiB per rank, peak measured "
      f"{[mib(b) for b in d['peak_memory_bytes']]} MiB, predicted {mib(d['predicted']['peak_memory_bytes'])} MiB")
PY
done
