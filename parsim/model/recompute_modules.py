"""DeepSeek-V3's selective recomputation (parsim.model.recompute's ``deepseek`` mode) of one layer.

DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", Sec. 3.2.3: "we recompute all RMSNorm operations
and MLA up-projections during back-propagation, thereby eliminating the need to persistently
store their output activations"; Sec. 3.3.3: "we cache the inputs of the SwiGLU operator and
recompute its output in the backward pass".  Megatron-Core names the same modules
``--recompute-modules layernorm mla_up_proj moe_act`` (megatron/core/transformer/
transformer_config.py, ``recompute_modules``).

What the layer's operator view (``Layer.ops``) and kernels say of it:

- **dropped**: the bytes autograd keeps of the outputs of the recomputed operators
  (``OpInfo.saved_bytes``, per sample, at the layer's tensor- and context-parallel share, as
  ``_selectively_recomputed`` scales the attention scores): every operator of a norm module
  (``*norm``, ``*layernorm``, the zoo GPT's ``ln*``), MLA's up-projections (``q_b_proj``,
  ``kv_b_proj``) and each MLP's SwiGLU product (the first ``mul`` of ``mlp``, ``mlp.experts``,
  ``mlp.shared_expert(s)``);
- **re-run in the backward** (``Layer.recompute_part``, priced as a forward): their forward
  kernels, found in the kernel list by shape, since kernels carry no module: the RMSNorm runs
  (``pow`` ... ``rsqrt``, ``mul``, ``mul``, with the casts around them) and LayerNorm kernels, the
  up-projections' GEMMs (the matmul of the operator's K x N weight), and each ``silu`` with the
  ``mul`` after it; under ``fused_ops`` (parsim.model.fused_ops), the fused RMSNorm and SwiGLU
  kernels.

A layer with none of these operators (or no operator view) is unchanged.
"""

from __future__ import annotations

import re
from dataclasses import replace

from parsim.model.fused_ops import RMS_NORM_OP, SWIGLU_OP

_NORM = re.compile(r"(^|\.)(\w*norm|ln\w*)$")
_UP_PROJ = ("self_attn.q_b_proj", "self_attn.kv_b_proj")
_MLPS = ("mlp", "mlp.experts", "mlp.shared_experts", "mlp.shared_expert")


def recomputed_ops(layer) -> list:
    """The operators whose outputs the mode drops (module docstring)."""
    out, seen_mul = [], set()
    for op in layer.ops:
        module = op.module
        if _NORM.search(module) or module in _UP_PROJ:
            out.append(op)
        elif module in _MLPS and op.kind == "ElementWise" and op.aten in ("mul", SWIGLU_OP) and module not in seen_mul:
            seen_mul.add(module)
            out.append(op)
    return out


def _norm_runs(fwd) -> list:
    """The forward kernels of every norm: a fused LayerNorm kernel, or an RMSNorm's run from its
    ``pow`` (a cast before it included) through the second ``mul`` after its ``rsqrt``."""
    picked, i = [], 0
    while i < len(fwd):
        op = fwd[i].op
        if op in ("native_layer_norm", "layer_norm", "rms_norm", "_fused_rms_norm", RMS_NORM_OP):
            picked.append(fwd[i])
        elif op == "pow" and i + 2 < len(fwd) and fwd[i + 1].op == "mean":
            start = i - 1 if i and fwd[i - 1].op == "_to_copy" else i
            j, muls = i + 1, 0
            while j < len(fwd) and muls < 2 and j - i < 8:
                muls += fwd[j].op == "mul"
                j += 1
            if j < len(fwd) and fwd[j].op == "_to_copy" and muls < 2:
                j += 1
            picked += fwd[start:j]
            i = j
            continue
        i += 1
    return picked


def _up_proj_gemms(layer, fwd) -> list:
    """The up-projections' forward GEMMs, matched by their weight's K x N."""
    shapes = {tuple(op.input_shapes[1]) for op in layer.ops if op.module in _UP_PROJ and op.kind == "MatMul"}
    out = []
    for k in fwd:
        dims = k.gemm_at(1)
        if k.klass in ("matmul", "fp8_matmul") and dims is not None and (dims[2], dims[1]) in shapes:
            out.append(k)
    return out


def _swiglu_kernels(fwd) -> list:
    """Each fused SwiGLU kernel (parsim.model.fused_ops), and each ``silu`` and the product after it
    (a separate up-projection's GEMM may come between: transformers' act_fn(gate_proj(x)) * up_proj(x))."""
    out = []
    for i, k in enumerate(fwd):
        if k.op == SWIGLU_OP:
            out.append(k)
        elif k.op == "silu":
            out.append(k)
            out += next(([x] for x in fwd[i + 1:i + 4] if x.op == "mul" and x.klass == "mem"), [])
    return out


def modules_recomputed(layer, extraction_batch: int, shared: dict | None = None):
    """``layer`` under the ``deepseek`` mode (module docstring); unchanged where nothing applies.
    ``shared``: one graph's parts' kernel tuples by value, so that identical layers' parts share
    one (the cost model memoizes by its identity)."""
    ops = recomputed_ops(layer)
    if not ops or not layer.kernels:
        return layer
    share = layer.tp_share * layer.seq_share          # ops and kernels describe the unsharded layer
    dropped = min(sum(op.saved_bytes for op in ops) / extraction_batch * share, layer.saved_bytes)
    fwd = [k for k in layer.kernels if k.phase == "F"]
    picked = {id(k): k for k in _norm_runs(fwd) + _up_proj_gemms(layer, fwd) + _swiglu_kernels(fwd)}
    kernels = tuple(k for k in fwd if id(k) in picked)        # in forward order
    if not kernels:
        return layer
    if shared is not None:
        kernels = shared.setdefault(kernels, kernels)
    flops = sum(op.flops for op in ops) / extraction_batch * share
    # a parsim.model.graph.Layer (its class taken from the layer: graph imports this module)
    part = type(layer)(name=f"{layer.name}/recomputed-modules", fwd_flops=flops, bwd_flops=0.0, param_count=0,
                 param_bytes=0, output_bytes=0.0, saved_bytes=0.0,
                 fwd_mem_bytes=sum(k.bytes[1] for k in kernels if k.klass == "mem") * share,
                 kernels=kernels, tp_share=layer.tp_share, seq_share=layer.seq_share)
    return replace(layer, saved_bytes=layer.saved_bytes - dropped, recompute_bytes=dropped, recompute_part=part)
