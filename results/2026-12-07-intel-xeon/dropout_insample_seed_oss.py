"""In sample: set 2026-12-06f's Seed-OSS-style decoder (attention dropout 0.1), whose first report was read before
the change, priced on its own runs with attention's dropout as a CPU runs it (LayerGraph.cpu_graph, fb8a2ce) and as
the fused kernel a GPU runs (parsim before the change), both against the measured peak of each rank of each plan.
The report ran at 4af3322, before what torch's last stage frees at a split backward's I was priced (57d8948): its
prediction equals the fused column on every rank but ZB-H1's last.  The peak of a plan without ZeRO follows from its order of actions alone,
so the analytical model prices it as the profiled one does.  The set is a development set for this change; set
2026-12-07 was drawn before it to measure it out of sample.

    python -W ignore results/2026-12-07-intel-xeon/dropout_insample_seed_oss.py \\
        results/2026-12-06h-intel-xeon/heldout-2026-12-06f/heldout-seed-oss-tiny/validation.json \\
        > results/2026-12-07-intel-xeon/dropout-insample-seed-oss.txt
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from statistics import fmean

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.plan import ParallelConfig
from parsim.sim import simulate

MIB = 2 ** 20


def main(path: str) -> None:
    report = json.load(open(path))
    spec, cluster = load_model(report["model"]), load_cluster(report["cluster"])
    training = replace(spec.training, pipeline_runtime="torch")
    compute = AnalyticalCompute.for_training(cluster.device, training)
    plans = {p["label"]: p for p in report["plans"]}
    print(f"{'plan':19s} rank  measured MiB  report MiB  fused MiB   error  as a CPU runs it MiB   error")
    errors = {"fused": [], "cpu": []}
    for r in report["memory_breakdown"]:
        if r["plan"] not in plans:         # the pick, pooled with the plan it is (dp2)
            continue
        p = plans[r["plan"]]
        cuts = [part.split("..")[0].strip() for part in p["split"].split("|")]
        bounds = tuple(spec.graph.index(c) for c in cuts) + (len(spec.graph),)
        chunks = 2 if p["schedule"] == "interleaved" else 1
        cfg = ParallelConfig(p["dp"], p["pp"], p["microbatches"], p["schedule"], chunks, bounds)
        cpu, fused = ([rank.memory.total_bytes for rank in simulate(g, training, cluster, cfg, compute,
                                                                   keep_timeline=False).ranks]
                      for g in (spec.graph, replace(spec.graph, cpu_graph=None)))
        k, measured = r["rank"], r["meas_total_bytes"]
        errors["fused"].append(abs(fused[k] / measured - 1))
        errors["cpu"].append(abs(cpu[k] / measured - 1))
        print(f"{r['plan']:19s} {k:4d}  {measured / MIB:12.2f}  {r['pred_total_bytes'] / MIB:10.2f}"
              f"  {fused[k] / MIB:9.2f}  {fused[k] / measured - 1:+6.1%}  {cpu[k] / MIB:20.2f}  {cpu[k] / measured - 1:+6.1%}")
    for side in ("fused", "cpu"):
        print(f"{'as a CPU runs it' if side == 'cpu' else 'fused (before)':16s}: mean |error| {fmean(errors[side]):.2%},"
              f" max {max(errors[side]):.2%}, within 5%: {sum(e <= 0.05 for e in errors[side])}/{len(errors[side])}")


if __name__ == "__main__":
    main(sys.argv[1])
