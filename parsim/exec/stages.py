"""Stage modules from a plan: the model's cut units, split at the plan's boundaries, wrapped in
torch.distributed.pipelining's PipelineStage and driven by its schedule class for the plan's
schedule (whose order tests/test_schedule.py proves equal to parsim.schedule's).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections import OrderedDict

import torch
from torch import nn

from parsim.errors import InputError
from parsim.model.extract import cut_units
from parsim.model.spec import ModelSpec, build_module
from parsim.plan import ParallelConfig, Plan, check_plan_matches
from parsim.schedule.actions import Action, Kind

SCHEDULE_CLASSES = {
    "gpipe": "ScheduleGPipe",
    "1f1b": "Schedule1F1B",
    "interleaved": "ScheduleInterleaved1F1B",
    "zbh1": "ScheduleInterleavedZeroBubble",
}
MULTI_STAGE = ("interleaved", "zbh1")


def build_units(spec: ModelSpec, plan: Plan, seed: int, plan_path: str = "plan") -> list[tuple[str, nn.Module]]:
    """The full model's cut units, initialised identically on every rank (same seed), after
    checking that they are the layers the plan split."""
    if spec.source.kwargs.get("mtp_layers"):
        raise InputError(f"{spec.path}: args.mtp_layers: the executor does not train DeepSeek-V3's "
                         "multi-token-prediction module (it would need the token ids one ahead, which the "
                         "stages do not pass); set args: {mtp_layers: 0} to run the model without it")
    check_plan_matches(plan, spec, plan_path)
    torch.manual_seed(seed)
    return cut_units(build_module(spec.source, spec.path))


def memory_format(spec: ModelSpec) -> torch.memory_format:
    """``training.memory_format``: torch.channels_last (NHWC) or torch's default NCHW.  Only 4-d
    tensors (convolution weights and images) have a layout to choose; the rest are unaffected."""
    return torch.channels_last if spec.training.memory_format == "channels_last" else torch.contiguous_format


def in_memory_format(x: torch.Tensor | None, fmt: torch.memory_format) -> torch.Tensor | None:
    """An input batch in the run's memory format (images only: 4-d)."""
    return x.contiguous(memory_format=fmt) if x is not None and x.dim() == 4 else x


def model_input(x: torch.Tensor, fmt: torch.memory_format, dtype: torch.dtype) -> torch.Tensor:
    """An input batch as a run feeds its model: images in the run's memory format and the model's
    dtype; tokens stay integers (the executor, the one-process reference and gpu_breakdown alike)."""
    x = in_memory_format(x, fmt)
    return x.to(dtype) if x.is_floating_point() else x


class _DenseBoundary(torch.autograd.Function):
    """Identity whose forward output and backward gradient are both made dense in torch's default
    layout: what crosses a pipeline boundary (gloo, like NCCL, sends contiguous buffers only).
    The output is never a view: a dense input leaves as an alias (``detach``, no copy), since
    torch's split backward (``stage_backward_input``, ZB-H1's I) detaches a stage's outputs in
    place, which torch refuses for a view ("Can't detach views in-place"); returning the input
    itself, as ``contiguous`` does when it has nothing to copy, makes autograd wrap it in a view."""

    @staticmethod
    def forward(ctx, x):
        return x.detach() if x.is_contiguous() else x.contiguous()

    @staticmethod
    def backward(ctx, grad):
        return grad.contiguous()


class _Alias(torch.autograd.Function):
    """Identity through a tensor that is not a view (``not_a_view``)."""

    @staticmethod
    def forward(ctx, x):
        return x.detach()

    @staticmethod
    def backward(ctx, grad):
        return grad


def not_a_view(x: torch.Tensor) -> torch.Tensor:
    """``x``, or where it is an autograd view (``Flatten``, ``transpose``, ``narrow``... of another
    tensor) an alias of the same storage and strides that is not: what torch's split backward
    (``stage_backward_input``) may detach in place.  No copy either way."""
    return _Alias.apply(x) if x._is_view() else x


class DenseBoundary(nn.Module):
    """A pipeline stage's first and last module: activations sent to the next stage and gradients
    sent back to the previous one leave dense in torch's default layout.  A channels_last image
    leaves in NCHW (one layout copy each way); a tensor that is already dense passes as it is
    (``contiguous`` returns it), as does its gradient; a strided view (a ViT's patches, ``flatten(2).transpose(1, 2)``)
    is copied, which gloo requires ("input tensor has to be contiguous")."""

    def forward(self, x):
        return _DenseBoundary.apply(x) if isinstance(x, torch.Tensor) else x     # both ways: a dense input's gradient may not be


