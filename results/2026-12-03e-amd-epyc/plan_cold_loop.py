"""plan() of MODEL on CLUSTER N times in one process, every parsim functools cache cleared before each
(as a fresh `parsim plan` starts), for py-spy: its samples under plan() are a cold search's:

    py-spy record -r 250 -f raw -o F -- python results/2026-12-03e-amd-epyc/plan_cold_loop.py MODEL CLUSTER N
    python results/2026-12-03c-amd-epyc/pyspy_share.py F 40
"""
import importlib
import pkgutil
import sys

import parsim
from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search.planner import plan

modules = [importlib.import_module(m.name) for m in pkgutil.walk_packages(parsim.__path__, "parsim.")
           if "npu" not in m.name and not m.name.endswith("__main__")]
caches = [v for m in modules for v in vars(m).values() if hasattr(v, "cache_clear")]
times = []
for _ in range(int(sys.argv[3])):
    for cache in caches:
        cache.cache_clear()
    spec, cluster = load_model(sys.argv[1]), load_cluster(sys.argv[2])
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    times.append(plan(spec, cluster, compute, progress=False).search_time_s)
times.sort()
print("median", times[len(times) // 2], "min", times[0])
