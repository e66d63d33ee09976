"""A published row's simulated step split into busy, bubble, waiting and exposed communication (rank 0), for the
rows whose id starts with an argument: python results/2026-12-01c-amd-epyc/step_breakdown.py PREFIX..."""
import sys
from parsim.profile.published import load_all_figures, figure_spec, shipped_profile, figure_cluster, price
from parsim.cost.compute import AnalyticalCompute
from parsim.search.resolve import resolve_config
from parsim.sim import simulate
want = sys.argv[1:]
for f in load_all_figures().figures:
    if not any(f.id.startswith(w) for w in want): continue
    par = dict(f.parallel); spec = figure_spec(f); cl = figure_cluster(f, shipped_profile(f))
    comp = AnalyticalCompute.for_training(cl.device, spec.training)
    if par.get("tp",1)>1: par.setdefault("tp_layout","megatron")
    cfg = resolve_config(spec, cl, comp, **par)
    est = simulate(spec.graph, spec.training, cl, cfg, comp, keep_timeline=False)
    r = est.ranks[0]
    p = price(f)
    print(f"{f.id:42s} err {p.predicted/f.measured-1:+.3f} step {est.step_time_s:.3f} busy {r.busy_s:.3f} bubble {r.bubble_s:.3f} sync {r.sync_wait_s:.3f} exposed {r.exposed_comm_s:.3f} | {p.config}")
