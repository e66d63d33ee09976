"""LayerGraph: the ordered list of cut units of a model, with per-sample costs.

Conventions (stated once for the whole package):
- Every ``_flops`` is floating-point operations, FLOPs = 2 x MACs, as counted by
  ``torch.utils.flop_counter.FlopCounterMode`` (matmul, conv and attention kernels only).
- Every per-sample quantity is for one sample of the model's input (one image, one sequence).
- ``*_mem_bytes`` are bytes read plus written by memory-bound operators (BatchNorm, ReLU,
  residual adds, softmax, ...), the operators FlopCounterMode does not count.  A roofline
  prices them by bytes, not FLOPs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cached_property
from operator import attrgetter
from typing import Iterable, NamedTuple, Sequence

from parsim.model.attention import attention_of, core_attention_kernels, fused_attention_flops
from parsim.model.moe import Experts
from parsim.model.recompute import MODULE_MODES, Recompute, recompute_mode

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}
ELEMENT_BYTES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}    # OpInfo.dtype -> bytes
# The objective (parsim.exec.objective.loss_fn) is cross-entropy in fp32 over the last layer's
# output, outside every layer: its log_softmax keeps its fp32 result for backward, and its backward
# holds two more of that size at once (nll_loss_backward's gradient, _log_softmax_backward_data's).
# Measured with torch.profiler's allocation trace, examples/gpt_small_local.yaml at micro-batch 2
# (2048 classes per token): three 2 MiB buffers at the step's peak, inside LogSoftmaxBackward0.
LOSS_BYTES_PER_ELEMENT = 4
LOSS_BACKWARD_BUFFERS = 2
# The vocabulary-parallel loss (parsim.exec.vocab_parallel) keeps its slice's softmax in fp32 and
# its backward allocates one gradient of that size (softmax x grad, the target's column updated in
# place).  Measured with torch.profiler's allocation trace on 2 gloo ranks, 64 tokens x 2048
# classes a rank: 525,828 bytes at the backward's peak for a 524,288-byte slice
# (tests/test_vocab_parallel.py).
VOCAB_PARALLEL_LOSS_BACKWARD_BUFFERS = 1


# Where an operator input comes from, besides an earlier operator's index in Layer.ops.
FROM_LAYER_INPUT = -1        # the layer's input: the previous layer's output
FROM_ELSEWHERE = -2          # a parameter, a buffer or a constant


@dataclass(frozen=True)
class OpInfo:
    """One operator that matters for sharding, as recorded in the forward pass on the meta device.
    Shapes and bytes include the extraction batch (LayerGraph.extraction_batch samples)."""

    # MatMul | BatchMatMul | Conv2d | Embedding | ElementWise | BatchNorm | LayerNorm | Softmax |
    # Attention (fused: inputs Q [b, h, s, d], K and V [b, g, s, d]; parsim.model.attention)
    kind: str
    aten: str                                   # the aten operator, e.g. "addmm"
    input_shapes: tuple[tuple[int, ...], ...]   # tensor inputs that matter (e.g. addmm: mat1, mat2)
    output_shape: tuple[int, ...]
    dtype: str
    param_inputs: tuple[bool, ...]              # which of those inputs are (views of) parameters this layer owns
    name: str = ""                              # "<module path>:<aten>[#k]", module path relative to the layer
    inputs_from: tuple[int, ...] = ()           # producer of each input: an op index or FROM_*
    saved_bytes: int = 0                        # bytes of this op's output that autograd keeps for backward
    inputs_copied: tuple[bool, ...] = ()        # input reached through a copy (e.g. a transpose made contiguous)
    tied_inputs: tuple[bool, ...] = ()          # which inputs are parameters an earlier layer owns (Layer.tied)
    causal: bool = False                        # Attention: causally masked (half the score blocks)
    window: int = 0                             # Attention: each query's keys at most (a sliding window), 0 every one
    # a weight (own or tied; or a tensor computed from weights alone, as Gemma's RMSNorm scale 1 + w) meets the data
    # path here, among any of the op's tensor arguments (a norm's affine weight too): weight_output_bytes
    joins_weight: bool = False

    @property
    def module(self) -> str:
        return self.name.split(":")[0]

    @property
    def flops(self) -> float:
        """Forward FLOPs of a contraction or fused attention (2 x MACs; FLOPs convention in the
        module docstring), 0 for the others (their cost is memory traffic)."""
        if self.kind == "MatMul":
            (m, k), (_, n) = self.input_shapes
            return 2.0 * m * k * n
        if self.kind == "BatchMatMul":
            (b, m, k), (_, _, n) = self.input_shapes
            return 2.0 * b * m * k * n
        if self.kind == "Conv2d":     # every output element: Ci/groups * kh * kw MACs
            return 2.0 * math.prod(self.output_shape) * math.prod(self.input_shapes[1][1:])
        if self.kind == "Attention":
            (b, h, s_q, d), (_, _, s_k, _) = self.input_shapes[:2]
            return fused_attention_flops(b, h, s_q, s_k, d, self.causal, self.window)
        return 0.0

    @property
    def output_elements(self) -> int:
        return math.prod(self.output_shape)

    def input_copied(self, j: int) -> bool:
        """Whether input j reached this op through a copy (unknown counts as a copy)."""
        return self.inputs_copied[j] if j < len(self.inputs_copied) else True


class ConvWindow(NamedTuple):
    """A convolution's window, as the operator was called: what a library chooses its algorithm
    by besides the GEMM shape (``parsim.cost.conv_backend``)."""

    kernel: tuple[int, ...]        # (kh, kw)
    stride: tuple[int, ...]
    dilation: tuple[int, ...]
    transposed: bool
    input_elements: int            # per sample: C_in x H x W
    padding: tuple[int, ...] = ()  # per spatial dimension; () unknown (taken as no taps skipped)
    input_hw: tuple[int, ...] = () # the input's spatial sizes (H, W)


@dataclass(frozen=True)
class Kernel:
    """One kernel (aten operator) of a layer's forward or backward, as extraction recorded it.

    Every size is affine in the micro-batch b, stored as (fixed, per sample): q(b) = q0 + q1*b.
    That is exact for the operators here (a convolution's implicit GEMM has M = b*Ho*Wo; a weight
    gradient contracts over K = b*Ho*Wo; a parameter-only op does not grow with b).

    - ``phase``: "F" (forward), "I" (backward work that is not a weight gradient) or "W" (a weight
      gradient: a backward contraction whose K grows with the batch while M and N do not);
    - ``klass``: "conv", "matmul", "attention" (compute kernels) or "mem" (memory-bound: norms,
      activations, adds, copies); TF32 and Ascend precision modes treat conv and matmul apart;
    - ``flops`` (FLOPs = 2 x MACs, as FlopCounterMode counts), ``bytes`` read plus written;
    - ``gemm``: ((m0, m1), (n0, n1), (k0, k1), (g0, g1)) for GEMM-shaped kernels, () otherwise:
      M x K times K x N, g independent such products (a batched matmul's batch, a grouped
      convolution's groups); convolutions as implicit GEMM (Chetlur et al. 2014, "cuDNN");
    - ``conv``: the convolution's window (``ConvWindow``) for convolution kernels, else None;
    - ``head_dim``: a fused attention kernel's head dimension (Q's last: the reduction length of
      its QK^T), else 0; parsim.cost.kernels prices a short one (``attention_head_efficiency``).
    """

    phase: str
    op: str
    klass: str
    flops: tuple[float, float] = (0.0, 0.0)
    bytes: tuple[float, float] = (0.0, 0.0)
    gemm: tuple = ()
    conv: ConvWindow | None = None
    head_dim: int = 0

    def at(self, b: int) -> tuple[float, float]:
        """(FLOPs, bytes) at micro-batch b."""
        return self.flops[0] + self.flops[1] * b, self.bytes[0] + self.bytes[1] * b

    def gemm_at(self, b: int) -> tuple[float, float, float, float] | None:
        """(M, N, K, groups) at micro-batch b, or None for a kernel that is no GEMM."""
        if not self.gemm:
            return None
        (m0, m1), (n0, n1), (k0, k1), (g0, g1) = self.gemm
        return m0 + m1 * b, n0 + n1 * b, k0 + k1 * b, g0 + g1 * b


@dataclass(frozen=True)
class Layer:
    """One cut unit (ResNet: the stem, one Bottleneck, the head; GPT: one decoder block)."""

    name: str
    fwd_flops: float            # per sample
    bwd_flops: float            # per sample (grad of inputs and of weights)
    param_count: int            # parameters first owned by this layer (tied weights count once)
    param_bytes: int            # in the extraction dtype
    output_bytes: float         # per sample: the activation that crosses a stage boundary
    saved_bytes: float          # per sample: tensors autograd keeps for backward
    fwd_mem_bytes: float = 0.0  # per sample, memory-bound operators, forward
    bwd_mem_bytes: float = 0.0  # per sample, memory-bound operators, backward
    max_param_bytes: int = 0    # largest single parameter: its gradient's temporary in backward
    # Operator view for operator-level sharding (OpInfo per operator, forward order); empty if unknown.
    ops: tuple = field(default=(), compare=False, repr=False)
    ops_output: int = field(default=FROM_ELSEWHERE, compare=False, repr=False)   # the op producing the output
    input_saved_bytes: float = field(default=0.0, compare=False)   # per sample: of saved_bytes, the layer's input
    # Per sample: of input_saved_bytes, what the previous layer already saves as its own output (ResNet:
    # a Bottleneck's last ReLU keeps its result, and the next block's convolutions keep the same tensor
    # as their input).  One storage, so it is counted once when both layers run on one rank
    # (LayerGraph.stage_saved_bytes); a stage's first layer keeps its own copy, the received tensor.
    input_shared_bytes: float = field(default=0.0, compare=False)
    # Tensor-parallel communication per sample, set by parsim.shard.graph.shard_graph: a tuple of
    # (phase "F" | "B" | "grad" | "loss", redistribution Step, device matrix); "loss": the
    # loss's, after the last layer's forward, once per micro-batch (shard.graph.loss_steps).
    tp_comm: tuple = field(default=(), compare=False, repr=False)
    # Of the unsharded layer's work, the share one device of its tensor-parallel group does (its
    # FLOPs' share; its memory-bound bytes' for a layer without FLOPs); 1.0 unsharded.  A profiled
    # cost model, which times whole layers, scales by it.
    tp_share: float = 1.0
    # Activation recomputation (parsim.model.recompute): per sample, the bytes the layer's backward
    # re-creates by re-running (part of) its forward; 0 when the layer is not recomputed.  Full
    # (Chen et al. 2016; Megatron's "full" recompute): the layer keeps only its input (saved_bytes)
    # and its backward re-runs the whole forward, ``recompute_part`` None.  Selective (Korthikanti
    # et al. 2022, Sec. 5): the backward re-runs only ``recompute_part``, the core attention as a
    # layer of its own (its forward kernels and FLOPs on this device), re-creating its s x s tensors.
    recompute_bytes: float = 0.0
    recompute_part: "Layer | None" = field(default=None, compare=False, repr=False)
    # Kernel view for the kernel-level cost model (parsim.cost.kernels), forward then backward;
    # empty when unknown (an explicit layers: table), then the cost model prices the layer whole.
    kernels: tuple = field(default=(), compare=False, repr=False)
    # Parameters this layer uses that an earlier layer owns (counted in that layer's param_count):
    # (owner's name, parameters), per device under tensor parallelism.  The GPT's head computes its
    # logits with the word embedding's weight.  A stage that holds this layer without its owner
    # keeps a copy (LayerGraph.held_param_count).
    tied: tuple[tuple[str, int], ...] = ()
    # Per sample, under a split backward: the gradients of the outputs of the operators where a
    # weight meets the data (parsim.model.split_backward), which the input-gradient step (I) keeps
    # for the weight-gradient step (W) of the same micro-batch.  torch's stage_backward_input holds
    # them at the nodes where a weight's path meets the input's (pipelining/_backward.py, the param
    # groups' "intermediates"); Qi et al. 2023 (zero bubble), Sec. 2: W needs the output gradient.
    # Held from I until W.
    w_held_bytes: float = field(default=0.0, compare=False)
    # Context parallelism (parsim.cost.context.context_parallel_graph): the share of each sequence's
    # tokens one device holds, 1/cp (a profiled or kernel-level cost model scales by it, as by
    # tp_share); per sample, the bytes of the K and V chunks one step of the attention's ring sends
    # from one device, and the attention's forward FLOPs on one device (QK^T and AV, what the
    # ring's steps share); both 0 for a layer without attention or without context parallelism.
    seq_share: float = 1.0
    cp_kv_bytes: float = field(default=0.0, compare=False)
    attention_flops: float = field(default=0.0, compare=False)
    # A mixture-of-experts layer's experts (parsim.model.moe), unsharded; None for a dense layer.
    # Its routed experts' kernels are the grouped GEMMs (groups = experts.experts) in ``kernels``.
    experts: Experts | None = field(default=None, compare=False, repr=False)
    # Per sample, the hidden stream a MoE layer's experts route, where it is not the layer's output
    # (0: the output): a head holding a multi-token-prediction block routes its input's tokens and
    # outputs logits (parsim.model.hf.Head; parsim.cost.experts.local_tokens)
    routed_bytes: float = field(default=0.0, compare=False)
    # How far the storage alive rises in this layer's backward above what its forward left, measured on meta
    # (parsim.model.recording._record_kernels; affine in the batch: per step, per sample): the gradient entering
    # it and every temporary its backward's formulas make, less the saved tensors freed as its nodes run, the
    # parameters' gradients left out.  Sees what the weight operators' working sets do not (a squared ReLU's
    # PowBackward0 keeps three tensors of its input's size: parsim.cost.memory.backward_workspace_bytes).
    bwd_rise_fixed_bytes: float = field(default=0.0, compare=False)
    bwd_rise_bytes: float = field(default=0.0, compare=False)

    @property
    def active_param_count(self) -> int:
        """Parameters one token passes through: all but the routed experts it is not sent to."""
        return self.param_count - (self.experts.inactive_params if self.experts else 0)

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("ops", "ops_output", "tp_comm", "input_saved_bytes", "input_shared_bytes", "kernels",
                  "seq_share", "cp_kv_bytes", "attention_flops", "experts", "recompute_part", "routed_bytes",
                  "bwd_rise_fixed_bytes", "bwd_rise_bytes"):
            d.pop(k)
        if self.experts is not None:
            d["active_param_count"] = self.active_param_count
            d["experts"] = self.experts.to_dict()
        return d

    @property
    def recomputes_forward(self) -> bool:
        """Whether the backward re-runs the whole forward, its tensor-parallel collectives
        included (full recomputation); selective recomputation re-runs only the core attention,
        which communicates nothing."""
        return bool(self.recompute_bytes) and self.recompute_part is None

    @property
    def recomputes_dispatch(self) -> bool:
        """Whether the backward re-runs a MoE layer's token dispatch and combine: its whole forward
        (full), or its MoE block (the ``moe`` mode's part carries the layer's experts)."""
        return self.recomputes_forward or (self.recompute_part is not None and self.recompute_part.experts is not None)


_TWIN_FIELDS = tuple(f.name for f in fields(Layer) if f.name != "name")


def _field_key(value):
    """A layer field in a twin's signature (twin_signature): numbers, text and flags by value, and
    a MoE layer's Experts too (a frozen value of integers: each decoder layer carries its own copy,
    equal to its neighbours'); a layer it carries (a selective recompute's ``recompute_part``,
    named after its layer) by its own signature; anything else (the kernels, operators and steps a
    layer carries) by identity (the graph holds them, and identical blocks share them)."""
    if value is None or isinstance(value, (int, float, str, bool, Experts)):
        return value
    return ("layer", twin_signature(value)) if isinstance(value, Layer) else ("id", id(value))


_TWIN_VALUES = attrgetter(*_TWIN_FIELDS)
_BY_VALUE = frozenset({type(None), int, float, str, bool, Experts})    # _field_key's own, read by value


def twin_signature(layer: Layer) -> tuple:
    """Every field of ``layer`` but its name (_field_key): two layers of one graph with the same
    signature hold the same work, and a rule that reads a layer's content, not its name, prices
    them alike (a transformer's identical blocks: parsim.sim.prices' layer classes).  A field of a
    type _field_key keeps as it is skips the call (the planner signs tens of thousands of layers)."""
    return tuple([v if type(v) in _BY_VALUE else _field_key(v) for v in _TWIN_VALUES(layer)])


@dataclass(frozen=True)
class LayerGraph:
    name: str
    layers: tuple[Layer, ...]
    dtype: str = "fp32"          # dtype the byte counts were taken in
    input_bytes: float = 0.0     # per sample, what the first stage reads
    # Smallest trainable micro-batch: 2 when a BatchNorm sees one value per channel per sample
    # (e.g. ResNet-50's layer4 at 32x32 input), since training-mode BatchNorm needs two.
    min_microbatch: int = 1
    min_microbatch_reason: str = ""
    extraction_batch: int = 2    # samples in the shapes of Layer.ops
    tp: int = 1                  # > 1: per-device layers of a tensor-parallel group (parsim.shard.graph)
    recompute: Recompute = Recompute.NONE   # what layers recompute (LayerGraph.with_recompute); bools: full / none
    # under full recompute, the layers recomputed when not all are (ParallelConfig.recomputed_layers:
    # Megatron's block method); None: every layer as ``recompute`` says
    recompute_only: frozenset | None = None
    cp: int = 1                  # > 1: per-device layers of a context-parallel group (s/cp tokens per sequence)
    # > 1: the last layer's output is cut into this many pieces over the tensor-parallel group and
    # gathered whole for the loss, which then holds the whole; 1 also where the loss takes a split
    # by classes where it lies (vocabulary-parallel, parsim.shard.graph.loss_steps)
    loss_gather_ways: int = 1
    loss_vocab_parallel: bool = False     # the loss takes the last layer's class split where it lies
    fp8: bool = False            # Linear GEMMs in FP8 beside bf16 (parsim.model.fp8.fp8_graph)
    # > 1: per-device layers of one rank of an expert-parallel group (parsim.cost.experts), its MoE
    # layers as the busiest rank runs them at routing imbalance ``moe_imbalance``
    ep: int = 1
    moe_imbalance: float = 1.0
    # the routed experts' tensor-parallel size on a tp > 1 graph (1: whole on each device beside
    # attention's tp, or tp; parsim.cost.experts.fold_experts): MoE Parallel Folding
    etp: int = 1
    # The loss's kernels (parsim.model.loss), as extraction recorded them on the last layer's output
    # of ``loss_logits_bytes`` per sample, whole: the objective the run computes after the last
    # layer's forward and before its backward (LayerGraph.loss_layer prices it on the device).  ()
    # for a graph built by hand, which prices no loss.
    loss_kernels: tuple = field(default=(), compare=False, repr=False)
    loss_logits_bytes: float = 0.0
    # The cross-entropies over the last layer's logits the run computes: 1, and 1 more per
    # multi-token-prediction depth (parsim.model.hf.MultiTokenPrediction: same vocabulary, same
    # tokens, priced with the main loss on the last layer's device; Megatron-Core keeps its MTP
    # layers on the last pipeline stage)
    losses: int = 1
    # The graph as a CPU runs it, where that differs (None: this graph): torch on a CPU runs attention
    # with dropout unfused, and a sliding window through its banded mask with grouped KV heads expanded,
    # both of which save more for backward (parsim.model.attention.cpu_attention);
    # each layer's saved_bytes as extraction measured them so.  parsim.shard.prepare.per_device_graph
    # takes it for a CPU cluster.
    cpu_graph: "LayerGraph | None" = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "recompute", recompute_mode(self.recompute))
        names = [layer.name for layer in self.layers]
        if len(set(names)) != len(names):
            raise ValueError(f"layer names must be unique: {names}")

    def __len__(self) -> int:
        return len(self.layers)

    @cached_property
    def op_index(self) -> dict[str, tuple[int, int]]:
        """"<layer>/<op>" -> (layer index, op index) of every operator: the searched layouts name
        operators so (parsim.shard.graph.select); built once per graph."""
        return {f"{layer.name}/{op.name}": (li, oi) for li, layer in enumerate(self.layers)
                for oi, op in enumerate(layer.ops)}

    @property
    def names(self) -> list[str]:
        return [layer.name for layer in self.layers]

    def index(self, name: str) -> int:
        return self.names.index(name)

    @property
    def param_count(self) -> int:
        return sum(layer.param_count for layer in self.layers)

    @property
    def param_bytes(self) -> int:
        return sum(layer.param_bytes for layer in self.layers)

    @property
    def active_param_count(self) -> int:
        """Parameters one token passes through (Layer.active_param_count; param_count when dense)."""
        return sum(layer.active_param_count for layer in self.layers)

    @property
    def moe(self) -> bool:
        return any(layer.experts is not None for layer in self.layers)

    @property
    def mtp_in_head(self) -> bool:
        """Whether the last layer holds a multi-token-prediction module (parsim.model.hf.Head): the
        graph's second loss is its."""
        return self.losses > 1

    def held_param_count(self, held: Iterable[int]) -> int:
        """Parameters one device holds for the layers at indices ``held``: their own, plus one copy
        of each tied weight whose owner is not among them.  Megatron keeps the word embedding on
        both the first and the last pipeline stage and all-reduces its gradient between the two
        (Shoeybi et al. 2019, Sec. 3; megatron/core/distributed/finalize_model_grads.py,
        _allreduce_word_embedding_grads); parsim's executor does the same
        (parsim.exec.grad_sync.TiedGrads)."""
        held = set(held)
        copies: dict[str, int] = {}
        for i in held:
            for owner, n in self.tied_copies(i, held):
                copies[owner] = max(copies.get(owner, 0), n)
        return sum(self.layers[i].param_count for i in held) + sum(copies.values())

    def tied_copies(self, i: int, held: set[int]) -> list[tuple[str, int]]:
        """(owner, parameters) of layer i's tied weights whose owner is not in ``held``: the copy
        a device holding layer i without the owner keeps."""
        return [(owner, n) for owner, n in self.layers[i].tied if self.index(owner) not in held]

    def sharing(self, held: Iterable[int]) -> set[int]:
        """Of the layers at indices ``held``, those that share a weight with another of them: a
        tied weight's owner and its users, when both are held (one parameter, which FSDP keeps in
        their common ancestor's unit: parsim.cost.comm.fsdp_units)."""
        held = set(held)
        out: set[int] = set()
        for i in held:
            for owner, _ in self.layers[i].tied:
                if self.index(owner) in held:
                    out |= {i, self.index(owner)}
        return out

    @property
    def fwd_flops(self) -> float:
        return sum(layer.fwd_flops for layer in self.layers)

    @property
    def bwd_flops(self) -> float:
        return sum(layer.bwd_flops for layer in self.layers)

    @property
    def saved_bytes(self) -> float:
        """Per sample, what the whole model keeps for backward on one rank."""
        return self.stage_saved_bytes(0, len(self.layers))

    @property
    def loss_saved_bytes(self) -> float:
        """Per sample, what the loss keeps for backward: log_softmax's fp32 result, one element per
        output element of the last layer (LOSS_BYTES_PER_ELEMENT), gathered whole under tensor
        parallelism (loss_gather_ways), for each of the ``losses``."""
        return (self.layers[-1].output_bytes * self.loss_gather_ways / DTYPE_BYTES[self.dtype]
                * LOSS_BYTES_PER_ELEMENT * self.losses)

    @cached_property
    def loss_layer(self) -> "Layer | None":
        """The loss on one device as a layer of memory-bound kernels, without parameters or output:
        its forward (F) runs after the last layer's, its backward (I; B) before the last layer's.
        Its share of the recorded kernels is the logits this device's loss takes (the last layer's
        output, gathered whole where loss_gather_ways > 1; a context-parallel device's s/cp
        tokens) over those recorded, times the ``losses``.  A vocabulary-parallel loss (parsim.exec.vocab_parallel) is
        priced as the whole loss's kernels on its slice.  None where no loss was recorded."""
        if not self.loss_kernels or not self.loss_logits_bytes:
            return None
        share = self.layers[-1].output_bytes * self.loss_gather_ways / self.loss_logits_bytes * self.losses

        def per_sample(phase: str) -> float:
            return share * sum(k.bytes[1] for k in self.loss_kernels if k.phase == phase)
        return Layer(name="loss", fwd_flops=0.0, bwd_flops=0.0, param_count=0, param_bytes=0, output_bytes=0.0,
                     saved_bytes=0.0, fwd_mem_bytes=per_sample("F"), bwd_mem_bytes=per_sample("I"),
                     kernels=self.loss_kernels, tp_share=share)

    def stage_saved_bytes(self, start: int, stop: int) -> float:
        """Per sample, what layers [start, stop) keep for backward on one rank: each layer's saved
        bytes, less the input a layer shares with the previous layer's saved output when both are
        in the range (the range's first layer holds its input itself), and, for a range that ends
        the model, the loss's (loss_saved_bytes; [n, n) holds only that)."""
        layers = self.layers[start:stop]
        loss = self.loss_saved_bytes if stop == len(self.layers) else 0.0
        return sum(layer.saved_bytes for layer in layers) - sum(layer.input_shared_bytes for layer in layers[1:]) + loss

    def with_recompute(self, mode: Recompute | str | bool = Recompute.FULL,
                       only: frozenset[int] | None = None) -> "LayerGraph":
        """The graph with every layer (``only``: the layers of those indices, under full
        recomputation alone) recomputed in backward as ``mode`` says (parsim.model.recompute):

        - full (Chen et al. 2016; Megatron's full recompute, Narayanan et al. 2021 Sec. 3.5): a
          layer keeps only its input, the previous layer's output (the model's input for the
          first), and its backward re-creates its saved bytes;
        - selective (Korthikanti et al. 2022, Sec. 5): a layer with eager attention drops the s x s
          tensors autograd keeps between QK^T and AV (``Attention.scores_saved_bytes``, on this
          device its tensor-parallel share, the heads being split as its FLOPs are) and its
          backward re-runs the core attention's forward kernels (``recompute_part``); a layer
          with fused attention or none is unchanged (nothing to recompute selectively);
        - deepseek (DeepSeek-V3 Sec. 3.2.3): the norms, MLA's up-projections and the SwiGLU
          products; moe (Megatron-Core's --recompute-modules layernorm moe): the block norms and
          each MoE layer's whole block (parsim.model.recompute_modules).

        A layer outside ``only`` is kept as it is, except that it shares no input with a
        recomputed predecessor, which keeps only its own input (``input_shared_bytes`` 0)."""
        mode = recompute_mode(mode)
        if only is not None and mode is not Recompute.FULL:
            raise ValueError(f"with_recompute recomputes some layers only under full recomputation, not {mode}")
        if (self.recompute == mode and self.recompute_only == only) or not mode:
            return self
        if self.recompute:
            raise ValueError(f"with_recompute takes a graph without recomputation, not one with {self.recompute}")
        layers, inp, shared = [], self.input_bytes, {}
        for i, layer in enumerate(self.layers):
            if only is not None and i not in only:
                layers.append(replace(layer, input_shared_bytes=0.0) if i - 1 in only else layer)
            elif mode is Recompute.FULL:
                layers.append(replace(layer, saved_bytes=inp, recompute_bytes=layer.saved_bytes,
                                      input_shared_bytes=0.0))
            elif mode in MODULE_MODES:
                from parsim.model.recompute_modules import modules_recomputed

                layers.append(modules_recomputed(layer, self.extraction_batch, shared, mode))
            else:
                layers.append(_selectively_recomputed(layer, self.extraction_batch))
            inp = layer.output_bytes
        return replace(self, layers=tuple(layers), recompute=mode, recompute_only=only)

    def slice(self, start: int, stop: int) -> Sequence[Layer]:
        return self.layers[start:stop]

    def to_dict(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "input_bytes": self.input_bytes,
                "min_microbatch": self.min_microbatch, "layers": [layer.to_dict() for layer in self.layers]}

    @classmethod
    def from_dict(cls, d: dict) -> "LayerGraph":
        keys = {f.name for f in fields(Layer)} - {"ops", "ops_output", "tp_comm", "input_saved_bytes",
                                                  "input_shared_bytes", "kernels", "recompute_part"}

        def value(k, v):
            if k == "tied":
                return tuple(map(tuple, v))
            if k == "experts":
                return Experts(**{f: v[f] for f in ("experts", "top_k", "hidden", "intermediate",
                                                    "shared_intermediate", "router_params", "groups", "group_limit")
                                  if f in v})
            return v
        layers = tuple(Layer(**{k: value(k, v) for k, v in row.items() if k in keys}) for row in d["layers"])
        return cls(d["name"], layers, d.get("dtype", "fp32"), d.get("input_bytes", 0.0), d.get("min_microbatch", 1))

    def table(self):
        """A pandas DataFrame, one row per layer."""
        import pandas as pd

        return pd.DataFrame([layer.to_dict() for layer in self.layers])

    def totals(self) -> dict:
        moe = {"active_param_count": self.active_param_count} if self.moe else {}
        return {"layers": len(self), "param_count": self.param_count, "param_bytes": self.param_bytes, **moe,
                "fwd_flops_per_sample": self.fwd_flops, "bwd_flops_per_sample": self.bwd_flops,
                "saved_bytes_per_sample": self.saved_bytes,
                "output_bytes_per_sample": sum(layer.output_bytes for layer in self.layers)}


