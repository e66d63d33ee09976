"""The planner: search data x tensor x pipeline parallel strategies and rank them by simulated
throughput.

Search space:
- tensor parallelism: tp among the divisors of the largest fast-link group (a node's NVSwitch
  domain, one of Ascend 910's 4-device HCCS groups), so that tensor-parallel collectives never
  leave it (Narayanan et al. 2021, Sec. 3.3); with each tp > 1, the strategies: the model's
  ``shard:`` section if it has one, else the built-in layouts that apply (parsim.shard.builtin)
  and the searched one (parsim.shard.auto), searched for each candidate's micro-batch size
  within the memory of its pp devices (parsim.shard.prepare.auto_memory_bytes);
- ZeRO stages 0-3 where dp > 1 (unless the model or --zero fixes it; zero 3 not under ZB-H1's
  split backward), each priced by the simulator, its memory bound shrunk per stage
  (parsim.cost.memory.zero_fractions);
- activation recomputation off and on (unless the model or a flag fixes it); on only where the
  same candidate without it does not fit the memory bound or, simulated, the cap, since
  recomputing is never faster;
- context parallelism (cp; parsim.cost.context) for models with attention over at least
  CP_SEARCH_MIN_TOKENS tokens: cp in 1, 2, 4, ... up to CP_SEARCH_MAX while 2 x cp divides the
  sequence (Megatron's zigzag chunks), unless fixed;
- every factorization of the remaining devices into dp x pp, with pp at most the number of layers;
- every micro-batch count dividing the per-replica batch;
- GPipe, 1F1B, interleaved with every v from 2 to the cut units over pp (pp x v stages, each of
  at least one cut unit; the micro-batches a multiple of pp, parsim.schedule.generators), at most
  INTERLEAVE_SEARCH_MAX, ZB-H1;
- with tp > 1 and the megatron-sp layout, tensor-parallel communication overlapped with the GEMMs
  or not (parsim.sim.overlap; Megatron-Core's --tp-comm-overlap), where the device profile prices it;
- with cp > 1, the ring and all-gather context parallelism (parsim.cost.context);
- for mixtures of experts, expert parallelism (parsim.cost.experts) folded from the tp x cp x dp
  ranks (MoE Parallel Folding, parsim.plan.ParallelConfig.fold): ep = 1 and the powers of two up
  to EP_SEARCH_MAX dividing both tp x cp x dp / etp and every MoE layer's routed experts, unless
  fixed (--ep, model.yaml parallel.ep); at tp > 1 (megatron-sp) the expert tp etp = 1 and tp,
  unless fixed (--etp, parallel.etp); ep = 1 alone for a dense model.  The split and the
  bounds price a layer without its all-to-alls (the simulation adds them): the bounds stay below
  the simulated step, only looser, and the split balances compute alone;
- placements pp-inner (pipeline neighbours on adjacent devices: inside an HCCS group or node
  where pp allows) and dp-inner;
- the split from the min-max dynamic program (parsim.search.partition), memory-constrained.

Plans on fewer devices: a tp > 1 layout that splits no operator (parsim.shard.graph.
replicates_every_operator: the searched layout may choose this where sharing the work costs more
communication than it saves) has its tp group repeat the same work.  Such a family is searched
as what it is, tp = 1 on dp x pp x cp devices (ParallelConfig.world_size below the cluster's),
never as a tensor-parallel group; the rest of the cluster idles.  Where such a plan wins, the
result also carries the best plan on every device (PlanResult.all_devices: from the ranking, else
a second search with Constraints.use_all_devices), and the explanation compares the two.

Order: branch and bound, best bound first, in three steps of rising cost (parsim.search.bound):
a candidate's split-free floor (and a memory floor: no split fits), then its memory-constrained
split and that split's lower bound (_Bounds.lower_bound_s: no schedule beats it), then the
simulation, unless the split's peak memory without it (parsim.sim.memory.peak_floor_bytes: all
the simulator charges but ZeRO's collective buffers) already exceeds the cap; the searched
layout's graph is built only when its family comes up, by a floor of its unsharded graph over
tp.  The search stops once the best bound left exceeds the k-th best simulated step time, so it
ranks what the exhaustive search (Constraints.prune=False) ranks.  The same input gives the same
plan: ties break on memory, then on the configuration tuple.
"""

from __future__ import annotations

import functools
import gc
import heapq
import itertools
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from parsim.cost.comm import collective_time_s, fsdp_units, shard_padded_bytes
from parsim.cost.compute import ComputeModel, share_bounds_time
from parsim.cost.experts import a2a_time_s, expert_param_count
from parsim.cost.memory import (backward_workspace_bytes, bytes_per_param, fsdp_held_grad_bytes, inflight_microbatches,
                                optimizer_bytes_moved_per_param, pipeline_buffer_bytes,
                                zero_fractions)
from parsim.errors import DoesNotFitError, InfeasibleError
from parsim.hardware.cluster import Cluster
from parsim.cost.kernels import kernel_counts
from parsim.sim.overlap import TP_OVERLAP_LAYOUTS, layer_time_s, supports_overlap
from parsim.model.attention import check_cp, cp_options, sequence_length
from parsim.model.graph import LayerGraph
from parsim.model.recompute import Recompute, recompute_mode
from parsim.model.spec import ModelSpec
from parsim.plan import CP_MODES, ParallelConfig, bounds_from_assignment
from parsim.report.fmt import human_bytes, human_time, memory_margin
from parsim.report.progress import progress_bar
from parsim.schedule.generators import check_feasible
from parsim.search.bound import floor_s, memory_floor_bytes, searched_floor_s
from parsim.search.partition import grid_band, partition
from parsim.search.resolve import boundary_costs, boundary_links, default_layout, layer_costs
from parsim.shard.builtin import LAYOUTS, SEARCHED
from parsim.shard.graph import replicates_every_operator
from parsim.shard.prepare import auto_memory_bytes, expert_graph, per_device_graph, search_auto_sizes
from parsim.sim import Estimate, simulate
from parsim.sim.memory import peak_floor_bytes
from parsim.sim.simulate import built_schedule


@dataclass(frozen=True)
class Constraints:
    dp: int | None = None
    pp: int | None = None
    microbatches: int | None = None
    schedule: str | None = None
    max_memory_bytes: int | None = None
    top: int = 10
    chunk_options: tuple[int, ...] | None = None     # interleaved's v; None: 2 .. cut units / pp
    placements: tuple[str, ...] = ("pp-inner", "dp-inner")
    tp: int | None = None
    tp_layout: str | None = None
    recompute: Recompute | str | bool | None = None    # none | selective | full; None: searched
    microbatch_sizes: tuple[int, ...] | None = None    # samples per micro-batch allowed (e.g. those profiled)
    zero: int | None = None                          # ZeRO stage; None: searched (0-3 where dp > 1)
    cp: int | None = None                            # context-parallel size; None: searched (models with attention)
    tp_comm_overlap: bool | None = None              # None: searched where it applies (tp > 1, megatron-sp)
    cp_mode: str | None = None                       # None: ring and allgather searched where cp > 1
    ep: int | None = None                            # expert-parallel size; None: searched (MoE models)
    ep_overlap: bool = False                         # ep > 1's all-to-alls hidden under paired compute (not searched)
    etp: int | None = None                           # expert tp, 1 or tp; None: both searched (MoE models, tp > 1)
    prune: bool = True             # False: simulate every candidate (the reference the pruned search must equal)
    use_all_devices: bool = False  # True: only plans on every device (no tp group whose layout splits nothing)


