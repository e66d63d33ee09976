"""The size of the change set 2026-12-06f measures, before any of its plans was run: each pipeline rank of the
set's pp = 2 plans (balanced splits, as validate resolves them with the analytical model; the profiled run may
split otherwise), its peak priced under torch's runtime with the sends _PipelineScheduleRuntime keeps until the step
ends (parsim.cost.memory.runtime_sent_bytes) and without them.

    python -W ignore results/2026-12-06g-intel-xeon/runtime_sends_size_1206f.py \\
        > results/2026-12-06g-intel-xeon/runtime-sends-size-1206f.txt
"""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

import parsim.sim.memory
from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.sim import simulate
from parsim.validation import default_cases

SET = "results/heldout/2026-12-06f.yaml"
MIB = 2 ** 20


def sizes(set_path: str, names: list[str], rule: str, off, where=parsim.sim.memory, min_pp: int = 2) -> None:
    """Print each rank of the set's plans with pp >= ``min_pp`` (``names``: its models' files under
    results/heldout/models/), its peak priced under torch's runtime as parsim prices it and with
    ``<where>.<rule>`` (by default parsim.sim.memory's) replaced by ``off`` (the rule switched off)."""
    width = max(map(len, names)) + 1
    for name in names:
        spec = load_model(f"results/heldout/models/{name}.yaml")
        training = replace(spec.training, pipeline_runtime="torch")
        cluster = load_cluster("local-cpu")
        compute = AnalyticalCompute.for_training(cluster.device, training)
        for case in default_cases(spec, cluster, compute, set_path):
            if case.config.pp < min_pp:
                continue
            est = simulate(spec.graph, training, cluster, case.config, compute, keep_timeline=False)
            with mock.patch.object(where, rule, off):
                old = simulate(spec.graph, training, cluster, case.config, compute, keep_timeline=False)
            for new_r, old_r in zip(est.ranks, old.ranks):
                new, before = new_r.memory.total_bytes, old_r.memory.total_bytes
                print(f"{name:{width}s} {case.label:19s} rank {new_r.rank}  without {before / MIB:7.2f} MiB"
                      f"  with {new / MIB:7.2f} MiB  {new / before - 1:+6.1%}")


if __name__ == "__main__":
    sizes(SET, ["convmixer_cifar", "seed_oss_tiny", "ernie45_tiny"], "runtime_sent_bytes", lambda *a: (0.0, 0.0))
