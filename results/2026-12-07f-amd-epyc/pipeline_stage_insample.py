"""In sample: the pipeline ranks (pp = 2) of development reports, priced with a torch pipeline stage's memory as
torch holds it (the gradient entering a sending stage's last layer is its receive buffer; Schedule1F1B keeps one
sent output past its backward: change_size_1207f.pipe_off switches both off) and without it, both against the
measured peak, by schedule and stage.  The reports are set 2026-12-07e's and set 2026-12-07d's (development sets;
their first reports found the first stages' excess) and set 2026-12-07c's.  The draft of the change
(change-1207f.patch) was applied in a work tree when this ran.

    python -W ignore results/2026-12-07f-amd-epyc/pipeline_stage_insample.py \\
        results/2026-12-07f-amd-epyc/heldout-2026-12-07e/*/validation.json \\
        results/2026-12-07e-amd-epyc/heldout-2026-12-07d/*/validation.json \\
        results/2026-12-07d-amd-epyc/heldout-2026-12-07c/*/validation.json \\
        > results/2026-12-07f-amd-epyc/pipeline-stage-insample.txt
"""

from __future__ import annotations

import os
import sys
from statistics import fmean

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "2026-12-06g-intel-xeon"))
sys.path.insert(0, HERE)

from change_size_1207f import pipe_off  # noqa: E402
from heldout_1206f_memory import print_ranks  # noqa: E402
from heldout_1207e_memory import ranks as report_ranks  # noqa: E402
from runtime_sends_insample import totals  # noqa: E402


def without_pipe(spec, cluster, cfg) -> list[float]:
    """Each rank's peak with the pipeline stage's change switched off."""
    with pipe_off():
        return totals(spec, cluster, cfg)


def ranks(path: str) -> list[dict]:
    """Each pp = 2 rank of the report: measured, the analytical model's with the change (new) and without (old)."""
    return report_ranks(path, lambda p: p["pp"] == 2 and p["dp"] == 1, without_pipe)


def summary(found: list[dict], what: str) -> None:
    """One line: ``what``, the ranks' count, and their mean |error| (and range) without the change and with it."""
    line = []
    for side in ("old", "new"):
        errors = [x[side] / x["measured"] - 1 for x in found]
        line.append(f"{'with' if side == 'new' else 'without':7s} mean |error| "
                    f"{fmean(abs(e) for e in errors):5.2%} ({min(errors):+5.1%}..{max(errors):+5.1%})")
    print(f"{what} ({len(found)}): " + "   ".join(line))


def main(paths: list[str]) -> None:
    found = [x for path in paths for x in ranks(path)]
    print_ranks(found, 30, 14)
    for schedule in ("gpipe", "1f1b", "zbh1"):
        for rank, stage in ((0, "first"), (1, "last")):
            sel = [x for x in found if schedule in x["plan"] and x["rank"] == rank]
            if sel:
                summary(sel, f"{schedule:6s} {stage:5s} stages")


if __name__ == "__main__":
    main(sys.argv[1:])
