"""The fused kernels production stacks run in a Llama-style block, as torch operators, so that
extraction records each as one kernel (``args: {fused_ops: true}`` of an ``hf:`` model, or a list of
the ones the stack fused: ``[rms_norm, rope, swiglu]``, as MindSpeed's three flags each fuse one).

transformers writes a Llama block's small operators out in eager PyTorch, and extraction records
what it writes: RMSNorm as seven kernels (a cast to fp32, ``pow``, ``mean``, ``add``, ``rsqrt``,
``mul``, a cast back, then ``mul`` by the weight), rotary embeddings as ``rotate_half``'s slices,
negation and concatenation with two ``mul`` and an ``add`` for each of Q and K, and SwiGLU as
``silu`` then ``mul``.  The stacks the published GPU and NPU rows ran fuse each into one kernel
each way:

- RMSNorm: Megatron-Core's ``TENorm`` (Transformer Engine's ``RMSNorm``, one kernel forward
  reading x and writing y, saving x and the per-row 1/rms; one backward), MindSpeed's
  ``--use-fused-rmsnorm`` (``npu_rms_norm``), MindFormers' ``RmsNorm`` on Ascend;
- rotary embeddings: Megatron-Core's ``apply_rope_fusion`` (on unless ``--no-rope-fusion``:
  Transformer Engine's ``fused_apply_rotary_pos_emb``, one kernel per tensor each way),
  MindSpeed's ``--use-fused-rotary-pos-emb`` (``npu_rotary_mul``);
- SwiGLU: Megatron-Core's ``bias_swiglu_fusion`` (on unless ``--no-bias-swiglu-fusion``:
  megatron/core/fusions/fused_bias_swiglu.py, one kernel forward reading the gate and up halves
  and writing their product, saving its input; one backward), MindSpeed's ``--use-fused-swiglu``.

Each op below is a ``torch.library.custom_op`` with a fake kernel (extraction runs on the meta
device, where parsim.model.extract records each op as one memory-bound kernel: bytes = inputs +
outputs) and an autograd formula whose backward is one op too; its CPU kernel is the plain
composite, the same math as transformers' module (tests/test_fused_ops.py checks outputs and
gradients against them), so the ops compute what they stand for.  parsim's executor runs
transformers' modules as written: ``fused_ops`` changes what a plan is priced as, not what
``parsim run`` runs.

``fuse(model)`` swaps them in, per module instance (nothing global changes), where a module's
code is Llama's own (transformers marks the copies "Copied from ... Llama", and they compile to
the same bytecode): ``LlamaRMSNorm.forward``, ``LlamaMLP.forward`` with a SiLU activation, and
an attention forward that calls Llama's ``apply_rotary_pos_emb``.  Other code (Gemma's 1 + w
norm, partial rotary embeddings, DeepSeek-V3's interleaved rope, Nemotron's squared-ReLU MLP) is
left as written, and ``fuse`` returns what it swapped, by kind.
"""

from __future__ import annotations

import collections
import inspect
import types

import torch
import torch.nn.functional as F
from torch import Tensor, nn

RMS_NORM_OP = "fused_rms_norm"
SWIGLU_OP = "fused_swiglu"
ROPE_OP = "fused_rope"
# what ``fused_ops`` may name (``true``: all of them), each as its stack's own flag does
KINDS = ("rms_norm", "rope", "swiglu")


# ----------------------------------------------------------------------------- RMSNorm

