"""A candidate's split and the bounds it gives: per-layer numbers as arrays (Bounds), shared by
every candidate of one per-device graph, for its memory-constrained split (parsim.search.
partition), the closed-form peak of a stage (StageMemory) and a step time no schedule beats
(Bounds.lower_bound_s): the second step of the planner's branch and bound (parsim.search.bound).

The memory floor: the closed-form peak of a split (StageMemory) charges stage j

    mem_j = v (static_j + boundary_j + n_j b saved_j),   every term >= 0,

n_j its in-flight micro-batches.  Over the pp v stages the static bytes add up to at least
P x the static bytes per parameter (every parameter is held at least once; a tied weight's copy
adds) and the saved bytes to at least S, the whole model's (the stage sums telescope, and what a
stage's first layer shares with its input only adds).  The fullest stage holds at least the
average, so max_j mem_j >= P static / pp; and it holds at least any weighted mean, here with
weights (1 / n_j) / H, H = sum of 1 / n_j, which cancels the in-flight counts:

    max_j mem_j >= v (P static / (H max_j n_j) + b S / H).

When the larger of the two exceeds the cap, no split fits and the partitioner need not run.
"""

from __future__ import annotations

import numpy as np

from parsim.cost.comm import fsdp_units, shard_padded_bytes
from parsim.cost.compute import ComputeModel
from parsim.cost.experts import expert_param_count
from parsim.cost.memory import (backward_workspace_bytes, bytes_per_param, fsdp_held_grad_bytes, inflight_microbatches,
                                optimizer_bytes_moved_per_param, pipeline_buffer_bytes,
                                zero_fractions)
from parsim.errors import InfeasibleError
from parsim.hardware.cluster import Cluster
from parsim.model.graph import LayerGraph
from parsim.model.spec import ModelSpec
from parsim.plan import ParallelConfig
from parsim.search.buckets import final_backward_reductions, final_backwards
from parsim.search.gathers import least_gathers_s
from parsim.search.partition import band_stack, partition, stage_grid
from parsim.search.resolve import boundary_costs, boundary_links
from parsim.sim.overlap import layer_floor_s, layer_time_s
from parsim.sim.prices import Prices

# Rounding: prefix differences are not bit-equal to the split's own sums (the floors of
# parsim.search.bound take it too).
SLACK = 1 - 1e-9


