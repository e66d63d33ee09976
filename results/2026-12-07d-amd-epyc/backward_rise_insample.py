"""In sample: the ranks of the development sets' plans (single, dp2 and each pp = 2 plan; the planner's pick
left out), each priced again with the analytical model with each layer's backward rise as measured on meta
(Layer.bwd_rise_bytes, parsim.cost.memory.backward_rise_sets: the change) and without it (backward_rise_sets
patched to give nothing: the weight operators' working sets alone, the rule before), both against the same
measured peak.  Every model here is of a development set, the last nine sets' reports (convnets and decoders,
run on the AMD EPYC and the Intel Xeon hosts; peak memory does not depend on the host's speed).  The peak of a
plan without ZeRO follows from its order of actions alone, so the analytical model prices it as the reports'
profiled one did.

    python -W ignore results/2026-12-07d-amd-epyc/backward_rise_insample.py $(ls -d \\
        results/2026-12-06b-amd-epyc/heldout-2026-12-06/*/ results/2026-12-06d-intel-xeon/heldout-2026-12-06b/*/ \\
        results/2026-12-06e-intel-xeon/heldout-2026-12-06c/*/ results/2026-12-06f-intel-xeon/heldout-2026-12-06d/*/ \\
        results/2026-12-06g-intel-xeon/heldout-2026-12-06e/*/ results/2026-12-06h-intel-xeon/heldout-2026-12-06f/*/ \\
        results/2026-12-07-intel-xeon/heldout-2026-12-06g/*/ results/2026-12-07b-amd-epyc/heldout-2026-12-07/*/ \\
        results/2026-12-07c-amd-epyc/heldout-2026-12-07b/*/ results/2026-12-07d-amd-epyc/heldout-2026-12-07c/*/ \\
        | sed 's,$,validation.json,') > results/2026-12-07d-amd-epyc/backward-rise-insample.txt
"""

from __future__ import annotations

import os
import sys

import parsim.cost.memory

for folder in ("2026-12-06g-intel-xeon", "2026-12-07b-amd-epyc"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", folder))

from heldout_1206f_memory import print_ranks  # noqa: E402
from heldout_1207_memory import mean_error, per_model  # noqa: E402
from runtime_sends_insample import ranks  # noqa: E402


def main(paths: list[str]) -> None:
    found = [x for path in paths for x in ranks(path, "backward_rise_sets", lambda *a: [], parsim.cost.memory,
                                                 lambda p: p["label"] != "planner")]
    print_ranks(found, 30, 16)
    lower = per_model(found)
    new, old = mean_error(found, "new"), mean_error(found, "old")
    moved = sum(abs(x["new"] - x["old"]) > 1.0 for x in found)
    print(f"all {len(found)} ranks of {len(lower)} models ({moved} moved): mean |error| with the change {new:.2%}, "
          f"without it {old:.2%}; lower on {sum(lower)} of {len(lower)} models")
    for side in ("old", "new"):
        errors = [x[side] / x["measured"] - 1 for x in found]
        print(f"{'with' if side == 'new' else 'without'} the change: {sum(abs(e) <= 0.03 for e in errors)} of "
              f"{len(errors)} ranks within 3%, {sum(abs(e) <= 0.10 for e in errors)} within 10%; the largest "
              f"{max(errors, key=abs):+.1%}; over-predicted by more than 3%: {sum(e > 0.03 for e in errors)}")


if __name__ == "__main__":
    main(sys.argv[1:])
