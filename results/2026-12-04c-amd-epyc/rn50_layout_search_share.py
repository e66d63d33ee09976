"""ResNet-50 on 1,024 Ascend 910: the search's time and the part of it in the layout searches of its tensor-parallel
families (perf_counter around parsim.search.bound.search_auto_sizes), three runs; then, in one more run, each
searched-layout family as the branch and bound takes it (its floor before the layout search) and the search's
final tenth-best step.  The figures results/2026-12-04c-amd-epyc/speed-notes.txt quotes.  Run it alone.

    python results/2026-12-04c-amd-epyc/rn50_layout_search_share.py
"""
import time

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search import bound
from parsim.search.planner import plan

spec = load_model("examples/resnet50_imagenet.yaml")
cluster = load_cluster("ascend910:128x8")
compute = AnalyticalCompute.for_training(cluster.device, spec.training)
real_sizes, real_entry = bound.search_auto_sizes, bound.BranchAndBound.graph_entry
spent = [0.0]


def timed(*args, **kwargs):
    start = time.perf_counter()
    out = real_sizes(*args, **kwargs)
    spent[0] += time.perf_counter() - start
    return out


bound.search_auto_sizes = timed
for _ in range(3):
    spent[0] = 0.0
    r = plan(spec, cluster, compute, progress=False)
    print(f"search {r.search_time_s:.3f} s, of it the layout searches {spent[0]:.3f} s")
floors, final = [], []


def entry(self, bound_s, item):
    floors.append((item[0], bound_s))
    final[:] = [self]
    return real_entry(self, bound_s, item)


bound.BranchAndBound.graph_entry = entry
r = plan(spec, cluster, compute, progress=False)
print(f"searched-layout families taken: {len(floors)}, tp {sorted({t for t, _ in floors})}, floors "
      f"{min(b for _, b in floors):.4f}-{max(b for _, b in floors):.4f} s; final 10th-best step {final[0].kth:.4f} s; "
      f"pick {r.chosen.estimate.step_time_s:.4f} s")
