"""Where the goals' reference search (ResNet-50 on one 8-device Ascend 910 server) spends its time:
cProfile's cumulative seconds of the functions that hold most of it, and their share of plan().
Run alone, from the repository root:
python results/2026-12-01b-intel-xeon/reference_search_profile.py"""
import cProfile
import pstats

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search.planner import plan

spec = load_model("examples/resnet50_imagenet.yaml")
cluster = load_cluster("ascend910:1x8")
compute = AnalyticalCompute.for_training(cluster.device, spec.training)
profiler = cProfile.Profile()
profiler.enable()
result = plan(spec, cluster, compute, progress=False)
profiler.disable()
stats = pstats.Stats(profiler).stats
total = next(v[3] for k, v in stats.items() if k[2] == "plan" and k[0].endswith("search/planner.py"))
print(f"plan(): {total:.3f} s under cProfile; simulated {result.simulated} of {result.considered}")
for path, name in (("shard/auto.py", "search_sizes"), ("shard/prepare.py", "per_device_graph"),
                   ("shard/auto.py", "cost_graphs"), ("sim/simulate.py", "simulate"),
                   ("search/bound.py", "floor_entry")):
    cum = sum(v[3] for k, v in stats.items() if k[2] == name and k[0].endswith(path))
    print(f"  {path}:{name:18s} {cum:.3f} s  {100 * cum / total:.0f}%")
