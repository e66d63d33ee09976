"""Where DeepSeek-V3's search on 2,048 H100s spends its time: the per-class layer pricings of the run's
pricing context (parsim.sim.prices.Prices: classes x micro-batch sizes x kinds) counted, and the share
of the search (cProfile, so slower than a plain run) under Prices.layer_times.

    python results/2026-12-03b-amd-epyc/dsv3_search_profile.py
"""

import cProfile
import os
import pstats
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)

import parsim.sim.prices as P  # noqa: E402
from parsim.cost.compute import AnalyticalCompute  # noqa: E402
from parsim.hardware import load_cluster  # noqa: E402
from parsim.model.spec import load_model  # noqa: E402
from parsim.search.planner import plan  # noqa: E402

contexts = []
_init = P.Prices.__init__


def _kept(self, *a, **k):
    _init(self, *a, **k)
    contexts.append(self)


P.Prices.__init__ = _kept
spec = load_model(os.path.join(ROOT, "examples", "deepseek_v3.yaml"))
cluster = load_cluster("dgx-h100-superpod:256x8")
compute = AnalyticalCompute.for_training(cluster.device, spec.training)
profiler = cProfile.Profile()
profiler.enable()
result = plan(spec, cluster, compute, progress=False)
profiler.disable()
stats = pstats.Stats(profiler).stats
total = max(ct for (_, _, name), (_, _, _, ct, _) in stats.items() if name == "plan")
under = sum(ct for (path, _, name), (_, _, _, ct, _) in stats.items()
            if name == "layer_times" and path.endswith(os.path.join("sim", "prices.py")))
keys = [k for p in contexts for k in p._class_times]
print(f"search under cProfile {result.search_time_s:.2f} s; Prices.layer_times {under:.2f} s of plan()'s {total:.2f} s "
      f"({under / total:.0%})")
print(f"per-class layer pricings {len(keys)}: {len({k[1] for k in keys})} classes, {len({k[3] for k in keys})} "
      f"micro-batch sizes, {len({k[2] for k in keys})} kinds, {len({k[4] for k in keys})} first ranks")
