"""Extract a LayerGraph from any torch ``nn.Module`` on the meta device.

No real memory is touched: parameters and activations are meta tensors, so GPT-3 175B extracts
on a laptop in seconds.  Each cut unit runs forward and then backward alone, on an input of the
shape the previous unit produced:

- FLOPs from ``torch.utils.flop_counter.FlopCounterMode`` (FLOPs = 2 x MACs);
- bytes saved for backward from ``torch.autograd.graph.saved_tensors_hooks``, counted once per
  storage, parameters and buffers excluded; a unit's input that the previous unit also saves as
  its output (a ReLU keeps its result, the next convolution its input) is one tensor, recorded
  in ``Layer.input_shared_bytes`` so that a stage counts it once;
- bytes read and written by memory-bound operators from a ``TorchDispatchMode`` over every aten op
  that FlopCounterMode does not count (views excluded, they move nothing);
- the boundary size from the unit's output;
- the unit's kernels, and how far the tensor storage alive rises in its backward above what its
  forward left (``Layer.bwd_rise_bytes``), from parsim.model.recording;
- the operator view for sharding (``Layer.ops``): the operators that matter, the module that ran
  each, where each input came from, and which saved bytes each output accounts for.

Identical units (same class, same repr, same input shape) are measured once.

Cut units, in order:
1. ``module.pipeline_units()`` if the module defines it (a list of (name, module));
2. else, for an ``nn.Sequential``, its named children, where a child that is itself a Sequential
   of blocks of one type (ResNet's ``layer1``, GPT's ``layers``) is expanded into its blocks;
3. else the whole module is one unit (it cannot be cut).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from parsim.model.attention import (FUSED_OP, MEGATRON_SOFTMAX_OP, fused_on_meta, register_flop_formulas, window_cuts,
                                     windowed)
from parsim.model.fused_ops import RMS_NORM_OP, ROPE_OP, SWIGLU_OP
from parsim.model.graph import FROM_ELSEWHERE, FROM_LAYER_INPUT, Layer, LayerGraph, OpInfo
from parsim.model.split_backward import weight_output_bytes
from parsim.model.moe import Experts
from parsim.model.recording import FREE_OPS, loss_kernels, storage_key, unit_recordings

TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
                "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                "int64": torch.int64, "int32": torch.int32}

register_flop_formulas()     # fused attention's FLOPs (parsim.model.attention), before any count


@dataclass(frozen=True)
class InputSpec:
    """Shape of one sample (no batch dimension) and its dtype, e.g. (3, 32, 32) float32."""

    shape: tuple[int, ...]
    dtype: str = "float32"

    def make(self, batch: int, float_dtype: torch.dtype) -> torch.Tensor:
        dtype = TORCH_DTYPES[self.dtype]
        if dtype.is_floating_point:
            dtype = float_dtype
        return torch.empty((batch, *self.shape), dtype=dtype, device="meta")


def cut_units(module: nn.Module) -> list[tuple[str, nn.Module]]:
    """The modules at which a pipeline may be cut, in execution order (see module docstring)."""
    if callable(getattr(module, "pipeline_units", None)):
        return list(module.pipeline_units())
    if not isinstance(module, nn.Sequential):
        return [("model", module)]
    units = []
    for name, child in module.named_children():
        kids = list(child.children()) if isinstance(child, nn.Sequential) else []
        if len(kids) > 1 and len({type(k) for k in kids}) == 1 and not isinstance(kids[0], nn.Sequential) \
                and any(True for _ in kids[0].parameters()):
            units += [(f"{name}.{i}", k) for i, k in enumerate(kids)]
        else:
            units.append((name, child))
    return units


class _MemoryBoundBytes(TorchDispatchMode):
    """Sums bytes in + bytes out of every aten op FlopCounterMode does not count."""

    def __init__(self):
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        packet = func.overloadpacket
        if packet not in flop_registry and not func.is_view and packet.__name__ not in FREE_OPS:
            leaves, _ = tree_flatten((args, kwargs, out))
            self.bytes += sum(t.numel() * t.element_size() for t in leaves if isinstance(t, torch.Tensor))
        return out


# aten operator -> (kind, positions of the tensor inputs that matter)
_OP_KINDS = {
    "mm": ("MatMul", (0, 1)), "addmm": ("MatMul", (1, 2)), "bmm": ("BatchMatMul", (0, 1)),
    "baddbmm": ("BatchMatMul", (1, 2)), "convolution": ("Conv2d", (0, 1)), "embedding": ("Embedding", (0,)),
    "native_batch_norm": ("BatchNorm", (0,)), "_native_batch_norm_legit": ("BatchNorm", (0,)),
    "_native_batch_norm_legit_functional": ("BatchNorm", (0,)), "native_layer_norm": ("LayerNorm", (0,)),
    "_softmax": ("Softmax", (0,)),
    "add": ("ElementWise", (0, 1)), "mul": ("ElementWise", (0, 1)), "sub": ("ElementWise", (0, 1)),
    "div": ("ElementWise", (0, 1)), "relu": ("ElementWise", (0,)), "gelu": ("ElementWise", (0,)),
    "native_dropout": ("ElementWise", (0,)), "masked_fill": ("ElementWise", (0,)),
    FUSED_OP: ("Attention", (0, 1, 2)),
    MEGATRON_SOFTMAX_OP: ("Softmax", (0,)),     # Megatron-LM's fused scale, mask and softmax (parsim.model.fused_softmax)
    # the fused kernels of a Llama block (parsim.model.fused_ops): RMSNorm as a norm over the last
    # dimension with its [h] weight (as native_layer_norm), SwiGLU and rotary embeddings elementwise
    RMS_NORM_OP: ("LayerNorm", (0,)), SWIGLU_OP: ("ElementWise", (0, 1)), ROPE_OP: ("ElementWise", (0,)),
}


class _OpRecorder(TorchDispatchMode):
    """Records the operators that matter for sharding: shapes, owned-parameter inputs, the module
    that ran each, and data flow.  Every op's output storage is mapped to its producer: a
    recorded op, or for the others (copies, concatenations) the producer of their first input
    that has one, so that a recorded op's input is traced through views and copies."""

    def __init__(self, param_keys: set[int], input_key: int, tied_keys: frozenset[int] = frozenset()):
        super().__init__()
        self.param_keys, self.tied_keys, self.infos = param_keys, tied_keys, []
        self.weights: set[int] = set(param_keys) | set(tied_keys)   # and the storages computed from them alone
        self.producer: dict[int, int] = {input_key: FROM_LAYER_INPUT}
        self.copies: set[int] = set()           # storages written by unrecorded ops (copies, transposes)
        self.modules: list[str] = []
        self.keep: list[torch.Tensor] = []     # outputs stay alive so that storage keys stay unique
        self.seen: dict[str, int] = {}

    def _from(self, t: torch.Tensor) -> int:
        return self.producer.get(storage_key(t), FROM_ELSEWHERE)

    def _weights_meet(self, args, outs: list[torch.Tensor]) -> bool:
        """Whether an op's tensor arguments (``args`` flattened) hold a weight, or a tensor computed from weights
        alone, beside one from the data path that can carry a gradient (floating point: an embedding's token ids
        carry none) (OpInfo.joins_weight); where they hold weights and no such tensor, ``outs`` are recorded as
        computed from weights alone (Gemma's 1 + w, DiffLlama's lambda, an embedding's lookup)."""
        tensors = [t for t in args if isinstance(t, torch.Tensor)]
        weight = any(storage_key(t) in self.weights for t in tensors)
        data = any(storage_key(t) not in self.weights and self._from(t) != FROM_ELSEWHERE
                   and (t.is_floating_point() or t.is_complex()) for t in tensors)
        if weight and not data:
            self.weights.update(storage_key(t) for t in outs)
        return weight and data

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        entry = _OP_KINDS.get(func.overloadpacket.__name__)
        if entry is None:
            if not func.is_view:
                self._weights_meet(tree_flatten((args, kwargs))[0], outs)
                ins = [self._from(t) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
                source = next((i for i in ins if i != FROM_ELSEWHERE), FROM_ELSEWHERE)
                for t in outs:
                    self.producer.setdefault(storage_key(t), source)
                    self.copies.add(storage_key(t))
                self.keep += outs
            return out
        kind, positions = entry
        aten = func.overloadpacket.__name__
        if kind == "Embedding":
            positions = (0,)            # the weight; the indices carry no layout worth pricing
        tensors = [args[i] for i in positions if i < len(args) and isinstance(args[i], torch.Tensor)]
        first = outs[0]
        module = self.modules[-1] if self.modules else ""
        base = f"{module}:{aten}"
        k = self.seen.get(base, 0)
        self.seen[base] = k + 1
        joins = self._weights_meet(tree_flatten((args, kwargs))[0], outs)
        self.infos.append(dict(kind=kind, aten=aten, input_shapes=tuple(tuple(t.shape) for t in tensors),
                               output_shape=tuple(first.shape), dtype=str(first.dtype).replace("torch.", ""),
                               param_inputs=tuple(storage_key(t) in self.param_keys for t in tensors),
                               tied_inputs=tuple(storage_key(t) in self.tied_keys for t in tensors),
                               joins_weight=joins,
                               base=base, k=k, inputs_from=tuple(self._from(t) for t in tensors),
                               # a copy, or a view that reorders (a transpose: not contiguous)
                               inputs_copied=tuple(storage_key(t) in self.copies or not t.is_contiguous()
                                                   for t in tensors),
                               causal=kind == "Attention" and len(args) > 4 and bool(args[4]),
                               out_key=storage_key(first)))
        for t in outs:
            self.producer.setdefault(storage_key(t), len(self.infos) - 1)
        self.keep += outs
        return out

    def module_hooks(self, unit: nn.Module) -> list:
        def push(name):
            return lambda module, args: self.modules.append(name)

        def pop(module, args, output):
            self.modules.pop()
        handles = []
        for name, m in unit.named_modules():
            if name:
                handles += [m.register_forward_pre_hook(push(name)), m.register_forward_hook(pop)]
        return handles

    def finish(self, saved: dict[int, int], output: torch.Tensor) -> tuple[tuple[OpInfo, ...], int, int]:
        """The OpInfos, each with the saved bytes it produced (through views and copies), the op
        producing ``output``, and the saved bytes of the layer's own input."""
        by_producer: dict[int, int] = {}
        for key, nbytes in saved.items():
            src = self.producer.get(key, FROM_ELSEWHERE)
            by_producer[src] = by_producer.get(src, 0) + nbytes
        ops = []
        for i, info in enumerate(self.infos):
            base, k = info.pop("base"), info.pop("k")
            info.pop("out_key")
            name = base if self.seen[base] == 1 else f"{base}#{k}"
            ops.append(OpInfo(**info, name=name, saved_bytes=by_producer.get(i, 0)))
        return tuple(ops), self._from(output), by_producer.get(FROM_LAYER_INPUT, 0)


class SavedStorages:
    """The storages autograd saves for backward during a forward, as a saved_tensors_hooks pack
    function (``pack``): each storage once, however many views of it are saved, those in
    ``excluded`` (parameters and buffers) left out; ``storage_of`` the tensor's storage (a
    DTensor's: its local shard's).  ``nbytes``: address -> bytes.

    Every recorded storage is held until the recorder is dropped, so that no address it keys is
    freed and reused by a later storage while it records.  Keyed by address alone, a storage a
    branch freed before the forward ended (DeepSeek-V3's router's group scores) left its address to
    a later one, whose entry then replaced it or was taken for it as the allocator happened to
    place them: DeepSeek-V3's MoE layer saved 3,142,991,872, 3,143,254,016 or 3,144,040,448 bytes at
    extraction batch 2 in five processes of one commit, 3,146,399,744 in every one now.  Such a freed
    storage counts, as every other saved one does (3.3 MiB of that layer's 3 GB); counting only
    the survivors depends on when the cyclic garbage collector runs, unless it is run before each
    count, which made extracting the examples 4.5x slower
    (results/2026-11-29-amd-epyc/extraction-determinism.txt)."""

    def __init__(self, excluded=frozenset(), storage_of=lambda t: t.untyped_storage()):
        self.excluded, self.storage_of = excluded, storage_of
        self.nbytes: dict[int, int] = {}
        self._held: list = []

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        storage = self.storage_of(t)
        key = storage._cdata
        if key not in self.excluded and key not in self.nbytes:
            self.nbytes[key] = storage.nbytes()
            self._held.append(storage)
        return t


def _conv_backward_flops(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation, transposed,
                         _output_padding, groups, output_mask, out_shape, **kwargs) -> int:
    """FlopCounterMode's convolution_backward with grouped convolutions counted right: each
    gradient (input, weight) takes as many MACs as the forward (Chetlur et al. 2014, Sec. 3: the
    backward passes are convolutions of the same sizes).  torch 2.13's formula
    (torch.utils.flop_counter.conv_backward_flop) ignores ``groups`` for the weight gradient,
    counting a depthwise convolution's groups x too many (a 64-channel 3x3 depthwise layer on
    16 x 16: 19.2 MFLOP instead of 0.29 MFLOP)."""
    from torch.utils.flop_counter import conv_flop_count

    flops = 0
    if output_mask[0]:
        flops += conv_flop_count(grad_out_shape, w_shape, list(out_shape[0].shape) if hasattr(out_shape[0], "shape")
                                 else list(out_shape[0]), not transposed)
    if output_mask[1]:
        flops += conv_flop_count(x_shape, w_shape, grad_out_shape, transposed)
    return flops


def _flop_counter() -> FlopCounterMode:
    """FlopCounterMode with the grouped-convolution backward counted right (_conv_backward_flops)."""
    return FlopCounterMode(display=False, custom_mapping={torch.ops.aten.convolution_backward: _conv_backward_flops})


def _measure_unit(unit: nn.Module, x: torch.Tensor, needs_input_grad: bool, excluded: set[int],
                  owned_params: set[int], mode):
    """Forward then backward of one unit on meta under ``mode`` (extract_graph's fused_on_meta);
    returns (stats dict, output tensor)."""
    recorded = SavedStorages(excluded)
    dropout_calls = mode.dropout_calls
    x = x.detach().requires_grad_(needs_input_grad)
    fwd_flops, fwd_bytes = _flop_counter(), _MemoryBoundBytes()
    tied = frozenset(storage_key(p) for p in unit.parameters()) - owned_params
    recorder = _OpRecorder(owned_params, storage_key(x), tied)
    handles = recorder.module_hooks(unit)
    try:
        with fwd_flops, fwd_bytes, recorder, torch.autograd.graph.saved_tensors_hooks(recorded.pack, lambda t: t):
            y = unit(x)
    finally:
        for h in handles:
            h.remove()
    saved = recorded.nbytes
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"a cut unit must return one tensor, got {type(y).__name__}")
    bwd_flops, bwd_bytes = _flop_counter(), _MemoryBoundBytes()
    if y.requires_grad:
        with bwd_flops, bwd_bytes:
            y.backward(torch.empty_like(y))
    ops, ops_output, input_saved = recorder.finish(saved, y)
    kernels, rise = unit_recordings(unit, x, needs_input_grad)
    window = getattr(unit, "attention_window", 0)     # parsim.model.hf.Decoder's; a unit without one has none
    # a unit whose attention sees a sliding window: its fused attention's work at the window's share
    ops, kernels, fwd_removed, bwd_removed = windowed(ops, kernels, window, x.shape[0])
    saved_bytes = _batch_scaled_saved_bytes(unit, x, sum(saved.values()), excluded)
    cpu_saved_bytes = saved_bytes
    # attention with dropout, or a sliding window shorter than the sequence: as a CPU runs it too (cpu_attention)
    banded = window_cuts(window, x.shape[1])
    if mode.dropout_calls > dropout_calls or banded:
        mode.fuse_dropout = False
        if banded:
            unit.banded_on_meta = True             # parsim.model.hf.Decoder: its banded mask on meta too
        try:
            cpu_saved_bytes = _batch_scaled_saved_bytes(unit, x, _saved_storage_bytes(unit, x, excluded), excluded)
        finally:
            mode.fuse_dropout = True
            if banded:
                del unit.banded_on_meta
    stats = dict(kernels=kernels, bwd_rise=rise, fwd_flops=fwd_flops.get_total_flops() - fwd_removed,
                 bwd_flops=bwd_flops.get_total_flops() - bwd_removed,
                 fwd_mem_bytes=fwd_bytes.bytes, bwd_mem_bytes=bwd_bytes.bytes,
                 saved_bytes=saved_bytes, cpu_saved_bytes=cpu_saved_bytes,
                 output_bytes=y.numel() * y.element_size(),
                 ops=ops, ops_output=ops_output, input_saved_bytes=input_saved,
                 input_storage_saved_bytes=saved.get(storage_key(x), 0),   # the input itself, no copy of it
                 output_saved_bytes=saved.get(storage_key(y), 0))
    return stats, y.detach()


