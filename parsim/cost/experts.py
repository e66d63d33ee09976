"""Expert parallelism (ep) priced: a MoE layer's routed experts sharded over ep ranks.

As Megatron-Core runs it (``--expert-model-parallel-size``, its alltoall token dispatcher,
dropless, without overlap: megatron/core/transformer/moe/token_dispatcher.py) and DeepSeek-V3
lays it out (DeepSeek-AI 2024, Sec. 3.2): the ep ranks of a group are folded from a pipeline
rank's tp x cp x dp ranks (parsim.plan.ParallelConfig.ep_group; at tp = 1, its dp x cp ranks
holding the same dense parameters); each holds E/ep
of every MoE layer's E routed experts, and the tokens travel to their experts' ranks and back.

Conventions as parsim.model.moe: T_local the tokens one rank holds in a micro-batch (b samples x
s/cp tokens), k the experts per token, E the routed experts, h the hidden size, ``imbalance`` the
busiest rank's routed tokens over the mean (parsim.cost.comm.ROUTING_IMBALANCE by default;
model.yaml ``training.moe_imbalance``).

- **Compute** (``expert_parallel_graph``).  After the dispatch a rank's E/ep experts multiply
  the tokens the ep ranks sent them: c = T_local x ep x k / E x imbalance each on the busiest
  rank, whose time prices the step.  Its routed grouped GEMMs run at that per-expert count with
  E/ep groups (parsim.model.moe.Experts.routed_gemms' shapes: gate+up (c, 2I, h), down (c, h, I);
  a weight gradient's K is c), their FLOPs x imbalance, their weights' bytes / ep; the kernels'
  other batch-independent bytes (weight-sized copies of the expert gradients) / the layer's
  parameter share; the routed experts' saved activations x imbalance (they follow the routed
  tokens).  At ep = 1 every rank holds every expert and multiplies all T_local k routed
  tokens whatever the routing: no imbalance applies, and the graph is the model's.
- **Parameters.**  A rank holds the layer's dense parameters (attention, norms, router, shared
  experts) and routed / ep; ``expert_param_count`` is the routed part it holds, whose gradients
  are averaged (and ZeRO-sharded) over the expert-data-parallel group of tp x cp x dp / (ep x etp)
  ranks (ParallelConfig.expert_dp_group), the dense part's over the dp x cp ranks as before.
- **All-to-all** (``a2a_time_s``).  Per MoE layer and micro-batch: the dispatch and the combine
  in the forward, their transposes in the backward (the input gradient's path: I under a split
  backward; W has none), and a fully recomputed layer's backward runs its forward's two again;
  before each forward's dispatch, the exchange of the split sizes (E counts, latency-bound).
  Each moves the buffer parsim.model.moe.Experts.all_to_all_bytes(T_local, dtype) over the ep
  group, priced by parsim.cost.comm.all_to_all_time_s (NVLink in a node; the NICs with rails and
  PXN across nodes) at the imbalance.  Exposed: on the compute stream, as the dispatcher without
  overlap runs it (parsim.sim.simulate reports them apart, ``RankEstimate.ep_comm_s``), unless
  ``ParallelConfig.ep_overlap`` pairs a forward with another micro-batch's backward so that each
  hides the other's all-to-alls (parsim.sim.engine, at ``a2a_overlap_cost``).

Beside attention's tensor parallelism (MoE Parallel Folding, Liu et al. 2025, arXiv 2504.14960)
the ep ranks are folded from a pipeline rank's tp x cp x dp (parsim.plan.ParallelConfig.fold), each
rank dispatching its s/tp tokens (sequence parallelism), its experts whole (etp 1) or split over
the tp group (etp = tp): ``fold_experts`` and the layout's patterns (parsim.shard.builtin.moe).

How production moves the tokens: ``training.moe_dispatcher`` flex sends a token once per remote
node its experts lie on (``off_node_share``; DeepSeek-V3's node-limited routing bounds those nodes,
parsim.model.moe.Experts.remote_nodes_per_token); token dropping and padding to capacity set the
busiest load (``routing_imbalance``); a rank holding several experts sorts the dispatched rows by
expert and back (``_local_sorts``).

Not modelled: the memory-bound kernels of the routed path (activation, permutation) at the
imbalance are priced at the mean load apart from the sorts (their bytes are a small part of the
layer's time); DeepEP's and HybridEP's own kernel efficiency (priced at NCCL's fitted bandwidth).
"""

