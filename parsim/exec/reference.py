"""The single-process reference a distributed run must equal: the same model (same seed), the
same micro-batches of every replica, the loss summed over micro-batches, gradients averaged
over replicas as DDP does (each replica's gradient divided by dp, then summed in rank order),
and the same optimizer (the plan's: momentum SGD, SGD or Adam), in the plan's dtype (bf16: fp32 master weights, parsim.exec.precision).  Used by the tests to check the executor with assert_close."""

from __future__ import annotations

from functools import partial

import torch
from torch import nn

from parsim.exec.data import input_kind, make_loader
from parsim.exec.objective import loss_fn
from parsim.exec.precision import TORCH_DTYPES, make_optimizer
from parsim.exec.stages import build_units, memory_format, model_input, sequential
from parsim.model.spec import load_model
from parsim.plan import load_plan


def reference_model(plan, plan_path: str, seed: int = 0, device=None):
    """(model spec, the plan's units in one Sequential in its dtype and memory format on
    ``device``, its optimizer on their parameters, ``feed``: an input batch as that model takes it,
    parsim.exec.stages.model_input at the same format and dtype): what a one-process run of the plan
    steps (reference_run; benchmarks/gpu_breakdown.py times it)."""
    spec = load_model(plan.model_path)
    fmt, dtype = memory_format(spec), TORCH_DTYPES[plan.dtype]
    model = sequential(build_units(spec, plan, seed, plan_path)).to(device=device, dtype=dtype, memory_format=fmt)
    return spec, model, make_optimizer(plan.optimizer, model.parameters()), partial(model_input, fmt=fmt, dtype=dtype)


def reference_run(plan_path: str, steps: int, seed: int = 0, data: str | None = None,
                  synthetic_size: int = 50_000, buffers: bool = False) -> tuple[list[float], dict[str, torch.Tensor]]:
    """(loss per step, parameters by ``unit.param`` name) after ``steps`` steps; ``buffers``: the
    buffers too (BatchNorm's running statistics)."""
    plan = load_plan(plan_path)
    cfg = plan.config
    spec, model, opt, feed = reference_model(plan, plan_path, seed)
    kind = input_kind(spec)
    b = cfg.microbatch_size(plan.global_batch_size)
    loaders = [make_loader(data, b * cfg.microbatches, cfg.dp, d, kind, seed, synthetic_size)
               for d in range(cfg.dp)]
    steps_per_epoch = len(loaders[0][0])
    iters: list = [None] * cfg.dp
    losses = []
    for step in range(steps):
        epoch, pos = divmod(step, steps_per_epoch)
        grads: dict[str, torch.Tensor] = {}
        total = 0.0
        for d, (loader, sampler, dataset) in enumerate(loaders):
            if pos == 0:
                sampler.set_epoch(epoch)
                dataset.set_epoch(epoch)
                iters[d] = iter(loader)
            x, y = next(iters[d])
            x = feed(x)
            model.zero_grad(set_to_none=True)
            for xi, yi in zip(x.chunk(cfg.microbatches), y.chunk(cfg.microbatches)):
                loss = loss_fn(model(xi), yi)
                loss.backward()
                total += loss.item() / cfg.dp
            for name, p in model.named_parameters():
                g = p.grad / cfg.dp if cfg.dp > 1 else p.grad
                grads[name] = g.clone() if name not in grads else grads[name] + g
        for name, p in model.named_parameters():
            p.grad = grads[name]
        opt.step()
        losses.append(total)
    named = [*model.named_parameters(), *(model.named_buffers() if buffers else ())]
    return losses, {n: p.detach().clone() for n, p in named}


def _replica0_state(out_dir: str, cfg) -> dict[str, torch.Tensor]:
    """The state dicts of replica 0's stages, from the run's per-rank checkpoints of the newest
    step that verifies on all of them, merged."""
    from parsim.exec import checkpoint
    from parsim.exec.groups import coordinates

    ranks = [rank for rank in range(cfg.world_size) if coordinates(cfg, rank)[0] == 0]
    step, _ = checkpoint.agree([checkpoint.scan(out_dir, rank) for rank in ranks], out_dir)
    state: dict[str, torch.Tensor] = {}
    for rank in ranks:
        for sd in checkpoint.load(out_dir, rank, step)["stages"]:
            state.update(sd)
    return state


def distributed_params(out_dir: str, plan_path: str, seed: int = 0) -> dict[str, torch.Tensor]:
    """Parameters from a run's checkpoints, named as in ``reference_run`` (buffers such as
    BatchNorm statistics, and a tied weight's second name, left out)."""
    plan = load_plan(plan_path)
    state = _replica0_state(out_dir, plan.config)
    model = sequential(build_units(load_model(plan.model_path), plan, seed, plan_path))
    names = {n for n, _ in model.named_parameters()}
    return {k: v for k, v in state.items() if k in names}


def assemble_model(out_dir: str, plan_path: str, seed: int = 0) -> nn.Module:
    """The whole model from a run's checkpoints (replica 0's stages, BatchNorm statistics too)."""
    plan = load_plan(plan_path)
    model = sequential(build_units(load_model(plan.model_path), plan, seed, plan_path))
    model.load_state_dict(_replica0_state(out_dir, plan.config))
    return model


@torch.no_grad()
def evaluate(model: nn.Module, data_dir: str, image_size: int = 32, batch: int = 256) -> float:
    """Top-1 accuracy on ``test_batch.bin`` (no augmentation), BatchNorm in eval mode."""
    from parsim.exec.data import Augmented, CifarBinary

    data = Augmented(CifarBinary(data_dir, train=False), image_size, train=False)
    model.eval()
    correct = 0
    for i in range(0, len(data), batch):
        xs, ys = zip(*(data[j] for j in range(i, min(i + batch, len(data)))))
        correct += (model(torch.stack(xs)).argmax(1) == torch.tensor(ys)).sum().item()
    return correct / len(data)