# The cp the search tries unless told, a bound on the search (--cp prices any cp): up to 16, and
# only for sequences longer than 8,192 tokens.  Llama 3 405B trained at 8,192 tokens with cp=1 and
# at 131,072 with cp=16 (Dubey et al. 2024, "The Llama 3 Herd of Models", Table 4); up to 8,192
# tokens each cp value would multiply the search for plans data parallelism mostly covers
# (tests/test_published.py's GPT-3 175B plans at 2,048 tokens on 1,024 GPUs, searching cp up to 16,
# had not finished after 13 minutes, about 80 s without cp; Llama 3 405B at 8,192 tokens on
# 16,384 H100s, 113 s with cp searched against 5.4 s without, python benchmarks/bench_planner.py
# --goals, 2026-11-24).
CP_SEARCH_MAX = 16
CP_SEARCH_MIN_TOKENS = 16384
# The largest ep the search tries unless told (--ep prices any ep dividing dp x cp and the experts):
# powers of two up to 256, a bound on the search's size (each ep value is a family of its own: at
# most 9 values).  DeepSeek-V3 trained at ep = 64 over 8 nodes (DeepSeek-AI 2024, Sec. 3.2).
EP_SEARCH_MAX = 256


@dataclass(frozen=True)
class Candidate:
    config: ParallelConfig
    estimate: Estimate
    label: str = "planner"
    p_best: float | None = None        # the share of the profile's replicates it is fastest in (search.noise)

    @property
    def peak_memory_bytes(self) -> float:
        return max(self.estimate.peak_memory_bytes)

    def key(self) -> tuple:
        c = self.config
        return (c.dp, c.pp, c.tp, c.tp_layout, c.recompute, c.microbatches, c.schedule, c.chunks, c.placement,
                c.bounds, c.zero, c.cp, c.tp_comm_overlap, c.cp_mode, c.ep, c.etp)


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


