"""A published row priced as benchmarks/bench_published.py --quick prices it, and its per-device graph's
kernel time per micro-batch (forward and backward) split by kernel class: what share of the priced
compute is fused attention.  From the repository root:

    python results/2026-12-03g-amd-epyc/kernel_shares.py ROW_ID
(dense rows: no routing imbalance is applied)
"""
import sys, collections
from parsim.profile.published import load_all_figures, figure_spec, figure_cluster, shipped_profile, row_split, figure_tokens
from parsim.cost.compute import AnalyticalCompute
from parsim.search.resolve import resolve_config
from parsim.sim import simulate
from parsim.shard.prepare import per_device_graph
figs={f.id:f for f in load_all_figures("results/published").figures}
f=figs[sys.argv[1]]
par=dict(f.parallel); profile=shipped_profile(f); spec=figure_spec(f)
cluster=figure_cluster(f,profile); compute=AnalyticalCompute.for_training(cluster.device,spec.training)
if par.get("tp",1)>1: par.setdefault("tp_layout","megatron")
par.setdefault("split",row_split(spec.graph,par))
cfg=resolve_config(spec,cluster,compute,**par)
est=simulate(spec.graph,spec.training,cluster,cfg,compute,keep_timeline=False)
mb=max(1, spec.training.global_batch_size//(cfg.dp*cfg.microbatches))
print(f.id, "step", round(est.step_time_s,3), "pred", round(figure_tokens(f)/est.step_time_s/cluster.world_size), "meas", f.measured, "mb", mb, "exposed", round(est.exposed_comm_fraction,3))
g=per_device_graph(spec.graph, cfg.tp, cfg.tp_layout or "", cfg.recompute, cp=cfg.cp)
agg=collections.Counter(); tot=0
times=compute._kernel_times(mb)
for layer in g.layers:
    for kind in "FB":
        ks=[k for k in layer.kernels if (k.phase==kind or (kind=="B" and k.phase in ("B","W")))]
        if not ks: continue
        ts=times(ks, layer.tp_share if hasattr(layer,'tp_share') else 1.0)
        for k,t in zip(ks,ts):
            agg[(k.klass)]+=t; tot+=t
print("kernel total per micro-batch (F+B) %.3f s x m=%d = %.3f" % (tot, cfg.microbatches, tot*cfg.microbatches))
for k,v in agg.most_common(12): print("  %-20s %.3f s  %.1f%%" % (k, v, 100*v/tot))