class StageMemory:
    """memory(j, A, B): the closed-form peak bytes of stage j holding layers [A, B) (j, A, B
    scalars or arrays, element-wise), v chunks on one device:

        (params x static bytes per param [+ ZeRO-2/3's unsharded gradients]
         + pipeline buffers (2 x boundary activation x b, none at pp = 1: pipeline_buffer_bytes)
         + in-flight micro-batches of stage j x b x stage saved bytes) x v

    The partitioner asks for blocks of stages over their bands of the (start, stop) grid at once
    (``stacked``): the stage-independent parts are computed once over the whole grid and read
    through views of each stage's band.

    It guides the split; it is not a bound on the simulated peak (it leaves out the backward's
    workspace and ZB-H1's gradients held from I to W, and with v chunks it takes stage j's bytes
    v times for its rank's).  Changing it would change the splits, and so the plans; the plan's
    exact check comes once its split is known (parsim.sim.memory.peak_floor_bytes, in plan())."""

    def __init__(self, bnd: "Bounds", static_per_param: float, zero: int, b: int, v: int, inflight: np.ndarray,
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
        if self.zero >= 2:                   # pp = 1 (zero_variants): the stage is the whole model
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
        base, saved = self._parts(A, B)
        inflight = self.inflight[j] if np.ndim(j) else float(self.inflight[j])
        return (base + inflight * self.b * saved) * self.v

    def stacked(self, j0: int, j1: int, span: int) -> np.ndarray:
        """Stages j0..j1-1 over their bands of the grid (partition.band_stack): what __call__ gives
        for each stage and band, bit for bit, from the grid's parts computed once."""
        A, B, _ = stage_grid(len(self.bnd.out))
        base, saved = (band_stack(x, span, j0, j1) for x in self._parts(A, B))
        return (base + self.inflight[j0:j1, None, None] * self.b * saved) * self.v


class Bounds:
    """Per-layer numbers as arrays, shared by every candidate's lower bound and memory check."""

    def __init__(self, spec: ModelSpec, graph: LayerGraph, cluster: Cluster, compute: ComputeModel,
                 tp_overlap: bool = False, prices: Prices | None = None, exposed_a2a: bool = False):
        g, t = graph, spec.training
        self.spec, self.graph, self.cluster, self.compute = spec, graph, cluster, compute
        self.prices = prices if prices is not None else Prices(cluster)     # the run's (parsim.sim.prices)
        self.tp_overlap = tp_overlap          # its layers' tp collectives overlapped with their GEMMs (sim.overlap)
        # ep > 1 without ep_overlap: the all-to-alls run on the compute stream, so their least time
        # (an ep group on consecutive ranks, the fewest nodes any placement gives it) bounds too
        self.exposed_a2a = exposed_a2a and g.ep > 1
        self.compact_ep = self.prices.compact_group(g.ep)  # the most compact ep group
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
        self.saved_nonnegative = bool(np.all(self.saved >= 0))   # no_split_fits's activation term
        self.per_param = per = bytes_per_param(t.dtype, t.optimizer, t.grad_reduce_dtype)
        self.grad_per_param = per["grads"]
        self.opt_moved = optimizer_bytes_moved_per_param(t.dtype, t.optimizer)
        self._costs: dict[int, tuple[list, list]] = {}
        self._splits: dict[tuple, tuple[tuple[int, ...], float] | None] = {}
        # memory settings (_fits_key) -> whether no split fits (whatever the links): True once the
        # closed-form floor or the partitioner says so, False while only the floor was asked (cannot_fit)
        self._unfit: dict[tuple, bool] = {}
        self._static: dict[tuple[int, int], float] = {}     # (dp, zero) -> static_per_param
        self._whole = (self.param_prefix[-1], self.saved_prefix[-1] + self.shared[0])   # memory_floor_bytes's
        # lower_bound_s's prefix sums as Python floats (the same numbers; its loop reads them one by one)
        self._prefix_lists = (self.param_prefix.tolist(), self.expert_prefix.tolist())

    def costs(self, b: int):
        """(forward + backward time per layer, bytes a stage ending after the layer sends per
        micro-batch), as parsim.search.resolve.layer_costs gives them, from the run's prices."""
        if b not in self._costs:
            f, bwd = (self.prices.layer_times(self.compute, self.graph, k, b, 0, self.tp_overlap, layer_time_s)
                      for k in ("F", "B"))
            self._costs[b] = ([x + y for x, y in zip(f, bwd)], [layer.output_bytes * b for layer in self.graph.layers])
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

    def memory_fn(self, schedule, m, pp, v, b, dp, zero=0) -> "StageMemory":
        """A stage's peak bytes in closed form; under ZeRO its static bytes shrink per stage
        (zero_fractions), plus, from stage 2, the FSDP units' unsharded gradients in the backward
        (fsdp_grad_bytes; ZeRO-3's gathered layers are left to the simulated peak)."""
        return StageMemory(self, self.static_per_param(dp, zero), zero, b, v, self.inflight(schedule, m, pp, v),
                           self.static_per_param(max(1, dp // self.graph.ep), zero) if self.graph.ep > 1 else None)

    def inflight(self, schedule, m, pp, v) -> np.ndarray:
        """Micro-batches in flight on each of the pp v stages (parsim.cost.memory.inflight_microbatches),
        with their inflight_terms; the run's, as every graph's bounds ask for the same."""
        return self._inflight(schedule, m, pp, v)[0]

    def _inflight(self, schedule, m, pp, v) -> tuple:
        """(the in-flight counts, their inflight_terms, the counts as a key: what a stage's memory
        reads of the schedule and m, the same for every m at or past the schedule's depth)."""
        table = self.prices.table("inflight")
        key = (schedule, m, pp, v)
        hit = table.get(key)
        if hit is None:
            inflight = np.array([inflight_microbatches(schedule, m, pp, k, v) for k in range(pp * v)])
            hit = table[key] = (inflight, inflight_terms(inflight), tuple(inflight.tolist()))
        return hit

    def static_per_param(self, dp: int, zero: int) -> float:
        """Bytes a rank holds per parameter of its stages: parameters, gradients and optimizer
        state, each shrunk by its ZeRO share (zero_fractions)."""
        hit = self._static.get((dp, zero))
        if hit is None:
            f = zero_fractions(zero, dp)
            hit = self._static[(dp, zero)] = sum(self.per_param[k] * f[k] for k in ("params", "grads", "optimizer"))
        return hit

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

    @staticmethod
    def _fits_key(schedule, m, pp, v, b, dp, cap, zero) -> tuple:
        """What whether a split fits depends on: not the boundary links, and dp only under ZeRO."""
        return (schedule, m, pp, v, b, dp if zero else 0, zero, cap)

    def cannot_fit(self, schedule, m, pp, v, b, dp, cap, zero=0) -> bool:
        """Whether no split of any placement fits ``cap``: the closed-form memory floor
        (memory_floor_bytes) exceeds it, or the partitioner found none before (what a fit depends
        on: not the boundary links)."""
        fits_key = self._fits_key(schedule, m, pp, v, b, dp, cap, zero)
        unfit = self._unfit.get(fits_key)
        if unfit is None:
            params, saved = self._whole
            unfit = self._unfit[fits_key] = bool(memory_floor_bytes(params, self.static_per_param(dp, zero), saved,
                                                                    self._inflight(schedule, m, pp, v)[1], b, v) > cap)
        return unfit

    def split(self, schedule, m, pp, v, b, dp, links, cap, zero=0):
        """Time-optimal split if it fits, else the memory-constrained one, else None; ``links``:
        the link class of each stage boundary under the candidate's placement (boundary_links)."""
        if self.cannot_fit(schedule, m, pp, v, b, dp, cap, zero):
            return None                      # no split can fit: the partitioner need not look
        fits_key = self._fits_key(schedule, m, pp, v, b, dp, cap, zero)
        mem = self.memory_fn(schedule, m, pp, v, b, dp, zero)
        if self.no_split_fits(mem, cap):
            self._unfit[fits_key] = True        # what the partitioner would find (no_split_fits)
            return None
        stages = pp * v
        times = self.costs(b)[0]
        edges = self.edges(b, links)
        bounds = self.free_split(stages, b, links)
        A, B = np.array(bounds[:-1]), np.array(bounds[1:])
        if np.all(mem(np.arange(stages), A, B) <= cap):
            return bounds
        # what the split reads of the schedule and m is the stages' in-flight counts (memory_fn), so
        # candidates whose schedule and micro-batch count give the same counts share one split
        key = (self._inflight(schedule, m, pp, v)[2], pp, v, b, dp if zero else dp > 1, zero, links)
        if key not in self._splits:
            try:
                self._splits[key] = partition(times, stages, edges, mem, cap)
            except InfeasibleError:
                self._splits[key] = None
        found = self._splits[key]
        if found is None:
            self._unfit[fits_key] = True        # what the partitioner found (for these in-flight counts)
        return found[0] if found else None

    def no_split_fits(self, mem: StageMemory, cap: float) -> bool:
        """Whether no split can fit ``cap`` by a relaxation of StageMemory that is monotone in a
        stage's layers, checked greedily (the partitioner then need not run; False: it may fit).

        Stage j's bytes are at least v (static (A, B) + n_j b saved (A, B)): the pipeline buffers,
        a tied weight's copy and the input a stage's first layer shares are >= 0 and left out (as
        ZeRO-2/3's gradient term is where it is >= 0), and so is every activation term where a
        layer's own saved bytes are negative.  Both sums only grow with [A, B), so each stage
        taking, in turn, the most layers it can hold ends at least as far as any split's same
        stage does (by induction: what a split's stage j holds beyond the greedy's stage j - 1 is
        a part of it); if the greedy's pp v stages cannot hold every layer, no split can.
        tests/test_search_bound.py checks it against the partitioner."""
        static = (self.param_prefix - self.expert_prefix) * mem.static_per_param + \
            self.expert_prefix * (mem.static_per_param + mem.expert_extra)
        if mem.zero >= 2:                    # a constant: kept only where it lowers the sums
            static = static + min(0.0, self.fsdp_grad_bytes(mem.b))
        saved = self.saved_prefix if self.saved_nonnegative else None
        room = cap * (1 + 1e-9) / mem.v     # rounding: the relaxation must not exceed mem's own sums
        start, layers = 0, len(self.out)
        # per stage, its bytes over a prefix of layers (one array op for all stages)
        rows = [static] * len(mem.inflight) if saved is None else static + (mem.inflight * mem.b)[:, None] * saved
        for held in rows:
            start = max(start, int(held.searchsorted(held[start] + room, side="right")) - 1)
            if start >= layers:
                return False
        return True

    def phase_times(self, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per-layer prefix sums of F, B, I and W times, with the least exposed all-to-alls: the
        rows of one array, each summed left to right (np.cumsum adds in order)."""
        key = ("phases", b)
        hit = self._costs.get(key)
        if hit is None:
            least = (lambda i, k: self.least_a2a_s(i, k, b)) if self._a2a_exposed_at(b) else None
            hit = self._costs[key] = tuple(self._phase_rows(b, least))
        return hit

    def _phase_rows(self, b: int, a2a_s) -> np.ndarray:
        """Per-layer prefix sums of F, B, I and W at size b, each layer's price plus, where
        ``a2a_s(i, kind)`` is given, its all-to-alls: its class's, priced at the class's first
        layer i (Prices.a2a_s keeps them by class)."""
        prices, graph = self.prices, self.graph
        rows = np.zeros((4, len(graph.layers) + 1))
        for row, k in zip(rows, "FBIW"):
            row[1:] = prices.layer_times(self.compute, graph, k, b, 0, self.tp_overlap, layer_time_s)
            if a2a_s is not None:
                by_class = {c: a2a_s(i, k) for c, i in prices.class_firsts(graph)}
                row[1:] += [by_class[c] for c in prices.classes(graph)]
        return np.cumsum(rows, axis=1)

    def floor_phase_times(self, b: int) -> np.ndarray | None:
        """Per layer, floors of its F, B, I and W at size b (rows of one array), each at most what
        phase_times' prefix sums give it, with no layer priced: each class's compute floor
        (Prices.layer_floors) with its tensor-parallel collectives, hidden or not
        (parsim.sim.overlap.layer_floor_s), and its least exposed all-to-alls, as phase_times
        adds them.  None where the compute model gives no floors."""
        key = ("floor phases", b)
        if key in self._costs:
            return self._costs[key]
        prices, graph, compute = self.prices, self.graph, self.compute
        floors = prices.layer_floors(compute, graph, b)
        if floors is not None:
            rows = np.empty_like(floors)
            exposed = self._a2a_exposed_at(b)
            classes, firsts = prices.classes(graph), prices.class_firsts(graph)
            for row, floor, k in zip(rows, floors, "FBIW"):
                by_class = {c: layer_floor_s(floor[i], compute, graph.layers[i], k, b, prices.cluster, self.tp_overlap,
                                             prices.tp_comm_s) + (self.least_a2a_s(i, k, b) if exposed else 0.0)
                            for c, i in firsts}
                row[:] = [by_class[c] for c in classes]
            floors = rows
        self._costs[key] = floors
        return floors

    def phase_lists(self, b: int) -> tuple[list[float], ...]:
        """phase_times as lists of Python floats (the same numbers, read one by one faster)."""
        key = ("phase lists", b)
        if key not in self._costs:
            self._costs[key] = tuple(x.tolist() for x in self.phase_times(b))
        return self._costs[key]

    def _a2a_exposed_at(self, b: int) -> bool:
        """Whether the all-to-alls of micro-batch size ``b`` bound (least_a2a_s): exposed (no
        ep_overlap) and not already in a profile's layer times."""
        return self.exposed_a2a and not getattr(self.compute, "includes_ep_comm_at", lambda _: False)(b)

    def _ep_phases_by_rank(self, cfg: ParallelConfig, b: int) -> list | None:
        """ep_phase_lists of each pipeline rank of cfg's layout (the ranks its groups depend on),
        listed once per layout and size; None where every rank's are the phases as they are."""
        key = ("ep phases by rank", b, cfg.dp, cfg.pp, cfg.tp, cfg.cp, cfg.ep, cfg.etp, cfg.placement)
        if key not in self._costs:
            lists = [self.ep_phase_lists(cfg, b, r) for r in range(cfg.pp)]
            self._costs[key] = None if all(x is None for x in lists) else lists
        return self._costs[key]

    def ranks_least_phases(self, cfg: ParallelConfig, b: int) -> np.ndarray | None:
        """Per layer, the least over cfg's pipeline ranks of its F, B, I and W with its exposed
        all-to-alls over that rank's ep group (ep_phase_lists; rows of one array): what a stage of
        any split charges at least on whichever rank holds it, before the split (the placed floor,
        parsim.search.floor.Placed).  None where every rank's are the phases as they are."""
        if not self._a2a_exposed_at(b):
            return None
        layout = (cfg.dp, cfg.pp, cfg.tp, cfg.cp, cfg.ep, cfg.etp, cfg.placement)
        key = ("ranks' least phases", b, layout)
        if key in self._costs:
            return self._costs[key]
        # one rank for each way the ranks' ep groups are placed (alike placed, alike priced), by layout
        firsts = self._costs.get(("ep placements", layout))
        if firsts is None:
            seen = {}
            for r in range(cfg.pp):
                seen.setdefault(self.prices.a2a_placement(self.prices.group(cfg, "ep", r)), r)
            firsts = self._costs[("ep placements", layout)] = tuple(seen.values())
        own = [self.ep_phase_lists(cfg, b, r) for r in firsts]
        hit = None
        if any(x is not None for x in own):
            plain = self.phase_lists(b)
            hit = np.min([np.diff(np.array(x if x is not None else plain), axis=1) for x in own], axis=0)
        self._costs[key] = hit
        return hit

    def ep_phase_lists(self, cfg: ParallelConfig, b: int, r: int) -> tuple[list[float], ...] | None:
        """phase_lists with each MoE layer's exposed all-to-alls over pipeline rank r's ep group
        (ParallelConfig.ep_group, as the run's prices list it) in place of the most compact
        group's: per-layer prefix sums, each summed left to right, kept by the group's placement
        (Prices.a2a_placement: groups placed alike price alike); None where they are the compact
        group's (the phases as they are)."""
        prices, graph = self.prices, self.graph
        group = prices.group(cfg, "ep", r)
        key = ("ep phases", b, prices.a2a_placement(group))
        if key in self._costs:
            return self._costs[key]
        dispatcher = self.spec.training.moe_dispatcher

        def own_s(i: int, kind: str) -> float:
            if graph.layers[i].experts is None:
                return 0.0
            return prices.a2a_s(graph, i, kind, b, group, dispatcher)
        firsts = [i for _, i in prices.class_firsts(graph) if graph.layers[i].experts is not None]
        same = all(own_s(i, k) == self.least_a2a_s(i, k, b) for k in "FBIW" for i in firsts)
        hit = None if same else tuple(x.tolist() for x in self._phase_rows(b, own_s))
        self._costs[key] = hit
        return hit

    def least_a2a_s(self, i: int, kind: str, b: int) -> float:
        """The all-to-alls layer i's ``kind`` issues per micro-batch over the most compact ep
        group, exposed (parsim.sim.prices.Prices.a2a_s: a MoE model's identical layers priced
        once); 0 where they may hide (ep_overlap) or a profile's layer times hold them."""
        if self.graph.layers[i].experts is None or not self._a2a_exposed_at(b):
            return 0.0
        return self.prices.a2a_s(self.graph, i, kind, b, self.compact_ep, self.spec.training.moe_dispatcher)

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
          them, still runs (tail_r), and then rank 0 steps its optimizer;
        - with any number of chunks, each micro-batch's forward runs through every stage in turn,
          each stage's output sent to the next, and its backward back through them (under a split
          backward only I is on that path: W may wait), ending on stage 0, after which rank 0
          steps its optimizer: the chain.  With few micro-batches over many chunks (interleaved,
          v x pp stages) it is the bound that holds: 2 (v pp - 1) transfers that no other work hides;
        - ZeRO-3 (parsim.search.gathers): each forward and backward lasts at least as long as one
          all-gather of its stage's parameters;
        - DDP and ZeRO-1 (parsim.search.buckets): a stage's buckets start no earlier than its
          last backward (W under a split backward) does, which comes after every compute action
          before it in the rank's list; the rank's buckets run one after another in list order;
          and the stage whose buckets are last steps its optimizer after them.  Interleaved, the
          chunks' last backwards all fall in the cool-down, so most of a rank's reductions follow
          its compute.

        Each stage's phases hold its layers' all-to-alls over the ep group the simulator gives its
        rank (ParallelConfig.ep_group: parsim.sim.simulate charges the same prices), not the most
        compact group's the floor and the split read (phase_times): a placement that spreads the ep
        group over more nodes (pp-inner puts tp x pp ranks between its members) exposes slower
        all-to-alls, which bound it too (ep_phase_lists)."""
        phases = self.phase_lists(b)
        param_prefix, expert_prefix = self._prefix_lists
        m, pp = cfg.microbatches, cfg.pp
        own = self._ep_phases_by_rank(cfg, b) if self._a2a_exposed_at(b) else None
        split = cfg.schedule == "zbh1"
        # one transfer across each stage boundary (each way: the link classes are symmetric)
        links = self.prices.boundary_links(cfg, boundary_links)
        key = ("sent", b, links)
        if key not in self._costs:
            self._costs[key] = (self.edges(b, links) / 2).tolist()
        sent = self._costs[key]
        per_rank = [0.0] * pp
        work = [(0.0,) * 6] * cfg.stages    # per stage: F, B, I, W, all-reduce, optimizer step
        after = [0.0] * pp                  # per rank: its optimizer steps and ZeRO-1's gathers
        head = [0.0] * pp                   # forward of one micro-batch through stages 0..r-1
        tail = [0.0] * pp                   # its backward through them (unsplit backward only)
        best = 0.0
        upstream = 0.0
        chain = 0.0                         # one micro-batch through every stage and back (above)
        # each pipeline rank's gradient group (dp x cp ranks), listed once a call by the run's prices
        # (a group of thousands is slow to list), which price collective_time_s over it too
        groups = [self.prices.group(cfg, "grad", r) for r in range(pp)] if cfg.grad_ranks > 1 else None
        collective_s = self.prices.collective_s
        for s in range(cfg.stages):
            a, z = cfg.bounds[s], cfg.bounds[s + 1]
            Fp, Bp, Ip, Wp = phases if own is None or own[s % pp] is None else own[s % pp]
            f, bwd = Fp[z] - Fp[a], Bp[z] - Bp[a]
            if cfg.zero == 3:         # each forward and backward waits for its units' gathers (search.gathers)
                experts = expert_prefix[z] - expert_prefix[a]
                least = least_gathers_s(self.prices, cfg, s % pp, param_prefix[z] - param_prefix[a] - experts,
                                        experts, self.per_param["params"])
                f, bwd = max(f, least), max(bwd, least)
            phase_i, phase_w = (Ip[z] - Ip[a], Wp[z] - Wp[a]) if split else (0.0, 0.0)
            x = sent[s][z - 1]
            chain += f + (Ip[z] - Ip[a] if split else bwd) + (2 * x if s + 1 < cfg.stages else 0.0)
            if s + 1 < pp:
                head[s + 1] = head[s] + f + x
                tail[s + 1] = tail[s] + (0.0 if split else bwd + x)
            if split:
                bwd = min(bwd, Ip[z] - Ip[a] + Wp[z] - Wp[a])
            per_rank[s % pp] += m * (f + bwd)
            if cfg.chunks == 1:
                best = max(best, upstream + m * (f + bwd))
                upstream += f + x + (0.0 if split else bwd + x)
            params = param_prefix[z] - param_prefix[a]
            step = self.compute.optimizer_time_s(params / cfg.grad_ranks if cfg.zero else params, self.opt_moved)
            if cfg.zero == 1 and cfg.grad_ranks > 1 and params:
                step += collective_s(groups[s % pp], shard_padded_bytes(params * self.grad_per_param,
                                                                        self.grad_per_param, cfg.grad_ranks),
                                     "all_gather")
            after[s % pp] += step
            if cfg.grad_ranks > 1:
                # the dense gradients over the dp x cp ranks (ep: the experts' go over fewer, at once)
                grads = (params - (expert_prefix[z] - expert_prefix[a])) * self.grad_per_param
                # ZeRO: reduce-scatter (and a later all-gather, not counted)
                ar = collective_s(groups[s % pp], grads, "reduce_scatter" if cfg.zero else "all_reduce")
                best = max(best, (m - 1) * (f + bwd) + f + ar + step)
                # a stage without gradients has no bucket
                work[s] = (f, Bp[z] - Bp[a], phase_i, phase_w, ar if grads > 0 else 0.0, step)
        if cfg.grad_ranks > 1 and cfg.zero < 2:
            key = ("finals", cfg.schedule, pp, m, cfg.chunks)
            if key not in self._costs:
                self._costs[key] = final_backwards(self.prices.schedule(cfg.schedule, pp, m, cfg.chunks))
            best = max(best, final_backward_reductions(self._costs[key], work, head))
        ends = [h + busy + opt for h, busy, opt in zip(head, per_rank, after)]
        if not split:
            ends.append(max(h + busy + t for h, busy, t in zip(head, per_rank, tail)) + after[0])
        return max(best, max(ends), chain + after[0])

    def least_sends_s(self, b: int, links: tuple[str, ...]) -> float:
        """The least time a split's len(links) stage boundaries over ``links`` send one micro-batch
        one way (parsim.search.floor.Placed): each boundary sits after a different layer, so at least
        the len(links) smallest of each layer's least send over the links."""
        if not links:
            return 0.0
        key = ("sends", b, links)
        hit = self._costs.get(key)
        if hit is None:
            classes = tuple(sorted(set(links)))
            prefix = self._costs.get(("least sends", b, classes))
            if prefix is None:           # each layer's least send over the classes, as boundary_costs prices it
                least = boundary_costs(self.cluster, classes, self.costs(b)[1])[: len(classes), :-1].min(axis=0) / 2
                prefix = self._costs[("least sends", b, classes)] = \
                    np.concatenate([[0.0], np.cumsum(np.sort(least))]).tolist()
            hit = self._costs[key] = prefix[len(links)]
        return hit

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


def inflight_terms(inflight) -> tuple[int, float, float]:
    """What memory_floor_bytes reads of the in-flight micro-batches of each of the pp v stages:
    their count, the sum of their reciprocals and their largest."""
    return len(inflight), sum(1 / n for n in inflight), max(inflight)


def memory_floor_bytes(params: float, static_bytes_per_param: float, saved_bytes: float, terms,
                       b: int, v: int) -> float:
    """The least closed-form stage peak any split can have (above): ``params`` and ``saved_bytes``
    (per sample) of the whole model, ``terms`` the inflight_terms of the pp v stages' in-flight
    micro-batches, b samples per micro-batch."""
    stages, h, most = terms
    pp = stages / v
    static = params * static_bytes_per_param
    return max(static / pp, v * (static / (h * most) + b * saved_bytes / h)) * SLACK
