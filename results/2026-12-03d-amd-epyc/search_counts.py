"""Counts of the work a search does (any host gives the same), for the goals' three unmet searches:
candidates split (Bounds.split), partitions run, lower bounds taken, FLOOR entries taken (with those
pushed again at a placed floor), strategy cost graphs built, simulations.  Run it on two trees:

    PYTHONPATH=TREE python results/2026-12-03d-amd-epyc/search_counts.py
"""
import collections
from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search import bound, split
from parsim.search.planner import plan
from parsim.shard import auto

counts = collections.Counter()


def counted(owner, name, label):
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        counts[label] += 1
        return original(*args, **kwargs)
    setattr(owner, name, wrapper)


counted(split.Bounds, "split", "splits")
counted(split, "partition", "partitions")
counted(split.Bounds, "lower_bound_s", "lower bounds")
counted(bound.BranchAndBound, "floor_entry", "FLOOR entries taken")
counted(bound.BranchAndBound, "graph_entry", "GRAPH entries taken")
counted(bound.BranchAndBound, "family_entry", "FAMILY entries taken")
counted(auto, "cost_graphs", "strategy cost-graph builds")
for path, cl in (("examples/deepseek_v3.yaml", "dgx-h100-superpod:256x8"), ("examples/gpt3_175b.yaml", "dgx-a100:128x8"),
                 ("examples/resnet50_imagenet.yaml", "ascend910:128x8")):
    counts.clear()
    spec = load_model(path)
    cluster = load_cluster(cl)
    r = plan(spec, cluster, AnalyticalCompute.for_training(cluster.device, spec.training), progress=False)
    print(f"{path} {cl}: simulated {r.simulated}/{r.considered}; " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
