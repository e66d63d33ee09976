"""One pricing context per (model, cluster, options): the prices a run asks for more than once,
built once and read by the simulator (parsim.sim.simulate), the planner's bounds
(parsim.search.bound) and the shard search (parsim.shard.prepare, parsim.shard.auto).

A ``Prices`` belongs to one run: ``plan()`` makes one for its search and hands it to every
simulation, bound and graph it asks for; ``simulate()`` called alone makes its own.  It is
dropped with the run, so nothing it holds outlives it (no module-level memo: the tables below
replace the ones each module kept for the process, some keyed by ``id()``).

Its tables, each filled on the first ask by the module that owns the rule, never by a rule of
its own (the numbers are the ones those modules compute, bit for bit):

- per-device graphs (``shard``: parsim.shard.prepare.per_device_graph, and the strategy searches
  of parsim.shard.auto that the searched layout runs);
- per-layer compute prices by (compute model, graph, phase, micro-batch size, first rank of the
  tensor-parallel group, tp overlap): parsim.sim.overlap.layer_time_s of each layer, the layers
  of one class (``classes``: the same in every field but the name, in any graph of the run)
  priced once under the analytical model, the last with the loss (parsim.cost.layer.
  loss_time_s); the tensor-parallel steps' times by (steps, phase, size, rank) (parsim.cost.
  layer.tp_comm_time_s) and the MoE layers' all-to-alls by (class, phase, size, group)
  (parsim.cost.experts.a2a_time_s), each group's placement once (parsim.cost.comm.a2a_geometry);
- per-layer compute floors by (compute model, graph, size): each class's kernels' floors
  (parsim.cost.kernels.layer_floor_terms, by kernel and share), the planner's family floors
  before any layer is priced (``layer_floors``);
- groups of ranks by layout (ParallelConfig.grad_group and the groups cut from it), their shape
  (parsim.cost.comm.group_shape) and collective prices by (group, bytes, op, algorithm)
  (parsim.cost.comm.collective_time_s);
- the link class of each stage boundary by layout (parsim.search.resolve.boundary_links);
- schedules, built and lowered (parsim.schedule), what each action of a lowered one waits for
  (parsim.sim.engine.templates) and the order of the activations each rank's compute actions
  keep and free (parsim.sim.memory);
- memory terms: the backward's workspace by (graph, stage ranges, micro-batch size, cp mode)
  (parsim.cost.memory.backward_workspace_bytes).

Objects a table is keyed by identity on (graphs, compute models, groups of ranks) are held in the
entry, so an id is never reused while the context lives.
"""

from __future__ import annotations

import numpy as np

from parsim.cost.comm import a2a_geometry, collective_time_s, group_shape
from parsim.cost.compute import AnalyticalCompute
from parsim.cost.experts import a2a_time_s
from parsim.cost.kernels import layer_floor_terms
from parsim.cost.layer import loss_time_s, tp_comm_time_s
from parsim.hardware.cluster import Cluster
from parsim.model.graph import twin_signature
from parsim.schedule import build_schedule, lower
from parsim.shard.prepare import ShardMemo