def divisors(n: int) -> list[int]:
    """The divisors of n, rising, in O(sqrt n) steps."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def check_usable(spec: ModelSpec, cluster: Cluster, c: Constraints) -> None:
    """Refuse at once a cluster larger than the model can use: dp divides the global batch into
    micro-batches the model can run, pp is at most the cut units and tp at most the largest
    fast-link group (or the tp given), so no plan has more ranks than their product; the search is
    never sized by the cluster alone."""
    batch, units, least = spec.training.global_batch_size, len(spec.graph), spec.graph.min_microbatch
    dp = batch // least
    tp = c.tp or spec.parallel.tp or _tp_domain(cluster)
    cp = _cp_options(spec, c)[-1]
    usable = dp * units * tp * cp
    if cluster.world_size > usable:
        raise InfeasibleError(f"--cluster {cluster.spec}: {cluster.world_size:,} devices, but {spec.path or spec.name} "
                              f"can use at most {usable:,}: dp at most {dp} (the global batch {batch}"
                              + (f" in micro-batches of at least {least}" if least > 1 else "")
                              + f") x pp at most its {units} cut units x tp at most {tp}"
                              + (f" x cp at most {cp}" if cp > 1 else "") + "; choose a cluster of at most "
                              f"{usable:,} devices or raise training.global_batch_size")


def _schedules(pp: int, m: int, layers: int, c: Constraints) -> list[tuple[str, int]]:
    out = []
    for name in ("1f1b", "gpipe", "zbh1", "interleaved"):
        if c.schedule and name != c.schedule:
            continue
        if pp == 1 and name != "1f1b" and not c.schedule:
            continue                              # with one stage every schedule is the same
        chunks = (c.chunk_options if c.chunk_options is not None
                  else range(2, min(layers // pp, INTERLEAVE_SEARCH_MAX) + 1))
        for v in ((1,) if name != "interleaved" else chunks):
            if pp * v > layers:
                continue
            try:
                check_feasible(name, pp, m, v)
            except InfeasibleError:
                continue
            out.append((name, v))
    return out


# The deepest interleaving the search tries unless told (Constraints.chunk_options; simulate's
# --chunks prices any v the cut units allow): v from 2 to min(cut units / pp, 8).  Every v >= 2
# has the same split-free floor (bound.floor_s: m x a rank's work), so each depth adds its
# candidates' splits and lower bounds to the search: GPT-3 175B on 1,024 A100s split and bounded
# 3,324 candidates with v in {2, 4}, 7,348 with v up to 8 and 9,156 up to 12 (its 98 cut units
# allow 49 at pp = 2), simulating 20, 23 and 23, each with tp_comm_overlap searched too (the
# candidates parsim.search.planner._candidate was called for, counted by a wrapper, 2026-11-27;
# not timed: this session had no quiet machine, so bench_planner.py --goals is still to run).
# The picks: v = 3 (19.04 s a step against v = 2's 19.27 s) up to 8 and 12 alike.
INTERLEAVE_SEARCH_MAX = 8

GRAPH, FLOOR, SPLIT = 0, 1, 2         # the kinds of entry in plan()'s branch and bound
# When a GRAPH entry needs the auto layout searched at its micro-batch size, the sizes of the
# same tp whose families' bounds are within this factor of its bound are searched with it, in one
# pass (parsim.shard.auto.search_sizes: the same answers, for about the price of one search).
# Speed only, never the answer.  Measured on the goals of bench_planner.py (2026-11-24): the
# sizes the search went on to need had bounds 1.0-1.6x the first one's of their tp (ResNet-50
# on 1024 Ascend 910s, GPT-3 175B on 1024 A100s); those it pruned, 1.9x and more (GPT-3: three
# sizes searched for nothing) and 2.4x and more (ResNet-50).
SEARCH_AHEAD = 2.0


class _StageMemory:
    """memory(j, A, B): the closed-form peak bytes of stage j holding layers [A, B) (j, A, B
    scalars or arrays, element-wise), v chunks on one device:

        (params x static bytes per param [+ ZeRO-2/3's unsharded gradients]
         + pipeline buffers (2 x boundary activation x b, none at pp = 1: pipeline_buffer_bytes)
         + in-flight micro-batches of stage j x b x stage saved bytes) x v

    The partitioner asks for every stage over bands of the same (A, B) matrices
    (partition.grid_band): the stage-independent parts are computed once per matrix pair.

    It guides the split; it is not a bound on the simulated peak (it leaves out the backward's
    workspace and ZB-H1's gradients held from I to W, and with v chunks it takes stage j's bytes
    v times for its rank's).  Changing it would change the splits, and so the plans; the plan's
    exact check comes once its split is known (parsim.sim.memory.peak_floor_bytes, in plan())."""

    def __init__(self, bnd: "_Bounds", static_per_param: float, zero: int, b: int, v: int, inflight: np.ndarray,
                 expert_static_per_param: float | None = None):
        self.bnd, self.static_per_param, self.zero, self.b, self.v = bnd, static_per_param, zero, b, v
        # ep: the routed experts' ZeRO shards are over the expert_dp ranks, fewer than the dp x cp ones
        self.expert_extra = (expert_static_per_param or static_per_param) - static_per_param
        self.inflight = inflight
        self.pp = len(inflight) // v
        self._last: tuple | None = None          # (A, B, static + boundary, stage saved bytes)

    def _parts(self, A, B):
        last = self._last
        if last is not None and last[0] is A and last[1] is B:
            return last[2], last[3]
        bnd = self.bnd
        params = bnd.param_prefix[B] - bnd.param_prefix[A]
        for u, o, n in bnd.tied:
            params = params + n * np.logical_and((A <= u) & (u < B), np.logical_not((A <= o) & (o < B)))
        static = params * self.static_per_param
        if self.expert_extra:
            static = static + (bnd.expert_prefix[B] - bnd.expert_prefix[A]) * self.expert_extra
        if self.zero >= 2:                   # pp = 1 (_zero_variants): the stage is the whole model
            static = static + bnd.fsdp_grad_bytes(self.b)
        end = B == len(bnd.out)
        # a stage's buffers hold its output's boundary activation; the model's last stage's, its input's
        edge = np.where(end, np.maximum(A - 1, 0), np.maximum(B - 1, 0))
        base = static + pipeline_buffer_bytes(bnd.out[edge] * self.b, self.pp)
        saved = bnd.saved_prefix[B] - bnd.saved_prefix[A] + bnd.shared[A]
        if isinstance(A, np.ndarray):
            self._last = (A, B, base, saved)
        return base, saved

    def __call__(self, j, A, B):
        band = grid_band(A, B) if isinstance(A, np.ndarray) else None
        if band is None:
            base, saved = self._parts(A, B)
        else:
            gA, gB, rows, cols = band
            base, saved = (x[rows, cols] for x in self._parts(gA, gB))
        inflight = self.inflight[j] if np.ndim(j) else float(self.inflight[j])
        return (base + inflight * self.b * saved) * self.v


class _Bounds:
    """Per-layer numbers as arrays, shared by every candidate's lower bound and memory check."""

    def __init__(self, spec: ModelSpec, graph: LayerGraph, cluster: Cluster, compute: ComputeModel,
                 tp_overlap: bool = False, exposed_a2a: bool = False):
        g, t = graph, spec.training
        self.spec, self.graph, self.cluster, self.compute = spec, graph, cluster, compute
        self.tp_overlap = tp_overlap          # its layers' tp collectives overlapped with their GEMMs (sim.overlap)
        # ep > 1 without ep_overlap: the all-to-alls run on the compute stream, so their least time
        # (an ep group on consecutive ranks, the fewest nodes any placement gives it) bounds too
        self.exposed_a2a = exposed_a2a and g.ep > 1
        self.params = np.array([l.param_count for l in g.layers], dtype=float)
        # a stage's saved bytes: sp[B] - sp[A] + shared[A] (LayerGraph.stage_saved_bytes, vectorised)
        self.shared = np.array([l.input_shared_bytes for l in g.layers] + [0.0], dtype=float)
        self.saved = np.array([l.saved_bytes - l.input_shared_bytes for l in g.layers], dtype=float)
        self.saved[-1] += g.loss_saved_bytes        # the loss's, with the last layer's
        self.out = np.array([l.output_bytes for l in g.layers], dtype=float)
        self.param_prefix = np.concatenate([[0.0], np.cumsum(self.params)])
        # ep > 1: of them, the routed experts this rank holds (gradients over the expert_dp ranks)
        self.expert_prefix = np.concatenate([[0.0], np.cumsum([expert_param_count(l, g) for l in g.layers])])
        # (user, owner, parameters) of each tied weight: a stage holding the user without the owner
        # keeps a copy (LayerGraph.held_param_count)
        self.tied = [(i, g.index(owner), n) for i, l in enumerate(g.layers) for owner, n in l.tied]
        self.saved_prefix = np.concatenate([[0.0], np.cumsum(self.saved)])
        self.per_param = per = bytes_per_param(t.dtype, t.optimizer)
        self.grad_per_param = per["grads"]
        self.opt_moved = optimizer_bytes_moved_per_param(t.dtype, t.optimizer)
        self._costs: dict[int, tuple[list, list]] = {}
        self._splits: dict[tuple, tuple[tuple[int, ...], float] | None] = {}
        self._unfit: set[tuple] = set()      # memory settings no split fits (whatever the links)

    def costs(self, b: int):
        if b not in self._costs:
            self._costs[b] = layer_costs(self.graph, self.compute, b, self.cluster, self.tp_overlap)
        return self._costs[b]

    def fsdp_grad_bytes(self, b: int) -> float:
        """ZeRO-2 and -3 (pp = 1: the stage is the whole model): what the FSDP units' unsharded
        gradients add to the backward's peak at micro-batch ``b``, by the simulator's rule
        (fsdp_held_grad_bytes, beside the activations not yet freed: backward_workspace_bytes),
        less the backward workspace the closed form leaves out."""
        key = ("fsdp", b)
        if key not in self._costs:
            g = self.graph
            whole = [range(len(g.layers))]
            shared = g.sharing(whole[0])
            own = [l.param_count for l in g.layers]
            units = fsdp_units(own, [i in shared for i in whole[0]])
            sizes = [sum(own[i] for i in u) * self.grad_per_param for u in units]
            held = dict(enumerate(fsdp_held_grad_bytes(units, sizes, len(own))))
            self._costs[key] = backward_workspace_bytes(g, whole, b, held) - backward_workspace_bytes(g, whole, b)
        return self._costs[key]

    def memory_fn(self, schedule, m, pp, v, b, dp, zero=0) -> "_StageMemory":
        """A stage's peak bytes in closed form; under ZeRO its static bytes shrink per stage
        (zero_fractions), plus, from stage 2, the FSDP units' unsharded gradients in the backward
        (fsdp_grad_bytes; ZeRO-3's gathered layers are left to the simulated peak)."""
        key = ("inflight", schedule, m, pp, v)
        if key not in self._costs:
            self._costs[key] = np.array([inflight_microbatches(schedule, m, pp, k, v) for k in range(pp * v)])
        return _StageMemory(self, self.static_per_param(dp, zero), zero, b, v, self._costs[key],
                            self.static_per_param(max(1, dp // self.graph.ep), zero) if self.graph.ep > 1 else None)

    def static_per_param(self, dp: int, zero: int) -> float:
        """Bytes a rank holds per parameter of its stages: parameters, gradients and optimizer
        state, each shrunk by its ZeRO share (zero_fractions)."""
        f = zero_fractions(zero, dp)
        return sum(self.per_param[k] * f[k] for k in ("params", "grads", "optimizer"))

    def edges(self, b: int, links: tuple[str, ...]) -> np.ndarray:
        """Boundary times per stage and layer, each stage's on the link to the next stage."""
        key = ("edges", b, links)
        if key not in self._costs:
            self._costs[key] = boundary_costs(self.cluster, links, self.costs(b)[1])
        return self._costs[key]

    def free_split(self, stages: int, b: int, links: tuple[str, ...]) -> tuple[int, ...]:
        key = ("free", stages, b, links)
        if key not in self._splits:
            self._splits[key] = partition(self.costs(b)[0], stages, self.edges(b, links))
        return self._splits[key][0]

    def split(self, schedule, m, pp, v, b, dp, links, cap, zero=0):
        """Time-optimal split if it fits, else the memory-constrained one, else None; ``links``:
        the link class of each stage boundary under the candidate's placement (boundary_links)."""
        fits_key = (schedule, m, pp, v, b, dp if zero else 0, zero, cap)    # what a fit depends on: not links
        if fits_key in self._unfit:
            return None
        mem = self.memory_fn(schedule, m, pp, v, b, dp, zero)
        if memory_floor_bytes(self.param_prefix[-1], mem.static_per_param, self.saved_prefix[-1] + self.shared[0],
                              mem.inflight, b, v) > cap:
            self._unfit.add(fits_key)
            return None                      # no split can fit: the partitioner need not look
        stages = pp * v
        times = self.costs(b)[0]
        edges = self.edges(b, links)
        bounds = self.free_split(stages, b, links)
        A, B = np.array(bounds[:-1]), np.array(bounds[1:])
        if np.all(mem(np.arange(stages), A, B) <= cap):
            return bounds
        key = (schedule, m, pp, v, b, dp if zero else dp > 1, zero, links)
        if key not in self._splits:
            try:
                self._splits[key] = partition(times, stages, edges, mem, cap)
            except InfeasibleError:
                self._splits[key] = None
                self._unfit.add(fits_key)
        found = self._splits[key]
        return found[0] if found else None

    def phase_times(self, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-layer prefix sums of F, B, I and W times, with the least exposed all-to-alls."""
        key = ("phases", b)
        if key not in self._costs:
            layers, c = self.graph.layers, self.compute
            self._costs[key] = tuple(np.concatenate([[0.0], np.cumsum([layer_time_s(c, l, k, b, self.cluster, 0,
                                                                                     self.tp_overlap)
                                                                        + self.least_a2a_s(l, k, b)
                                                                        for l in layers])])
                                     for k in ("F", "B", "I", "W"))
        return self._costs[key]

    def least_a2a_s(self, layer, kind: str, b: int) -> float:
        """The all-to-alls ``layer``'s ``kind`` issues per micro-batch over the most compact ep
        group, exposed (parsim.cost.experts.a2a_time_s); 0 where they may hide (ep_overlap) or a
        profile's layer times hold them."""
        g = self.graph
        if not self.exposed_a2a or layer.experts is None or \
                getattr(self.compute, "includes_ep_comm_at", lambda _: False)(b):
            return 0.0
        return a2a_time_s(layer, kind, b, g.dtype, self.cluster, tuple(range(g.ep)), g.moe_imbalance,
                          self.spec.training.moe_dispatcher)

    def lower_bound_s(self, cfg: ParallelConfig, b: int) -> float:
        """A step time no schedule can beat (so the search may skip what cannot reach the top k):

        - a rank computes m x (F + B) of its stages, then steps the optimizer for each of them
          (on the compute stream: parsim.schedule.lower puts OPTIMIZER last) and, under ZeRO-1,
          all-gathers each stage's updated shards (no faster than one all-gather of them all);
        - with one chunk per rank, the bottleneck stage s waits for micro-batch 0's forward through
          stages < s and its transfers, and (with an unsplit backward) ends before the last
          backward through them; a split backward's W may overlap that upstream tail, so it is
          not counted then;
        - its gradients' all-reduce starts no earlier than its last backward, and one message of
          all its gradients is no slower than its buckets; then the stage's optimizer runs;
        - with any number of chunks, rank r's first action is a forward of one of its stages,
          which waits for that micro-batch's forward through stages 0..r-1 (those before it in
          chunk 0) and each stage's send to the next: head_r, then the rank computes all its
          work and steps its optimizer; with an unsplit backward its last compute is the backward
          of its chunk-0 stage r (every generator's order: tests/test_search_bound.py), after
          which that micro-batch's backward through stages r-1..0, with the transfers between
          them, still runs (tail_r), and then rank 0 steps its optimizer."""
        Fp, Bp, Ip, Wp = self.phase_times(b)
        m, pp = cfg.microbatches, cfg.pp
        split = cfg.schedule == "zbh1"
        # one transfer across each stage boundary (each way: the link classes are symmetric)
        sent = self.edges(b, boundary_links(self.cluster, cfg)) / 2
        per_rank = [0.0] * pp
        after = [0.0] * pp                  # per rank: its optimizer steps and ZeRO-1's gathers
        head = [0.0] * pp                   # forward of one micro-batch through stages 0..r-1
        tail = [0.0] * pp                   # its backward through them (unsplit backward only)
        best = 0.0
        upstream = 0.0
        for s in range(cfg.stages):
            a, z = cfg.bounds[s], cfg.bounds[s + 1]
            f, bwd = Fp[z] - Fp[a], Bp[z] - Bp[a]
            x = float(sent[s, z - 1])
            if s + 1 < pp:
                head[s + 1] = head[s] + f + x
                tail[s + 1] = tail[s] + (0.0 if split else bwd + x)
            if split:
                bwd = min(bwd, Ip[z] - Ip[a] + Wp[z] - Wp[a])
            per_rank[s % pp] += m * (f + bwd)
            if cfg.chunks == 1:
                best = max(best, upstream + m * (f + bwd))
                upstream += f + x + (0.0 if split else bwd + x)
            params = self.param_prefix[z] - self.param_prefix[a]
            step = self.compute.optimizer_time_s(params / cfg.grad_ranks if cfg.zero else params, self.opt_moved)
            if cfg.zero == 1 and cfg.grad_ranks > 1 and params:
                step += self._collective_s(cfg, s % pp, shard_padded_bytes(params * self.grad_per_param,
                                                                           self.grad_per_param, cfg.grad_ranks),
                                           "all_gather")
            after[s % pp] += step
            if cfg.grad_ranks > 1:
                # the dense gradients over the dp x cp ranks (ep: the experts' go over fewer, at once)
                grads = (params - (self.expert_prefix[z] - self.expert_prefix[a])) * self.grad_per_param
                # ZeRO: reduce-scatter (and a later all-gather, not counted)
                ar = self._collective_s(cfg, s % pp, grads, "reduce_scatter" if cfg.zero else "all_reduce")
                best = max(best, (m - 1) * (f + bwd) + f + ar + step)
        ends = [h + busy + opt for h, busy, opt in zip(head, per_rank, after)]
        if not split:
            ends.append(max(h + busy + t for h, busy, t in zip(head, per_rank, tail)) + after[0])
        return max(best, max(ends))

    def _collective_s(self, cfg: ParallelConfig, pipe_rank: int, nbytes: float, op: str) -> float:
        """collective_time_s over the pipeline rank's gradient group (dp x cp ranks), memoized: the
        group's ranks follow from (dp, pp, tp, cp, placement) alone, and a group of thousands is
        slow to list."""
        key = ("group", cfg.dp, cfg.pp, cfg.tp, cfg.cp, cfg.placement, pipe_rank, nbytes, op)
        if key not in self._costs:
            self._costs[key] = collective_time_s(self.cluster, cfg.grad_group(pipe_rank), nbytes, op)
        return self._costs[key]

    def balanced_memory(self, schedule, m, pp, v, b, dp, links, zero=0) -> float:
        """Peak-memory bound of the time-balanced split (an upper bound on the smallest)."""
        bounds = self.free_split(pp * v, b, links)
        mem = self.memory_fn(schedule, m, pp, v, b, dp, zero)
        return max(float(mem(j, np.array(a), np.array(z))) for j, (a, z) in enumerate(zip(bounds, bounds[1:])))

    def smallest_memory(self, schedule, m, pp, v, b, dp, links, zero=0) -> float:
        """Peak-memory bound of the most memory-frugal split, to 1%: bisect the capacity."""
        times, edges = self.costs(b)[0], self.edges(b, links)
        mem = self.memory_fn(schedule, m, pp, v, b, dp, zero)
        lo, hi = 0.0, self.balanced_memory(schedule, m, pp, v, b, dp, links, zero)
        while hi - lo > 0.01 * hi:
            mid = (lo + hi) / 2
            try:
                partition(times, pp * v, edges, mem, mid)
                hi = mid
            except InfeasibleError:
                lo = mid
        return hi


def _candidate(bnd: _Bounds, cfg: ParallelConfig, b: int, graph: LayerGraph, cap: float, misses: list):
    """``cfg`` (without bounds) split for its placement's boundary links, as a pending entry
    ordered by its lower bound, then by a tie-break on the configuration; None (noted in
    ``misses``) where no split fits the memory bound."""
    links = boundary_links(bnd.cluster, cfg)
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


def _short(c: ParallelConfig) -> str:
    """A configuration in a few words: dp=1 pp=8 tp=1 m=2 zbh1."""
    return (f"dp={c.dp} pp={c.pp} tp={c.tp}{f' {c.tp_layout}' if c.tp > 1 else ''}{f' cp={c.cp}' if c.cp > 1 else ''}"
            f"{f' ep={c.ep}' if c.ep > 1 else ''}{f' etp={c.etp}' if c.etp > 1 else ''}"
            f"{' recompute' if c.recompute else ''}{f' zero={c.zero}' if c.zero else ''} m={c.microbatches} "
            f"{c.schedule}{f' v={c.chunks}' if c.chunks > 1 else ''}")


def _busiest_rank(e: Estimate):
    return max(e.ranks, key=lambda r: r.busy_s + r.exposed_comm_s)


def _kernels_per_step(graph: LayerGraph, cand: Candidate) -> int:
    """Kernels the busiest rank launches in one step: its stages' kernels (forward, backward, and
    the forward again where recomputed) once per micro-batch."""
    cfg = cand.config
    graph = graph.with_recompute(cfg.recompute) if not graph.recompute else graph
    layers = [graph.layers[i] for s in _busiest_rank(cand.estimate).stages for i in cfg.stage_layers(s)]
    per_mb = sum(sum(kernel_counts(l).values()) + _recomputed_kernels(l) for l in layers)
    return per_mb * cfg.microbatches


def _recomputed_kernels(layer) -> int:
    """Kernels a recomputed layer's backward re-runs: its forward's (full) or its core attention's
    (selective)."""
    if layer.recompute_part is not None:
        return len(layer.recompute_part.kernels)
    return kernel_counts(layer)["F"] if layer.recompute_bytes else 0


def _explain(result_ranked: list[Candidate], graph: LayerGraph, memory_line: str, world: int = 0,
             all_devices: Candidate | None = None) -> tuple[str, ...]:
    """``memory_line``: the pick's peak against the cap (parsim.report.fmt.memory_margin);
    ``all_devices``: where the pick leaves devices idle, the best plan on all ``world``."""
    names = graph.names
    best = result_ranked[0]
    e = best.estimate
    lines = []
    used = best.config.world_size
    if world and used < world:
        line = (f"the pick uses {used} of the {world} devices ({_short(best.config)}), the other {world - used} idle: "
                f"splitting the work further costs more than it saves here")
        if all_devices is None:
            line += f"; no plan on all {world} fits the constraints"
        else:
            a = all_devices.estimate
            row = next((str(i + 1) for i, x in enumerate(result_ranked) if x.key() == all_devices.key()), None)
            line += (f"; the best on all {world} ({_short(all_devices.config)}, "
                     f"{f'row {row}' if row else f'row all {world}'}) takes {a.step_time_s * 1e3:.3g} ms, "
                     f"{a.step_time_s / e.step_time_s - 1:.1%} more than the pick's {e.step_time_s * 1e3:.3g} ms")
        lines.append(line)
    hot = _busiest_rank(e)
    stages = ", ".join(best.config.describe_split(names).split(" | ")[s] for s in hot.stages)
    kernels = _kernels_per_step(graph, best) if any(layer.kernels for layer in graph.layers) else 0
    lines.append(f"bottleneck: pipeline rank {hot.rank} ({stages}) is busy {hot.busy_s / e.step_time_s:.0%} of the "
                 f"step{f' running {kernels:,} kernels' if kernels else ''}; bubble {e.bubble_fraction:.1%}, "
                 f"waiting on other ranks {e.sync_wait_fraction:.1%}, "
                 f"exposed communication {e.exposed_comm_fraction:.1%}")
    lines.append("memory: " + memory_line)
    if best.config.ep > 1:
        lines.append(_ep_line(best))
    elif graph.moe and _no_ep_line(result_ranked):
        lines.append(_no_ep_line(result_ranked))
    rival = next((c for c in result_ranked[1:] if c.config.dp != best.config.dp or c.config.pp != best.config.pp
                  or c.config.tp != best.config.tp or c.config.cp != best.config.cp or c.config.ep != best.config.ep
                  or c.config.schedule != best.config.schedule), None)
    if rival is not None:
        r = rival.estimate

        def per_rank(est, attr):
            return sum(getattr(x, attr) for x in est.ranks) / len(est.ranks)
        diffs = {"compute": per_rank(r, "busy_s") - per_rank(e, "busy_s"),
                 "bubble": per_rank(r, "bubble_s") - per_rank(e, "bubble_s"),
                 "waiting on other ranks": per_rank(r, "sync_wait_s") - per_rank(e, "sync_wait_s"),
                 "exposed communication": per_rank(r, "exposed_comm_s") - per_rank(e, "exposed_comm_s")}
        what, delta = max(diffs.items(), key=lambda kv: kv[1])
        c = rival.config
        rival_kernels = _kernels_per_step(graph, rival) if kernels else 0
        lines.append(f"runner-up dp={c.dp} pp={c.pp} tp={c.tp}{f' cp={c.cp}' if c.cp > 1 else ''}"
                     f"{f' ep={c.ep}' if c.ep > 1 else ''}{f' etp={c.etp}' if c.etp > 1 else ''} m={c.microbatches} "
                     f"{c.schedule}"
                     f"{f' v={c.chunks}' if c.chunks > 1 else ''} ({c.placement}) is "
                     f"{r.step_time_s / e.step_time_s - 1:.1%} slower; it loses most on {what} "
                     f"(+{delta * 1e3:.3g} ms per rank)"
                     f"{f'; its busiest rank runs {rival_kernels:,} kernels' if rival_kernels else ''}")
    return tuple(lines)


def _ep_line(cand: Candidate) -> str:
    """The pick's expert parallelism by what it costs: its all-to-alls and its bubble on the busiest
    rank, against the step."""
    e, c = cand.estimate, cand.config
    hot = _busiest_rank(e)
    split = f", each split over etp={c.etp}" if c.etp > 1 else (f", whole beside tp={c.tp}" if c.tp > 1 else "")
    return (f"expert parallelism: ep={c.ep} (E/{c.ep} routed experts a rank{split}, expert_dp={c.expert_dp}); "
            f"on the busiest "
            f"rank the token all-to-alls take {human_time(hot.ep_comm_s)} ({hot.ep_comm_s / e.step_time_s:.1%} of the "
            f"step, exposed) and the bubble {human_time(hot.bubble_s)} ({hot.bubble_s / e.step_time_s:.1%})")


def _no_ep_line(ranked: list[Candidate]) -> str | None:
    """A mixture of experts picked with ep = 1: the best ranked plan with ep > 1, by its all-to-alls
    and its bubble against the pick's."""
    best = ranked[0]
    row = next((i for i, x in enumerate(ranked) if x.config.ep > 1), None)
    if row is None:
        return None
    other, e = ranked[row], best.estimate
    hot, mine = _busiest_rank(other.estimate), _busiest_rank(e)
    return (f"expert parallelism: the pick keeps every expert on each rank (ep=1); the best with ep > 1 (row {row + 1}, "
            f"{_short(other.config)}) is {other.estimate.step_time_s / e.step_time_s - 1:.1%} slower: its busiest "
            f"rank's all-to-alls take {human_time(hot.ep_comm_s)}, its bubble {human_time(hot.bubble_s)} against "
            f"the pick's {human_time(mine.bubble_s)}")


def _older_objects_frozen(search):
    """Run ``search`` with what existed before it frozen out of the cyclic collector (gc.freeze):
    a full collection scans every tracked object, and the model and cluster loaded before a
    planner run (GPT-3 175B's: some 290,000 objects) are neither garbage nor changed by it
    (GPT-3 175B on 1,024 A100s: its two full collections took 0.32 s of a 2.2 s search, 0.02 s
    frozen).  The youngest generation is collected every YOUNG_COLLECTION_ALLOCATIONS
    allocations instead of 700: the search's objects are short-lived tuples and arrays that
    reference counting frees, and ResNet-50 on 1,024 Ascend 910s (some 43,000 tracked
    allocations) planned in 0.185 s without collections against 0.193 s with them (medians of 8
    cold runs each, interleaved, one core, 2026-11-24).  Both undone after; a heap someone else
    froze is left as it is."""
    @functools.wraps(search)
    def run(*args, **kwargs):
        if gc.get_freeze_count():
            return search(*args, **kwargs)
        gc.freeze()
        thresholds = gc.get_threshold()
        gc.set_threshold(max(thresholds[0], YOUNG_COLLECTION_ALLOCATIONS), *thresholds[1:])
        try:
            return search(*args, **kwargs)
        finally:
            gc.set_threshold(*thresholds)
            gc.unfreeze()
    return run


YOUNG_COLLECTION_ALLOCATIONS = 100_000


@_older_objects_frozen
def plan(spec: ModelSpec, cluster: Cluster, compute: ComputeModel, constraints: Constraints = Constraints(),
         progress: bool | None = None, tp_compute: dict[tuple[int, str], ComputeModel] | None = None,
         ep_compute: dict[int, ComputeModel] | None = None, rerank=None) -> PlanResult:
    """``tp_compute`` maps (tp, layout) to the compute model that prices those candidates (a
    profile of the shards as they run, ``parsim profile --tp``), ``ep_compute`` an ep to the one
    that prices its candidates (``parsim profile --ep``); other candidates use ``compute``.
    ``progress``: a bar of the simulations on stderr (None: where stderr is a terminal,
    parsim.report.progress).  ``rerank(ranked) -> (ranked, lines)`` orders the best candidates
    again, the pick first, and explains it (parsim.search.noise.reranker: under the profile's noise)."""
    tp_compute, ep_compute = tp_compute or {}, ep_compute or {}

    def compute_of(tp: int, layout: str, ep: int) -> ComputeModel:
        return tp_compute.get((tp, layout)) or ep_compute.get(ep) or compute

    t0 = time.perf_counter()
    cluster = cluster.for_dtype(spec.training.dtype)     # collectives priced in the run's dtype
    c = constraints
    g, batch = spec.graph, spec.training.global_batch_size
    cap = cluster.device.memory_cap_bytes(c.max_memory_bytes)    # usable memory, or --max-memory as given
    world = cluster.world_size
    L = len(g)
    check_usable(spec, cluster, c)
    variants = _variants(spec, cluster, c, build_searched=False)
    if not variants:
        raise InfeasibleError("no tensor-parallel setting applies: --tp must divide the devices and fit a node's "
                              "fast-link group, and the layout must name the model's operators; "
                              "change --tp/--tp-layout")

    families = list(_families(spec, cluster, c, variants))
    if not families:
        raise InfeasibleError(f"no dp x pp = {world} devices fits: dp must divide the global batch ({batch}) and "
                              f"pp be at most {L} layers" + (" under the given --dp/--pp" if c.dp or c.pp else "")
                              + "; change --dp/--pp, the cluster, or training.global_batch_size")
    twin_graphs = {(tp, layout, cp, graph.etp): graph for tp, layout, recompute, cp, graph in variants
                   if not recompute and graph is not None}

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
    bounds_of: dict[tuple, _Bounds] = {}
    overlap_priced = supports_overlap(cluster)
    misses: list[tuple] = []

    def bounds_for(tp, layout, graph, overlap=False) -> _Bounds:
        if (id(graph), overlap) not in bounds_of:
            bounds_of[(id(graph), overlap)] = _Bounds(spec, graph, cluster, compute_of(tp, layout, graph.ep), overlap,
                                                      exposed_a2a=not c.ep_overlap)
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
                                    b, auto_memory_bytes(cluster, pp), cp=cp)
        except InfeasibleError:
            return None

    def members(dp, pp, m, cp, ep=1):
        return list(_zero_variants(_schedules(pp, m, L, c), dp, pp, c, spec, cp, ep))

    unsharded_graphs: dict[tuple[bool, int], LayerGraph] = {}
    pushed: set[tuple] = set()                  # the families bound so far (a canonical one may recur)

    def unsharded(recompute: bool, cp: int) -> LayerGraph:
        """The tp = 1 graph (the same object as the tp = 1 variant's: per_device_graph caches it)."""
        key = (recompute, cp)
        if key not in unsharded_graphs:
            unsharded_graphs[key] = per_device_graph(spec.graph, 1, "", recompute, spec.shard, cluster, spec.training,
                                                     cp=cp)
        return unsharded_graphs[key]

    replicating: dict[int, bool] = {}           # id(graph) -> whether its layout splits no operator

    def bound_family(tp, layout, recompute, cp, graph, dp, pp, m, b, ep=1):
        if tp > 1 and replicating.setdefault(id(graph), replicates_every_operator(graph)):
            # the group would repeat the same work: what it is, tp = 1 on dp x pp x cp devices
            if c.use_all_devices:
                return
            tp, layout, graph = 1, "", unsharded(recompute, cp)
        etp = graph.etp if graph is not None else 1
        family = (tp, layout, recompute, cp, dp, pp, m, b, ep, etp)
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
                                         ep_overlap=c.ep_overlap and ep > 1, etp=etp)
                    heapq.heappush(heap, (floors[shape], next(order), FLOOR, (cfg, bnd, graph, b)))

    def fits_without_recompute(cfg: ParallelConfig, b: int) -> bool:
        """Whether the candidate's twin without recomputation has a split within the closed-form
        memory bound (then recomputing is tried only if the twin's simulated peak misses the cap)."""
        graph = (searched_graph(cfg.tp, False, b, cfg.pp, cfg.cp) if cfg.tp_layout == SEARCHED
                 else unsharded(False, cfg.cp) if cfg.tp == 1
                 else twin_graphs.get((cfg.tp, cfg.tp_layout, cfg.cp, cfg.etp)))
        if graph is not None and cfg.ep > 1:
            graph = expert_graph(graph, cfg.ep, spec.training)
        if graph is None:
            return False
        twin = replace(cfg, recompute=False)
        return bounds_for(cfg.tp, cfg.tp_layout, graph, cfg.tp_comm_overlap).split(
            twin.schedule, twin.microbatches, twin.pp, twin.chunks, b, twin.grad_ranks, boundary_links(cluster, twin),
            cap, zero=twin.zero) is not None             # ZeRO shards over dp x cp, as in _candidate

    def searched_bound(tp, recompute, cp, dp, pp, m, b) -> float:
        """A searched-layout family's floor before its graph (bound.searched_floor_s), 0 where
        the compute model gives no such floor (a profile of the shards)."""
        if tp_compute.get((tp, SEARCHED), compute) is not compute or not share_bounds_time(compute):
            return 0.0
        whole = per_device_graph(spec.graph, 1, "", recompute, cp=cp)
        return searched_floor_s(bounds_for(1, "", whole).phase_times(b), tp,
                                [(m, pp, v, schedule == "zbh1") for schedule, v, _, _ in members(dp, pp, m, cp)])

    considered = sum(len(members(dp, pp, m, cp, ep)) * len(overlaps(tp, layout)) * len(cp_modes(cp))
                     for tp, layout, _, cp, _, dp, pp, m, _, ep in families)   # the search space
    graph_sizes: dict[int, list[tuple[float, int]]] = {}     # tp -> (bound, b) of its GRAPH entries
    for tp, layout, recompute, cp, graph, dp, pp, m, b, ep in families:
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
                       keep_timeline=False)
        return Candidate(cfg, est)

    def missed_cap(cfg: ParallelConfig) -> None:
        """A candidate's peak exceeds the cap: its twin with recomputation, if held back, comes back."""
        if cfg.recompute:
            return
        same = _twin_key(cfg)
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
                search_auto_sizes(spec.graph, tp, cluster, spec.training, sizes)
            graph = searched_graph(tp, recompute, b, pp, cp)
            if graph is not None:
                bound_family(tp, layout, recompute, cp, graph, dp, pp, m, b)
            continue
        if kind == FLOOR:
            cfg, bnd, graph, b = item
            same = _twin_key(cfg)
            if cfg.recompute and c.recompute is None and spec.training.recompute is None and same not in released \
                    and fits_without_recompute(cfg, b):
                # Held back: the closed form (no workspace term) says the plan fits without
                # recomputation; should the simulated peak say otherwise, it comes back.
                held[same] = (bound, cfg, bnd, graph, b)
                continue
            entry = _candidate(bnd, cfg, b, graph, cap, misses)
            if entry is not None:
                lb, _, cfg, graph = entry
                heapq.heappush(heap, (max(bound, lb), next(order), SPLIT, (cfg, graph)))
            continue
        cfg, graph = item
        if c.prune and peak_floor_bytes(graph, spec.training, cfg,
                                        built_schedule(cfg.schedule, cfg.pp, cfg.microbatches, cfg.chunks), cap) > cap:
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
        raise DoesNotFitError(_nothing_fits(spec, cap, misses, over_memory,
                                            "" if c.max_memory_bytes else
                                            f" usable ({human_bytes(cluster.device.memory_bytes)} raw, less the "
                                            f"profile's memory_reserved)"))
    results.sort(key=lambda x: (x.estimate.step_time_s, x.peak_memory_bytes, x.key()))
    pareto, best_mem = [], float("inf")
    for cand in results:                           # by time; keep those that also save memory
        if cand.peak_memory_bytes < best_mem:
            pareto.append(cand)
            best_mem = cand.peak_memory_bytes

    manual = _manual(spec, cluster, compute, c, cap) if spec.manual_stages else None
    ranked, noise_lines = tuple(results[: c.top]), ()
    if rerank is not None:                 # the top plans again under the profile's noise (parsim.search.noise)
        ranked, noise_lines = rerank(ranked)
    all_devices = None
    if ranked[0].config.world_size < world:
        all_devices = next((x for x in results if x.config.world_size == world), None)
        if all_devices is None:            # none simulated: search the plans on every device alone
            try:
                all_devices = plan(spec, cluster, compute, replace(c, use_all_devices=True, top=1), progress=False,
                                   tp_compute=tp_compute, ep_compute=ep_compute).chosen
            except (DoesNotFitError, InfeasibleError):
                all_devices = None
    return PlanResult(chosen=ranked[0], ranked=ranked, pareto=tuple(pareto), manual=manual, capacity_bytes=cap,
                      search_time_s=time.perf_counter() - t0, considered=considered, simulated=simulated,
                      explanation=_explain(list(ranked), g,
                                           memory_margin(ranked[0].peak_memory_bytes, cluster.device, c.max_memory_bytes),
                                           world, all_devices) + noise_lines,
                      world_size=world, all_devices=all_devices)


def _variants(spec: ModelSpec, cluster: Cluster, c: Constraints,
              build_searched: bool = True) -> list[tuple[int, str, bool, int, LayerGraph | None]]:
    """(tp, layout, recompute, cp, per-device graph) for every tensor- and context-parallel
    setting to search; without ``build_searched`` the searched layout's graph is None (plan()
    searches it per micro-batch size), and it applies wherever the model has an operator view."""
    domain = _tp_domain(cluster)
    hint = spec.parallel
    if c.tp:
        tps = [c.tp]
    elif hint.tp:
        tps = [hint.tp]
    else:
        tps = [t for t in divisors(domain) if cluster.world_size % t == 0]
    if spec.shard:
        layouts = ["model"]
    elif c.tp_layout or hint.tp_layout:
        layouts = [c.tp_layout or hint.tp_layout]
    else:
        layouts = list(LAYOUTS) + [SEARCHED]
    fixed = c.recompute if c.recompute is not None else spec.training.recompute
    # DeepSeek-V3's recomputation (norms, MLA up-projections, SwiGLUs) searched for mixtures of experts
    recomputes = ([recompute_mode(fixed)] if fixed is not None else
                  [r for r in Recompute if r is not Recompute.DEEPSEEK or spec.graph.moe])
    fixed_etp = c.etp or hint.etp
    # searched, selective only where a layer has something to recompute selectively (eager
    # attention's s x s tensors; parsim.model.recompute): elsewhere it is none again
    selective_applies = fixed is not None or any(layer.recompute_bytes for layer in
                                                 spec.graph.with_recompute(Recompute.SELECTIVE).layers)
    cps = _cp_options(spec, c)
    out = []
    for tp in tps:
        if cluster.world_size % tp or tp > domain:
            continue
        for layout in (layouts if tp > 1 else [""]):
            for rc in recomputes:
                for cp in cps:
                    if cluster.world_size % (tp * cp) or (rc is Recompute.SELECTIVE and not selective_applies) \
                            or (rc is Recompute.SELECTIVE and cp > 1 and fixed is None):
                        continue
                    if layout == SEARCHED and not build_searched:
                        if any(layer.ops for layer in spec.graph.layers) and not spec.graph.moe:
                            out.append((tp, layout, rc, cp, None))
                        continue
                    for etp in _etp_options(spec, tp, fixed_etp):
                        try:
                            graph = per_device_graph(spec.graph, tp, layout, rc, spec.shard, cluster, spec.training,
                                                     cp=cp, etp=etp)
                        except InfeasibleError:
                            continue         # this layout does not apply to the model (or does not divide it)
                        out.append((tp, layout, rc, cp, graph))
    return out


def _etp_options(spec: ModelSpec, tp: int, fixed: int | None) -> list[int]:
    """The expert tp values to search beside attention's tp: for a mixture of experts at tp > 1,
    the one fixed (--etp, then model.yaml) or both that parsim prices, 1 and tp (MoE Parallel
    Folding; the per-device graph records it, LayerGraph.etp); 1 otherwise."""
    if tp == 1 or not spec.graph.moe:
        return [1]
    return [fixed] if fixed else [1, tp]


def _cp_options(spec: ModelSpec, c: Constraints) -> list[int]:
    """The cp values to search: the one fixed (--cp, then model.yaml), else 1, 2, 4, ... up to
    CP_SEARCH_MAX while 2 x cp divides a sequence of at least CP_SEARCH_MIN_TOKENS; 1 for a model
    without attention or with shorter sequences."""
    fixed = c.cp or spec.parallel.cp
    if fixed:
        check_cp(spec.graph, fixed, f"--cp {fixed}")
        return [fixed]
    s = sequence_length(spec.graph)
    return cp_options(s, CP_SEARCH_MAX) if s and s >= CP_SEARCH_MIN_TOKENS else [1]


def _ep_options(spec: ModelSpec, c: Constraints, dp: int, cp: int, tp: int, etp: int = 1) -> list[int]:
    """The ep values to search for the tp x cp x dp ranks a pipeline rank's MoE layers fold into
    etp x ep x edp (parsim.plan.ParallelConfig.fold): the one fixed (--ep, then model.yaml) where
    ep x etp divides them, else 1 and the powers of two up to EP_SEARCH_MAX dividing them over etp
    and every MoE layer's routed experts (parsim.cost.experts.check_ep); 1 alone for a dense
    model, so that its search is unchanged."""
    ranks = dp * cp * tp
    fixed = c.ep or spec.parallel.ep
    if fixed:
        return [fixed] if ranks % (fixed * etp) == 0 else []
    counts = {layer.experts.experts for layer in spec.graph.layers if layer.experts is not None}
    if not counts:
        return [1]
    out, ep = [1], 2
    while ep <= EP_SEARCH_MAX and ranks % (ep * etp) == 0 and all(e % ep == 0 for e in counts):
        out.append(ep)
        ep *= 2
    return out


def _zero_variants(schedules, dp: int, pp: int, c: Constraints, spec: ModelSpec, cp: int = 1, ep: int = 1):
    """(schedule, chunks, placement, zero) for each schedule: the placements where both dp and pp
    exceed 1, and the ZeRO stages: the one fixed (--zero, then model.yaml), else 0-3 where dp x cp
    > 1, the ranks it shards over (2-3 only where pp = 1, and 3 not under a split backward:
    parsim.sim.simulate refuses them)."""
    fixed = c.zero if c.zero is not None else spec.parallel.zero
    shards = dp * cp
    for schedule, v in schedules:
        for placement in (c.placements if dp > 1 and pp > 1 else c.placements[:1]):
            for zero in ((fixed,) if fixed is not None else (0, 1, 2, 3) if shards > 1 else (0,)):
                if (zero and shards == 1) or (zero >= 2 and pp > 1) or (zero == 3 and schedule == "zbh1") \
                        or (zero >= 2 and ep > 1):
                    continue
                yield schedule, v, placement, zero


def _families(spec: ModelSpec, cluster: Cluster, c: Constraints, variants):
    """The search space, the one place it is enumerated: (tp, layout, recompute, cp, graph, dp,
    pp, m, b, ep) for every tensor- and context-parallel setting (``variants``), factorization of the
    rest of the devices into dp x pp, expert-parallel size (_ep_options; the graph then its
    per-device one) and micro-batch count m of b samples; graph is None for the
    searched layout, whose graph depends on b and pp (plan() searches it when the family comes
    up).  Each family's candidates are its schedules, placements and ZeRO stages (_zero_variants)."""
    batch, world, L = spec.training.global_batch_size, cluster.world_size, len(spec.graph)
    for tp, layout, recompute, cp, graph in variants:
        for pp in divisors(world // (tp * cp)):
            dp = world // (tp * cp) // pp
            if pp > L or batch % dp or (c.pp and pp != c.pp) or (c.dp and dp != c.dp):
                continue
            per_replica = batch // dp
            for ep in _ep_options(spec, c, dp, cp, tp, graph.etp if graph is not None else 1):
                experts = graph if graph is None else expert_graph(graph, ep, spec.training)
                for m in divisors(per_replica):
                    b = per_replica // m
                    if (c.microbatches and m != c.microbatches) or b < spec.graph.min_microbatch or \
                            (c.microbatch_sizes is not None and b not in c.microbatch_sizes):
                        continue
                    yield tp, layout, recompute, cp, experts, dp, pp, m, b, ep


def _twin_key(cfg: ParallelConfig) -> tuple:
    """What a candidate shares with its twin that differs only in recomputation."""
    return (cfg.dp, cfg.pp, cfg.tp, cfg.tp_layout, cfg.microbatches, cfg.schedule, cfg.chunks, cfg.placement, cfg.zero,
            cfg.cp, cfg.tp_comm_overlap, cfg.cp_mode, cfg.ep, cfg.etp)


def _tp_domain(cluster: Cluster) -> int:
    """The most devices a tensor-parallel group may span (Cluster.fast_span: a fast-link group,
    or a node or scale-up domain on links as fast)."""
    return cluster.fast_span()


def _manual(spec, cluster, compute, c: Constraints, cap) -> Candidate | None:
    """The user's pipeline_stage split, as given, with its best micro-batch count and schedule."""
    bounds = bounds_from_assignment(spec.manual_stages)
    pp = len(bounds) - 1
    tp, cp = spec.parallel.tp or 1, spec.parallel.cp or 1
    layout = (spec.parallel.tp_layout or default_layout(spec.graph)) if tp > 1 else ""
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
        for schedule, _ in _schedules(pp, m, len(spec.graph), Constraints(schedule=spec.parallel.schedule,
                                                                          chunk_options=())):
            if zero == 3 and schedule == "zbh1":
                continue
            cfg = ParallelConfig(dp, pp, m, schedule, 1, bounds, "pp-inner", tp, layout, recompute, zero, cp,
                                 ep=spec.parallel.ep or 1, etp=spec.parallel.etp or 1)
            est = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False,
                           strategies=spec.shard)
            cand = Candidate(cfg, est, "manual")
            if best is None or (est.step_time_s, cand.key()) < (best.estimate.step_time_s, best.key()):
                best = cand
    return best


def _nothing_fits(spec, cap, misses, over_memory, usable: str = "") -> str:
    need, where = float("inf"), None
    for cand in over_memory:
        if cand.peak_memory_bytes < need:
            need, where = cand.peak_memory_bytes, cand.config
    # the exact smallest split (bisection) only for the few that the balanced split ranks best
    promising = sorted(misses, key=lambda x: (x[0].balanced_memory(*x[1], x[2][3]), x[1], x[2]))[:3]
    for bnd, (schedule, m, pp, v, b, shards, links), (tp, layout, rc, zero, cp) in promising:
        bound = bnd.smallest_memory(schedule, m, pp, v, b, shards, links, zero)
        if bound < need:
            need, where = bound, ParallelConfig(shards // cp, pp, m, schedule, v, (), "pp-inner", tp, layout, rc, zero,
                                                cp)
    t = spec.training
    knobs = ["more pipeline stages (a larger cluster)", "more micro-batches"]
    if t.optimizer == "adam" or t.dtype == "fp32":
        knobs.append("mixed precision or a lighter optimizer")
    if where is None or not where.recompute:
        knobs.append("activation recomputation (--recompute selective or full)")
    if where is None or where.tp == 1:
        knobs.append("tensor parallelism (--tp with the zoo's GPT, or a model.yaml shard: section)")
    if (where is None or where.cp == 1) and sequence_length(spec.graph):
        knobs.append("context parallelism (--cp)")
    if where is None:
        return f"no plan fits {human_bytes(cap)}{usable} per device; try {', '.join(knobs)}"
    return (f"no plan fits {human_bytes(cap)}{usable} per device: the smallest (dp={where.dp} pp={where.pp} tp={where.tp}"
            f"{f' ep={where.ep}' if where.ep > 1 else ''}"
            f"{f' recompute={where.recompute}' if where.recompute else ''} "
            f"m={where.microbatches} {where.schedule}) needs {human_bytes(need)}, {human_bytes(need - cap)} more; "
            f"try {', '.join(knobs)}")
