"""The profiled model's past errors, as the residual table its predictions' intervals read
(parsim.sim.interval.Residuals): ``python -m parsim.report.residuals DIR ... -o FILE``.

Each DIR is a validation's evidence (``validation.json`` below it, from ``parsim validate``).
Every run of every plan gives one step-time error, log(its median step / the prediction of its
pass, priced from the profile taken before that pass), and every plan one peak-memory error,
log(measured / predicted).  Rows are grouped by model kind ("moe" where the model has experts,
else "dense").  Only development sets belong here: a set whose errors set the intervals is one
the model was fitted to, and its coverage is no evidence.
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import math
import os
import statistics
import sys

from parsim.fileio import write_text
from parsim.model.spec import load_model


def errors(validation: dict) -> tuple[list[float], list[float]]:
    """(step, memory) log errors of one validation.json (module docstring)."""
    step, memory = [], []
    for row in validation["plans"]:
        runs, predicted = row.get("measured_steps_s") or [], row.get("predicted_runs_s") or []
        if len(runs) == len(predicted):
            step += [math.log(statistics.median(r) / p) for r, p in zip(runs, predicted) if r and p > 0]
        if row.get("measured_peak_bytes") and row.get("predicted_peak_bytes"):
            memory.append(math.log(row["measured_peak_bytes"] / row["predicted_peak_bytes"]))
    return step, memory


def table(dirs: list[str]) -> dict:
    step: dict = {"dense": [], "moe": []}
    memory: dict = {"dense": [], "moe": []}
    sets: dict = {"dense": [], "moe": []}
    machines, clusters = set(), set()
    for d in dirs:
        files = sorted(glob.glob(os.path.join(d, "**", "validation.json"), recursive=True))
        if not files:
            raise SystemExit(f"parsim.report.residuals: {d}: no validation.json below it")
        for path in files:
            with open(path) as f:
                v = json.load(f)
            kind = "moe" if load_model(v["model"]).graph.moe else "dense"
            s, m = errors(v)
            step[kind] += s
            memory[kind] += m
            machines.add(f"{v['machine']['cpu_model']} ({v['machine']['cores']} cores)")
            clusters.add(v["cluster"].split(":")[0])
            name = os.path.basename(os.path.normpath(d))
            if name not in sets[kind]:
                sets[kind].append(name)
    if len(clusters) != 1:
        raise SystemExit(f"parsim.report.residuals: the validations ran on {sorted(clusters)}: give one cluster's")
    return {"cluster": clusters.pop(), "machine": "; ".join(sorted(machines)), "sets": sets,
            "step": step, "memory": memory}


def yaml_text(t: dict, command: str) -> str:
    def flow(v):
        return "[" + ", ".join(f"{x:.5f}" for x in v) + "]"
    lines = ["# The profiled model's errors on development sets: log(measured / predicted), one per run (step",
             "# time) and per plan (peak memory), read by parsim.sim.interval for every profiled prediction's",
             "# interval on this cluster.  Development sets only: their coverage is no evidence.",
             f"# Regenerate: {command}",
             "schema_version: 1",
             f"cluster: {t['cluster']}",
             f"machine: '{t['machine']}'",
             "sets:",
             *(f"  {k}: [" + ", ".join(v) + "]" for k, v in t["sets"].items()),
             f"generated: '{datetime.date.today().isoformat()}'",
             f"command: '{command}'",
             "step_log_errors:"]
    lines += [f"  {k}: {flow(v)}" for k, v in t["step"].items()]
    lines.append("memory_log_errors:")
    lines += [f"  {k}: {flow(v)}" for k, v in t["memory"].items()]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m parsim.report.residuals", description=__doc__.splitlines()[0])
    p.add_argument("dirs", nargs="+", help="validation evidence folders of development sets")
    p.add_argument("-o", "--output", required=True, help="hardware_profiles/residuals/<cluster>.yaml")
    args = p.parse_args(argv)
    command = "python -m parsim.report.residuals " + " ".join(args.dirs) + f" -o {args.output}"
    write_text(args.output, yaml_text(table(args.dirs), command))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
