"""Set 2026-12-07g's H4, H5 and H6 (results/2026-12-07g-amd-epyc/preregistered-2026-12-07g.md): the peak memory of
each rank of the set's plans (single, dp2, and each pp = 2 plan; the planner's pick is scored by H1-H3), priced with
the change the set measures (b291f5c: what a split backward holds from I to W, where a weight meets the data) and
with it switched off (w_held_size_1207g.held_off: each layer's w_held_bytes by the rule before), against the same
measurement, which the executor made with the change.  The script checks the first against the report's profiled
prediction (the peak of a plan without ZeRO follows from its order of actions alone).

H4: the VaultGemma-style model's ZB-H1 last stage, the one rank the change moves, closer to its measurement with
the change than without it.
H5: every other rank of the three models priced the same both ways.
H6: with the change, every single-process and dp2 rank within 3%, every rank (24) within 10%.

    python -W ignore results/2026-12-07h-amd-epyc/heldout_1207g_memory.py \\
        results/2026-12-07h-amd-epyc/heldout-2026-12-07g/*/validation.json \\
        > results/2026-12-07h-amd-epyc/heldout-1207g-memory.txt
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "2026-12-06g-intel-xeon"))
sys.path.insert(0, os.path.join(HERE, "..", "2026-12-07b-amd-epyc"))
sys.path.insert(0, os.path.join(HERE, "..", "2026-12-07f-amd-epyc"))
sys.path.insert(0, os.path.join(HERE, "..", "2026-12-07g-amd-epyc"))

from heldout_1206f_memory import print_ranks  # noqa: E402
from heldout_1207_memory import mean_error  # noqa: E402
from heldout_1207e_memory import ranks  # noqa: E402
from runtime_sends_insample import totals  # noqa: E402
from w_held_size_1207g import held_off  # noqa: E402

VAULTGEMMA = "heldout-vaultgemma-tiny"
SET_RANKS = lambda p: p["label"] != "planner"      # noqa: E731  (H1-H3 score the pick)


def without_change(spec, cluster, cfg, _models={}) -> list[float]:
    """Each rank's peak with every layer's w_held_bytes by the rule before the change (once per model)."""
    if spec.path not in _models:
        _models[spec.path] = held_off(spec)
    return totals(_models[spec.path], cluster, cfg)


def error(x: dict, side: str) -> float:
    return x[side] / x["measured"] - 1


def main(paths: list[str]) -> None:
    found = [x for path in paths for x in ranks(path, SET_RANKS, without_change)]
    print_ranks(found, 32, 14)
    same = sum(abs(x["new"] - x["report"]) <= 1.0 for x in found)
    print(f"{len(found)} ranks; the analytical model with the change gives the report's prediction on {same}")
    moved = [x for x in found if abs(x["new"] - x["old"]) > 1.0]
    target = [x for x in found if x["model"] == VAULTGEMMA and "zbh1" in x["plan"] and x["rank"] == 1]
    holds = len(target) == 1 and abs(error(target[0], "new")) < abs(error(target[0], "old"))
    for x in target:
        print(f"the VaultGemma-style ZB-H1 last stage: measured {x['measured'] / 2 ** 20:.2f} MiB, with the change "
              f"{error(x, 'new'):+.2%}, without it {error(x, 'old'):+.2%}: H4 {'holds' if holds else 'fails'}")
    others = [x for x in found if x not in target]
    same = sum(abs(x["new"] - x["old"]) <= 1.0 for x in others)
    print(f"the other {len(others)} ranks: the same with and without the change on {same}; ranks the change moves: "
          + (", ".join(f"{x['model']} {x['plan']} rank {x['rank']}" for x in moved) or "none")
          + f": H5 {'holds' if others and same == len(others) else 'fails'}")
    one = [abs(error(x, "new")) for x in found if x["plan"] in ("single", "dp2")]
    every = [abs(error(x, "new")) for x in found]
    holds = one and all(e <= 0.03 for e in one) and all(e <= 0.10 for e in every)
    run = "" if len(every) == 24 else f" on the {len(every)} of the set's 24 ranks run"
    print(f"with the change: {sum(e <= 0.03 for e in one)} of {len(one)} single and dp2 ranks within 3% (max |error| "
          f"{max(one):.1%}); {sum(e <= 0.10 for e in every)} of {len(every)} ranks within 10% (max |error| "
          f"{max(every):.1%}); mean |error| {mean_error(found, 'new'):.2%} with it, {mean_error(found, 'old'):.2%} "
          f"without: H6 {'holds' if holds else 'fails'}{run}")


if __name__ == "__main__":
    main(sys.argv[1:])
