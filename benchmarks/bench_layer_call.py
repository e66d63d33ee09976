"""What a layer costs beyond its kernels when it runs cold: the host time per layer call that
``parsim calibrate`` fits on a CPU (``KernelExecution.layer_call_s``, parsim.cost.kernels).

For ResNet-50's fc (a mean and a 2048 x 10 addmm) and the bottleneck layer1.1 (13 forward
kernels), at 2 samples, one thread, forward only (autograd recording), medians of ``--repeats`` calls:

- hot: the layer called in a tight loop, its code and data in the caches;
- after layer4.2: each call right after layer4.2's forward (17.8 MB of weights), as in a step;
- after a sweep: each call right after writing a 32 MB tensor (this machine's L3);
- after a sleep: each call after 2 ms asleep (another process may run).

The cold-minus-hot difference is about the same for a 2-kernel and a 13-kernel layer, which is why
the cost model charges it per layer call rather than per kernel.

    python benchmarks/bench_layer_call.py [--repeats 200]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from parsim.model.extract import cut_units
from parsim.model.spec import build_module, load_model

MODEL = "examples/resnet50_cifar10_local.yaml"


def _median_us(call, before, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        before()
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[repeats // 10:]) * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=200)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    spec = load_model(MODEL)
    units = {n: m.train() for n, m in cut_units(build_module(spec.source, spec.path))}
    inputs = {"fc": torch.randn(2, 2048, 1, 1), "layer1.1": torch.randn(2, 256, 8, 8)}
    l42, x42 = units["layer4.2"], torch.randn(2, 2048, 1, 1)
    big = torch.zeros(8 << 20)                     # 32 MB of fp32
    befores = {"hot": lambda: None,
               "after layer4.2": lambda: l42(x42),
               "after a 32 MB sweep": lambda: big.add_(1.0),
               "after a 2 ms sleep": lambda: time.sleep(0.002)}
    print(f"{'layer':<10} {'kernels':>7}  " + "  ".join(f"{k:>20}" for k in befores))
    graph = {layer.name: layer for layer in spec.graph.layers}
    for name in ("fc", "layer1.1"):                # autograd records, as in a training step
        layer, x = units[name], inputs[name]
        kernels = sum(1 for k in graph[name].kernels if k.phase == "F")
        row = [_median_us(lambda: layer(x), before, args.repeats) for before in befores.values()]
        print(f"{name:<10} {kernels:>7}  " + "  ".join(f"{t:>17.1f} us" for t in row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
