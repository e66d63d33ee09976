"""Where a pipeline plan's step time goes, predicted against measured, action kind by action kind: for each pp = 2
plan of a validate run and each pass, the pass's own profiled prediction (parsim.validation.predict, the profiles
validate measured right before that pass) and the run's measured actions (measured.json: one step after warm-up,
each action's start and end on its rank's clock), summed per rank by kind (F, I, W, B, the optimizer) and the rest
of the step (waiting on a neighbour, sends and receives, the step's own overhead).

    python -W ignore results/2026-12-07b-amd-epyc/pipeline_actions.py /work/runs/heldout-1207-glm_tiny \\
        /work/runs/heldout-1207-apertus_tiny /work/runs/heldout-1207-deepseek_v2_dense_tiny \\
        > results/2026-12-07b-amd-epyc/pipeline-actions-1207.txt

(validate's out dirs: the runs' measured.json are not committed; their validation.json are, under
heldout-2026-12-07/.)  A diagnosis of where the step-time error sits, in sample: set 2026-12-07's runs, read after
its report, a development set from then on.
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from dataclasses import replace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06g-intel-xeon"))

from parsim.model.spec import load_model  # noqa: E402
from parsim.schedule.actions import Action  # noqa: E402
from parsim.validation import Measured, Pricing, predict  # noqa: E402
from runtime_sends_insample import report_plans  # noqa: E402

KINDS = ("F", "B", "I", "W", "OPTIMIZER")


def per_kind(records, ranks: int) -> list[dict]:
    """Per rank: seconds of each compute kind, from (rank, Action, stream, t0, t1) records."""
    out = [defaultdict(float) for _ in range(ranks)]
    for r, a, stream, t0, t1 in records:
        if stream == "compute" and a.kind.value in KINDS:
            out[r][a.kind.value] += t1 - t0
    return out


def main(dirs: list[str]) -> None:
    pooled = defaultdict(lambda: [0.0, 0.0])            # (plan, rank, kind) -> [predicted s, measured s]
    print(f"{'model':24s} {'plan':14s} pass rank  {'kind':9s} pred ms  meas ms   ratio")
    for d in dirs:
        report = json.load(open(os.path.join(d, "validation.json")))
        spec = load_model(report["model"])
        spec = replace(spec, training=replace(spec.training, pipeline_runtime="torch"))
        passes = [Pricing(spec, report["cluster"], report["set"], report["model"],
                          Measured({int(n): p for n, p in m["layers"].items()}, tuple(m["tp"]), m["collectives"],
                                   tuple(m["ep"]))) for m in report["measured_per_pass"]]
        for _, _, label, cfg, _ in report_plans(os.path.join(d, "validation.json"), keep=lambda p: p["pp"] == 2):
            for k, priced in enumerate(passes):
                est = predict(spec, priced, cfg)
                measured = json.load(open(os.path.join(d, f"{label}.pass{k + 1}", "measured.json")))
                rec = [(r, Action.parse(a), s, t0, t1) for r, a, s, t0, t1 in measured["actions"]]
                pred, meas = per_kind(est.timeline.records, cfg.pp), per_kind(rec, cfg.pp)
                for rank in range(cfg.pp):
                    rows = [(kind, pred[rank][kind], meas[rank][kind]) for kind in KINDS
                            if pred[rank][kind] or meas[rank][kind]]
                    busy_p = sum(v for _, v, _ in rows)
                    busy_m = sum(v for _, _, v in rows)
                    rows.append(("rest", est.step_time_s - busy_p, measured["step_time_s"] - busy_m))
                    rows.append(("step", est.step_time_s, measured["step_time_s"]))
                    for kind, p, m in rows:
                        pooled[(label, rank, kind)][0] += p
                        pooled[(label, rank, kind)][1] += m
                        print(f"{spec.name:24s} {label:14s} {k + 1:4d} {rank:4d}  {kind:9s} {p * 1e3:7.1f}"
                              f"  {m * 1e3:7.1f}  {m / p if p else float('nan'):6.2f}")

    print("\npooled over the models and passes: measured / predicted seconds")
    for (label, rank, kind), (p, m) in sorted(pooled.items()):
        print(f"{label:14s} rank {rank}  {kind:9s} {p * 1e3:8.0f} ms  {m * 1e3:8.0f} ms"
              f"  {m / p if p else float('nan'):5.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
