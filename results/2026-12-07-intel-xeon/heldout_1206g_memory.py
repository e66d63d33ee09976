"""Set 2026-12-06g's H4 and H5 (results/2026-12-06h-intel-xeon/preregistered-2026-12-06g.md): the peak memory of each
pipeline rank of the set's pp = 2 plans, priced with torch's last stage freeing its logits and the loss's saved bytes
at each micro-batch's I under a split backward (parsim.cost.memory.last_stage_freed_at_i_bytes, 57d8948) and without
it (freed at the W, the rule before), both against the same measurement.  Each plan is priced again with the
analytical model (runtime_sends_insample.totals); the script checks the first against the report's profiled
prediction (the peak of a plan without ZeRO follows from its order of actions alone, not from their times).

H4: on the 6 ZB-H1 last stages, the mean |error| lower with the change than without it.
H5: with the change, every one of the 12 ZB-H1 ranks within 5%, and every one of the 18 pipeline ranks within 10%.

    python -W ignore results/2026-12-07-intel-xeon/heldout_1206g_memory.py \\
        results/2026-12-07-intel-xeon/heldout-2026-12-06g/*/validation.json \\
        > results/2026-12-07-intel-xeon/heldout-1206g-memory.txt
"""

from __future__ import annotations

import os
import sys
from statistics import fmean
from unittest import mock

import parsim.sim.memory

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06g-intel-xeon"))

from runtime_sends_insample import MIB, pipeline_plans, totals  # noqa: E402


def ranks(paths: list[str]):
    for path in paths:
        for spec, cluster, label, cfg, rows in pipeline_plans(path):
            if not label.startswith("pp2-"):          # the set's plans; the pick is scored by H1-H3
                continue
            new = totals(spec, cluster, cfg)
            with mock.patch.object(parsim.sim.memory, "last_stage_freed_at_i_bytes", lambda *a: 0.0):
                old = totals(spec, cluster, cfg)
            for r in rows:
                k = r["rank"]
                yield dict(model=spec.name, plan=label, rank=k, measured=r["meas_total_bytes"],
                           report=r["pred_total_bytes"], new=new[k], old=old[k])


def main(paths: list[str]) -> None:
    found = list(ranks(paths))
    print(f"{'model':28s} {'plan':12s} rank  measured MiB  without MiB   error  with MiB   error")
    for x in found:
        print(f"{x['model']:28s} {x['plan']:12s} {x['rank']:4d}  {x['measured'] / MIB:11.2f}  {x['old'] / MIB:11.2f}"
              f"  {x['old'] / x['measured'] - 1:+6.1%}  {x['new'] / MIB:8.2f}  {x['new'] / x['measured'] - 1:+6.1%}")
    same = sum(abs(x["new"] - x["report"]) <= 1.0 for x in found)
    print(f"{len(found)} pipeline ranks; the analytical model with the change gives the report's prediction on {same}")
    last = [x for x in found if "zbh1" in x["plan"] and x["rank"] == 1]
    new = fmean(abs(x["new"] / x["measured"] - 1) for x in last)
    old = fmean(abs(x["old"] / x["measured"] - 1) for x in last)
    print(f"ZB-H1 last stages ({len(last)}): mean |error| with the change {new:.2%}, without it {old:.2%}:"
          f" H4 {'holds' if new < old else 'fails'}")
    zb = [abs(x["new"] / x["measured"] - 1) for x in found if "zbh1" in x["plan"]]
    every = [abs(x["new"] / x["measured"] - 1) for x in found]
    holds = all(e <= 0.05 for e in zb) and all(e <= 0.10 for e in every)
    print(f"with the change: {sum(e <= 0.05 for e in zb)} of {len(zb)} ZB-H1 ranks within 5% (max |error| "
          f"{max(zb):.1%}); {sum(e <= 0.10 for e in every)} of {len(every)} pipeline ranks within 10% (max |error| "
          f"{max(every):.1%}): H5 {'holds' if holds else 'fails'}")


if __name__ == "__main__":
    main(sys.argv[1:])
