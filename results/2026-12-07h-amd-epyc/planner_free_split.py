"""The planner's pick without a memory cap and under a raw capacity 10% over that pick's peak, for
tests/test_planner.py's ResNet-50 (examples/resnet50_cifar10_seeds_split.yaml) on 8 Ascend 910 (tp 1, ZeRO 0,
top 3): under the cap, candidates whose time-optimal (min-max) split overruns it go to the memory-constrained
partition, and one of its splits simulates faster than every split the free search tried: the free search's pick
is not the fastest plan the planner can price.  The three fastest of each search, with their splits.

    python -W ignore results/2026-12-07h-amd-epyc/planner_free_split.py \
        > results/2026-12-07h-amd-epyc/planner-free-split.txt
"""

from __future__ import annotations

import tempfile

import yaml

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search.planner import Constraints, plan

MIB = 2 ** 20


def show(title: str, result) -> None:
    print(title)
    for c in result.ranked[:3]:
        cfg = c.config
        print(f"  dp {cfg.dp} pp {cfg.pp} {cfg.schedule:6s} m {cfg.microbatches}  split {cfg.bounds}  "
              f"{c.estimate.step_time_s * 1e3:6.2f} ms  peak {c.peak_memory_bytes / MIB:7.2f} MiB")


def main() -> None:
    spec = load_model("examples/resnet50_cifar10_seeds_split.yaml")
    fixed = Constraints(tp=1, top=3, zero=0)
    big = load_cluster("ascend910:1x8")
    free = plan(spec, big, AnalyticalCompute.for_training(big.device, spec.training), fixed, progress=False)
    show("no cap (ascend910, 32 GiB):", free)
    raw = int(free.chosen.peak_memory_bytes * 1.1)
    profile = yaml.safe_load(open("hardware_profiles/ascend910.yaml"))
    profile["device"]["memory"] = raw
    profile["device"]["memory_reserved"] = {"runtime_context": 0, "collective_buffers": 0,
                                            "fragmentation_fraction": 0.0}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump(profile, f)
        f.flush()
        capped = load_cluster(f.name)
        show(f"raw capacity {raw / MIB:.2f} MiB (1.1 x the free pick's peak, nothing reserved):",
             plan(spec, capped, AnalyticalCompute.for_training(capped.device, spec.training), fixed, progress=False))


if __name__ == "__main__":
    main()
