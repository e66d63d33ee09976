"""What the family floor spares in a goal search: FAMILY entries pushed and taken off the heap,
(bounds, micro-batch size) phase rows priced (Bounds._phase_rows: the layer pricing the floor
defers; before it, every row floored now was priced) against those floored (Bounds.floor_phase_times), and how close each taken family's floor
came to the least of its shapes' priced floors (by tp overlap).  Counts, not timings: the same on
any host.

    python results/2026-12-03c-amd-epyc/family_floor_counts.py MODEL CLUSTER
"""

import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)

from parsim.cost.compute import AnalyticalCompute  # noqa: E402
from parsim.hardware import load_cluster  # noqa: E402
from parsim.model.spec import load_model  # noqa: E402
from parsim.search import bound, split  # noqa: E402
from parsim.search.planner import plan  # noqa: E402

pushed, ratios, counts = [], {}, {"priced": set(), "floored": set()}
heappush = bound.heapq.heappush


def push(heap, entry):
    if entry[2] == bound.FAMILY:
        pushed.append(entry[0])
    heappush(heap, entry)


family_entry = bound.BranchAndBound.family_entry


def taken(self, lower, item):
    _, shapes, _, _, (_, pp, m, *_, bnd, _, b) = item
    exact = min(bound.floor_from_terms(self.floor_terms(bnd, b, s[1]), m, pp, *s) for s in shapes)
    ratios.setdefault(bnd.tp_overlap, []).append(lower / exact)
    return family_entry(self, lower, item)


def counted(name, method):
    def wrapper(self, *args):
        counts[name].add((id(self), args[0]))          # (bounds, micro-batch size)
        return method(self, *args)
    return wrapper


bound.heapq.heappush = push
bound.BranchAndBound.family_entry = taken
split.Bounds._phase_rows = counted("priced", split.Bounds._phase_rows)
split.Bounds.floor_phase_times = counted("floored", split.Bounds.floor_phase_times)
model, cluster_spec = sys.argv[1:3]
spec = load_model(os.path.join(ROOT, model))
cluster = load_cluster(cluster_spec)
result = plan(spec, cluster, AnalyticalCompute.for_training(cluster.device, spec.training), progress=False)
c = result.chosen.config
print(f"{model} on {cluster_spec}: pick dp={c.dp} tp={c.tp} pp={c.pp} m={c.microbatches} "
      f"{result.chosen.estimate.step_time_s:.3f} s; simulated {result.simulated}/{result.considered}")
taken_n = sum(len(x) for x in ratios.values())
print(f"FAMILY entries pushed {len(pushed)}, taken {taken_n} ({taken_n / max(1, len(pushed)):.1%}); "
      f"(bounds, micro-batch size) phase rows floored {len(counts['floored'])}, priced {len(counts['priced'])}")
for overlap, xs in sorted(ratios.items()):
    q = np.percentile(xs, [0, 10, 50, 90, 100])
    print(f"  tp overlap {overlap!s:5}: {len(xs)} taken, floor / priced floor "
          + " ".join(f"p{p} {v:.3f}" for p, v in zip((0, 10, 50, 90, 100), q)))
