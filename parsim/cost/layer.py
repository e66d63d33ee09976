"""A layer's time on one device for one micro-batch and phase: its compute (a ComputeModel), plus
the forward it re-runs when recomputed, plus its tensor-parallel redistributions.

- Recomputation (parsim.model.recompute): the backward (B, or I under a split backward) first
  re-runs the forward, communication included (full: Chen et al. 2016), or only the core
  attention's forward kernels, which communicate nothing (selective: Korthikanti et al. 2022,
  Sec. 5; ``recompute_time_s``).
- Tensor-parallel steps (``Layer.tp_comm``, from parsim.shard.graph) run in the compute stream
  (unless the compute model's times already hold them: a tensor-parallel profile),
  not overlapped: DTensor's and Megatron's tensor-parallel collectives block the next operator.
  Forward steps go with F, backward steps with B (I under a split backward), the loss's
  (vocabulary-parallel: parsim.shard.graph.loss_steps) with F and not recomputed, gradient mirrors
  with the optimizer step, once per step (Megatron's finalize_model_grads).
- The loss (``loss_time_s``) goes with the last layer: its forward after the layer's F, its
  backward before the layer's B (or I), as the executor runs it (parsim.model.loss).
- A step is priced with the cluster's alpha-beta model (parsim.cost.comm) over the ranks along
  its device dimension, laid out row-major over its device matrix from the group's first rank.
  An all-to-all is priced by the one all-to-all rule, parsim.cost.comm.all_to_all_time_s (the
  library's efficiency and per-step latency, PXN across nodes), as a MoE dispatch is.  gloo has
  no all-to-all for DTensor: it is an all_gather plus a local chunk, so it is priced as that
  all_gather of the whole dimension.
"""

from __future__ import annotations


from parsim.cost.comm import all_to_all_time_s, collective_time_s
from parsim.cost.compute import ComputeModel
from parsim.model.graph import Layer


def group_ranks(device_matrix: tuple[int, ...], d: int, first_rank: int = 0) -> list[int]:
    """Ranks along device dimension d (right-counted) through the first device, row-major."""
    stride = 1
    for k in range(d):
        stride *= device_matrix[len(device_matrix) - 1 - k]
    return [first_rank + i * stride for i in range(device_matrix[len(device_matrix) - 1 - d])]


def redistribution_time_s(step, cluster, device_matrix: tuple[int, ...], first_rank: int = 0,
                          scale: float = 1.0, shape_of=None) -> float:
    """Time of one redistribution step (parsim.shard.redistribute.Step), its bytes x ``scale``
    (a step recorded per sample, priced for a micro-batch).  ``shape_of(ranks)``: parsim.cost.comm.
    group_shape on ``cluster``, where the caller keeps it (parsim.sim.prices.Prices.shape)."""
    if not step.communicates:
        return 0.0
    nbytes = step.bytes_per_device * scale
    ranks = group_ranks(device_matrix, step.device_dim, first_rank)
    op = {"AllReduce": "all_reduce", "ReduceScatter": "reduce_scatter", "AllGather": "all_gather"}.get(step.kind)
    if op is None and cluster.profile.collectives.library != "gloo":   # AllToAll
        return all_to_all_time_s(cluster, ranks, nbytes)
    shape = shape_of(ranks) if shape_of is not None else None
    if op is None:   # AllToAll on gloo: DTensor runs it as an all-gather
        return collective_time_s(cluster, ranks, nbytes * step.group_size, "all_gather", shape=shape)
    return collective_time_s(cluster, ranks, nbytes, op, shape=shape)


