"""Megatron-LM's fused causal softmax as one torch operator, so that extraction records it as one kernel.

Megatron-LM (megatron/model/fused_softmax.py, ``ScaledUpperTriangMaskedSoftmax``, used by
``FusedScaleMaskSoftmax`` in megatron/model/transformer.py's ``ParallelAttention`` of 2021-2022,
the code behind Narayanan et al. 2021) scales the attention scores, masks the future positions
(the upper triangle) and takes the softmax in ONE CUDA kernel
(``scaled_upper_triang_masked_softmax_cuda.forward``: reads the scores, writes the probabilities),
and saves only the probabilities; its backward is one kernel too (reads the saved probabilities and
the incoming gradient, writes the gradient).  ``masked_softmax`` below is that operator as a
``torch.library.custom_op``: its meta (fake) kernel lets parsim extract on the meta device, where
parsim.model.extract records each op as one kernel (not in FlopCounterMode's registry: memory-bound,
bytes = inputs + outputs); its CPU kernel is the plain composite (scale, masked_fill, softmax), so
``parsim run`` on CPU computes what eager attention computes.  The op names are
parsim.model.attention.MEGATRON_SOFTMAX_OP and ``MEGATRON_SOFTMAX_BACKWARD_OP``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from parsim.model.attention import MEGATRON_SOFTMAX_BACKWARD_OP, MEGATRON_SOFTMAX_OP


@torch.library.custom_op(f"parsim::{MEGATRON_SOFTMAX_OP}", mutates_args=())
def masked_softmax(scores: Tensor, scale: float) -> Tensor:
    """softmax(scale * scores) over the last dimension with the future (j > i) masked out; scores
    (..., s, s).  One kernel forward and one backward (module docstring)."""
    s_q, s_k = scores.shape[-2:]
    future = torch.ones(s_q, s_k, dtype=torch.bool, device=scores.device).triu(1)
    return torch.softmax((scores * scale).masked_fill(future, float("-inf")), dim=-1)


@masked_softmax.register_fake
def _masked_softmax_fake(scores: Tensor, scale: float) -> Tensor:
    return torch.empty_like(scores, memory_format=torch.contiguous_format)


@torch.library.custom_op(f"parsim::{MEGATRON_SOFTMAX_BACKWARD_OP}", mutates_args=())
def masked_softmax_backward(grad: Tensor, probs: Tensor, scale: float) -> Tensor:
    """The scores' gradient from the probabilities' gradient and the saved probabilities: the
    softmax's Jacobian, scale * p * (g - sum(g * p)); masked positions have p = 0."""
    return scale * probs * (grad - (grad * probs).sum(dim=-1, keepdim=True))


@masked_softmax_backward.register_fake
def _masked_softmax_backward_fake(grad: Tensor, probs: Tensor, scale: float) -> Tensor:
    return torch.empty_like(probs, memory_format=torch.contiguous_format)


def _setup_context(ctx, inputs, output) -> None:
    ctx.save_for_backward(output)            # the probabilities only, as Megatron saves softmax_results
    ctx.scale = inputs[1]


def _backward(ctx, grad: Tensor):
    (probs,) = ctx.saved_tensors
    return masked_softmax_backward(grad.contiguous(), probs, ctx.scale), None


masked_softmax.register_autograd(_backward, setup_context=_setup_context)
