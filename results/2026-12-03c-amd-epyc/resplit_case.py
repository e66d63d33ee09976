"""The planner's repairs of splits whose peak floor overruns the cap (parsim.search.resplit) in one
search: each repaired candidate's partitioner split and its fullest rank's floor, the split found
and its floor, and the simulated step and peak of the repair.

    python results/2026-12-03c-amd-epyc/resplit_case.py MODEL CLUSTER
"""

import os
import sys
from dataclasses import replace

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)

from parsim.cost.compute import AnalyticalCompute  # noqa: E402
from parsim.hardware import load_cluster  # noqa: E402
from parsim.model.spec import load_model  # noqa: E402
from parsim.search import bound  # noqa: E402
from parsim.search.planner import plan  # noqa: E402
from parsim.sim.memory import rank_floors_bytes  # noqa: E402

GIB = 2 ** 30
repaired = bound.BranchAndBound.repaired
walk = bound.resplit


def shown(self, cfg, graph, schedule):
    def floor(bounds):
        return max(rank_floors_bytes(graph, self.spec.training, replace(cfg, bounds=bounds), schedule, self.prices))
    found = walk(cfg.bounds, cfg.pp, lambda b: rank_floors_bytes(graph, self.spec.training, replace(cfg, bounds=b),
                                                                   schedule, self.prices), self.cap, 2 * cfg.stages)
    before = len(self.results) + len(self.over_memory)
    ran = repaired(self, cfg, graph, schedule)
    line = (f"dp={cfg.dp} pp={cfg.pp} tp={cfg.tp} {cfg.tp_layout} recompute={cfg.recompute} zero={cfg.zero} "
            f"m={cfg.microbatches} {cfg.schedule} v={cfg.chunks} {cfg.placement} tp_comm_overlap={cfg.tp_comm_overlap}: split {cfg.bounds} floor "
            f"{floor(cfg.bounds) / GIB:.2f} GiB")
    if found is None:
        print(line + "; no repair")
    else:
        cand = (self.results + self.over_memory)[before] if ran else None
        print(line + f" -> {found} floor {floor(found) / GIB:.2f} GiB; simulated {cand.estimate.step_time_s:.3f} s, "
                     f"peak {cand.peak_memory_bytes / GIB:.2f} GiB")
    return ran


bound.BranchAndBound.repaired = shown
model, cluster_spec = sys.argv[1:3]
spec = load_model(os.path.join(ROOT, model))
cluster = load_cluster(cluster_spec)
result = plan(spec, cluster, AnalyticalCompute.for_training(cluster.device, spec.training), progress=False)
c = result.chosen.config
print(f"cap {result.capacity_bytes / GIB:.2f} GiB; pick dp={c.dp} pp={c.pp} tp={c.tp} m={c.microbatches} split "
      f"{c.bounds}: {result.chosen.estimate.step_time_s:.3f} s, peak {result.chosen.peak_memory_bytes / GIB:.2f} GiB; "
      f"simulated {result.simulated}/{result.considered}")
