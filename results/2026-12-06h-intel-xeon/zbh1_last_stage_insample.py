"""In sample: every ZB-H1 pipeline rank of the development runs, priced with torch's last stage freeing its logits
and the loss's saved bytes at each micro-batch's I (parsim.cost.memory.last_stage_freed_at_i_bytes) and without it
(the rule before: freed at the W), both against the measured peak.  The peak of a plan without ZeRO follows from its
order of actions alone (parsim.sim.memory), so the analytical model prices it as the profiled one does.

The runs: the four development models run under --set schedules (results/2026-12-06g-intel-xeon/dev-schedules/: set
2026-12-06d's Granite-style and Inception, set 2026-12-06e's Helium-style and pre-activation ResNet) and set
2026-12-06f's three models (results/2026-12-06h-intel-xeon/heldout-2026-12-06f/), whose first report is read: a
development set for this rule.  Set 2026-12-06g was drawn and committed before the rule.

    python -W ignore results/2026-12-06h-intel-xeon/zbh1_last_stage_insample.py \\
        results/2026-12-06g-intel-xeon/dev-schedules/*/validation.json \\
        results/2026-12-06h-intel-xeon/heldout-2026-12-06f/*/validation.json \\
        > results/2026-12-06h-intel-xeon/zbh1-last-stage-insample.txt
"""

from __future__ import annotations

import os
import sys
from statistics import mean
from unittest import mock

import parsim.sim.memory

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06g-intel-xeon"))

from runtime_sends_insample import MIB, pipeline_plans, totals  # noqa: E402


def main(paths: list[str]) -> None:
    print(f"{'model':28s} {'plan':12s} rank  measured MiB  without MiB   error  with MiB   error")
    errors = {"without": {}, "with": {}}
    for path in paths:
        for spec, cluster, label, cfg, rows in pipeline_plans(path):
            if cfg.schedule != "zbh1":
                continue
            new = totals(spec, cluster, cfg)
            with mock.patch.object(parsim.sim.memory, "last_stage_freed_at_i_bytes", lambda *a: 0.0):
                old = totals(spec, cluster, cfg)
            for r in rows:
                k, measured = r["rank"], r["meas_total_bytes"]
                errors["without"][spec.name, label, k] = old[k] / measured - 1
                errors["with"][spec.name, label, k] = new[k] / measured - 1
                print(f"{spec.name:28s} {label:12s} {k:4d}  {measured / MIB:11.2f}  {old[k] / MIB:11.2f}"
                      f"  {old[k] / measured - 1:+6.1%}  {new[k] / MIB:8.2f}  {new[k] / measured - 1:+6.1%}")
    for side in ("without", "with"):
        last = [abs(e) for (_, _, k), e in errors[side].items() if k == 1]
        first = [abs(e) for (_, _, k), e in errors[side].items() if k == 0]
        print(f"{side:7s} the rule: mean |error| {mean(map(abs, errors[side].values())):.2%} over"
              f" {len(errors[side])} ranks; last stages {mean(last):.2%} ({len(last)}), first {mean(first):.2%}"
              f" ({len(first)})")


if __name__ == "__main__":
    main(sys.argv[1:])
