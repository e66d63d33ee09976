"""Lowering passes: compute-only schedules -> schedules with communication (compiler style, as
torch.distributed.pipelining's ``_add_send_recv`` and ``_add_reduce_grad``).

- ``add_send_recv``: a SEND right after the compute that produced the data, a RECV right before
  the compute that needs it (only where the two stages sit on different ranks).
- ``add_reduce_grad``: after a stage's last backward (B, or W when split), one REDUCE_GRAD per
  gradient bucket, as DDP issues them while that backward runs.
- ``add_optimizer``: one OPTIMIZER per stage at the end of its rank's list.
"""

from __future__ import annotations

from dataclasses import replace

from parsim.schedule.actions import Action, Kind, Schedule
from parsim.schedule.deps import dependencies


def split_backward(schedule: Schedule) -> bool:
    return any(a is not None and a.kind is Kind.I for acts in schedule.order for a in acts)


def add_send_recv(schedule: Schedule) -> Schedule:
    split = split_backward(schedule)
    grad = Kind.I if split else Kind.B
    S = schedule.num_stages
    order = []
    for acts in schedule.order:
        out: list[Action] = []
        for a in acts:
            if a is None:
                continue
            # RECVs this action needs, straight from the dependency rule.
            out += [d for d in dependencies(a, S, schedule.rank_of, lowered=True, split_backward=split,
                                            last_microbatch=schedule.num_microbatches - 1)
                    if d.kind in (Kind.RECV_F, Kind.RECV_B)]
            out.append(a)
            if a.kind is Kind.F and a.stage < S - 1 and schedule.rank_of(a.stage + 1) != schedule.rank_of(a.stage):
                out.append(Action(a.stage, Kind.SEND_F, a.microbatch))
            if a.kind is grad and a.stage > 0 and schedule.rank_of(a.stage - 1) != schedule.rank_of(a.stage):
                out.append(Action(a.stage, Kind.SEND_B, a.microbatch))
        order.append(tuple(out))
    return replace(schedule, order=tuple(order))


def add_reduce_grad(schedule: Schedule, buckets_per_stage: dict[int, int]) -> Schedule:
    last_bwd = Kind.W if split_backward(schedule) else Kind.B
    last = schedule.num_microbatches - 1
    order = []
    for acts in schedule.order:
        out: list[Action] = []
        for a in acts:
            if a is None:
                continue
            out.append(a)
            if a.kind is last_bwd and a.microbatch == last:
                out += [Action(a.stage, Kind.REDUCE_GRAD, b) for b in range(buckets_per_stage.get(a.stage, 0))]
        order.append(tuple(out))
    return replace(schedule, order=tuple(order))


def add_optimizer(schedule: Schedule) -> Schedule:
    order = []
    for r, acts in enumerate(schedule.order):
        stages = sorted({a.stage for a in acts if a is not None})
        order.append(tuple(a for a in acts if a is not None) + tuple(Action(s, Kind.OPTIMIZER) for s in stages))
    return replace(schedule, order=tuple(order))


def lower(schedule: Schedule, buckets_per_stage: dict[int, int] | None = None) -> Schedule:
    """All passes: send/recv, gradient reduction (when buckets are given), optimizer."""
    out = add_reduce_grad(schedule, buckets_per_stage) if buckets_per_stage else schedule
    return add_optimizer(add_send_recv(out))
