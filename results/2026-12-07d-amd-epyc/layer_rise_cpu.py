"""A layer's backward rise as extraction measures it on meta (Layer.bwd_rise_bytes and its per-step part,
parsim.model.recording._LiveStorages) against torch.profiler's allocation trace of the same layer run forward and
backward on this CPU (parsim.exec.measure.profiled_events): the most bytes allocated in the backward above what
the forward left, the parameters' gradients held from an earlier step (the executor's zero_grad(set_to_none=False)).
The layer's input is what the model's earlier units make of a random batch.  Each argument is model:unit:batch:
development decoders whose first pipeline stages the rise moves, at the micro-batch of their GPipe m = 2 plan (half
the global batch, as results/2026-12-07c-amd-epyc/first_stage_trace.py ran them), and the ResNet-50 blocks of the
quick start's example (examples/resnet50_cifar10_seeds.yaml, 224 x 224), whose workspace the rise raises most.

    python -W ignore results/2026-12-07d-amd-epyc/layer_rise_cpu.py \
        results/heldout/models/nemotron_tiny.yaml:layers.0:30 results/heldout/models/jais2_tiny.yaml:layers.0:54 \
        results/heldout/models/arcee_tiny.yaml:layers.0:42 results/heldout/models/bitnet_tiny.yaml:layers.0:62 \
        results/heldout/models/apertus_tiny.yaml:layers.0:58 results/heldout/models/glm_tiny.yaml:layers.0:58 \
        examples/resnet50_cifar10_seeds.yaml:layer1.0:4 examples/resnet50_cifar10_seeds.yaml:layer1.1:4 \
        examples/resnet50_cifar10_seeds.yaml:layer4.2:4 examples/resnet50_cifar10_seeds.yaml:head:4 \
        > results/2026-12-07d-amd-epyc/layer-rise-cpu.txt
"""

from __future__ import annotations

import sys

import torch

from parsim.exec.data import input_kind
from parsim.exec.measure import profiled_events
from parsim.model.extract import cut_units
from parsim.model.spec import build_module, load_model

MIB = 2 ** 20
MARK = 7                                     # a marker tensor's elements: the backward starts at its allocation


def cpu_rise(unit: torch.nn.Module, x: torch.Tensor) -> int:
    for p in unit.parameters():
        p.grad = torch.zeros_like(p)
    marks: dict = {}

    def step():
        y = unit(x)
        marks["backward"] = torch.ones(MARK)
        y.backward(torch.ones_like(y))
        x.grad = None                        # freed while the profiler counts (tests/test_backward_rise.py)
        marks.clear()

    step()                                   # warm-up: oneDNN's and the profiler's first-call allocations
    memory = sorted((e for e in profiled_events(step) if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    k = next(i for i, e in enumerate(memory) if e["args"]["Bytes"] == 4 * MARK)
    start = memory[k]["args"]["Total Allocated"]
    return max(e["args"]["Total Allocated"] for e in memory[k:]) - start


def main(arg: str) -> None:
    path, name, batch = arg.split(":")
    b = int(batch)
    spec = load_model(path)
    torch.manual_seed(0)
    units = cut_units(build_module(spec.source, spec.path))
    kind = input_kind(spec)
    x = torch.randint(0, kind[2], (b, kind[1])) if kind[0] == "tokens" else torch.randn(b, 3, kind[1], kind[1])
    k = [n for n, _ in units].index(name)
    with torch.no_grad():
        for _, unit in units[:k]:
            x = unit.train()(x)
    measured = cpu_rise(units[k][1].train(), x.detach().requires_grad_(True))
    layer = spec.graph.layers[spec.graph.index(name)]
    meta = layer.bwd_rise_fixed_bytes + layer.bwd_rise_bytes * b
    print(f"{spec.name:28s} {name:9s} at micro-batch {b:3d}: on this CPU {measured / MIB:8.3f} MiB, on meta "
          f"{meta / MIB:8.3f} MiB ({meta / measured - 1:+.2%})")


if __name__ == "__main__":
    for model in sys.argv[1:]:
        main(model)
