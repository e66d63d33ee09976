"""The size of the change set 2026-12-07 measures, before any of its plans was run: each rank of each of the set's
plans and the planner's pick (balanced splits, as validate resolves them with the analytical model; the profiled run
may split otherwise), its peak priced on this CPU cluster (local-cpu) under torch's runtime with attention's dropout
as a CPU runs it (LayerGraph.cpu_graph: torch's math path) and as a GPU runs it (the fused kernel, parsim's pricing
before the change).

    python -W ignore results/2026-12-07-intel-xeon/attention_dropout_size_1207.py \\
        > results/2026-12-07-intel-xeon/attention-dropout-size-1207.txt
"""

from __future__ import annotations

from dataclasses import replace

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.sim import simulate
from parsim.validation import default_cases

SET = "results/heldout/2026-12-07.yaml"
MIB = 2 ** 20


def main(names: list[str]) -> None:
    width = max(map(len, names)) + 1
    cluster = load_cluster("local-cpu")
    for name in names:
        spec = load_model(f"results/heldout/models/{name}.yaml")
        training = replace(spec.training, pipeline_runtime="torch")
        compute = AnalyticalCompute.for_training(cluster.device, training)
        fused = replace(spec.graph, cpu_graph=None)
        for case in default_cases(spec, cluster, compute, SET):
            new, old = (simulate(g, training, cluster, case.config, compute, keep_timeline=False)
                        for g in (spec.graph, fused))
            for new_r, old_r in zip(new.ranks, old.ranks):
                after, before = new_r.memory.total_bytes, old_r.memory.total_bytes
                print(f"{name:{width}s} {case.label:14s} rank {new_r.rank}  fused {before / MIB:7.2f} MiB"
                      f"  as a CPU runs it {after / MIB:7.2f} MiB  {after / before - 1:+6.1%}")


if __name__ == "__main__":
    main(["glm_tiny", "apertus_tiny", "deepseek_v2_dense_tiny"])
