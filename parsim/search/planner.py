"""The planner: search data x tensor x pipeline parallel strategies and rank them by simulated
throughput.  The search space and its constraints are parsim.search.enumerate's, the order of
the search parsim.search.bound's, what the planner says about its pick parsim.search.explain's.

Plans on fewer devices: a tp > 1 layout that splits no operator (parsim.shard.graph.
replicates_every_operator: the searched layout may choose this where sharing the work costs more
communication than it saves) has its tp group repeat the same work.  Such a family is searched
as what it is, tp = 1 on dp x pp x cp devices (ParallelConfig.world_size below the cluster's),
never as a tensor-parallel group; the rest of the cluster idles.  Where such a plan wins, the
result also carries the best plan on every device (PlanResult.all_devices: from the ranking, else
a second search with Constraints.use_all_devices), and the explanation compares the two.

Order: branch and bound, best bound first, in three steps of rising cost (parsim.search.bound):
a candidate's split-free floor (and a memory floor: no split fits), then its memory-constrained
split and that split's lower bound (parsim.search.split.Bounds.lower_bound_s: no schedule beats
it), then the simulation, unless the split's peak memory without it (parsim.sim.memory.peak_floor_bytes: all
the simulator charges but ZeRO's collective buffers) already exceeds the cap; the searched
layout's graph is built only when its family comes up, by a floor of its unsharded graph over
tp.  The search stops once the best bound left exceeds the k-th best simulated step time, so it
ranks what the exhaustive search (Constraints.prune=False) ranks.  The same input gives the same
plan: ties break on memory, then on the configuration tuple.
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from parsim.cost.compute import ComputeModel
from parsim.errors import DoesNotFitError, InfeasibleError
from parsim.fmt import human_bytes, memory_margin
from parsim.hardware.cluster import Cluster
from parsim.model.recompute import Recompute
from parsim.model.spec import ModelSpec
from parsim.plan import ParallelConfig, bounds_from_assignment
from parsim.refusals import shard_refusal
from parsim.progress import progress_bar
from parsim.search.bound import BranchAndBound, Candidate
from parsim.search.enumerate import (Constraints, check_usable, divisors, families, fixed_shard,
                                     overlaps_grad_reduce, schedules, variants)
from parsim.search.explain import explanation, nothing_fits
from parsim.search.hybrid_shard import hybrid_lines, sharding_refined
from parsim.search.recompute_layers import fewer_lines, fewest_recomputed
from parsim.search.resolve import balanced_split, default_layout
from parsim.sim import simulate
from parsim.sim.prices import Prices

__all__ = ["Candidate", "Constraints", "PlanResult", "plan"]


@contextmanager
def paused_gc():
    """The cyclic collector paused while the search runs: it allocates small acyclic tuples by the
    million while the model it searches (GPT-3 175B: some 290,000 objects) stays put, and each full
    collection scans them all.  Benchmark line: GPT-3 175B on 1,024 A100s searched in 1.52 s paused
    against 1.93 s with the collector running (each of 5 pairs 1.24-1.36x), DeepSeek-V3 on 2,048
    H100s 3.58 s against 4.16 s (3 pairs, 1.08-1.25x), alternated in fresh processes on a quiet
    2-core Intel Xeon (results/2026-12-04f-intel-xeon/gc-ab.txt).  A lone simulate() gains nothing
    from it now (p=64 at 256 and 512 micro-batches, 0.95-1.04x), so only the search pauses it.

    On the way out, what the block allocated and still holds goes to the oldest generation
    unscanned (gc.freeze then gc.unfreeze: two list splices), where the next full collection
    finds any cycle among it as it would have; re-enabled as it was, the collector's first
    allocation check scanned all of it at once, 3-5% of each goal's search
    (results/2026-11-28-amd-epyc/gc-promote-ab.txt).  Skipped when the caller keeps frozen objects
    of its own, which unfreeze would release."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


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
         ep_compute: dict[int, ComputeModel] | None = None, prices: Prices | None = None,
         rerank=None) -> PlanResult:
    """``tp_compute`` maps (tp, layout) to the compute model that prices those candidates (a
    profile of the shards as they run, ``parsim profile --tp``), ``ep_compute`` an ep to the one
    that prices its candidates (``parsim profile --ep``); other candidates use ``compute``.
    ``progress``: a bar of the simulations on stderr (None: where stderr is a terminal,
    parsim.progress).  ``prices``: the pricing context (parsim.sim.prices) on ``cluster``
    resolved for the model's dtype, to share with the caller (the CLI prices the pick's layout
    again from it); None: the search's own.  ``rerank(ranked) -> (ranked, lines)`` orders the best
    candidates again, the pick first, and explains it (parsim.search.noise.reranker: under the
    profile's noise)."""
    t0 = time.perf_counter()
    if prices is None:                                   # collectives priced in the run's dtype
        prices = Prices(cluster.for_dtype(spec.training.dtype))
    cluster, c = prices.cluster, constraints
    cap = cluster.device.memory_cap_bytes(c.max_memory_bytes)    # usable memory, or --max-memory as given
    world, batch = cluster.world_size, spec.training.global_batch_size
    check_usable(spec, cluster, c)
    settings = variants(spec, cluster, c, build_searched=False, memo=prices.shard)
    if not settings:
        raise InfeasibleError("no tensor-parallel setting applies: --tp must divide the devices and fit a node's "
                              "fast-link group, and the layout must name the model's operators; "
                              "change --tp/--tp-layout")
    space = list(families(spec, cluster, c, settings, prices.shard))
    if not space:
        raise InfeasibleError(f"no dp x pp = {world} devices fits: dp must divide the global batch ({batch}) and "
                              f"pp be at most {len(spec.graph)} layers"
                              + (" under the given --dp/--pp" if c.dp or c.pp else "")
                              + "; change --dp/--pp, the cluster, or training.global_batch_size")
    search = BranchAndBound(spec, prices, c, cap, settings, compute, tp_compute or {}, ep_compute or {})
    with paused_gc():                                    # the search allocates by the million
        considered = search.push(space)
        bar = progress_bar(considered, "planning", progress, unit="plan")    # simulations, of at most every one
        search.run(bar)
        bar.close()
    results, over_memory = search.results, search.over_memory
    if not results:                       # the message names the smallest simulated peak
        over_memory += [search.simulated(cfg, graph) for cfg, graph in search.unsimulated]
        raise DoesNotFitError(nothing_fits(spec, cap, search.all_misses(), over_memory,
                                           "" if c.max_memory_bytes else
                                           f" usable ({human_bytes(cluster.device.memory_bytes)} raw, less the "
                                           f"profile's memory_reserved)"))
    results.sort(key=Candidate.rank)
    simulated = len(results) + len(over_memory)         # before a shard group prices some again
    whole: dict = {}                      # a refined pick's key -> its step recomputing every layer
    if c.partial_recompute:               # the ranked full recomputations, on as few layers as fit
        results[: c.top], whole = fewest_recomputed(
            results[: c.top], len(spec.graph), cap, lambda cfg: _simulated(spec, prices, search, cfg),
            lambda cfg: balanced_split(spec, prices.cluster, search.compute_of(cfg.tp, cfg.tp_layout, cfg.ep), cfg))
    # a refined pick's key -> its step sharding over every dp rank: the ranked ZeRO plans with the
    # shard group given, or (--hybrid-shard) their shards within a node where faster
    results, sharded = sharding_refined(results, fixed_shard(c, spec), c.hybrid_shard, c.top,
                                        cluster.devices_per_node, cap, lambda cfg: _simulated(spec, prices, search, cfg))
    ranked, noise_lines = tuple(results[: c.top]), ()
    if rerank is not None:                 # the top plans again under the profile's noise (parsim.search.noise)
        ranked, noise_lines = rerank(ranked)
    all_devices = None
    if ranked[0].config.world_size < world:
        # only the top k are the exhaustive search's: an all-device plan among them is the best one;
        # one simulated below them need not be (the search stopped before pricing the rest)
        all_devices = next((x for x in results[: c.top] if x.config.world_size == world), None)
        if all_devices is None:            # none ranked: search the plans on every device alone
            all_devices = _on_every_device(spec, cluster, compute, c, tp_compute, ep_compute, prices)
    return PlanResult(chosen=ranked[0], ranked=ranked, pareto=_pareto(results),
                      manual=_manual(spec, prices, compute, c) if spec.manual_stages else None, capacity_bytes=cap,
                      search_time_s=time.perf_counter() - t0, considered=considered,
                      simulated=simulated,
                      explanation=explanation(list(ranked), spec.graph,
                                              memory_margin(ranked[0].peak_memory_bytes, cluster.device,
                                                            c.max_memory_bytes),
                                              world, all_devices)
                                  + fewer_lines(ranked[0], whole) + hybrid_lines(ranked[0], sharded) + noise_lines,
                      world_size=world, all_devices=all_devices)


