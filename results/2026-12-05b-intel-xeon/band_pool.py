"""The bands' coverage, scored leave-one-family-out on the committed residual table, when they rest
on the development sources' residuals alone (the rule), on every out-of-sample residual (the
development sources' leave-one-source-out residuals and the held-out sources' residuals: tried in
the fifty-fifth sitting, then withdrawn, results/2026-12-05b-intel-xeon/band-rules.txt), and on the
held-out sources' alone.  Prices nothing: it reads
results/published/residuals.yaml and calls parsim.sim.band.step_band on each pool.

    python results/2026-12-05b-intel-xeon/band_pool.py
"""
import dataclasses
import math
from collections import defaultdict

from parsim.sim.band import load_residuals, step_band

table = load_residuals()


def score(pool, label):
    hits = defaultdict(list)
    widths = []
    for r in table:
        band = step_band(1.0, r.kind, pool, leave_out=r.family)
        if band is None:
            continue
        hits[(r.held_out, r.family)].append(band.contains(math.exp(r.log_ratio)))
        widths.append(band.high / band.low - 1)
    for held in (False, True):
        rows = [h for (ho, _), hs in hits.items() if ho == held for h in hs]
        fams = [sum(hs) / len(hs) for (ho, _), hs in hits.items() if ho == held]
        print(f"{label:<44} {'held-out' if held else 'development':<12} {sum(rows):>4} of {len(rows):>4} inside "
              f"({sum(rows) / len(rows):.1%}; per family {sum(fams) / len(fams):.1%})")
    allrows = [h for hs in hits.values() for h in hs]
    widths.sort()
    print(f"{label:<44} {'all':<12} {sum(allrows):>4} of {len(allrows):>4} inside ({sum(allrows) / len(allrows):.1%}); "
          f"median width {widths[len(widths) // 2]:.1%}")


print(f"{len(table)} residuals, {len({r.family for r in table if not r.held_out})} development and "
      f"{len({r.family for r in table if r.held_out})} held-out families (results/published/residuals.yaml)")
score(tuple(r for r in table if not r.held_out), "development residuals only (the old rule)")
score(tuple(dataclasses.replace(r, held_out=False) for r in table), "every out-of-sample residual (tried)")
score(tuple(dataclasses.replace(r, held_out=False) for r in table if r.held_out), "held-out sources' residuals only")