def _experts(unit: nn.Module) -> Experts | None:
    """A unit's mixture of experts, where it states one (parsim.model.hf.Decoder.moe)."""
    moe = getattr(unit, "moe", None)
    return moe if isinstance(moe, Experts) else None


def _batch_scaled_saved_bytes(unit: nn.Module, x: torch.Tensor, saved_bytes: int, excluded: set[int]) -> float:
    """Of ``saved_bytes`` (saved at ``x``'s batch n), the part that grows with the batch: the unit
    runs forward again at 2n and the difference is n samples' worth.  What does not grow (BatchNorm's
    per-channel mean and inverse std., 8 bytes per channel) would otherwise be multiplied by the
    micro-batch: 80 kB per sample for ResNet-50 at extraction batch 2, 20 MB at micro-batch 256."""
    n = x.shape[0]
    x2 = torch.empty((2 * n, *x.shape[1:]), dtype=x.dtype, device=x.device).requires_grad_(x.requires_grad)
    return float(_saved_storage_bytes(unit, x2, excluded) - saved_bytes)


def _saved_storage_bytes(unit: nn.Module, x: torch.Tensor, excluded: set[int]) -> int:
    """The bytes of the storages autograd saves in one forward of ``unit`` on ``x`` (SavedStorages)."""
    recorded = SavedStorages(excluded)
    with torch.autograd.graph.saved_tensors_hooks(recorded.pack, lambda t: t):
        unit(x)
    return sum(recorded.nbytes.values())


