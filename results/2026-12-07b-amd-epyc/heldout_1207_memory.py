"""Set 2026-12-07's H4 and H5 (results/2026-12-07-intel-xeon/preregistered-2026-12-07.md): the peak memory of each
rank of the set's plans (single, dp2, and each pp = 2 plan; the planner's pick is scored by H1-H3), priced with
attention's dropout as a CPU runs it (LayerGraph.cpu_graph, fb8a2ce) and as the fused kernel a GPU runs (the rule
switched off by patching parsim.shard.prepare.cpu_attention, named unfused_dropout until set 2026-12-07c's change),
both against the same measurement.  Each plan is priced again with the analytical model
(runtime_sends_insample.totals); the script checks the first against the report's profiled prediction (the peak of
a plan without ZeRO follows from its order of actions alone).

H4: over the 24 ranks, the mean |error| lower with the change than without it, and lower on each of the 3 models.
H5: with the change, the single-process and dp2 peaks (9 ranks) within 3%, and every one of the 24 ranks within 10%.

    python -W ignore results/2026-12-07b-amd-epyc/heldout_1207_memory.py \\
        results/2026-12-07b-amd-epyc/heldout-2026-12-07/*/validation.json \\
        > results/2026-12-07b-amd-epyc/heldout-1207-memory.txt
"""

from __future__ import annotations

import os
import sys
from statistics import fmean

import parsim.shard.prepare

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06g-intel-xeon"))

from heldout_1206f_memory import print_ranks  # noqa: E402
from runtime_sends_insample import ranks  # noqa: E402


def mean_error(sel: list[dict], side: str) -> float:
    """The mean |error| of ``side`` ("new": with the change, "old": without) over the ranks ``sel``."""
    return fmean(abs(x[side] / x["measured"] - 1) for x in sel)


def per_model(found: list[dict]) -> list[bool]:
    """Print each model's mean |error| with the change and without it; per model, whether it is lower with it."""
    lower = []
    for model in dict.fromkeys(x["model"] for x in found):
        sel = [x for x in found if x["model"] == model]
        new, old = mean_error(sel, "new"), mean_error(sel, "old")
        lower.append(new < old)
        print(f"{model:28s} ({len(sel)} ranks): mean |error| with the change {new:.2%}, without it {old:.2%}")
    return lower


def scored_ranks(paths: list[str], rule: str = "cpu_attention", off=lambda *a: False,
                 where=parsim.shard.prepare) -> list[dict]:
    """The set's ranks (the planner's pick left out: H1-H3 score it), with the change and without it
    (``<where>.<rule>`` replaced by ``off``; by default the CPU graph's rule switched off), printed, and checked
    against the reports' own predictions."""
    found = [x for path in paths for x in ranks(path, rule, off, where, lambda p: p["label"] != "planner")]
    print_ranks(found, 28, 14)
    same = sum(abs(x["new"] - x["report"]) <= 1.0 for x in found)
    print(f"{len(found)} ranks; the analytical model with the change gives the report's prediction on {same}")
    return found


def h4(found: list[dict], lower: list[bool], chosen: tuple[str, ...], what: str) -> None:
    """A set's H4: over the ranks of the models ``chosen`` (``what`` names them), the mean |error| lower with the
    change than without it, and lower on each of them (``lower``: per model, as per_model gives it)."""
    sel = [x for x in found if x["model"] in chosen]
    new, old = mean_error(sel, "new"), mean_error(sel, "old")
    each = [low for model, low in zip(dict.fromkeys(x["model"] for x in found), lower) if model in chosen]
    print(f"the {len(sel)} ranks of the {what} models: mean |error| with the change {new:.2%}, without it "
          f"{old:.2%}; lower on {sum(each)} of {len(each)}: H4 {'holds' if new < old and all(each) else 'fails'}")


def h5(found: list[dict]) -> None:
    """H5: with the change, the single-process and dp2 ranks within 3%, and every rank within 10%."""
    one = [abs(x["new"] / x["measured"] - 1) for x in found if x["plan"] in ("single", "dp2")]
    every = [abs(x["new"] / x["measured"] - 1) for x in found]
    holds = all(e <= 0.03 for e in one) and all(e <= 0.10 for e in every)
    print(f"with the change: {sum(e <= 0.03 for e in one)} of {len(one)} single and dp2 ranks within 3% (max |error| "
          f"{max(one):.1%}); {sum(e <= 0.10 for e in every)} of {len(every)} ranks within 10% (max |error| "
          f"{max(every):.1%}): H5 {'holds' if holds else 'fails'}")


def main(paths: list[str]) -> None:
    found = scored_ranks(paths)
    lower = per_model(found)
    new, old = mean_error(found, "new"), mean_error(found, "old")
    print(f"all {len(found)} ranks: mean |error| with the change {new:.2%}, without it {old:.2%}; lower on "
          f"{sum(lower)} of {len(lower)} models: H4 {'holds' if new < old and all(lower) else 'fails'}")
    h5(found)


if __name__ == "__main__":
    main(sys.argv[1:])
