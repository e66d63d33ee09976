"""Complete a parallel configuration from what the user fixed (flags, model.yaml ``parallel:``
and ``pipeline_stage:``) and sensible defaults; the split comes from the partitioner unless the
user gave one."""

from __future__ import annotations

import numpy as np

from parsim.cost.compute import ComputeModel
from parsim.cost.layer import loss_time_s
from parsim.sim.overlap import layer_time_s
from parsim.errors import InfeasibleError
from parsim.hardware.cluster import Cluster
from parsim.model.attention import check_cp
from parsim.model.graph import LayerGraph
from parsim.model.recompute import recompute_mode
from parsim.model.spec import ModelSpec
from parsim.plan import EMBED, HEAD, ParallelConfig, bounds_from_assignment, bounds_from_counts
from parsim.search.partition import balanced_bounds
from parsim.shard.prepare import auto_memory_bytes, per_device_graph


def layer_costs(graph: LayerGraph, compute: ComputeModel, microbatch: int, cluster: Cluster,
                tp_overlap: bool = False) -> tuple[list, list]:
    """(forward + backward time per layer, bytes a stage ending after the layer sends per
    micro-batch) for the partitioner; ``graph`` is the per-device graph
    (parsim.shard.prepare.per_device_graph); ``tp_overlap``: its tensor-parallel collectives
    overlapped with its GEMMs (parsim.sim.overlap)."""
    times = [sum(layer_time_s(compute, layer, k, microbatch, cluster, 0, tp_overlap) for k in ("F", "B"))
             for layer in graph.layers]
    times[-1] += sum(loss_time_s(compute, graph, k, microbatch) for k in ("F", "B"))
    return times, [layer.output_bytes * microbatch for layer in graph.layers]


def boundary_links(cluster: Cluster, cfg: ParallelConfig) -> tuple[str, ...]:
    """The link class from each stage's device to the next stage's under cfg's placement, for
    replica 0 as the simulator prices it (parsim.sim.simulate: SEND_F and SEND_B).  They depend on
    (dp, pp, chunks, tp, cp, placement) alone: a run's pricing context keeps them
    (parsim.sim.prices.Prices.boundary_links)."""
    ranks = [cfg.global_rank(0, r) for r in range(cfg.pp)]
    return tuple(cluster.link_class(ranks[s % cfg.pp], ranks[(s + 1) % cfg.pp]) for s in range(cfg.stages - 1))


def boundary_costs(cluster: Cluster, links: tuple[str, ...], sent_bytes) -> np.ndarray:
    """[stage, layer]: the time charged to stage s ending after a layer: its activation forward and
    its gradient back over links[s] (the last stage sends nothing)."""
    out = np.zeros((len(links) + 1, len(sent_bytes)))
    rows: dict[str, list[float]] = {}
    for s, link_class in enumerate(links):
        if link_class not in rows:
            link = cluster.link_for(link_class)
            rows[link_class] = [2 * link.time_s(x) for x in sent_bytes]
        out[s] = rows[link_class]
    return out


def default_layout(graph: LayerGraph) -> str:
    """The built-in tp layout a configuration takes unless told: megatron, or megatron-sp for a
    mixture of experts or multi-head latent attention, which Megatron runs beside tp with sequence
    parallelism only (parsim.shard.builtin)."""
    from parsim.shard.builtin import mla_heads

    return "megatron-sp" if graph.moe or mla_heads(graph) else "megatron"


def default_chunks(schedule: str) -> int:
    """Model chunks a pipeline rank holds where none are given: 2 under the interleaved schedule
    (the fewest that interleave), else 1."""
    return 2 if schedule == "interleaved" else 1


SPLIT_NAMES = ("balanced", "uniform", "manual")                          # the splits named, not listed
SPLIT_FORMS = "expected balanced, uniform, manual or boundaries like 0,8,18"     # what a split may be


def split_bounds(split: str) -> tuple[int, ...]:
    """The stage boundaries a split other than balanced, uniform and manual gives ("0,8,18")."""
    try:
        return tuple(int(x) for x in split.split(","))
    except ValueError:
        raise InfeasibleError(f"--split: {SPLIT_FORMS}; got {split!r}") from None


