"""Attention as a model is trained: eager (explicit QK^T, softmax, AV) or fused (FlashAttention).

``KINDS`` is the option of the zoo GPT (``args: {attention: ...}``) and of ``hf:``
(``args: {attn_implementation: ...}``, transformers' name):

- ``eager``: the s x s scores and probabilities are separate kernels and are saved for backward
  (Korthikanti et al. 2022, Sec. 4.1, without flash attention);
- ``sdpa``: ``torch.nn.functional.scaled_dot_product_attention``, which Megatron-LM, torchtitan
  and transformers (its default) train with: one fused kernel forward and one backward
  (FlashAttention, Dao et al. 2022; FlashAttention-2, Dao 2023).  It saves Q, K, V, the output
  and the per-row logsumexp (fp32, b x h x s) and recomputes the scores in backward; with grouped
  KV heads (GQA) it reads K and V once per KV head.
- ``megatron`` (the zoo GPT only, ``ZOO_KINDS``): eager attention as Megatron-LM ran it in
  2021-2022 (megatron/model/transformer.py, ``ParallelAttention``; Narayanan et al. 2021's code):
  QK^T as one GEMM with no elementwise pass over the s x s scores of its own (Megatron folds
  1/sqrt(d) into it, ``torch.baddbmm(..., alpha=1/norm_factor)``, and passes the rest of the scale,
  ``coeff``, to the softmax; here the whole scale goes to the softmax kernel, the same passes),
  then scale, mask and softmax as ONE fused kernel each way (``scaled_upper_triang_masked_softmax``,
  parsim.model.fused_softmax), dropout, AV.  It saves what eager saves (the probabilities, the
  dropout mask and its output), never the scores.  Q and K are still copied for the batched GEMM
  (the zoo's (B, a, T, d) layout; Megatron's [s, b, a, d] views them), as in eager.

What torch dispatches (torch 2.13): on CPU, ``aten._scaled_dot_product_flash_attention_for_cpu``
(and its ``_backward``) when dropout is 0, the decomposed math path otherwise; on the meta
device, where parsim extracts, always the decomposed math path (QK^T, softmax, AV as separate
ops: eager's operators and saved bytes).  ``fused_on_meta`` therefore routes the call on meta
tensors to the fused CPU operator, which has meta kernels and an autograd formula, accepts
GQA's fewer KV heads and a dropout probability (as the CUDA kernels do: a fused dropout keeps
its RNG state, no mask), so that extraction records what a GPU runs: one kernel each way.  A CPU
runs attention with dropout unfused (``torch._fused_sdp_choice`` gives MATH at dropout 0.1,
FLASH_ATTENTION at 0: results/2026-12-06h-intel-xeon/dropout-memory-seed-oss.txt), which keeps for
backward the probabilities, the dropout mask and the dropped probabilities (and, with grouped KV
heads, the keys and values expanded to every query head): extraction measures a unit with attention
dropout both ways, and a CPU cluster's plans are priced with the second (LayerGraph.cpu_graph).
So too a layer whose sliding window is shorter than its sequence: on real tensors it runs with its
banded mask (parsim.model.hf), with which transformers expands grouped KV heads to every query head
before the kernel (its ``use_gqa_in_sdpa`` leaves the grouping to torch only without a mask), and the
kernel saves the expanded keys and values; on meta, as fused attention takes a window, it gets no mask.

FLOPs (FLOPs = 2 x MACs): forward QK^T and AV, 4 b h s_q s_k d; backward 2.5x that, the
recomputed QK^T plus the four gradient GEMMs (torch.utils.flop_counter.sdpa_flop_count and
sdpa_backward_flop_count); with causal masking half of each, as FlashAttention-2 counts it
(Dao 2023, Sec. 4.1; ``flops()`` in its benchmarks/benchmark_flash_attention.py:
4 * batch * seqlen^2 * nheads * headdim // (2 if causal else 1), backward 2.5x).

Sliding-window attention (Mistral 7B's 4,096-token window, Qwen2's local layers with use_sliding_window;
Beltagy et al. 2020, "Longformer"; Megatron-Core's ``--window-size``, MindSpeed's ``--sliding-window``):
each query attends to at most ``w`` keys, itself included (transformers' sliding_window mask:
key j is seen by query i when i - w < j <= i).  A layer's window is the one transformers hands its
attention function (``sliding_window_of``).  Fused attention skips the key blocks outside the
band (FlashAttention-2's ``window_size``, cuDNN's and TE's sliding window, Ascend's
``npu_fusion_attention`` band mode), so its work is the band's share of the causal pairs,

    pairs(s, w) = sum over i = 1..s of min(i, w) = w (w + 1) / 2 + (s - w) w     (s > w),

``window_share`` = pairs(s, w) / pairs(s, s): its FLOPs scale by that share, its bytes (Q, K, V,
the output, read and written once) do not; extraction applies it to a windowed unit's fused
attention (``windowed``).  Eager attention computes every score before the mask, so its work does
not shrink.  Context parallelism is not priced beside a window (``check_cp``): its ring passes
every chunk of K and V, which a window would cut.

Context parallelism finds a layer's attention from its operators (``attention_of``): what it
splits over the sequence (parsim.cost.context prices it, parsim.exec.context_parallel runs it).
Eager attention records QK^T as a parameter-free batched matmul (B*a, T, d) x (B*a, d, T) and AV
as the next one, (B*a, T, T) x (B*a, T, d) (the zoo's GPT, Hugging Face's eager attention); fused
attention one ``Attention`` operator.  A model with neither (a ResNet, a ``layers:`` table) has
no sequence to split.
"""

