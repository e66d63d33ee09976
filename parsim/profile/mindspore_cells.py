"""MindSpore as an independent executor and profiler of the seeds' data-parallel ResNet-50 on CPU.

- ``resnet50``: the seeds' network in MindSpore cells, unit for unit parsim's zoo ResNet-50
  (parsim.model.zoo.resnet: ``head``, ``layerN.i`` Bottlenecks, ``fc``), so that an exported plan's
  PIPELINE_STAGE names its cells.
- ``profile``: a layer profile timed in MindSpore, in the format ``parsim profile`` writes for torch
  (parsim.profile.layers): each unit compiled as its own graph (GRAPH_MODE, as the run), forward
  timed alone and backward as the forward-and-gradient graph less the forward, the median over
  repeats per micro-batch size; the optimizer (Momentum) step timed over all parameters.
- ``train``: one worker of a run: the fragment `parsim export --to mindspore` wrote applied to the
  network (``apply_plan``), Momentum SGD on CIFAR-10-shaped synthetic data, step times written.

Workers start under ``msrun`` (MindSpore's launcher: a scheduler and the workers talk over TCP on
this machine), one compute thread each; benchmarks/mindspore_rn50.py drives them.  MindSpore is
imported here only (the [mindspore] extra)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import time

import numpy as np


def _ms():
    import mindspore as ms

    # one compute thread a worker, as parsim's runs and profiles use (MindSpore's CPU kernel pool
    # defaults to 30 threads: mindspore/context.py, runtime_num_threads)
    threads = int(os.environ.get("PARSIM_MS_THREADS", "1"))
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU", runtime_num_threads=threads, inter_op_parallel_num=1)
    return ms


def resnet50(num_classes: int = 10):
    """ResNet-50 v1.5 with the ImageNet stem, cells named as parsim's zoo units."""
    from mindspore import nn, ops

    class Bottleneck(nn.Cell):
        def __init__(self, in_ch, width, stride):
            super().__init__()
            out = width * 4
            self.conv1 = nn.Conv2d(in_ch, width, 1, has_bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride=stride, pad_mode="pad", padding=1, has_bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, out, 1, has_bias=False)
            self.bn3 = nn.BatchNorm2d(out)
            self.relu = nn.ReLU()
            self.down = None
            if stride != 1 or in_ch != out:
                self.down = nn.SequentialCell([nn.Conv2d(in_ch, out, 1, stride=stride, has_bias=False),
                                               nn.BatchNorm2d(out)])

        def construct(self, x):           # (B, C, H, W)
            identity = x if self.down is None else self.down(x)
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            return self.relu(self.bn3(self.conv3(y)) + identity)

    class Fc(nn.Cell):
        def __init__(self, in_ch, classes):
            super().__init__()
            self.mean = ops.ReduceMean(keep_dims=False)
            self.linear = nn.Dense(in_ch, classes)

        def construct(self, x):
            return self.linear(self.mean(x, (2, 3)))

    class ResNet(nn.Cell):
        def __init__(self):
            super().__init__()
            self.head = nn.SequentialCell([nn.Conv2d(3, 64, 7, stride=2, pad_mode="pad", padding=3, has_bias=False),
                                           nn.BatchNorm2d(64), nn.ReLU(),
                                           nn.MaxPool2d(3, stride=2, pad_mode="pad", padding=1)])
            in_ch = 64
            for i, (n, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):     # He et al. 2016, Table 1
                blocks = []
                for j in range(n):
                    blocks.append(Bottleneck(in_ch, width, (1 if i == 0 else 2) if j == 0 else 1))
                    in_ch = width * 4
                setattr(self, f"layer{i + 1}", nn.SequentialCell(blocks))
            self.fc = Fc(in_ch, num_classes)

        def construct(self, x):
            for unit in (self.head, self.layer1, self.layer2, self.layer3, self.layer4, self.fc):
                x = unit(x)
            return x

    return ResNet()


def units(net) -> list:
    """(name, cell) of the cut units, in order."""
    cells = dict(net.cells_and_names())
    names = ["head"] + [f"layer{i}.{j}" for i, n in zip(range(1, 5), (3, 4, 6, 3)) for j in range(n)] + ["fc"]
    return [(n, cells[n]) for n in names]


def _timed(fn, warmup: int, repeats: int) -> list[float]:
    out = []
    for k in range(warmup + repeats):
        t0 = time.perf_counter()
        r = fn()
        r = r[0] if isinstance(r, tuple) else r
        if hasattr(r, "asnumpy"):
            r.asnumpy()                                            # wait for the result
        if k >= warmup:
            out.append(time.perf_counter() - t0)
    return out


