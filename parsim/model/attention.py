"""A layer's attention over a sequence, found from its operators: what context parallelism splits
(parsim.cost.context prices it, parsim.exec.context_parallel runs it).

QK^T is a parameter-free batched matmul (B*a, T, d) x (B*a, d, T) and AV the next one,
(B*a, T, T) x (B*a, T, d): the zoo's GPT and Hugging Face's eager attention (parsim.model.hf) both
record them.  A model without such a pair (a ResNet, a ``layers:`` table) has no sequence to
split.
"""

from __future__ import annotations

from dataclasses import dataclass

from parsim.errors import InfeasibleError
from parsim.model.graph import Layer, LayerGraph


@dataclass(frozen=True)
class Attention:
    """A layer's attention, per sample, unsharded."""

    seq_len: int
    heads: int
    kv_heads: int
    head_dim: int
    fwd_flops: float            # QK^T and AV, as FlopCounterMode counts them (the masked half included)


def attention_of(layer: Layer, extraction_batch: int) -> Attention | None:
    """The layer's attention from its operators, or None: QK^T is a parameter-free batched matmul
    (B*a, T, d) x (B*a, d, T); AV the next one, (B*a, T, T) x (B*a, T, d).  KV heads (grouped-query
    attention) from the K and Q projections' widths where the layer names them (Hugging Face's
    ``k_proj``, ``q_proj``); else as many as query heads (the zoo's GPT)."""
    ops = layer.ops
    bmms = [op for op in ops if op.kind == "BatchMatMul" and not any(op.param_inputs) and not any(op.tied_inputs)]
    for qk, av in zip(bmms, bmms[1:]):
        (bq, t, d), (bk, dk, t2) = qk.input_shapes
        if t != t2 or d != dk or tuple(av.input_shapes[0][-2:]) != (t, t) or av.input_shapes[1][-1] != d:
            continue
        heads = bq // extraction_batch
        widths = {op.module.rsplit(".", 1)[-1]: op.output_shape[-1] for op in ops if op.kind == "MatMul"}
        kv = heads * widths["k_proj"] // widths["q_proj"] if "k_proj" in widths and "q_proj" in widths else heads
        flops = sum(op.flops for op in bmms) / extraction_batch
        return Attention(t, heads, kv, d, flops)
    return None


def sequence_length(graph: LayerGraph) -> int | None:
    """Tokens per sequence of the first attention layer; None for a model without attention."""
    for layer in graph.layers:
        found = attention_of(layer, graph.extraction_batch)
        if found is not None:
            return found.seq_len
    return None


def check_cp(graph: LayerGraph, cp: int, where: str = "") -> int:
    """The sequence length, when cp can split it: the model has attention over a sequence and
    the sequence cuts into 2 x cp equal chunks (Megatron's zigzag); else InfeasibleError saying
    what to change, starting with ``where`` (default "cp=N")."""
    s = sequence_length(graph)
    if cp == 1:
        return s or 0
    where = where or f"cp={cp}"
    if s is None:
        raise InfeasibleError(f"{where}: {graph.name} has no attention over a sequence to split; use cp 1")
    if s % (2 * cp):
        raise InfeasibleError(f"{where}: the {s}-token sequence does not cut into 2 x cp = {2 * cp} equal chunks "
                              f"(the zigzag split); use cp in {', '.join(map(str, cp_options(s)))}")
    return s


def cp_options(seq_len: int | None, at_most: int | None = None) -> list[int]:
    """cp = 1, 2, 4, ... while 2 x cp divides the sequence (and cp <= ``at_most``); [1] without one."""
    out, c = [1], 2
    while seq_len and seq_len % (2 * c) == 0 and (at_most is None or c <= at_most):
        out.append(c)
        c *= 2
    return out
