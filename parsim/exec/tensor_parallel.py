"""Tensor parallelism in the executor: the plan's Megatron layout applied to the zoo's GPT with
DTensor's ``parallelize_module`` on the tensor-parallel dimension of the (dp, pp, tp) mesh.

What runs is what parsim.shard.builtin prices for the "megatron" layout:
- each Block: QKV and fc1 ``ColwiseParallel``, proj and fc2 ``RowwiseParallel``: one all-reduce
  forward after each row split and one backward before each column split; attention on a/t heads;
- the word embedding ``RowwiseParallel`` (vocabulary-parallel, output all-reduced) when the
  vocabulary divides by t; the LM head, which shares that weight (its copy, split the same way,
  on the last stage when pp > 1), then computes its vocabulary slice of the logits, which the
  loss takes where they lie (parsim.exec.vocab_parallel, Megatron's vocabulary-parallel
  cross-entropy: three all-reduces of one float per token, no gather).  Megatron's mappings,
  written out: DTensor left alone may gather the weight instead, a different plan from the one
  priced;
- LayerNorms, dropouts and residual adds replicated.

"megatron-sp" adds sequence parallelism (Korthikanti et al. 2022): between the splits every
rank holds s/t of the sequence, so QKV and fc1 take their input ``Shard(1)`` (an all-gather
forward, a reduce-scatter backward) and proj and fc2 give ``Shard(1)`` (a reduce-scatter, an
all-gather); the embedding's output is reduce-scattered over the sequence with each rank adding
its positions; the head all-gathers the sequence before its vocabulary slice.  LayerNorms and the
position table then see a part of the sequence each, so their gradients are partial sums, summed
over the group once per step in one flat all-reduce, as Megatron does (DTensor would leave them
Partial).  The vocabulary must divide by t.

Data parallelism beside it: the gradients' local shards are averaged across replicas in
parsim.exec.grad_sync's buckets, as for any plan.  Dropout draws differ between tensor-parallel ranks inside the split regions,
as in Megatron; runs compared with a single process use dropout 0.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from parsim.errors import InputError
from parsim.exec import op_parallel
from parsim.exec.vocab_parallel import mark_vocab_parallel

EXECUTABLE_LAYOUTS = ("megatron", "megatron-sp")


def check_supported(plan, spec, source: str) -> None:
    cfg = plan.config
    if cfg.tp == 1:
        return
    if cfg.tp_layout in op_parallel.LAYOUTS:            # per-operator DTensor plans, any model
        from parsim.hardware import load_cluster

        op_parallel.check_supported(spec, plan, load_cluster(plan.cluster), source)
        return
    if spec.source.kind == "hf" and spec.graph.moe:                  # MoE Parallel Folding (parsim.exec.folding)
        from parsim.exec import folding

        folding.check_supported(cfg, spec, source)
        return
    if spec.source.kind != "builtin" or spec.source.target != "gpt":
        raise InputError(f"{source}: parallel.tp: the executor runs the {', '.join(EXECUTABLE_LAYOUTS)} layouts on "
                         f"the built-in gpt; plan {spec.path} with --tp-layout auto or model, or tp=1")
    if cfg.tp_layout not in EXECUTABLE_LAYOUTS:
        raise InputError(f"{source}: parallel.tp_layout: the executor runs the "
                         f"{', '.join(EXECUTABLE_LAYOUTS + op_parallel.LAYOUTS)} layouts (got {cfg.tp_layout!r})")


def parallelize(stage: nn.Sequential, tp_mesh, sequence_parallel: bool = False) -> list[nn.Parameter]:
    """Apply the Megatron layout to one stage's units, in place.  Returns the parameters whose
    gradients are partial sums over the group (sequence parallelism), for
    ``reduce_partial_grads`` after each backward."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from parsim.model.zoo.gpt import Block, Embedding, Head

    t = tp_mesh.size()
    seq = Shard(1) if sequence_parallel else Replicate()
    partial: list[nn.Parameter] = []
    for unit in stage.children():
        if isinstance(unit, Block):
            if unit.heads % t:
                raise InputError(f"parallel.tp: {unit.heads} heads do not split over tp={t}; use a divisor")
            parallelize_module(unit, tp_mesh, {
                "qkv": ColwiseParallel(input_layouts=seq), "proj": RowwiseParallel(output_layouts=seq),
                "fc1": ColwiseParallel(input_layouts=seq), "fc2": RowwiseParallel(output_layouts=seq)})
            if sequence_parallel:
                partial += [*unit.ln1.parameters(), *unit.ln2.parameters()]
        elif isinstance(unit, (Embedding, Head)) and unit.wte.num_embeddings % t:
            if sequence_parallel:
                raise InputError(f"parallel.tp_layout: sequence parallelism here needs the vocabulary "
                                 f"({unit.wte.num_embeddings}) to divide by tp={t}; pad it or use megatron")
        elif isinstance(unit, Embedding):
            parallelize_module(unit, tp_mesh, {"wte": RowwiseParallel(input_layouts=Replicate(), output_layouts=seq)})
            if sequence_parallel:
                unit.forward = _sequence_parallel_embedding(unit, tp_mesh)
                partial += list(unit.wpe.parameters())
        elif isinstance(unit, Head):
            if not hasattr(unit.wte.weight, "to_local"):   # its stage lacks the embedding (pp > 1): its copy
                parallelize_module(unit, tp_mesh, {"wte": RowwiseParallel(input_layouts=Replicate())})
            unit.forward = _vocab_parallel_head(unit, tp_mesh, sequence_parallel)
            if sequence_parallel:
                partial += list(unit.ln_f.parameters())
    return partial


