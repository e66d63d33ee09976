"""One operator's sharding and the redistribution between two operators' layouts: a strategy in
the seeds' notation applied to an operator (op_sharding), an operator without one following its
input (follow), and the steps between a producer's output layout and a consumer's input
(edge_steps), which parsim.shard.graph charges to a layer and parsim.shard.auto prices.

Edges.  Where producer and consumer see the tensor in the same shape on the same device
matrix, or through views alone ([b, s, h] -> [b*s, h], ``reshape_layout``), the redistribution
is exact (``redistribute.edge``).  Where a copy between them reorders the tensor (GPT's heads:
[b*s, 3h] -> [b*a, s, d] through a transpose made contiguous), the two are compared by how many
pieces they cut the tensor into ("ways"): equal ways is a local reshape, fewer ways in the
consumer an AllGather of the ratio, more a local split, and partial sums are completed first,
as a ReduceScatter when the consumer splits by the partial group, else an AllReduce.  This is
the seeds' "reshape" redistribution, priced without tracking which dimension moved.
"""

from __future__ import annotations

import math

from parsim.model.graph import OpInfo
from parsim.shard import strategy as st
from parsim.shard.layout import Layout
from parsim.shard.redistribute import Step, edge

Strategy = st.Strategy
CONTRACTIONS = ("MatMul", "BatchMatMul", "Conv2d")
COMPUTE = CONTRACTIONS + ("Attention",)       # operators priced by FLOPs (OpInfo.flops), not bytes
PRIMARY = COMPUTE + ("Embedding", "LayerNorm", "BatchNorm", "Softmax")
# dimensions an operator reduces over, which no strategy splits.  BatchNorm's statistics are over
# N, H and W: a batch split would need them all-reduced (MindSpore's BatchNorm does, 2 x C floats
# forward and back), which parsim neither prices nor runs, so the batch stays whole (strategy.batch_norm)
REDUCED_DIMS = {"Softmax": lambda n: (n - 1,), "LayerNorm": lambda n: (n - 1,), "BatchNorm": lambda n: (0, 2, 3)}


# ----------------------------------------------------------------------------- operators


def op_sharding(op: OpInfo, strategy: Strategy, devices: int) -> st.OpSharding:
    """The sharding of ``op`` under ``strategy`` (split counts per input) on ``devices``."""
    k = op.kind
    if k == "MatMul":
        return st.matmul(*op.input_shapes, strategy, devices, w_is_param=op.param_inputs[1])
    if k == "BatchMatMul":
        return st.batch_matmul(*op.input_shapes, strategy, devices, w_is_param=op.param_inputs[1])
    if k == "Conv2d":
        return st.conv2d(*op.input_shapes, op.output_shape, strategy, devices)
    if k == "Attention":
        return st.attention(*op.input_shapes, strategy, devices)
    if k == "Embedding":
        return st.embedding(op.input_shapes[0], strategy, devices, op.output_shape)
    if k == "Softmax":
        return st.softmax(op.input_shapes[0], strategy[:1], devices)
    if k == "LayerNorm":
        return st.layer_norm(op.input_shapes[0], strategy[:1], devices)
    if k == "BatchNorm":
        return st.batch_norm(op.input_shapes[0], strategy[:1], devices)
    sh = st.elementwise(op.output_shape, strategy[:1], devices, op=f"{op.name} (ElementWise)")
    return _broadcast_inputs(op, sh.output)


def _broadcast_inputs(op: OpInfo, out: Layout) -> st.OpSharding:
    """An element-wise op's inputs take the output's layout; an input of another shape (a
    broadcast: a norm's per-row statistics [b, s, 1], its weight [h], a bias, a positional table)
    takes it on the dimensions it shares with the output (numpy's rule: aligned from the right, of
    the same size) and is whole on those it is broadcast over.  A parameter's gradient sums over
    the dimensions it is broadcast over, so where the output is split along one, it is a partial
    sum over that split (a mirror, summed over the group once a step): Megatron's norm weights
    under sequence parallelism, whose gradients it all-reduces over the tensor-parallel group
    (Megatron-Core, distributed/finalize_model_grads.py: _allreduce_layernorm_grads).  A
    broadcast activation's gradient is taken whole, so that no step is charged for it backward:
    the operator view does not record which activations carry one (a rotary table, a position
    table or a mask does not)."""
    params = op.param_inputs or (False,) * len(op.input_shapes)
    ins, grads = [], []
    for shape, is_param in zip(op.input_shapes, params):
        lay, summed = broadcast_layout(out, shape)
        ins.append(lay)
        grads.append(lay if lay is out else Layout(lay.device_matrix, lay.tensor_map, lay.shape, summed) if is_param
                     else replicated(out.device_matrix, shape))
    return st.OpSharding("ElementWise", out.device_matrix, tuple(ins), out, tuple(grads), tuple(params))