def _selectively_recomputed(layer: Layer, extraction_batch: int) -> Layer:
    """``layer`` under selective recomputation (LayerGraph.with_recompute): its eager attention's
    s x s tensors dropped from what it saves and re-created by its core attention's forward
    kernels in backward; unchanged where it has no such tensors (fused attention, no attention)
    or no kernel view to re-run."""
    att = attention_of(layer, extraction_batch)
    if att is None or not att.scores_saved_bytes:
        return layer
    core = core_attention_kernels(layer.kernels, att)
    if not core:
        return layer
    share = layer.tp_share * layer.seq_share          # ops and kernels describe the unsharded layer
    scores = att.scores_saved_bytes * share
    part = Layer(name=f"{layer.name}/core-attention", fwd_flops=att.fwd_flops * share, bwd_flops=0.0,
                 param_count=0, param_bytes=0, output_bytes=0.0, saved_bytes=0.0,
                 fwd_mem_bytes=sum(k.bytes[1] for k in core if k.klass == "mem") * share,
                 kernels=core, tp_share=layer.tp_share, seq_share=layer.seq_share)
    return replace(layer, saved_bytes=layer.saved_bytes - scores, recompute_bytes=scores, recompute_part=part)


def stage_ranges(assignment: Iterable[int]) -> list[tuple[int, int]]:
    """[0,0,1,1,1] -> [(0,2),(2,5)]: half-open layer ranges per stage, from a stage per layer."""
    assignment = list(assignment)
    ranges, start = [], 0
    for i in range(1, len(assignment) + 1):
        if i == len(assignment) or assignment[i] != assignment[start]:
            ranges.append((start, i))
            start = i
    return ranges
