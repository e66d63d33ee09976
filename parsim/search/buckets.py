"""The lower bound's term for data-parallel gradient buckets (DDP and ZeRO-1), read from a
schedule's order (parsim.search.split.Bounds.lower_bound_s).

The simulator (parsim.sim.engine) starts a stage's buckets part-way through the stage's last
backward (W under a split backward: parsim.schedule.lower puts them after it) and runs a rank's
buckets one after another on its data-parallel stream, in list order; the stage's optimizer steps
after them.  So a rank's buckets cannot finish before the last backward of each stage has started,
and that start follows every compute action before it in the rank's list.  Interleaved schedules
put every chunk's last backward in the cool-down, so most of a rank's reductions follow its compute:
ResNet-50 on 1,024 Ascend 910s had interleaved candidates bounded about 20 ms under steps of
31-72 ms (results/2026-12-04b-amd-epyc/buckets-bound-counts.txt).
"""

from __future__ import annotations

from parsim.schedule.actions import Kind


def final_backwards(schedule) -> list[list[tuple[int, tuple]]]:
    """Per rank, each of its stages' last backward (W under a split backward: parsim.schedule.lower
    puts the buckets after it) in list order: (the stage, the compute actions before it in the
    rank's list as (stage, phase, count)), phase 0-3 for F, B, I, W (final_backward_reductions)."""
    phase = {Kind.F: 0, Kind.B: 1, Kind.I: 2, Kind.W: 3}
    final = Kind.W if schedule.split_backward else Kind.B
    last = schedule.num_microbatches - 1
    out = []
    for r in range(schedule.num_ranks):
        before: dict[tuple[int, int], int] = {}
        finals = []
        for a in schedule.actions(r):
            k = phase.get(a.kind)
            if k is None:
                continue
            if a.kind is final and a.microbatch == last:
                finals.append((a.stage, tuple((s, p, n) for (s, p), n in before.items())))
            before[(a.stage, k)] = before.get((a.stage, k), 0) + 1
        out.append(finals)
    return out


def final_backward_reductions(finals, work, head) -> float:
    """A step no candidate with DDP or ZeRO-1 buckets can beat, from its schedule's order
    (Bounds.lower_bound_s; ``finals``: final_backwards of its schedule): on each rank, the buckets
    of a stage start no earlier than the stage's last backward does (parsim.sim.engine: at a share
    of it), which follows every compute action before it in the rank's list (each at least its
    phase's time in ``work``, the rank's first no earlier than ``head``); the rank's buckets run
    one after another in list order, each stage's no faster than one message of its gradients
    (``work``'s all-reduce); then the stage whose buckets are last steps its optimizer.  ``work``:
    per stage (F, B, I, W, all-reduce, optimizer step) of one micro-batch."""
    best = 0.0
    for r, stages in enumerate(finals):
        if not stages:
            continue
        tail, step = 0.0, work[stages[-1][0]][5]
        for s, before in reversed(stages):
            tail += work[s][4]
            start = head[r] + sum(n * work[x][p] for x, p, n in before)
            best = max(best, start + tail + step)
    return best
