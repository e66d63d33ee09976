"""Set 2026-12-06d's H4 and H5 (../2026-12-06e-intel-xeon/preregistered-2026-12-06d.md): the peak memory of each
pipeline rank of the set's pp = 2 plans, as validate priced it (the change: torch's PipelineStage, since 0b6051c
``training.pipeline_runtime: torch`` in validate), against the rule before it (two boundary tensors a rank, what
``pipeline_runtime: megatron`` still prices), both against the same measurement (receive buffers counted since
187e075).

The rule before is priced from the same report: the report's prediction less what the change adds, the
difference of the two runtimes' simulated peaks of the same plan.  The peak of a plan without ZeRO follows from
its order of actions alone, not from their times (parsim.sim.memory), so the difference does not depend on the
compute model; the script checks that, by pricing each plan with the analytical model under torch's runtime and
comparing with the report's profiled prediction.

H4: with the change, every one of the 12 pipeline ranks within 10% of its measured peak.
H5: with the change, the mean |error| over those ranks lower than the rule before's.

    python -W ignore results/2026-12-06f-intel-xeon/heldout_1206d_memory.py \\
        results/2026-12-06f-intel-xeon/heldout-2026-12-06d/*/validation.json \\
        > results/2026-12-06f-intel-xeon/heldout-1206d-memory.txt
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from dataclasses import replace

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.plan import ParallelConfig
from parsim.sim import simulate

MIB = 2 ** 20


def rank_totals(spec, cluster, cfg, runtime: str) -> list[float]:
    training = replace(spec.training, pipeline_runtime=runtime)
    est = simulate(spec.graph, training, cluster, cfg, AnalyticalCompute.for_training(cluster.device, training),
                   keep_timeline=False)
    return [r.memory.total_bytes for r in est.ranks]


def ranks(path: str):
    report = json.load(open(path))
    spec, cluster = load_model(report["model"]), load_cluster(report["cluster"])
    plans = {p["label"]: p for p in report["plans"]}
    rows = [r for r in report["memory_breakdown"] if r["plan"] in plans and plans[r["plan"]]["pp"] == 2]
    for label in dict.fromkeys(r["plan"] for r in rows):
        p = plans[label]
        first = p["split"].split("|")[1].split("..")[0].strip()          # "layers.2..head", or "16..30"
        cut = spec.graph.index(first) if first in spec.graph.names else int(first)
        cfg = ParallelConfig(p["dp"], 2, p["microbatches"], p["schedule"], 1, (0, cut, len(spec.graph)))
        torch_stage, megatron = (rank_totals(spec, cluster, cfg, rt) for rt in ("torch", "megatron"))
        for r in (r for r in rows if r["plan"] == label):
            k = r["rank"]
            new, measured = r["pred_total_bytes"], r["meas_total_bytes"]
            yield dict(model=os.path.basename(os.path.dirname(path)), plan=label, rank=k, measured=measured, new=new,
                       old=new - (torch_stage[k] - megatron[k]), analytical_same=abs(torch_stage[k] - new) <= 1.0)


def main(paths: list[str]) -> None:
    found = [x for path in paths for x in ranks(path)]
    print(f"{'model':28s} {'plan':13s} rank  measured MiB  change MiB   error  before MiB   error")
    for x in found:
        print(f"{x['model']:28s} {x['plan']:13s} {x['rank']:4d}  {x['measured'] / MIB:11.2f}  {x['new'] / MIB:10.2f}"
              f"  {x['new'] / x['measured'] - 1:+6.1%}  {x['old'] / MIB:10.2f}  {x['old'] / x['measured'] - 1:+6.1%}")
    new = [abs(x["new"] / x["measured"] - 1) for x in found]
    old = [abs(x["old"] / x["measured"] - 1) for x in found]
    print(f"{len(found)} pipeline ranks; the analytical model under torch's runtime gives the report's profiled "
          f"prediction on {sum(x['analytical_same'] for x in found)} of them (the peak does not depend on times)")
    print(f"with the change: {sum(e <= 0.10 for e in new)} of {len(new)} within 10% (max |error| {max(new):.1%}): "
          f"H4 {'holds' if all(e <= 0.10 for e in new) else 'fails'}")
    print(f"mean |error| with the change {statistics.fmean(new):.2%}, with the rule before {statistics.fmean(old):.2%}"
          f" (within 10%: {sum(e <= 0.10 for e in old)} of {len(old)}): "
          f"H5 {'holds' if statistics.fmean(new) < statistics.fmean(old) else 'fails'}")


if __name__ == "__main__":
    main(sys.argv[1:])
