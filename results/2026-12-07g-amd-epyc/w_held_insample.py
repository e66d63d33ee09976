"""In sample: every ZB-H1 rank (pp = 2) of the development reports that ran ZB-H1, priced with what a split backward
holds from I to W where a weight meets the data path (the change; w_held_size_1207g.held_off switches it off), and
without it, both against the measured peak, by model kind and stage.  The peak of a plan without ZeRO follows from
its order of actions alone, so the analytical model prices it as the profiled one does.  The draft of the change
(w-held-1207g.patch) was applied in a work tree when this ran.

    python -W ignore results/2026-12-07g-amd-epyc/w_held_insample.py $(grep -l '"zbh1"' \\
        $(find results -name validation.json | sort)) > results/2026-12-07g-amd-epyc/w-held-insample.txt
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "2026-12-06g-intel-xeon"))
sys.path.insert(0, os.path.join(HERE, "..", "2026-12-07f-amd-epyc"))
sys.path.insert(0, HERE)

from heldout_1206f_memory import print_ranks  # noqa: E402
from heldout_1207e_memory import ranks as report_ranks  # noqa: E402
from pipeline_stage_insample import summary  # noqa: E402
from runtime_sends_insample import totals  # noqa: E402
from w_held_size_1207g import held_off  # noqa: E402


def ranks(path: str) -> list[dict]:
    """Each ZB-H1 rank (pp = 2, dp = 1) of the report: measured, with the change (new) and without it (old)."""
    return report_ranks(path, lambda p: p["pp"] == 2 and p["dp"] == 1 and p["schedule"] == "zbh1",
                        lambda spec, cluster, cfg: totals(held_off(spec), cluster, cfg))


def main(paths: list[str]) -> None:
    found = {}
    for path in paths:
        for x in ranks(path):
            found.setdefault((x["model"], x["plan"], x["rank"]), x)     # a model reported twice: its first report
    found = list(found.values())
    print_ranks(found, 30, 14)
    for rank, stage in ((0, "first"), (1, "last")):
        sel = [x for x in found if x["rank"] == rank]
        summary(sel, f"ZB-H1 {stage} stages")
        moved = [x for x in sel if abs(x["new"] - x["old"]) > 1.0]
        if moved:
            summary(moved, f"ZB-H1 {stage} stages the change moves")
    summary(found, "every ZB-H1 rank")


if __name__ == "__main__":
    main(sys.argv[1:])
