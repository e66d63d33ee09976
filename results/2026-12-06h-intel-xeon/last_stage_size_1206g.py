"""The size of the change set 2026-12-06g measures, before any of its plans was run: each pipeline rank of the
set's pp = 2 plans (balanced splits, as validate resolves them with the analytical model; the profiled run may
split otherwise), its peak priced under torch's runtime with the last stage freeing its logits and the loss's
saved bytes at a split backward's I (parsim.cost.memory.last_stage_freed_at_i_bytes) and without it.

    python -W ignore results/2026-12-06h-intel-xeon/last_stage_size_1206g.py \\
        > results/2026-12-06h-intel-xeon/last-stage-size-1206g.txt
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06g-intel-xeon"))

from runtime_sends_size_1206f import sizes  # noqa: E402

sizes("results/heldout/2026-12-06g.yaml", ["mistral_tiny", "hunyuan_dense_tiny", "jais2_tiny"],
      "last_stage_freed_at_i_bytes", lambda *a: 0.0)
