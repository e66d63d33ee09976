"""Where one cold DeepSeek-V3 search on 2,048 H100s (bench_planner.py's goal) spends its time: the
branch and bound's push (binding every family: its floors, which price each layer class) and run
(floors, splits, simulations), each wrapped with a timer, and how many phase prices
(parsim.sim.overlap.layer_time_s calls the pricing context makes: one per layer class, phase,
micro-batch size and rank) the
search made.  One process, so the model's extraction is done first and not timed.

    python results/2026-12-02d-amd-epyc/search_split.py > results/2026-12-02d-amd-epyc/search-split.txt
"""
import collections
import importlib
import sys
import time

sys.path.insert(0, "benchmarks")
import bench_planner  # noqa: E402

from parsim.model.spec import load_model  # noqa: E402
from parsim.search import bound, resolve, split  # noqa: E402

simulate = importlib.import_module("parsim.sim.simulate")    # the module (parsim.sim exports the function)

T, N = collections.Counter(), collections.Counter()


def wrap(owner, name, label):
    f = getattr(owner, name)

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            T[label] += time.perf_counter() - t
            N[label] += 1
    setattr(owner, name, timed)


B = bound.BranchAndBound
for name in ("push", "run", "simulated", "floor_entry"):
    wrap(B, name, name)
for module in (split, resolve, simulate):         # where the price is passed to the pricing context from
    wrap(module, "layer_time_s", "phase prices")
MODEL, CLUSTER = "examples/deepseek_v3.yaml", "dgx-h100-superpod:256x8"
load_model(MODEL)
print(f"{MODEL} on {CLUSTER}: {bench_planner._one(MODEL, CLUSTER)}")
for label in ("push", "run", "simulated", "floor_entry", "phase prices"):
    print(f"  {label:13s} {T[label]:7.3f} s  calls {N[label]}")
