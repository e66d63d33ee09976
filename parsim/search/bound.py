"""The planner's branch and bound: candidates taken best bound first, each priced in steps of
rising cost.

The branch and bound (parsim.search.planner.plan) prices a candidate in three steps, each dearer
and tighter than the last:

0. for the searched layout, before its graph is built (a strategy search per micro-batch size):
   searched_floor_s, the step-time floor of the unsharded graph over tp; for any family, before a
   layer is priced at its micro-batch size: the floor of the layers' floors
   (BranchAndBound.family_floor);
1. the step-time floor (parsim.search.floor), from per-layer prefix sums alone (no split, no
   memory check), and, once a candidate's placement is known, what the placement adds to it
   (parsim.search.floor.Placed);
2. its memory-constrained split and the split's lower bound (parsim.search.split.Bounds.lower_bound_s);
3. the simulation, unless the split's peak memory without it already exceeds the cap
   (parsim.sim.memory.peak_floor_bytes: every term the simulator charges but ZeRO's buffers).

A candidate goes a step further only when its bound is at most the k-th best simulated step so
far, so each bound must never exceed the next: floor <= lower_bound_s(any split) <= simulated
(parsim.search.floor says why each floor term holds).
"""

from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass, replace

from parsim.cost.compute import share_bounds_time
from parsim.errors import InfeasibleError
from parsim.model.graph import LayerGraph
from parsim.plan import CP_MODES, ParallelConfig
from parsim.search.enumerate import overlaps_grad_reduce, schedules, twin_key, zero_variants
from parsim.search.floor import FloorTerms, floor_from_terms, floor_terms, lower_phase_terms, placed, searched_floor_s
from parsim.search.resolve import boundary_links
from parsim.search.resplit import REACH, resplit
from parsim.search.split import SLACK, Bounds
from parsim.shard.builtin import SEARCHED
from parsim.shard.graph import replicates_every_operator
from parsim.shard.prepare import (auto_memory_bytes, expert_graph, per_device_graph, search_auto_sizes,
                                   searched_already)
from parsim.sim import Estimate, simulate
from parsim.sim.memory import peak_floor_bytes, rank_floors_bytes
from parsim.sim.overlap import TP_OVERLAP_LAYOUTS, supports_overlap


@dataclass(frozen=True)
class Candidate:
    config: ParallelConfig
    estimate: Estimate
    label: str = "planner"
    p_best: float | None = None        # the share of the profile's replicates it is fastest in (search.noise)

    @property
    def peak_memory_bytes(self) -> float:
        return max(self.estimate.peak_memory_bytes)

    def rank(self) -> tuple:
        """The planner's order: by step time, then memory, then the configuration (ties break the
        same way every run)."""
        return self.estimate.step_time_s, self.peak_memory_bytes, self.key()

    def key(self) -> tuple:
        c = self.config
        return (c.dp, c.pp, c.tp, c.tp_layout, c.recompute, c.microbatches, c.schedule, c.chunks, c.placement,
                c.bounds, c.zero, c.cp, c.tp_comm_overlap, c.cp_mode, c.ep, c.etp, c.recompute_layers,
                c.recompute_every, c.dp_shard)


def refine_ranked(ranked: list[Candidate], refine) -> tuple[list[Candidate], dict]:
    """``refine(cand)`` of each of ``ranked`` (a faster candidate, or ``cand`` itself), ranked again
    (faster only, so the same top k), and each refined one's key -> the step it replaced, for the
    report's lines (parsim.search.recompute_layers, parsim.search.hybrid_shard)."""
    out, replaced = [], {}
    for cand in ranked:
        better = refine(cand)
        if better is not cand:
            replaced[better.key()] = cand.estimate.step_time_s
        out.append(better)
    return sorted(out, key=Candidate.rank), replaced


