"""Re-price a finished ``parsim validate`` run's plans with the calibrated analytical model, from its
saved files alone (validation.json, <plan>.plan.json, the layer profiles): nothing is measured
again.  It answers how the calibrated analytical column would read under the current cost model.

    python benchmarks/reprice_analytical.py runs/val-a [--model examples/resnet50_cifar10_local.yaml]

Each plan is priced as validate prices it (parsim.validation.Pricing): the analytical model
calibrated to the profile taken at the plan's concurrency (the nearest one), without the plan's own
micro-batch size (leave-one-size-out, as validate now prices it), simulated for the
plan's configuration with each pass's profiles, their median against the run's median measured
step time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from parsim.model.spec import load_model  # noqa: E402
from parsim.plan import load_plan  # noqa: E402
from parsim.validation import Measured, Pricing, predict  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", help="a parsim validate output folder")
    ap.add_argument("--model", help="model.yaml (default: the one validation.json names)")
    args = ap.parse_args(argv)
    out = json.load(open(os.path.join(args.run, "validation.json")))
    model_path = args.model or out["model"]
    spec = load_model(model_path)
    # each pass's profiles as validate recorded them (older runs: one set, beside validation.json)
    passes = out.get("measured_per_pass") or [{"layers": {n: os.path.join(args.run, f"layers.{n}proc.profile.json")
                                                         for n in out["profiles"]}}]
    pricing = [Pricing(spec, out["cluster"], out["set"], model_path,
                       Measured({int(n): path for n, path in p["layers"].items()}, tuple(p.get("tp", ())),
                                p.get("collectives")))
               for p in passes]
    errors = []
    print(f"{'plan':16s} {'measured':>9s} {'was':>9s} {'now':>9s} {'error':>7s}")
    for row in out["plans"]:
        cfg = load_plan(os.path.join(args.run, f"{row['label']}.plan.json")).config
        t = statistics.median(predict(spec, p, cfg, analytical=True).step_time_s for p in pricing)
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
