"""A split moved a layer at a time until the simulated peak's floor fits: the planner's repair of
a candidate whose split overruns the cap by what the partitioner's closed form leaves out.

The partitioner balances a candidate's stages under the closed-form stage memory
(parsim.search.split.StageMemory), which leaves out the backward's workspace (under full
recomputation, a whole layer's activations while its forward runs again) and, with v chunks,
charges each stage as if it were the rank's fullest.  Its split can then overrun the cap by
less than a layer's worth where a split a layer off at a few boundaries fits: Llama 3 405B on
576 H100s, dp 16 pp 9 tp 4, split (0, 14, 29, ..., 113, 128), 1.42 GiB over 61.06 GiB, where
(0, 14, 28, ..., 113, 128) fits at 59.26 GiB and is the fastest plan the search finds
(results/2026-12-03b-amd-epyc/planner-split-overrun.txt).

``resplit`` walks from the split: while the fullest rank's floor (parsim.sim.memory.
rank_floors_bytes, every term the simulator charges but ZeRO's collective buffers) exceeds the cap,
it moves one boundary of one of that rank's stages by a layer, the first layer to the stage
before or the last to the stage after, whichever leaves the least fullest floor, and stops when it
fits, when no move lowers the fullest floor, or after ``moves`` moves.  The first and last
boundaries stay (the embedding and the head stay where they are), every stage keeps a layer.
Tried only on splits within REACH of the cap: further over, a layer's worth will not do.
"""

from __future__ import annotations

from typing import Callable, Sequence

# how far over the cap a split's floor may be for resplit to try it: a stage of 14 of Llama 3
# 405B's layers moves about 7% of its activations and workspace with one layer
REACH = 1.05


def resplit(bounds: Sequence[int], pp: int, floors_of: Callable[[tuple[int, ...]], list[float]], cap: float,
            moves: int) -> tuple[int, ...] | None:
    """A split a layer at a time from ``bounds`` (pp x v stages, rank r holding stages r, r + pp, ...)
    whose every rank's floor (``floors_of(bounds)``, one per rank) is within ``cap``; None if the
    walk above finds none, or ``bounds``' floors fit already."""
    bounds = tuple(bounds)
    floors = floors_of(bounds)
    if not cap < max(floors) <= cap * REACH:      # fits already (what overran is ZeRO's buffers), or too far
        return None
    stages = len(bounds) - 1
    for _ in range(moves):
        worst = max(range(pp), key=floors.__getitem__)
        if floors[worst] <= cap:
            return bounds
        best = None
        for s in range(worst, stages, pp):
            for i, step in ((s, 1), (s + 1, -1)):       # its first layer back, its last layer on
                if not 0 < i < stages or not bounds[i - 1] < bounds[i] + step < bounds[i + 1]:
                    continue
                trial = bounds[:i] + (bounds[i] + step,) + bounds[i + 1:]
                found = floors_of(trial)
                if best is None or max(found) < max(best[1]):
                    best = (trial, found)
        if best is None or max(best[1]) >= floors[worst]:
            return None
        bounds, floors = best
    return bounds if max(floors) <= cap else None
