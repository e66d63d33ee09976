"""A Llama 2 7B decoder block at 4,096 tokens (examples/llama2_7b/config.json, bf16), as transformers
writes it and with args.fused_ops: true (parsim.model.fused_ops), in bf16 and in FP8 as NeMo's row
runs it: its kernels, memory-bound bytes and saved bytes a sequence, and its forward and backward
kernels priced on dgx-h100 (the shipped profile) at one sequence, by kind (the breakdown that found
the eager RMSNorm, rope and SwiGLU in NeMo's Llama 2 7B row).

    python results/2026-12-02h-amd-epyc/llama2_7b_block.py
"""

import collections
import os
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)

from parsim.cost.compute import AnalyticalCompute  # noqa: E402
from parsim.cost.kernels import kernel_time_s  # noqa: E402
from parsim.hardware import load_cluster  # noqa: E402
from parsim.model.spec import load_model  # noqa: E402

CONFIG = os.path.abspath(os.path.join(ROOT, "examples", "llama2_7b", "config.json"))
for fp8, fused in ((False, False), (False, True), (True, False), (True, True)):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(f"schema_version: 1\nname: llama2-7b\nhf: {CONFIG}\nargs: {{seq_len: 4096, fused_ops: {str(fused).lower()}}}\n"
                f"training: {{global_batch_size: 128, dtype: bf16, fp8: {str(fp8).lower()}, optimizer: adam}}\n")
    spec = load_model(f.name)
    layer = spec.graph.layers[1]
    device = load_cluster("dgx-h100:1x1").device
    compute = AnalyticalCompute.for_training(device, spec.training)
    by_kind = collections.Counter()
    for k in layer.kernels:
        by_kind["gemm" if k.klass == "matmul" else k.klass if k.klass != "mem" else "memory-bound"] += \
            kernel_time_s(k, 1, device, compute.engines)
    total = sum(by_kind.values())
    print(f"{'fp8' if fp8 else 'bf16'}, fused_ops: {str(fused).lower()}: {len(layer.kernels)} kernels; memory-bound bytes a sequence "
          f"{layer.fwd_mem_bytes / 1e9:.2f} GB forward, {layer.bwd_mem_bytes / 1e9:.2f} GB backward; saved "
          f"{layer.saved_bytes / 1e6:.0f} MB; its kernels on dgx-h100 at one sequence {total * 1e3:.2f} ms: "
          + ", ".join(f"{kind} {t * 1e3:.2f} ms ({t / total:.0%})" for kind, t in by_kind.most_common()))
    os.unlink(f.name)
