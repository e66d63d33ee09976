"""Whether a layer's micro-batch of k x b samples takes at most k times its micro-batch of b,
phase by phase, under the analytical model: what a search could rest a family's floor on before
pricing the family at its own size (its graph priced once at a multiple of every size, scaled).
Over every shipped accelerator profile, for a dense, a MoE (ep = 4) and a convolutional model,
tp 1 and tp 2 (megatron-sp, recomputed), tp overlap off and on, b = 1..16, k b <= 32.  It counts
the pairs where T(k b) > k T(b) and prints the worst, with the GEMM that breaks it.

    python results/2026-12-02e-amd-epyc/batch_scaling.py > results/2026-12-02e-amd-epyc/batch-scaling.txt
"""
import itertools
from pathlib import Path

from parsim.cost.compute import AnalyticalCompute
from parsim.cost.kernels import gemm_candidates, gemm_shape_efficiency, kernel_time_s
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.shard.prepare import expert_graph, per_device_graph
from parsim.sim.overlap import layer_time_s
from parsim.sim.prices import Prices

WHOLE = ("cloudmatrix384", "gb200-nvl576", "gb200-nvl72")      # profiles named without a node count
MODELS = ("examples/gpt_small_local.yaml", "examples/moe_tiny_local.yaml", "examples/resnet50_cifar10.yaml")

checked, broken = 0, []
for name in sorted(p.stem for p in Path("hardware_profiles").glob("*.yaml") if p.stem != "local-cpu"):
    base = load_cluster(name if name in WHOLE else f"{name}:2x8")
    for path in MODELS:
        spec = load_model(path)
        cluster = base.for_dtype(spec.training.dtype)
        compute, prices = AnalyticalCompute.for_training(cluster.device, spec.training), Prices(cluster)
        graphs = [per_device_graph(spec.graph, 1, "", False, spec.shard, cluster, spec.training)]
        if "resnet" not in path:
            graphs.append(per_device_graph(spec.graph, 2, "megatron-sp", True, spec.shard, cluster, spec.training))
        if "moe" in path:
            graphs += [expert_graph(g, 4, spec.training) for g in graphs]
        for graph in graphs:
            for layer in {id(x.kernels): x for x in graph.layers}.values():
                for kind, overlap in itertools.product("FBIW", (False, True)):
                    t = {b: layer_time_s(compute, layer, kind, b, cluster, 0, overlap, prices) for b in range(1, 33)}
                    for b in range(1, 17):
                        for k in range(2, 32 // b + 1):
                            checked += 1
                            if t[k * b] > k * t[b] * (1 + 1e-12):
                                broken.append((t[k * b] / (k * t[b]), name, path, layer.name, kind, overlap, b, k))
print(f"pairs checked: {checked}; T(k b) > k T(b) in {len(broken)}")
by_profile: dict = {}
for r in broken:
    by_profile[r[1]] = by_profile.get(r[1], 0) + 1
print("by profile:", dict(sorted(by_profile.items())))
for r in sorted(broken, reverse=True)[:8]:
    print(f"  {r[0]:.4f}x  {r[1]} {r[2]} {r[3]} {r[4]} overlap={r[5]} b={r[6]} k={r[7]}")

# the worst GEMM of gpt_small_local's head on dgx-a100, b = 5 against 15: its split-K candidates
spec = load_model("examples/gpt_small_local.yaml")
cluster = load_cluster("dgx-a100:2x8").for_dtype(spec.training.dtype)
compute = AnalyticalCompute.for_training(cluster.device, spec.training)
head = per_device_graph(spec.graph, 1, "", False, spec.shard, cluster, spec.training).layers[-1]
ex = cluster.device.kernels
print(f"\ndgx-a100 ({ex.compute_units} units, tiles {ex.tiles}), gpt_small_local's head, phase I:")
for kernel in head.kernels:
    if kernel.phase == "I" and kernel.gemm_at(5):
        for b in (5, 15):
            dims = kernel.gemm_at(b)
            cands = sorted({(s, round(q, 3)) for q, s in gemm_candidates(*dims, ex)})
            print(f"  b={b:2d} GEMM (M, N, K, groups)={dims}: efficiency {gemm_shape_efficiency(*dims, ex):.3f}, "
                  f"time {kernel_time_s(kernel, b, cluster.device, compute.engines) * 1e6:.1f} us; "
                  f"(split-K s, quant) tried: {cands}")