from __future__ import annotations

from dataclasses import dataclass

from parsim.errors import InfeasibleError

KINDS = ("eager", "sdpa")
# The zoo GPT's kinds: KINDS and Megatron-LM's fused softmax (parsim.model.fused_softmax), a kind
# transformers has no name for.
ZOO_KINDS = KINDS + ("megatron",)
MEGATRON_SOFTMAX_OP = "scaled_upper_triang_masked_softmax"       # parsim::<name>, Megatron-LM's kernel name
MEGATRON_SOFTMAX_BACKWARD_OP = MEGATRON_SOFTMAX_OP + "_backward"
FUSED_OP = "_scaled_dot_product_flash_attention_for_cpu"          # aten's name, forward
FUSED_BACKWARD_OP = FUSED_OP + "_backward"
BACKWARD_RATIO = 2.5           # backward / forward FLOPs of fused attention (module docstring)


def fused_attention_flops(b: int, h: int, s_q: int, s_k: int, d: int, causal: bool, window: int = 0) -> float:
    """Forward FLOPs of fused attention over b x h heads of d (QK^T and AV), halved when causal,
    and at a causal ``window``'s share of the pairs (module docstring)."""
    flops = 4.0 * b * h * s_q * s_k * d / (2 if causal else 1)
    return flops * window_share(s_k, window) if causal else flops


def window_pairs(s: int, window: int = 0) -> float:
    """The query-key pairs causal attention over ``s`` positions scores when each query sees at most
    ``window`` keys, itself included (0: every earlier key)."""
    w = s if not window or window >= s else window
    return w * (w + 1) / 2 + (s - w) * w


def window_cuts(window: int, s: int) -> bool:
    """Whether a sliding ``window`` is shorter than the ``s`` positions it slides over: the only
    windows that change what attention computes (a longer one sees every earlier key)."""
    return 0 < window < s


def window_share(s: int, window: int = 0) -> float:
    """Of causal attention's pairs over ``s`` positions, the share a ``window`` keeps (1 without one,
    or with one at least ``s`` long)."""
    return window_pairs(s, window) / window_pairs(s) if s > 0 else 1.0


