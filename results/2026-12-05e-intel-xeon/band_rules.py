"""Band rules tried on the committed residual table, before the next held-out draws are priced.

Each rule draws a row's 90% band from the residuals of every family but the row's own (leave one
family out), as benchmarks/bench_published.py scores the shipped bands, and this prints how many
development and held-out rows fall inside, per row and averaged per family, and the median width
(high / low - 1).  The rule chosen here was chosen AFTER seeing these rows: its figures below are
in-sample for the choice.  Its test is the next held-out sources, drawn and priced after this file
and results/2026-12-05e-intel-xeon/preregistered.md were committed.

Rules (every one widens the class as parsim.sim.band does, until ``min_families`` families remain):
  one-level   the shipped rule: one family-weighted conformal quantile of |r - m| (symmetric), or
              two one-sided ones (asymmetric: Linusson et al. 2014, signed-error conformal regression)
  two-level   a source's bias and a row's spread apart (Dunn, Wasserman & Ramdas 2022, two-layer
              hierarchical conformal prediction): b_f the median log ratio of family f, m the median
              of the b_f, q_b the ceil((F + 1) x 0.9)-th smallest |b_f - m| (one score per family, the
              exchangeable unit), q_e the family-weighted 0.9 quantile of |r_i - b_f(i)| over families
              of two rows or more; half-width q_b + q_e ("sum") or sqrt(q_b^2 + q_e^2) ("hyp")
Pools: ``dev`` (development residuals only, as shipped), ``pooled`` (held-out residuals too),
``held-out`` (held-out residuals only).

    python results/2026-12-05e-intel-xeon/band_rules.py
"""

from __future__ import annotations

import math
import statistics

from parsim.sim.band import LEVEL, _classes, _weighted_point, load_residuals


def _class_rows(kind, pool, min_families):
    for _, match in _classes(kind):
        rows = [r for r in pool if match(r.kind)]
        if len({r.family for r in rows}) >= min_families:
            return rows
    return None


def one_level(rows, asymmetric):
    count = {}
    for r in rows:
        count[r.family] = count.get(r.family, 0) + 1
    w = [1 / count[r.family] for r in rows]
    f = len(count)
    if asymmetric:
        share = min(1.0, (1 - (1 - LEVEL) / 2) * (1 + 1 / f))
        return (-_weighted_point([(-r.log_ratio, x) for r, x in zip(rows, w)], share),
                _weighted_point([(r.log_ratio, x) for r, x in zip(rows, w)], share))
    m = _weighted_point([(r.log_ratio, x) for r, x in zip(rows, w)], 0.5)
    q = _weighted_point([(abs(r.log_ratio - m), x) for r, x in zip(rows, w)], min(1.0, LEVEL * (1 + 1 / f)))
    return m - q, m + q


def two_level(rows, combine):
    by_family: dict[str, list[float]] = {}
    for r in rows:
        by_family.setdefault(r.family, []).append(r.log_ratio)
    bias = {f: statistics.median(v) for f, v in by_family.items()}
    m = statistics.median(bias.values())
    between = sorted(abs(b - m) for b in bias.values())
    q_b = between[min(len(between), math.ceil((len(between) + 1) * LEVEL - 1e-9)) - 1]
    spread = [(abs(x - bias[f]), 1 / len(v)) for f, v in by_family.items() if len(v) > 1 for x in v]
    q_e = _weighted_point(spread, LEVEL) if spread else 0.0
    q = q_b + q_e if combine == "sum" else math.hypot(q_b, q_e)
    return m - q, m + q


def score(table, test, in_pool, min_families, rule) -> str:
    by_family: dict[str, list[tuple[bool, float]]] = {}
    for r in test:
        pool = [p for p in table if p.family != r.family and in_pool(p)]
        if not any(p.kind.device == r.kind.device for p in pool):
            continue
        rows = _class_rows(r.kind, pool, min_families)
        if rows is None:
            continue
        lo, hi = rule(rows)
        by_family.setdefault(r.family, []).append((lo <= r.log_ratio <= hi, math.exp(hi - lo) - 1))
    flat = [x for v in by_family.values() for x in v]
    if not flat:
        return "no bands"
    inside = sum(hit for hit, _ in flat)
    per_family = statistics.mean(sum(hit for hit, _ in v) / len(v) for v in by_family.values())
    return (f"{inside}/{len(flat)} ({inside / len(flat):.1%}; per family {per_family:.1%} over {len(by_family)}), "
            f"median width {statistics.median(w for _, w in flat):.0%}")


def main() -> None:
    table = load_residuals()
    development = [r for r in table if not r.held_out]
    held_out = [r for r in table if r.held_out]
    pools = {"dev": lambda p: not p.held_out, "pooled": lambda p: True, "held-out": lambda p: p.held_out}
    rules = {"one-level symmetric": lambda rows: one_level(rows, False),
             "one-level asymmetric": lambda rows: one_level(rows, True),
             "two-level sum": lambda rows: two_level(rows, "sum"),
             "two-level hyp": lambda rows: two_level(rows, "hyp")}
    for rule_name, rule in rules.items():
        for pool_name, in_pool in pools.items():
            for min_families in (9, 19):
                print(f"{rule_name:21s} {pool_name:8s} F>={min_families:2d}  development "
                      f"{score(table, development, in_pool, min_families, rule)}")
                print(f"{'':21s} {'':8s}        held-out    {score(table, held_out, in_pool, min_families, rule)}")


if __name__ == "__main__":
    main()
