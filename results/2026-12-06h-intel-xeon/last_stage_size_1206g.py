"""The size of the change set 2026-12-06g measures, before any of its plans was run: each pipeline rank of the
set's pp = 2 plans (balanced splits, as validate resolves them with the analytical model; the profiled run may
split otherwise), its peak priced under torch's runtime with the last stage freeing its logits and the loss's
saved bytes at a split backward's I (parsim.cost.memory.last_stage_freed_at_i_bytes) and without it.

    python -W ignore results/2026-12-06h-intel-xeon/last_stage_size_1206g.py \\
        > results/2026-12-06h-intel-xeon/last-stage-size-1206g.txt
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

SET = "results/heldout/2026-12-06g.yaml"
MIB = 2 ** 20

for name in ("mistral_tiny", "hunyuan_dense_tiny", "jais2_tiny"):
    spec = load_model(f"results/heldout/models/{name}.yaml")
    training = replace(spec.training, pipeline_runtime="torch")
    cluster = load_cluster("local-cpu")
    compute = AnalyticalCompute.for_training(cluster.device, training)
    for case in default_cases(spec, cluster, compute, SET):
        if case.config.pp < 2:
            continue
        est = simulate(spec.graph, training, cluster, case.config, compute, keep_timeline=False)
        with mock.patch.object(parsim.sim.memory, "last_stage_freed_at_i_bytes", lambda *a: 0.0):
            old = simulate(spec.graph, training, cluster, case.config, compute, keep_timeline=False)
        for new_r, old_r in zip(est.ranks, old.ranks):
            new, before = new_r.memory.total_bytes, old_r.memory.total_bytes
            print(f"{name:18s} {case.label:19s} rank {new_r.rank}  without {before / MIB:7.2f} MiB"
                  f"  with {new / MIB:7.2f} MiB  {new / before - 1:+6.1%}")
