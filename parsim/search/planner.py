"""The planner: search data x tensor x pipeline parallel strategies and rank them by simulated
throughput.

Plans on fewer devices: a tp > 1 layout that splits no operator (parsim.shard.graph.
replicates_every_operator: the searched layout may choose this where sharing the work costs more
communication than it saves) has its tp group repeat the same work.  Such a family is searched
as what it is, tp = 1 on dp x pp x cp devices (ParallelConfig.world_size below the cluster's),
never as a tensor-parallel group; the rest of the cluster idles.  Where such a plan wins, the
result also carries the best plan on every device (PlanResult.all_devices: from the ranking, else
a second search with Constraints.use_all_devices), and the explanation compares the two.

Order: branch and bound, best bound first, in three steps of rising cost (parsim.search.bound):
a candidate's split-free floor (and a memory floor: no split fits), then its memory-constrained
split and that split's lower bound (parsim.search.split.Bounds.lower_bound_s: no schedule beats it), then the
simulation, unless the split's peak memory without it (parsim.sim.memory.peak_floor_bytes: all
the simulator charges but ZeRO's collective buffers) already exceeds the cap; the searched
layout's graph is built only when its family comes up, by a floor of its unsharded graph over
tp.  The search stops once the best bound left exceeds the k-th best simulated step time, so it
ranks what the exhaustive search (Constraints.prune=False) ranks.  The same input gives the same
plan: ties break on memory, then on the configuration tuple.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from dataclasses import dataclass, field, replace

from parsim.cost.compute import ComputeModel, share_bounds_time
from parsim.errors import DoesNotFitError, InfeasibleError
from parsim.hardware.cluster import Cluster
from parsim.model.graph import LayerGraph
from parsim.model.recompute import Recompute
from parsim.model.spec import ModelSpec
from parsim.plan import CP_MODES, ParallelConfig, bounds_from_assignment
from parsim.report.fmt import human_bytes, memory_margin
from parsim.report.progress import progress_bar
from parsim.search.bound import (FLOOR, GRAPH, SEARCH_AHEAD, SPLIT, Candidate, candidate, floor_s,
                                 searched_floor_s)
from parsim.search.enumerate import (Constraints, check_usable, divisors, families, schedules, twin_key,
                                     variants, zero_variants)
from parsim.search.explain import explanation, nothing_fits
from parsim.search.resolve import boundary_links
from parsim.search.split import Bounds
from parsim.shard.builtin import SEARCHED
from parsim.shard.graph import replicates_every_operator
from parsim.shard.prepare import auto_memory_bytes, expert_graph, per_device_graph, search_auto_sizes
from parsim.sim import simulate
from parsim.sim.memory import peak_floor_bytes
from parsim.sim.overlap import TP_OVERLAP_LAYOUTS, supports_overlap
from parsim.sim.prices import Prices

__all__ = ["Candidate", "Constraints", "PlanResult", "plan"]


@dataclass(frozen=True)
class PlanResult:
    chosen: Candidate
    ranked: tuple[Candidate, ...]
    pareto: tuple[Candidate, ...]
    manual: Candidate | None
    capacity_bytes: float          # the cap: the device's usable memory, or --max-memory as given
    search_time_s: float
    considered: int                # the candidates in the search space (those of every family)
    simulated: int
    explanation: tuple[str, ...] = field(default=())
    world_size: int = 0            # the cluster's devices
    # where the pick leaves devices idle (chosen.config.world_size < world_size): the best plan that
    # uses them all, if one fits (None otherwise, and when the pick uses them all)
    all_devices: "Candidate | None" = None

    @property
    def margin_bytes(self) -> float:
        """What the pick leaves of the cap at its peak."""
        return self.capacity_bytes - self.chosen.peak_memory_bytes


def plan(spec: ModelSpec, cluster: Cluster, compute: ComputeModel, constraints: Constraints = Constraints(),
         progress: bool | None = None, tp_compute: dict[tuple[int, str], ComputeModel] | None = None,
         ep_compute: dict[int, ComputeModel] | None = None, prices: Prices | None = None) -> PlanResult:
    """``tp_compute`` maps (tp, layout) to the compute model that prices those candidates (a
    profile of the shards as they run, ``parsim profile --tp``), ``ep_compute`` an ep to the one
    that prices its candidates (``parsim profile --ep``); other candidates use ``compute``.
    ``progress``: a bar of the simulations on stderr (None: where stderr is a terminal,
    parsim.report.progress).  ``prices``: the pricing context (parsim.sim.prices) on ``cluster``
    resolved for the model's dtype, to share with the caller (the CLI prices the pick's layout
    again from it); None: the search's own."""
    tp_compute, ep_compute = tp_compute or {}, ep_compute or {}

    def compute_of(tp: int, layout: str, ep: int) -> ComputeModel:
        return tp_compute.get((tp, layout)) or ep_compute.get(ep) or compute

    t0 = time.perf_counter()
    if prices is None:                                   # collectives priced in the run's dtype
        prices = Prices(cluster.for_dtype(spec.training.dtype))
    cluster = prices.cluster
    memo = prices.shard
    c = constraints
    g, batch = spec.graph, spec.training.global_batch_size
    cap = cluster.device.memory_cap_bytes(c.max_memory_bytes)    # usable memory, or --max-memory as given
    world = cluster.world_size
    L = len(g)
    check_usable(spec, cluster, c)
    settings = variants(spec, cluster, c, build_searched=False, memo=memo)
    if not settings:
        raise InfeasibleError("no tensor-parallel setting applies: --tp must divide the devices and fit a node's "
                              "fast-link group, and the layout must name the model's operators; "
                              "change --tp/--tp-layout")

    space = list(families(spec, cluster, c, settings, memo))
    if not space:
        raise InfeasibleError(f"no dp x pp = {world} devices fits: dp must divide the global batch ({batch}) and "
                              f"pp be at most {L} layers" + (" under the given --dp/--pp" if c.dp or c.pp else "")
                              + "; change --dp/--pp, the cluster, or training.global_batch_size")
    twin_graphs = {(tp, layout, cp): graph for tp, layout, recompute, cp, graph in settings if not recompute}

    # Branch and bound over three kinds of entry, best bound first (parsim.search.bound):
    #   GRAPH     a searched-layout family whose per-device graph is not built yet, bounded by
    #             its unsharded graph's floor over tp (bound.searched_floor_s);
    #   FLOOR     a candidate without a split, bounded by its floor (bound.floor_s);
    #   SPLIT     a candidate with its memory-constrained split, bounded by lower_bound_s.
    # Every bound is at most the simulated step time of every candidate it stands for, so the
    # search may stop when the best bound left exceeds the k-th best simulated step: what it skips
    # cannot reach the top k (Constraints.prune=False simulates everything, for tests).
    heap: list[tuple] = []
    order = itertools.count()                   # ties: first pushed first; payloads never compared
    bounds_of: dict[tuple, Bounds] = {}
    overlap_priced = supports_overlap(cluster)
    misses: list[tuple] = []

    def bounds_for(tp, layout, graph, overlap=False) -> Bounds:
        if (id(graph), overlap) not in bounds_of:
            bounds_of[(id(graph), overlap)] = Bounds(spec, graph, cluster, compute_of(tp, layout, graph.ep), overlap,
                                                      prices)
        return bounds_of[(id(graph), overlap)]

    def overlaps(tp, layout) -> tuple[bool, ...]:
        """tp_comm_overlap's settings to search: both where it applies (sim.overlap), unless fixed."""
        if tp == 1 or layout not in TP_OVERLAP_LAYOUTS or not overlap_priced:
            return (False,)
        return (c.tp_comm_overlap,) if c.tp_comm_overlap is not None else (False, True)

    def cp_modes(cp) -> tuple[str, ...]:
        if cp == 1:
            return ("ring",)
        return (c.cp_mode,) if c.cp_mode else CP_MODES

    def searched_graph(tp, recompute, b, pp, cp) -> LayerGraph | None:
        """The searched layout for this micro-batch size and pp devices' memory; None if none fits."""
        try:
            return per_device_graph(spec.graph, tp, SEARCHED, recompute, spec.shard, cluster, spec.training,
                                    b, auto_memory_bytes(cluster, pp), cp=cp, memo=memo)
        except InfeasibleError:
            return None

    def members(dp, pp, m, cp, ep=1):
        return list(zero_variants(schedules(pp, m, L, c), dp, pp, c, spec, cp, ep))

    unsharded_graphs: dict[tuple[bool, int], LayerGraph] = {}
    pushed: set[tuple] = set()                  # the families bound so far (a canonical one may recur)

    def unsharded(recompute: bool, cp: int) -> LayerGraph:
        """The tp = 1 graph (the same object as the tp = 1 variant's: per_device_graph caches it)."""
        key = (recompute, cp)
        if key not in unsharded_graphs:
            unsharded_graphs[key] = per_device_graph(spec.graph, 1, "", recompute, spec.shard, cluster, spec.training,
                                                     cp=cp, memo=memo)
        return unsharded_graphs[key]

    replicating: dict[int, bool] = {}           # id(graph) -> whether its layout splits no operator

    def bound_family(tp, layout, recompute, cp, graph, dp, pp, m, b, ep=1):
        if tp > 1 and replicating.setdefault(id(graph), replicates_every_operator(graph)):
            # the group would repeat the same work: what it is, tp = 1 on dp x pp x cp devices
            if c.use_all_devices:
                return
            tp, layout, graph = 1, "", unsharded(recompute, cp)
        family = (tp, layout, recompute, cp, dp, pp, m, b, ep)
        if family in pushed:
            return
        pushed.add(family)
        for overlap in overlaps(tp, layout):
            bnd = bounds_for(tp, layout, graph, overlap)
            phases = bnd.phase_times(b)
            floors: dict[tuple[int, bool], float] = {}       # the floor depends on the chunks and a split backward
            for schedule, v, placement, zero in members(dp, pp, m, cp, ep):
                shape = (v, schedule == "zbh1")
                if shape not in floors:
                    floors[shape] = floor_s(*phases, m, pp, *shape)
                for mode in cp_modes(cp):
                    cfg = ParallelConfig(dp, pp, m, schedule, v, (), placement, tp, layout, recompute, zero, cp,
                                         tp_comm_overlap=overlap, cp_mode=mode, ep=ep,
                                         ep_overlap=c.ep_overlap and ep > 1)
                    heapq.heappush(heap, (floors[shape], next(order), FLOOR, (cfg, bnd, graph, b)))

    def fits_without_recompute(cfg: ParallelConfig, b: int) -> bool:
        """Whether the candidate's twin without recomputation has a split within the closed-form
        memory bound (then recomputing is tried only if the twin's simulated peak misses the cap)."""
        graph = (searched_graph(cfg.tp, False, b, cfg.pp, cfg.cp) if cfg.tp_layout == SEARCHED
                 else expert_graph(unsharded(False, cfg.cp), cfg.ep, spec.training, memo) if cfg.tp == 1
                 else twin_graphs.get((cfg.tp, cfg.tp_layout, cfg.cp)))
        if graph is None:
            return False
        twin = replace(cfg, recompute=False)
        return bounds_for(cfg.tp, cfg.tp_layout, graph, cfg.tp_comm_overlap).split(
            twin.schedule, twin.microbatches, twin.pp, twin.chunks, b, twin.grad_ranks,
            prices.boundary_links(twin, boundary_links),
            cap, zero=twin.zero) is not None             # ZeRO shards over dp x cp, as in candidate

    def searched_bound(tp, recompute, cp, dp, pp, m, b) -> float:
        """A searched-layout family's floor before its graph (bound.searched_floor_s), 0 where
        the compute model gives no such floor (a profile of the shards)."""
        if tp_compute.get((tp, SEARCHED), compute) is not compute or not share_bounds_time(compute):
            return 0.0
        whole = per_device_graph(spec.graph, 1, "", recompute, cp=cp, memo=memo)
        return searched_floor_s(bounds_for(1, "", whole).phase_times(b), tp,
                                [(m, pp, v, schedule == "zbh1") for schedule, v, _, _ in members(dp, pp, m, cp)])

    considered = sum(len(members(dp, pp, m, cp, ep)) * len(overlaps(tp, layout)) * len(cp_modes(cp))
                     for tp, layout, _, cp, _, dp, pp, m, _, ep in space)   # the search space
    graph_sizes: dict[int, list[tuple[float, int]]] = {}     # tp -> (bound, b) of its GRAPH entries
    for tp, layout, recompute, cp, graph, dp, pp, m, b, ep in space:
        if graph is None:
            bound = searched_bound(tp, recompute, cp, dp, pp, m, b)
            if bound < math.inf:
                heapq.heappush(heap, (bound, next(order), GRAPH, (tp, layout, recompute, cp, dp, pp, m, b)))
                graph_sizes.setdefault(tp, []).append((bound, b))
        else:
            bound_family(tp, layout, recompute, cp, graph, dp, pp, m, b, ep)
    for ahead in graph_sizes.values():
        ahead.sort(reverse=True)           # the least bound last: taken first, as the heap pops them

    results: list[Candidate] = []
    over_memory: list[Candidate] = []
    held: dict[tuple, tuple] = {}          # recomputing candidates whose twin fits without (by its key)
    released: set[tuple] = set()           # keys whose twin without recomputation missed the cap, simulated
    unsimulated: list[tuple] = []          # (cfg, graph) whose peak floor exceeds the cap: not simulated
    bar = progress_bar(considered, "planning", progress, unit="plan")    # simulations, of at most every candidate

    def simulated_candidate(cfg: ParallelConfig, graph: LayerGraph) -> Candidate:
        est = simulate(graph, spec.training, cluster, cfg, compute_of(cfg.tp, cfg.tp_layout, cfg.ep),
                       keep_timeline=False, prices=prices)
        return Candidate(cfg, est)

    def missed_cap(cfg: ParallelConfig) -> None:
        """A candidate's peak exceeds the cap: its twin with recomputation, if held back, comes back."""
        if cfg.recompute:
            return
        same = twin_key(cfg)
        released.add(same)
        if same in held:
            tbound, tcfg, tbnd, tgraph, tb = held.pop(same)
            heapq.heappush(heap, (tbound, next(order), FLOOR, (tcfg, tbnd, tgraph, tb)))
    kth = float("inf")
    while heap:
        bound, _, kind, item = heapq.heappop(heap)
        if bound > kth and c.prune:
            break
        if kind == GRAPH:
            tp, layout, recompute, cp, dp, pp, m, b = item
            ahead = graph_sizes.get(tp)
            if ahead:                  # search the sizes likely to come up next with this one, at once
                sizes = []
                while ahead and (ahead[-1][0] <= SEARCH_AHEAD * bound or not c.prune):
                    sizes.append(ahead.pop()[1])
                search_auto_sizes(spec.graph, tp, cluster, spec.training, sizes, memo)
            graph = searched_graph(tp, recompute, b, pp, cp)
            if graph is not None:
                bound_family(tp, layout, recompute, cp, graph, dp, pp, m, b)
            continue
        if kind == FLOOR:
            cfg, bnd, graph, b = item
            same = twin_key(cfg)
            if cfg.recompute and c.recompute is None and spec.training.recompute is None and same not in released \
                    and fits_without_recompute(cfg, b):
                # Held back: the closed form (no workspace term) says the plan fits without
                # recomputation; should the simulated peak say otherwise, it comes back.
                held[same] = (bound, cfg, bnd, graph, b)
                continue
            entry = candidate(bnd, cfg, b, graph, cap, misses)
            if entry is not None:
                lb, _, cfg, graph = entry
                heapq.heappush(heap, (max(bound, lb), next(order), SPLIT, (cfg, graph)))
            continue
        cfg, graph = item
        if c.prune and peak_floor_bytes(graph, spec.training, cfg,
                                        prices.schedule(cfg.schedule, cfg.pp, cfg.microbatches, cfg.chunks), cap,
                                        prices) > cap:
            unsimulated.append((cfg, graph))       # its simulated peak would exceed the cap (sim.memory)
            missed_cap(cfg)
            continue
        cand = simulated_candidate(cfg, graph)
        (results if cand.peak_memory_bytes <= cap else over_memory).append(cand)
        if len(results) >= c.top:
            kth = sorted(x.estimate.step_time_s for x in results)[c.top - 1]
        bar.update()
        if cand.peak_memory_bytes > cap:
            missed_cap(cfg)
    bar.close()
    if not results:                       # the message names the smallest simulated peak
        over_memory += [simulated_candidate(cfg, graph) for cfg, graph in unsimulated]
    simulated = len(results) + len(over_memory)

    if not results:
        raise DoesNotFitError(nothing_fits(spec, cap, misses, over_memory,
                                            "" if c.max_memory_bytes else
                                            f" usable ({human_bytes(cluster.device.memory_bytes)} raw, less the "
                                            f"profile's memory_reserved)"))
    results.sort(key=lambda x: (x.estimate.step_time_s, x.peak_memory_bytes, x.key()))
    pareto, best_mem = [], float("inf")
    for cand in results:                           # by time; keep those that also save memory
        if cand.peak_memory_bytes < best_mem:
            pareto.append(cand)
            best_mem = cand.peak_memory_bytes

    manual = _manual(spec, prices, compute, c, cap) if spec.manual_stages else None
    ranked = tuple(results[: c.top])
    all_devices = None
    if ranked[0].config.world_size < world:
        all_devices = next((x for x in results if x.config.world_size == world), None)
        if all_devices is None:            # none simulated: search the plans on every device alone
            try:
                all_devices = plan(spec, cluster, compute, replace(c, use_all_devices=True, top=1), progress=False,
                                   tp_compute=tp_compute, ep_compute=ep_compute, prices=prices).chosen
            except (DoesNotFitError, InfeasibleError):
                all_devices = None
    return PlanResult(chosen=ranked[0], ranked=ranked, pareto=tuple(pareto), manual=manual, capacity_bytes=cap,
                      search_time_s=time.perf_counter() - t0, considered=considered, simulated=simulated,
                      explanation=explanation(list(ranked), g,
                                           memory_margin(ranked[0].peak_memory_bytes, cluster.device, c.max_memory_bytes),
                                           world, all_devices),
                      world_size=world, all_devices=all_devices)