GRAPH, FAMILY, MEMBERS, FLOOR, SPLIT = 0, 1, 2, 3, 4     # the kinds of entry in the branch and bound (BranchAndBound)
# When a GRAPH entry needs the auto layout searched at its micro-batch size, the sizes of the
# same tp whose families' bounds are within this factor of its bound (and not past the k-th best
# step so far: those never come up) are searched with it, in one
# pass (parsim.shard.auto.search_sizes: the same answers, for about the price of one search), and
# so are the searches under their pp's memory caps that those families will ask for, one pass a cap.
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
           cfg.placement, cfg.tp_layout, cfg.zero, cfg.cp, cfg.tp_comm_overlap, cfg.cp_mode, cfg.ep, cfg.etp)
    return (key[0], key, cfg, graph)


def _config_args(dp, pp, m, tp, layout, recompute, cp, member: tuple) -> tuple:
    """ParallelConfig's positional arguments for a family's member (schedule, chunks, placement,
    zero; BranchAndBound.members), before its split."""
    schedule, v, placement, zero = member
    return (dp, pp, m, schedule, v, (), placement, tp, layout, recompute, zero, cp)


class BranchAndBound:
    """The planner's search over the candidates of ``families`` (parsim.search.enumerate), best
    bound first, over four kinds of entry:

        GRAPH    a searched-layout family whose per-device graph is not built yet, bounded by its
                 unsharded graph's floor over tp (searched_floor_s);
        FAMILY   a family's candidates under one tp overlap before its layers are priced at its
                 micro-batch size, bounded by the floor of their floors (family_floor): its
                 shapes' MEMBERS entries when it comes up;
        MEMBERS  a family's candidates of one shape (chunks, split backward), which share a floor:
                 one entry until it comes up, then each candidate a FLOOR entry (below);
        FLOOR    a candidate without a split, bounded by its floor (floor_s), then by its placed
                 floors (placed_floor);
        SPLIT    a candidate with its memory-constrained split, bounded by Bounds.lower_bound_s.

    Every bound is at most the simulated step time of every candidate it stands for, so the search
    may stop when the best bound left exceeds the k-th best simulated step: what it skips cannot
    reach the top k (Constraints.prune=False simulates everything, for tests).  A FAMILY entry's
    floor is at most each of its MEMBERS entries' and carries the least of their tie-break numbers,
    so every other entry comes up in the order it would if each family were priced when bound: the
    same candidates split and simulated, the same ranking (tests/test_family_floor.py).  A recomputing
    candidate whose twin without recomputation fits the closed-form memory bound is held back,
    and comes back only if the twin's simulated peak misses the cap (recomputing is never faster).

    After ``run``: ``results`` (simulated within the cap), ``over_memory`` (simulated over it),
    ``unsimulated`` ((cfg, graph) whose peak floor exceeds the cap) and ``all_misses()`` (no split
    fits: a candidate whose closed-form memory floor exceeds the cap is one when its family is
    bound, never an entry)."""

    def __init__(self, spec, prices, constraints, cap: float, settings, compute, tp_compute: dict, ep_compute: dict):
        self.spec, self.prices, self.c, self.cap = spec, prices, constraints, cap
        self.compute, self.tp_compute, self.ep_compute = compute, tp_compute, ep_compute
        self.cluster, self.memo = prices.cluster, prices.shard
        self.twin_graphs = {(tp, layout, cp, graph.etp): graph for tp, layout, recompute, cp, graph in settings
                            if not recompute and graph is not None}
        self.heap: list[tuple] = []
        self.order = itertools.count()          # ties: first pushed first; payloads never compared
        self.bounds_of: dict[tuple, Bounds] = {}
        self.floor_terms_of: dict[tuple, FloorTerms] = {}     # (id(bounds), b, split backward) -> floor_terms
        self.own_terms_of: dict[tuple, FloorTerms] = {}     # (id(ranks' least phases), split backward) -> placed_floor's
        self.lower_terms_of: dict[tuple, FloorTerms | None] = {}     # (id(bounds), b, split backward) -> family_floor's
        self.overlap_priced = supports_overlap(self.cluster)
        self.misses: list[tuple] = []
        # no split fits, found when bound: (bounds, family, its members' indices, members, kwargs, b)
        self.unfit: list[tuple] = []
        self.unsharded_graphs: dict[tuple[bool, int], LayerGraph] = {}
        self.pushed: set[tuple] = set()         # the families bound so far (a canonical one may recur)
        self.member_lists: dict[tuple, list[tuple]] = {}     # (dp, pp, m, cp, ep) -> members
        self.replicating: dict[int, bool] = {}  # id(graph) -> whether its layout splits no operator
        self.graph_sizes: dict[int, list[tuple[float, int, int]]] = {}    # tp -> (bound, b, pp) of its GRAPH entries
        self.results: list[Candidate] = []
        self.over_memory: list[Candidate] = []
        self.held: dict[tuple, tuple] = {}      # recomputing candidates whose twin fits without (by its key)
        self.released: set[tuple] = set()       # keys whose twin without recomputation missed the cap, simulated
        self.unsimulated: list[tuple] = []      # (cfg, graph) whose peak floor exceeds the cap: not simulated
        self.kth = float("inf")

    def all_misses(self) -> list[tuple]:
        """The candidates no split fits, as ``candidate`` notes them: those found so when their
        family was bound (``unfit``: every one of them, so a search that simulated nothing names the
        same ones as one that split each), and those the split found."""
        for bnd, family, indices, members, kwargs, b in self.unfit:
            for i in indices:
                args = _config_args(*family, members[i])
                for kw in kwargs:
                    candidate(bnd, ParallelConfig(*args, **kw), b, None, self.cap, self.misses)
        self.unfit.clear()
        return self.misses

    def compute_of(self, tp: int, layout: str, ep: int):
        return self.tp_compute.get((tp, layout)) or self.ep_compute.get(ep) or self.compute

    def push(self, families) -> int:
        """Every family's first entry; returns the candidates in the search space."""
        considered = sum(len(self.members(dp, pp, m, cp, ep)) * len(self.overlaps(tp, layout)) * len(self.cp_modes(cp))
                         for tp, layout, _, cp, _, dp, pp, m, _, ep in families)
        for tp, layout, recompute, cp, graph, dp, pp, m, b, ep in families:
            if graph is None:
                bound = self.searched_bound(tp, recompute, cp, dp, pp, m, b)
                if bound < math.inf:
                    heapq.heappush(self.heap, (bound, next(self.order), GRAPH, (tp, layout, recompute, cp, dp, pp, m, b)))
                    self.graph_sizes.setdefault(tp, []).append((bound, b, pp))
            else:
                self.bound_family(tp, layout, recompute, cp, graph, dp, pp, m, b, ep)
        for ahead in self.graph_sizes.values():
            ahead.sort(reverse=True)            # the least bound last: taken first, as the heap pops them
        return considered

    def run(self, bar) -> None:
        """Take entries, best bound first, until the best left cannot reach the top k; ``bar``
        counts the simulations (a progress bar's update)."""
        step = {GRAPH: self.graph_entry, FAMILY: self.family_entry, MEMBERS: self.members_entry,
                FLOOR: self.floor_entry,
                SPLIT: self.split_entry}
        while self.heap:
            bound, _, kind, item = heapq.heappop(self.heap)
            if bound > self.kth and self.c.prune:
                break
            if step[kind](bound, item):
                bar.update()

    def graph_entry(self, bound: float, item) -> bool:
        """A searched-layout family comes up: search its layout (with the sizes of its tp likely to
        come up next, SEARCH_AHEAD) and bound its candidates.  A size an earlier pass answered
        searches nothing ahead: the sizes left are searched when one of them comes up, if any does."""
        tp, layout, recompute, cp, dp, pp, m, b = item
        ahead = self.graph_sizes.get(tp)
        if ahead and not searched_already(self.spec.graph, tp, self.cluster, self.spec.training, b, pp, self.memo):
            entries = []
            # ahead: the sizes whose families may come up next; not those bounded past the k-th best
            # step so far, which never come up (it only falls)
            while ahead and (ahead[-1][0] <= min(SEARCH_AHEAD * bound, self.kth) or not self.c.prune):
                entries.append(ahead.pop()[1:])
            search_auto_sizes(self.spec.graph, tp, self.cluster, self.spec.training, entries, self.memo)
        graph = self.searched_graph(tp, recompute, b, pp, cp)
        if graph is not None:
            self.bound_family(tp, layout, recompute, cp, graph, dp, pp, m, b)
        return False

    def floor_entry(self, bound: float, item) -> bool:
        """A candidate without a split: at its placed floors first (placed_floor, the cheaper one
        first: pushed again, with its tie-break number, where one is higher, so it comes up where it
        would have had it been pushed there), then held back (above), or split and bounded again."""
        cfg, bnd, graph, b, tie, step = item       # step: the placed floors taken so far (0, 1 or 2)
        while step < 2:
            step += 1
            if step == 2 and bnd.ranks_least_phases(cfg, b) is None:
                break                       # its ranks' all-to-alls are the compact group's: nothing to add
            floor = self.placed_floor(bnd, cfg, b, own_a2a=step == 2)
            if floor > bound:
                heapq.heappush(self.heap, (floor, tie, FLOOR, (cfg, bnd, graph, b, tie, step)))
                return False
        c, same = self.c, twin_key(cfg)
        if cfg.recompute and c.recompute is None and self.spec.training.recompute is None \
                and same not in self.released and self.fits_without_recompute(cfg, b):
            # Held back: the closed form (no workspace term) says the plan fits without
            # recomputation; should the simulated peak say otherwise, it comes back.
            self.held[same] = (bound, cfg, bnd, graph, b)
            return False
        entry = candidate(bnd, cfg, b, graph, self.cap, self.misses)
        if entry is not None:
            lb, _, cfg, graph = entry
            heapq.heappush(self.heap, (max(bound, lb), next(self.order), SPLIT, (cfg, graph)))
        return False

    def split_entry(self, bound: float, item) -> bool:
        """A candidate with its split: simulated, unless its peak floor already exceeds the cap;
        one that does not fit, split again a layer at a time (``repaired``)."""
        cfg, graph = item
        prices, cap = self.prices, self.cap
        schedule = prices.schedule(cfg.schedule, cfg.pp, cfg.microbatches, cfg.chunks)
        if self.c.prune:
            # the floor of its simulated peak (sim.memory), read far enough to tell whether resplit may reach it
            floor = peak_floor_bytes(graph, self.spec.training, cfg, schedule, cap * REACH, prices)
            if floor > cap:
                self.unsimulated.append((cfg, graph))       # its simulated peak would exceed the cap
                if floor <= cap * REACH:
                    return self.repaired(cfg, graph, schedule)
                self.missed_cap(cfg)
                return False
        cand = self.simulated(cfg, graph)
        self.kept(cand)
        if cand.peak_memory_bytes > cap:
            self.repaired(cfg, graph, schedule)
        return True

    def kept(self, cand: Candidate) -> None:
        """A simulated candidate, among the results if it fits the cap (the k-th best step moves)."""
        (self.results if cand.peak_memory_bytes <= self.cap else self.over_memory).append(cand)
        if len(self.results) >= self.c.top:
            self.kth = sorted(x.estimate.step_time_s for x in self.results)[self.c.top - 1]

    def repaired(self, cfg: ParallelConfig, graph: LayerGraph, schedule) -> bool:
        """``cfg``, whose split's peak exceeds the cap, with a split moved a layer at a time until its
        peak floor fits (parsim.search.resplit), simulated; whether a simulation ran.  Where none
        fits, its twin with recomputation, if held back, comes back (missed_cap).  The repaired split
        is a candidate of its own: its step may be under ``cfg``'s bound, which only lowers the
        k-th best step, as any simulation may; it is no part of the bound (a candidate pruned
        before its split is never repaired)."""
        training = self.spec.training

        def floors_of(bounds: tuple[int, ...]) -> list[float]:
            return rank_floors_bytes(graph, training, replace(cfg, bounds=bounds), schedule, self.prices)
        bounds = resplit(cfg.bounds, cfg.pp, floors_of, self.cap, 2 * cfg.stages)
        cand = None if bounds is None else self.simulated(replace(cfg, bounds=bounds), graph)
        if cand is not None:
            self.kept(cand)
        if cand is None or cand.peak_memory_bytes > self.cap:
            self.missed_cap(cfg)
        return cand is not None

    def simulated(self, cfg: ParallelConfig, graph: LayerGraph) -> Candidate:
        if cfg.overlap_grad_reduce and not overlaps_grad_reduce(self.c, cfg.zero):
            # DDP and ZeRO-1 reduce after the backward, ZeRO-2 on the compute stream
            # (Constraints.overlap_grad_reduce); the floors and lower_bound_s count no bucket under
            # the backward, so they hold of it too
            cfg = replace(cfg, overlap_grad_reduce=False)
        est = simulate(graph, self.spec.training, self.cluster, cfg, self.compute_of(cfg.tp, cfg.tp_layout, cfg.ep),
                       keep_timeline=False, prices=self.prices)
        return Candidate(cfg, est)

    def missed_cap(self, cfg: ParallelConfig) -> None:
        """A candidate's peak exceeds the cap: its twin with recomputation, if held back, comes back."""
        if cfg.recompute:
            return
        same = twin_key(cfg)
        self.released.add(same)
        if same in self.held:
            tbound, tcfg, tbnd, tgraph, tb = self.held.pop(same)
            heapq.heappush(self.heap, (tbound, next(self.order), FLOOR, (tcfg, tbnd, tgraph, tb, None, 2)))

    def bounds_for(self, tp, layout, graph, overlap=False) -> Bounds:
        if (id(graph), overlap) not in self.bounds_of:
            self.bounds_of[(id(graph), overlap)] = Bounds(self.spec, graph, self.cluster,
                                                          self.compute_of(tp, layout, graph.ep), overlap, self.prices,
                                                          exposed_a2a=not self.c.ep_overlap)
        return self.bounds_of[(id(graph), overlap)]

    def floor_terms(self, bnd: Bounds, b: int, split_backward: bool) -> FloorTerms:
        """floor_terms of ``bnd``'s phases at ``b`` (held in bounds_of, so its id stays its own)."""
        key = (id(bnd), b, split_backward)
        hit = self.floor_terms_of.get(key)
        if hit is None:
            hit = self.floor_terms_of[key] = floor_terms(*bnd.phase_times(b), split_backward)
        return hit

    def overlaps(self, tp, layout) -> tuple[bool, ...]:
        """tp_comm_overlap's settings to search: both where it applies (sim.overlap), unless fixed."""
        if tp == 1 or layout not in TP_OVERLAP_LAYOUTS or not self.overlap_priced:
            return (False,)
        return (self.c.tp_comm_overlap,) if self.c.tp_comm_overlap is not None else (False, True)

    def cp_modes(self, cp) -> tuple[str, ...]:
        if cp == 1:
            return ("ring",)
        return (self.c.cp_mode,) if self.c.cp_mode else CP_MODES

    def members(self, dp, pp, m, cp, ep=1) -> list[tuple]:
        """(schedule, chunks, placement, zero) of a family's candidates (zero_variants)."""
        key = (dp, pp, m, cp, ep)
        if key not in self.member_lists:
            self.member_lists[key] = list(zero_variants(schedules(pp, m, len(self.spec.graph), self.c), dp, pp, self.c,
                                                        self.spec, cp, ep))
        return self.member_lists[key]

    def searched_graph(self, tp, recompute, b, pp, cp) -> LayerGraph | None:
        """The searched layout for this micro-batch size and pp devices' memory; None if none fits."""
        spec = self.spec
        try:
            return per_device_graph(spec.graph, tp, SEARCHED, recompute, spec.shard, self.cluster, spec.training,
                                    b, auto_memory_bytes(self.cluster, pp), cp=cp, memo=self.memo)
        except InfeasibleError:
            return None

    def unsharded(self, recompute: bool, cp: int) -> LayerGraph:
        """The tp = 1 graph (the same object as the tp = 1 variant's: the run's memo keeps it)."""
        key = (recompute, cp)
        if key not in self.unsharded_graphs:
            spec = self.spec
            self.unsharded_graphs[key] = per_device_graph(spec.graph, 1, "", recompute, spec.shard, self.cluster,
                                                          spec.training, cp=cp, memo=self.memo)
        return self.unsharded_graphs[key]

    def bound_family(self, tp, layout, recompute, cp, graph, dp, pp, m, b, ep=1) -> None:
        """Each candidate of a family, at its floor (families that repeat the same work on a tp
        group are searched as what they are: tp = 1 on dp x pp x cp devices)."""
        if tp > 1 and self.replicating.setdefault(id(graph), replicates_every_operator(graph)):
            if self.c.use_all_devices:
                return
            tp, layout, graph = 1, "", self.unsharded(recompute, cp)
        etp = graph.etp if graph is not None else 1
        family = (tp, layout, recompute, cp, dp, pp, m, b, ep, etp)
        if family in self.pushed:
            return
        self.pushed.add(family)
        members, modes = self.members(dp, pp, m, cp, ep), self.cp_modes(cp)
        overlaps = self.overlaps(tp, layout)
        # The members no split fits, and the others by what their floor depends on (the chunks and
        # a split backward), once for every tp overlap: memory does not depend on it (Bounds.cannot_fit
        # reads the graph's bytes alone; tests/test_search_bound.py)
        first = self.bounds_for(tp, layout, graph, overlaps[0])
        fits_none: dict[tuple, bool] = {}           # what cannot_fit depends on here: schedule, chunks, ZeRO
        shapes: dict[tuple[int, bool], list[int]] = {}
        unfit: list[int] = []
        for i, (schedule, v, _, zero) in enumerate(members):
            key = (schedule, v, zero)
            if key not in fits_none:
                fits_none[key] = first.cannot_fit(schedule, m, pp, v, b, dp * cp, self.cap, zero)
            if fits_none[key]:          # no split fits (step 2 would find none): a miss now, not an entry
                unfit.append(i)
                continue
            shapes.setdefault((v, schedule == "zbh1"), []).append(i)
        for overlap in overlaps:
            bnd = self.bounds_for(tp, layout, graph, overlap)
            # Each (member, cp mode) owns the tie-break number base + its index, as if each were
            # pushed now, so the heap pops them in the same order when their shape's entry comes up.
            base = next(self.order)
            self.order = itertools.count(base + len(members) * len(modes))
            kwargs = [dict(tp_comm_overlap=overlap, cp_mode=mode, ep=ep, ep_overlap=self.c.ep_overlap and ep > 1,
                           etp=etp) for mode in modes]
            if unfit:
                self.unfit.append((bnd, (dp, pp, m, tp, layout, recompute, cp), unfit, members, kwargs, b))
            if not shapes:
                continue
            item = (base, shapes, members, kwargs, (dp, pp, m, tp, layout, recompute, cp, bnd, graph, b))
            lower = self.family_floor(bnd, b, m, pp, shapes)
            if lower is None:
                self.family_entry(0.0, item)
            else:                   # its shapes priced when it comes up (family_entry)
                heapq.heappush(self.heap, (lower, base, FAMILY, item))

    def family_floor(self, bnd: Bounds, b: int, m: int, pp: int, shapes) -> float | None:
        """A floor of the floor of each of ``shapes`` ((chunks, split backward) of a family of
        ``bnd``'s graph at ``b``), with no layer priced: floor_from_terms of the phases' floors
        (Bounds.floor_phase_times; the floor is non-decreasing in each phase of each layer, but
        for a split backward's fill, a ratio, left out as searched_floor_s leaves it), less the
        rounding; None where the compute model gives no floors."""
        floors = []
        for v, split in shapes:
            key = (id(bnd), b, split)
            terms = self.lower_terms_of.get(key)
            if terms is None:
                rows = bnd.floor_phase_times(b)
                terms = self.lower_terms_of[key] = None if rows is None else \
                    lower_phase_terms(rows, split)
            if terms is None:
                return None
            floors.append(floor_from_terms(terms, m, pp, v, split))
        return min(floors) * SLACK

    def family_entry(self, bound: float, item) -> bool:
        """A family's candidates under one tp overlap come up at their floor before pricing
        (family_floor): each shape's floor priced and pushed as a MEMBERS entry, with the
        tie-break number the family gave it when bound."""
        base, shapes, members, kwargs, family = item
        _, pp, m, *_, bnd, _, b = family
        for shape, indices in shapes.items():
            floor = floor_from_terms(self.floor_terms(bnd, b, shape[1]), m, pp, *shape)
            heapq.heappush(self.heap, (floor, base + indices[0] * len(kwargs), MEMBERS,
                                       (base, indices, members, kwargs, family)))
        return False

    def members_entry(self, bound: float, item) -> bool:
        """A family's candidates of one shape come up: each becomes a FLOOR entry, at the floor and
        tie-break number it was given when its family was bound (its placed floors are taken when
        it comes up: floor_entry)."""
        base, indices, members, kwargs, (dp, pp, m, tp, layout, recompute, cp, bnd, graph, b) = item
        n = len(kwargs)
        for i in indices:
            args = _config_args(dp, pp, m, tp, layout, recompute, cp, members[i])
            for j, kw in enumerate(kwargs):
                tie = base + i * n + j
                heapq.heappush(self.heap, (bound, tie, FLOOR, (ParallelConfig(*args, **kw), bnd, graph, b, tie, 0)))
        return False

    def placed_floor(self, bnd: Bounds, cfg: ParallelConfig, b: int, own_a2a: bool = False) -> float:
        """floor_from_terms of a candidate with its placement's sends and its optimizer steps (Placed),
        and with ``own_a2a`` its ranks' own all-to-alls where they are slower than the most compact
        group's (Bounds.ranks_least_phases: each layer's phases at least the compact ones, and a
        split backward's fill, a ratio, left out as family_floor leaves it)."""
        split = cfg.schedule == "zbh1"
        own = bnd.ranks_least_phases(cfg, b) if own_a2a else None
        if own is None:
            terms = self.floor_terms(bnd, b, split)
        else:
            key = (id(own), split)          # own is held in bnd's table, so its id stays its own
            terms = self.own_terms_of.get(key)
            if terms is None:
                terms = self.own_terms_of[key] = lower_phase_terms(own, split)
        return floor_from_terms(terms, cfg.microbatches, cfg.pp, cfg.chunks, split, placed(bnd, cfg, b))

    def fits_without_recompute(self, cfg: ParallelConfig, b: int) -> bool:
        """Whether the candidate's twin without recomputation has a split within the closed-form
        memory bound (then recomputing is tried only if the twin's simulated peak misses the cap)."""
        graph = (self.searched_graph(cfg.tp, False, b, cfg.pp, cfg.cp) if cfg.tp_layout == SEARCHED
                 else self.unsharded(False, cfg.cp) if cfg.tp == 1
                 else self.twin_graphs.get((cfg.tp, cfg.tp_layout, cfg.cp, cfg.etp)))
        if graph is not None and cfg.ep > 1:
            graph = expert_graph(graph, cfg.ep, self.spec.training, self.memo)
        if graph is None:
            return False
        # the twin is cfg without recomputation: its split reads the twin's graph and cfg's shape
        return self.bounds_for(cfg.tp, cfg.tp_layout, graph, cfg.tp_comm_overlap).split(
            cfg.schedule, cfg.microbatches, cfg.pp, cfg.chunks, b, cfg.grad_ranks,
            self.prices.boundary_links(cfg, boundary_links),
            self.cap, zero=cfg.zero) is not None        # ZeRO shards over dp x cp, as in candidate

    def searched_bound(self, tp, recompute, cp, dp, pp, m, b) -> float:
        """A searched-layout family's floor before its graph (searched_floor_s), 0 where the compute
        model gives no such floor (a profile of the shards)."""
        if self.tp_compute.get((tp, SEARCHED), self.compute) is not self.compute or \
                not share_bounds_time(self.compute):
            return 0.0
        whole = self.bounds_for(1, "", per_device_graph(self.spec.graph, 1, "", recompute, cp=cp, memo=self.memo))
        return searched_floor_s(lambda split: self.floor_terms(whole, b, split), tp,
                                [(m, pp, v, schedule == "zbh1") for schedule, v, _, _ in self.members(dp, pp, m, cp)])
