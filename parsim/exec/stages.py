"""Stage modules from a plan: the model's cut units, split at the plan's boundaries, wrapped in
torch.distributed.pipelining's PipelineStage and driven by its schedule class for the plan's
schedule (whose order tests/test_schedule.py proves equal to parsim.schedule's).
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from parsim.model.extract import cut_units
from parsim.model.spec import ModelSpec, build_module
from parsim.plan import ParallelConfig, Plan, check_plan_matches

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
    check_plan_matches(plan, spec, plan_path)
    torch.manual_seed(seed)
    return cut_units(build_module(spec.source, spec.path))


def local_stages(cfg: ParallelConfig, pipe_rank: int) -> list[int]:
    """Stage indices this pipeline rank holds (looped placement: s % pp == pipe_rank)."""
    return [s for s in range(cfg.stages) if s % cfg.pp == pipe_rank]


def sequential(units: list[tuple[str, nn.Module]]) -> nn.Sequential:
    """Units chained in order; unit "layer1.0" becomes child "layer1_0" (module names cannot hold dots),
    so stage and whole-model state dicts share their keys."""
    return nn.Sequential(OrderedDict((name.replace(".", "_"), m) for name, m in units))


def stage_module(units: list[tuple[str, nn.Module]], cfg: ParallelConfig, stage: int) -> nn.Sequential:
    return sequential(units[cfg.bounds[stage]:cfg.bounds[stage + 1]])


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
