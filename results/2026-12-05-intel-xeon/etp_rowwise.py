"""A suspect behind the held-out rows with experts split over tp priced fast (etp-bias.txt), sized:
parsim prices every kernel of a tensor-parallel layer at 1/tp of its work (Layer.tp_share), while
under etp = tp Megatron's alltoall dispatcher gathers the permuted rows over the tp group before the
experts, then sorts them by local expert (Permutation 2, moe_sort_chunks: a rank holding several
experts), and unsorts them before the reduce-scatter: megatron/core/transformer/moe/token_dispatcher.py
at 3b85d982d5 (2025-04-11, the Parallel Folding paper's month), MoEAlltoAllTokenDispatcher, the tp
gather at L530 before the sort at L566, the unsort at L615 before the reduce-scatter at L628.  So the
sorts run on the tp group's rows, tp times what parsim prices.  For each held-out row with etp = tp > 1 and ep > 1: the
step, and what the sorts would add at their whole work (tp x the priced share), per micro-batch over
the busiest stage's MoE layers, forward and backward (a full recompute's forward again).  A what-if
of a held-out row's layout, for information; nothing here changes a price.

    python results/2026-12-05-intel-xeon/etp_rowwise.py
"""
from parsim.cost.kernels import kernel_time_s
from parsim.profile.published import figure_setup, load_figures
from parsim.shard.prepare import per_device_graph
from parsim.sim import simulate

FILES = ("results/published/moe_parallel_folding_figures.yaml", "results/published/mcore_release_figures.yaml")
print(f"{'row':58s} {'tp':>3s} {'etp':>3s} {'ep':>3s} {'step s':>8s} {'sorts now':>9s} {'whole':>8s} {'adds':>6s}")
for path in FILES:
    for f in load_figures(path).figures:
        p = dict(f.parallel)
        if f.excluded or p.get("etp", 1) <= 1 or p.get("ep", 1) <= 1:
            continue
        spec, cluster, compute, cfg = figure_setup(f)
        est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
        g = per_device_graph(spec.graph, cfg.tp, cfg.tp_layout, cfg.recompute, spec.shard, cluster, spec.training,
                             cp=cfg.cp, ep=cfg.ep, etp=cfg.etp)
        b = cfg.microbatch_size(spec.training.global_batch_size)
        moe = [layer for layer in g.layers if layer.experts is not None]
        layer = moe[0]
        share = layer.tp_share * layer.seq_share
        sorts = [k for k in layer.kernels if k.op == "moe_sort_chunks"]
        now = sum(kernel_time_s(k, b, compute.device, compute.engines, share) for k in sorts)
        whole = sum(kernel_time_s(k, b, compute.device, compute.engines, share * cfg.tp) for k in sorts)
        again = 1.5 if cfg.recompute.value == "full" else 1.0      # a full recompute runs the forward pair again
        per_step = len(moe) / cfg.pp * cfg.microbatches * again
        adds = (whole - now) * per_step
        print(f"{f.id[-58:]:58s} {cfg.tp:3d} {cfg.etp:3d} {cfg.ep:3d} "
              f"{est.step_time_s:8.2f} {now * per_step:9.3f} {whole * per_step:8.3f} {adds / est.step_time_s:+6.1%}")
