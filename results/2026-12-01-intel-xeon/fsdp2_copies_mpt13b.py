"""What FSDP2's copies add to llm-foundry's MPT-13B on 8 H100 at 2,048 tokens (one micro-batch of 2),
priced with the shipped profiles: the step as priced, the step with the copies taken out (the
profile's copy rates set to an unmeasurable infinity, so parsim.cost.comm.fsdp_unit_s prices no
copy), and the bytes they move (2 x every gather, and every reduce-scatter's input read in bf16
and written in fp32).  Run from the repository root:
python results/2026-12-01-intel-xeon/fsdp2_copies_mpt13b.py"""
import math
from dataclasses import replace

from parsim.cost.compute import AnalyticalCompute
from parsim.profile.published import figure_cluster, figure_spec, load_all_figures, shipped_profile
from parsim.search.resolve import resolve_config
from parsim.sim import simulate

ROW = "llmfoundry-mpt13b-h100-8gpu-s2048"
figure = next(f for f in load_all_figures().figures if f.id == ROW)
spec = figure_spec(figure)
cluster = figure_cluster(figure, shipped_profile(figure))
colls = replace(cluster.profile.collectives, fsdp_gather_copy_bytes_per_s=math.inf,
                fsdp_reduce_scatter_copy_bytes_per_s=math.inf)
without = replace(cluster, profile=replace(cluster.profile, collectives=colls))
compute = AnalyticalCompute.for_training(cluster.device, spec.training)
cfg = resolve_config(spec, cluster, compute, **dict(figure.parallel))
steps = {name: simulate(spec.graph, spec.training, c, cfg, compute, keep_timeline=False)
         for name, c in (("with the copies", cluster), ("without them", without))}
ops = steps["with the copies"].sharded_collectives[0]
moved = 2 * sum(b for op, b in ops if op == "all_gather") + 1.5 * sum(b for op, b in ops if op == "reduce_scatter")
for name, est in steps.items():
    print(f"{ROW} {name}: step {est.step_time_s:.4f} s")
print(f"the copies move {moved / 1e9:.0f} GB a step a GPU at {cluster.device.achieved_bandwidth_bytes_per_s() / 1e12:.2f} TB/s; "
      f"measured step {4096 / figure.measured:.4f} s (4,096 tokens a GPU at {figure.measured:g} tokens/s)")
