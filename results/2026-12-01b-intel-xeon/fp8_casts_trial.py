"""A trial not kept: Transformer Engine's cast kernels priced on every FP8 Linear.

TE (transformer_engine/pytorch/module/linear.py, _Linear.forward and backward, 2023-24) casts each
FP8 Linear's input with fp8_cast_transpose_fused before its forward GEMM (reads bf16, writes the FP8
tensor and its transpose: 4 bytes an element) and its output gradient the same way before the data
gradient GEMM; parsim.model.fp8 leaves both out.  Here both are added as memory-bound kernels of
4 bytes an element of the GEMM's activation operand (M x K), on every FP8 Linear, and every row with
FP8 GEMMs is priced with the shipped profiles, with and without them.  Megatron-Core's
TELayerNormColumnParallelLinear fuses the cast of the QKV and FC1 inputs into the norm, which this
trial does not know (it charges them whole).  Run from the repository root:
python results/2026-12-01b-intel-xeon/fp8_casts_trial.py"""
from dataclasses import replace

import parsim.model.fp8 as fp8
import parsim.profile.published as published
from parsim.model.graph import Kernel
from parsim.profile.published import load_all_figures, price

CAST_BYTES = 4                     # read bf16 (2), write FP8 (1) and its transpose (1)
shipped = fp8.fp8_layer


def with_casts(layer, extraction_batch, width):
    out = shipped(layer, extraction_batch, width)
    kernels = []
    for k in out.kernels:
        if k.klass == fp8.FP8_KLASS and k.phase in ("F", "I"):
            (m0, m1), _, (k0, _), _ = k.gemm
            kernels.append(Kernel(k.phase, "fp8_cast_transpose", "mem", bytes=(CAST_BYTES * m0 * k0, CAST_BYTES * m1 * k0)))
        kernels.append(k)
    return replace(out, kernels=tuple(kernels))


rows = [f for f in load_all_figures().figures if dict(dict(f.model).get("training", {})).get("fp8")]
before = {f.id: price(f).error for f in rows}
fp8.fp8_layer = with_casts
published._spec.cache_clear()          # each row's model is extracted (and made FP8) once per process
after = {f.id: price(f).error for f in rows}
fp8.fp8_layer = shipped
for f in rows:
    print(f"{f.id:48s} {f.source:26s} as shipped {100 * before[f.id]:+6.1f}%   with the casts {100 * after[f.id]:+6.1f}%"
          f"{'  (excluded)' if f.excluded else ''}")
