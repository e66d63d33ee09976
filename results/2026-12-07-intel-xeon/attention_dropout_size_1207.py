"""The size of the change set 2026-12-07 measures, before any of its plans was run: each rank of each of the set's
plans and the planner's pick (balanced splits, as validate resolves them with the analytical model; the profiled run
may split otherwise), its peak priced on this CPU cluster (local-cpu) under torch's runtime with attention's dropout
as a CPU runs it (LayerGraph.cpu_graph: torch's math path) and as a GPU runs it (the fused kernel, parsim's pricing
before the change: "without").

    python -W ignore results/2026-12-07-intel-xeon/attention_dropout_size_1207.py \\
        > results/2026-12-07-intel-xeon/attention-dropout-size-1207.txt
"""

from __future__ import annotations

import os
import sys

import parsim.shard.prepare

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06g-intel-xeon"))

from runtime_sends_size_1206f import sizes  # noqa: E402

# "without": parsim.shard.prepare.per_device_graph never takes the CPU graph
sizes("results/heldout/2026-12-07.yaml", ["glm_tiny", "apertus_tiny", "deepseek_v2_dense_tiny"], "cpu_attention",
      lambda *a: False, where=parsim.shard.prepare, min_pp=1)
