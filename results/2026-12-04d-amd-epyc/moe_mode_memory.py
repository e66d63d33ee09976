"""The Model Zoo's Qwen3-235B-A22B row at 16K tokens on 256 H100 (TP 4, PP 8, VP 4, EP 8, forced
balance) priced under each recompute mode: step, priced peak over the ranks, and one MoE layer's
saved and recomputed bytes per sample and its recomputed part.  The figures docs/moe.md quotes.

    python results/2026-12-04d-amd-epyc/moe_mode_memory.py
"""
from dataclasses import replace

from parsim.model.recompute import recompute_mode
from parsim.profile.published import figure_setup, load_all_figures
from parsim.shard.prepare import per_device_graph
from parsim.sim import simulate

ROW = "modelzoo-qwen3-235b-a22b-h100-256gpu-s16384-cp1-forced"
figure = next(f for f in load_all_figures().figures if f.id == ROW)
spec, cluster, compute, cfg = figure_setup(figure)
print(ROW)
for mode in ("none", "deepseek", "moe", "full"):
    c = replace(cfg, recompute=recompute_mode(mode))
    est = simulate(spec.graph, spec.training, cluster, c, compute, keep_timeline=False)
    g = per_device_graph(spec.graph, c.tp, c.tp_layout, c.recompute, spec.shard, cluster, spec.training,
                         cp=c.cp, ep=c.ep, etp=c.etp)
    layer = next(x for x in g.layers if x.experts is not None)
    part = layer.recompute_part
    print(f"{mode:9s} step {est.step_time_s:.2f} s, peak {max(est.peak_memory_bytes) / 1e9:.1f} GB; "
          f"{layer.name}: saved {layer.saved_bytes / 1e6:.0f} MB, recomputed {layer.recompute_bytes / 1e6:.0f} MB "
          f"a sample; its backward re-runs "
          + ("its whole forward" if layer.recomputes_forward else "nothing" if part is None else
             f"{len(part.kernels)} forward kernels" + (", the all-to-alls too" if layer.recomputes_dispatch else "")))
