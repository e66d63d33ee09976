"""The planner's branch and bound: candidates taken best bound first, each priced in steps of
rising cost, and a candidate's step-time floor before it has a split, the first, cheapest bound.

The branch and bound (parsim.search.planner.plan) prices a candidate in three steps, each dearer
and tighter than the last:

0. for the searched layout, before its graph is built (a strategy search per micro-batch size):
   searched_floor_s, this floor of the unsharded graph over tp;
1. this floor, from per-layer prefix sums alone (no split, no memory check);
2. its memory-constrained split and the split's lower bound (parsim.search.split.Bounds.lower_bound_s);
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

from dataclasses import dataclass, replace

import numpy as np

from parsim.model.graph import LayerGraph
from parsim.plan import ParallelConfig
from parsim.search.resolve import boundary_links
from parsim.search.split import SLACK, Bounds
from parsim.sim import Estimate



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
    return floor * SLACK


def searched_floor_s(phases, tp: int, members) -> float:
    """The least floor over a searched-layout family's candidates before its graph (above):
    ``phases`` the unsharded graph's prefix sums (floor_s) at the family's micro-batch size,
    ``members`` (m, pp, v, split_backward) of each candidate."""
    return min((floor_s(*phases, m, pp, v, split) for m, pp, v, split in set(members)), default=np.inf) / tp


@dataclass(frozen=True)
class Candidate:
    config: ParallelConfig
    estimate: Estimate
    label: str = "planner"

    @property
    def peak_memory_bytes(self) -> float:
        return max(self.estimate.peak_memory_bytes)

    def key(self) -> tuple:
        c = self.config
        return (c.dp, c.pp, c.tp, c.tp_layout, c.recompute, c.microbatches, c.schedule, c.chunks, c.placement,
                c.bounds, c.zero, c.cp, c.tp_comm_overlap, c.cp_mode, c.ep)


GRAPH, FLOOR, SPLIT = 0, 1, 2         # the kinds of entry in plan()'s branch and bound
# When a GRAPH entry needs the auto layout searched at its micro-batch size, the sizes of the
# same tp whose families' bounds are within this factor of its bound are searched with it, in one
# pass (parsim.shard.auto.search_sizes: the same answers, for about the price of one search).
# Speed only, never the answer.  Measured on the goals of bench_planner.py (2026-11-24): the
# sizes the search went on to need had bounds 1.0-1.6x the first one's of their tp (ResNet-50
# on 1024 Ascend 910s, GPT-3 175B on 1024 A100s); those it pruned, 1.9x and more (GPT-3: three
# sizes searched for nothing) and 2.4x and more (ResNet-50).
SEARCH_AHEAD = 2.0


def candidate(bnd: Bounds, cfg: ParallelConfig, b: int, graph: LayerGraph, cap: float, misses: list):
    """``cfg`` (without bounds) split for its placement's boundary links, as a pending entry
    ordered by its lower bound, then by a tie-break on the configuration; None (noted in
    ``misses``) where no split fits the memory bound."""
    links = bnd.prices.boundary_links(cfg, boundary_links)
    # memory: ZeRO shards over the dp x cp ranks holding the same parameters
    args = (cfg.schedule, cfg.microbatches, cfg.pp, cfg.chunks, b, cfg.grad_ranks, links)
    bounds = bnd.split(*args, cap, zero=cfg.zero)
    if bounds is None:
        misses.append((bnd, args, (cfg.tp, cfg.tp_layout, cfg.recompute, cfg.zero, cfg.cp)))
        return None
    cfg = replace(cfg, bounds=bounds)
    key = (bnd.lower_bound_s(cfg, b), -cfg.microbatches, cfg.pp, cfg.tp, cfg.recompute, cfg.schedule, cfg.chunks,
           cfg.placement, cfg.tp_layout, cfg.zero, cfg.cp, cfg.tp_comm_overlap, cfg.cp_mode, cfg.ep)
    return (key[0], key, cfg, graph)
