"""Set 2026-12-07e's H4, H5 and H6 (results/2026-12-07e-amd-epyc/preregistered-2026-12-07e.md): the peak memory of
each rank of the set's plans (single, dp2, and each pp = 2 plan; the planner's pick is scored by H1-H3), priced with
the model's forward outside its layers (4701321: parsim.model.hf.outer_scalings, the embedding multiplier, the
logits' scale and cap) and without it (the function giving none and the model extracted again, as
outer_scalings_size_1207e.py sized it), both against the same measurement, which the executor made with the change.
The script checks the first against the report's profiled prediction (the peak of a plan without ZeRO follows from
its order of actions alone).  Its committed output was made at the code the set ran at (7b03119's parsim); from 735d246
on, the GPipe and ZB-H1 first stages are priced one stage output lower (the set's report stands as made).

H4: on the Gemma 2-style decoder's five ranks the change moves (the single process, dp2, the three last stages), the
mean |error| lower with the change than without it, and lower on each of the five.
H5: with the change, every single-process and dp2 rank (6) within 3%, and every one of the 24 ranks within 10%.
H6: the Qwen2-block control's predictions the same with and without the change.

    python -W ignore results/2026-12-07f-amd-epyc/heldout_1207e_memory.py \\
        results/2026-12-07f-amd-epyc/heldout-2026-12-07e/*/validation.json \\
        > results/2026-12-07f-amd-epyc/heldout-1207e-memory.txt
"""

from __future__ import annotations

import os
import sys
from unittest import mock

import parsim.model.extracted
import parsim.model.hf
from parsim.model.spec import load_model

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "2026-12-06g-intel-xeon"))
sys.path.insert(0, os.path.join(HERE, "..", "2026-12-07b-amd-epyc"))

from heldout_1206f_memory import print_ranks  # noqa: E402
from heldout_1207_memory import h5, mean_error, per_model  # noqa: E402
from runtime_sends_insample import report_plans, totals  # noqa: E402

GEMMA2 = "heldout-gemma2-tiny"
CONTROL = "heldout-qwen2-control-tiny"


def without_scalings(path: str):
    """The model at ``path`` extracted again with no forward outside its layers (parsim's cut before 4701321)."""
    with mock.patch.object(parsim.model.hf, "outer_scalings", lambda cfg: (None, None, None)), \
            mock.patch.dict(parsim.model.extracted._EXTRACTED, clear=True):
        return load_model(path)


def ranks(path: str, keep=lambda p: p["label"] != "planner", without=None) -> list[dict]:
    """Each rank of the report's plans that ``keep`` takes (by default all but the planner's pick): measured, the
    report's prediction, the analytical model's with the change (new) and without it (old: ``without(spec,
    cluster, cfg)``'s peaks, by default the model extracted again without the scalings)."""
    found, before = [], None
    for spec, cluster, label, cfg, rows in report_plans(path, keep):
        if without is None:
            before = before or without_scalings(spec.path)
            old = totals(before, cluster, cfg)
        else:
            old = without(spec, cluster, cfg)
        new = totals(spec, cluster, cfg)
        found += [dict(model=spec.name, plan=label, rank=r["rank"], measured=r["meas_total_bytes"],
                       report=r["pred_total_bytes"], new=new[r["rank"]], old=old[r["rank"]]) for r in rows]
    return found


def main(paths: list[str]) -> None:
    found = [x for path in paths for x in ranks(path)]
    print_ranks(found, 28, 14)
    same = sum(abs(x["new"] - x["report"]) <= 1.0 for x in found)
    print(f"{len(found)} ranks; the analytical model with the change gives the report's prediction on {same}")
    per_model(found)
    moved = [x for x in found if x["model"] == GEMMA2 and abs(x["new"] - x["old"]) > 1.0]
    new, old = mean_error(moved, "new"), mean_error(moved, "old")
    each = sum(abs(x["new"] / x["measured"] - 1) < abs(x["old"] / x["measured"] - 1) for x in moved)
    print(f"the Gemma 2-style decoder's {len(moved)} ranks the change moves ("
          + ", ".join(f"{x['plan']} rank {x['rank']}" for x in moved)
          + f"): mean |error| with the change {new:.2%}, without it {old:.2%}; lower on {each} of {len(moved)}: H4 "
          + ("holds" if len(moved) == 5 and new < old and each == len(moved) else "fails"))
    h5(found)
    control = [x for x in found if x["model"] == CONTROL]
    same = sum(x["new"] == x["old"] for x in control)
    print(f"the control's {len(control)} ranks: the same with and without the change on {same}: "
          f"H6 {'holds' if control and same == len(control) else 'fails'}")


if __name__ == "__main__":
    main(sys.argv[1:])
