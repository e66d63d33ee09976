"""Where one cold DeepSeek-V3 search on 2,048 H100s (bench_planner.py's goal) spends its time: the
branch and bound's push (binding every family: its floors, which price each layer class) and run
(floors, splits, simulations), timed as benchmarks/search_phases.py times its steps (its ``timed``),
and how many phase prices (parsim.sim.overlap.layer_time_s calls the pricing context makes: one
per layer class, phase, micro-batch size and rank) the search made.  One process, so the model's
extraction is done first and not timed.

    python results/2026-12-02d-amd-epyc/search_split.py > results/2026-12-02d-amd-epyc/search-split.txt
"""
import importlib
import sys

sys.path.insert(0, "benchmarks")
from search_phases import CALLS, SECONDS, timed  # noqa: E402

import bench_planner  # noqa: E402
from parsim.model.spec import load_model  # noqa: E402
from parsim.search import bound, resolve, split  # noqa: E402

simulate = importlib.import_module("parsim.sim.simulate")    # the module (parsim.sim exports the function)

for name in ("push", "run", "simulated", "floor_entry"):
    timed(bound.BranchAndBound, name, name)
for module in (split, resolve, simulate):         # where the price is passed to the pricing context from
    timed(module, "layer_time_s", "phase prices")
MODEL, CLUSTER = "examples/deepseek_v3.yaml", "dgx-h100-superpod:256x8"
load_model(MODEL)
print(f"{MODEL} on {CLUSTER}: {bench_planner._one(MODEL, CLUSTER)}")
for label in ("push", "run", "simulated", "floor_entry", "phase prices"):
    print(f"  {label:13s} {SECONDS[label]:7.3f} s  calls {CALLS[label]}")
