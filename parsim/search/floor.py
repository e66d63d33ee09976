"""A candidate's step-time floor before it has a split: the first, cheapest bound of the planner's
branch and bound (parsim.search.bound), from per-layer prefix sums alone (no split, no memory
check), and what a candidate's placement adds to it once known (Placed).

Each bound of the branch and bound must never exceed the next: floor <= lower_bound_s(any split)
<= simulated.  lower_bound_s (parsim.search.split.Bounds.lower_bound_s) of a split into stages
s = [A_s, B_s) (v chunks on each of pp ranks, m micro-batches, w_s = the stage's F + backward,
its backward min(B, I + W) under a split backward) is at least each of:

- per rank: m x sum of w_s over the rank's stages, at least m x the sum of its layers' w (under
  a split backward a stage's min(B, I + W) is at least the sum of its layers' minimums).  Each
  layer is on one rank, so the busiest rank carries at least what the busiest machine carries
  in any assignment of the layers to pp machines (busiest_share): at least T / pp, T = sum of w
  over all layers, at least the heaviest layer, and, for each k >= 1, at least the k + 1
  smallest of the k pp + 1 heaviest layers (pigeonhole: some machine holds k + 1 of them).
  With L layers of one kind that is ceil(L / pp) of them where m T / pp counts L / pp: 98
  layers on 64 ranks carry 2 layers' work, not 1.53;
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
  Under a split backward the upstream is micro-batch 0's forward alone: M >= F_r + m w_r with
  F_r the f of stages < r.  With a the least share of the forward in the work of any prefix of
  layers (a = min over k of F(k) / W(k), at most 1), F_r >= a S_r, and the same induction with
  q = 1 - a/m gives M >= a T / (1 - (1 - a/m)^pp) (a = 1 is the line above; it falls to m T / pp
  as a falls to 0, and rises with a).  A ratio, not a sum: it need not hold of a sharded graph
  whose layers' phases are each at least the unsharded one's over tp, so the searched layout's
  floor (below) leaves it out;
- with any number of chunks, one micro-batch's forward through every stage and its backward
  back (the lower bound's "chain"; I alone under a split backward, W may wait): the sum over
  every layer of F + B (F + I), whatever the split.  It is the term that holds where a family
  has fewer micro-batches than ranks (m < pp: the work term m T / pp is under one micro-batch's
  T), and the only fill term an interleaved or split-backward candidate's floor has.

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

from operator import sub
from typing import NamedTuple

import numpy as np

from parsim.plan import ParallelConfig
from parsim.search.resolve import boundary_links
from parsim.search.split import SLACK, Bounds


def floor_s(F: np.ndarray, B: np.ndarray, I: np.ndarray, W: np.ndarray, m: int, pp: int, v: int,
            split_backward: bool) -> float:
    """The floor above for m micro-batches on pp ranks of v chunks; F, B, I, W: per-layer prefix
    sums (length L + 1) of each phase's time at the candidate's micro-batch size."""
    return floor_from_terms(floor_terms(F, B, I, W, split_backward), m, pp, v, split_backward)


class FloorTerms(NamedTuple):
    """What floor_s reads of the phases, whatever m, pp and v; a family's shapes share them
    (BranchAndBound.floor_terms)."""
    total: float        # a rank's work per micro-batch over every layer (T)
    heaviest: tuple[float, ...]   # prefix sums of the layers' work, heaviest first (busiest_share)
    upstream: float     # the first micro-batch's path to the last layer
    last: float         # the last layer's work
    chain: float        # one micro-batch's forward and backward through every layer
    lead: float         # the least share of the work the fill's upstream counts in any prefix of
                        # layers: 1 with an unsplit backward, the forward's under a split one


def floor_terms(F: np.ndarray, B: np.ndarray, I: np.ndarray, W: np.ndarray,
                split_backward: bool) -> FloorTerms:
    """FloorTerms of the phases' per-layer prefix sums (module docstring)."""
    return phase_floor_terms(np.diff(F), np.diff(B), np.diff(I) if split_backward else None,
                             np.diff(W) if split_backward else None, split_backward)


def phase_floor_terms(f: np.ndarray, bwd: np.ndarray, i: np.ndarray | None, w_: np.ndarray | None,
                      split_backward: bool) -> FloorTerms:
    """FloorTerms of the phases' per-layer times (I and W read only under a split backward)."""
    if split_backward:
        chain, upstream = f + i, f
        w = f + np.minimum(bwd, i + w_)
        work, ahead = np.cumsum(w), np.cumsum(f)
        lead = float(np.min(ahead[work > 0] / work[work > 0], initial=1.0))
    else:
        chain = upstream = w = f + bwd
        lead = 1.0
    heaviest = np.concatenate([[0.0], np.cumsum(np.sort(w)[::-1])]).tolist()
    return FloorTerms(float(w.sum()), tuple(heaviest), float(upstream[:-1].sum()), float(w[-1]), float(chain.sum()),
                      lead)


