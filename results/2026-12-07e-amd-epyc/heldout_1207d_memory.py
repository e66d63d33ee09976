"""Set 2026-12-07d's H4, H5 and H6 (results/2026-12-07d-amd-epyc/preregistered-2026-12-07d.md): the peak memory of
each rank of the set's plans (single, dp2, and each pp = 2 plan; the planner's pick is scored by H1-H3), priced with
the backward's measured rise (3f53ec8: Layer.bwd_rise_bytes beside the weight operators' working sets) and without
it (parsim.cost.memory.backward_rise_sets patched to give nothing), both against the same measurement, as the
earlier sets' memory expectations were scored (heldout_1207_memory.py).  The script checks the first against the
report's profiled prediction.

H4: over the 16 ranks of the two squared-ReLU models (StarCoder2-block, Llama-block), the mean |error| lower with the
change than without it, and lower on each of the two.
H5: with the change, every single-process and dp2 rank (6) within 3%, and every one of the 24 ranks within 10%.
H6: the Qwen3-block control's (gated plain ReLU) mean |error| over its 8 ranks with the change within 0.5 points of
its mean |error| without it.

    python -W ignore results/2026-12-07e-amd-epyc/heldout_1207d_memory.py \\
        results/2026-12-07e-amd-epyc/heldout-2026-12-07d/*/validation.json \\
        > results/2026-12-07e-amd-epyc/heldout-1207d-memory.txt
"""

from __future__ import annotations

import os
import sys

import parsim.cost.memory

# H4's models; the third, the control, is H6's
SQUARED_RELU = ("heldout-starcoder2-relu2-tiny", "heldout-llama-relu2-tiny")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-07b-amd-epyc"))

from heldout_1207_memory import h4, h5, mean_error, per_model, scored_ranks  # noqa: E402


def main(paths: list[str]) -> None:
    found = scored_ranks(paths, "backward_rise_sets", lambda *a: [], parsim.cost.memory)
    lower = per_model(found)
    h4(found, lower, SQUARED_RELU, "squared-ReLU")
    h5(found)
    control = [x for x in found if x["model"] not in SQUARED_RELU]
    new, old = mean_error(control, "new"), mean_error(control, "old")
    print(f"the control's {len(control)} ranks: mean |error| with the change {new:.2%}, without it {old:.2%} "
          f"({(new - old) * 100:+.2f} points): H6 {'holds' if abs(new - old) <= 0.005 else 'fails'}")


if __name__ == "__main__":
    main(sys.argv[1:])
