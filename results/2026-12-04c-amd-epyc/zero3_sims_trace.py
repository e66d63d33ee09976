"""The simulations DeepSeek-V3's search on 2,048 H100s runs, by ZeRO stage and pipeline depth, with and without
ZeRO-3's gathers as a term of the lower bound (parsim.search.gathers; "without": split.least_gathers_s
monkeypatched to 0), and the simulated steps of the ZeRO-3 candidates each simulates: the figures
parsim/search/gathers.py's docstring and docs/planner.md quote.  From the repository root:

    python results/2026-12-04c-amd-epyc/zero3_sims_trace.py
"""
import collections

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search import bound, split
from parsim.search.planner import plan

spec = load_model("examples/deepseek_v3.yaml")
cluster = load_cluster("dgx-h100-superpod:256x8")
compute = AnalyticalCompute.for_training(cluster.device, spec.training)
real_simulated, real_term = bound.BranchAndBound.simulated, split.least_gathers_s
for term in ("without", "with"):
    log = []

    def traced(self, cfg, graph):
        cand = real_simulated(self, cfg, graph)
        log.append((cfg.zero, cfg.pp, cand.estimate.step_time_s))
        return cand
    bound.BranchAndBound.simulated = traced
    split.least_gathers_s = real_term if term == "with" else (lambda *_: 0.0)
    r = plan(spec, cluster, compute, progress=False)
    zero3 = sorted(t for z, _, t in log if z == 3)
    print(f"{term} the gathers' term: {len(log)} simulated, by (zero, pp) {dict(collections.Counter((z, p) for z, p, _ in log))}; "
          f"pick {r.chosen.estimate.step_time_s:.3f} s; ZeRO-3 steps simulated: {len(zero3)}, "
          f"{zero3[0]:.1f}-{zero3[-1]:.1f} s" if zero3 else "")
bound.BranchAndBound.simulated, split.least_gathers_s = real_simulated, real_term
