"""The simulator's one-device step split as benchmarks/gpu_breakdown.py splits the measured one:
the forward's and the backward's layer prices summed over the micro-batches, and the optimizer
step, on the shipped dgx-h200 profile.  h200/rn50_nchw.yaml is the bf16 ResNet-50 of
runners/gpu_models with training.memory_format: nchw, as the GPU call ran it (breakdown.txt).  Run from the repository's root:

    python results/2026-12-04e-amd-epyc/gpu_phases.py > results/2026-12-04e-amd-epyc/gpu-phases.txt
"""

from parsim.cost.compute import AnalyticalCompute
from parsim.cost.layer import layer_time_s
from parsim.cost.memory import optimizer_bytes_moved_per_param
from parsim.hardware import load_cluster
from parsim.model.spec import load_model

MODELS = (("runners/gpu_models/gpt_1_3b.yaml", 8), ("runners/gpu_models/resnet50_imagenet_bf16.yaml", 256),
          ("results/2026-12-04e-amd-epyc/h200/rn50_nchw.yaml", 256))
cluster = load_cluster("dgx-h200:1x1")
for path, b in MODELS:
    spec = load_model(path)
    g = spec.graph
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    f = sum(layer_time_s(compute, layer, "F", b, cluster) for layer in g.layers)
    bw = sum(layer_time_s(compute, layer, "B", b, cluster) for layer in g.layers)
    opt = compute.optimizer_time_s(g.param_count, optimizer_bytes_moved_per_param(g.dtype, spec.training.optimizer))
    print(f"{spec.name} ({spec.training.memory_format}), micro-batch {b}: forward {f * 1e3:.2f} ms, "
          f"backward {bw * 1e3:.2f} ms, optimizer {opt * 1e3:.2f} ms, step {(f + bw + opt) * 1e3:.2f} ms")

# the same prices by kind of kernel, to set beside breakdown.txt's device time by kind (F, and the
# backward's I and W: a GEMM's or convolution's three, a memory-bound family's; launches included)
from collections import defaultdict

from parsim.cost.kernels import kernel_time_s, memory_family

print()
for path, b in MODELS:
    spec = load_model(path)
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    t, nbytes = defaultdict(float), defaultdict(float)
    for layer in spec.graph.layers:
        for k in layer.kernels:
            kind = memory_family(k.op) if k.klass == "mem" else k.klass
            t[kind] += kernel_time_s(k, b, cluster.device, compute.engines)
            nbytes[kind] += k.at(b)[1]
    print(f"{spec.name}: " + ", ".join(f"{kind} {s * 1e3:.2f} ms ({nbytes[kind] / 1e9:.1f} GB)"
                                       for kind, s in sorted(t.items(), key=lambda kv: -kv[1])))
