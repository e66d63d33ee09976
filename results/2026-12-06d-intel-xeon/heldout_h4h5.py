"""Set 2026-12-06b's H4 and H5 (../2026-12-06c-intel-xeon/preregistered-2026-12-06b.md): every run priced again
from its pass's profiles with the 90% step interval formed two ways, by ../2026-12-06c-intel-xeon/host_term_variants.py:

- ``readings``: the host term as shipped at 0c93e1d, when the set was drawn (every canary reading);
- ``round-medians``: the host term as shipped since c98f155 (one canary level per round); that script checks,
  on every run, that its spelling of this rule gives parsim's own interval.

H4: with the change, at least as many runs inside as with 0c93e1d's intervals.  H5: with the change, the planner's
pick's interval reaches less far above its prediction (the median over the passes) on each model.  It also prints
each variant's mean interval score (Gneiting and Raftery 2007, eq. 43, as a share of the measured step; lower is
better).

    python -W ignore results/2026-12-06d-intel-xeon/heldout_h4h5.py \
        results/2026-12-06d-intel-xeon/heldout-2026-12-06b/*/validation.json \
        > results/2026-12-06d-intel-xeon/heldout-h4h5.txt
"""

from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06c-intel-xeon"))

from host_term_variants import interval_score, runs  # noqa: E402

OLD, NEW = "readings", "round-medians"


def main(paths: list[str]) -> None:
    total = {OLD: 0, NEW: 0}
    n = 0
    print(f"{'model':28s} {'runs':>4s} {'inside 0c93e1d':>14s} {'inside now':>10s} {'score 0c93e1d':>13s} "
          f"{'score now':>9s} {'pick reach 0c93e1d':>18s} {'pick reach now':>14s}  H5")
    for path in paths:
        rows = list(runs(path))
        inside = {v: sum(b[v].low <= y <= b[v].high for _, _, y, b, _ in rows) for v in (OLD, NEW)}
        score = {v: statistics.fmean(interval_score(b[v].low, b[v].high, y) / y for _, _, y, b, _ in rows)
                 for v in (OLD, NEW)}
        pick = [(s, b) for _, s, _, b, label in rows if label == "planner"]
        reach = {v: statistics.median(b[v].high / s - 1 for s, b in pick) for v in (OLD, NEW)}
        name = os.path.basename(os.path.dirname(path))
        print(f"{name:28s} {len(rows):4d} {inside[OLD]:14d} {inside[NEW]:10d} {score[OLD]:13.3f} {score[NEW]:9.3f} "
              f"{reach[OLD]:+18.1%} {reach[NEW]:+14.1%}  {'holds' if reach[NEW] < reach[OLD] else 'fails'}")
        for v in (OLD, NEW):
            total[v] += inside[v]
        n += len(rows)
    print(f"all: {n} runs; inside with 0c93e1d's intervals {total[OLD]}, with the change {total[NEW]}: "
          f"H4 {'holds' if total[NEW] >= total[OLD] else 'fails'}")


if __name__ == "__main__":
    main(sys.argv[1:])
