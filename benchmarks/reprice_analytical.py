"""Re-price a finished ``parsim validate`` run's plans with the calibrated analytical model, from its
saved files alone (validation.json, <plan>.plan.json, the layer profiles): nothing is measured
again.  It answers how the calibrated analytical column would read under the current cost model.

    python benchmarks/reprice_analytical.py runs/val-a [--model examples/resnet50_cifar10_local.yaml]

Each plan is priced as validate prices it (parsim.validation): the analytical model calibrated to
the profile taken at the plan's concurrency (the nearest one), simulated for the plan's
configuration, against the run's median measured step time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from parsim.cost.compute import load_profile_table  # noqa: E402
from parsim.hardware import load_cluster  # noqa: E402
from parsim.model.spec import load_model  # noqa: E402
from parsim.plan import load_plan  # noqa: E402
from parsim.profile.calibrate import profiled_compute  # noqa: E402
from parsim.sim import simulate  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a parsim validate output folder")
    ap.add_argument("--model", help="model.yaml (default: the one validation.json names)")
    args = ap.parse_args(argv)
    out = json.load(open(os.path.join(args.run, "validation.json")))
    spec = load_model(args.model or out["model"])
    cluster = load_cluster(out["cluster"])
    models = {}
    for n in out["profiles"]:      # the profile files, found beside validation.json
        table = load_profile_table(os.path.join(args.run, f"layers.{n}proc.profile.json"))
        models[int(n)] = profiled_compute(table, spec.graph, cluster.device, spec.training.dtype).fallback
    errors = []
    print(f"{'plan':16s} {'measured':>9s} {'was':>9s} {'now':>9s} {'error':>7s}")
    for row in out["plans"]:
        plan = load_plan(os.path.join(args.run, f"{row['label']}.plan.json"))
        n = min(plan.config.world_size, cluster.devices_per_node)
        model = models[min(models, key=lambda k: (abs(k - n), -k))]
        t = simulate(spec.graph, spec.training, cluster, plan.config, model, strategies=spec.shard,
                     keep_timeline=False).step_time_s
        err = t / row["measured_step_s"] - 1
        errors.append(err)
        print(f"{row['label']:16s} {row['measured_step_s']:9.3f} {row['analytical_step_s']:9.3f} {t:9.3f} {err:+7.1%}")
    mape = statistics.mean(abs(e) for e in errors)
    worst = max(errors, key=abs)
    print(f"calibrated analytical: step-time MAPE {mape:.1%}, max {abs(worst):.1%} "
          f"(was {out['mape_step_time_analytical']:.1%}, max {out['max_error_step_time_analytical']:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
