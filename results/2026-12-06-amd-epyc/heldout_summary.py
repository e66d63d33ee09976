"""The expectations on torchtitan's context-parallel family once Table 6's four 405B rows were expressed and
priced (results/2026-12-06-amd-epyc/preregistered.md, and the sixty-first sitting's, whose H3 and H34 asked
for all eight rows), checked on the residual table as the benchmark wrote it (results/published/residuals.yaml):
- H3: the two-level band covers at least 6 of the family's 8 rows; and over every draw since the rule was
  committed, at least 80% of rows inside, averaged per family;
- H33: the 405B's step growths within 15% of the measured (also tt405b_memory.py);
- H34: the median measured / predicted step over the six rows with CP >= 2 above 1.05 and above the two CP 1
  rows' median;
- H35: all four 405B rows slower than priced, at least three beyond 1.10, the ratio growing with the sequence.
Reads committed files; prices nothing.  Uses the sixty-first sitting's summary (loaded from its file).

    python results/2026-12-06-amd-epyc/heldout_summary.py
"""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

from parsim.sim.band import load_residuals

_spec = importlib.util.spec_from_file_location(
    "heldout_summary_61", Path(__file__).parent.parent / "2026-12-05h-amd-epyc" / "heldout_summary.py")
_61 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_61)

TT = _61.TT
SEQS = ("32k-fsdp8-cp1", "64k-fsdp4-cp2", "128k-fsdp2-cp4", "256k-fsdp1-cp8")


def main() -> None:
    residuals = load_residuals()
    rows, ratio = _61.family_rows(residuals, TT)
    figs = _61.figures(TT)
    print(f"{TT}: measured / predicted step " + ", ".join(f"{i} {v:.3f}" for i, v in ratio.items()))
    big = [f"longctx-tt-llama31-405b-512gpu-{s}" for s in SEQS]
    small = [f"longctx-tt-llama31-8b-8gpu-{s}" for s in SEQS]
    step = {i: 2097152 / (figs[i].measured * 512) for i in big}         # tokens a step / (TPS/GPU x GPUs)
    for a, b in zip(big, big[1:]):
        m, p = step[b] / step[a], (step[b] / ratio[b]) / (step[a] / ratio[a])
        print(f"H33, the 405B step's growth {a.split('-')[-3]} -> {b.split('-')[-3]}: measured {m:.3f}, predicted "
              f"{p:.3f} ({p / m - 1:+.3f} relative): {'holds' if abs(p / m - 1) <= 0.15 else 'fails'} "
              f"(within 0.15 relative asked)")
    cp = [ratio[i] for i in small[1:] + big[1:]]
    one = statistics.median(ratio[i] for i in (small[0], big[0]))
    _61.median_check("H34, the six rows with CP >= 2 slower than priced", cp, low=1.05)
    print(f"H34, against the two CP 1 rows' median {one:.3f}: median {statistics.median(cp):.3f} "
          f"{'above' if statistics.median(cp) > one else 'not above'}")
    r = [ratio[i] for i in big]
    ok = all(x > 1 for x in r) and sum(x > 1.10 for x in r) >= 3 and all(a < b for a, b in zip(r, r[1:]))
    print(f"H35, the 405B rows slower than priced, at least three beyond 1.10, growing with the sequence: "
          f"{', '.join(f'{x:.3f}' for x in r)}: {'holds' if ok else 'fails'}")
    _61.in_band(residuals, rows, TT, ratio, 6, "second draw, all 8 rows scored: 6 of 8 asked")
    print()
    _61.draws_coverage(residuals, _61.EARLIER + _61.MINE, "thirteen (every band under the rule as it stands)")
    _61._earlier.held_out_mapes(residuals, (TT,), "one (its four new rows with the rest)")


if __name__ == "__main__":
    main()
