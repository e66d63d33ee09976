"""Vocabulary-parallel cross-entropy: the loss taken from each tensor-parallel rank's slice of the
logits, never gathered (Megatron-LM's megatron/core/tensor_parallel/cross_entropy.py,
``_VocabParallelCrossEntropy``; torchtitan's ``loss_parallel`` does the same on DTensors).

Rank r of t holds classes [r V/t, (r + 1) V/t) of every row.  Per row (token), forward:

    m     = all-reduce MAX of the local max logit             (a stable softmax)
    z_tgt = all-reduce SUM of the target's shifted logit      (0 on the ranks without the target)
    S     = all-reduce SUM of the local sum of exp(logit - m)
    loss  = log S - z_tgt

three all-reduces of one fp32 per row; the rank keeps softmax = exp(logit - m) / S of its slice
for backward, which is local: d loss / d logit = (softmax - onehot(target)) x grad, the onehot
only where the target lies in the slice (parsim.shard.graph.shard_graph prices exactly this).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch import nn


def _all_reduce(t: torch.Tensor, op: str, group) -> torch.Tensor:
    """A functional all-reduce (what tensor_parallel.CollectiveCounter counts), waited."""
    return funcol.wait_tensor(funcol.all_reduce(t.contiguous(), op, group))


class _VocabParallelCrossEntropy(torch.autograd.Function):
    """Per-row cross-entropy of logits [N, V/t] (fp32, this rank's classes) and targets [N]
    (whole-vocabulary ids) over ``group``; see the module docstring."""

    @staticmethod
    def forward(ctx, logits, target, group):
        width = logits.shape[-1]
        first = dist.get_rank(group) * width                              # this rank's first class
        peak = _all_reduce(logits.max(dim=-1).values, "max", group)       # (N,)
        shifted = logits - peak.unsqueeze(-1)                             # (N, V/t)
        here = (target >= first) & (target < first + width)               # (N,) the target in this slice
        local_target = torch.where(here, target - first, torch.zeros_like(target))
        picked = shifted.gather(-1, local_target.unsqueeze(-1)).squeeze(-1) * here
        picked = _all_reduce(picked, "sum", group)                        # the target's shifted logit
        exp = shifted.exp_()
        total = _all_reduce(exp.sum(dim=-1), "sum", group)                # (N,) the softmax's denominator
        softmax = exp.div_(total.unsqueeze(-1))
        ctx.save_for_backward(softmax, here, local_target)
        return total.log() - picked

    @staticmethod
    def backward(ctx, grad):                                              # grad: (N,)
        softmax, here, local_target = ctx.saved_tensors
        out = softmax * grad.unsqueeze(-1)
        rows = torch.arange(out.shape[0], device=out.device)
        out[rows, local_target] -= grad * here
        return out, None, None


def mark_vocab_parallel(unit: nn.Module, group) -> None:
    """Record that ``unit``'s output (the model's last) is this rank's slice of the classes over
    ``group``, for ``loss_group``."""
    unit.vocab_parallel_group = group


def loss_group(modules) -> object | None:
    """The group over which the model's output, in one of ``modules`` (a rank's stages, or
    units), is split by classes and taken by the vocabulary-parallel loss
    (parsim.exec.objective.loss_fn's ``vocab_group``); None when the loss takes it whole."""
    return next((m.vocab_parallel_group for top in modules for m in top.modules()
                 if getattr(m, "vocab_parallel_group", None) is not None), None)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor, group) -> torch.Tensor:
    """Mean cross-entropy over the rows of ``logits`` [N, V/t] (this rank's vocabulary slice, fp32)
    and ``target`` [N]: the same value as F.cross_entropy on the gathered logits, on every rank of
    ``group``; the gradient is this rank's slice of that of the gathered logits."""
    return _VocabParallelCrossEntropy.apply(logits, target, group).mean()