def extract_graph(model: nn.Module, input_spec: InputSpec, *, name: str = "model", dtype: str = "fp32",
                  batch: int = 2) -> LayerGraph:
    """Extract the LayerGraph of ``model`` (moved to meta) for one sample of ``input_spec``.

    Counts are taken on a batch of ``batch`` samples and divided by it; batch 2 keeps BatchNorm's
    "more than one value per channel" check happy.  Terms that do not scale with the batch (a
    causal-mask buffer, BatchNorm's running statistics) are excluded or negligible.
    ``scaled_dot_product_attention`` is recorded as the fused kernel a GPU runs
    (parsim.model.attention.fused_on_meta); a unit whose attention has dropout, or a sliding window
    shorter than its sequence, is measured again as a CPU runs it (parsim.model.attention.cpu_attention),
    its saved bytes kept in the graph's ``cpu_graph``.
    """
    with fused_on_meta() as mode:
        return _extract(model, input_spec, name, dtype, batch, mode)


def _extract(model: nn.Module, input_spec: InputSpec, name: str, dtype: str, batch: int, mode) -> LayerGraph:
    float_dtype = TORCH_DTYPES[dtype]
    model = model.to(device="meta")
    if float_dtype != torch.float32:
        model = model.to(float_dtype)
    model.train()
    units = cut_units(model)
    excluded = {storage_key(t) for t in model.parameters()} | {storage_key(t) for t in model.buffers()}
    owner_of: dict[int, str] = {}          # id of a parameter -> the first unit that uses it
    cache: dict[tuple, tuple[dict, torch.Tensor]] = {}
    x = input_spec.make(batch, float_dtype)
    input_bytes = x.numel() * x.element_size() / batch
    layers = []
    single_value: list[str] = []          # units where a BatchNorm sees one value per channel per sample
    prev_output_saved = 0.0               # per sample: what the previous unit saves of its own output
    cpu_extra = []                        # per sample, per layer: what a CPU saves beyond it (cpu_attention)

    def bn_check(name):
        def hook(module, args):
            x = args[0]
            if x.dim() >= 2 and x.numel() // (x.shape[0] * x.shape[1]) == 1 and name not in single_value:
                single_value.append(name)
        return hook
    handles = [m.register_forward_pre_hook(bn_check(unit_name))
               for unit_name, unit in units for m in unit.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    for i, (unit_name, unit) in enumerate(units):
        needs_grad = i > 0 and x.is_floating_point()
        attrs = tuple(sorted((k, v) for k, v in vars(unit).items()
                             if not k.startswith("_") and isinstance(v, (int, float, str, bool, tuple))))
        params = [p for p in unit.parameters() if id(p) not in owner_of]
        tied: dict[str, int] = {}          # parameters an earlier unit owns, by owner
        for p in unit.parameters():
            if id(p) in owner_of:
                tied[owner_of[id(p)]] = tied.get(owner_of[id(p)], 0) + p.numel()
        owner_of.update((id(p), unit_name) for p in params)
        key = (type(unit), repr(unit), attrs, tuple(x.shape), x.dtype, needs_grad, tuple(tied))
        if key not in cache:     # owned parameters: those not tied to an earlier unit's
            cache[key] = _measure_unit(unit, x, needs_grad, excluded, {storage_key(p) for p in params}, mode)
        stats, y = cache[key]
        count = sum(p.numel() for p in params)
        experts = _experts(unit)
        layers.append(Layer(
            name=unit_name,
            fwd_flops=stats["fwd_flops"] / batch, bwd_flops=stats["bwd_flops"] / batch,
            param_count=count, param_bytes=sum(p.numel() * p.element_size() for p in params),
            output_bytes=stats["output_bytes"] / batch, saved_bytes=stats["saved_bytes"] / batch,
            fwd_mem_bytes=stats["fwd_mem_bytes"] / batch, bwd_mem_bytes=stats["bwd_mem_bytes"] / batch,
            max_param_bytes=max((p.numel() * p.element_size() for p in unit.parameters()), default=0),
            ops=stats["ops"], ops_output=stats["ops_output"], input_saved_bytes=stats["input_saved_bytes"] / batch,
            kernels=stats["kernels"], tied=tuple(tied.items()), w_held_bytes=weight_output_bytes(stats["ops"]) / batch,
            bwd_rise_fixed_bytes=stats["bwd_rise"][0], bwd_rise_bytes=stats["bwd_rise"][1],
            # the unit's input is the previous unit's output: one tensor, measured here on two storages
            input_shared_bytes=min(prev_output_saved, stats["input_storage_saved_bytes"] / batch),
            experts=experts,
            # a MoE unit whose output is not its input's stream (a head with a multi-token-prediction
            # block) routes its input's tokens
            routed_bytes=(x.numel() * x.element_size() / batch
                          if experts is not None and y.shape != x.shape else 0.0)))
        prev_output_saved = stats["output_saved_bytes"] / batch
        cpu_extra.append((stats["cpu_saved_bytes"] - stats["saved_bytes"]) / batch)
        x = torch.empty_like(y, device="meta")
    for h in handles:
        h.remove()
    loss = loss_kernels(x)
    reason = ""
    if single_value:
        reason = (f"BatchNorm in {', '.join(single_value[:3])} sees one value per channel per sample; "
                  "training-mode BatchNorm needs micro-batches of at least 2 samples")
    graph = LayerGraph(name=name, layers=tuple(layers), dtype=dtype if dtype in ("fp32", "fp16", "bf16") else "fp32",
                       input_bytes=input_bytes, min_microbatch=2 if single_value else 1, min_microbatch_reason=reason,
                       extraction_batch=batch, loss_kernels=loss,
                       loss_logits_bytes=layers[-1].output_bytes if loss else 0.0,
                       losses=1 + sum(_extra_losses(unit) for _, unit in units))
    if not any(cpu_extra):
        return graph
    cpu = tuple(replace(layer, saved_bytes=layer.saved_bytes + extra) for layer, extra in zip(layers, cpu_extra))
    return replace(graph, cpu_graph=replace(graph, layers=cpu))


def _extra_losses(unit: nn.Module) -> int:
    """The losses a unit computes besides the model's own (parsim.model.hf.Head's ``losses``: a
    multi-token-prediction module's); 0 for any other unit, whatever else it names ``losses``."""
    n = getattr(unit, "losses", 0)
    return n if isinstance(n, int) and not isinstance(n, bool) else 0
