"""Per-operator tensor parallelism: the ``model`` and ``auto`` layouts (parsim.shard) run as DTensor
programs on the tensor-parallel dimension of the (dp, pp, tp) mesh.

The plan gives every operator of a layer's operator view (``Layer.ops``) a sharding
(``parsim.shard.graph.layer_shardings``): the layouts of its inputs, its output and their
gradients.  Here each becomes DTensor placements (``Layout.to_dtensor``):

- **parameters** are distributed (``distribute_tensor``) as the operator that reads them lays them
  out: a Linear's weight is W^T [k, n] transposed, so a column split is ``Shard(0)`` and a row
  split ``Shard(1)``, as in ColwiseParallel/RowwiseParallel; its bias splits with the output's
  last dimension; an embedding's weight as its layout says; a parameter no recorded operator lays
  out (norm weights, a row split's bias) is replicated;
- **activations**: each cut unit runs on DTensors under a ``TorchFunctionMode`` that lines the
  unit's torch calls up, in order, with the layer's recorded operators (``F.linear`` with addmm or
  mm, ``matmul`` with bmm, ``F.layer_norm`` with native_layer_norm, ...), and before each call
  redistributes the operator's activation inputs to the layouts the plan gives them, carried from
  the recorded shape ([b*s, h]) to the call's ([b, s, h]) by ``reshape_layout``.  Where the
  producer's layout already agrees there is nothing to do; where it does not, ``redistribute`` runs
  the collective the simulator prices (parsim.shard.redistribute: a partial sum completed by an
  all-reduce, a split gathered, a replicated tensor split locally), and autograd runs its reverse
  in the backward.  Calls that read one tensor alike (the same layout, the same gradient layout)
  share its redistribution, and autograd sums their gradients before it is reversed: a ResNet
  block's input, read by conv1 and the downsample both split by output channels, has its two
  partial gradients added locally and all-reduced once, as ``shard_graph`` charges one tensor's
  identical steps once (Megatron's fused QKV: one all-reduce for three projections).  DTensor's
  propagation computes each output (a split contraction gives ``Partial``), which is the plan's
  output layout for every operator parsim shards;
- the loss takes the whole logits: the stage's output is made ``Replicate`` (all-gathered or
  all-reduced, as ``shard_graph`` prices it) and local; or, where the plan splits the model's
  output by classes alone (``parsim.shard.graph.vocab_parallel_loss``), each rank's slice, which
  the loss takes vocabulary-parallel (parsim.exec.vocab_parallel);
- a parameter whose gradient is a partial sum (a "mirror": a weight read by an operator whose
  rows are split, a norm over a split batch) keeps a ``Partial`` gradient through the step's
  micro-batches and is summed over the group once per step, in the one flat all-reduce
  ``parsim.exec.tensor_parallel.reduce_partial_grads`` issues, as the simulator prices mirrors;
- a pipeline boundary (pp > 1) carries each tensor-parallel rank's piece of the activation as the
  plan lays out the stage's last layer's output (a split's part, a partial sum's term) to its peer
  rank of the next stage, which takes it in that layout, and the gradient back alike, its
  partial sums settled: no collective at the boundary, the bytes the simulator's send prices
  (the per-device layer's ``output_bytes``), the next layer's edges as within a stage.

- convolutions and BatchNorm, which DTensor's propagation does not run split by channels, are
  computed on the local shards (``_LOCAL``): an output-channel split gives this rank's channels
  (``Shard(1)``), an input-channel split a ``Partial`` sum; BatchNorm's statistics are per
  channel, so its channel split is local, and its weight, bias and running statistics (DTensor
  buffers) split with the channels.  The strategies never split BatchNorm's batch
  (parsim.shard.strategy.batch_norm).  Pooling runs on the local shard too.

Limits, refused in one line before launching (``check_supported``): a strategy that splits over
part of the group (a 2 x 2 split on 4 devices); a parameter two operators lay out differently.
When the model is laid out or first run: a convolution with a bias split by input channels, a
grouped convolution split at all.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from parsim.errors import InputError, RunError
from parsim.model import fused_softmax

LAYOUTS = ("model", "auto")
Tensor = torch.Tensor

# torch function -> the kind extraction records for it (parsim.model.extract._OP_KINDS), and which of
# its arguments are the recorded inputs, in the recorded order ("W^T": a Linear's weight, transposed).
_CALLS: dict = {}
for _f in (torch.matmul, Tensor.matmul, Tensor.__matmul__):
    _CALLS[_f] = ("matmul", (0, 1))
_CALLS[F.linear] = ("MatMul", (0, "W^T"))
_CALLS[F.embedding] = ("Embedding", ("W",))
_CALLS[F.layer_norm] = ("LayerNorm", (0,))
_CALLS[F.conv2d] = ("Conv2d", (0, "W"))
_CALLS[F.batch_norm] = ("BatchNorm", (0,))
for _f in (F.softmax, torch.softmax, Tensor.softmax):
    _CALLS[_f] = ("Softmax", (0,))
_CALLS[fused_softmax.masked_softmax._opoverload] = ("Softmax", (0,))     # Megatron's fused softmax (attention: megatron)
for _aten, _fs, _pos in (("add", (Tensor.__add__, Tensor.__radd__, Tensor.add, torch.add), (0, 1)),
                         ("mul", (Tensor.__mul__, Tensor.__rmul__, Tensor.mul, torch.mul), (0, 1)),
                         ("sub", (Tensor.__sub__, Tensor.sub, torch.sub), (0, 1)),
                         ("div", (Tensor.__truediv__, Tensor.div, torch.div), (0, 1)),
                         ("relu", (F.relu, torch.relu, Tensor.relu), (0,)), ("gelu", (F.gelu,), (0,)),
                         ("masked_fill", (Tensor.masked_fill,), (0,)),
                         ("native_dropout", (torch.native_dropout,), (0,))):
    for _f in _fs:
        _CALLS[_f] = (_aten, _pos)


def _register_fused_softmax_sharding() -> None:
    """DTensor's rule for parsim.model.fused_softmax's two operators: the causal mask spans the last
    two dimensions (queries, keys), so the scores and probabilities split over the batch and head
    dimensions only, or stay whole (as DTensor's own rule for aten._softmax keeps its dimension)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.experimental import register_sharding

    @register_sharding(fused_softmax.masked_softmax._opoverload)
    def _forward(scores, scale):
        return [([Replicate()], [Replicate(), None])] + [([Shard(d)], [Shard(d), None]) for d in range(scores.ndim - 2)]

    @register_sharding(fused_softmax.masked_softmax_backward._opoverload)
    def _backward(grad, probs, scale):
        return [([Replicate()], [Replicate(), Replicate(), None])] + [([Shard(d)], [Shard(d), Shard(d), None])
                                                                         for d in range(grad.ndim - 2)]


_register_fused_softmax_sharding()


def _kind_of(func, args) -> tuple[str, str, tuple] | None:
    """(kind, aten name or "", recorded-input roles) of a call extraction records, else None."""
    entry = _CALLS.get(func)
    if entry is None:
        return None
    name, roles = entry
    if name == "matmul":
        batched = args[0].dim() > 2 and args[1].dim() > 2
        return ("BatchMatMul" if batched else "MatMul"), "", roles
    if name in ("MatMul", "Embedding", "LayerNorm", "Conv2d", "BatchNorm", "Softmax"):
        return name, "", roles
    return "ElementWise", name, roles


def _recorded_shape(kind: str, role, t) -> tuple[int, ...]:
    """The shape extraction recorded for argument ``t`` of a call: a Linear's input as [m, k], a
    batched matmul's operands as [B, m, k], a Linear's weight as W^T."""
    shape = tuple(t.shape)
    if role == "W^T":
        return shape[::-1]
    if kind == "MatMul" and len(shape) > 2:
        return (math.prod(shape[:-1]), shape[-1])
    if kind == "BatchMatMul":
        return (math.prod(shape[:-2]), *shape[-2:])
    return shape


def _placements(layout, recorded_shape, shape, where: str):
    """DTensor placements of ``layout`` (a one-dimension split over the whole group, or none) on
    a tensor of ``shape`` that the operator view saw as ``recorded_shape`` (same elements)."""
    from torch.distributed.tensor import Replicate

    from parsim.shard.ops import reshape_layout
    from parsim.shard.layout import Layout

    lay = layout.normalized()
    if not lay.device_matrix:
        return [Replicate()]
    try:
        moved = reshape_layout(Layout(lay.device_matrix, lay.tensor_map, tuple(recorded_shape), lay.partial),
                               tuple(shape))
    except Exception as e:       # InfeasibleError: the run's batch does not split as planned
        raise RunError(f"{where}: {e}") from None
    if moved is None:
        raise RunError(f"{where}: the layout {layout.tensor_map} of {recorded_shape} has no counterpart on {shape}")
    return moved.to_dtensor()


def _dt(layout) -> list:
    """DTensor placements of ``layout`` as it stands (a split over the whole group, or none)."""
    from torch.distributed.tensor import Replicate

    lay = layout.normalized()
    return lay.to_dtensor() if lay.device_matrix else [Replicate()]


def _as_weight(layout, role):
    """Placements of a parameter in ``role`` under its operator's input layout."""
    from torch.distributed.tensor import Shard

    out = []
    for p in _dt(layout):
        if role == "W^T" and isinstance(p, Shard):
            p = Shard(1 - p.dim)
        out.append(p)
    return out


def _arg(args, kwargs, i: int, name: str, default=None):
    return args[i] if i < len(args) else kwargs.get(name, default)


def _rest(args, kwargs, first: int, names: tuple[str, ...]) -> tuple[tuple, dict]:
    """The call's arguments after position ``first``, less the keywords ``names`` handled apart."""
    return tuple(args[first:]), {k: v for k, v in kwargs.items() if k not in names}


def _local(t, grad_placements):
    """The local shard of DTensor ``t`` whose gradient is laid out ``grad_placements``; a plain
    tensor (a buffer, None) as is."""
    return t.to_local(grad_placements=grad_placements) if hasattr(t, "to_local") else t


def _conv_per_channel(args, kwargs, sh):
    """A convolution's bias: split as its weight's output channels, its gradient partial where the
    weight's is (a batch split).  A bias under an input-channel split would be added to each
    partial sum: refused."""
    from parsim.shard.layout import Layout

    bias = _arg(args, kwargs, 2, "bias")
    if bias is None:
        return []
    w, dw = sh.inputs[1], sh.input_grads[1]
    if sh.output.partial:
        raise RunError("parallel.tp_layout: a convolution with a bias split by input channels (its partial sums "
                       "would each add the bias); the executor runs bias-free ones, as ResNet's")
    return [(bias, Layout(w.device_matrix, w.tensor_map[:1], w.shape[:1]),
             Layout(dw.device_matrix, dw.tensor_map[:1], dw.shape[:1], dw.partial))]


def _conv_local(func, args, kwargs, sh, mesh, where: str):
    """F.conv2d on the local shards (Megatron's column and row splits, written for convolutions):
    output channels split (weight Shard(0)): this rank's channels of Y, ``Shard(1)``; input
    channels split (X and the weight Shard(1)): a partial sum of Y, ``Partial``, completed where the
    plan's next layout asks (an all-reduce or a reduce-scatter); the batch split: this rank's
    samples.  The input's and the weight's gradients leave laid out as the plan's input
    gradients (a partial dX under an output-channel split, summed at the producer's edge)."""
    from torch.distributed.tensor import DTensor

    if _arg(args, kwargs, 6, "groups", 1) != 1 and any(d != -1 for lay in sh.inputs for d in lay.tensor_map):
        raise RunError(f"{where}: a grouped convolution split over the group is not run; plan tp=1")
    x = _local(args[0], _dt(sh.input_grads[0]))
    w = _local(args[1], _as_weight(sh.input_grads[1], "W"))
    bias = _arg(args, kwargs, 2, "bias")
    bias = _local(bias, _dt(_conv_per_channel(args, kwargs, sh)[0][2])) if bias is not None else None
    rest, kw = _rest(args, kwargs, 3, ("bias",))
    return DTensor.from_local(func(x, w, bias, *rest, **kw), mesh, _dt(sh.output), run_check=False)


def _bn_per_channel(args, kwargs, sh):
    """BatchNorm's running statistics, weight and bias: split as its channels."""
    names = ("running_mean", "running_var", "weight", "bias")
    return [(_arg(args, kwargs, i + 1, n), sh.inputs[1], sh.input_grads[1] if i >= 2 else None)
            for i, n in enumerate(names)]


def _bn_local(func, args, kwargs, sh, mesh, where: str):
    """F.batch_norm on the local channels: per-channel statistics, so this rank's channels come out
    as one device's would, and its running statistics (DTensor buffers split alike) are updated
    in place on their local shard.  The batch is never split (parsim.shard.strategy.batch_norm)."""
    from torch.distributed.tensor import DTensor

    if sh.inputs[0].normalized().device_matrix and sh.inputs[0].tensor_map[0] != -1:
        raise RunError(f"{where}: BatchNorm over a split batch is not run (its statistics would differ per rank)")
    x = _local(args[0], _dt(sh.input_grads[0]))
    stats = [getattr(t, "_local_tensor", t) for t, _, _ in _bn_per_channel(args, kwargs, sh)[:2]]
    affine = [_local(t, _dt(sh.input_grads[1])) for t, _, _ in _bn_per_channel(args, kwargs, sh)[2:]]
    rest, kw = _rest(args, kwargs, 5, ("running_mean", "running_var", "weight", "bias"))
    return DTensor.from_local(func(x, *stats, *affine, *rest, **kw), mesh, _dt(sh.output), run_check=False)


class _LocalOp(NamedTuple):
    per_channel: object        # (args, kwargs, sharding) -> [(tensor, layout, gradient layout)] beside the inputs
    run: object                # (func, args, kwargs, sharding, mesh, where) -> the output DTensor


# operators DTensor's propagation does not run split (convolutions by channels, BatchNorm by
# channels): computed on the local shards, as the plan lays them out
_LOCAL = {"Conv2d": _LocalOp(_conv_per_channel, _conv_local), "BatchNorm": _LocalOp(_bn_per_channel, _bn_local)}


# pooling (not recorded: it holds no parameters and moves no data between samples or channels)
# computed on the local shard whatever the batch or channel split; DTensor has no strategy for
# some of its paths (a 1 x 1 adaptive average pool is an in-place as_strided_)
_POOLS = (F.max_pool2d, F.avg_pool2d, F.adaptive_avg_pool2d, F.adaptive_max_pool2d)


def _pool_local(func, args, kwargs, where: str):
    from torch.distributed.tensor import DTensor, Shard

    x = args[0]
    if any(isinstance(p, Shard) and p.dim >= 2 for p in x.placements) or any(p.is_partial() for p in x.placements):
        raise RunError(f"{where}: pooling over a spatially split or partial input is not run")
    y = func(x.to_local(), *args[1:], **kwargs)
    if isinstance(y, tuple):                                    # (values, indices)
        return tuple(DTensor.from_local(t, x.device_mesh, x.placements, run_check=False) for t in y)
    return DTensor.from_local(y, x.device_mesh, x.placements, run_check=False)


class _GradAs(torch.autograd.Function):
    """Identity forward; backward, the gradient laid out as the producer's output (its partial sums
    settled): where an operator's input gradient is a partial sum (a column split's dX), it is
    completed at that edge, as parsim.shard.redistribute prices it (Megatron's "f"), instead of
    travelling on as ``Partial`` until DTensor needs it whole."""

    @staticmethod
    def forward(ctx, x, placements):
        ctx.placements = tuple(placements)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        if tuple(grad.placements) != ctx.placements:
            grad = grad.redistribute(grad.device_mesh, ctx.placements)
        return grad, None


class _Lineup(TorchFunctionMode):
    """Runs one unit's calls against its layer's operators (module docstring).  ``params`` on a
    probe (plain tensors): records, per recorded call, which parameters it reads in which role."""

    def __init__(self, unit_name: str, ops, shardings, mesh, probe: dict | None = None):
        super().__init__()
        self.unit, self.ops, self.shardings, self.mesh, self.probe = unit_name, ops, shardings, mesh, probe
        self.k = 0
        self.laid: dict = {}     # (a tensor's id and version, placements, gradient layout) -> (it, laid out)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _POOLS and self.probe is None and hasattr(args[0], "to_local"):
            return _pool_local(func, args, kwargs, self.unit)
        found = _kind_of(func, args)
        if found is None or self.ops is None:
            return func(*self._uniform(args), **kwargs)
        kind, aten, roles = found
        if self.k >= len(self.ops):
            raise RunError(f"{self.unit}: a {kind} call beyond the {len(self.ops)} operators extraction recorded; "
                           "the model's forward differs from its operator view")
        op, sh = self.ops[self.k], self.shardings[self.k]
        if op.kind != kind or (kind == "ElementWise" and op.aten != aten):
            raise RunError(f"{self.unit}: call {self.k} is a {aten or kind}, but extraction recorded "
                           f"{op.name} ({op.kind}) there; the model's forward differs from its operator view")
        self.k += 1
        args = list(args)
        for j, role in enumerate(roles):
            if isinstance(role, str):
                idx = 1
                if self.probe is not None and idx < len(args) and isinstance(args[idx], nn.Parameter):
                    self.probe.setdefault(args[idx], []).append((f"{self.unit}/{op.name}", role, sh.inputs[j],
                                                                 sh.input_grads[j]))
                    bias = args[2] if len(args) > 2 else kwargs.get("bias")
                    if role == "W^T" and isinstance(bias, nn.Parameter):
                        self.probe.setdefault(bias, []).append((f"{self.unit}/{op.name}", "bias", sh.output,
                                                                sh.input_grads[j]))
                continue
            if self.probe is None and role < len(args) and hasattr(args[role], "redistribute") \
                    and j < len(sh.inputs):
                a = args[role]
                target = _placements(sh.inputs[j], _recorded_shape(kind, role, a), a.shape, f"{self.unit}/{op.name}")
                args[role] = self._laid_out(a, tuple(target), sh.input_grads[j])
        if self.probe is not None and kind == "LayerNorm":
            for t in (*args[2:4], kwargs.get("weight"), kwargs.get("bias")):
                if isinstance(t, nn.Parameter):
                    self.probe.setdefault(t, []).append((f"{self.unit}/{op.name}", "norm", None,
                                                         sh.input_grads[1] if len(sh.input_grads) > 1 else None))
        if self.probe is not None and kind in _LOCAL:
            for t, lay, grad in _LOCAL[kind].per_channel(args, kwargs, sh):
                if isinstance(t, torch.Tensor):
                    self.probe.setdefault(t, []).append((f"{self.unit}/{op.name}", "W", lay, grad))
        if self.probe is None and kind in _LOCAL:
            return _LOCAL[kind].run(func, args, kwargs, sh, self.mesh, f"{self.unit}/{op.name}")
        return func(*self._uniform(args), **kwargs)

    def _laid_out(self, a, target: tuple, grad_layout):
        """``a`` redistributed to ``target`` for a call whose gradient comes back laid out as
        ``grad_layout``, behind a ``_GradAs`` that settles that gradient.  Calls that read one tensor
        alike share both: redistributed once forward, and their gradients summed by autograd in
        that layout (partial sums added locally) and settled once backward, as shard_graph charges
        one tensor's identical steps once (a ResNet block's input, read by conv1 and the
        downsample, both split by output channels: one all-reduce of the summed partial dX)."""
        from torch.distributed.tensor import Replicate

        key = (id(a), a._version, target, grad_layout)      # _version: not shared across an in-place change
        if key not in self.laid:
            out = _GradAs.apply(a, [Replicate() if q.is_partial() else q for q in a.placements])
            if tuple(out.placements) != target:
                out = out.redistribute(self.mesh, target)
            self.laid[key] = (a, out)            # ``a`` held: its id is not reused while the unit runs
        return self.laid[key][1]

    def _uniform(self, args):
        """Plain tensors beside DTensors (a mask buffer, positions) enter as replicated DTensors."""
        if self.probe is not None or not any(hasattr(a, "placements") for a in args):
            return args
        from torch.distributed.tensor import DTensor, Replicate

        return [DTensor.from_local(a, self.mesh, [Replicate()], run_check=False)
                if isinstance(a, torch.Tensor) and not hasattr(a, "placements") and a.dim() > 0 else a for a in args]

    def done(self) -> None:
        if self.ops is not None and self.k != len(self.ops):
            raise RunError(f"{self.unit}: {self.k} calls lined up with {len(self.ops)} recorded operators; the "
                           "model's forward differs from its operator view")


def unit_shardings(spec, plan, cluster) -> list:
    """Per layer of the model: its LayerSharding under the plan's layout, or None (no operators)."""
    from parsim.shard.graph import layer_shardings
    from parsim.shard.prepare import plan_strategies

    cfg = plan.config
    patterns = plan_strategies(spec.graph, cfg, spec.shard, cluster, spec.training)
    return layer_shardings(spec.graph, patterns, cfg.tp)


def check_supported(spec, plan, cluster, source: str) -> None:
    """What the executor cannot run of a model/auto plan, refused in one line (module docstring)."""
    cfg = plan.config
    for sharding, layer in zip(unit_shardings(spec, plan, cluster), spec.graph.layers):
        if sharding is None:
            continue
        for op, sh in zip(layer.ops, sharding.shardings):
            where = f"{source}: parallel.tp_layout: {layer.name}/{op.name}"
            for lay in (*sh.inputs, sh.output):
                dm = lay.normalized().device_matrix
                if dm and dm != (cfg.tp,):
                    raise InputError(f"{where} splits over {dm} devices, not the whole tp={cfg.tp} group; the "
                                     "executor runs one-dimension splits over the group")


def parallelize(stage: nn.Sequential, units: list[str], shardings: list, tp_mesh, example: torch.Tensor,
                inbound=None, outbound=None) -> list:
    """Lay out ``stage`` (one pipeline stage's units, ``units`` their layer names) per
    ``shardings`` (one per unit, ``unit_shardings``), in place; returns the parameters whose
    gradients are partial sums over the group, for ``reduce_partial_grads`` after each backward.
    ``example``: an input batch of the stage, run once on the plain units to find which parameter
    each operator reads.  ``inbound``, ``outbound``: the plan's layouts of the tensors that cross
    the stage's pipeline boundaries, the previous layer's output and the stage's last, see
    ``_boundary_placements`` (None: whole on every rank, as the model's input and the logits the
    loss takes)."""
    from torch.distributed.tensor import Partial, Replicate, distribute_tensor

    named = dict(stage.named_children())
    children = [named[name.replace(".", "_")] for name in units]   # without channels_last's boundary modules
    probe: dict = {}
    buffers = [b.detach().clone() for b in stage.buffers()]
    with torch.no_grad():
        x = example
        for name, unit, sharding in zip(units, children, shardings):
            with _Lineup(name, sharding.layer.ops if sharding else None,
                         sharding.shardings if sharding else None, tp_mesh, probe) as mode:
                x = unit(x)
            mode.done()
    for b, saved in zip(stage.buffers(), buffers):
        b.copy_(saved)                  # the probe's BatchNorm statistics undone

    placements, partial = {}, []
    for p, uses in probe.items():
        laid = {tuple(_as_weight(lay, role) if role not in ("bias", "norm") else
                      _bias(lay) if role == "bias" else [Replicate()]) for _, role, lay, _ in uses}
        if len(laid) > 1:
            raise RunError(f"parallel.tp_layout: {', '.join(u[0] for u in uses)} lay one parameter out "
                           f"differently ({sorted(map(str, laid))}); the executor keeps one layout per parameter")
        placements[p] = list(laid.pop())
        if any(g is not None and g.partial for _, _, _, g in uses):
            partial.append(p)
    replaced: dict = {}
    for module in stage.modules():
        for name, p in list(module._parameters.items()):
            if p is None:
                continue
            if p not in replaced:
                where = placements.get(p, [Replicate()])
                replaced[p] = nn.Parameter(distribute_tensor(p.data, tp_mesh, where), requires_grad=p.requires_grad)
            module._parameters[name] = replaced[p]
        for name, b in list(module._buffers.items()):        # BatchNorm's running statistics
            if b is not None and b in placements:
                module._buffers[name] = distribute_tensor(b, tp_mesh, placements[b])
    mirrors = [replaced[p] for p in partial]
    for k, (name, unit, sharding) in enumerate(zip(units, children, shardings)):
        unit.forward = _on_dtensors(unit, name, sharding, tp_mesh, inbound, outbound, k == len(units) - 1)
    for p in mirrors:                           # read by tensor_parallel.expect_partial
        p.partial_grad_placements = [Partial() if isinstance(q, Replicate) else q for q in p.placements]
    return mirrors


def _boundary_placements(layout, shape, where: str) -> list:
    """Placements of a tensor of ``shape`` that crosses a pipeline boundary laid out as ``layout``
    (the plan's output layout of the stage's last layer, parsim.shard.graph.LayerSharding.output):
    each tensor-parallel rank sends its piece (a split's part, a partial sum's term) to its peer
    of the next stage, which takes it in the same layout, as the simulator prices the send
    (the per-device layer's output_bytes) and the next layer's edges.  ``layout``'s shape is the
    extraction's; a tensor of as many dimensions (another batch, a pooled map) keeps its splits
    by dimension, another view of it is carried by ``reshape_layout``."""
    from torch.distributed.tensor import Replicate

    lay = layout.normalized()
    if not lay.device_matrix:
        return [Replicate()]
    if len(shape) == len(lay.shape):
        return lay.to_dtensor()
    return _placements(layout, layout.shape, shape, where)


def _bias(out_layout):
    from torch.distributed.tensor import Replicate, Shard

    lay = out_layout.normalized()
    split_last = lay.device_matrix and lay.tensor_map[-1] != -1
    return [Shard(0)] if split_last else [Replicate()]


def _on_dtensors(unit, name, sharding, mesh, inbound, outbound, last: bool):
    """``unit``'s forward on DTensors.  A plain input is the stage's (the model's, or received from
    the previous stage), taken as ``inbound`` lays it out; the stage's ``last`` unit gives this
    rank's piece of its output as ``outbound`` lays it out (the whole for the loss, or its slice
    of the classes where the loss takes it so), its gradient coming back laid out alike, partial
    sums settled (``_boundary_placements``)."""
    from torch.distributed.tensor import DTensor, Replicate, Shard

    from parsim.exec.vocab_parallel import mark_vocab_parallel
    from parsim.shard.graph import vocab_parallel_loss

    inner = unit.forward
    ops = sharding.layer.ops if sharding else None
    shardings = sharding.shardings if sharding else None
    by_class = last and outbound is None and sharding is not None and vocab_parallel_loss(sharding.output)
    if by_class:
        mark_vocab_parallel(unit, mesh.get_group())

    def forward(x):
        if not isinstance(x, DTensor):
            laid = [Replicate()] if inbound is None else _boundary_placements(inbound, x.shape, f"{name}: its input")
            x = DTensor.from_local(x, mesh, laid, run_check=False)
        with _Lineup(name, ops, shardings, mesh) as mode:
            y = inner(x)
        mode.done()
        if last:                                # the loss takes the whole logits; the next stage, this rank's piece
            laid = ([Shard(y.ndim - 1)] if by_class else [Replicate()] if outbound is None
                    else _boundary_placements(outbound, y.shape, f"{name}: its output"))
            if tuple(y.placements) != tuple(laid):
                y = y.redistribute(mesh, laid)
            y = y.to_local(grad_placements=[Replicate() if q.is_partial() else q for q in laid]).contiguous()
        return y
    return forward


def parallelize_stages(modules: list[nn.Sequential], stage_ids: list[int], units: list[tuple[str, nn.Module]],
                       spec, plan, tp_mesh, dtype: torch.dtype, device: torch.device) -> list:
    """``parallelize`` for each of this rank's stages (``modules``, stages ``stage_ids``), each probed
    with two samples of its input: the model's, run through the plain ``units`` before it (the
    whole model's, not yet laid out; their buffers left as they were)."""
    from parsim.hardware import load_cluster

    cfg = plan.config
    shardings = unit_shardings(spec, plan, load_cluster(plan.cluster))
    names = list(spec.graph.names)
    # every stage's example before any stage is laid out (interleaved: a rank's later stage runs after its first)
    examples = [_stage_example(spec, units[:cfg.bounds[s]], dtype, device) for s in stage_ids]
    mirrors = []
    for s, module, example in zip(stage_ids, modules, examples):
        lo, hi = cfg.bounds[s], cfg.bounds[s + 1]
        # the plan's layouts of the previous layer's output and of the stage's last (none after a
        # layer without operators: whole, as layer_shardings prices the next layer's input)
        inbound = shardings[lo - 1].output if lo > 0 and shardings[lo - 1] else None
        outbound = shardings[hi - 1].output if hi < len(names) and shardings[hi - 1] else None
        mirrors += parallelize(module, names[lo:hi], shardings[lo:hi], tp_mesh, example, inbound, outbound)
    return mirrors


def _stage_example(spec, before: list[tuple[str, nn.Module]], dtype: torch.dtype, device) -> torch.Tensor:
    """Two samples of a stage's input: the model's through the plain units ``before`` it, in
    their own dtype and device, under no_grad, their buffers (BatchNorm's statistics) restored."""
    x = spec.input.make(2, dtype)
    x = torch.zeros(x.shape, dtype=x.dtype)
    saved = [(b, b.detach().clone()) for _, unit in before for b in unit.buffers()]
    with torch.no_grad():
        for _, unit in before:
            p = next(unit.parameters(), None)
            if p is not None and x.is_floating_point():
                x = x.to(p.dtype)
            x = unit(x.to(p.device) if p is not None else x)
        for b, value in saved:
            b.copy_(value)
    return x.to(device, dtype) if x.is_floating_point() else x.to(device)
