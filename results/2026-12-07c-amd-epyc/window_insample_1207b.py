"""In sample: set 2026-12-07b's ranks (its first report read; a development set from then on), each priced again
with the analytical model with a sliding window shorter than the sequence as a CPU runs it (LayerGraph.cpu_graph:
the banded mask, grouped KV heads expanded; the change) and without it (parsim.shard.prepare.cpu_attention switched
off: the report's rule, none of the set's models having attention dropout), both against the same measurement.
Only the Ministral-style decoder has a window shorter than its sequence; the other two are unchanged by
construction, and are printed as the check that nothing else moved.

    python -W ignore results/2026-12-07c-amd-epyc/window_insample_1207b.py \\
        results/2026-12-07c-amd-epyc/heldout-2026-12-07b/*/validation.json \\
        > results/2026-12-07c-amd-epyc/window-insample-1207b.txt
"""

from __future__ import annotations

import os
import sys

import parsim.shard.prepare

for folder in ("2026-12-06g-intel-xeon", "2026-12-07b-amd-epyc"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", folder))

from heldout_1206f_memory import print_ranks  # noqa: E402
from heldout_1207_memory import per_model  # noqa: E402
from runtime_sends_insample import ranks  # noqa: E402


def main(paths: list[str]) -> None:
    found = [x for path in paths for x in ranks(path, "cpu_attention", lambda *a: False, parsim.shard.prepare,
                                                 lambda p: p["label"] != "planner")]
    print_ranks(found, 28, 14)
    same = sum(abs(x["old"] - x["report"]) <= 1.0 for x in found)
    print(f"{len(found)} ranks; without the change the analytical model gives the report's prediction on {same}")
    per_model(found)


if __name__ == "__main__":
    main(sys.argv[1:])