def reduce_partial_grads(params: list[nn.Parameter], group) -> None:
    """Sum the partial gradients of ``params`` over the group in one flat all-reduce.  A DTensor
    gradient kept ``Partial`` (``expect_partial``) is then laid out as its parameter."""
    held = [p for p in params if p.grad is not None]
    if not held:
        return
    grads = [local(p.grad) for p in held]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, group=group)
    for p, g, part in zip(held, grads, flat.split([g.numel() for g in grads])):
        g.copy_(part.view_as(g))
        if hasattr(p, "placements") and tuple(p.grad.placements) != tuple(p.placements):
            p.grad = _dtensor_on(g, p, p.placements)


def expect_partial(params: list[nn.Parameter]) -> None:
    """Before a step's backward: the gradients of DTensor parameters whose gradients are partial
    sums over the group (``partial_grad_placements``, parsim.exec.op_parallel) are laid out
    ``Partial``, on the same storage, so that each micro-batch accumulates locally and
    ``reduce_partial_grads`` sums them once per step (a replicated gradient would make DTensor
    all-reduce every micro-batch's partial sum as it arrives)."""
    for p in params:
        want = getattr(p, "partial_grad_placements", None)
        if want is None:
            continue
        g = local(p.grad) if p.grad is not None else torch.zeros_like(local(p))
        p.grad = _dtensor_on(g, p, want)


def _dtensor_on(t: torch.Tensor, param, placements):
    from torch.distributed.tensor import DTensor

    return DTensor.from_local(t, param.device_mesh, placements, run_check=False, shape=param.shape,
                              stride=param.stride())


def _sequence_parallel_embedding(unit, tp_mesh):
    """Word embeddings reduce-scattered over the sequence (RowwiseParallel to Shard(1)), plus this
    rank's positions."""
    rank = tp_mesh.get_local_rank()

    def forward(idx):
        x = unit.wte(idx)                                           # (B, T / t, h)
        n = x.shape[1]
        pos = torch.arange(rank * n, (rank + 1) * n, device=idx.device)
        return unit.drop(x + unit.wpe(pos))
    return forward


def _vocab_parallel_head(head, tp_mesh, sequence_parallel: bool = False):
    """The LM head on the vocabulary-split (tied) weight, as Megatron runs it: the input enters
    through "f" (identity forward, all-reduce of its gradient backward), or under sequence
    parallelism is all-gathered over the sequence (reduce-scatter backward); each device computes
    its vocabulary slice of the logits, which the loss takes vocabulary-parallel (the head records
    its group for ``vocab_parallel.loss_group``).  Left to DTensor, F.linear may gather the weight
    instead."""
    import torch.nn.functional as F

    group = tp_mesh.get_group()
    enter = _GatherSequence if sequence_parallel else _CopyToGroup
    mark_vocab_parallel(head, group)

    def forward(x):
        h = enter.apply(head.ln_f(x), group)                      # (B, T, h)
        return F.linear(h, local(head.wte.weight))                # (B, T, V / t)
    return forward


def _waited(t):
    """Wait for a functional collective's result.  Always: a result that is never waited leaves
    gloo's work pending, and the process can abort at exit ("terminate called without an active
    exception")."""
    return funcol.wait_tensor(t)


