"""One MoE layer of MegaScale-MoE's 240-GPU Megatron-LM row (results/published/megascale_moe_figures.yaml)
as parsim prices it, per micro-batch: each phase with and without its tensor-parallel collectives, and
the layer's costliest kernels (GEMM dims are the unsharded ones, priced at the layer's tp share).  The
figures docs/accuracy.md quotes.  No timing.

    python results/2026-12-04d-amd-epyc/megascale_layer.py
"""
import collections

from parsim.cost.compute import engines
from parsim.cost.kernels import kernel_time_s
from parsim.cost.layer import layer_time_s
from parsim.hardware.numerics import MathMode
from parsim.profile.published import figure_setup, load_all_figures
from parsim.shard.prepare import per_device_graph

ROW = "msmoe-t3-megatron-352b-h800-240gpu"
figure = next(f for f in load_all_figures().figures if f.id == ROW)
spec, cluster, compute, cfg = figure_setup(figure)
g = per_device_graph(spec.graph, cfg.tp, cfg.tp_layout, cfg.recompute, spec.shard, cluster, spec.training,
                     cp=cfg.cp, ep=cfg.ep, etp=cfg.etp)
layer = next(x for x in g.layers if x.experts is not None)
b = cfg.microbatch_size(spec.training.global_batch_size)
print(f"{ROW}: {layer.name}, tp share {layer.tp_share}, micro-batch {b}")
for kind in "FB":
    whole, alone = layer_time_s(compute, layer, kind, b, cluster), compute.layer_time_s(layer, kind, b)
    print(f"  {kind}: {whole * 1e3:.2f} ms, of which its kernels {alone * 1e3:.2f} ms and its tensor-parallel "
          f"collectives {(whole - alone) * 1e3:.2f} ms")
eng = engines(cluster.device, MathMode(spec.training.dtype))
times, counts = collections.Counter(), collections.Counter()
for k in layer.kernels:
    key = (k.phase, k.op, tuple(round(x) for x in k.gemm_at(b)) if k.gemm else ())
    times[key] += kernel_time_s(k, b, cluster.device, eng, layer.tp_share * layer.seq_share)
    counts[key] += 1
for key, t in times.most_common(8):
    print(f"  {t * 1e3:.3f} ms x{counts[key]} {key}")
