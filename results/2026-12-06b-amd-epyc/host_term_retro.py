"""The host-noise term of the CPU step intervals (parsim.sim.interval, source 3) on the committed evidence of
the development sets since profiles were taken in rounds (2026-11-28 on): each run's plan priced again, at
today's model, from the very profiles that priced its pass (the evidence's profiles/pass<k>/), its 90% interval
with and without the term, and whether the run's measured step falls inside.  In-sample: these sets' runs are
what the term was designed on (set 2026-11-28d's third report motivated it).  Held-out evidence is set
2026-12-06's report, not this.

    python results/2026-12-06b-amd-epyc/host_term_retro.py > results/2026-12-06b-amd-epyc/host-term-retro.txt

With evidence folders' validation.json files as arguments, it does the same for those (set 2026-12-06's report:
its runs' intervals without the term, beside the ones validate printed with it, from the same profiles).
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import sys
from dataclasses import replace

from parsim.model.spec import load_model
from parsim.plan import ParallelConfig
from parsim.sim import simulate
from parsim.sim.interval import residual_kind, residuals_for, step_interval
from parsim.validation import Measured, Pricing, check_shard_section, default_cases

FOLDERS = sorted(glob.glob("results/2026-11-28-amd-epyc/heldout-2026-11-28*/*/validation.json")
                 + glob.glob("results/2026-12-04f-intel-xeon/heldout-2026-11-28d/*/validation.json")
                 + glob.glob("results/2026-12-05h-amd-epyc/heldout-2026-11-28d/*/validation.json")
                 + glob.glob("results/2026-12-06-amd-epyc/heldout-2026-11-28d-olmo2-alone/*/validation.json"))


def measured_for(root: str, k: int) -> Measured:
    p = os.path.join(root, "profiles", f"pass{k + 1}")
    layers = {n: os.path.join(p, f"layers.{n}proc.profile.json") for n in (1, 2)
              if os.path.isfile(os.path.join(p, f"layers.{n}proc.profile.json"))}
    coll = os.path.join(p, "collectives.profile.yaml")
    return Measured(layers, (), coll if os.path.isfile(coll) else None)


def each_run(d: dict, spec, first: Pricing):
    """(plan label, pass index, measured step s, config) of every run of a validation.json ``d`` whose plan is
    one of validate's cases for the set, its config as validate made it (``first``: pass 1's pricing)."""
    passes = d["passes"]
    cases = default_cases(spec, first.cluster, first.compute_for(ParallelConfig(first.cluster.devices_per_node, 1, 1)),
                          d["set"], [], first.tp_models, first.profiled, first.ep_models)
    by_label = {c.label: c for c in cases}
    for plan in d["plans"]:
        labels = [plan["label"]] + [x for x in plan.get("pooled_with", "").split(",") if x]
        for i, measured in enumerate(statistics.median(s) for s in plan["measured_steps_s"] if s):
            label, k = labels[i // passes], i % passes
            if label in by_label:
                yield label, k, measured, by_label[label].config


def main() -> None:
    totals = {"with": [0, 0], "without": [0, 0]}
    print(f"{'evidence':78s} {'runs':>4s} {'inside, without':>15s} {'inside, with':>12s} "
          f"{'median upper reach without/with':>31s}")
    for path in sys.argv[1:] or FOLDERS:
        root = os.path.dirname(path)
        d = json.load(open(path))
        passes = d["passes"]
        spec = check_shard_section(load_model(d["model"]))
        kind = residual_kind(spec.graph)
        res = residuals_for(d["cluster"], kind)
        pricing = [Pricing(spec, d["cluster"], d["set"], d["model"], measured_for(root, k)) for k in range(passes)]
        counts = {"with": [0, 0], "without": [0, 0]}
        reach = {"with": [], "without": []}
        for _, k, measured, cfg in each_run(d, spec, pricing[0]):
            priced = pricing[k]
            model = priced.compute_for(cfg)
            step = simulate(spec.graph, spec.training, priced.cluster, cfg, model, strategies=spec.shard,
                            keep_timeline=False).step_time_s
            reps = [simulate(spec.graph, spec.training, priced.cluster, cfg, m, strategies=spec.shard,
                             keep_timeline=False).step_time_s for m in priced.replicates(model)]
            quiet = replace(model.table, rounds=replace(model.table.rounds, canary_s=()))
            for name, table in (("with", model.table), ("without", quiet)):
                band = step_interval(step, reps, table, res, kind)
                counts[name][0] += band.low <= measured <= band.high
                counts[name][1] += 1
                reach[name].append(band.high / step - 1)
        for name in totals:
            totals[name][0] += counts[name][0]
            totals[name][1] += counts[name][1]
        print(f"{root[8:]:78s} {counts['with'][1]:4d} {counts['without'][0]:15d} {counts['with'][0]:12d} "
              f"{statistics.median(reach['without']):+15.1%} / {statistics.median(reach['with']):+.1%}", flush=True)
    w, wo = totals["with"], totals["without"]
    print(f"all: {wo[1]} runs; inside without the term {wo[0]} ({wo[0] / wo[1]:.1%}), with it {w[0]} "
          f"({w[0] / w[1]:.1%})")


if __name__ == "__main__":
    main()