class _CopyToGroup(torch.autograd.Function):
    """Megatron's copy_to_tensor_model_parallel_region."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        return _waited(funcol.all_reduce(grad.contiguous(), "sum", ctx.group)), None


class _GatherSequence(torch.autograd.Function):
    """Megatron's gather_from_sequence_parallel_region: all-gather dimension 1 forward,
    reduce-scatter it backward (each rank's gradient is a partial sum over the vocabulary)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _waited(funcol.all_gather_single(x.contiguous(), 1, group))

    @staticmethod
    def backward(ctx, grad):
        return _waited(funcol.reduce_scatter_tensor(grad.contiguous(), "sum", 1, ctx.group)), None


def local(t):
    """The plain tensor holding ``t``'s bytes on this rank: a DTensor's local shard, an
    AsyncCollectiveTensor's result, a plain tensor as is."""
    t = t.to_local() if hasattr(t, "to_local") else t
    return getattr(t, "elem", t)


def full(t):
    """The whole tensor of a DTensor (a plain tensor as is); collective over its mesh: every rank of
    it calls it.  Shards and replicas (``Shard``, ``Replicate``) are gathered with blocking c10d
    all-gathers, innermost mesh dimension first (``_gathered``); other placements (FSDP2's
    ``_StridedShard`` over tensor-parallel shards, ``Partial``) with ``DTensor.full_tensor``.  A
    checkpoint needs no asynchrony, and ``full_tensor``'s functional collectives once crashed
    natively in ``wait_tensor`` while a full suite saved FSDP2's shards on gloo
    (results/2026-12-05e-intel-xeon/ci-rehearsals.txt, 5d03613)."""
    if not hasattr(t, "full_tensor"):
        return t
    from torch.distributed.tensor import Replicate, Shard

    if any(type(p) not in (Shard, Replicate) for p in t.placements):
        return t.full_tensor()
    whole = t.to_local()
    for mesh_dim in reversed(range(t.device_mesh.ndim)):      # DTensor shards the outer mesh dimension first
        p = t.placements[mesh_dim]
        if isinstance(p, Shard):
            whole = _gathered(whole, p.dim, t.device_mesh.get_group(mesh_dim))
    return whole


def _gathered(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    """The group's shards of one tensor, concatenated along ``dim`` in rank order: shards may be
    uneven (torch.chunk's, some empty), so their lengths are gathered first and each shard is
    padded to the longest for the all-gather."""
    n = dist.get_world_size(group)
    lengths = [torch.zeros(1, dtype=torch.int32, device=x.device) for _ in range(n)]  # gloo, NCCL, HCCL gather int32
    dist.all_gather(lengths, torch.tensor([x.shape[dim]], dtype=torch.int32, device=x.device), group=group)
    lengths = [int(k) for k in lengths]
    if max(lengths) == 0:
        return x
    padded = x.new_zeros(x.shape[:dim] + (max(lengths),) + x.shape[dim + 1:])
    padded.narrow(dim, 0, x.shape[dim]).copy_(x)
    parts = [torch.empty_like(padded) for _ in range(n)]
    dist.all_gather(parts, padded, group=group)
    return torch.cat([part.narrow(dim, 0, k) for part, k in zip(parts, lengths)], dim)


def load_whole(module: nn.Module, state: dict) -> None:
    """Load a state dict of whole tensors (as checkpoints hold them, parsim.exec.train._save) into
    ``module``, whose parameters may be DTensors: each rank keeps its own shards of them, cut
    locally from the whole tensor (no communication)."""
    from torch.distributed.tensor import distribute_tensor

    own = module.state_dict()
    module.load_state_dict({k: distribute_tensor(v.to(own[k].device), own[k].device_mesh, own[k].placements,
                                                 src_data_rank=None) if hasattr(own[k], "placements") else v
                            for k, v in state.items()})


def as_dtensor_like(t: torch.Tensor, param) -> torch.Tensor:
    """A local shard ``t`` (an optimizer state tensor as checkpoints hold it) as a DTensor laid
    out like ``param``; a plain tensor for a plain parameter."""
    if not hasattr(param, "placements") or hasattr(t, "placements") or t.shape != local(param).shape:
        return t
    from torch.distributed.tensor import DTensor

    return DTensor.from_local(t, param.device_mesh, param.placements, run_check=False, shape=param.shape,
                              stride=param.stride())


class CollectiveCounter(TorchDispatchMode):
    """Counts the functional collectives tensor parallelism issues (DTensor's, and the head's
    mappings; what CommDebugMode counts), forward and backward, by name: all_reduce,
    all_gather_into_tensor, reduce_scatter_tensor, ...  Data parallelism's gradient all-reduce
    goes through c10d directly and is not counted."""

    def __init__(self):
        super().__init__()
        self.counts: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "_c10d_functional" and not func.__name__.startswith(("wait", "_")):
            name = func.overloadpacket.__name__
            self.counts[name] = self.counts.get(name, 0) + 1
        return func(*args, **(kwargs or {}))