def _simulated(spec, prices: Prices, search: BranchAndBound, cfg: ParallelConfig) -> Candidate:
    """``cfg`` simulated as the search simulates its candidates, from the model's graph."""
    return Candidate(cfg, simulate(spec.graph, spec.training, prices.cluster, cfg,
                                   search.compute_of(cfg.tp, cfg.tp_layout, cfg.ep), keep_timeline=False,
                                   strategies=spec.shard, prices=prices))


def _pareto(results: list[Candidate]) -> tuple[Candidate, ...]:
    """By time, those that also save memory (``results`` ranked)."""
    pareto, best_mem = [], float("inf")
    for cand in results:
        if cand.peak_memory_bytes < best_mem:
            pareto.append(cand)
            best_mem = cand.peak_memory_bytes
    return tuple(pareto)


def _on_every_device(spec, cluster, compute, c: Constraints, tp_compute, ep_compute, prices) -> Candidate | None:
    """The best plan that uses every device, searched alone; None if none fits."""
    try:
        return plan(spec, cluster, compute, replace(c, use_all_devices=True, top=1), progress=False,
                    tp_compute=tp_compute, ep_compute=ep_compute, prices=prices).chosen
    except (DoesNotFitError, InfeasibleError):
        return None


def _manual(spec, prices: Prices, compute, c: Constraints) -> Candidate | None:
    """The user's pipeline_stage split, as given, with its best micro-batch count and schedule."""
    cluster = prices.cluster
    bounds = bounds_from_assignment(spec.manual_stages)
    pp = len(bounds) - 1
    tp, cp = spec.parallel.tp or 1, spec.parallel.cp or 1
    layout = (spec.parallel.tp_layout or default_layout(spec.graph)) if tp > 1 else ""
    recompute = spec.training.recompute or Recompute.NONE
    dp = spec.parallel.dp or cluster.world_size // (pp * tp * cp)
    zero = (spec.parallel.zero or 0) if dp * cp > 1 else 0
    shard = fixed_shard(c, spec) if zero else 0           # HSDP's group, where it has ZeRO to shard
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
                                 ep=spec.parallel.ep or 1, etp=spec.parallel.etp or 1, dp_shard=shard,
                                 overlap_grad_reduce=overlaps_grad_reduce(c, zero))
            if shard_refusal(cfg):                        # a group the split's dp cannot take
                return None
            est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False,
                           strategies=spec.shard, prices=prices)
            cand = Candidate(cfg, est, "manual")
            if best is None or (est.step_time_s, cand.key()) < (best.estimate.step_time_s, best.key()):
                best = cand
    return best
