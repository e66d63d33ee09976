"""Per-operator strategies applied to a LayerGraph: MindSpore's SEMI_AUTO_PARALLEL on parsim's
layers.  The result is a LayerGraph of what one device of a tensor-parallel group holds and
does, which the cost model, the simulator and the planner use unchanged, plus each layer's
redistribution steps (``Layer.tp_comm``) that the simulator prices on the cluster.

Strategies are chosen by pattern (``fnmatch``) over operator ids ``<layer>/<module>:<aten>[#k]``
(``Layer.ops``' names), e.g. ``layers.*/fc1:addmm``; a pattern without ``:`` names a module and
picks its contraction or normalization operators (``layers.*/fc1``), and a layer's name picks
the layer's contractions (``fc``: ResNet's classifier); a pattern starting with
``?`` is optional: it may name nothing, and where its strategy does not divide the operator, the
operator follows the default rule (a built-in layout's vocabulary split of an unpadded
vocabulary, for one).  Strategies are in the
seeds' notation, split counts per input; for a Linear, the inputs are X [m, k] and W^T [k, n]
(MindSpore's MatMul), so Megatron's column split is ``[[1, 1], [1, t]]`` and its row split
``[[1, t], [t, 1]]``.

Operators without a strategy follow their first input where they can (element-wise ops,
normalizations, softmax: the producer's layout, with partial sums completed first and reduced
dimensions gathered), and otherwise run replicated on every device of the group (contractions,
embeddings), which is MindSpore's behaviour for operators it cannot shard.

Edges: parsim.shard.ops (edge_steps).

Per device, a sharded layer has:
- FLOPs: each contraction's FLOPs over its pieces (``OpInfo.flops``), the unrecorded rest whole;
  memory-bound bytes over the pieces of the recorded non-contraction ops, weighted by size;
- saved bytes: each op's saved output over the pieces of that op's output layout (Megatron keeps
  activations in their producer's layout, Korthikanti et al. 2022 Sec. 4.2), the layer's input
  over the pieces of the previous layer's output;
- parameters: each owned parameter over the pieces of its layout; parameters no recorded op
  reads (biases, norm weights) whole;
- the boundary activation over the pieces of the layer's output layout.
"""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass, replace
from typing import Iterable, Mapping

from parsim.errors import InfeasibleError
from parsim.model.graph import ELEMENT_BYTES, FROM_ELSEWHERE, FROM_LAYER_INPUT, Layer, LayerGraph, OpInfo
from parsim.model.split_backward import weight_output_bytes
from parsim.shard import strategy as st
from parsim.shard.layout import Layout
from parsim.shard.ops import (COMPUTE, CONTRACTIONS, PRIMARY, Strategy, edge_steps, follow, op_pieces, op_sharding,
                              partial_size, replicated, ways)
from parsim.shard.redistribute import Step

# ----------------------------------------------------------------------------- layers


@dataclass(frozen=True)
class LayerSharding:
    shardings: tuple[st.OpSharding, ...]
    output: Layout                       # the layout of the layer's output, as the next layer sees it
    layer: Layer                         # the per-device layer with its tp_comm


def elem_bytes(op: OpInfo) -> int:
    return ELEMENT_BYTES.get(op.dtype, 4)


def shard_layer(layer: Layer, strategies: Mapping[int, tuple[Strategy, bool]], devices: int, batch: int,
                in_layout: Layout | None, input_grad: bool = True, memo: dict | None = None,
                edges: dict | None = None, in_elem_bytes: int | None = None) -> LayerSharding:
    """Apply ``strategies`` (op index -> (strategy, optional)) to ``layer``'s ops on ``devices``;
    shapes in ``layer.ops`` hold ``batch`` samples; ``in_layout`` is the previous layer's output;
    ``input_grad``: whether the layer's input carries a gradient back (else no backward step
    leaves the layer through its input).  ``memo``: one graph's layers that share their operators
    (a GPT's identical blocks) share the operators' shardings and steps, worked out once (the
    caller keeps the layers alive).  ``edges``: edge_steps' memo, where a run keeps one.
    ``in_elem_bytes``: the element size of the layer's input (the previous layer's output), which
    its redistributions move; None: each reader's own."""
    ops = layer.ops
    if not ops:
        raise InfeasibleError(f"{layer.name}: has no operator view to shard; extract the model from torch")
    key = (id(ops), tuple(sorted(strategies.items())), devices, in_layout, input_grad, batch,
           layer.param_count, in_elem_bytes)
    if memo is not None and key in memo:
        shardings, tp_comm, out_layout, shares = memo[key]
    else:
        shardings, comm, out_layout = _shard_ops(layer, strategies, devices, in_layout, input_grad, edges,
                                                 in_elem_bytes)
        tp_comm = _tp_comm(comm, batch)
        shares = _op_shares(ops, shardings, layer.param_count)
        if memo is not None:     # one tp_comm object for identical layers
            memo[key] = (shardings, tp_comm, out_layout, shares)
    return LayerSharding(shardings, out_layout, _per_device_layer(layer, shares, tp_comm, batch, in_layout,
                                                                  out_layout))


