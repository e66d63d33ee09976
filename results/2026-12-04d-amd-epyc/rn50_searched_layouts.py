"""ResNet-50 on 1,024 Ascend 910 (the speed goal's search): every searched-layout family the branch
and bound takes (its tp, micro-batch size, pipeline depth and floor), whether the layout search gave
it a graph that replicates every operator (parsim.shard.graph.replicates_every_operator: the
family is then searched as tp = 1 on fewer devices, or dropped where every device must work), and
the tp of every candidate simulated.  The facts the fiftieth sitting's note states.  No timing.

    python results/2026-12-04d-amd-epyc/rn50_searched_layouts.py
"""
from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search import bound
from parsim.search.planner import plan

spec = load_model("examples/resnet50_imagenet.yaml")
cluster = load_cluster("ascend910:128x8")
compute = AnalyticalCompute.for_training(cluster.device, spec.training)
taken, simulated = [], []
real_entry, real_sim, real_family = (bound.BranchAndBound.graph_entry, bound.BranchAndBound.simulated,
                                     bound.BranchAndBound.bound_family)


def entry(self, bound_s, item):
    taken.append((bound_s, item))
    return real_entry(self, bound_s, item)


def sim(self, cfg, graph):
    simulated.append(cfg.tp)
    return real_sim(self, cfg, graph)


replicating = {}


def family(self, tp, layout, recompute, cp, graph, dp, pp, m, b, ep=1):
    if tp > 1 and graph is not None:
        replicating[(tp, b, pp, str(recompute))] = bound.replicates_every_operator(graph)
    return real_family(self, tp, layout, recompute, cp, graph, dp, pp, m, b, ep)


bound.BranchAndBound.graph_entry, bound.BranchAndBound.simulated, bound.BranchAndBound.bound_family = entry, sim, family
r = plan(spec, cluster, compute, progress=False)
print(f"searched-layout families taken: {len(taken)}, floors {min(b for b, _ in taken):.4f}-"
      f"{max(b for b, _ in taken):.4f} s; their graphs bounded: {len(replicating)}, "
      f"replicating every operator: {sum(replicating.values())}")
for (tp, b, pp, rc), rep in sorted(replicating.items()):
    print(f"  tp {tp} micro-batch {b:3d} pp {pp:2d} recompute {rc:4s}: "
          + ("replicates every operator" if rep else "shards some operator"))
print(f"candidates simulated: {len(simulated)}, by tp: {sorted(set(simulated))}; pick {r.chosen.config.tp} "
      f"x dp {r.chosen.config.dp}, {r.chosen.estimate.step_time_s:.4f} s")
