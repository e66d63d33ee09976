"""Ascend's tensor-parallel overlap (MC2, MindSpeed's --use-mc2; MindFormers' fine-grain interleave)
priced with the compute units it takes from the matmul moved from the shipped 0 (atlas-900-a2.yaml:
collective.tp_overlap_comm_units, "unconfirmed") to 4, 8 and 12 of the 910B's 24: every scored row
of the public benchmark on an Atlas profile that runs the overlap, its error (predicted throughput
over measured, less 1), and the development rows' MAPE.  An exploration: nothing was changed after it.

    python results/2026-12-01f-amd-epyc/mc2-units.py > results/2026-12-01f-amd-epyc/mc2-units.txt
"""
from dataclasses import replace

import yaml

from parsim.profile.published import load_all_figures, price, shipped_profile

figs = load_all_figures()
held = set(yaml.safe_load(open("results/published/fit.yaml"))["held_out"])
rows = [f for f in figs.scorable() if not f.excluded and f.profile.startswith("atlas")
        and dict(f.parallel).get("tp_comm_overlap")]
print("# python results/2026-12-01f-amd-epyc/mc2-units.py")
errors = {}
for units in (0, 4, 8, 12):
    for f in rows:
        p = shipped_profile(f)
        errors[f.id, units] = price(f, replace(p, collectives=replace(p.collectives, tp_overlap_comm_units=units))).error
print(f"{'row':45s} {'source':22s} " + " ".join(f"{'u=' + str(u):>7}" for u in (0, 4, 8, 12)))
for f in rows:
    print(f"{f.id:45s} {f.source:22s} " + " ".join(f"{errors[f.id, u]:+7.1%}" for u in (0, 4, 8, 12))
          + ("  (held out)" if f.source in held else ""))
for units in (0, 4, 8, 12):
    dev = [abs(errors[f.id, units]) for f in rows if f.source not in held]
    print(f"tp_overlap_comm_units {units:2d}: development MAPE {sum(dev) / len(dev):.1%} over {len(dev)} rows")