def _tp_comm(comm: list[tuple], batch: int) -> tuple:
    """A layer's (phase, step, device matrix) as Layer.tp_comm holds them: per sample, except
    gradient mirrors, which are per step."""
    return tuple((ph, replace(step, bytes_per_device=step.bytes_per_device / (1 if ph == "grad" else batch)),
                  dm if dm is not None else (step.group_size,))
                 for ph, step, dm in comm)


def _shard_ops(layer: Layer, strategies, devices: int, in_layout: Layout | None,
               input_grad: bool, edges: dict | None = None,
               in_elem_bytes: int | None = None) -> tuple[tuple, list, Layout]:
    """(each op's sharding, the layer's redistribution steps, its output layout).  A
    redistribution moves its producer's output, in the producer's element size (``elem_bytes`` of the producer)."""
    ops = layer.ops
    shardings: list[st.OpSharding] = []
    comm: list[tuple] = []
    charged: set[tuple] = set()          # (source, phase, step, device matrix) already in comm

    def out_of(src: int, shape) -> Layout:
        if src == FROM_LAYER_INPUT:
            return in_layout if in_layout is not None else replicated((devices,), shape)
        return shardings[src].output

    for i, op in enumerate(ops):
        srcs = [(j, s) for j, s in enumerate(op.inputs_from) if s != FROM_ELSEWHERE]
        try:
            sh = None
            if i in strategies:
                strategy, optional = strategies[i]
                try:
                    sh = op_sharding(op, strategy, devices)
                except InfeasibleError:
                    if not optional:
                        raise
            if sh is None:
                first = srcs[0] if srcs else None
                source = (out_of(first[1], op.input_shapes[first[0]]) if first
                          else replicated((devices,), op.input_shapes[0]))
                sh = follow(op, source, devices)
        except InfeasibleError as e:
            raise InfeasibleError(f"{layer.name}/{op.name}: {e}") from None
        shardings.append(sh)
        eb = elem_bytes(op)
        for j, s in srcs:
            if j >= len(sh.inputs):
                continue
            moved = elem_bytes(ops[s]) if s >= 0 else in_elem_bytes or eb
            fwd, bwd, matrix = edge_steps(out_of(s, op.input_shapes[j]), sh.inputs[j], sh.input_grads[j], moved,
                                          op.input_copied(j), edges)
            # One tensor read by several consumers is redistributed once for all that need the same
            # step (a partial sum completed once), and their gradients are summed locally and reduced
            # once: Megatron's fused QKV and gate/up projections take one backward all-reduce.
            if s == FROM_LAYER_INPUT and not input_grad:
                bwd = []
            for ph, steps in (("F", fwd), ("B", bwd)):
                for x in steps:
                    if x.communicates and (s, ph, x, matrix) not in charged:
                        charged.add((s, ph, x, matrix))
                        comm.append((ph, x, matrix))
        comm += [("grad", step, matrix) for step, matrix in mirror_steps(sh, eb)]
    out_layout = out_of(layer.ops_output, ops[-1].output_shape) if layer.ops_output != FROM_ELSEWHERE \
        else replicated((devices,), ops[-1].output_shape)
    return tuple(shardings), comm, out_layout


