"""``parsim profile``: time every cut unit's forward and backward per micro-batch size.

Taken the way a pipeline stage runs (``parsim.exec.runtime.configure_process``: one thread,
the same allocator settings): the units run in sequence, each on the detached output of the one
before (a stage boundary), forward through the chain then backward through it, with the loss
at the end.  Each time is the median over repeats after warm-up.  The optimizer step is timed
too (seconds per parameter), and saved-activation bytes are recorded per unit from
``saved_tensors_hooks`` on the real tensors.

Writes the ProfileTable format of ``parsim.cost.compute`` (the profiled cost model reads it).
"""

from __future__ import annotations

import datetime
import platform
import statistics
import time

import torch
import torch.nn.functional as F

from parsim.errors import InputError
from parsim.model.extract import cut_units
from parsim.model.spec import ModelSpec, build_module


def _sample_input(spec: ModelSpec, b: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    from parsim.inputs import Fields
    from parsim.model.spec import _builtin

    if spec.source.kind == "builtin":
        _, inp = _builtin(spec.source.target, Fields(spec.source.kwargs, spec.path, "args."))
    else:
        raise InputError(f"{spec.path}: model: profiling needs a built-in model for now (resnet50, gpt)")
    if inp.dtype == "int64":
        vocab = spec.graph.layers[-1].output_bytes  # not used for classification; GPT targets are tokens
        x = torch.randint(0, 100, (b, *inp.shape), device=device)
        return x, x.clone()
    num_classes = int(spec.graph.layers[-1].output_bytes // {"fp32": 4}.get(spec.graph.dtype, 2))
    return torch.randn(b, *inp.shape, device=device), torch.randint(0, num_classes, (b,), device=device)


def _loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if out.dim() == 3:            # (B, T, V) language-model logits
        return F.cross_entropy(out.flatten(0, 1), y.flatten())
    return F.cross_entropy(out, y)


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def profile_layers(spec: ModelSpec, sizes: list[int], device: str = "cpu", repeats: int = 5, warmup: int = 2,
                   seed: int = 0) -> dict:
    if spec.graph.dtype != "fp32":
        raise InputError(f"{spec.path}: training.dtype: the profiler measures fp32 for now")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError("--device cuda: no CUDA device is visible; use --device cpu")
    torch.manual_seed(seed)
    units = [(n, m.to(dev).train()) for n, m in cut_units(build_module(spec.source, spec.path))]
    names = [n for n, _ in units]
    fwd = {n: [] for n in names}
    bwd = {n: [] for n in names}
    saved = {n: [] for n in names}
    for b in sizes:
        x, y = _sample_input(spec, b, dev)
        times_f = {n: [] for n in names}
        times_b = {n: [] for n in names}
        for rep in range(warmup + repeats):
            chain = []
            h = x
            for i, (n, m) in enumerate(units):
                inp = h.detach().requires_grad_(h.is_floating_point() and i > 0)
                keys: dict[int, int] = {}
                params = {p.untyped_storage().data_ptr() for p in m.parameters()} | \
                         {t.untyped_storage().data_ptr() for t in m.buffers()}

                def pack(t, keys=keys, params=params):
                    k = t.untyped_storage().data_ptr()
                    if k not in params:
                        keys[k] = t.untyped_storage().nbytes()
                    return t
                _sync(dev)
                t0 = time.perf_counter()
                with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                    h = m(inp)
                _sync(dev)
                times_f[n].append(time.perf_counter() - t0)
                chain.append((inp, h, sum(keys.values())))
            grad = None
            for i in range(len(units) - 1, -1, -1):
                n = names[i]
                inp, out, _ = chain[i]
                _sync(dev)
                t0 = time.perf_counter()
                if grad is None:
                    _loss(out, y).backward()
                else:
                    out.backward(grad)
                _sync(dev)
                times_b[n].append(time.perf_counter() - t0)
                grad = inp.grad if inp.requires_grad else None
            for m in (m for _, m in units):
                m.zero_grad(set_to_none=False)
        for i, n in enumerate(names):
            fwd[n].append(statistics.median(times_f[n][warmup:]))
            bwd[n].append(statistics.median(times_b[n][warmup:]))
            saved[n].append(chain[i][2] / b)
    params = [p for _, m in units for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    for p in params:
        p.grad = torch.zeros_like(p)
    opt_times = []
    for rep in range(warmup + repeats):
        t0 = time.perf_counter()
        opt.step()
        opt_times.append(time.perf_counter() - t0)
    count = sum(p.numel() for p in params)
    return {
        "schema_version": 1, "kind": "layer-profile", "model": spec.name,
        "device": f"{dev.type}: {platform.processor() or platform.machine()}",
        "dtype": "fp32", "threads": torch.get_num_threads(),
        "measured": datetime.date.today().isoformat(),
        "microbatch_sizes": list(sizes),
        "layers": [{"name": n, "fwd_s": fwd[n], "bwd_s": bwd[n], "saved_bytes": saved[n]} for n in names],
        "optimizer_s_per_param": statistics.median(opt_times[warmup:]) / count,
    }
