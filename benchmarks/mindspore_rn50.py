"""MindSpore as an independent executor: the seeds' data-parallel ResNet-50 (CIFAR-10-shaped, 32 px,
examples/resnet50_cifar10_local.yaml) planned by parsim, exported with `parsim export --to
mindspore`, run by MindSpore on this CPU with 1 and 2 workers (msrun), and predicted by parsim's
simulator from a layer profile timed in MindSpore (parsim.profile.mindspore_cells).

For each worker count N: the plan (dp = N), its MindSpore fragment, a profile by N concurrent
MindSpore profilers (as the run's workers share the machine), the run's step times, and the
prediction with the interval the simulator draws from the profile's rounds (parsim.cost.profile_rounds),
against the run's steps (median and interquartile range after 3 warm-up steps).  Written under results/<date>-<cpu>/mindspore-rn50/; needs the
[mindspore] extra.  A quiet machine's run (about 10 minutes on 2 cores):

    python benchmarks/mindspore_rn50.py
    python benchmarks/mindspore_rn50.py --steps 4 --repeats 1 --rounds 3 --batch 8 --out /tmp/ms-check   # a check
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "parsim", "profile", "mindspore_cells.py")
MODEL = os.path.join(ROOT, "examples", "resnet50_cifar10_local.yaml")


def sh(argv: list[str], **kw) -> str:
    run = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, **kw)
    if run.returncode:
        raise SystemExit(f"{' '.join(argv)} failed ({run.returncode}):\n{run.stderr[-3000:]}")
    return run.stdout


def msrun(n: int, port: int, logs: str, args: list[str]) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": ROOT}
    sh(["msrun", f"--worker_num={n}", f"--local_worker_num={n}", f"--master_port={port}", f"--log_dir={logs}",
        "--join=True", WORKER] + args, env=env, timeout=3600)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=12, help="steps per run, the first 3 warm-up")
    p.add_argument("--repeats", type=int, default=3, help="profile repeats per layer, size and round")
    p.add_argument("--rounds", type=int, default=5, help="profile rounds (the prediction's interval comes from them)")
    p.add_argument("--batch", type=int, default=32, help="global batch (examples/resnet50_cifar10_local.yaml: 32)")
    p.add_argument("--sizes", default=None, help="profiled micro-batch sizes (default: each run's batch per device)")
    p.add_argument("--out", default=None, help="output folder (default results/<date>-<cpu>/mindspore-rn50)")
    a = p.parse_args()
    from parsim.hardware.machine import this_machine
    from parsim.report.evidence import slug

    machine = this_machine()
    out = a.out or os.path.join(ROOT, "results", f"{datetime.date.today().isoformat()}-{slug(machine.cpu_model)}",
                                "mindspore-rn50")
    os.makedirs(out, exist_ok=True)
    model = os.path.join(out, "model.yaml")
    with open(MODEL) as f, open(model, "w") as g:
        g.write(f.read().replace("global_batch_size: 32", f"global_batch_size: {a.batch}"))
    parsim = [sys.executable, "-m", "parsim.cli"]
    rows = []
    for n in (1, 2):
        plan, fragment = os.path.join(out, f"plan_dp{n}.json"), os.path.join(out, f"plan_dp{n}.mindspore.py")
        sh(parsim + ["simulate", model, "--cluster", f"local-cpu:1x{n}", "--dp", str(n), "-o", plan])
        sh(parsim + ["export", plan, "--to", "mindspore", "-o", fragment])
        sizes = a.sizes or str(a.batch // n)
        profile = os.path.join(out, f"profile_dp{n}.json")
        msrun(n, 8200 + n, os.path.join(out, f"logs_profile_dp{n}"),
              ["profile", "--sizes", sizes, "--repeats", str(a.repeats), "--rounds", str(a.rounds), "-o", profile])
        measured = os.path.join(out, f"measured_dp{n}.json")
        msrun(n, 8210 + n, os.path.join(out, f"logs_run_dp{n}"),
              ["train", "--fragment", fragment, "--steps", str(a.steps), "-o", measured])
        est = json.loads(sh(parsim + ["simulate", plan, "--profile", profile, "--json"]))
        # the profiled interval (parsim.sim.interval), as Estimate.to_json writes it; a point where none
        interval = est.get("step_time_band") or {"low": est["step_time_s"], "high": est["step_time_s"]}
        with open(measured) as f:
            all_steps = json.load(f)["step_s"]
        steps = all_steps[3:] or all_steps[-1:]
        qs = statistics.quantiles(steps, n=4) if len(steps) > 1 else [steps[0]] * 3
        rows.append({"workers": n, "plan": os.path.basename(plan), "fragment": os.path.basename(fragment),
                     "predicted_s": est["step_time_s"], "predicted_interval_s": [interval["low"], interval["high"]],
                     "measured_median_s": statistics.median(steps), "measured_iqr_s": [qs[0], qs[2]],
                     "error": est["step_time_s"] / statistics.median(steps) - 1,
                     "within": interval["low"] <= qs[2] and qs[0] <= interval["high"]})
    summary = {"command": " ".join(["python", "benchmarks/mindspore_rn50.py"] + sys.argv[1:]),
               "machine": machine.__dict__, "rows": rows}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    for r in rows:
        print(f"dp={r['workers']}: predicted {r['predicted_s']:.4g} s [{r['predicted_interval_s'][0]:.4g}, "
              f"{r['predicted_interval_s'][1]:.4g}], measured {r['measured_median_s']:.4g} s "
              f"[{r['measured_iqr_s'][0]:.4g}, {r['measured_iqr_s'][1]:.4g}] ({r['error']:+.1%}, "
              f"{'intervals overlap' if r['within'] else 'intervals apart'})")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
