"""The planner's work on one goal, counted rather than timed (deterministic on any machine): the
candidates it split and bounded (parsim.search.bound.candidate), the partitions it ran, the
simulations, and its pick.  For comparing search spaces where no quiet machine is at hand; the
speed goals themselves are bench_planner.py --goals.

    python benchmarks/planner_counts.py examples/gpt3_175b.yaml dgx-a100:128x8
"""

import sys
from collections import Counter

import parsim.search.bound as bound
import parsim.search.split as split
from parsim.search.planner import plan
from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model


def counted(model_path: str, cluster_spec: str) -> dict:
    calls = Counter()
    partition, candidate = split.partition, bound.candidate

    def counting(name, fn):
        def wrapped(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return wrapped

    split.partition, bound.candidate = counting("partitions", partition), counting("candidates", candidate)
    try:
        spec, cluster = load_model(model_path), load_cluster(cluster_spec)
        r = plan(spec, cluster, AnalyticalCompute.for_training(cluster.device, spec.training), progress=False)
    finally:
        split.partition, bound.candidate = partition, candidate
    c = r.chosen.config
    return {**calls, "considered": r.considered, "simulated": r.simulated,
            "pick": f"dp={c.dp} pp={c.pp} tp={c.tp} {c.tp_layout} m={c.microbatches} {c.schedule} v={c.chunks} "
                    f"zero={c.zero} tp_comm_overlap={c.tp_comm_overlap}",
            "step_s": round(r.chosen.estimate.step_time_s, 4)}


if __name__ == "__main__":
    print(counted(sys.argv[1], sys.argv[2]))