@torch.library.custom_op(f"parsim::{RMS_NORM_OP}", mutates_args=())
def rms_norm(x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """(weight * x / rms(x), 1 / rms(x)) over the last dimension, in fp32 then cast back to x's
    dtype as LlamaRMSNorm computes it; the second output is what the backward reads."""
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * (xf * rstd).to(x.dtype), rstd


@rms_norm.register_fake
def _rms_norm_fake(x: Tensor, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    y = x.new_empty(x.shape, dtype=torch.promote_types(weight.dtype, x.dtype))
    return y, x.new_empty(x.shape[:-1] + (1,), dtype=torch.float32)


@torch.library.custom_op(f"parsim::{RMS_NORM_OP}_backward", mutates_args=())
def rms_norm_backward(grad: Tensor, x: Tensor, rstd: Tensor, weight: Tensor) -> tuple[Tensor, Tensor]:
    """(dx, dweight) from the output's gradient, the saved input and 1/rms."""
    g, xhat = grad.float(), x.float() * rstd
    dweight = (g * xhat.to(x.dtype).float()).reshape(-1, x.shape[-1]).sum(0)
    gw = g * weight.float()
    dx = rstd * (gw - xhat * (gw * xhat).mean(-1, keepdim=True))
    return dx.to(x.dtype), dweight.to(weight.dtype)


@rms_norm_backward.register_fake
def _rms_norm_backward_fake(grad: Tensor, x: Tensor, rstd: Tensor, weight: Tensor) -> tuple[Tensor, Tensor]:
    return x.new_empty(x.shape), weight.new_empty(weight.shape)


def _rms_setup(ctx, inputs, output) -> None:
    x, weight, _ = inputs
    ctx.save_for_backward(x, output[1], weight)       # TE's RMSNorm keeps the input and rsigma


def _rms_backward(ctx, grad: Tensor, _grad_rstd):
    x, rstd, weight = ctx.saved_tensors
    dx, dweight = rms_norm_backward(grad.contiguous(), x, rstd, weight)
    return dx, dweight, None


rms_norm.register_autograd(_rms_backward, setup_context=_rms_setup)


# ----------------------------------------------------------------------------- SwiGLU

@torch.library.custom_op(f"parsim::{SWIGLU_OP}", mutates_args=())
def swiglu(gate: Tensor, up: Tensor) -> Tensor:
    """silu(gate) * up."""
    return F.silu(gate) * up


@swiglu.register_fake
def _swiglu_fake(gate: Tensor, up: Tensor) -> Tensor:
    return gate.new_empty(gate.shape)


@torch.library.custom_op(f"parsim::{SWIGLU_OP}_backward", mutates_args=())
def swiglu_backward(grad: Tensor, gate: Tensor, up: Tensor) -> tuple[Tensor, Tensor]:
    """(dgate, dup) of silu(gate) * up."""
    s = torch.sigmoid(gate)
    return grad * up * s * (1 + gate * (1 - s)), grad * gate * s


@swiglu_backward.register_fake
def _swiglu_backward_fake(grad: Tensor, gate: Tensor, up: Tensor) -> tuple[Tensor, Tensor]:
    return gate.new_empty(gate.shape), up.new_empty(up.shape)


def _swiglu_setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(*inputs)                    # Megatron's fused SwiGLU keeps its input


def _swiglu_backward(ctx, grad: Tensor):
    gate, up = ctx.saved_tensors
    return swiglu_backward(grad.contiguous(), gate, up)


swiglu.register_autograd(_swiglu_backward, setup_context=_swiglu_setup)


# ----------------------------------------------------------------------------- rotary embeddings

def _rotated(t: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    half = t.shape[-1] // 2
    return t * cos + torch.cat((-t[..., half:], t[..., :half]), dim=-1) * sin


@torch.library.custom_op(f"parsim::{ROPE_OP}", mutates_args=())
def rope(t: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """t * cos + rotate_half(t) * sin (Llama's apply_rotary_pos_emb for one tensor)."""
    return _rotated(t, cos, sin)


@rope.register_fake
def _rope_fake(t: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    return t.new_empty(t.shape)


@torch.library.custom_op(f"parsim::{ROPE_OP}_backward", mutates_args=())
def rope_backward(grad: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """The input's gradient: rotate_half is R with R^T = -R and commutes with sin (its two halves
    are equal), so it is the same rotation by -sin."""
    return _rotated(grad, cos, -sin)


@rope_backward.register_fake
def _rope_backward_fake(grad: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    return grad.new_empty(grad.shape)


def _rope_setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(inputs[1], inputs[2])


def _rope_backward(ctx, grad: Tensor):
    cos, sin = ctx.saved_tensors
    return rope_backward(grad.contiguous(), cos, sin), None, None


rope.register_autograd(_rope_backward, setup_context=_rope_setup)


def apply_rotary_pos_emb(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, position_ids=None, unsqueeze_dim: int = 1):
    """Llama's apply_rotary_pos_emb with each tensor rotated by one fused op."""
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return rope(q, cos, sin), rope(k, cos, sin)


# ----------------------------------------------------------------------------- swapping them in

def _norm_forward(self, hidden_states: Tensor) -> Tensor:
    return rms_norm(hidden_states, self.weight, self.variance_epsilon)[0]


def _mlp_forward(self, x: Tensor) -> Tensor:
    return self.down_proj(swiglu(self.gate_proj(x), self.up_proj(x)))


def is_silu(act) -> bool:
    """Whether ``act`` is SiLU: torch's module, or transformers' own (SiLUActivation, ACT2FN["silu"])."""
    return isinstance(act, nn.SiLU) or type(act).__name__ == "SiLUActivation"


def _code(f) -> tuple:
    """What decides what a function computes: its bytecode and the names it reads."""
    c = inspect.unwrap(f).__code__
    return c.co_code, c.co_names


def _with_fused_rope(f):
    """``f`` (unwrapped) with the global apply_rotary_pos_emb it reads replaced by the fused one,
    in a copy of its globals (its module is untouched)."""
    f = inspect.unwrap(f)
    g = dict(f.__globals__, apply_rotary_pos_emb=apply_rotary_pos_emb)
    out = types.FunctionType(f.__code__, g, f.__name__, f.__defaults__, f.__closure__)
    out.__kwdefaults__ = f.__kwdefaults__
    return out


def fused_ops_arg(args) -> tuple[str, ...]:
    """``args.fused_ops`` of an hf: model: the block's operators priced as the fused kernels
    Megatron-Core, NeMo and MindSpeed run (parsim.model.fused_ops): true (all of KINDS), or a list
    of the ones the stack fused (MindSpeed's --use-fused-rmsnorm, --use-fused-rotary-pos-emb and
    --use-fused-swiglu each fuse one); false (the default): as transformers writes them, which is
    what parsim's executor runs.  ``args``: the model's args (parsim.inputs.Fields), read strictly."""
    value = args.get("fused_ops", (bool, list), False)
    if isinstance(value, bool):
        return KINDS if value else ()
    unknown = [v for v in value if v not in KINDS]
    if unknown:
        raise args.fail("fused_ops", f"{unknown[0]!r} is not one of {', '.join(KINDS)}; give true, false or a list "
                                     "of those")
    return tuple(k for k in KINDS if k in value)


def fuse(model: nn.Module, kinds=KINDS) -> dict[str, int]:
    """Swap the fused ops of ``kinds`` (of KINDS) into ``model``'s modules whose code is Llama's
    (module docstring); the number of modules swapped, by kind."""
    from transformers.models.llama import modeling_llama as llama

    norm, mlp, rope_f = (_code(llama.LlamaRMSNorm.forward), _code(llama.LlamaMLP.forward),
                         _code(llama.apply_rotary_pos_emb))
    swapped: collections.Counter = collections.Counter()
    for module in model.modules():
        forward = type(module).forward
        if "rms_norm" in kinds and _code(forward) == norm and hasattr(module, "variance_epsilon"):
            module.forward = types.MethodType(_norm_forward, module)
            swapped["rms_norm"] += 1
        elif "swiglu" in kinds and _code(forward) == mlp and is_silu(getattr(module, "act_fn", None)):
            module.forward = types.MethodType(_mlp_forward, module)
            swapped["swiglu"] += 1
        elif "rope" in kinds and "apply_rotary_pos_emb" in _code(forward)[1]:
            used = inspect.unwrap(forward).__globals__.get("apply_rotary_pos_emb")
            if used is not None and _code(used) == rope_f:
                module.forward = types.MethodType(_with_fused_rope(forward), module)
                swapped["rope"] += 1
    return dict(swapped)