def busiest_share(total: float, heaviest, pp: int) -> float:
    """The least that the busiest of pp machines carries, whatever layers each is given (module
    docstring): ``total`` the layers' work, ``heaviest`` its prefix sums with the heaviest layer
    first (heaviest[i]: the i heaviest layers').  With n = len(heaviest) - 1 layers, the k + 1
    smallest of the k pp + 1 heaviest are heaviest[k pp + 1] - heaviest[k pp - k]."""
    if pp == 1:
        return total
    k = (len(heaviest) - 2) // pp                # the largest k with k pp + 1 <= n
    # heaviest[k pp + 1] and heaviest[k (pp - 1)] for k = 1..K, in step (one C loop: a planner asks
    # this for every family it bounds)
    return max(total / pp, heaviest[1],
               *map(sub, heaviest[pp + 1: k * pp + 2: pp], heaviest[pp - 1: k * (pp - 1) + 1: pp - 1]))


def floor_from_terms(terms: FloorTerms, m: int, pp: int, v: int, split_backward: bool,
                     placed: "Placed | None" = None) -> float:
    """floor_s from its floor_terms; with ``placed`` (a candidate's placement known), its sends and
    optimizer steps too (Placed)."""
    total, heaviest, upstream, last, chain, lead = terms
    work = m * busiest_share(total, heaviest, pp)
    if placed is not None:
        work = max(work, (m * total + placed.steps_s) / pp)
        chain += 2 * placed.sends_s
        upstream += (1 if split_backward else 2) * placed.sends_s
    floor = max(work, chain)
    if v == 1:
        floor = max(floor, upstream + m * last)
        if m > 1 and lead > 0:               # the fill of any split (module docstring)
            floor = max(floor, lead * total / (1 - (1 - lead / m) ** pp))
    return floor * SLACK


class Placed(NamedTuple):
    """What a candidate's floor adds once its placement is known, before its split (the FLOOR
    entry's, BranchAndBound.placed_floor), each at most what Bounds.lower_bound_s charges any split:

    - ``sends_s``: the least time of the pp v - 1 sends across its stage boundaries, one way: the
      sum of the pp v - 1 smallest of each layer's least send over the candidate's boundary links
      (the boundaries sit after distinct layers).  The chain sends each twice (forward and
      backward); with one chunk per rank the path to the last stage sends each once under a split
      backward, twice under an unsplit one (lower_bound_s' head and upstream);
    - ``steps_s``: the optimizer steps of every stage, which the ranks run after their compute: the
      ranks' ends sum to at least m T + the steps, so the last ends at least at 1/pp of that.
      optimizer_time_s is linear in the parameters (both compute models, parsim.cost.compute), so
      the stages' steps add up to one step of all the parameters (ZeRO: of their shards); ZeRO-1's
      gathers are left out."""
    sends_s: float
    steps_s: float


def placed(bnd: Bounds, cfg: ParallelConfig, b: int) -> Placed:
    """Placed of ``cfg`` (its split not yet known) at micro-batch size ``b``, from ``bnd``'s per-layer
    numbers and the run's prices (its boundary links)."""
    stepped = bnd.param_prefix[-1] / cfg.grad_ranks if cfg.zero else bnd.param_prefix[-1]
    return Placed(bnd.least_sends_s(b, bnd.prices.boundary_links(cfg, boundary_links)),
                  bnd.compute.optimizer_time_s(stepped, bnd.opt_moved))


def lower_phase_terms(rows: np.ndarray, split_backward: bool) -> FloorTerms:
    """FloorTerms of per-layer phases each at most the ones a rank runs (floors of the phases,
    BranchAndBound.family_floor; their least over a candidate's ranks, Bounds.ranks_least_phases),
    without a split backward's fill (a ratio, which holds of the phases it was read from, not of
    phases below them)."""
    return without_fill_ratio(phase_floor_terms(*rows, split_backward), split_backward)


def searched_floor_s(terms_of, tp: int, members) -> float:
    """The least floor over a searched-layout family's candidates before its graph (above):
    ``terms_of(split_backward)`` the unsharded graph's floor_terms at the family's micro-batch
    size, ``members`` (m, pp, v, split_backward) of each candidate; a split backward's fill left
    out (its share of the forward is a ratio, not a sum of the phases)."""
    return min((floor_from_terms(without_fill_ratio(terms_of(split), split), m, pp, v, split)
                for m, pp, v, split in set(members)), default=np.inf) / tp


def without_fill_ratio(terms: FloorTerms, split_backward: bool) -> FloorTerms:
    """``terms`` without a split backward's fill (its lead, the forward's least share of the work:
    a ratio, which holds of the phases it was read from, not of phases each at least a floor), for
    floors read from floors of the phases (searched_floor_s, BranchAndBound.family_floor)."""
    return terms._replace(lead=0.0) if split_backward else terms
