"""In sample: the pipeline ranks of development runs under interleaved 1F1B and ZB-H1 (``parsim validate <model>
--set schedules``, which adds 1F1B at the same size and the planner's pick), priced with the sends torch's
_PipelineScheduleRuntime keeps until the step ends (parsim.cost.memory.runtime_sent_bytes) and without them (the
rule before: the reports' own prediction, checked here against the analytical model with the rule switched off),
both against the measured peak.  The peak of a plan without ZeRO follows from its order of actions alone, not from
their times (parsim.sim.memory), so the analytical model prices it as the profiled one does.

The models are development models (set 2026-12-06d's Granite-style and Inception, set 2026-12-06e's Helium-style
and pre-activation ResNet, whose first reports are read); set 2026-12-06f was drawn and committed before these runs.
The first two ran at bdafc82, before the change (their reports' prediction is the rule before's), the last two at
d42465d, with it (their reports' prediction is the rule's).

    for m in granite_tiny inception_cifar helium_tiny preact_resnet_cifar; do
      parsim validate results/heldout/models/$m.yaml --set schedules --passes 1 --steps 4 --out /work/runs/dev-sends-$m
    done      # evidence moved to results/2026-12-06g-intel-xeon/dev-schedules/, each printed report as output.txt
    python -W ignore results/2026-12-06g-intel-xeon/runtime_sends_insample.py \\
        results/2026-12-06g-intel-xeon/dev-schedules/*/validation.json \\
        > results/2026-12-06g-intel-xeon/runtime-sends-insample.txt
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from unittest import mock

import parsim.sim.memory
from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.plan import ParallelConfig
from parsim.sim import simulate

MIB = 2 ** 20


def totals(spec, cluster, cfg) -> list[float]:
    training = replace(spec.training, pipeline_runtime="torch")
    est = simulate(spec.graph, training, cluster, cfg, AnalyticalCompute.for_training(cluster.device, training),
                   keep_timeline=False)
    return [r.memory.total_bytes for r in est.ranks]


def report_plans(path: str, keep=lambda p: p["pp"] == 2 and p["dp"] == 1):
    """Each plan of a validate report that ``keep`` takes (by default the pp = 2, dp = 1 ones): (spec, cluster,
    label, its ParallelConfig as the report split it, its rows of the memory breakdown)."""
    report = json.load(open(path))
    spec, cluster = load_model(report["model"]), load_cluster(report["cluster"])
    plans = {p["label"]: p for p in report["plans"]}
    rows = [r for r in report["memory_breakdown"] if r["plan"] in plans and keep(plans[r["plan"]])]
    for label in dict.fromkeys(r["plan"] for r in rows):
        p = plans[label]
        v = 2 if p["schedule"] == "interleaved" else 1
        cuts = [part.split("..")[0].strip() for part in p["split"].split("|")]      # "embed..layers.1 | layers.2..head"
        bounds = tuple(spec.graph.index(c) if c in spec.graph.names else int(c) for c in cuts) + (len(spec.graph),)
        yield spec, cluster, label, ParallelConfig(p["dp"], p["pp"], p["microbatches"], p["schedule"], v, bounds), \
            [r for r in rows if r["plan"] == label]


pipeline_plans = report_plans


def ranks(path: str, rule: str = "runtime_sent_bytes", off=lambda *a: (0.0, 0.0), where=parsim.sim.memory,
          keep=lambda p: p["pp"] == 2 and p["dp"] == 1):
    """Each rank of ``path``'s plans that ``keep`` takes (by default the pp = 2 ones): its measured peak, the
    report's prediction, and the analytical model's with ``<where>.<rule>`` (new, ``where`` by default
    parsim.sim.memory) and with it replaced by ``off`` (old)."""
    for spec, cluster, label, cfg, rows in report_plans(path, keep):
        with_rule = totals(spec, cluster, cfg)
        with mock.patch.object(where, rule, off):
            without = totals(spec, cluster, cfg)
        for r in rows:
            k = r["rank"]
            yield dict(model=spec.name, plan=label, rank=k, measured=r["meas_total_bytes"],
                       report=r["pred_total_bytes"], new=with_rule[k], old=without[k])


def main(paths: list[str]) -> None:
    found = [x for path in paths for x in ranks(path)]
    print(f"{'model':26s} {'plan':19s} rank  measured MiB  report MiB  without MiB   error  with MiB   error")
    for x in found:
        print(f"{x['model']:26s} {x['plan']:19s} {x['rank']:4d}  {x['measured'] / MIB:11.2f}  {x['report'] / MIB:10.2f}"
              f"  {x['old'] / MIB:11.2f}  {x['old'] / x['measured'] - 1:+6.1%}  {x['new'] / MIB:8.2f}"
              f"  {x['new'] / x['measured'] - 1:+6.1%}")
    same = sum(abs(x["old"] - x["report"]) <= 1.0 for x in found)
    print(f"{len(found)} pipeline ranks; the analytical model without the rule gives the report's prediction on {same}"
          " (all but the interleaved and ZB-H1 ranks of the runs at d42465d, which price the rule)")
    for schedule in ("1f1b", "interleaved", "zbh1"):
        sel = [x for x in found if schedule in x["plan"]]
        if sel:
            for rule in ("old", "new"):
                errs = [abs(x[rule] / x["measured"] - 1) for x in sel]
                print(f"{schedule:12s} {'with' if rule == 'new' else 'without':8s} mean |error| "
                      f"{sum(errs) / len(errs):6.2%}  max {max(errs):6.2%}  within 10%: "
                      f"{sum(e <= 0.10 for e in errs)}/{len(errs)}")


if __name__ == "__main__":
    main(sys.argv[1:])
