"""Set 2026-12-07c's H4 and H5 (results/2026-12-07c-amd-epyc/preregistered-2026-12-07c.md): the peak memory of each
rank of the set's plans (single, dp2, and each pp = 2 plan; the planner's pick is scored by H1-H3), priced with a
sliding window shorter than its sequence as a CPU runs it (LayerGraph.cpu_graph: the banded mask, grouped KV heads
expanded; bf80f80) and without it (parsim.shard.prepare.cpu_attention switched off, none of the set's models having
attention dropout), both against the same measurement, as set 2026-12-07's H4/H5 were scored
(heldout_1207_memory.py).  The script checks the first against the report's profiled prediction.

H4: over the 16 ranks of the two models with grouped KV heads (Cohere2-style, CWM-style), the mean |error| lower
with the change than without it, and lower on each of the two.  The Phi-3-mini-style model (as many KV heads as
query heads) has nothing to expand: its ranks are printed as the check that they did not move.
H5: with the change, every single-process and dp2 rank (6) within 3%, and every one of the 24 ranks within 10%.

    python -W ignore results/2026-12-07d-amd-epyc/heldout_1207c_memory.py \\
        results/2026-12-07d-amd-epyc/heldout-2026-12-07c/*/validation.json \\
        > results/2026-12-07d-amd-epyc/heldout-1207c-memory.txt
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-07b-amd-epyc"))

from heldout_1207_memory import h4, h5, per_model, scored_ranks  # noqa: E402

GROUPED_KV = ("heldout-cohere2-tiny", "heldout-cwm-tiny")


def main(paths: list[str]) -> None:
    found = scored_ranks(paths)
    lower = per_model(found)
    control = [x for x in found if x["model"] not in GROUPED_KV]
    moved = sum(abs(x["new"] - x["old"]) > 1.0 for x in control)
    print(f"the model without grouped KV heads: {moved} of {len(control)} ranks moved by the change")
    h4(found, lower, GROUPED_KV, "grouped-KV")
    h5(found)


if __name__ == "__main__":
    main(sys.argv[1:])