def sliding_window_of(attention) -> int:
    """The window transformers hands a decoder layer's ``attention`` module's attention function, 0
    for none: the module's own ``sliding_window`` where it keeps one (Qwen2 and Qwen3, and the
    other transformers models with per-layer windows: None on their full-attention layers), else
    its config's where its forward reads it (Mistral, Mixtral, Starcoder2: ``getattr(self.config,
    "sliding_window", None)``); Llama's reads none."""
    import inspect

    if attention is None:
        return 0
    if hasattr(attention, "sliding_window"):
        return int(attention.sliding_window or 0)
    forward = inspect.unwrap(type(attention).forward).__code__
    if "sliding_window" not in forward.co_consts and "sliding_window" not in forward.co_names:
        return 0
    return int(getattr(getattr(attention, "config", None), "sliding_window", None) or 0)


def windowed(ops: tuple, kernels: tuple, window: int, batch: int) -> tuple[tuple, tuple, float, float]:
    """A unit's fused causal attention at its ``window`` (module docstring): its ``Attention``
    operators with the window recorded, its attention kernels' FLOPs at the window's share, and the
    forward and backward FLOPs that removes at ``batch`` samples (the extraction's, at which the
    unit's FLOP totals were counted).  Unchanged without a fused causal attention, or with a window
    at least the sequence long."""
    from dataclasses import replace

    att = next((op for op in ops if op.kind == "Attention" and op.causal), None)
    share = window_share(att.input_shapes[1][2], window) if att is not None else 1.0
    if share >= 1.0:
        return ops, kernels, 0.0, 0.0
    ops = tuple(replace(op, window=window) if op.kind == "Attention" and op.causal else op for op in ops)
    removed = {"F": 0.0, "B": 0.0}
    out = []
    for k in kernels:
        if k.klass == "attention":
            removed["F" if k.phase == "F" else "B"] += k.at(batch)[0] * (1 - share)
            k = replace(k, flops=(k.flops[0] * share, k.flops[1] * share))
        out.append(k)
    return ops, tuple(out), removed["F"], removed["B"]


def register_flop_formulas() -> None:
    """FlopCounterMode's formulas for the fused CPU operator (torch counts the CUDA ones only)."""
    import torch
    from torch.utils import flop_counter
    from torch.utils.flop_counter import flop_registry, register_flop_formula

    fwd, bwd = getattr(torch.ops.aten, FUSED_OP), getattr(torch.ops.aten, FUSED_BACKWARD_OP)
    if fwd in flop_registry:
        return

    def heads_of(query, shape):
        """Grouped K/V heads counted as the query's, which the kernel broadcasts them to: torch's
        formulas take GQA shapes from 2.13 on, 2.11's assert equal heads (the H200 check's Llama).
        torch's formulas are looked up when called, so that a test can stand in 2.11's."""
        return (shape[0], query[1], *shape[2:])

    @register_flop_formula(fwd)
    def _forward(query, key, value, dropout_p=0.0, is_causal=False, *args, out_shape=None, **kwargs) -> int:
        count = flop_counter.sdpa_flop_count(query, heads_of(query, key), heads_of(query, value))
        return count // (2 if is_causal else 1)

    @register_flop_formula(bwd)
    def _backward(grad_out, query, key, value, out, logsumexp, dropout_p=0.0, is_causal=False, *args,
                  out_shape=None, **kwargs) -> int:
        count = flop_counter.sdpa_backward_flop_count(grad_out, query, heads_of(query, key), heads_of(query, value))
        return count // (2 if is_causal else 1)


def cpu_attention(cluster) -> bool:
    """Whether ``cluster``'s devices run attention as torch on a CPU does (module docstring): attention
    with dropout through the decomposed math path, and a sliding window through its banded mask, with
    grouped KV heads expanded to every query head; so a CPU cluster's plans are priced with
    LayerGraph.cpu_graph.  CPUs are the devices of a cluster whose collective library is gloo
    (parsim.exec.groups.LIBRARY_DEVICES).  The fused kernels of GPUs (FlashAttention-2, torch's CUDA
    flash and memory-efficient kernels) and Ascend's npu_fusion_attention take dropout, and
    FlashAttention-2 and Ascend's band mode a window, without a mask."""
    return cluster.profile.collectives.library == "gloo"


