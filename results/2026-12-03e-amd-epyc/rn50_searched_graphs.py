"""How a search spends its searched-layout graphs (forty-fourth sitting): for each GRAPH entry the branch
and bound takes (a tp > 1 family of the searched layout), whether the strategy search found a graph that
replicates every operator (its family is then tp = 1 on dp x pp devices) or one that shards some, by tp:

    PYTHONPATH=. python results/2026-12-03e-amd-epyc/rn50_searched_graphs.py MODEL CLUSTER
"""
import collections
import sys

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search import bound, planner

spec, cluster = load_model(sys.argv[1]), load_cluster(sys.argv[2])
compute = AnalyticalCompute.for_training(cluster.device, spec.training)
seen = collections.Counter()
graph_entry = bound.BranchAndBound.graph_entry


def counted(self, lowest, item):
    tp, _, recompute, cp, _, pp, _, b = item
    graph = self.searched_graph(tp, recompute, b, pp, cp)
    kind = "none fits" if graph is None else "replicates" if bound.replicates_every_operator(graph) else "shards"
    seen[(tp, kind)] += 1
    return graph_entry(self, lowest, item)


bound.BranchAndBound.graph_entry = counted
planner.plan(spec, cluster, compute, progress=False)
for (tp, kind), n in sorted(seen.items()):
    print(f"tp={tp}: {n} GRAPH entries, the searched graph {kind}")
