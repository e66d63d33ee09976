"""What-if: the GEMM shape model's split-K candidates tried up to K's limit whatever the tile
count (parsim.cost.kernels.gemm_candidates stops at the first factor whose tiles fill the device's
units, so a GEMM with more rows tries fewer factors: the cause of every T(k b) > k T(b) in
batch-scaling.txt).  Every public row priced with the profiles as shipped (in sample for what they
were fitted on: bench_published.py --quick), as the code is and with the candidates unstopped;
nothing refitted.  Prints each row whose prediction moved by more than 0.05%, and the MAPE of the
scored rows both ways.

    python results/2026-12-02e-amd-epyc/splitk_whatif.py > results/2026-12-02e-amd-epyc/splitk-whatif.txt
"""
import math
import statistics

import parsim.cost.kernels as kernels
from parsim.profile.published import UnpricedFigure, load_all_figures, price

as_written = kernels.gemm_candidates


def unstopped(m, n, k, groups, ex):
    """gemm_candidates without the stop at the factor that fills the units (k / s >= 2 only)."""
    out = []
    for tm, tn in ex.tiles:
        tiles = math.ceil(m / tm) * math.ceil(n / tn) * math.ceil(groups)
        if tiles == 0:
            return []
        s = 1
        while True:
            waves = math.ceil(tiles * s / ex.compute_units)
            out.append(((m * n * groups * s) / (waves * ex.compute_units * tm * tn), s))
            if k / s < 2:
                break
            s *= 2
    return out


def priced(candidates) -> dict:
    kernels.gemm_candidates = candidates
    out = {}
    for f in load_all_figures().figures:
        try:
            out[f.id] = (f, price(f))
        except UnpricedFigure:
            continue
    kernels.gemm_candidates = as_written
    return out


before, after = priced(as_written), priced(unstopped)
moved = []
for fid, (f, p) in before.items():
    q = after[fid][1]
    change = q.predicted / p.predicted - 1
    if abs(change) > 5e-4:
        moved.append((fid, f.profile, p.error, q.error, change))
print(f"rows priced: {len(before)}; predictions moved by more than 0.05%: {len(moved)}")
for fid, profile, e0, e1, change in sorted(moved, key=lambda r: -abs(r[4])):
    print(f"  {fid:<48} {profile:<18} error {e0:+7.1%} -> {e1:+7.1%}  (prediction {change:+.2%})")
scored = [fid for fid, (f, _) in before.items() if not f.excluded]
for label, table in (("as written", before), ("split-K unstopped", after)):
    print(f"{label}: scored rows {len(scored)}, in-sample MAPE at the shipped profiles "
          f"{statistics.mean(abs(table[fid][1].error) for fid in scored):.2%}")
