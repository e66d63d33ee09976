"""A band rule tried and not adopted: the held-out sources' residuals pooled into the bands beside the
development ones.  Each family's rows are scored against a band drawn without that family (as
benchmarks/bench_published.py scores the development rows), under the bands as shipped and under the pooled
rule.  On the committed residual table (results/published/residuals.yaml); prices nothing, changes nothing.

    python results/2026-12-05d-intel-xeon/pooled_bands.py
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from parsim.sim.band import load_residuals, step_band


def score(table, test) -> str:
    """Rows of ``test`` inside their band drawn from ``table`` without their own family."""
    by_family: dict[str, list[tuple[bool, float]]] = {}
    for r in test:
        band = step_band(1.0, r.kind, table, leave_out=r.family)
        if band is None:
            continue
        by_family.setdefault(r.family, []).append((band.contains(math.exp(r.log_ratio)), band.high / band.low - 1))
    rows = [x for v in by_family.values() for x in v]
    inside = sum(hit for hit, _ in rows)
    per_family = statistics.mean(sum(hit for hit, _ in v) / len(v) for v in by_family.values())
    return (f"{inside} of {len(rows)} inside ({inside / len(rows):.1%}; per family {per_family:.1%} over "
            f"{len(by_family)}); median width {statistics.median(w for _, w in rows):.1%}")


def main() -> None:
    table = load_residuals()
    development = [r for r in table if not r.held_out]
    held_out = [r for r in table if r.held_out]
    pooled = tuple(dataclasses.replace(r, held_out=False) for r in table)
    print("the bands as shipped (development residuals only):")
    print(f"  development rows: {score(table, development)}")
    print(f"  held-out rows:    {score(table, held_out)}")
    print("pooled (every residual in the bands, each family scored without its own):")
    print(f"  development rows: {score(pooled, development)}")
    print(f"  held-out rows:    {score(pooled, held_out)}")
    print(f"  every row:        {score(pooled, list(table))}")


if __name__ == "__main__":
    main()
