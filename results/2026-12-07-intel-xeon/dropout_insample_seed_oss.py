"""In sample: set 2026-12-06f's Seed-OSS-style decoder (attention dropout 0.1), whose first report was read before
the change, priced on its own runs with attention's dropout as a CPU runs it (LayerGraph.cpu_graph, fb8a2ce) and as
the fused kernel a GPU runs (parsim before the change), both against the measured peak of each rank of each plan.
The report ran at 4af3322, before what torch's last stage frees at a split backward's I was priced (57d8948): its
prediction equals the fused column on every rank but ZB-H1's last.  The peak of a plan without ZeRO follows from
its order of actions alone, so the analytical model prices it as the profiled one does.  The set is a development
set for this change; set 2026-12-07 was drawn before it to measure it out of sample.

    python -W ignore results/2026-12-07-intel-xeon/dropout_insample_seed_oss.py \\
        results/2026-12-06h-intel-xeon/heldout-2026-12-06f/heldout-seed-oss-tiny/validation.json \\
        > results/2026-12-07-intel-xeon/dropout-insample-seed-oss.txt
"""

from __future__ import annotations

import os
import sys
from statistics import fmean
from unittest import mock

import parsim.shard.prepare

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06g-intel-xeon"))

from runtime_sends_insample import MIB, report_plans, totals  # noqa: E402


def main(path: str) -> None:
    print(f"{'plan':19s} rank  measured MiB  report MiB  fused MiB   error  as a CPU runs it MiB   error")
    errors = {"fused": [], "cpu": []}
    # every plan but the pick, which validate pooled with the plan it is (dp2)
    for spec, cluster, label, cfg, rows in report_plans(path, keep=lambda p: True):
        cpu = totals(spec, cluster, cfg)
        with mock.patch.object(parsim.shard.prepare, "cpu_attention", lambda *a: False):
            fused = totals(spec, cluster, cfg)
        for r in rows:
            k, measured = r["rank"], r["meas_total_bytes"]
            errors["fused"].append(abs(fused[k] / measured - 1))
            errors["cpu"].append(abs(cpu[k] / measured - 1))
            print(f"{label:19s} {k:4d}  {measured / MIB:12.2f}  {r['pred_total_bytes'] / MIB:10.2f}"
                  f"  {fused[k] / MIB:9.2f}  {fused[k] / measured - 1:+6.1%}  {cpu[k] / MIB:20.2f}"
                  f"  {cpu[k] / measured - 1:+6.1%}")
    for side in ("fused", "cpu"):
        e = errors[side]
        print(f"{'as a CPU runs it' if side == 'cpu' else 'fused (before)':16s}: mean |error| {fmean(e):.2%},"
              f" max {max(e):.2%}, within 5%: {sum(x <= 0.05 for x in e)}/{len(e)}")


if __name__ == "__main__":
    main(sys.argv[1])
