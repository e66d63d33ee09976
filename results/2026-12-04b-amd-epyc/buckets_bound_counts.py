"""How many candidates each goal search of benchmarks/bench_planner.py simulates, and its pick, with
the lower bound's buckets term (parsim.search.split.final_backward_reductions) and without it
(monkeypatched to 0): the counts are deterministic; the times are bench_planner.goals()'s.

    python results/2026-12-04b-amd-epyc/buckets_bound_counts.py
"""
import sys

sys.path.insert(0, "benchmarks")
import bench_planner  # noqa: E402
from parsim.search import split  # noqa: E402

with_term = split.final_backward_reductions
for label, spec, cluster, *_ in [bench_planner.REFERENCE] + bench_planner.GOALS:
    out = []
    for name, fn in (("without", lambda *_: 0.0), ("with", with_term)):
        split.final_backward_reductions = fn
        out.append(f"{name}: {bench_planner._one(spec, cluster)['outcome']}")
    print(f"{label:30s} " + " | ".join(out), flush=True)