def _manual(spec, prices: Prices, compute, c: Constraints, cap) -> Candidate | None:
    """The user's pipeline_stage split, as given, with its best micro-batch count and schedule."""
    cluster = prices.cluster
    bounds = bounds_from_assignment(spec.manual_stages)
    pp = len(bounds) - 1
    tp, cp = spec.parallel.tp or 1, spec.parallel.cp or 1
    layout = (spec.parallel.tp_layout or "megatron") if tp > 1 else ""
    recompute = spec.training.recompute or Recompute.NONE
    dp = spec.parallel.dp or cluster.world_size // (pp * tp * cp)
    zero = (spec.parallel.zero or 0) if dp * cp > 1 else 0
    batch = spec.training.global_batch_size
    if dp < 1 or dp * pp * tp * cp > cluster.world_size or batch % dp:
        return None
    best = None
    ms = [spec.parallel.microbatches] if spec.parallel.microbatches else divisors(batch // dp)
    for m in ms:
        if batch // dp // m < spec.graph.min_microbatch:
            continue
        for schedule, _ in schedules(pp, m, len(spec.graph), Constraints(schedule=spec.parallel.schedule,
                                                                          chunk_options=())):
            if zero == 3 and schedule == "zbh1":
                continue
            cfg = ParallelConfig(dp, pp, m, schedule, 1, bounds, "pp-inner", tp, layout, recompute, zero, cp,
                                 ep=spec.parallel.ep or 1)
            est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False,
                           strategies=spec.shard, prices=prices)
            cand = Candidate(cfg, est, "manual")
            if best is None or (est.step_time_s, cand.key()) < (best.estimate.step_time_s, best.key()):
                best = cand
    return best
