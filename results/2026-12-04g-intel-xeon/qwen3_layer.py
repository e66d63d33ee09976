"""One MoE layer of Qwen3-30B-A3B as parsim prices it on the three public H100 rows of that model:
AutoModel's (held out, one node, ep 8, bf16, full recompute, micro-batches of 4 x 4,096 tokens;
priced 30.5% slow) and Megatron-Bridge's two (development, two nodes, ep 8 and 16, FP8, 4,096-token
micro-batches; priced 15.5% and 31.8% fast).  Per micro-batch: its forward (F), input-gradient (I)
and weight-gradient (W) kernels by class (GEMMs, attention, memory-bound), and the costliest
memory-bound ones.  A diagnosis: the same model on the same GPU, priced in the opposite order to
the one measured; nothing here changes a price.

    python results/2026-12-04g-intel-xeon/qwen3_layer.py
"""
import collections

from parsim.cost.compute import engines
from parsim.cost.kernels import kernel_time_s
from parsim.hardware.numerics import MathMode
from parsim.profile.published import figure_setup, load_all_figures
from parsim.shard.prepare import per_device_graph

ROWS = ("amp-qwen3-30b-a3b-h100-8gpu", "mbridge2509-qwen3-30b-a3b-h100-16gpu-tokendrop",
        "mbridge2606-qwen3-30b-a3b-h100-16gpu")
figures = {f.id: f for f in load_all_figures().figures}
for row in ROWS:
    spec, cluster, compute, cfg = figure_setup(figures[row])
    g = per_device_graph(spec.graph, cfg.tp, cfg.tp_layout, cfg.recompute, spec.shard, cluster, spec.training,
                         cp=cfg.cp, ep=cfg.ep, etp=cfg.etp)
    layer = next(x for x in g.layers if x.experts is not None)
    b = cfg.microbatch_size(spec.training.global_batch_size)
    eng = engines(cluster.device, MathMode(spec.training.dtype, fp8=spec.training.fp8))
    share = layer.tp_share * layer.seq_share
    by_class, count, mem = collections.Counter(), collections.Counter(), []
    for k in layer.kernels:
        t = kernel_time_s(k, b, cluster.device, eng, share)
        c = "GEMM" if k.gemm else ("attention" if "attention" in k.op else "memory-bound")
        by_class[(k.phase, c)] += t
        count[(k.phase, c)] += 1
        if c == "memory-bound":
            mem.append((t, f"{k.phase} {k.op}"))
    again = ", its forward again in the backward on top" if cfg.recompute == "full" else ""
    print(f"{row}: {layer.name}, micro-batches of {b} sequences of 4,096 tokens, ep {cfg.ep}, recompute "
          f"{cfg.recompute}, fp8 {spec.training.fp8}; all kernels {sum(by_class.values()) * 1e3:.2f} ms a micro-batch{again}")
    for c in ("GEMM", "attention", "memory-bound"):
        parts = [f"{p} {by_class[(p, c)] * 1e3:.2f} ms ({count[(p, c)]})" for p in "FIW" if count[(p, c)]]
        total = sum(by_class[(p, c)] for p in "FIW")
        print(f"  {c:12s} {total * 1e3:6.2f} ms: " + ", ".join(parts))
    mem.sort(reverse=True)
    print("  costliest memory-bound: " + ", ".join(f"{name} {t * 1e3:.3f} ms" for t, name in mem[:8]))
