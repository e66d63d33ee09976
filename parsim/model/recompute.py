"""Activation recomputation modes: what a layer's backward re-runs of its forward.

Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
(arXiv 2205.05198), Sec. 5 and Table 2; Megatron-LM's ``--recompute-granularity``:

- ``none``: every activation autograd saves is kept until the backward;
- ``selective`` (Megatron-LM's default granularity): only the core attention -- QK^T, the
  softmax, its dropout and softmax x V -- is recomputed in backward.  Its s x s tensors (the
  softmax's output, the dropout's mask and output: 5 a s^2 b bytes per layer in 16-bit, Sec. 4.1)
  are dropped; Q, K and V, its inputs, stay saved.  Per layer (Table 2): 34 s b h / t bytes with
  tensor and sequence parallelism, against s b h (34 / t + 5 a s / (h t)) without recomputation.
  The price is the core attention's forward kernels again in the backward: their FLOPs are the
  forward's QK^T and AV, 4 b s^2 h per layer (Narayanan et al. 2021, Eq. 3's attention term),
  against a full recomputation's whole forward, 24 b s h^2 + 4 b s^2 h; the softmax, mask and
  dropout between them by their bytes.
  A layer with fused attention (sdpa, FlashAttention; parsim.model.attention) saves no s x s
  tensor: its kernel already recomputes the scores in backward, so there is nothing left to
  recompute selectively and ``selective`` equals ``none`` for it, in memory and in time.
  Under context parallelism the ring runs attention flash-style too (parsim.cost.context), so
  ``selective`` equals ``none`` there as well;
- ``full`` (Chen et al. 2016; Megatron's ``--recompute-granularity full``): each layer keeps only
  its input, 2 s b h bytes (Table 2), and its backward re-runs its whole forward;
- ``deepseek``: DeepSeek-V3's (DeepSeek-AI 2024, Sec. 3.2.3, "Recomputation of RMSNorm and MLA
  Up-Projection": "we recompute all RMSNorm operations and MLA up-projections during
  back-propagation, thereby eliminating the need to persistently store their output
  activations"; Sec. 3.3.3: the SwiGLU's inputs cached and its output recomputed in backward);
  Megatron-Core's ``--recompute-granularity selective --recompute-modules layernorm mla_up_proj
  moe_act``.  The outputs of the norms, of MLA's up-projections and of the SwiGLU products are
  dropped, and those operators' forward kernels re-run in the backward
  (parsim.model.recompute_modules).  A model without MLA recomputes its norms and SwiGLUs;
- ``moe``: Megatron-Core's ``--recompute-granularity selective --recompute-modules layernorm moe``
  (megatron/core/transformer/moe/moe_layer.py: with "moe" in recompute_modules, MoELayer.forward
  runs its router, token dispatch, experts and combine under ``tensor_parallel.checkpoint``; the
  NVIDIA Megatron MoE Model Zoo's long-context Qwen3-235B-A22B runs use it).  The norms' outputs
  and everything a MoE layer's block keeps are dropped; the backward re-runs the norms and the
  whole MoE block's forward first, its all-to-alls included (parsim.model.recompute_modules,
  parsim.cost.experts.a2a_calls).  A dense layer recomputes its norms only.

``Recompute`` is truthy for every mode but ``none`` (something is recomputed), falsy for
``none``; ``True`` and ``False`` (model.yaml and plan.json files written before the modes) read
as ``full`` and ``none``.
"""

from __future__ import annotations

from enum import Enum


class Recompute(str, Enum):
    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"
    DEEPSEEK = "deepseek"
    MOE = "moe"

    def __bool__(self) -> bool:
        return self is not Recompute.NONE

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


MODES = tuple(m.value for m in Recompute)
# The modes that recompute named modules apart (parsim.model.recompute_modules), which no framework
# but Megatron expresses and the executor does not run
MODULE_MODES = frozenset({Recompute.DEEPSEEK, Recompute.MOE})


def recompute_mode(value) -> Recompute:
    """The mode a value names: a Recompute, one of MODES, or a bool (True: full, False: none).
    Anything else raises ValueError naming the modes (callers add the file and field)."""
    if isinstance(value, Recompute):
        return value
    if isinstance(value, bool):
        return Recompute.FULL if value else Recompute.NONE
    if isinstance(value, str) and value in MODES:
        return Recompute(value)
    raise ValueError(f"expected one of {', '.join(MODES)} (or true / false), got {value!r}")


def read_recompute(fields, key: str, default):
    """A mode from an input file's field (a parsim.inputs.Fields): one of MODES or a bool, as
    files written before the modes have it; ``default`` when absent.  A bad value is the
    field's one-line error."""
    value = fields.get(key, (bool, str), default)
    if value is default:
        return default
    try:
        return recompute_mode(value)
    except ValueError as e:
        raise fields.fail(key, str(e)) from None
