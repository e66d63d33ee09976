"""Schedule generators: pure functions of (p ranks, m micro-batches, v chunks).

Each returns the compute order per rank and matches torch.distributed.pipelining's
``pipeline_order`` action for action (tests/test_schedule.py compares them):

- ``gpipe``        ScheduleGPipe: all forwards, then all backwards (Huang et al. 2019).
- ``1f1b``         Schedule1F1B, PipeDream-flush (Narayanan et al. 2021): p-1-r warm-up forwards,
                   then one forward / one backward, then the remaining backwards.
- ``interleaved``  ScheduleInterleaved1F1B (Narayanan et al. 2021, Sec. 2.2): v chunks per rank,
                   depth first in rounds of p micro-batches.
- ``zbh1``         ScheduleInterleavedZeroBubble (Qi et al. 2023, ZB-H1 for v = 1): backward split
                   into I (input grad) and W (weight grad); W fills the cool-down bubble.

A drawing for p = 2, m = 4 (1f1b), one column per step:

    rank 0:  0F0 0F1       0B0 0F2 0B1 0F3 0B2     0B3
    rank 1:      1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3
"""

from __future__ import annotations

from parsim.errors import InfeasibleError
from parsim.schedule.actions import Action, Kind, Schedule


def gpipe(p: int, m: int) -> Schedule:
    order = tuple(tuple([Action(r, Kind.F, i) for i in range(m)] + [Action(r, Kind.B, i) for i in range(m)])
                  for r in range(p))
    return Schedule("gpipe", p, p, m, order, split_backward=False)


def one_f_one_b(p: int, m: int) -> Schedule:
    order = []
    F, B = Kind.F, Kind.B
    for r in range(p):
        warmup = min(p - 1 - r, m)
        acts = [Action(r, F, i) for i in range(warmup)]
        for i in range(m - warmup):                      # steady state: F(warmup + i), B(i)
            acts += [Action(r, F, warmup + i), Action(r, B, i)]
        acts += [Action(r, B, i) for i in range(m - warmup, m)]
        order.append(tuple(acts))
    return Schedule("1f1b", p, p, m, tuple(order), split_backward=False)


def _looped(p: int, m: int, v: int, warmup_factor: int, zero_bubble: bool, name: str) -> Schedule:
    """Depth-first looped schedules in rounds of ``m_round`` micro-batches (torch's flex-PP form).

    On rank r, op k of the forward stream runs chunk ``(k // m_round) % v``; the backward stream
    runs chunks in reverse.  Warm-up is ``(v-1)*m_round + warmup_factor*(p-1-r)`` forwards
    (factor 2 for interleaved 1F1B, as Megatron; 1 for zero bubble).  With zero bubble, rank r
    delays its W ops by r steady-state steps, then issues one W after each I.
    """
    rounds = max(1, m // p)
    m_round = m // rounds
    total = v * m
    order = []
    for r in range(p):
        warmup = min((v - 1) * m_round + warmup_factor * (p - 1 - r), total)
        fwd_next = [0] * v          # next micro-batch per local chunk, forward stream
        bwd_next = [0] * v
        w_next = [0] * v
        pending_w: list[int] = []   # stages whose I ran but W has not
        acts: list[Action] = []

        def fwd(k):
            chunk = (k // m_round) % v
            acts.append(Action(chunk * p + r, Kind.F, fwd_next[chunk]))
            fwd_next[chunk] += 1

        def bwd(k):
            chunk = v - 1 - ((k - warmup) // m_round) % v
            acts.append(Action(chunk * p + r, Kind.I if zero_bubble else Kind.B, bwd_next[chunk]))
            bwd_next[chunk] += 1
            pending_w.append(chunk)

        def weight():
            chunk = pending_w.pop(0)
            acts.append(Action(chunk * p + r, Kind.W, w_next[chunk]))
            w_next[chunk] += 1

        steady = total - warmup
        for k in range(warmup):                               # 1. warm-up: forwards only
            fwd(k)
        for j, k in enumerate(range(warmup, total)):          # 2. steady: F then B (then W)
            fwd(k)
            bwd(k)
            if zero_bubble and j >= r:
                weight()
        for j, k in enumerate(range(total, total + warmup)):  # 3. cool-down: remaining B (then W)
            bwd(k)
            if zero_bubble and steady + j >= r:
                weight()
        while zero_bubble and pending_w:                      # 4. trailing weight gradients
            weight()
        order.append(tuple(acts))
    return Schedule(name, p, v * p, m, tuple(order), split_backward=zero_bubble)


def interleaved(p: int, m: int, v: int) -> Schedule:
    return _looped(p, m, v, warmup_factor=2, zero_bubble=False, name="interleaved")


def zero_bubble_h1(p: int, m: int, v: int = 1) -> Schedule:
    return _looped(p, m, v, warmup_factor=1, zero_bubble=True, name="zbh1")


SCHEDULES = ("gpipe", "1f1b", "interleaved", "zbh1")


def check_feasible(name: str, p: int, m: int, v: int = 1) -> None:
    """Raise InfeasibleError, saying what to change, for a configuration that cannot run."""
    if name not in SCHEDULES:
        raise InfeasibleError(f"schedule: unknown {name!r}; choose one of {', '.join(SCHEDULES)}")
    if p < 1 or m < 1 or v < 1:
        raise InfeasibleError(f"schedule {name}: pp, microbatches and chunks must be >= 1 (got {p}, {m}, {v})")
    if name in ("gpipe", "1f1b") and v != 1:
        raise InfeasibleError(f"schedule {name}: runs one chunk per rank; use --schedule interleaved for "
                              f"{v} chunks, or --chunks 1")
    if name == "1f1b" and m < p:
        raise InfeasibleError(f"schedule 1f1b: microbatches ({m}) must be at least pp ({p}), as torch's Schedule1F1B "
                              f"requires; use {p} or more micro-batches, or --schedule gpipe")
    if name == "zbh1" and v > 1 and m % p:
        raise InfeasibleError(f"schedule zbh1 with {v} chunks: microbatches ({m}) must be a multiple of pp ({p}); "
                              f"try {((m + p - 1) // p) * p}")
    if name == "interleaved":
        if v < 2:
            raise InfeasibleError("schedule interleaved: needs --chunks >= 2 model chunks per rank "
                                  "(with one chunk use --schedule 1f1b)")
        if m % p:
            raise InfeasibleError(f"schedule interleaved: microbatches ({m}) must be a multiple of pp ({p}), "
                                  f"as Megatron requires; try {((m + p - 1) // p) * p}")


def build_schedule(name: str, p: int, m: int, v: int = 1) -> Schedule:
    check_feasible(name, p, m, v)
    if name == "gpipe":
        return gpipe(p, m)
    if name == "1f1b":
        return one_f_one_b(p, m)
    if name == "interleaved":
        return interleaved(p, m, v)
    return zero_bubble_h1(p, m, v)
