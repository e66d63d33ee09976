"""Planner speed: whole searches (search_time_s: the search alone, after model extraction).

    python benchmarks/bench_planner.py            # the goals, then growth with layers and devices
    python benchmarks/bench_planner.py --goals    # the goals alone

Goals (issue 15): ResNet-50 on 1024 Ascend 910 (128 x 8) under 0.2 s; GPT-3 175B on 1024 A100s
under 2 s; Llama-3 405B at 8192 tokens per sequence on 16,384 H100s under 5 s, on the multi-tier
SuperPOD fabric (dgx-h100-superpod:2048x8, rail-optimised leaf/spine; needs the [hf] extra).
ResNet-50 on 64 DGX A100 nodes is kept from the earlier goals (under 1 s).  Then how search
time grows with layers and devices.
Medians of 3 cold runs, each in a fresh process as `parsim plan` runs.
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
    """Median search_time_s over ``repeats`` cold runs: each in a fresh interpreter, as `parsim plan`
    runs, so that no memo (strategy searches, sharded graphs, kernel prices) carries over."""
    runs = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, __file__, "--one", model_path, cluster_spec], check=True,
                             capture_output=True, text=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    return statistics.median(r["search_time_s"] for r in runs), runs[-1]["outcome"]


def gpt_yaml(layers, batch=512):
    f = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    f.write(f"model: gpt\nargs: {{preset: gpt3-1.3b, layers: {layers}}}\n"
            f"training: {{global_batch_size: {batch}, dtype: fp16, optimizer: adam}}\n")
    f.close()
    return f.name


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(_one(sys.argv[2], sys.argv[3])))
        sys.exit(0)
    resnet = "examples/resnet50_imagenet.yaml"
    gpt3 = "examples/gpt3_175b.yaml"
    print("goals (cold: each search in a fresh process):")
    for label, spec, cluster, goal in [("ResNet-50, 1024 Ascend 910", resnet, "ascend910:128x8", 0.2),
                                       ("ResNet-50, 64 DGX A100 nodes", resnet, "dgx-a100:64x8", 1),
                                       ("GPT-3 175B, 1024 A100", gpt3, "dgx-a100:128x8", 2),
                                       ("Llama-3 405B, 16384 H100", "examples/llama3_405b.yaml",
                                        "dgx-h100-superpod:2048x8", 5)]:
        t, outcome = search(spec, cluster)
        print(f"  {label:30s} {t:6.3f} s (goal < {goal} s)  {outcome}")
        sys.stdout.flush()
    if sys.argv[1:2] == ["--goals"]:
        sys.exit(0)
    print("growth with devices (ResNet-50 ImageNet, Ascend 910):")
    for nodes in (1, 8, 32, 128):
        t, outcome = search(resnet, f"ascend910:{nodes}x8")
        print(f"  {nodes * 8:5d} devices {t:6.3f} s  {outcome}")
        sys.stdout.flush()
    print("growth with layers (GPT, hidden 2048, batch 512, 128 A100):")
    for layers in (12, 24, 48, 96):
        t, outcome = search(gpt_yaml(layers), "dgx-a100:16x8")
        print(f"  {layers:3d} layers  {t:6.3f} s  {outcome}")
        sys.stdout.flush()