def profile(sizes: list[int], image: int, repeats: int, warmup: int, rounds: int) -> dict:
    """This process's layer profile of the MindSpore ResNet-50, in parsim's layer-profile format
    with its rounds (parsim.profile.rounds: round r measures every size once, the sizes' order
    rotated by r; a round's value is the median of its repeats, an entry's the median over rounds;
    the rounds are kept so that a plan's predicted step gets its interval from them)."""
    ms = _ms()
    from mindspore import nn

    net = resnet50()
    net.set_train(True)
    cells = units(net)
    inputs = {}                                     # each unit's input at each size
    for b in sizes:
        x = ms.Tensor(np.random.rand(b, 3, image, image).astype(np.float32))
        for name, cell in cells:
            inputs[(name, b)] = x
            x = cell(x)
    # the gradients of all-ones output sensitivities (MindSpore's default): input and weights
    grads = {name: ms.grad(cell, grad_position=0, weights=cell.trainable_params()) for name, cell in cells}
    fwd = {(n, b): [] for n, _ in cells for b in sizes}         # per round
    bwd = {(n, b): [] for n, _ in cells for b in sizes}
    for r in range(rounds):
        for b in sizes[r % len(sizes):] + sizes[:r % len(sizes)]:
            for name, cell in cells:
                x = inputs[(name, b)]
                f = statistics.median(_timed(lambda: cell(x), warmup if r == 0 else 1, repeats))
                both = statistics.median(_timed(lambda: grads[name](x), warmup if r == 0 else 1, repeats))
                fwd[(name, b)].append(f)
                bwd[(name, b)].append(max(both - f, 0.0))
    rows = []
    for name, _ in cells:
        f_rounds = [[fwd[(name, b)][r] for b in sizes] for r in range(rounds)]
        b_rounds = [[bwd[(name, b)][r] for b in sizes] for r in range(rounds)]
        med = lambda table, k: statistics.median(row[k] for row in table)          # noqa: E731
        rows.append({"name": name, "fwd_s": [med(f_rounds, k) for k in range(len(sizes))],
                     "bwd_s": [med(b_rounds, k) for k in range(len(sizes))], "saved_bytes": [0] * len(sizes),
                     "round_s": {"fwd_s": f_rounds, "bwd_s": b_rounds}})
    params = net.trainable_params()
    opt = nn.Momentum(params, 0.01, 0.9)
    zeros = tuple(ms.Tensor(np.zeros(p.shape, np.float32)) for p in params)
    step = _timed(lambda: opt(zeros), warmup, max(repeats, 20))
    count = sum(int(np.prod(p.shape)) for p in params)
    return {"schema_version": 1, "kind": "layer-profile", "model": "resnet50-mindspore",
            "device": f"cpu: {platform.processor() or platform.machine()} (MindSpore {ms.__version__}, GRAPH_MODE)",
            "dtype": "fp32", "threads": int(os.environ.get("PARSIM_MS_THREADS", "1")),
            "measured": datetime.date.today().isoformat(), "microbatch_sizes": list(sizes), "layers": rows,
            "optimizer": "momentum", "optimizer_s_per_param": statistics.median(step) / count,
            "rounds": {"kept": [[True] * len(sizes) for _ in range(rounds)], "count": rounds}}


def train(fragment: str, steps: int, image: int) -> dict:
    """One worker's run of the exported plan; the step times of rank 0's view."""
    ms = _ms()
    from mindspore import nn
    from mindspore.communication import get_group_size, get_rank, init

    init()
    ns: dict = {}
    with open(fragment) as f:
        exec(compile(f.read(), fragment, "exec"), ns)           # the exported settings and apply_plan
    net = resnet50()
    loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    cell = ns["apply_plan"](net, loss)
    step = nn.TrainOneStepCell(cell, nn.Momentum(net.trainable_params(), 0.01, 0.9))
    step.set_train(True)
    b = ns["BATCH_SIZE"]
    rng = np.random.default_rng(get_rank())
    x = ms.Tensor(rng.random((b, 3, image, image), dtype=np.float32))
    y = ms.Tensor(rng.integers(0, 10, b).astype(np.int32))
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step(x, y).asnumpy()
        times.append(time.perf_counter() - t0)
    return {"rank": get_rank(), "world_size": get_group_size(), "batch_per_device": b, "step_s": times}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m parsim.profile.mindspore_cells")
    p.add_argument("what", choices=("profile", "train"))
    p.add_argument("--fragment", help="train: the file `parsim export --to mindspore` wrote")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--sizes", default="8,16")
    p.add_argument("--image", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3, help="profile: timed repeats per size, unit and round")
    p.add_argument("--rounds", type=int, default=5, help="profile: rounds (parsim.profile.rounds: 5 give a 90%% "
                                                          "interval of the median)")
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if a.what == "profile":
        out = profile([int(s) for s in a.sizes.split(",")], a.image, a.repeats, 2, a.rounds)
    else:
        out = train(a.fragment, a.steps, a.image)
    rank = os.environ.get("RANK_ID", os.environ.get("MS_NODE_ID", "0"))
    path = a.output if rank in ("0", "") else f"{a.output}.rank{rank}"
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
