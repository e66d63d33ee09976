"""Planner speed: whole searches (search_time_s: the search alone, after model extraction).

    python benchmarks/bench_planner.py            # the goals, then growth with layers and devices
    python benchmarks/bench_planner.py --goals    # the goals alone; results/bench_planner_goals.txt too

The goals (issue 40), each in seconds and as a ratio to an 8-device ResNet-50 search (ImageNet,
one Ascend 910 server) timed in the same run, so that a slower or faster machine shows as the
reference moving and the ratios holding:

- DeepSeek-V3 (examples/deepseek_v3.yaml) on 2,048 H100s, dgx-h100-superpod:256x8: under 5 s;
- GPT-3 175B on 1,024 A100s, dgx-a100:128x8: under 2 s;
- Llama 3 405B at 8,192 tokens a sequence on 16,384 H100s, dgx-h100-superpod:2048x8: under 3 s;
- a shipped model on a cluster of 100,000 GPUs or more: Llama 3 405B on 131,072 H100s,
  dgx-h100-superpod:16384x8 (a model uses a cluster whose devices factor into dp x pp x tp x cp:
  Llama 3 405B's batch of 2,048 sequences and 126 cut units cannot fill 100,000 = 2^5 x 5^5
  devices, 2^17 = 8 x 64 x 256 it can): under 10 s;
- ResNet-50 on 1,024 Ascend 910s, ascend910:128x8: under 0.2 s.

Medians of 3 cold runs, each in a fresh process as `parsim plan` runs (the search's own time,
PlanResult.search_time_s), with the runs' range beside and how many of them were under the goal.
Timings are the machine's: run it on a quiet one.  ResNet-50 on 64 DGX A100 nodes is kept from the
earlier goals (under 1 s).  Then how search time grows with layers and devices.
"""

import json
import statistics
import subprocess
import sys
import tempfile

from parsim.cost.compute import AnalyticalCompute
from parsim.errors import DoesNotFitError
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search.planner import plan


def _one(model_path: str, cluster_spec: str) -> dict:
    """One search in this process (run in a fresh interpreter by ``search``)."""
    spec = load_model(model_path)
    cluster = load_cluster(cluster_spec)
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    try:
        r = plan(spec, cluster, compute, progress=False)
    except DoesNotFitError as e:
        return {"search_time_s": float("nan"), "outcome": "nothing fits: " + str(e).split(":")[1].split(";")[0].strip()}
    c = r.chosen.config
    return {"search_time_s": r.search_time_s,
            "outcome": (f"dp={c.dp} tp={c.tp}{f' ({c.tp_layout})' if c.tp > 1 else ''} pp={c.pp} m={c.microbatches} "
                        f"{c.schedule}{' recompute' if c.recompute else ''}; simulated {r.simulated}/{r.considered}")}


def search(model_path: str, cluster_spec: str, repeats: int = 3):
    """(median search_time_s, every run's, the pick) over ``repeats`` cold runs: each in a fresh
    interpreter, as `parsim plan` runs (each with its own model extraction and pricing context,
    parsim.sim.prices)."""
    runs = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, __file__, "--one", model_path, cluster_spec], check=True,
                             capture_output=True, text=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    times = sorted(r["search_time_s"] for r in runs)
    return statistics.median(times), times, runs[-1]["outcome"]


def gpt_yaml(layers, batch=512):
    f = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    f.write(f"model: gpt\nargs: {{preset: gpt3-1.3b, layers: {layers}}}\n"
            f"training: {{global_batch_size: {batch}, dtype: fp16, optimizer: adam}}\n")
    f.close()
    return f.name


GOALS = [("DeepSeek-V3, 2,048 H100", "examples/deepseek_v3.yaml", "dgx-h100-superpod:256x8", 5.0),
         ("GPT-3 175B, 1,024 A100", "examples/gpt3_175b.yaml", "dgx-a100:128x8", 2.0),
         ("Llama 3 405B, 16,384 H100", "examples/llama3_405b.yaml", "dgx-h100-superpod:2048x8", 3.0),
         ("Llama 3 405B, 131,072 H100", "examples/llama3_405b.yaml", "dgx-h100-superpod:16384x8", 10.0),
         ("ResNet-50, 1,024 Ascend 910", "examples/resnet50_imagenet.yaml", "ascend910:128x8", 0.2),
         ("ResNet-50, 64 DGX A100 nodes", "examples/resnet50_imagenet.yaml", "dgx-a100:64x8", 1.0)]
REFERENCE = ("ResNet-50, 8 Ascend 910", "examples/resnet50_imagenet.yaml", "ascend910:1x8")


def goals(repeats: int = 3) -> list[str]:
    """One line per goal: the median seconds with the runs' range (this host's spread, the
    interval a single figure hides), the ratio to the reference search, the goal, met or by how
    much not (by the median, with how many runs were under it), and the pick; the reference first."""
    label, spec, cluster = REFERENCE
    ref, times, outcome = search(spec, cluster, repeats)
    lines = [f"  {label:30s} {ref:7.3f} s {_spread(times)}   1.0x  (the reference)  {outcome}"]
    print(lines[-1], flush=True)
    for label, spec, cluster, goal in GOALS:
        t, times, outcome = search(spec, cluster, repeats)
        under = sum(x < goal for x in times)
        verdict = "met" if t < goal else f"NOT met, {t / goal:.1f}x the goal"
        lines.append(f"  {label:30s} {t:7.3f} s {_spread(times)} {t / ref:6.1f}x  (goal < {goal:g} s: {verdict}; "
                     f"{under} of {len(times)} runs under)  {outcome}")
        print(lines[-1], flush=True)
    return lines


def _spread(times) -> str:
    return f"[{min(times):.3f}-{max(times):.3f}]"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(_one(sys.argv[2], sys.argv[3])))
        sys.exit(0)
    print("goals (cold: each search in a fresh process; ratio to the reference search of this run):")
    lines = goals()
    if sys.argv[1:2] == ["--goals"]:
        import os
        import time
        from parsim.fileio import write_text
        from parsim.hardware.machine import this_machine
        os.makedirs("results", exist_ok=True)
        here = this_machine()           # the CPU as /proc/cpuinfo names it: timings are this host's
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        head = (f"python benchmarks/bench_planner.py --goals  ({time.strftime('%Y-%m-%d %H:%M')}, {here.cpu_model}, "
                f"{here.cores} cores{f'; at {commit}' if commit else ''})\n")
        write_text("results/bench_planner_goals.txt", head + "\n".join(lines) + "\n")
        sys.exit(0)
    resnet = "examples/resnet50_imagenet.yaml"
    print("growth with devices (ResNet-50 ImageNet, Ascend 910):")
    for nodes in (1, 8, 32, 128):
        t, _, outcome = search(resnet, f"ascend910:{nodes}x8")
        print(f"  {nodes * 8:5d} devices {t:6.3f} s  {outcome}")
        sys.stdout.flush()
    print("growth with layers (GPT, hidden 2048, batch 512, 128 A100):")
    for layers in (12, 24, 48, 96):
        t, _, outcome = search(gpt_yaml(layers), "dgx-a100:16x8")
        print(f"  {layers:3d} layers  {t:6.3f} s  {outcome}")
        sys.stdout.flush()