def local_stages(cfg: ParallelConfig, pipe_rank: int) -> list[int]:
    """Stage indices this pipeline rank holds (looped placement: s % pp == pipe_rank)."""
    return [s for s in range(cfg.stages) if s % cfg.pp == pipe_rank]


def child_name(unit: str) -> str:
    """The child module a unit becomes: "layer1.0" -> "layer1_0" (module names cannot hold dots)."""
    return unit.replace(".", "_")


def sequential(units: list[tuple[str, nn.Module]]) -> nn.Sequential:
    """Units chained in order, as their ``child_name``s, so stage and whole-model state dicts
    share their keys."""
    return nn.Sequential(OrderedDict((child_name(name), m) for name, m in units))


def stage_module(units: list[tuple[str, nn.Module]], cfg: ParallelConfig, stage: int,
                 fmt: torch.memory_format = torch.contiguous_format) -> nn.Sequential:
    """Stage ``stage``'s units; with pp > 1, between boundary modules that send dense tensors, in
    NCHW under channels_last (they hold no parameters, so the state dict's keys are the units' own)."""
    chosen = units[cfg.bounds[stage]:cfg.bounds[stage + 1]]
    if cfg.pp > 1:
        chosen = [("boundary_in", DenseBoundary()), *chosen, ("boundary_out", DenseBoundary())]
    return sequential(chosen).to(memory_format=fmt)


def recomputed_children(cfg: ParallelConfig, units: list[str]) -> set[str] | None:
    """The child modules full recomputation wraps (``recompute_units``' names) for the model's
    ``units`` in order: those ParallelConfig.recomputed_layers chooses; None: every one."""
    only = cfg.recomputed_layers(len(units))
    return None if only is None else {child_name(units[i]) for i in only}


def recompute_units(stage: nn.Sequential, names: set[str] | None = None) -> None:
    """Full activation recomputation, as the simulator prices it (LayerGraph.with_recompute;
    Megatron's full recompute): each unit (``names``: only the children of those names,
    ``recomputed_children``) keeps only its input, and its backward runs its forward again
    (torch.utils.checkpoint, non-reentrant, with the forward's random state), collectives
    included.  BatchNorm's running statistics are left as the first forward set them."""
    for name, unit in stage.named_children():
        if names is None or name in names:
            unit.forward = functools.partial(_checkpointed, unit.forward, unit)


def recompute_attention(stage: nn.Module) -> None:
    """Selective activation recomputation, as the simulator prices it (LayerGraph.with_recompute;
    Korthikanti et al. 2022, Sec. 5; Megatron's selective granularity): each eager attention of
    the built-in GPT (its blocks' ``attend``: QK^T, the mask, softmax, dropout and AV) is
    checkpointed (torch.utils.checkpoint, non-reentrant, with the forward's random state), so its
    s x s tensors are re-created in backward; the rest of the layer is saved as usual.  Fused
    attention (sdpa) already recomputes its scores: left as is."""
    for unit in stage.modules():
        if callable(getattr(unit, "attend", None)) and not getattr(unit, "fused", True):
            unit.attend = functools.partial(_checkpointed_attention, unit.attend)


def _checkpointed_attention(attend, q, k, v):
    from torch.utils.checkpoint import checkpoint

    return checkpoint(attend, q, k, v, use_reentrant=False)


def _checkpointed(forward, unit: nn.Module, *args):
    from torch.utils.checkpoint import checkpoint

    return checkpoint(forward, *args, use_reentrant=False,
                      context_fn=lambda: (contextlib.nullcontext(), _StatisticsKept(unit)))


class _StatisticsKept:
    """The recomputed forward leaves the unit's buffers (BatchNorm's running statistics and batch
    count) as they were: the step updates them once.  Re-entrant: a split backward (ZB-H1's I
    and W) recomputes twice."""

    def __init__(self, unit: nn.Module):
        self.unit, self.saved = unit, []

    def __enter__(self):
        self.saved = [b.detach().clone() for b in self.unit.buffers()]

    def __exit__(self, *exc):
        with torch.no_grad():
            for b, s in zip(self.unit.buffers(), self.saved):
                b.copy_(s)
        return False


