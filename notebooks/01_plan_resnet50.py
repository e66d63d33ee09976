# ---
# jupyter:
#   jupytext:
#     notebook_metadata_filter: -jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Planning ResNet-50 on an Ascend 910 server
#
# This notebook walks through one planning session with parsim:
#
# 1. load the model and the cluster;
# 2. sweep the micro-batch count and watch the bubble and memory;
# 3. trade data parallelism against pipeline parallelism;
# 4. compare the seeds' hand split (head..layer2 | layer3..fc) with the planner's split.
#
# Every number comes from the simulator (`parsim.sim.simulate`) with the analytical cost model.
# It runs from any folder of the checkout (`jupyter execute notebooks/01_plan_resnet50.ipynb`, or
# JupyterLab, which starts the kernel in `notebooks/`): the first cell finds the repository root.
# The outputs shipped with it come from `python -m parsim.report.notebooks`, and the test suite
# checks they are current (`tests/test_notebooks.py`).

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

import parsim
from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.plan import ParallelConfig, bounds_from_assignment
from parsim.search.planner import Constraints, plan
from parsim.search.resolve import resolve_config
from parsim.sim import simulate

# the checkout's root: this folder or the nearest one above it holding examples/ and parsim/, else
# the checkout parsim is imported from (an editable install), wherever the kernel started
ROOT = next(p for p in (Path.cwd(), *Path.cwd().parents, Path(parsim.__file__).resolve().parent.parent)
            if (p / "examples").is_dir() and (p / "parsim").is_dir())
spec = load_model(ROOT / "examples" / "resnet50_cifar10_seeds_split.yaml")
cluster = load_cluster("ascend910:1x8")
compute = AnalyticalCompute.for_training(cluster.device, spec.training)
spec.graph.table()[["name", "param_count", "fwd_flops", "saved_bytes"]].head()

# %% [markdown]
# ## Micro-batch sweep: bubble against memory
#
# With pp = 2 and dp = 4, each replica sees a quarter of the global batch per step (32 of 128
# samples), split into m micro-batches. More micro-batches shrink the
# bubble, (p-1)/(m+p-1) for uniform stages, and GPipe's activation memory, which holds all m
# micro-batches in flight. But the micro-batches get smaller, and small ones run less efficiently.
# The bubble is the idle while the pipeline still has forward or backward work; `sync_wait` is
# the idle after it, while a rank that is done waits for another's gradient all-reduce (here
# rank 0 waits for rank 1's, whose stage holds most of the parameters): more micro-batches
# do not shorten it.

# %%
rows = []
for schedule in ("gpipe", "1f1b"):
    for m in (1, 2, 4, 8):
        if schedule == "1f1b" and m < 2:
            continue   # torch's Schedule1F1B needs at least as many micro-batches as stages
        cfg = resolve_config(spec, cluster, compute, dp=4, pp=2, microbatches=m, schedule=schedule, split="balanced")
        est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False)
        rows.append({"schedule": schedule, "m": m, "step_ms": est.step_time_s * 1e3, "bubble": est.bubble_fraction,
                     "sync_wait": est.sync_wait_fraction,
                     "activations_MiB": max(r.memory.activations_bytes for r in est.ranks) / 2**20})
sweep = pd.DataFrame(rows)
fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.5))
for schedule, df in sweep.groupby("schedule"):
    a.plot(df.m, df.bubble, marker="o", label=schedule)
    b.plot(df.m, df.activations_MiB, marker="o", label=schedule)
a.set(xlabel="micro-batches m", ylabel="bubble fraction", title="bubble"); a.set_xscale("log", base=2)
b.set(xlabel="micro-batches m", ylabel="peak activations (MiB)", title="activation memory"); b.set_xscale("log", base=2)
a.legend(); b.legend(); fig.tight_layout()
sweep

# %% [markdown]
# ## dp x pp on 8 devices
#
# Data parallelism pays for a gradient all-reduce. Pipeline parallelism pays for bubbles and
# boundary transfers, but each rank holds fewer parameters. The planner ranks every factorization
# of the 8 devices into dp x pp x tp. Its best plan for a given pp need not use all 8: where a
# tensor-parallel layout would split no operator (sharing the work costs more communication than it
# saves), the planner shows that plan as what it is, tp = 1 on fewer devices, the rest idle. Each
# bar is labelled with the plan it stands for and the devices it uses.

# %%
# the planner's best plan for each pp, then its overall choice
best = {pp: plan(spec, cluster, compute, Constraints(pp=pp, top=1), progress=False).chosen for pp in (1, 2, 4, 8)}
trade = pd.DataFrame([{"plan": f"dp={c.config.dp} pp={c.config.pp} tp={c.config.tp}\n"
                               f"{c.config.world_size} of {cluster.world_size} devices",
                       "dp": c.config.dp, "pp": pp, "tp": c.config.tp, "devices": c.config.world_size,
                       "schedule": c.config.schedule, "m": c.config.microbatches,
                       "samples_per_s": c.estimate.throughput_samples_per_s,
                       "bubble": c.estimate.bubble_fraction,
                       "sync_wait": c.estimate.sync_wait_fraction, "exposed_comm": c.estimate.exposed_comm_fraction,
                       "peak_MiB": c.peak_memory_bytes / 2**20} for pp, c in best.items()])
result = plan(spec, cluster, compute, progress=False)
ax = trade.plot.bar(x="plan", y="samples_per_s", legend=False, figsize=(8, 3.5), rot=0,
                    title="the planner's best plan for each pp")
ax.set_xlabel(""); ax.set_ylabel("samples/s")
trade.drop(columns="plan")

# %% [markdown]
# ## The seeds' split against the planner's
#
# The seeds put head, layer1 and layer2 on stage 0, and layer3, layer4 and fc on stage 1. Those
# stages are imbalanced: layer3 and layer4 hold most of the parameters, and the FLOPs are not split
# evenly. The dynamic program balances stage time, boundary transfer included.

# %%
seeds = ParallelConfig(dp=4, pp=2, microbatches=4, schedule="1f1b", bounds=bounds_from_assignment(spec.manual_stages))
planned = resolve_config(spec, cluster, compute, dp=4, pp=2, microbatches=4, schedule="1f1b", split="balanced")
compare = []
for label, cfg in (("seeds", seeds), ("planner", planned)):
    est = simulate(spec.graph, spec.training, cluster, cfg, compute)
    compare.append({"split": label, "stages": cfg.describe_split(spec.graph.names), "step_ms": est.step_time_s * 1e3,
                    "bubble": est.bubble_fraction, "busy_ms": [round(r.busy_s * 1e3, 3) for r in est.ranks]})
pd.DataFrame(compare)

# %%
print("planner's overall choice:", result.chosen.config.describe_split(spec.graph.names))
for line in result.explanation:
    print(line)
