"""The expectations committed before this sitting's three held-out sources were priced
(results/2026-12-05d-intel-xeon/preregistered.md), checked against the benchmark as committed
(results/published/bench_published.txt), and the held-out figures with and without the new sources.
Reads committed files; prices nothing.

    python results/2026-12-05d-intel-xeon/heldout_summary.py
"""

from __future__ import annotations

import math
import re
import statistics

from parsim.profile.loso import load_fit_spec
from parsim.sim.band import load_residuals

BENCH = "results/published/bench_published.txt"
NEW = ("bloom-tr11-main", "ultrascale-playbook", "megatron-ds-longseq")
BAND = re.compile(r"^    (\S+)\s+.*measured/predicted\s+(\S+)\s+band \[\S+ \S+\] (in|OUT)$")


def main() -> None:
    spec = load_fit_spec("results/published/fit.yaml")
    residuals = load_residuals()
    family = {r.id: r.family for r in residuals}
    errors: dict[str, list[float]] = {}
    for r in residuals:
        errors.setdefault(r.family, []).append(r.log_ratio)
    for fam in ("bloom-tr11-main", "megatron-ds-longseq"):
        ratios = [math.exp(x) for x in errors[fam]]
        print(f"H1, a DeepSpeed harness runs slower than parsim prices it: {fam}'s median measured / predicted "
              f"step {statistics.median(ratios):.3f} ({sum(x > 1 for x in ratios)} of {len(ratios)} rows above 1; "
              f"range {min(ratios):.3f}-{max(ratios):.3f})")
    inside: dict[str, list[bool]] = {}
    for line in open(BENCH):
        m = BAND.match(line.rstrip("\n"))
        if m and family.get(m.group(1)) in spec.held_out:
            inside.setdefault(family[m.group(1)], []).append(m.group(3) == "in")
    new = [x for f in NEW for x in inside[f]]
    print("H2, the bands keep under-covering held-out sources: " + ", ".join(
        f"{f} {sum(inside[f])} of {len(inside[f])}" for f in NEW)
        + f"; together {sum(new)} of {len(new)} ({sum(new) / len(new):.1%}) inside the 90% bands")
    print("\nHeld-out sources' out-of-sample MAPE (rows pooled), with and without this sitting's new sources:")
    held = sorted(f for f in errors if f in spec.held_out)
    for leave in ((), ("ultrascale-playbook",), NEW[:2], NEW):
        rows = [abs(math.exp(x) - 1) for f in held if f not in leave for x in errors[f]]
        print(f"  {'all' if not leave else 'without ' + ' and '.join(leave)}: {len(rows)} rows, MAPE "
              f"{statistics.mean(rows):.1%}, median absolute error {statistics.median(rows):.1%}, "
              f"{sum(x > 0.25 for x in rows)} beyond 25%")
    rows = [x for f in held for x in inside.get(f, [])]
    per = [sum(v) / len(v) for f, v in inside.items()]
    print(f"\nHeld-out rows inside their bands: {sum(rows)} of {len(rows)} ({sum(rows) / len(rows):.1%}); "
          f"averaged per family {statistics.mean(per):.1%} over {len(per)} families")


if __name__ == "__main__":
    main()
