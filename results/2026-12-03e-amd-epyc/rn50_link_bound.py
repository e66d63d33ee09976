"""A candidate bound not in parsim (a probe, forty-fourth sitting): each directed pipeline link carries m
transfers of every stage boundary it serves (forward one way, backward the other), one after another
(parsim.sim.engine: a FIFO stream per directed link), so the step is at least stage 0's first forward
plus the busiest link's load.  Prints, for each candidate the planner simulates, lower_bound_s, the probe
and the simulated step, and how many the probe would have pruned at the final k-th best step:

    PYTHONPATH=. python results/2026-12-03e-amd-epyc/rn50_link_bound.py MODEL CLUSTER
"""
import sys

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search import bound, planner, split
from parsim.search.resolve import boundary_links

spec, cluster = load_model(sys.argv[1]), load_cluster(sys.argv[2])
compute = AnalyticalCompute.for_training(cluster.device, spec.training)
probe = {}                  # cfg -> (lower_bound_s, the link-load bound)
lower_bound_s = split.Bounds.lower_bound_s


def with_probe(self, cfg, b):
    old = lower_bound_s(self, cfg, b)
    if cfg.stages > 1:
        F = self.phase_lists(b)[0]
        sent = (self.edges(b, self.prices.boundary_links(cfg, boundary_links)) / 2).tolist()
        load = {}
        for s in range(cfg.stages - 1):
            x = cfg.microbatches * sent[s][cfg.bounds[s + 1] - 1]
            there = (s % cfg.pp, (s + 1) % cfg.pp)
            load[there] = load.get(there, 0.0) + x
            load[there[::-1]] = load.get(there[::-1], 0.0) + x
        probe[cfg] = (old, max(old, F[cfg.bounds[1]] - F[cfg.bounds[0]] + max(load.values())))
    return old


simulated = bound.BranchAndBound.simulated
rows = []


def recorded(self, cfg, graph):
    cand = simulated(self, cfg, graph)
    rows.append((cfg, cand.estimate.step_time_s))
    return cand


split.Bounds.lower_bound_s = with_probe
bound.BranchAndBound.simulated = recorded
planner.plan(spec, cluster, compute, progress=False)
kth = sorted(t for _, t in rows)[9]
pruned = 0
for cfg, t in rows:
    old, new = probe.get(cfg, (0.0, 0.0))
    pruned += new > kth
    print(f"lower bound {old * 1e3:9.2f} ms  probe {new * 1e3:9.2f} ms  simulated {t * 1e3:9.2f} ms "
          f"{'PRUNED ' if new > kth else ''}pp={cfg.pp} m={cfg.microbatches} {cfg.schedule} v={cfg.chunks} "
          f"zero={cfg.zero} {cfg.placement}")
print("would prune (vs final kth)", pruned, "of", len(rows))
