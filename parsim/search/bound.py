"""A candidate's step-time floor before it has a split: the planner's first, cheapest bound.

The planner's branch and bound (parsim.search.planner.plan) prices a candidate in three steps,
each dearer and tighter than the last:

0. for the searched layout, before its graph is built (a strategy search per micro-batch size):
   searched_floor_s, this floor of the unsharded graph over tp;
1. this floor, from per-layer prefix sums alone (no split, no memory check);
2. its memory-constrained split and the split's lower bound (planner._Bounds.lower_bound_s);
3. the simulation, unless the split's peak memory without it already exceeds the cap
   (parsim.sim.memory.peak_floor_bytes: every term the simulator charges but ZeRO's buffers).

A candidate goes a step further only when its bound is at most the k-th best simulated step so
far, so each bound must never exceed the next: floor <= lower_bound_s(any split) <= simulated.
lower_bound_s of a split into stages s = [A_s, B_s) (v chunks on each of pp ranks, m
micro-batches, w_s = the stage's F + backward, its backward min(B, I + W) under a split
backward) is at least each of:

- per rank: m x sum of w_s over the rank's stages.  The ranks share the total T = sum of w over
  all layers, so the busiest carries at least m T / pp; and it carries at least one stage, whose
  w is at least the heaviest layer's;
- with one chunk per rank, the last stage [A, L): U(A) + m (P(L) - P(A)), U the prefix of what
  the bound counts upstream (F + B; F alone under a split backward, u_i <= w_i) and P the prefix
  of w.  Raising A by one layer i changes it by u_i - m w_i <= 0, so it is least with the last
  layer alone: U(L - 1) + m w_(L-1), whatever the split;
- with one chunk per rank and an unsplit backward, stage r's m micro-batches of work come after
  micro-batch 0's forward through stages < r and before the last one's backward through them
  (the lower bound's "upstream"): with S_r the w of stages < r, the step is at least
  M = max over r of S_r + m w_r.
  Then w_r <= (M - S_r) / m, so S_(r+1) = S_r + w_r <= q S_r + M / m with q = 1 - 1/m, and by
  induction S_r <= M (1 - q^r); at r = pp, T <= M (1 - q^pp): whatever the split,

      M >= T / (1 - (1 - 1/m)^pp),

  at least m T / pp (Bernoulli): the pipeline's fill and drain, about (m + (pp - 1) / 2) T / pp
  at large m where the balanced split takes (m + pp - 1) T / pp.

The memory floor: the closed-form peak of a split (planner._StageMemory) charges stage j

    mem_j = v (static_j + boundary_j + n_j b saved_j),   every term >= 0,

n_j its in-flight micro-batches.  Over the pp v stages the static bytes add up to at least
P x the static bytes per parameter (every parameter is held at least once; a tied weight's copy
adds) and the saved bytes to at least S, the whole model's (the stage sums telescope, and what a
stage's first layer shares with its input only adds).  The fullest stage holds at least the
average, so max_j mem_j >= P static / pp; and it holds at least any weighted mean, here with
weights (1 / n_j) / H, H = sum of 1 / n_j, which cancels the in-flight counts:

    max_j mem_j >= v (P static / (H max_j n_j) + b S / H).

When the larger of the two exceeds the cap, no split fits and the partitioner need not run.

The searched layout's floor: where the compute model says a layer's share on one device of a
tensor-parallel group takes at least 1/tp of the whole layer's time in each phase
(parsim.cost.compute.share_bounds_time), and its tensor-parallel steps only add to it, every
per-layer F, B, I and W of the per-device graph, whatever strategies the search picks, is at
least the unsharded graph's over tp.  The floor above is non-decreasing in each of them and
scales with them, so each candidate of the family floors at floor(unsharded) / tp.

Each is a sum of the same per-layer times the lower bound reads, so the floor needs no compute
model of its own; tests/test_planner.py checks floor <= lower_bound_s <= simulated on small
searches.
"""

from __future__ import annotations

import numpy as np

# Rounding: prefix differences are not bit-equal to the split's own sums.
_SLACK = 1 - 1e-9


def floor_s(F: np.ndarray, B: np.ndarray, I: np.ndarray, W: np.ndarray, m: int, pp: int, v: int,
            split_backward: bool) -> float:
    """The floor above for m micro-batches on pp ranks of v chunks; F, B, I, W: per-layer prefix
    sums (length L + 1) of each phase's time at the candidate's micro-batch size."""
    f = np.diff(F)
    bwd = np.diff(B)
    if split_backward:
        bwd = np.minimum(bwd, np.diff(I) + np.diff(W))
    w = f + bwd
    total = float(w.sum())
    floor = m * max(total / pp, float(w.max()))
    if v == 1:
        upstream = f if split_backward else f + np.diff(B)
        floor = max(floor, float(upstream[:-1].sum()) + m * float(w[-1]))
        if not split_backward and m > 1:     # the fill of any split (module docstring)
            floor = max(floor, total / (1 - (1 - 1 / m) ** pp))
    return floor * _SLACK


def searched_floor_s(phases, tp: int, members) -> float:
    """The least floor over a searched-layout family's candidates before its graph (above):
    ``phases`` the unsharded graph's prefix sums (floor_s) at the family's micro-batch size,
    ``members`` (m, pp, v, split_backward) of each candidate."""
    return min((floor_s(*phases, m, pp, v, split) for m, pp, v, split in set(members)), default=np.inf) / tp


def memory_floor_bytes(params: float, static_bytes_per_param: float, saved_bytes: float, inflight,
                       b: int, v: int) -> float:
    """The least closed-form stage peak any split can have (above): ``params`` and ``saved_bytes``
    (per sample) of the whole model, ``inflight`` the in-flight micro-batches of each of the pp v
    stages, b samples per micro-batch."""
    pp = len(inflight) / v
    static = params * static_bytes_per_param
    h = sum(1 / n for n in inflight)
    return max(static / pp, v * (static / (h * max(inflight)) + b * saved_bytes / h)) * _SLACK
