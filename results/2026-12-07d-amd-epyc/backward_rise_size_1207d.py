"""The size of the change set 2026-12-07d measures, before any of its plans was run: each rank of each of the set's
plans and the planner's pick (balanced splits, as validate resolves them with the analytical model; the profiled run
may split otherwise), its peak priced on this CPU cluster (local-cpu) under torch's runtime with each layer's
backward rise as measured on meta (Layer.bwd_rise_bytes, parsim.cost.memory.backward_rise_sets) and without it (the
weight operators' working sets alone: parsim's pricing before the change, "without").

    python -W ignore results/2026-12-07d-amd-epyc/backward_rise_size_1207d.py \\
        > results/2026-12-07d-amd-epyc/backward-rise-size-1207d.txt
"""

from __future__ import annotations

import os
import sys

import parsim.cost.memory

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06g-intel-xeon"))

from runtime_sends_size_1206f import sizes  # noqa: E402

sizes("results/heldout/2026-12-07d.yaml", ["starcoder2_relu2_tiny", "llama_relu2_tiny", "qwen3_relu_tiny"],
      "backward_rise_sets", lambda *a: [], where=parsim.cost.memory, min_pp=1)