def schedule_class(name: str):
    from torch.distributed.pipelining import schedules

    return getattr(schedules, SCHEDULE_CLASSES[name])


def check_order_matches(torch_schedule, ours, pipe_rank: int) -> None:
    """Multi-stage schedules execute their ``pipeline_order``; it must be the plan's.  (Single-stage
    GPipe/1F1B run a fixed loop; tests/test_schedule.py checks those orders.)"""
    order = getattr(torch_schedule, "pipeline_order", None)
    if not order or pipe_rank not in order:
        return
    theirs = [str(a) for a in order[pipe_rank] if a is not None and "REDUCE_GRAD" not in str(a)]
    mine = [str(a) for a in ours.actions(pipe_rank)]
    if theirs != mine:
        raise RuntimeError(f"torch's {type(torch_schedule).__name__} order differs from the plan's on rank "
                           f"{pipe_rank}: {theirs[:6]} vs {mine[:6]}")


class Recorder:
    """(pipeline rank, action, stream, start_s, end_s) per action of the current step, and the stage
    whose action, gradient reduction or prefetched all-gather runs now (``stage``: None between them),
    which fsdp.ShardedCollectives reads to say which of a rank's stages issued a collective."""

    def __init__(self, pipe_rank: int):
        self.pipe_rank, self.t0, self.records, self.stage = pipe_rank, 0.0, [], None

    def start(self) -> None:
        self.t0, self.records = time.perf_counter(), []

    @contextlib.contextmanager
    def on_stage(self, stage: int):
        before, self.stage = self.stage, stage
        try:
            yield
        finally:
            self.stage = before

    @contextlib.contextmanager
    def action(self, action: Action, stream: str = "compute"):
        t = time.perf_counter()
        with self.on_stage(action.stage):
            yield
        self.records.append((self.pipe_rank, action, stream, t - self.t0, time.perf_counter() - self.t0))


def instrument(stage, rec: Recorder) -> None:
    """Time the stage's per-micro-batch calls under the simulator's action names, and mark as the
    stage's what FSDP2 issues for it between them: its gradient reduction (the reduce-scatters beside a
    pipeline, PipelineStage.perform_reduce_grad) and the all-gathers a multi-stage schedule starts
    ahead of its compute (its UNSHARD actions call each FSDP module's unshard)."""
    from torch.distributed.fsdp import FSDPModule

    fwd, bwd, wgt = stage.forward_one_chunk, stage.backward_one_chunk, stage.backward_weight_one_chunk

    def forward_one_chunk(chunk, *args, **kwargs):
        with rec.action(Action(stage.stage_index, Kind.F, chunk)):
            return fwd(chunk, *args, **kwargs)

    def backward_one_chunk(chunk, loss=None, full_backward=True, last_backward=False):
        with rec.action(Action(stage.stage_index, Kind.B if full_backward else Kind.I, chunk)):
            return bwd(chunk, loss=loss, full_backward=full_backward, last_backward=last_backward)

    def backward_weight_one_chunk(chunk, last_backward=False):
        with rec.action(Action(stage.stage_index, Kind.W, chunk)):
            return wgt(chunk, last_backward=last_backward)

    stage.forward_one_chunk = forward_one_chunk
    stage.backward_one_chunk = backward_one_chunk
    stage.backward_weight_one_chunk = backward_weight_one_chunk
    stage.perform_reduce_grad = _on_stage(stage.perform_reduce_grad, rec, stage.stage_index)
    for module in stage.submod.modules():
        if isinstance(module, FSDPModule):
            module.unshard = _on_stage(module.unshard, rec, stage.stage_index)
    # torch's metadata inference (the first step's extra forward and backward that find the shapes
    # crossing each boundary) is no action of the plan: the collectives it issues are not the step's
    for name in ("_prepare_forward_infra", "_prepare_backward_infra"):
        setattr(stage, name, _uncounted(getattr(stage, name)))


def _on_stage(call, rec: Recorder, stage: int):
    """``call`` run as stage ``stage``'s (Recorder.stage)."""
    def run(*args, **kwargs):
        with rec.on_stage(stage):
            return call(*args, **kwargs)
    return run


def _uncounted(infra):
    from torch.utils._python_dispatch import _disable_current_modes

    def call(*args, **kwargs):
        with _disable_current_modes():     # tensor_parallel.CollectiveCounter
            return infra(*args, **kwargs)
    return call