def mirror_steps(sh: st.OpSharding, elem_bytes: int) -> list[tuple[Step, tuple[int, ...]]]:
    """(step, device matrix) of the reductions of the op's parameters' partial gradients: one
    AllReduce per partial device dimension, once per step."""
    return [(Step("AllReduce", d, g.device_dim_size(d), math.prod(g.local_shape()) * elem_bytes), g.device_matrix)
            for _, g in sh.mirrors for d in sorted(g.partial)]


@dataclass(frozen=True)
class _OpShares:
    """What a layer's per-device numbers take from its operators' shardings alone: the same for
    identical layers, which share their operators (shard_layer's memo keeps it with them)."""
    split_flops: float              # the operators' FLOPs, each over its pieces
    op_flops: float                 # the operators' FLOPs
    m_ratio: float                  # the memory-bound operators' output elements on one device, as a share
    saved_bytes: float              # the operators' saved bytes on one device (extraction batch)
    owned_count: int                # the parameters the operators take (with addmm's bias)
    per_device: tuple[int, ...]     # each of those on one device
    tied_share: float               # a tied weight's share on one device
    w_held_bytes: float             # weight_output_bytes on one device (extraction batch)


def _op_shares(ops, shardings, param_count: int) -> _OpShares:
    """``param_count``: the layer's, which bounds the BatchNorm parameters it can hold."""
    pieces = [op_pieces(sh) for sh in shardings]
    mem = [(op.output_elements, n) for op, n in zip(ops, pieces) if op.kind not in COMPUTE]
    m_ratio = sum(w / n for w, n in mem) / sum(w for w, _ in mem) if mem else 1.0
    owned = [(op.input_shapes[j], sh.inputs[j]) for op, sh in zip(ops, shardings)
             for j, p in enumerate(op.param_inputs) if p and j < len(sh.inputs)]
    owned_count = sum(math.prod(s) for s, _ in owned)
    per_device = [math.prod(s) // ways(lay) for s, lay in owned]
    # A linear's bias is addmm's first operand, which the operator view leaves out; it is added to
    # the output, so it is split as the output's last dimension is (column-parallel) and whole
    # otherwise (a row-parallel output is summed first, then biased).
    for op, sh in zip(ops, shardings):
        if op.aten == "addmm" and any(op.param_inputs):
            n, d = op.output_shape[-1], sh.output.tensor_map[-1]
            owned_count += n
            per_device.append(n // (sh.output.device_dim_size(d) if d != -1 else 1))
        # BatchNorm's affine weight and bias [C], which the operator view leaves out too, split as
        # its channels (strategy.batch_norm_on's parameter layout), as the executor holds them
        if op.kind == "BatchNorm" and len(sh.inputs) > len(op.input_shapes) and sh.is_param[-1] \
                and param_count - owned_count >= 2 * sh.inputs[-1].shape[0]:
            n = 2 * sh.inputs[-1].shape[0]
            owned_count += n
            per_device.append(n // ways(sh.inputs[-1]))
    # A tied weight is split as the op using it here splits it (the GPT's head: the vocabulary-
    # parallel embedding weight), so its copy on another stage shrinks by the same share.
    tied_whole = [math.prod(op.input_shapes[j]) for op in ops for j, t in enumerate(op.tied_inputs) if t]
    tied_local = [math.prod(op.input_shapes[j]) // ways(sh.inputs[j])
                  for op, sh in zip(ops, shardings) for j, t in enumerate(op.tied_inputs) if t]
    return _OpShares(split_flops=sum(op.flops / n for op, n in zip(ops, pieces)),
                     op_flops=sum(op.flops for op in ops), m_ratio=m_ratio,
                     saved_bytes=sum(op.saved_bytes / ways(sh.output) for op, sh in zip(ops, shardings)),
                     owned_count=owned_count, per_device=tuple(per_device),
                     tied_share=sum(tied_local) / sum(tied_whole) if tied_whole else 1.0,
                     w_held_bytes=weight_output_bytes(ops, lambda k: ways(shardings[k].output)))


def _per_device_layer(layer: Layer, shares: _OpShares, tp_comm: tuple, batch: int, in_layout, out_layout) -> Layer:
    s = shares
    total_f = layer.fwd_flops * batch
    f_ratio = (s.split_flops + max(total_f - s.op_flops, 0.0)) / total_f if total_f else 1.0
    in_ways = ways(in_layout) if in_layout is not None else 1
    saved = s.saved_bytes + layer.input_saved_bytes * batch / in_ways
    rest = max(layer.param_count - s.owned_count, 0)
    count = sum(s.per_device) + rest
    tied = tuple((owner, round(n * s.tied_share)) for owner, n in layer.tied)
    width = layer.param_bytes / layer.param_count if layer.param_count else 0
    return replace(layer, fwd_flops=layer.fwd_flops * f_ratio, bwd_flops=layer.bwd_flops * f_ratio,
                   fwd_mem_bytes=layer.fwd_mem_bytes * s.m_ratio, bwd_mem_bytes=layer.bwd_mem_bytes * s.m_ratio,
                   saved_bytes=saved / batch, param_count=count, param_bytes=int(count * width),
                   max_param_bytes=(int(max(s.per_device, default=0) * width) if s.per_device
                                    else layer.max_param_bytes),
                   output_bytes=layer.output_bytes / ways(out_layout), tp_comm=tp_comm,
                   tp_share=f_ratio if total_f else s.m_ratio,
                   input_saved_bytes=layer.input_saved_bytes / in_ways,
                   input_shared_bytes=layer.input_shared_bytes / in_ways, tied=tied,
                   routed_bytes=layer.routed_bytes / in_ways,
                   w_held_bytes=s.w_held_bytes / batch)


# ----------------------------------------------------------------------------- graphs


def select(graph: LayerGraph, patterns: Mapping[str, Strategy]) -> dict[tuple[int, int], tuple[Strategy, bool]]:
    """(layer index, op index) -> (strategy, optional) for every op a pattern picks; a required
    pattern that picks nothing is an error naming it.  A pattern with ':' matches an operator's
    id, "<layer>/<op>"; one without matches a primary operator (PRIMARY) by "<layer>/<module>"
    (its layer's name where the layer is the module) and a contraction also by its layer's name."""
    chosen: dict[tuple[int, int], tuple[Strategy, bool]] = {}
    exact = graph.op_index
    as_ints: dict = {}                    # a searched layout gives every operator one of a few strategies
    by_unit = None                        # _by_unit(graph), made at the first pattern without ':'
    for key, strategy in patterns.items():
        optional = key.startswith("?")
        pattern = key[1:] if optional else key
        strategy = _as_ints(strategy, as_ints)
        if ":" in pattern and "*" not in pattern and "?" not in pattern and "[" not in pattern:   # an operator id
            hits = [exact[pattern]] if pattern in exact else []
        else:
            match = re.compile(fnmatch.translate(pattern)).match      # as fnmatch.fnmatchcase matches
            if ":" in pattern:
                hits = [at for name, at in exact.items() if match(name)]      # op_index: in (layer, op) order
            else:
                if by_unit is None:
                    by_unit = _by_unit(graph)
                hits = sorted({at for name, ats in by_unit.items() if match(name) for at in ats})
        for at in hits:
            chosen[at] = (strategy, optional)
        if not hits and not optional:
            example = next((f"{layer.name}/{op.name}" for layer in graph.layers for op in layer.ops
                            if op.kind in CONTRACTIONS), "")
            raise InfeasibleError(f"{pattern!r} names no operator; operators are named "
                                  f"<layer>/<module>:<aten>, e.g. {example!r}")
    return chosen


def _by_unit(graph: LayerGraph) -> dict[str, list[tuple[int, int]]]:
    """Each name a pattern without ':' matches (select) -> the (layer index, op index) it names:
    "<layer>/<module>" (the layer's name where the layer is the module) for a primary operator,
    and the layer's name for a contraction; each name matched once per pattern, not once per
    operator (DeepSeek-V3's 2,781 operators have 729 such names)."""
    out: dict[str, list[tuple[int, int]]] = {}
    for li, layer in enumerate(graph.layers):
        for oi, op in enumerate(layer.ops):
            if op.kind in PRIMARY:
                out.setdefault(f"{layer.name}/{op.module}" if op.module else layer.name, []).append((li, oi))
            if op.kind in CONTRACTIONS:
                out.setdefault(layer.name, []).append((li, oi))
    return out


def _as_ints(strategy, memo: dict) -> Strategy:
    """``strategy`` (split counts, as lists from a model.yaml or tuples) as tuples of ints, each
    hashable one converted once per ``memo``."""
    try:
        return memo[strategy]
    except KeyError:
        out = memo[strategy] = tuple(tuple(int(x) for x in s) for s in strategy)
        return out
    except TypeError:                     # lists: not hashable
        return tuple(tuple(int(x) for x in s) for s in strategy)


def layer_shardings(graph: LayerGraph, patterns: Mapping[str, Strategy], devices: int,
                    edges: dict | None = None) -> list[LayerSharding | None]:
    """Each layer of ``graph`` sharded by ``patterns`` on groups of ``devices`` (None for a layer
    without an operator view): what the simulator prices (``shard_graph``) and the executor runs
    (parsim.exec.op_parallel).  A layer's input carries a gradient only after a layer with
    parameters: before one (the images through a Flatten), no backward step leaves it.  ``edges``:
    edge_steps' memo, where a run keeps one."""
    by_layer: dict[int, dict[int, tuple[Strategy, bool]]] = {}   # per layer, as select gives them
    for (li, oi), s in select(graph, patterns).items():
        by_layer.setdefault(li, {})[oi] = s
    out, prev, prev_bytes, grads, memo = [], None, None, False, {}
    for li, layer in enumerate(graph.layers):
        if not layer.ops:
            out.append(None)
            prev = prev_bytes = None
        else:
            out.append(shard_layer(layer, by_layer.get(li, {}), devices, graph.extraction_batch, prev, input_grad=grads,
                                   memo=memo, edges=edges, in_elem_bytes=prev_bytes))
            prev = out[-1].output
            prev_bytes = elem_bytes(layer.ops[layer.ops_output]) if layer.ops_output >= 0 else None
        grads = grads or layer.param_count > 0 or bool(layer.tied)
    return out


def vocab_parallel_loss(out: Layout) -> bool:
    """Whether the loss takes the model's output laid out as ``out`` where it lies: split on its
    last (class, vocabulary) dimension alone, no partial sums, as Megatron's vocabulary-parallel
    cross-entropy takes the LM head's logits (megatron/core/tensor_parallel/cross_entropy.py;
    parsim.exec.vocab_parallel).  Any other split is gathered whole for the loss."""
    lay = out.normalized()
    return (bool(lay.tensor_map) and lay.tensor_map[-1] != -1 and not lay.partial
            and all(d == -1 for d in lay.tensor_map[:-1]))


def loss_steps(out: Layout, extraction_batch: int, eb: int) -> tuple[tuple, int]:
    """(the loss's tensor-parallel steps, as Layer.tp_comm holds them, per sample; how many pieces
    the loss gathers, LayerGraph.loss_gather_ways) for the model's output laid out as ``out``.
    - split by classes alone (``vocab_parallel_loss``): three forward all-reduces of one fp32 per
      row (the max logit, the target's logit, the sum of exponentials; Megatron's
      megatron/core/tensor_parallel/cross_entropy.py, ``_VocabParallelCrossEntropy.forward``), in
      phase "loss": once per micro-batch, never recomputed; the backward is local, and the loss
      keeps its slice (no gather);
    - otherwise, split or partial: gathered whole forward (split back backward), with the
      gathered whole kept."""
    if ways(out) * partial_size(out) == 1:
        return (), 1
    if vocab_parallel_loss(out):
        rows = math.prod(out.shape[:-1]) / extraction_batch          # per sample
        lay = out.normalized()
        d = lay.tensor_map[-1]
        step = Step("AllReduce", d, lay.device_dim_size(d), rows * 4)   # fp32 (objective.loss_fn)
        return (("loss", step, lay.device_matrix),) * 3, 1
    whole = replicated(out.device_matrix, out.shape)
    fwd, bwd, matrix = edge_steps(out, whole, whole, eb)
    return tuple((ph, replace(x, bytes_per_device=x.bytes_per_device / extraction_batch), matrix)
                 for ph, steps in (("F", fwd), ("B", bwd)) for x in steps if x.communicates), ways(out)


def shard_graph(graph: LayerGraph, patterns: Mapping[str, Strategy], devices: int,
                edges: dict | None = None) -> LayerGraph:
    """The per-device LayerGraph of ``graph`` under ``patterns`` on groups of ``devices``
    (``edges``: edge_steps' memo, where a run keeps one)."""
    shardings = layer_shardings(graph, patterns, devices, edges)
    layers = [layer if s is None else s.layer for layer, s in zip(graph.layers, shardings)]
    prev = shardings[-1].output if shardings and shardings[-1] is not None else None
    gathered = 1
    if prev is not None:
        extra, gathered = loss_steps(prev, graph.extraction_batch, elem_bytes(graph.layers[-1].ops[-1]))
        if extra:
            layers[-1] = replace(layers[-1], tp_comm=layers[-1].tp_comm + extra)
    return replace(graph, layers=tuple(layers), tp=devices, loss_gather_ways=gathered,
                   loss_vocab_parallel=prev is not None and vocab_parallel_loss(prev))


# torch.distributed functional collectives (what CommDebugMode counts) per redistribution step;
# on gloo DTensor runs an AllToAll as an all_gather.
COLLECTIVE_NAMES = {"AllReduce": "all_reduce", "AllGather": "all_gather_into_tensor",
                    "ReduceScatter": "reduce_scatter_tensor", "AllToAll": "all_gather_into_tensor"}


def collective_counts(graph: LayerGraph, microbatches: int, layers: Iterable[int] | None = None) -> dict[str, int]:
    """Tensor-parallel collectives one device issues per step of a per-device graph: each layer's
    forward and backward steps per micro-batch (the forward's again when fully recomputed; the loss's
    once, ``loss_steps``), over all
    its layers or the indices ``layers`` (a pipeline rank's, ParallelConfig.rank_layers: a stage
    boundary issues none, each tensor-parallel rank sending its piece to its peer).  Gradient
    mirrors are left out: the executor sums them in one flat all-reduce per step, as Megatron
    does, whatever their number."""
    counts: dict[str, int] = {}
    for layer in (graph.layers if layers is None else [graph.layers[i] for i in sorted(layers)]):
        for ph, step, _ in layer.tp_comm:
            if not step.communicates or ph == "grad":
                continue
            n = microbatches * (2 if ph == "F" and layer.recomputes_forward else 1)
            name = COLLECTIVE_NAMES[step.kind]
            counts[name] = counts.get(name, 0) + n
    return counts


def strategy_summary(graph: LayerGraph, patterns: Mapping[str, Strategy]) -> list[tuple[str, Strategy, int]]:
    """(operator name within its layer, strategy, number of layers) for every strategy that
    differs from data parallelism (replication within the group), most layers first."""
    counts: dict[tuple, int] = {}
    rank: dict[str, int] = {}
    for (li, oi), (strategy, _) in select(graph, patterns).items():
        if any(c != 1 for split in strategy for c in split):
            op = graph.layers[li].ops[oi]
            counts[(op.name, strategy)] = counts.get((op.name, strategy), 0) + 1
            rank[op.name] = (PRIMARY + ("ElementWise",)).index(op.kind)     # contractions first
    return sorted(((name, strategy, n) for (name, strategy), n in counts.items()),
                  key=lambda x: (-x[2], rank[x[0]], x[0]))


def replicates_every_operator(graph: LayerGraph) -> bool:
    """A per-device graph whose layout split no operator: every device of the tensor-parallel
    group holds every parameter and computes the whole micro-batch, with nothing to exchange (the
    searched layout may choose this where communication costs more than the work it would share)."""
    return all(layer.tp_share >= 1 - 1e-9 and not layer.tp_comm for layer in graph.layers)


def ops_frame(graph: LayerGraph, patterns: Mapping[str, Strategy] | None = None):
    """A pandas DataFrame of every operator (its id for ``shard:`` patterns, kind, shapes at the
    extraction batch) and the strategy ``patterns`` give it, if any."""
    import pandas as pd

    chosen = select(graph, patterns) if patterns else {}
    return pd.DataFrame([{"op": f"{layer.name}/{op.name}", "kind": op.kind,
                          "inputs": " ".join("x".join(map(str, s)) for s in op.input_shapes),
                          "output": "x".join(map(str, op.output_shape)),
                          "strategy": str(chosen[(li, oi)][0]) if (li, oi) in chosen else ""}
                         for li, layer in enumerate(graph.layers) for oi, op in enumerate(layer.ops)])
