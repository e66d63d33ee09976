"""The bands' coverage on the committed residual table under four rules, each row's band drawn
without its own family: the pool (the development sources' residuals alone, the rule kept; or every
out-of-sample residual) crossed with the classes (led by the device, the rule kept; or the mix and
model before the device with no device-alone class).  The fifty-fifth sitting shipped every residual
with the mix first, on the evidence of band-pool.txt and band-order.txt, then withdrew it when this
table, with moe-parallel-folding a development source and PaddleNLP's rows in, showed it covering
fewer held-out rows than the rule kept.  Prices nothing.

    python results/2026-12-05b-intel-xeon/band_rules.py
"""
import dataclasses
import math
import statistics
import sys

import parsim.sim.band as band

sys.path.insert(0, "results/2026-12-05b-intel-xeon")
from band_order import device_first, no_device_alone  # noqa: E402  (the same folder's; run from the repository root)

table = band.load_residuals()
DEVELOPMENT = tuple(r for r in table if not r.held_out)
EVERY = tuple(dataclasses.replace(r, held_out=False) for r in table)     # step_band keeps held_out rows out
kept = band._classes
for name, pool, classes in (("development residuals, led by the device (kept)", DEVELOPMENT, device_first),
                            ("development residuals, mix first", DEVELOPMENT, no_device_alone),
                            ("every residual, led by the device", EVERY, device_first),
                            ("every residual, mix first (tried)", EVERY, no_device_alone)):
    band._classes = classes
    out, widths = {False: [], True: []}, []
    for r in table:
        b = band.step_band(1.0, r.kind, pool, leave_out=r.family)
        if b is not None:
            out[r.held_out].append(b.contains(math.exp(r.log_ratio)))
            widths.append(b.high / b.low - 1)
    band._classes = kept
    print(f"{name:48s} development {sum(out[False])} of {len(out[False])} "
          f"({sum(out[False]) / len(out[False]):.1%}), held-out {sum(out[True])} of {len(out[True])} "
          f"({sum(out[True]) / len(out[True]):.1%}), median width {statistics.median(widths):.1%}")
