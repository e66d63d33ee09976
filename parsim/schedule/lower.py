"""Lowering passes: compute-only schedules -> schedules with communication (compiler style, as
torch.distributed.pipelining's ``_add_send_recv`` and ``_add_reduce_grad``).

- ``add_send_recv``: a SEND right after the compute that produced the data, a RECV right before
  the compute that needs it (only where the two stages sit on different ranks).
- ``add_reduce_grad``: after a stage's last backward (B, or W when split), one REDUCE_GRAD per
  gradient bucket, as DDP issues them while that backward runs; or, ``after_backward``, every
  stage's at the end of its rank's list, in stage order (Megatron-Core without
  --overlap-grad-reduce: finalize_model_grads reduces each model chunk's buckets once the schedule
  is done; parsim.plan.ParallelConfig.overlap_grad_reduce).
- ``add_reduce_tied``: one REDUCE_TIED per stage that holds a copy of a tied weight (the GPT's
  word embedding on the first and last stage), at the end of its rank's list: Megatron's
  embedding-gradient all-reduce, after the dp buckets and before the optimizer.
- ``add_optimizer``: one OPTIMIZER per stage at the end of its rank's list.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from parsim.schedule.actions import Action, Kind, Schedule
from parsim.schedule.deps import dependencies


def _comm_templates(schedule: Schedule) -> dict[tuple[int, Kind], tuple[tuple[Kind, ...], tuple[Kind, ...]]]:
    """Per (stage, kind): the RECV kinds to put before such an action and the SEND kinds after it.

    The RECVs come straight from the dependency rule; a SEND follows the compute whose output a
    RECV elsewhere waits for.  The micro-batch index passes through unchanged, so one template
    per (stage, kind) serves every micro-batch."""
    S, split = schedule.num_stages, schedule.split_backward
    kinds = (Kind.F, Kind.I, Kind.W) if split else (Kind.F, Kind.B)
    recv_before: dict[tuple[int, Kind], tuple[Kind, ...]] = {}
    sends_for: dict[tuple[int, Kind], list[Kind]] = {(s, k): [] for s in range(S) for k in kinds}
    for s in range(S):
        for k in kinds:
            deps = dependencies(Action(s, k, 0), S, schedule.rank_of, lowered=True, split_backward=split,
                                last_microbatch=schedule.num_microbatches - 1)
            recv_before[(s, k)] = tuple(d.kind for d in deps if d.kind in (Kind.RECV_F, Kind.RECV_B))
    for (s, k), recvs in recv_before.items():
        for recv in recvs:
            send = dependencies(Action(s, recv, 0), S, schedule.rank_of, lowered=True, split_backward=split,
                                last_microbatch=schedule.num_microbatches - 1)[0]
            producer = dependencies(send, S, schedule.rank_of, lowered=True, split_backward=split,
                                    last_microbatch=schedule.num_microbatches - 1)[0]
            sends_for[(producer.stage, producer.kind)].append(send.kind)
    return {key: (recv_before[key], tuple(sends_for[key])) for key in recv_before}


def add_send_recv(schedule: Schedule) -> Schedule:
    # kind -> per-stage (recvs, sends): one hash of the kind per action, no key tuple to build
    by_kind: dict[Kind, list] = {}
    for (s, k), template in _comm_templates(schedule).items():
        by_kind.setdefault(k, [((), ())] * schedule.num_stages)[s] = template
    none = [((), ())] * schedule.num_stages
    new = tuple.__new__
    order = []
    for acts in schedule.order:
        out: list[Action] = []
        append = out.append
        for a in acts:
            if a is None:
                continue
            s, k, i = a
            recvs, sends = by_kind.get(k, none)[s]
            for kind in recvs:
                append(new(Action, (s, kind, i)))
            append(a)
            for kind in sends:
                append(new(Action, (s, kind, i)))
        order.append(tuple(out))
    return replace(schedule, order=tuple(order))


def add_reduce_grad(schedule: Schedule, buckets_per_stage: dict[int, int], after_backward: bool = False) -> Schedule:
    last_bwd = Kind.W if schedule.split_backward else Kind.B
    last = schedule.num_microbatches - 1
    order = []
    for acts in schedule.order:
        out: list[Action] = []
        done: list[int] = []                # after_backward: the rank's stages, their buckets at the end
        for a in acts:
            if a is None:
                continue
            out.append(a)
            if a.kind is last_bwd and a.microbatch == last:
                if after_backward:
                    done.append(a.stage)
                else:
                    out += [Action(a.stage, Kind.REDUCE_GRAD, b) for b in range(buckets_per_stage.get(a.stage, 0))]
        for s in sorted(done):
            out += [Action(s, Kind.REDUCE_GRAD, b) for b in range(buckets_per_stage.get(s, 0))]
        order.append(tuple(out))
    return replace(schedule, order=tuple(order))


def add_reduce_tied(schedule: Schedule, tied_stages: Iterable[int]) -> Schedule:
    tied = set(tied_stages)
    order = []
    for acts in schedule.order:
        stages = sorted({a.stage for a in acts if a is not None} & tied)
        order.append(tuple(a for a in acts if a is not None) + tuple(Action(s, Kind.REDUCE_TIED) for s in stages))
    return replace(schedule, order=tuple(order))


def add_optimizer(schedule: Schedule) -> Schedule:
    order = []
    for acts in schedule.order:
        stages = sorted({a.stage for a in acts if a is not None})
        order.append(tuple(a for a in acts if a is not None) + tuple(Action(s, Kind.OPTIMIZER) for s in stages))
    return replace(schedule, order=tuple(order))


def lower(schedule: Schedule, buckets_per_stage: dict[int, int] | None = None,
          tied_stages: Iterable[int] = (), reduce_after_backward: bool = False) -> Schedule:
    """All passes: send/recv, gradient reduction (when buckets are given; all after the rank's
    backward with ``reduce_after_backward``), tied-gradient reduction (on ``tied_stages``), optimizer."""
    out = add_reduce_grad(schedule, buckets_per_stage, reduce_after_backward) if buckets_per_stage else schedule
    out = add_send_recv(out)
    return add_optimizer(add_reduce_tied(out, tied_stages) if tied_stages else out)