class Prices:
    """The pricing context of one run on ``cluster`` (already resolved for the run's dtype:
    Cluster.for_dtype)."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.shard = ShardMemo()
        self._layers: dict[tuple, tuple] = {}
        self._tp_comm: dict[tuple, tuple] = {}
        self._class_times: dict[tuple, float] = {}
        self._floor_terms: dict[tuple, tuple] = {}
        self._classes: dict[tuple, tuple] = {}
        self._graph_classes: dict[int, tuple] = {}
        self._compact: dict[int, tuple[int, ...]] = {}
        self._a2a: dict[tuple, tuple] = {}
        self._a2a_geometry: dict[int, tuple] = {}
        self._groups: dict[tuple, tuple[int, ...]] = {}
        self._shapes: dict[int, tuple] = {}
        self._shapes_by_value: dict[tuple, tuple] = {}
        self._collectives: dict[tuple, float] = {}
        self._links: dict[tuple, tuple[str, ...]] = {}
        self._schedules: dict[tuple, object] = {}
        self._lowered: dict[tuple, object] = {}
        self.tables: dict[str, dict] = {}

    def table(self, name: str) -> dict:
        """A table a module keeps its own terms in for this run (parsim.sim.memory's events and
        workspaces), by the name it gives."""
        return self.tables.setdefault(name, {})

    # ------------------------------------------------------------------ compute

    def layer_times(self, compute, graph, kind: str, microbatch: int, first_rank: int = 0, overlap: bool = False,
                    price=None, start: int = 0, stop: int | None = None) -> list[float]:
        """Layers [start, stop)'s times in phase ``kind`` on one micro-batch (``price``: parsim.sim.
        overlap.layer_time_s, which the caller passes: the rule stays in its module; it is given
        this context, whose tables keep its terms), each priced on its first ask.  ``first_rank``
        (of the tensor-parallel group, whose links price its steps) counts only where the graph
        has tensor-parallel steps: without them every rank prices the same.  Under the
        analytical model, which prices a layer by what it holds and not by its name, a layer of
        the same class as one priced before (``classes``: a transformer's identical blocks, and the
        layers an expert-parallel graph keeps of its base) takes that one's time."""
        if graph.tp == 1:
            first_rank = 0
        key = (id(compute), id(graph), kind, microbatch, first_rank, overlap)
        hit = self._layers.get(key)
        analytical = isinstance(compute, AnalyticalCompute)
        if hit is None and analytical and start == 0 and stop is None:
            # every layer at once (the planner's bounds ask so): each class priced once, then listed
            times = self._by_class(compute, graph, kind, microbatch, first_rank, overlap, price)
            if times:
                times[-1] = times[-1] + loss_time_s(compute, graph, kind, microbatch)
            self._layers[key] = (compute, graph, times)
            return times[:]
        if hit is None:
            hit = self._layers[key] = (compute, graph, [None] * len(graph.layers))
        times = hit[2]
        stop = len(times) if stop is None else stop
        classes = self.classes(graph) if analytical else None
        last = len(times) - 1
        for i in range(start, stop):
            if times[i] is None:
                if classes is None:
                    t = price(compute, graph.layers[i], kind, microbatch, self.cluster, first_rank, overlap, self)
                else:
                    t = self._class_time(compute, graph, classes[i], i, kind, microbatch, first_rank, overlap, price)
                times[i] = t + loss_time_s(compute, graph, kind, microbatch) if i == last else t
        return times[start:stop]

    def _by_class(self, compute, graph, kind: str, microbatch: int, first_rank: int, overlap: bool,
                  price) -> list[float]:
        """Every layer's time (layer_times, without the loss): each class's (_class_time) at its
        first layer, as the layer-by-layer walk prices it, then listed by layer."""
        _, classes, firsts = self._graph_classes_of(graph)
        times = {c: self._class_time(compute, graph, c, i, kind, microbatch, first_rank, overlap, price)
                 for c, i in firsts}
        return [times[c] for c in classes]

    def _class_time(self, compute, graph, c: int, i: int, kind: str, microbatch: int, first_rank: int,
                    overlap: bool, price) -> float:
        """Class c's time in phase ``kind``: from the table, else priced at layer i of ``graph``
        (one of that class) and kept."""
        ckey = (id(compute), c, kind, microbatch, first_rank, overlap)
        t = self._class_times.get(ckey)
        if t is None:
            t = self._class_times[ckey] = price(compute, graph.layers[i], kind, microbatch, self.cluster, first_rank,
                                                overlap, self)
        return t

    def layer_floors(self, compute, graph, microbatch: int) -> np.ndarray | None:
        """Per layer of ``graph``, a floor of the compute in each of its F, B, I and W times at
        ``microbatch`` (the rows of a (4, layers) array): at most what layer_times gives less its
        tensor-parallel collectives and loss, whatever the layer's shape efficiency
        (parsim.cost.kernels.layer_floor_terms: affine in the size per kernel, so one array
        expression for every kernel of the graph's classes, no kernel priced).  None where
        ``compute`` is not the analytical kernel-level model (a profile's times, or a
        roofline's, have no such floor here)."""
        if not isinstance(compute, AnalyticalCompute) or compute.device.kernels is None:
            return None
        key = (id(compute), id(graph))
        table = self.table("layer floors")
        hit = table.get(key)
        if hit is None:
            hit = table[key] = (compute, graph, self._floor_arrays(compute, graph), {})
        rows = hit[3].get(microbatch)
        if rows is None:
            p0, p1, host_s, a0, a1, m0, m1, runs, where = hit[2]
            device_s = p0 + p1 * microbatch
            if len(runs):               # the kernels whose terms cross: each its larger one, added to its run
                np.add.at(device_s, runs, np.maximum(a0 + a1 * microbatch, m0 + m1 * microbatch))
            per_run = np.maximum(device_s, host_s) if compute.device.kernels.asynchronous else device_s + host_s
            rows = hit[3][microbatch] = per_run[where]
        return rows

    def _floor_arrays(self, compute, graph) -> tuple:
        """parsim.cost.kernels.layer_floor_terms of every class of ``graph`` in each phase F, B,
        I, W (a run): the runs' p0, p1 and host times; the crossing kernels' a0, a1, m0, m1 and
        their runs; and (4, layers) indices of each layer's run in each phase."""
        firsts = self.class_firsts(graph)
        position = {c: j for j, (c, _) in enumerate(firsts)}
        layer_runs = np.array([position[c] for c in self.classes(graph)])
        memo = self.table("kernel floors").setdefault(id(compute), {})     # by (kernel id, share)
        rows, crossing, runs = [], [], []
        for kind in "FBIW":
            for c, i in firsts:
                ckey = (id(compute), c, kind)
                terms = self._floor_terms.get(ckey)
                if terms is None:
                    terms = self._floor_terms[ckey] = layer_floor_terms(graph.layers[i], kind, compute.device,
                                                                        compute.engines, memo)
                p0, p1, cross, host_s = terms
                runs += [len(rows)] * len(cross)
                crossing += cross
                rows.append((p0, p1, host_s))
        where = np.array([layer_runs + j * len(firsts) for j in range(4)])
        p0, p1, host_s = np.array(rows).T
        a0, a1, m0, m1 = np.array(crossing).reshape(-1, 4).T
        return p0, p1, host_s, a0, a1, m0, m1, np.array(runs, dtype=int), where

    def classes(self, graph) -> list[int]:
        """Per layer of ``graph``, its class: layers of every graph this context was asked about
        with the same parsim.model.graph.twin_signature (every field but the name) share one (the
        first such layer is held, so the identities its signature names stay its own)."""
        return self._graph_classes_of(graph)[1]

    def class_firsts(self, graph) -> tuple[tuple[int, int], ...]:
        """(class, the index of its first layer in ``graph``) of each class of ``graph``, in the
        order they first appear."""
        return self._graph_classes_of(graph)[2]

    def _graph_classes_of(self, graph) -> tuple:
        """(graph, its classes, (class, its first layer's index) of each class in the order they
        first appear), made once per graph."""
        hit = self._graph_classes.get(id(graph))
        if hit is None:
            out, firsts = [], {}
            for i, layer in enumerate(graph.layers):
                sig = twin_signature(layer)
                entry = self._classes.get(sig)
                if entry is None:
                    entry = self._classes[sig] = (layer, len(self._classes))
                out.append(entry[1])
                firsts.setdefault(entry[1], i)
            hit = self._graph_classes[id(graph)] = (graph, out, tuple(firsts.items()))
        return hit

    def a2a_s(self, graph, i: int, kind: str, microbatch: int, group: tuple[int, ...],
              dispatcher: str = "alltoall") -> float:
        """parsim.cost.experts.a2a_time_s of layer i of ``graph`` over the expert-parallel ``group``
        (a tuple this context listed: compact_group, ParallelConfig's groups) by ``dispatcher``,
        by the layer's class (a MoE model's identical layers), the graph's dtype and routing
        imbalance, and the group."""
        key = (self.classes(graph)[i], kind, microbatch, graph.dtype, graph.moe_imbalance, id(group), dispatcher)
        hit = self._a2a.get(key)
        if hit is None:
            hit = self._a2a[key] = (group, a2a_time_s(graph.layers[i], kind, microbatch, graph.dtype, self.cluster,
                                                      group, graph.moe_imbalance, dispatcher, self._geometry(group)))
        return hit[1]

    def _geometry(self, group: tuple[int, ...]) -> tuple:
        """parsim.cost.comm.a2a_geometry of ``group``, placed once (by identity; held in the entry)."""
        hit = self._a2a_geometry.get(id(group))
        if hit is None:
            hit = self._a2a_geometry[id(group)] = (group, a2a_geometry(self.cluster, group))
        return hit[1]

    def a2a_placement(self, group: tuple[int, ...]) -> tuple:
        """What an ep ``group``'s all-to-all prices depend on (parsim.cost.experts.a2a_time_s reads
        its size and parsim.cost.comm.a2a_geometry alone): (its size, its ranks on each node, on
        the first rank's node, the link class among those, the farthest), hashable; groups placed
        alike price alike."""
        per_node, first_node, inner, span = self._geometry(group)
        return len(group), tuple(per_node), first_node, inner, span

    def compact_group(self, n: int) -> tuple[int, ...]:
        """Ranks 0..n-1, one tuple per n for the run (a group's prices are keyed by its identity)."""
        return self._compact.setdefault(n, tuple(range(n)))

    def tp_comm_s(self, layer, phase: str, microbatch: int, first_rank: int = 0) -> float:
        """parsim.cost.layer.tp_comm_time_s of ``layer`` on this cluster, by (its steps, phase,
        micro-batch size, first rank): a transformer's identical blocks share one tuple of steps
        (parsim.shard.graph.shard_layer), so each is priced once for all of them."""
        key = (id(layer.tp_comm), phase, microbatch, first_rank)
        hit = self._tp_comm.get(key)
        if hit is None:
            hit = self._tp_comm[key] = (layer.tp_comm, tp_comm_time_s(layer, phase, microbatch, self.cluster,
                                                                       first_rank, self.shape))
        return hit[1]

    # ------------------------------------------------------------------ groups and collectives

    def group(self, cfg, which: str, pipe_rank: int) -> tuple[int, ...]:
        """One of a configuration's groups for pipeline rank ``pipe_rank`` (replica 0, tp rank 0),
        listed once per rank layout: ``grad`` (ParallelConfig.grad_group), ``shard`` and
        ``replicate`` (shard_group, replicate_group: HSDP's), ``ep`` (ep_group), ``expert_dp``
        (expert_dp_group)."""
        if which == "shard" and not cfg.dp_shard:
            which = "grad"                   # the same ranks, listed once
        shard = cfg.dp_shard if which in ("shard", "replicate") else 0
        key = (which, cfg.dp, cfg.pp, cfg.tp, cfg.cp, cfg.ep, cfg.etp, cfg.placement, shard, pipe_rank)
        hit = self._groups.get(key)
        if hit is None:
            if which == "grad":
                hit = cfg.grad_group(pipe_rank)
            elif which == "shard":
                hit = cfg.shard_group(pipe_rank)
            elif which == "replicate":
                hit = cfg.replicate_group(pipe_rank)
            elif which == "ep":
                hit = cfg.ep_group(pipe_rank)
            else:
                hit = cfg.expert_dp_group(pipe_rank)
            self._groups[key] = hit
        return hit

    def shape(self, ranks) -> tuple:
        """parsim.cost.comm.group_shape of ``ranks``: by identity for a tuple (held in the entry:
        the groups this context lists are asked for thousands of times, and hashing 1,024 ranks
        costs more than the lookup), by value for a list."""
        if type(ranks) is tuple:
            hit = self._shapes.get(id(ranks))
            if hit is None:
                hit = self._shapes[id(ranks)] = (ranks, group_shape(self.cluster, ranks))
            return hit[1]
        key = tuple(ranks)
        hit = self._shapes_by_value.get(key)
        if hit is None:
            hit = self._shapes_by_value[key] = group_shape(self.cluster, key)
        return hit

    def link_class(self, ranks) -> str:
        """The farthest link class a group crosses (parsim.cost.comm.group_link_class)."""
        return self.shape(ranks)[0]

    def collective_s(self, ranks, nbytes: float, op: str = "all_reduce", algorithm: str = "auto") -> float:
        """parsim.cost.comm.collective_time_s over ``ranks``, by (group, bytes, op, algorithm)."""
        key = (id(ranks), nbytes, op, algorithm)
        hit = self._collectives.get(key)
        if hit is None:
            hit = collective_time_s(self.cluster, ranks, nbytes, op, algorithm, shape=self.shape(ranks))
            if type(ranks) is tuple:           # held by the shapes' table: its id stays its own
                self._collectives[key] = hit
        return hit

    def boundary_links(self, cfg, links) -> tuple[str, ...]:
        """The link class of each stage boundary of ``cfg`` (``links``: parsim.search.resolve.
        boundary_links, passed by the caller), by what they depend on."""
        key = (cfg.dp, cfg.pp, cfg.chunks, cfg.tp, cfg.cp, cfg.placement)
        hit = self._links.get(key)
        if hit is None:
            hit = self._links[key] = links(self.cluster, cfg)
        return hit

    # ------------------------------------------------------------------ schedules

    def schedule(self, name: str, pp: int, m: int, v: int):
        """build_schedule(name, pp, m, v), built once."""
        key = (name, pp, m, v)
        hit = self._schedules.get(key)
        if hit is None:
            hit = self._schedules[key] = build_schedule(name, pp, m, v)
        return hit

    def lowered(self, name: str, pp: int, m: int, v: int, buckets: tuple, tied_stages: tuple,
                reduce_after_backward: bool = False):
        """lower(build_schedule(...)) with these buckets per stage and tied stages, built once."""
        key = (name, pp, m, v, buckets, tied_stages, reduce_after_backward)
        hit = self._lowered.get(key)
        if hit is None:
            hit = self._lowered[key] = lower(self.schedule(name, pp, m, v), dict(buckets), tied_stages,
                                             reduce_after_backward)
        return hit
