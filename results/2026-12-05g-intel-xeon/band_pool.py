"""Two pools for the step-time band, scored out of sample on every public family (diagnosis for a rule change;
prices nothing, reads results/published/residuals.yaml as the benchmark wrote it).
- A, the committed rule: a row's band drawn from the development families' residuals only, the row's own family
  left out (parsim.sim.band.step_band).
- B: the same two-level band drawn from every family's out-of-sample residuals, development and held out alike,
  the row's own family left out.  A held-out family's residuals are out of sample as much as a development
  family's (no fold fitted on either); B calibrates on both, and its coverage is leave-one-family-out on both.
For each rule: the share of rows inside their band, per family and averaged per family, for the development
families and the held-out ones apart, and the median width (high / low - 1).

    python results/2026-12-05g-intel-xeon/band_pool.py
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

from parsim.sim.band import load_residuals, step_band


def coverage(residuals, pool, rows):
    """{family: [inside, ...]} and the widths, each row's band drawn from ``pool`` without its family."""
    per, widths = {}, []
    for r in rows:
        band = step_band(1.0, r.kind, pool, leave_out=r.family)
        if band is None:
            continue
        per.setdefault(r.family, []).append(band.low <= math.exp(r.log_ratio) <= band.high)
        widths.append(band.high / band.low - 1)
    return per, widths


def report(name, per, widths) -> None:
    flat = [x for v in per.values() for x in v]
    fam = statistics.mean(sum(v) / len(v) for v in per.values())
    print(f"  {name}: {sum(flat)} of {len(flat)} rows inside ({sum(flat) / len(flat):.1%}); averaged per family "
          f"{fam:.1%} over {len(per)}; median width {statistics.median(widths):.1%}")


def main() -> None:
    residuals = load_residuals()
    pooled = tuple(replace(r, held_out=False) for r in residuals)
    dev = [r for r in residuals if not r.held_out]
    held = [r for r in residuals if r.held_out]
    for rule, pool in (("A, development residuals only (committed)", residuals),
                       ("B, every family's residuals, its own left out", pooled)):
        print(rule)
        for name, rows in (("development families", dev), ("held-out families", held)):
            per, widths = coverage(residuals, pool, rows)
            report(name, per, widths)
        per, widths = coverage(residuals, pool, dev + held)
        report("all families", per, widths)


if __name__ == "__main__":
    main()
