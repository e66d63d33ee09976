"""What each action waits for: the one place this rule lives.

The validator, the lowering pass and the simulator all ask ``dependencies``.  Before lowering,
a compute action depends directly on compute actions of neighbouring stages; after lowering,
a cross-rank input arrives through a RECV that matches the neighbour's SEND.
"""

from __future__ import annotations

from parsim.schedule.actions import Action, Kind


def backward_kinds(split: bool) -> tuple[Kind, ...]:
    """The kinds that carry a stage's input gradient upstream: I when split, else B."""
    return (Kind.I,) if split else (Kind.B,)


def dependencies(a: Action, num_stages: int, rank_of, *, lowered: bool, split_backward: bool,
                 last_microbatch: int, buckets: int = 0, tied: bool = False) -> list[Action]:
    """The actions ``a`` must wait for.

    rank_of(stage) -> rank; split_backward: the schedule uses I/W instead of B;
    last_microbatch: m - 1; buckets: REDUCE_GRAD buckets per stage (0 without data parallel);
    tied: the stage has a REDUCE_TIED.  REDUCE_TIED is a collective of the stages holding the
    tied weight: here it waits for its own stage's gradients; the simulator also makes it wait
    for its partners (parsim.sim.engine).
    """
    s, k, i = a
    grad = Kind.I if split_backward else Kind.B
    last_bwd = Kind.W if split_backward else Kind.B

    def crossing(src: int, dst: int) -> bool:
        return lowered and rank_of(src) != rank_of(dst)

    if k is Kind.F:
        if s == 0:
            return []
        return [Action(s, Kind.RECV_F, i)] if crossing(s - 1, s) else [Action(s - 1, Kind.F, i)]
    if k in (Kind.B, Kind.I):
        deps = [Action(s, Kind.F, i)]
        if s < num_stages - 1:
            deps.append(Action(s, Kind.RECV_B, i) if crossing(s + 1, s) else Action(s + 1, grad, i))
        return deps
    if k is Kind.W:
        return [Action(s, Kind.I, i)]
    if k is Kind.SEND_F:
        return [Action(s, Kind.F, i)]
    if k is Kind.SEND_B:
        return [Action(s, grad, i)]
    if k is Kind.RECV_F:
        return [Action(s - 1, Kind.SEND_F, i)]
    if k is Kind.RECV_B:
        return [Action(s + 1, Kind.SEND_B, i)]
    if k is Kind.REDUCE_GRAD:
        return [Action(s, last_bwd, last_microbatch)]
    if k is Kind.REDUCE_TIED or (k is Kind.OPTIMIZER and not tied):
        if buckets:      # Megatron reduces a tied gradient over the pipeline after the dp buckets
            return [Action(s, Kind.REDUCE_GRAD, b) for b in range(buckets)]
        return [Action(s, last_bwd, last_microbatch)]
    if k is Kind.OPTIMIZER:
        return [Action(s, Kind.REDUCE_TIED)]
    raise ValueError(f"unknown action kind {k}")
