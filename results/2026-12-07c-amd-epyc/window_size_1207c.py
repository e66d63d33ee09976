"""The size of the change set 2026-12-07c measures, before any of its plans was run: each rank of each of the set's
plans and the planner's pick (balanced splits, as validate resolves them with the analytical model; the profiled run
may split otherwise), its peak priced on this CPU cluster (local-cpu) under torch's runtime with a sliding window
shorter than the sequence as a CPU runs it (LayerGraph.cpu_graph: the banded mask, grouped KV heads expanded) and as
fused attention takes it (no mask: parsim's pricing before the change, "without").  The set's models have no
dropout, so switching the CPU graph off switches off only the window's part of it.

    python -W ignore results/2026-12-07c-amd-epyc/window_size_1207c.py \\
        > results/2026-12-07c-amd-epyc/window-size-1207c.txt
"""

from __future__ import annotations

import os
import sys

import parsim.shard.prepare

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06g-intel-xeon"))

from runtime_sends_size_1206f import sizes  # noqa: E402

# "without": parsim.shard.prepare.per_device_graph never takes the CPU graph
sizes("results/heldout/2026-12-07c.yaml", ["cohere2_tiny", "cwm_tiny", "phi3_window_tiny"], "cpu_attention",
      lambda *a: False, where=parsim.shard.prepare, min_pp=1)
