"""A published row priced as benchmarks/bench_published.py --quick prices it, and its per-device graph's
kernel time per micro-batch (forward and backward) split by kernel class: what share of the priced
compute is fused attention.  The kernels of each phase and their share are taken as
parsim.cost.kernels.layer_kernels_time_s takes them (PHASES; the layer's tp_share x seq_share); host
dispatch is left out.  Dense rows only (the kernel split reads the graph without expert parallelism).  From the repository root:

    python results/2026-12-03g-amd-epyc/kernel_shares.py ROW_ID
"""
import collections
import sys

from parsim.cost.kernels import PHASES
from parsim.profile.published import figure_setup, figure_tokens, load_all_figures
from parsim.shard.prepare import per_device_graph
from parsim.sim import simulate

figure = {f.id: f for f in load_all_figures("results/published").figures}[sys.argv[1]]
spec, cluster, compute, cfg = figure_setup(figure)       # as parsim.profile.published.price sets a row up
est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
microbatch = max(1, spec.training.global_batch_size // (cfg.dp * cfg.microbatches))
print(f"{figure.id} step {est.step_time_s:.3f} s, predicted {figure_tokens(figure) / est.step_time_s / cluster.world_size:.0f}"
      f" tokens/s/device, measured {figure.measured:g}, micro-batch {microbatch}")

graph = per_device_graph(spec.graph, cfg.tp, cfg.tp_layout or "", cfg.recompute, cp=cfg.cp)
times = compute._kernel_times(microbatch)          # the cost model's own per-kernel memo
by_class = collections.Counter()
for layer in graph.layers:
    for kind in "FB":
        kernels = [k for k in layer.kernels if k.phase in PHASES[kind]]
        for k, t in zip(kernels, times(kernels, layer.tp_share * layer.seq_share)):
            by_class[k.klass] += t
total = sum(by_class.values())
print(f"kernels of one micro-batch through the whole model (every stage; F + B): {total:.3f} s")
for klass, t in by_class.most_common():
    print(f"  {klass:<20} {t:.3f} s  {t / total:.1%}")
