"""The expectations and the band rule committed before this sitting's four held-out families were priced
(results/2026-12-05e-intel-xeon/preregistered.md), checked on the residual table as the benchmark wrote it
(results/published/residuals.yaml): H1 (a DeepSpeed pipeline source runs slower than priced), H3 (the
two-level band covers at least 80% of the new families' rows, averaged per family, and more than the
one-level band it replaced), H4 (Megatron-stack sources within 0.90-1.20x).  Reads committed files;
prices nothing.

    python results/2026-12-05e-intel-xeon/heldout_summary.py
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

from parsim.profile.loso import load_fit_spec
from parsim.sim.band import load_residuals, step_band

sys.path.insert(0, str(Path(__file__).parent))
from band_rules import _class_rows, one_level  # noqa: E402  (the one-level rule as shipped before)

NEW = ("nemotron4-340b-report", "nemotron4-15b-report", "megascale-dense-baseline", "lambda-deepspeed-pp")
MEGATRON = NEW[:3]


def one_level_band(kind, residuals, family):
    """The band the one-level rule (shipped until this sitting) gives a row of ``family``: (low, high) log ratios."""
    pool = [r for r in residuals if r.family != family and not r.held_out]
    if not any(r.kind.device == kind.device for r in pool):
        return None
    rows = _class_rows(kind, pool, 9)
    return None if rows is None else one_level(rows, False)


def main() -> None:
    residuals = load_residuals()
    rows = {f: [r for r in residuals if r.family == f] for f in NEW}
    assert all(rows[f] and all(r.held_out for r in rows[f]) for f in NEW), "a new family is not in the table, held out"
    for f in NEW:
        ratios = sorted(math.exp(r.log_ratio) for r in rows[f])
        print(f"{f}: {len(ratios)} rows, measured / predicted step {ratios[0]:.3f}-{ratios[-1]:.3f}, "
              f"median {statistics.median(ratios):.3f}")
    lam = [math.exp(r.log_ratio) for r in rows["lambda-deepspeed-pp"]]
    print(f"\nH1, a DeepSpeed pipeline source runs slower than priced: lambda-deepspeed-pp's one scored row "
          f"{lam[0]:.3f}x: {'holds' if statistics.median(lam) > 1 else 'fails'} (one row; no micro-batch pairs)")
    for f in MEGATRON:
        med = statistics.median(math.exp(r.log_ratio) for r in rows[f])
        print(f"H4, a Megatron-stack source within 0.90-1.20x: {f} median {med:.3f}: "
              f"{'holds' if 0.90 <= med <= 1.20 else 'fails'}")
    print("\nH3, the bands on the new families' rows (each family's rows against bands drawn from the development "
          "residuals; no held-out residual is in any band):")
    two, one = {}, {}
    for f in NEW:
        for r in rows[f]:
            band = step_band(1.0, r.kind, residuals, leave_out=f)
            old = one_level_band(r.kind, residuals, f)
            if band is None or old is None:
                continue
            two.setdefault(f, []).append(band.low <= math.exp(r.log_ratio) <= band.high)
            one.setdefault(f, []).append(old[0] <= r.log_ratio <= old[1])
            print(f"  {r.id:58s} {math.exp(r.log_ratio):.3f}x  two-level [{band.low:.3f}, {band.high:.3f}] "
                  f"{'in ' if two[f][-1] else 'OUT'}  one-level [{math.exp(old[0]):.3f}, {math.exp(old[1]):.3f}] "
                  f"{'in' if one[f][-1] else 'OUT'}")
    for name, hits in (("two-level (shipped from this sitting)", two), ("one-level (shipped before)", one)):
        flat = [x for v in hits.values() for x in v]
        per = statistics.mean(sum(v) / len(v) for v in hits.values())
        print(f"  {name}: {sum(flat)} of {len(flat)} rows inside ({sum(flat) / len(flat):.1%}); averaged per family "
              f"{per:.1%} over {len(hits)}: " + ", ".join(f"{f} {sum(v)} of {len(v)}" for f, v in hits.items()))
    per_two = statistics.mean(sum(v) / len(v) for v in two.values())
    per_one = statistics.mean(sum(v) / len(v) for v in one.values())
    print(f"H3 {'holds' if per_two >= 0.8 and per_two > per_one else 'fails'}: two-level {per_two:.1%} per family "
          f"(at least 80% and above the one-level's {per_one:.1%} asked)")

    spec = load_fit_spec("results/published/fit.yaml")
    print("\nHeld-out sources' out-of-sample MAPE (rows pooled), with and without this sitting's new families:")
    held = [r for r in residuals if r.family in spec.held_out]
    for leave in ((), ("ultrascale-playbook",), NEW, NEW + ("ultrascale-playbook",)):
        errs = [abs(math.exp(r.log_ratio) - 1) for r in held if r.family not in leave]
        print(f"  {'all' if not leave else 'without ' + ', '.join(leave)}: {len(errs)} rows, MAPE "
              f"{statistics.mean(errs):.1%}, median absolute error {statistics.median(errs):.1%}, "
              f"{sum(x > 0.25 for x in errs)} beyond 25%")


if __name__ == "__main__":
    main()