def uniform_bounds(graph: LayerGraph, stages: int, where: str = "--split uniform") -> tuple[int, ...]:
    """Megatron-Core's default split, which MindSpeed-LLM (without --num-layer-list) and MindFormers
    (without offsets) keep: the transformer layers evenly over the pp x chunks virtual stages, the
    embedding with the first and the output layer with the last (megatron/core/transformer/
    transformer_block.py, get_num_layers_to_build: num_layers / pp / vp layers a virtual stage).
    InfeasibleError, naming ``where``, for a model that is not embed, layers.N, head, or whose
    layers do not divide over the stages (Megatron asserts the same unless it is given uneven
    first and last stages)."""
    names = [layer.name for layer in graph.layers]
    if len(names) < 3 or names[0] != EMBED or names[-1] != HEAD or \
            any(not n.startswith("layers.") for n in names[1:-1]):
        raise InfeasibleError(f"{where}: {graph.name}'s cut units are not a decoder's (embed, layers.N, head); "
                              "give balanced or boundaries like 0,8,18")
    layers = len(names) - 2
    if layers % stages:
        raise InfeasibleError(f"{where}: {layers} transformer layers do not divide over {stages} pipeline stages, "
                              "as Megatron asserts; give balanced or boundaries like 0,8,18")
    return bounds_from_counts([layers // stages] * stages)


def balanced_split(spec: ModelSpec, cluster: Cluster, compute: ComputeModel, cfg: ParallelConfig,
                   graph: LayerGraph | None = None) -> tuple[int, ...]:
    """The split of ``cfg``'s pp x chunks stages that minimises the slowest (balanced_bounds, its
    stage boundaries' sends charged), on the per-device graph of cfg's layout: under partial
    recomputation (ParallelConfig.recompute_layers, recompute_every) the graph without it, since
    every stage recomputes the same count.  ``graph``: that per-device graph, where the caller made
    it; ``cluster`` resolved for the run's dtype (Cluster.for_dtype)."""
    b = cfg.microbatch_size(spec.training.global_batch_size)
    if graph is None:
        partial = bool(cfg.recompute_layers or cfg.recompute_every)
        graph = per_device_graph(spec.graph, cfg.tp, cfg.tp_layout, "none" if partial else cfg.recompute, spec.shard,
                                 cluster, spec.training, b, auto_memory_bytes(cluster, cfg.pp), cp=cfg.cp, ep=cfg.ep,
                                 etp=cfg.etp)
    times, sent = layer_costs(graph, compute, b, cluster, cfg.tp_comm_overlap)
    return tuple(balanced_bounds(times, cfg.stages, boundary_costs(cluster, boundary_links(cluster, cfg), sent)))


def resolve_config(spec: ModelSpec, cluster: Cluster, compute: ComputeModel, *, dp=None, pp=None,
                   microbatches=None, schedule=None, chunks=None, split=None, placement="pp-inner",
                   tp=None, tp_layout=None, recompute=None, zero=None, cp=None, tp_comm_overlap=None,
                   cp_mode=None, ep=None, ep_overlap=False, etp=None, recompute_layers=(),
                   recompute_every=0, dp_shard=0, overlap_grad_reduce=True, no_sync=False) -> ParallelConfig:
    """``split``: None (manual if model.yaml has one for this pp, else balanced), "balanced",
    "uniform" (uniform_bounds: Megatron's default), "manual", or comma-separated boundaries such as
    "0,8,18".  A mixture of experts at tp > 1
    takes the megatron-sp layout unless told (parsim.shard.builtin.moe).  ``recompute_layers``:
    the layers of each stage recomputed (ParallelConfig.recompute_layers), full recomputation
    implied; a balanced split is then balanced on the layers without recomputation, since every
    stage recomputes the same count.  ``recompute_every``: every N-th layer of a rank recomputed
    (ParallelConfig.recompute_every), full recomputation implied, balanced likewise.  ``dp_shard``:
    HSDP's shard group (ParallelConfig.dp_shard), 0 for ZeRO over every dp rank.
    ``overlap_grad_reduce``, ``no_sync``: ParallelConfig's."""
    hint = spec.parallel
    cluster = cluster.for_dtype(spec.training.dtype)     # collectives priced in the run's dtype
    pp = pp or hint.pp or (max(spec.manual_stages) + 1 if spec.manual_stages else 1)
    schedule = schedule or hint.schedule or "1f1b"
    chunks = chunks or hint.chunks or default_chunks(schedule)
    tp = tp or hint.tp or 1
    tp_layout = (tp_layout or hint.tp_layout or ("model" if spec.shard else default_layout(spec.graph))
                 if tp > 1 else "")
    partial = bool(recompute_layers or recompute_every)
    if partial and recompute is None:
        recompute = "full"
    recompute = recompute_mode(recompute if recompute is not None else (spec.training.recompute or False))
    cp = cp or hint.cp or 1
    extra = dict(tp_comm_overlap=bool(tp_comm_overlap), cp_mode=cp_mode or "ring", ep=ep or hint.ep or 1,
                 ep_overlap=bool(ep_overlap), etp=etp or hint.etp or 1, recompute_layers=recompute_layers or (),
                 recompute_every=recompute_every or 0, dp_shard=dp_shard or hint.dp_shard or 0,
                 overlap_grad_reduce=overlap_grad_reduce, no_sync=bool(no_sync))
    check_cp(spec.graph, cp, f"--cp {cp}")
    dp = dp or hint.dp or max(1, cluster.world_size // (pp * tp * cp))
    microbatches = microbatches or hint.microbatches or max(1, pp)
    zero = zero if zero is not None else (hint.zero or 0)
    stages = pp * chunks
    if stages > len(spec.graph):
        raise InfeasibleError(f"--pp {pp}" + (f" x --chunks {chunks}" if chunks > 1 else "") + f": {stages} pipeline "
                              f"stages, but {spec.path or spec.name} has {len(spec.graph)} cut units; use at most "
                              f"{len(spec.graph)}")
    from parsim.cost.experts import check_ep
    from parsim.refusals import config_refusal

    probe = ParallelConfig(dp, pp, 1, chunks=chunks, tp=tp, recompute=recompute, zero=zero, cp=cp, **extra)
    why = config_refusal(probe)
    if why and why[0] == "dp_shard" and not dp_shard:      # the model.yaml's hint
        raise InfeasibleError(f"{spec.path or spec.name}: parallel.dp_shard: {why[1]}")
    if why:
        raise InfeasibleError(f"--{why[0].replace('_', '-')} {why[1]}")
    check_ep(spec.graph, extra["ep"], extra["etp"])
    # the per-device graph the split is balanced for (parsim.cost.experts)
    graph = per_device_graph(spec.graph, tp, tp_layout, "none" if partial else recompute, spec.shard,
                             cluster, spec.training,
                             max(1, spec.training.global_batch_size // (dp * microbatches)),
                             auto_memory_bytes(cluster, pp), cp=cp, ep=extra["ep"], etp=extra["etp"])
    if split is None:
        split = "manual" if spec.manual_stages and max(spec.manual_stages) + 1 == stages else "balanced"
    if split == "manual":
        if not spec.manual_stages:
            raise InfeasibleError(f"--split manual: {spec.path} has no pipeline_stage section")
        bounds = bounds_from_assignment(spec.manual_stages)
        if len(bounds) - 1 != stages:
            raise InfeasibleError(f"--split manual: {spec.path} assigns {len(bounds) - 1} stages but pp x chunks = "
                                  f"{stages}; change --pp or the pipeline_stage section")
    elif split == "balanced":
        bounds = balanced_split(spec, cluster, compute,
                                ParallelConfig(dp, pp, microbatches, schedule, chunks, (), placement, tp, tp_layout,
                                               recompute, zero, cp, **extra), graph)
    elif split == "uniform":
        bounds = uniform_bounds(spec.graph, stages)
    else:
        bounds = split_bounds(split)
    from parsim.schedule.generators import check_feasible

    check_feasible(schedule, pp, microbatches, chunks)
    return ParallelConfig(dp, pp, microbatches, schedule, chunks, tuple(bounds), placement, tp, tp_layout, recompute,
                          zero, cp, **extra)
