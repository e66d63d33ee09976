"""A/B of three start-up costs, a checkout OLD against this one, alternated, each in a fresh process:

    python results/2026-12-01d-amd-epyc/startup_ab.py OLD_CHECKOUT [ROUNDS]

- load: load_model(examples/resnet50_cifar10_local.yaml) in a fresh interpreter (after torch's import);
- launch: a two-rank ResNet-50 run of 4 steps (dp=2, the planner's split) started by launch() from a
  process that has loaded the model, as `parsim run` has when it starts the ranks;
- fit: parsim.profile.calibrate's fit of the ResNet-50 layer profile beside this script (every
  size), as `parsim plan/simulate --profile` and `parsim validate` fit it.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODEL = os.path.join(ROOT, "examples", "resnet50_cifar10_local.yaml")

LOAD = f"""
import time, torch
t = time.time()
from parsim.model.spec import load_model
load_model({MODEL!r})
print(time.time() - t)
"""
LAUNCH = f"""
import sys, time
from parsim.exec.launch import launch
from parsim.model.spec import load_model
load_model({MODEL!r})
t = time.time()
assert launch([sys.argv[1], "--steps", "4", "--out", sys.argv[2], "--timeout", "300"], 2, 300, quiet=True) == 0
print(time.time() - t)
"""
FIT = f"""
import time
from parsim.cost.compute import load_profile_table
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.profile import calibrate
spec, cluster = load_model({MODEL!r}), load_cluster("local-cpu")
table = load_profile_table({os.path.join(HERE, "layers.2proc.profile.json")!r})
t = time.time()
device = calibrate._fit(spec.graph, table, cluster.device, spec.training.dtype, 6)
print(time.time() - t, repr(device.kernels), device.memory_efficiency)
"""


def timed(checkout: str, code: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=tempfile.gettempdir(), check=True,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": checkout})
    return out.stdout.strip().splitlines()[-1]


def main() -> int:
    old, rounds = os.path.abspath(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3
    work = tempfile.mkdtemp(prefix="startup-ab-")
    plan = os.path.join(work, "dp2.json")
    cli = "import sys; from parsim.cli import main; sys.exit(main(sys.argv[1:]))"
    subprocess.run([sys.executable, "-c", cli, "simulate", MODEL, "--cluster", "local-cpu", "--dp", "2", "--pp", "1",
                    "--microbatches", "1", "-o", plan, "--json"], check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": ROOT})
    fits = {}
    for r in range(rounds):
        for side, checkout in (("old", old), ("new", ROOT)):
            load = float(timed(checkout, LOAD))
            launch = float(timed(checkout, LAUNCH, plan, os.path.join(work, f"run-{side}-{r}")))
            fit, *fitted = timed(checkout, FIT).split(" ", 1)
            fits.setdefault(side, set()).add(fitted[0])
            print(f"round {r + 1} {side}: load {load:.2f} s, launch {launch:.2f} s, fit {float(fit):.2f} s", flush=True)
    print("the two fits give the same device:", fits["old"] == fits["new"] and len(fits["new"]) == 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