def broadcast_layout(out: Layout, shape) -> tuple[Layout, frozenset]:
    """(the layout of an input of ``shape`` broadcast to ``out``'s shape, the device dimensions of
    ``out`` it is broadcast over, which its gradient sums over); replicated where ``shape`` does
    not broadcast to the output's."""
    shape, offset = tuple(shape), len(out.shape) - len(shape)
    if shape == tuple(out.shape):
        return out, frozenset()
    if offset < 0 or any(n not in (1, out.shape[i + offset]) for i, n in enumerate(shape)):
        return replicated(out.device_matrix, shape), frozenset()
    tmap = tuple(out.tensor_map[i + offset] if n == out.shape[i + offset] else -1 for i, n in enumerate(shape))
    summed = frozenset(d for i, d in enumerate(out.tensor_map) if d != -1 and (i < offset or tmap[i - offset] == -1))
    return Layout(out.device_matrix, tmap, shape), summed


def replicated(device_matrix, shape) -> Layout:
    return Layout(tuple(device_matrix), (-1,) * len(shape), tuple(shape))


def settled(layout: Layout) -> Layout:
    return Layout(layout.device_matrix, layout.tensor_map, layout.shape)


def ways(layout: Layout) -> int:
    """How many distinct pieces the layout cuts the tensor into."""
    return math.prod(layout.device_dim_size(d) for d in layout.tensor_map if d != -1)


def partial_size(layout: Layout) -> int:
    return math.prod(layout.device_dim_size(d) for d in layout.partial)


def op_pieces(sh: st.OpSharding) -> int:
    """Distinct pieces of the op's iteration space: the product of the device dimensions any of
    its tensors is split or summed over (the rest of the device matrix repeats the work); tensors
    on another device matrix (fused attention's replicated KV heads) follow the output's."""
    dims = set()
    for lay in (*sh.inputs, sh.output):
        if lay.device_matrix == sh.output.device_matrix:
            dims |= {d for d in lay.tensor_map if d != -1} | set(lay.partial)
    return math.prod(sh.output.device_dim_size(d) for d in dims)


def reshape_layout(layout: Layout, shape: tuple[int, ...]) -> Layout | None:
    """``layout`` carried through a view to ``shape`` (same element count): each split dimension
    moves to the first dimension of its reshape group that the split divides; None if one
    cannot be placed."""
    if tuple(shape) == tuple(layout.shape):
        return layout
    groups, i, j = [], 0, 0
    while i < len(layout.shape) or j < len(shape):
        gi, gj, pi, pj = [i], [j], layout.shape[i] if i < len(layout.shape) else 1, shape[j] if j < len(shape) else 1
        i, j = i + 1, j + 1
        while pi != pj:
            if pi < pj and i < len(layout.shape):
                pi *= layout.shape[i]
                gi.append(i)
                i += 1
            elif j < len(shape):
                pj *= shape[j]
                gj.append(j)
                j += 1
            else:
                return None
        groups.append((gi, [x for x in gj if x < len(shape)]))
    tmap = [-1] * len(shape)
    for gi, gj in groups:
        for src in gi:
            d = layout.tensor_map[src] if src < len(layout.shape) else -1
            if d == -1:
                continue
            n = layout.device_dim_size(d)
            dst = next((x for x in gj if tmap[x] == -1 and shape[x] % n == 0), None)
            if dst is None:
                return None
            tmap[dst] = d
    return Layout(layout.device_matrix, tuple(tmap), tuple(shape), layout.partial)


def follow(op: OpInfo, source: Layout, devices: int) -> st.OpSharding:
    """The sharding of an op without a strategy (module docstring)."""
    if op.kind in PRIMARY and op.kind not in REDUCED_DIMS:
        return op_sharding(op, tuple((1,) * len(s) for s in op.input_shapes), devices)
    lay = reshape_layout(settled(source), op.input_shapes[0])
    if lay is None:
        lay = replicated(source.device_matrix, op.input_shapes[0])
    reduced = REDUCED_DIMS.get(op.kind, lambda n: ())(len(lay.shape))
    if any(lay.tensor_map[i] != -1 for i in reduced):
        tmap = tuple(-1 if i in reduced else d for i, d in enumerate(lay.tensor_map))
        lay = Layout(lay.device_matrix, tmap, lay.shape)
    if op.kind == "ElementWise":
        return _broadcast_inputs(op, lay if tuple(lay.shape) == tuple(op.output_shape)
                                 else replicated(lay.device_matrix, op.output_shape))
    return {"Softmax": st.softmax_on, "LayerNorm": st.layer_norm_on, "BatchNorm": st.batch_norm_on}[op.kind](lay)


# ----------------------------------------------------------------------------- edges