def tp_comm_time_s(layer: Layer, phase: str, microbatch: int, cluster, first_rank: int = 0, shape_of=None) -> float:
    """The layer's tensor-parallel steps of ``phase`` ("F", "B", "loss" per micro-batch; "grad" per step).
    The planner asks for the same layers at the same sizes thousands of times: its pricing context
    keeps each layer's whole time (parsim.sim.prices.Prices.layer_times) and the groups' shapes
    (``shape_of``, as redistribution_time_s takes it)."""
    scale = 1 if phase == "grad" else microbatch
    total = 0.0
    for ph, step, matrix in layer.tp_comm:
        if ph == phase:
            total += redistribution_time_s(step, cluster, matrix, first_rank, scale, shape_of)
    return total


def includes_tp_comm(compute: ComputeModel, microbatch: int) -> bool:
    """Whether ``compute``'s time at this size already holds the tensor-parallel collectives (a
    tensor-parallel profile does at the sizes it measured or interpolates, not where its
    fallback prices the shard)."""
    at = getattr(compute, "includes_tp_comm_at", None)
    return at(microbatch) if at is not None else getattr(compute, "includes_tp_comm", False)


def includes_loss(compute: ComputeModel, microbatch: int) -> bool:
    """Whether ``compute``'s time of the last layer at this size already holds the loss: a layer
    profile times the last unit with the run's loss (parsim.profile.layers), its fallback does not."""
    at = getattr(compute, "includes_loss_at", None)
    return at(microbatch) if at is not None else False


def loss_time_s(compute: ComputeModel, graph, kind: str, microbatch: int) -> float:
    """The loss's share of the last layer's phase ``kind`` on one micro-batch (LayerGraph.loss_layer):
    its forward with F, its backward with B or I (it has no weights: nothing with W), never
    recomputed.  0 where the graph recorded no loss, or the compute model's times hold it."""
    loss = graph.loss_layer
    if loss is None or kind == "W" or includes_loss(compute, microbatch):
        return 0.0
    return compute.layer_time_s(loss, kind, microbatch)


def recompute_time_s(compute: ComputeModel, layer: Layer, microbatch: int) -> float:
    """What a recomputed layer's backward re-runs first, on one micro-batch: its whole forward
    (full), or its core attention's forward kernels (selective, ``Layer.recompute_part``).  A
    profile times whole layers, not their core attention: the part is priced by the profile's
    analytical fallback (``ProfiledCompute.fallback``)."""
    part = layer.recompute_part
    if part is None:
        return compute.layer_time_s(layer, "F", microbatch)
    return getattr(compute, "fallback", compute).layer_time_s(part, "F", microbatch)


def layer_time_s(compute: ComputeModel, layer: Layer, kind: str, microbatch: int, cluster=None,
                 first_rank: int = 0, tp_comm_s=None) -> float:
    """Phase ``kind`` (F, B, I or W) of ``layer`` on one micro-batch (module docstring);
    ``tp_comm_s(layer, phase, microbatch, first_rank)``: tp_comm_time_s on ``cluster``, as the
    run's pricing context keeps it (parsim.sim.prices), else priced here."""
    t = compute.layer_time_s(layer, kind, microbatch)
    if layer.recompute_bytes and kind in ("B", "I"):
        t += recompute_time_s(compute, layer, microbatch)
    if cluster is not None and layer.tp_comm and not includes_tp_comm(compute, microbatch):
        if tp_comm_s is None:
            def tp_comm_s(lay, phase, b, rank):
                return tp_comm_time_s(lay, phase, b, cluster, rank)
        for phase in tp_comm_phases(layer, kind):
            t += tp_comm_s(layer, phase, microbatch, first_rank)
    return t


def tp_comm_phases(layer: Layer, kind: str) -> tuple[str, ...]:
    """The phases of ``layer``'s tensor-parallel steps (Layer.tp_comm) that its phase ``kind``
    runs, in order: a recomputed forward's before a backward's (B, I), the loss's after a
    forward's (F); none with W."""
    if kind == "F":
        return ("F", "loss")
    if kind == "W":
        return ()
    return ("F", "B") if layer.recompute_bytes and layer.recomputes_forward else ("B",)
