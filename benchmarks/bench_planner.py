"""Planner speed: whole searches (search_time_s: the search alone, after model extraction).

    python benchmarks/bench_planner.py

Goals: ResNet-50 on 1024 Ascend 910 (128 x 8) and on 64 DGX A100 nodes under 1 s each; a
GPT-3-175B-shaped model on 1024 GPUs under 10 s (set before tensor parallelism, recomputation and
the operator layouts multiplied its search space by about 20).  Then how search time grows with
layers and devices.  Medians of 3 runs.
"""

import statistics
import sys
import tempfile
import time

from parsim.cost.compute import AnalyticalCompute
from parsim.errors import DoesNotFitError
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.search.planner import plan


def search(spec, cluster_spec, repeats=3):
    cluster = load_cluster(cluster_spec)
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    times, outcome = [], ""
    for _ in range(repeats):
        t = time.perf_counter()
        try:
            r = plan(spec, cluster, compute, progress=False)
            c = r.chosen.config
            outcome = (f"dp={c.dp} tp={c.tp}{f' ({c.tp_layout})' if c.tp > 1 else ''} pp={c.pp} m={c.microbatches} "
                       f"{c.schedule}{' recompute' if c.recompute else ''}; "
                       f"simulated {r.simulated}/{r.considered}")
        except DoesNotFitError as e:
            outcome = "nothing fits: " + str(e).split(":")[1].split(";")[0].strip()
        times.append(time.perf_counter() - t)
    return statistics.median(times), outcome


def gpt_yaml(layers, batch=512):
    f = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    f.write(f"model: gpt\nargs: {{preset: gpt3-1.3b, layers: {layers}}}\n"
            f"training: {{global_batch_size: {batch}, dtype: fp16, optimizer: adam}}\n")
    f.close()
    return f.name


if __name__ == "__main__":
    resnet = load_model("examples/resnet50_imagenet.yaml")
    gpt3 = load_model("examples/gpt3_175b.yaml")
    print("goals:")
    for label, spec, cluster, goal in [("ResNet-50, 1024 Ascend 910", resnet, "ascend910:128x8", 1),
                                       ("ResNet-50, 64 DGX A100 nodes", resnet, "dgx-a100:64x8", 1),
                                       ("GPT-3 175B, 1024 A100", gpt3, "dgx-a100:128x8", 10)]:
        t, outcome = search(spec, cluster)
        print(f"  {label:30s} {t:6.3f} s (goal < {goal} s)  {outcome}")
        sys.stdout.flush()
    print("growth with devices (ResNet-50 ImageNet, Ascend 910):")
    for nodes in (1, 8, 32, 128):
        t, outcome = search(resnet, f"ascend910:{nodes}x8")
        print(f"  {nodes * 8:5d} devices {t:6.3f} s  {outcome}")
        sys.stdout.flush()
    print("growth with layers (GPT, hidden 2048, batch 512, 128 A100):")
    for layers in (12, 24, 48, 96):
        t, outcome = search(load_model(gpt_yaml(layers)), "dgx-a100:16x8")
        print(f"  {layers:3d} layers  {t:6.3f} s  {outcome}")
        sys.stdout.flush()
