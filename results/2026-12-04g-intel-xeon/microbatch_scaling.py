"""A diagnosis of the held-out full-recompute misses (docs/accuracy.md, the fifth held-out MoE
source): one MoE layer of XTuner's tp-1 Qwen3-235B-A22B layout on H800 (tp 1, ep 8; the layout of
its rows xtmb-...-tp1-ep8-pp32-vp3-mbs1-moe and -mbs4-full) as parsim prices it, per sequence, at
micro-batches of 1 to 8 under recompute none, moe and full: its forward and backward kernels with
their tensor-parallel collectives (parsim.cost.layer.layer_time_s), all-to-alls apart.  What-ifs of a
held-out row's layout, for information; nothing here changes a price.

    python results/2026-12-04g-intel-xeon/microbatch_scaling.py
"""
from parsim.cost.layer import layer_time_s
from parsim.model.recompute import Recompute
from parsim.profile.published import figure_setup, load_all_figures
from parsim.shard.prepare import per_device_graph

ROW = "xtmb-qwen3-235b-a22b-h800-256gpu-tp1-ep8-pp32-vp3-mbs4-full"
figure = next(f for f in load_all_figures().figures if f.id == ROW)
spec, cluster, compute, cfg = figure_setup(figure)
print(f"{ROW}'s layout, one MoE layer, ms per sequence of 4,096 tokens (forward + backward)")
base, flops = {}, {}
for mode in ("none", "moe", "full"):
    g = per_device_graph(spec.graph, cfg.tp, cfg.tp_layout, Recompute(mode), spec.shard, cluster, spec.training,
                         cp=cfg.cp, ep=cfg.ep, etp=cfg.etp)
    layer = next(x for x in g.layers if x.experts is not None)
    cells = []
    for b in (1, 2, 4, 8):
        per_seq = (layer_time_s(compute, layer, "F", b, cluster) + layer_time_s(compute, layer, "B", b, cluster)) / b
        base.setdefault(mode, per_seq)
        cells.append(f"mbs {b}: {per_seq * 1e3:6.2f} ({per_seq / base[mode] - 1:+5.1%})")
    print(f"  {mode:5s} " + "  ".join(cells))
    # FLOPs per sequence: forward, backward, and what the backward runs again (the recomputed part's
    # forward; under full recompute the whole forward)
    again = layer.fwd_flops if mode == "full" else (layer.recompute_part.fwd_flops if layer.recompute_part else 0.0)
    flops[mode] = layer.fwd_flops + layer.bwd_flops + again
print("  FLOPs per sequence, full over moe: " + f"{flops['full'] / flops['moe']:.3f}")