def fused_on_meta():
    """A TorchFunctionMode under which ``scaled_dot_product_attention`` on meta tensors runs as
    the fused operator (module docstring); other calls pass through.  The mode counts the calls
    with dropout it sees (``dropout_calls``), and passes them through to the math path while its
    ``fuse_dropout`` is off: what a CPU runs (cpu_attention)."""
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    register_flop_formulas()
    fused = getattr(torch.ops.aten, FUSED_OP)

    class _Fused(TorchFunctionMode):
        dropout_calls, fuse_dropout = 0, True

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is not F.scaled_dot_product_attention or not args[0].is_meta:
                return func(*args, **kwargs)
            q, k, v = args[:3]
            rest = dict(zip(("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"), args[3:]), **kwargs)
            if float(rest.get("dropout_p", 0.0)) > 0:
                self.dropout_calls += 1
                if not self.fuse_dropout:
                    return func(*args, **kwargs)
            if k.shape[1] != q.shape[1] and not rest.get("enable_gqa", False):
                return func(*args, **kwargs)           # torch's own error for mismatched heads
            d_v = v.shape[-1]
            if d_v != q.shape[-1]:
                # Value heads narrower than query/key heads (DeepSeek's MLA: 192 vs 128): the CPU
                # kernel's meta function sizes the output by the query's head dim, so V is padded
                # to it and the output cut back, as transformers' flash-attention path does for
                # MLA.  FLOPs count the padded AV: 4 b h s^2 d_qk, not 2 b h s^2 (d_qk + d_v).
                v = F.pad(v, (0, q.shape[-1] - d_v))
            out = fused(q, k, v, float(rest.get("dropout_p", 0.0)), bool(rest.get("is_causal", False)),
                        attn_mask=rest.get("attn_mask"), scale=rest.get("scale"))[0]
            return out if d_v == q.shape[-1] else out[..., :d_v]

    return _Fused()


@dataclass(frozen=True)
class Attention:
    """A layer's attention, per sample, unsharded."""

    seq_len: int
    heads: int
    kv_heads: int
    head_dim: int
    fwd_flops: float            # QK^T and AV: eager as FlopCounterMode counts them (the masked half included), fused halved when causal
    # bytes autograd keeps of the s x s tensors eager attention makes between QK^T and AV (the
    # softmax's probabilities; a dropout mask): what flash-style attention recomputes instead; 0 fused
    scores_saved_bytes: float = 0.0
    window: int = 0             # fused: the keys a query sees at most (sliding-window attention), 0 every earlier one

    @property
    def windowed(self) -> bool:
        """Whether a sliding window cuts this attention's work: one shorter than its sequence."""
        return window_cuts(self.window, self.seq_len)


def attention_of(layer, extraction_batch: int) -> Attention | None:
    """The layer's attention (a parsim.model.graph.Layer's) from its operators, or None: a fused
    ``Attention`` operator, Q [b, h, s, d] and K [b, g, s, d]; or QK^T, a parameter-free batched
    matmul (B*a, T, d) x (B*a, d, T), and AV the next one, (B*a, T, T) x (B*a, T, d).  Eager KV
    heads (grouped-query attention) from the K and Q projections' widths where the layer names
    them (Hugging Face's ``k_proj``, ``q_proj``); else as many as query heads (the zoo's GPT)."""
    ops = layer.ops
    for op in ops:
        if op.kind == "Attention":
            (_, h, s, d), (_, g, _, _) = op.input_shapes[:2]
            return Attention(s, h, g, d, op.flops / extraction_batch, window=op.window)
    bmms = [op for op in ops if op.kind == "BatchMatMul" and not any(op.param_inputs) and not any(op.tied_inputs)]
    for qk, av in zip(bmms, bmms[1:]):
        (bq, t, d), (bk, dk, t2) = qk.input_shapes
        if t != t2 or d != dk or tuple(av.input_shapes[0][-2:]) != (t, t) or av.input_shapes[1][-1] != d:
            continue
        heads = bq // extraction_batch
        widths = {op.module.rsplit(".", 1)[-1]: op.output_shape[-1] for op in ops if op.kind == "MatMul"}
        kv = heads * widths["k_proj"] // widths["q_proj"] if "k_proj" in widths and "q_proj" in widths else heads
        flops = sum(op.flops for op in bmms) / extraction_batch
        first, last = (next(i for i, op in enumerate(ops) if op is x) for x in (qk, av))
        scores = sum(op.saved_bytes for op in ops[first + 1:last]) / extraction_batch
        return Attention(t, heads, kv, d, flops, scores)
    return None


