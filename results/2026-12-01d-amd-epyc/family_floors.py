"""How many of a search's families the branch and bound needed floors for (issue 40, DeepSeek-V3's
search): every family bound at push (BranchAndBound.bound_family), the least floor over each one's
MEMBERS entries against the final k-th best simulated step, and the (Bounds, micro-batch size) pairs
whose phase times those floors priced against the pairs of the families the search opened.

    python results/2026-12-01d-amd-epyc/family_floors.py examples/deepseek_v3.yaml dgx-h100-superpod:256x8

Counts, not timings: deterministic on any host."""
import collections
import sys

import numpy as np

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search import bound as B
from parsim.search.planner import plan

bound_families = []
floors = collections.defaultdict(list)
_bound_family, _push = B.BranchAndBound.bound_family, B.heapq.heappush


def bound_family(self, *args, **kwargs):
    bound_families.append(args)
    return _bound_family(self, *args, **kwargs)


def heappush(heap, item):
    if len(item) == 4 and item[2] == B.MEMBERS:
        base, indices, members, kwargs, (dp, pp, m, tp, layout, recompute, cp, bnd, graph, b) = item[3]
        floors[(dp, pp, m, tp, layout, recompute, cp, id(graph), b)].append((item[0], id(bnd), b))
    return _push(heap, item)


B.BranchAndBound.bound_family, B.heapq.heappush = bound_family, heappush
spec, cluster = load_model(sys.argv[1]), load_cluster(sys.argv[2])
r = plan(spec, cluster, AnalyticalCompute.for_training(cluster.device, spec.training), progress=False)
kth = max(c.estimate.step_time_s for c in r.ranked)
least = np.array([min(f for f, _, _ in v) for v in floors.values()])
print(f"families bound {len(bound_families)}, with a member that may fit {len(floors)}; "
      f"final k-th best step {kth:.4f} s; simulated {r.simulated}")
for q in (1, 1.25, 1.5, 2, 3, 5):
    print(f"  families whose least floor <= {q} x k-th: {int(np.sum(least <= q * kth))}")
priced = {(i, b) for v in floors.values() for _, i, b in v}
opened = {(i, b) for v in floors.values() for _, i, b in v if min(f for f, _, _ in v) <= kth}
print(f"(Bounds, micro-batch size) pairs priced for floors: {len(priced)}; of families under the k-th: {len(opened)}")