from __future__ import annotations

import math
from dataclasses import replace

from parsim.cost.comm import ROUTING_IMBALANCE, a2a_geometry, all_to_all_time_s
from parsim.errors import InfeasibleError
from parsim.model.graph import DTYPE_BYTES, ELEMENT_BYTES, Kernel, Layer, LayerGraph, OpInfo, twin_signature


def routing_imbalance(training) -> float:
    """The routing imbalance a run is priced at, the busiest rank's routed rows over the mean:
    model.yaml's ``training.moe_imbalance``, else parsim.cost.comm.ROUTING_IMBALANCE (cited
    there); under token dropping (``moe_capacity_factor`` cf, Megatron's
    --moe-expert-capacity-factor: each expert takes at most cf x the mean of a rank's tokens,
    megatron/core/transformer/moe/moe_utils.py get_capacity, ceil(T k / E x cf)) at most cf, and
    exactly cf where every expert's input is padded to its capacity (``moe_pad_to_capacity``,
    --moe-pad-expert-input-to-capacity: every rank sends every expert cf x the mean rows, so the
    all-to-alls, the permutations and the expert GEMMs all move cf x the mean)."""
    value = getattr(training, "moe_imbalance", None)
    value = ROUTING_IMBALANCE if value is None else value
    cf = getattr(training, "moe_capacity_factor", None)
    if cf is None:
        return value
    return cf if getattr(training, "moe_pad_to_capacity", False) else min(value, cf)


def check_ep(graph: LayerGraph, ep: int, etp: int = 1) -> None:
    """Raise InfeasibleError, one line saying what to change, where ``ep`` x ``etp`` cannot shard
    the model's experts: a model without experts, ep not dividing some MoE layer's experts or etp
    their intermediate size.  Whether ep x etp fold into the plan's ranks is the layout's rule
    (parsim.refusals.fold_refusal).  Any ZeRO stage goes with them: the experts shard over their own
    expert-data-parallel ranks (parsim.cost.memory.static_memory; ZeRO 2-3's units,
    parsim.sim.expert_grads.FsdpExperts)."""
    if ep == 1 and etp == 1:
        return
    counts = sorted({layer.experts.experts for layer in graph.layers if layer.experts is not None})
    what = f"ep={ep}" + (f" etp={etp}" if etp > 1 else "")
    if not counts:
        raise InfeasibleError(f"{what}: {graph.name} has no mixture-of-experts layer to shard; use ep=1 etp=1")
    bad = [e for e in counts if e % ep]
    if bad:
        raise InfeasibleError(f"ep={ep} must divide every MoE layer's routed experts ({', '.join(map(str, counts))}); "
                              f"{bad[0]} experts do not split over {ep} ranks: choose ep dividing {min(counts)}")
    inter = sorted({layer.experts.intermediate for layer in graph.layers if layer.experts is not None})
    if any(i % etp for i in inter):
        raise InfeasibleError(f"etp={etp} must divide the routed experts' intermediate size ({inter[0]}); use etp 1")


def _routed_kernel(kernel, experts: int) -> bool:
    """A routed experts' grouped GEMM: a matmul over E groups (groups fixed in the batch)."""
    return kernel.klass in ("matmul", "fp8_matmul") and bool(kernel.gemm) and \
        tuple(kernel.gemm[3]) == (float(experts), 0.0)


