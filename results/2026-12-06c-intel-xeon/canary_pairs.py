"""Is a two-process layer profile's canary noisier than the one-process profile of the same pass?  (Issue 37,
the last stop's next step 1; expectation H6 of ``preregistered.md``.)

For every pass of the committed CPU evidence since profiles were taken in rounds, the p90 / median of the
canary's readings in ``layers.1proc.profile.json`` and ``layers.2proc.profile.json`` (the same pass, minutes
apart), the ratio of the two, and a sign test over the passes (two-sided, exact binomial).

    python results/2026-12-06c-intel-xeon/canary_pairs.py > results/2026-12-06c-intel-xeon/canary-pairs.txt
"""

from __future__ import annotations

import glob
import json
import math
import os
import statistics


def p90_over_median(path: str) -> float | None:
    with open(path) as f:
        readings = [c for row in json.load(f).get("rounds", {}).get("canary_s", []) for c in row if c > 0]
    if len(readings) < 2:
        return None
    xs = sorted(readings)
    return xs[min(len(xs) - 1, int(0.9 * len(xs)))] / statistics.median(xs)


def sign_test(k: int, n: int) -> float:
    """Two-sided exact binomial p-value of k successes in n at p = 1/2."""
    tail = sum(math.comb(n, i) for i in range(min(k, n - k) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def main() -> None:
    groups = {}
    for one in sorted(glob.glob("results/*/heldout-*/*/profiles/pass*/layers.1proc.profile.json")):
        two = one.replace("layers.1proc", "layers.2proc")
        if not os.path.isfile(two):
            continue
        a, b = p90_over_median(one), p90_over_median(two)
        if a is None or b is None:
            continue
        held = "heldout-2026-12-06/" in one
        groups.setdefault("held-out set 2026-12-06" if held else "development sets", []).append((one, a, b))
    print(f"{'pass':100s} {'1proc p90/med':>13s} {'2proc p90/med':>13s} {'2proc/1proc':>11s}")
    for name, rows in groups.items():
        for one, a, b in rows:
            print(f"{os.path.dirname(one)[8:]:100s} {a:13.3f} {b:13.3f} {b / a:11.3f}")
        k = sum(b > a for _, a, b in rows)
        ratios = [b / a for _, a, b in rows]
        print(f"## {name}: {len(rows)} passes; the two-process canary's p90/median larger in {k} "
              f"(sign test p = {sign_test(k, len(rows)):.3g}); ratio median {statistics.median(ratios):.3f}, "
              f"range {min(ratios):.3f}-{max(ratios):.3f}\n")


if __name__ == "__main__":
    main()
