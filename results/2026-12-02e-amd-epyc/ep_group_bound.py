"""A search (by default DeepSeek-V3 on 2,048 H100s, bench_planner.py's goal), each simulated candidate with
the lower bound it was taken at (its SPLIT entry's bound, parsim.search.split.Bounds.lower_bound_s
and the floor before it), its simulated step and their ratio, best step first: where the bound is
loose, by placement and ZeRO stage.  Run at a commit's code (PYTHONPATH=its worktree) to compare.

    python results/2026-12-02e-amd-epyc/ep_group_bound.py [MODEL CLUSTER]     (default: the DeepSeek-V3 goal)
"""
import collections
import sys

import parsim.search.bound as bound
from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search.planner import plan

MODEL, CLUSTER = sys.argv[1:3] if len(sys.argv) == 3 else ("examples/deepseek_v3.yaml", "dgx-h100-superpod:256x8")
rows, taken = [], {}
split_entry, simulated = bound.BranchAndBound.split_entry, bound.BranchAndBound.simulated


def split_entry_at(self, at, item):
    taken["bound"] = at
    return split_entry(self, at, item)


def simulated_with_bound(self, cfg, graph):
    cand = simulated(self, cfg, graph)
    rows.append((taken["bound"], cand.estimate.step_time_s, cfg))
    return cand


bound.BranchAndBound.split_entry, bound.BranchAndBound.simulated = split_entry_at, simulated_with_bound
spec, cluster = load_model(MODEL), load_cluster(CLUSTER)
r = plan(spec, cluster, AnalyticalCompute.for_training(cluster.device, spec.training), progress=False)
print(f"{MODEL} on {CLUSTER}: {r.simulated} simulated of {r.considered}; the top {len(r.ranked)}:")
for cand in r.ranked:
    c = cand.config
    print(f"  {cand.estimate.step_time_s:.6f} s  dp={c.dp} tp={c.tp} pp={c.pp} m={c.microbatches} ep={c.ep} "
          f"{c.schedule} v={c.chunks} zero={c.zero} recompute={c.recompute} overlap={c.tp_comm_overlap} {c.placement}")
print("simulated (bound s, simulated s, bound / simulated):")
loose = collections.Counter()
for lb, step, c in sorted(rows, key=lambda x: x[1]):
    print(f"  {lb:8.3f} {step:8.3f} {lb / step:.3f}  dp={c.dp} tp={c.tp} pp={c.pp} m={c.microbatches} ep={c.ep} "
          f"{c.schedule} v={c.chunks} zero={c.zero} recompute={c.recompute} overlap={c.tp_comm_overlap} {c.placement}")
    if lb / step < 0.9:
        loose[(c.placement, f"zero={c.zero}")] += 1
print("bound under 0.9 x the simulated step, by placement and ZeRO stage:", dict(loose))
