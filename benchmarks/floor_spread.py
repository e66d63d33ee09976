"""How far below the search's break the families' floors lie, counted (deterministic on any
machine): whether a cheaper family bound than the priced floor could spare the pricing.

For one goal of bench_planner.py it prints the families whose phases were priced when bound
(parsim.search.bound.BranchAndBound.bound_family: the least floor over each family's shapes),
the k-th result the search broke at, and, for a bound that is r times the true floor, how many
of those families it would still have to price (r x floor <= k-th).  It also counts the pricing
under them: layer prices (parsim.cost.kernels.layer_kernels_time_s) and kernels priced
(kernel_time_s).

    python benchmarks/floor_spread.py examples/deepseek_v3.yaml dgx-h100-superpod:256x8
"""

import sys

import numpy as np

import parsim.cost.compute as compute
import parsim.search.bound as bound
from parsim.cost.compute import AnalyticalCompute
from parsim.errors import ParsimError
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search.planner import plan

RATIOS = (0.3, 0.5, 0.7, 0.8, 0.9, 1.0)


def spread(model_path: str, cluster_spec: str) -> dict:
    floors: list[float] = []        # per bound family, its least floor (inf: none priced)
    kth: list[float] = []
    counts = {"layer prices": 0, "kernels priced": 0}
    saved = (bound.floor_from_terms, bound.BranchAndBound.bound_family, bound.BranchAndBound.run,
             compute.layer_kernels_time_s, compute.kernel_time_s)
    floor_from_terms, bound_family, run, layer_kernels, kernel = saved

    inside = [False]                # floors priced while a family is bound (not a FLOOR entry's placed floors)

    def counting_floor(*args, **kwargs):
        value = floor_from_terms(*args, **kwargs)
        if inside[0]:
            floors[-1] = min(floors[-1], value)
        return value

    def counting_family(self, *args, **kwargs):
        floors.append(np.inf)
        inside[0] = True
        try:
            return bound_family(self, *args, **kwargs)
        finally:
            inside[0] = False

    def counting_run(self, bar):
        run(self, bar)
        kth.append(self.kth)

    def counting_layer(*args, **kwargs):
        counts["layer prices"] += 1
        return layer_kernels(*args, **kwargs)

    def counting_kernel(*args, **kwargs):
        counts["kernels priced"] += 1
        return kernel(*args, **kwargs)

    bound.floor_from_terms, bound.BranchAndBound.bound_family, bound.BranchAndBound.run = \
        counting_floor, counting_family, counting_run
    compute.layer_kernels_time_s, compute.kernel_time_s = counting_layer, counting_kernel
    try:
        spec, cluster = load_model(model_path), load_cluster(cluster_spec)
        plan(spec, cluster, AnalyticalCompute.for_training(cluster.device, spec.training), progress=False)
    finally:
        (bound.floor_from_terms, bound.BranchAndBound.bound_family, bound.BranchAndBound.run,
         compute.layer_kernels_time_s, compute.kernel_time_s) = saved
    priced = np.array([f for f in floors if f < np.inf])
    return {"families bound": len(floors), "families priced": len(priced), "kth_s": kth[-1],
            "least floor_s": float(priced.min()),
            **{f"bound at {r} x floor still prices": int((r * priced <= kth[-1]).sum()) for r in RATIOS},
            **counts}


def main() -> int:
    if len(sys.argv) != 3:
        print("usage: python benchmarks/floor_spread.py MODEL.yaml CLUSTER (e.g. examples/deepseek_v3.yaml "
              "dgx-h100-superpod:256x8)", file=sys.stderr)
        return 2
    model, cluster = sys.argv[1:3]
    try:
        counts = spread(model, cluster)
    except ParsimError as e:                # a bad path or cluster, or no plan fits: one line
        print(f"floor_spread.py: {e}", file=sys.stderr)
        return 1
    print(f"{model} on {cluster}:")
    for key, value in counts.items():
        print(f"  {key:36s} {value:,.4g}" if isinstance(value, float) else f"  {key:36s} {value:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