def _expert_op(op: OpInfo) -> bool:
    """An operator of the routed experts' module (transformers' ``mlp.experts``; ``shared_experts``
    is dense)."""
    return "experts" in op.module.split(".")


def _scaled_op(op: OpInfo, experts: int, ep: int, scale: float) -> OpInfo:
    """A routed-experts operator on one of ep ranks: a token tensor laid out (E, rows, ...) becomes
    (E/ep, rows x ep x imbalance, ...), a weight (E, K, N) becomes (E/ep, K, N); what it saves
    follows its tokens (x imbalance)."""
    def shape(s, weight=False):
        if len(s) < 3 or s[0] != experts:
            return s
        return (s[0] // ep, *s[1:]) if weight else (s[0] // ep, s[1] * scale, *s[2:])
    weights = tuple(op.param_inputs) + (False,) * (len(op.input_shapes) - len(op.param_inputs))
    return replace(op, input_shapes=tuple(shape(s, w) for s, w in zip(op.input_shapes, weights)),
                   output_shape=shape(op.output_shape), saved_bytes=op.saved_bytes * scale / ep)


def _local_sorts(layer: Layer, imbalance: float, extraction_batch: int, etp: int) -> list[Kernel]:
    """The alltoall dispatcher's second permutation and its inverse, which a rank holding several
    experts runs on the rows the dispatch brought (Megatron-Core's MoEAlltoAllTokenDispatcher,
    ``sort_chunks_by_idxs`` after the dispatch, "Permutation 2: Sort tokens by local expert", and
    again before the combine; their transposes in the backward): memory-bound copies of the rows,
    each read and written once, R h x dtype bytes each way at R = the routed rows (E c of the
    extraction's grouped GEMMs, per sample) x the imbalance.  The first permutation and the
    unpermutation (tokens to rows and back) are in the extracted layer already (parsim.model.hf's
    index_select and _Combine).  Unsharded, as the layer's kernels are (priced at its share), but
    for one thing: with the experts split over the tp group (etp = tp > 1) the dispatcher gathers
    the group's rows before the sort and scatters them after the unsort (token_dispatcher.py at
    Megatron-LM 3b85d982d5: the gather over the expert-tp group at L525-532 before the sort at L566,
    the unsort at L615 before the reduce-scatter at L622-630), so each rank sorts etp ranks' rows,
    etp x the share the layer's kernels are priced at: the bytes are x etp."""
    gemm = next((op for op in layer.ops if _expert_op(op) and op.kind == "BatchMatMul"), None)
    if gemm is None:
        return []
    e, c, h = gemm.input_shapes[0]
    nbytes = 2.0 * e * c * h * ELEMENT_BYTES.get(gemm.dtype, 4) / extraction_batch * imbalance * etp
    return [Kernel(phase, "moe_sort_chunks", "mem", bytes=(0.0, nbytes)) for phase in ("F", "F", "I", "I")]


def _ep_changes(layer: Layer, ep: int, imbalance: float, extraction_batch: int, tp: int, etp: int,
                parts: dict | None = None) -> dict:
    """The fields of MoE ``layer`` that change on one rank of an ep group (expert_parallel_graph),
    from its content alone: a twin (parsim.model.graph.twin_signature) changes alike.  ``parts``: a
    run's table of the rescaled kernels and operators by what they are made from, each entry
    holding its source (a run's graphs share kernel and operator tuples: DeepSeek-V3's search on
    2,048 H100s makes 336 such layers from 112 kernel tuples and 16 operator tuples)."""
    ex = layer.experts
    e, scale = ex.experts, ep * imbalance        # per-expert tokens: mean x ep (fewer experts) x imbalance
    held = layer.param_count - ex.routed_params // etp + ex.routed_params // (ep * etp)
    stacked = 2 * ex.intermediate * ex.hidden * e * layer.param_bytes / layer.param_count / etp
    share = held / layer.param_count if layer.param_count else 1.0
    # Beside attention's tp the layer's kernels are priced at its share (Layer.tp_share, parsim.cost.
    # kernels): right for the routed GEMMs' FLOPs (a device's s/tp tokens' rows, or an etp = tp split
    # of I) but not for their weights, whole (etp 1) or 1/etp on a device: their bytes are set so that
    # the share gives E/ep experts' / etp; under etp 1 a GEMM's rows are a device's s/tp tokens'.
    w_scale = 1.0 / (ep * etp * layer.tp_share)
    rows = scale / (tp if etp == 1 else 1)
    parts = {} if parts is None else parts
    key = ("kernels", id(layer.kernels), e, ep, imbalance, rows, w_scale, share, layer.tp_share)
    if key not in parts:
        parts[key] = (layer.kernels, *_ep_kernels(layer, e, ep, imbalance, rows, w_scale, share))
    _, kernels, extra = parts[key]
    sorted_bytes = 0.0
    if ep < e:                              # several experts a rank: the local sorts, one tuple per kernels'
        key = ("sorted", key, id(layer.ops), extraction_batch, etp)  # entry, so that layers sharing it share
        if key not in parts:                                        # the result (the cost model prices by id)
            sort = _local_sorts(layer, imbalance, extraction_batch, etp)
            parts[key] = (layer.ops, kernels + tuple(sort), sum(k.bytes[1] for k in sort))
        _, kernels, sorted_bytes = parts[key]
    sorts = sorted_bytes * layer.tp_share * layer.seq_share
    routed_saved = sum(op.saved_bytes for op in layer.ops if _expert_op(op))
    key = ("ops", id(layer.ops), e, ep, scale)
    if key not in parts:
        parts[key] = (layer.ops, tuple(_scaled_op(op, e, ep, scale) if _expert_op(op) else op for op in layer.ops))
    ops = parts[key][1]
    # per sample on this device (ops describe the extraction batch, the whole sequence, tp = 1)
    more_saved = routed_saved / extraction_batch * (imbalance - 1) * layer.seq_share * layer.tp_share
    part = layer.recompute_part
    if part is not None and part.experts is not None:   # a recomputed MoE block (moe mode): one rank's, as the layer's
        key = ("part", id(part.kernels), e, ep, imbalance, rows, w_scale, share, layer.tp_share, id(kernels))
        if key not in parts:
            redone, redone_extra = _ep_kernels(part, e, ep, imbalance, rows, w_scale, share)
            # the local sorts' forward pair, which the layer's kernels list after its own (above)
            redone += tuple(k for k in kernels[len(layer.kernels):] if k.phase == "F")
            parts[key] = (part.kernels, kernels, replace(part, kernels=redone,
                                                         fwd_flops=part.fwd_flops + redone_extra["F"],
                                                         fwd_mem_bytes=part.fwd_mem_bytes + sorts / 2))
        part = parts[key][2]
    return dict(kernels=kernels, ops=ops, recompute_part=part,
                fwd_flops=layer.fwd_flops + extra["F"], bwd_flops=layer.bwd_flops + extra["B"],
                fwd_mem_bytes=layer.fwd_mem_bytes + sorts / 2, bwd_mem_bytes=layer.bwd_mem_bytes + sorts / 2,
                param_count=held, param_bytes=layer.param_bytes * share,
                # the largest parameter: the stacked experts' gate and up (E, 2I, h), E/ep of them here
                max_param_bytes=layer.max_param_bytes / ep if layer.max_param_bytes >= stacked
                else layer.max_param_bytes,
                # a layer that recomputes its dispatch keeps no routed activation; its backward re-creates them
                **({"recompute_bytes": layer.recompute_bytes + more_saved} if layer.recomputes_dispatch
                   else {"saved_bytes": layer.saved_bytes + more_saved}))


def _ep_kernels(layer: Layer, e: int, ep: int, imbalance: float, rows: float, w_scale: float,
                share: float) -> tuple[tuple[Kernel, ...], dict]:
    """_ep_changes's kernels of ``layer``: the routed GEMMs' rows, groups and weights rescaled,
    the others' parameter traffic at the rank's ``share``; and the FLOPs the imbalance adds per
    phase."""
    kernels, extra = [], {"F": 0.0, "B": 0.0}
    for k in layer.kernels:
        if _routed_kernel(k, e):
            (m0, m1), n, (k0, k1), _ = k.gemm
            gemm = ((m0, m1), n, (k0, k1 * rows)) if k.phase == "W" else ((m0, m1 * rows), n, (k0, k1))
            # (Kernel's fields in order: dataclasses.replace costs 3x as much, 13,000 kernels a search)
            kernels.append(Kernel(k.phase, k.op, k.klass, (k.flops[0], k.flops[1] * imbalance),
                                  (k.bytes[0] * w_scale, k.bytes[1] * imbalance), (*gemm, (e / ep, 0.0)), k.conv,
                                  k.head_dim))
            extra["F" if k.phase == "F" else "B"] += k.flops[1] * (imbalance - 1) * layer.tp_share
        elif k.bytes[0]:                   # batch-independent traffic: parameter-sized, the rank's share
            kernels.append(Kernel(k.phase, k.op, k.klass, k.flops, (k.bytes[0] * share, k.bytes[1]), k.gemm, k.conv,
                                  k.head_dim))
        else:
            kernels.append(k)
    return tuple(kernels), extra


def expert_parallel_graph(graph: LayerGraph, ep: int, imbalance: float, parts: dict | None = None) -> LayerGraph:
    """The per-device graph of one rank of an ep group, its MoE layers as the busiest rank runs
    them (module docstring), beside attention's tp with the experts split over ``graph.etp``
    (fold_experts); the graph itself at ep = 1.  ``parts``: the run's table of rescaled kernels and
    operators (_ep_changes)."""
    if ep == 1:
        return graph
    if graph.ep != 1:
        raise ValueError("expert_parallel_graph takes a graph without expert parallelism")
    check_ep(graph, ep, graph.etp)
    changes: dict[tuple, dict] = {}         # by twin_signature: DeepSeek-V3's 58 MoE layers, one layer's work
    layers = []
    for layer in graph.layers:
        if layer.experts is not None:
            sig = twin_signature(layer)
            if sig not in changes:
                changes[sig] = _ep_changes(layer, ep, imbalance, graph.extraction_batch, graph.tp, graph.etp,
                                           parts)
            layer = replace(layer, **changes[sig])
        layers.append(layer)
    return replace(graph, layers=_shared(tuple(layers)), ep=ep, moe_imbalance=imbalance)


def _shared(layers: tuple) -> tuple:
    """``layers`` with the kernel, tp-step and operator tuples of identical layers shared (the
    first one's), as extraction shares them: the cost model memoizes a layer's time by their
    identity (parsim.cost.compute, parsim.cost.layer, parsim.sim.prices' classes), and DeepSeek-V3's
    58 MoE layers are one layer's prices, not 58."""
    by_value: dict = {}
    by_id: dict[int, tuple] = {}            # a tuple seen before: its first equal (hashing one is deep)

    def first(field: str, t: tuple) -> tuple:
        hit = by_id.get(id(t))
        if hit is None:
            hit = by_id[id(t)] = by_value.setdefault((field, t), t)
        return hit
    out = []
    for layer in layers:
        k, t, o = first("kernels", layer.kernels), first("tp_comm", layer.tp_comm), first("ops", layer.ops)
        same = k is layer.kernels and t is layer.tp_comm and o is layer.ops
        out.append(layer if same else replace(layer, kernels=k, tp_comm=t, ops=o))
    return tuple(out)


def _expert_weight_bytes(layer: Layer) -> set[float]:
    """The bytes of each routed-experts operator's weight, whole: what a mirror step of its
    gradient reduces (parsim.shard.graph.mirror_steps)."""
    return {float(math.prod(op.input_shapes[j]) * ELEMENT_BYTES.get(op.dtype, 4))
            for op in layer.ops if _expert_op(op)
            for j, p in enumerate(op.param_inputs) if p}


def fold_experts(graph: LayerGraph, etp: int) -> LayerGraph:
    """A tp-sharded mixture of experts (parsim.shard.builtin.moe) folded as MoE Parallel Folding
    folds it (Liu et al. 2025, arXiv 2504.14960): with the routed experts whole on each device of
    attention's tp group (``etp`` 1), each device's experts compute its own s/tp tokens' rows, and
    their weights' gradients, partial sums over the group in the operator view, are not summed over
    it as a dense weight's mirror is: they go, with the other ranks' holding the same experts, over
    the expert-data-parallel group of tp x cp x dp / (ep x etp) ranks (parsim.plan.ParallelConfig.
    expert_dp_group; parsim.sim.simulate prices it).  Those mirror steps are dropped here; under
    etp = tp the experts are split as a dense SwiGLU and have none.  The graph records ``etp``."""
    if etp == 1 and graph.tp > 1:
        layers = []
        for layer in graph.layers:
            if layer.experts is None:
                layers.append(layer)
                continue
            mirrors = _expert_weight_bytes(layer)
            kept = tuple(x for x in layer.tp_comm if not (x[0] == "grad" and x[1].bytes_per_device in mirrors))
            layers.append(replace(layer, tp_comm=kept))
        graph = replace(graph, layers=_shared(tuple(layers)))
    return replace(graph, etp=etp)


def expert_param_count(layer: Layer, graph: LayerGraph) -> int:
    """Routed expert parameters one rank of ``graph`` (a per-device graph) holds of ``layer`` whose
    gradients go over the expert-data-parallel group rather than with the dense ones: E/ep experts
    split over etp, where the experts are apart (ep > 1, or etp differing from attention's tp:
    parsim.plan.ParallelConfig.experts_apart); 0 for a dense layer and where they are not."""
    if layer.experts is None or (graph.ep == 1 and graph.etp == graph.tp):
        return 0
    return layer.experts.routed_params // (graph.ep * graph.etp)


# The SMs an all-to-all's kernels take while it runs beside compute: DeepSeek-V3 (DeepSeek-AI 2024,
# Sec. 3.2.2) dedicates 20 of an H800's 132 SMs to its dispatch and combine kernels, "sufficient to
# fully utilize the bandwidths of IB and NVLink".
A2A_OVERLAP_COMM_UNITS = 20


def a2a_overlap_cost(cluster) -> float:
    """Compute seconds added per all-to-all second hidden under compute (ParallelConfig.ep_overlap):
    the compute runs on U - u of the device's U units while the all-to-all's kernels hold u
    (A2A_OVERLAP_COMM_UNITS), u / (U - u); InfeasibleError where the device's units are unknown."""
    kernels = cluster.device.kernels
    units = kernels.compute_units if kernels is not None else 0
    if units <= A2A_OVERLAP_COMM_UNITS:
        raise InfeasibleError(f"ep_overlap on {cluster.profile.name}: the device's kernels.compute_units "
                              f"({units or 'not given'}) must exceed the all-to-all's {A2A_OVERLAP_COMM_UNITS} in "
                              f"{cluster.profile.source}; add them or drop --ep-overlap")
    return A2A_OVERLAP_COMM_UNITS / (units - A2A_OVERLAP_COMM_UNITS)


def local_tokens(layer: Layer, dtype: str, microbatch: int) -> float:
    """T_local: the tokens of a micro-batch one rank holds at ``layer`` (its output, or the stream
    it routes where that is not its output (Layer.routed_bytes), is T_local x h in the graph's
    dtype: s/cp tokens per sample under context parallelism)."""
    return microbatch * (layer.routed_bytes or layer.output_bytes) / (layer.experts.hidden * DTYPE_BYTES[dtype])


def a2a_calls(layer: Layer, kind: str) -> int:
    """All-to-alls of a MoE layer's ``kind`` per micro-batch: dispatch and combine forward, their
    transposes in the backward (B, or I under a split backward), and the forward's again in the
    backward of a layer that recomputes its dispatch (Layer.recomputes_dispatch: full, or moe)."""
    if layer.experts is None or kind == "W":
        return 0
    return 2 if kind == "F" else 2 + (2 if layer.recomputes_dispatch else 0)


def a2a_bytes(layer: Layer, kind: str, microbatch: int, dtype: str) -> float:
    """Bytes one rank's all-to-alls of ``layer``'s ``kind`` scatter per micro-batch (each the
    parsim.model.moe.Experts.all_to_all_bytes buffer, its own share included)."""
    if not a2a_calls(layer, kind):
        return 0.0
    return a2a_calls(layer, kind) * layer.experts.all_to_all_bytes(local_tokens(layer, dtype, microbatch),
                                                                   DTYPE_BYTES[dtype])


# A dropless dispatcher learns how many rows it will receive before the dispatch: each rank's
# tokens per expert, E counts, exchanged over the ep group once per forward (Megatron-Core's
# MoEAlltoAllTokenDispatcher.preprocess gathers num_local_tokens_per_expert over the ep group and
# synchronises the host on it; parsim.exec.expert_parallel.Exchanges.counts, an all_to_all_single
# of torch.bincount's int64 counts).  The backward reuses the forward's split sizes.
SPLIT_COUNT_BYTES = 8


def split_exchanges(layer: Layer, kind: str) -> int:
    """Split-size exchanges of a MoE layer's ``kind`` per micro-batch: one per forward it runs
    (F, and the backward again where it recomputes its dispatch)."""
    if layer.experts is None or kind == "W":
        return 0
    return 1 if kind == "F" or layer.recomputes_dispatch else 0


def off_node_share(experts, cluster, ranks, dispatcher: str, nodes: int | None = None) -> float | None:
    """The share of a dispatch's buffer that leaves a node under the ``flex`` dispatcher, which
    sends a token once per remote node its experts lie on (parsim.model.moe.Experts.
    remote_nodes_per_token over k; group-limited routing bounds those nodes); None under
    ``alltoall`` (every row its own message: parsim.cost.comm.all_to_all_time_s) or inside a
    node.  ``nodes``: the nodes ``ranks`` span, where the caller knows them."""
    nodes = nodes or len({cluster.node_of(r) for r in ranks})
    if dispatcher != "flex" or nodes == 1:
        return None
    return experts.remote_nodes_per_token(nodes) / experts.top_k


def a2a_time_s(layer: Layer, kind: str, microbatch: int, dtype: str, cluster, ranks, imbalance: float,
               dispatcher: str = "alltoall", geometry: tuple | None = None) -> float:
    """Time of ``layer``'s all-to-alls in ``kind`` for one micro-batch over the ep group ``ranks``
    (module docstring), exposed: the token all-to-alls at the imbalance, by ``dispatcher``
    (``off_node_share``), and the split-size exchanges before each forward's dispatch
    (latency-bound: E counts per rank).  ``geometry``: parsim.cost.comm.a2a_geometry of the
    group, where the caller keeps it."""
    calls = a2a_calls(layer, kind)
    if not calls or len(ranks) <= 1:
        return 0.0
    ranks = list(ranks)
    geometry = geometry or a2a_geometry(cluster, ranks)
    nbytes = layer.experts.all_to_all_bytes(local_tokens(layer, dtype, microbatch), DTYPE_BYTES[dtype])
    counts = all_to_all_time_s(cluster, ranks, layer.experts.experts * SPLIT_COUNT_BYTES, geometry=geometry)
    share = off_node_share(layer.experts, cluster, ranks, dispatcher, len(geometry[0]))
    return calls * all_to_all_time_s(cluster, ranks, nbytes, imbalance, share, geometry) + \
        split_exchanges(layer, kind) * counts