def core_attention_kernels(kernels, att: Attention) -> tuple:
    """The forward kernels of a layer's core attention (``kernels``: its parsim.model.graph.Kernel
    list; ``att``: its attention, ``attention_of``): what selective recomputation re-runs in
    backward (Korthikanti et al. 2022, Sec. 5: QK^T, the softmax, its dropout and softmax x V).
    Fused attention: its one forward kernel.  Eager: the kernels from QK^T, a batched GEMM of
    M = N = s and K = d per (sample, head), through AV, M = s, N = d, K = s (the masking, softmax
    and dropout between them included).  () when the kernels show neither (a layer without
    kernels, or none of these shapes)."""
    fwd = [k for k in kernels if k.phase == "F"]
    fused = tuple(k for k in fwd if k.klass == "attention")
    if fused:
        return fused

    def shaped(k, m, n, kk) -> bool:
        dims = k.gemm_at(1)
        return dims is not None and dims[3] > 1 and (dims[0], dims[1], dims[2]) == (m, n, kk)

    s, d = att.seq_len, att.head_dim
    for i, k in enumerate(fwd):
        if shaped(k, s, s, d):
            for j in range(i + 1, len(fwd)):
                if shaped(fwd[j], s, d, s):
                    return tuple(fwd[i:j + 1])
    return ()


def sequence_length(graph) -> int | None:
    """Tokens per sequence of the first attention layer; None for a model without attention."""
    for layer in graph.layers:
        found = attention_of(layer, graph.extraction_batch)
        if found is not None:
            return found.seq_len
    return None


def check_cp(graph, cp: int, where: str = "") -> int:
    """The sequence length, when cp can split it: the model has attention over a sequence and
    the sequence cuts into 2 x cp equal chunks (Megatron's zigzag); else InfeasibleError saying
    what to change, starting with ``where`` (default "cp=N")."""
    s = sequence_length(graph)
    if cp == 1:
        return s or 0
    where = where or f"cp={cp}"
    if s is None:
        raise InfeasibleError(f"{where}: {graph.name} has no attention over a sequence to split; use cp 1")
    window = attention_window(graph)
    if window:
        raise InfeasibleError(f"{where}: {graph.name}'s attention sees a {window}-token window of its {s}-token "
                              "sequence, and parsim prices context parallelism for full causal attention only; "
                              "use cp 1")
    if s % (2 * cp):
        raise InfeasibleError(f"{where}: the {s}-token sequence does not cut into 2 x cp = {2 * cp} equal chunks "
                              f"(the zigzag split); use cp in {', '.join(map(str, cp_options(s)))}")
    return s


def attention_window(graph) -> int:
    """The narrowest sliding window shorter than its sequence of any layer's fused attention; 0 for none."""
    found = (attention_of(layer, graph.extraction_batch) for layer in graph.layers)
    return min((att.window for att in found if att is not None and att.windowed), default=0)


def cp_options(seq_len: int | None, at_most: int | None = None) -> list[int]:
    """cp = 1, 2, 4, ... while 2 x cp divides the sequence (and cp <= ``at_most``); [1] without one."""
    out, c = [1], 2
    while seq_len and seq_len % (2 * c) == 0 and (at_most is None or c <= at_most):
        out.append(c)
        c *= 2
    return out
