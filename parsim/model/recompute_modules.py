"""Module-wise selective recomputation of one layer: parsim.model.recompute's ``deepseek`` and
``moe`` modes, each a list of Megatron-Core's ``--recompute-modules``.

The ``deepseek`` mode:

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

The ``moe`` mode, Megatron-Core's ``--recompute-modules layernorm moe``
(megatron/core/transformer/moe/moe_layer.py: MoELayer.forward's router, dispatch, experts and
combine under ``tensor_parallel.checkpoint``; transformer_layer.py: the ``layernorm`` module
discards the outputs of ``input_layernorm`` and ``pre_mlp_layernorm`` and recomputes them):

- **dropped**: what the block norms keep (``input_layernorm``, ``post_attention_layernorm``, a
  multi-token-prediction block's too: a norm inside attention, such as Qwen3's ``q_norm``, or a
  model's final norm is not Megatron's ``layernorm`` module) and, in a MoE layer, everything its
  MLP block keeps (every operator of ``mlp`` and its submodules: router, experts, shared experts);
- **re-run in the backward**: the block norms' forward kernels (the norm runs, in kernel order,
  paired with the norm modules, in operator order) and the MoE block's forward, from its router's
  GEMM (a matmul of N = E routed experts over K = h) through the combine and the shared expert's
  add (``_moe_block``).  The part
  carries the layer's ``experts``: its dispatch and combine run again
  (parsim.cost.experts.a2a_calls), and under expert parallelism its routed GEMMs are one rank's
  (parsim.cost.experts.expert_parallel_graph rescales them as the layer's).  A dense layer of a
  MoE model recomputes its norms only ("moe" checkpoints MoELayer, not a dense MLP).  Not priced:
  with its experts split over attention's tp (etp = tp) the block's own tensor-parallel gathers and
  reduce-scatters run again in the recomputation; parsim charges the layer's collectives once (at
  etp 1, Megatron's MoE Parallel Folding, the block has none).

A layer with none of these operators (or no operator view) is unchanged.
"""

from __future__ import annotations

import re
from dataclasses import replace

from parsim.model.fused_ops import RMS_NORM_OP, SWIGLU_OP
from parsim.model.recompute import Recompute

_NORM = re.compile(r"(^|\.)(\w*norm|ln\w*)$")
_UP_PROJ = ("self_attn.q_b_proj", "self_attn.kv_b_proj")
_MLPS = ("mlp", "mlp.experts", "mlp.shared_experts", "mlp.shared_expert")
# Megatron's "layernorm" module: a decoder block's input and pre-MLP norms (transformers' names), in
# a multi-token-prediction block too (``mtp.input_layernorm``); the "moe" module: its MLP block
_BLOCK_NORM = re.compile(r"(^|\.)(input_layernorm|post_attention_layernorm)$")
_MLP_BLOCK = re.compile(r"(^|\.)mlp(\.|$)")


def recomputed_ops(layer, mode: Recompute = Recompute.DEEPSEEK) -> list:
    """The operators whose outputs ``mode`` drops (module docstring)."""
    if mode is Recompute.MOE:
        return [op for op in layer.ops if _BLOCK_NORM.search(op.module)
                or (layer.experts is not None and _MLP_BLOCK.search(op.module))]
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
    """The forward kernels of every norm, in order (_norm_run_list's runs, one after another)."""
    return [k for run in _norm_run_list(fwd) for k in run]


def _norm_run_list(fwd) -> list[list]:
    """Each norm's forward kernels, a list a norm: a fused LayerNorm kernel, or an RMSNorm's run
    from its ``pow`` (a cast before it included) through the second ``mul`` after its ``rsqrt``."""
    picked, i = [], 0
    while i < len(fwd):
        op = fwd[i].op
        if op in ("native_layer_norm", "layer_norm", "rms_norm", "_fused_rms_norm", RMS_NORM_OP):
            picked.append([fwd[i]])
        elif op == "pow" and i + 2 < len(fwd) and fwd[i + 1].op == "mean":
            start = i - 1 if i and fwd[i - 1].op == "_to_copy" else i
            j, muls = i + 1, 0
            while j < len(fwd) and muls < 2 and j - i < 8:
                muls += fwd[j].op == "mul"
                j += 1
            if j < len(fwd) and fwd[j].op == "_to_copy" and muls < 2:
                j += 1
            picked.append(fwd[start:j])
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


def _moe_block(layer, fwd) -> list:
    """The MoE block's forward kernels: from the router's GEMM (N = E over K = h) through the
    combine (the routed rows added back to their tokens, ``index_add_``) and, where the layer has
    a shared expert, through the add that joins its output; without a combine, to the layer's end
    less its residual add.  None in a dense layer or where no router GEMM is found."""
    ex = layer.experts
    if ex is None:
        return []
    start = next((i for i, k in enumerate(fwd) if k.klass in ("matmul", "fp8_matmul") and k.gemm_at(1) is not None
                  and k.gemm_at(1)[1:3] == (ex.experts, ex.hidden)), None)
    if start is None:
        return []
    combine = max((i for i in range(start, len(fwd)) if fwd[i].op == "index_add_"), default=None)
    adds = [] if combine is None else [i for i in range(combine + 1, len(fwd)) if fwd[i].op == "add"]
    if adds:
        end = adds[0] + 1 if ex.shared_intermediate else adds[0]
    else:
        end = len(fwd) - 1 if fwd[-1].op == "add" else len(fwd)
    return fwd[start:end]


def _block_norms(layer, fwd) -> list:
    """The forward kernels of the block norms (``_BLOCK_NORM``): the norm runs in kernel order
    matched one to one with the norm modules in operator order; none where they do not pair up."""
    runs = _norm_run_list(fwd)
    modules = []
    for op in layer.ops:                  # each norm module once, in order (a norm spans several operators)
        if _NORM.search(op.module) and (not modules or modules[-1] != op.module):
            modules.append(op.module)
    if len(modules) != len(runs):
        return []
    return [k for module, run in zip(modules, runs) if _BLOCK_NORM.search(module) for k in run]


def modules_recomputed(layer, extraction_batch: int, shared: dict | None = None,
                       mode: Recompute = Recompute.DEEPSEEK):
    """``layer`` under ``mode``, deepseek or moe (module docstring); unchanged where nothing
    applies.  ``shared``: one graph's parts' kernel tuples by value, so that identical layers'
    parts share one (the cost model memoizes by its identity)."""
    ops = recomputed_ops(layer, mode)
    if not ops or not layer.kernels:
        return layer
    share = layer.tp_share * layer.seq_share          # ops and kernels describe the unsharded layer
    dropped = min(sum(op.saved_bytes for op in ops) / extraction_batch * share, layer.saved_bytes)
    fwd = [k for k in layer.kernels if k.phase == "F"]
    if mode is Recompute.MOE:
        block = _moe_block(layer, fwd)
        chosen = _block_norms(layer, fwd) + block
    else:
        block, chosen = [], _norm_runs(fwd) + _up_proj_gemms(layer, fwd) + _swiglu_kernels(fwd)
    picked = {id(k): k for k in chosen}
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
                 kernels=kernels, tp_share=layer.tp_share, seq_share=layer.seq_share,
                 experts=layer.experts if mode is Recompute.MOE and block else None)
    return replace(layer, saved_bytes=layer.saved_bytes - dropped, recompute_bytes=dropped, recompute_part=part)