def _by_ways(src: Layout, dst: Layout, elem_bytes: int) -> list[Step]:
    """Redistribution between layouts of different shapes or device matrices (module docstring).
    Group ranks are taken as consecutive devices (device dimension 0)."""
    steps, pieces = [], ways(src)
    local = src.local_elements() * elem_bytes
    p, want = partial_size(src), ways(dst)
    if p > 1 and not dst.partial:
        if want == pieces * p:
            steps.append(Step("ReduceScatter", 0, p, local))
            local, pieces = local / p, want
        else:
            steps.append(Step("AllReduce", 0, p, local))
    if want < pieces:
        g = pieces // want
        steps.append(Step("AllGather", 0, g, local * g))
    elif want > pieces:
        steps.append(Step("Split", 0, want // pieces, local))
    return steps


def edge_steps(src: Layout, dst: Layout, dst_grad: Layout, elem_bytes: int, through_copy: bool = False,
               memo: dict | None = None) -> tuple[list[Step], list[Step], tuple[int, ...] | None]:
    """(forward steps, backward steps, the device matrix their device dimensions count in, or
    None for consecutive groups) from a producer's output layout to a consumer's input.  A pure
    view between them ([b, s, h] -> [b*s, h]) carries the layout over (``reshape_layout``); a copy
    (a transpose made contiguous) is compared by ways (module docstring).  ``memo``: a run's
    (parsim.shard.auto.StrategySearches.edges; layouts are values, and the auto layout's cost
    graphs ask for the same pairs at every micro-batch size), which keeps each pair's steps and
    each signature's (_edge_by_signature): the lists are shared, read them only."""
    if memo is not None:
        key = (src, dst, dst_grad, elem_bytes, through_copy)
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = _edge_steps(src, dst, dst_grad, elem_bytes, through_copy, memo)
        return hit
    return _edge_steps(src, dst, dst_grad, elem_bytes, through_copy, None)


def _edge_steps(src, dst, dst_grad, elem_bytes, through_copy, memo):
    """edge_steps' work (``memo`` for the signatures, or None)."""
    matrix = src.normalized().device_matrix
    if reduced_from(dst.shape, src.shape):
        # the consumer reads the producer's tensor through operators the view does not record that
        # reduce it (an eager RMSNorm's copy to fp32, pow and mean: [b, s, h] -> [b, s, 1]): the
        # tensor itself is laid out as the consumer's layout says on the dimensions kept, whole on
        # those reduced, and what it needs is the tensor's redistribution, charged once with its
        # other readers' (the first block's completion of a vocabulary-parallel embedding)
        dst, dst_grad, through_copy = expanded(dst, src.shape), expanded(dst_grad, src.shape), False
    if tuple(src.shape) != tuple(dst.shape) and not through_copy:
        moved = reshape_layout(src, dst.shape)
        src = moved if moved is not None else src
    if tuple(src.shape) == tuple(dst.shape) and \
            matrix == dst.normalized().device_matrix == dst_grad.normalized().device_matrix:
        if len(matrix) == 1 and memo is not None:
            fwd, bwd = _edge_by_signature(src, dst, dst_grad, elem_bytes, memo)
        else:
            fwd, bwd = edge(src, dst, dst_grad, elem_bytes)
        return fwd, bwd, matrix
    return _by_ways(src, dst, elem_bytes), _by_ways(dst_grad, settled(src), elem_bytes), None


def reduced_from(shape, source) -> bool:
    """Whether ``shape`` is ``source`` reduced over some dimensions kept as 1 (numpy's broadcasting
    in reverse, at the same rank: each dimension the source's or 1), with fewer elements."""
    shape, source = tuple(shape), tuple(source)
    return len(shape) == len(source) and math.prod(shape) < math.prod(source) and \
        all(n in (1, m) for n, m in zip(shape, source))


def expanded(lay: Layout, shape) -> Layout:
    """``lay`` of a reduced tensor (``reduced_from``) as the layout of the tensor it was reduced
    from, of ``shape``: its splits and partial sums kept, the reduced dimensions whole."""
    return Layout(lay.device_matrix, tuple(d if n == m else -1 for d, n, m in zip(lay.tensor_map, lay.shape, shape)),
                  tuple(shape), lay.partial)


def _edge_by_signature(src: Layout, dst: Layout, dst_grad: Layout, elem_bytes: int,
                       memo: dict) -> tuple[list[Step], list[Step]]:
    """edge() on one device dimension, where the steps depend on the tensor's shape only through
    their bytes: worked out once per (device matrices, tensor maps, partials, element bytes) and
    scaled by the tensor's elements for every other shape (the auto layout's first cost graph
    meets some 700 layout pairs on ResNet-50 and far fewer signatures), kept in ``memo``.
    Exact: each step's bytes are the elements over the layout's ways (dividing, or the layouts
    would not exist) times the element bytes and the step's group, whole numbers in the same
    proportion to the elements."""
    key = ("signature",) + tuple((x.device_matrix, x.tensor_map, x.partial) for x in (src, dst, dst_grad)) \
        + (elem_bytes,)
    elements = math.prod(src.shape)
    hit = memo.get(key)
    if hit is None:
        fwd, bwd = edge(src, dst, dst_grad, elem_bytes)
        memo[key] = (elements, fwd, bwd)
        return fwd, bwd
    base, fwd, bwd = hit
    fwd, bwd = ([Step(x.kind, x.device_dim, x.group_size, x.bytes_per_device * elements // base, x.from_dim, x.to_dim)
                 for x in steps] for steps in (fwd, bwd))
    return fwd, bwd
