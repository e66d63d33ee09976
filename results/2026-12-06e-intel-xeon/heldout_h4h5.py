"""Set 2026-12-06c's H4 and H5 (../2026-12-06d-intel-xeon/preregistered-2026-12-06c.md): every run priced again
from its pass's profiles with the 90% step interval formed two ways, by ../2026-12-06c-intel-xeon/host_term_variants.py:

- ``round-medians``: the host term as shipped from c98f155 (one canary level per round, every plan);
- ``by-processes``: the host term as shipped since 8549e8c, the change this set measures (every reading for a plan
  priced from a profile of several processes, one level per round for a one-process profile); that script checks,
  on every run, that its spelling of this rule gives parsim's own interval.

H4: with the change, at least as many runs inside as with c98f155's intervals.  H5: with the change, a lower mean
interval score (Gneiting and Raftery 2007, eq. 43, as a share of the measured step; lower is better) over the 45
runs.

    python -W ignore results/2026-12-06e-intel-xeon/heldout_h4h5.py \\
        results/2026-12-06e-intel-xeon/heldout-2026-12-06c/*/validation.json \\
        > results/2026-12-06e-intel-xeon/heldout-h4h5.txt
"""

from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06c-intel-xeon"))

from host_term_variants import interval_score, runs  # noqa: E402

OLD, NEW = "round-medians", "by-processes"


def main(paths: list[str]) -> None:
    inside_all, scores = {OLD: 0, NEW: 0}, {OLD: [], NEW: []}
    print(f"{'model':28s} {'runs':>4s} {'inside c98f155':>14s} {'inside now':>10s} {'score c98f155':>13s} "
          f"{'score now':>9s}")
    for path in paths:
        rows = list(runs(path))
        inside = {v: sum(b[v].low <= y <= b[v].high for _, _, y, b, _ in rows) for v in (OLD, NEW)}
        score = {v: [interval_score(b[v].low, b[v].high, y) / y for _, _, y, b, _ in rows] for v in (OLD, NEW)}
        name = os.path.basename(os.path.dirname(path))
        print(f"{name:28s} {len(rows):4d} {inside[OLD]:14d} {inside[NEW]:10d} {statistics.fmean(score[OLD]):13.3f} "
              f"{statistics.fmean(score[NEW]):9.3f}")
        for v in (OLD, NEW):
            inside_all[v] += inside[v]
            scores[v] += score[v]
    n = len(scores[NEW])
    old, new = statistics.fmean(scores[OLD]), statistics.fmean(scores[NEW])
    print(f"all: {n} runs; inside with c98f155's intervals {inside_all[OLD]}, with the change {inside_all[NEW]}: "
          f"H4 {'holds' if inside_all[NEW] >= inside_all[OLD] else 'fails'}")
    print(f"mean interval score with c98f155's intervals {old:.3f}, with the change {new:.3f}: "
          f"H5 {'holds' if new < old else 'fails'}")


if __name__ == "__main__":
    main(sys.argv[1:])
