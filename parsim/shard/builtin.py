"""Built-in strategy sets: Megatron-LM's tensor-parallel layout for the zoo's GPT (whose blocks
are laid out as Megatron's: fused QKV, then attention, then a 4h MLP) and for Llama-style decoders
from Hugging Face configs (parsim.model.hf: GQA, SwiGLU, RMSNorm; Hugging Face module names).

Shoeybi et al. 2019 ("Megatron-LM", Sec. 3): the QKV and first MLP projections are split by
columns, the attention projection and second MLP projection by rows, so a block needs one
all-reduce forward after each row split and one backward before each column split; attention
runs on a/t heads per device (eager's two batched matmuls, or the fused attention operator).  The embedding and the LM head are split by vocabulary where the
vocabulary divides (Megatron pads it to a multiple of 128 t; an unpadded one stays replicated:
the optional "?" patterns of parsim.shard.graph).
Korthikanti et al. 2022 (Sec. 4.2.2), sequence parallelism: the LayerNorms and dropouts between
the splits work on s/t of the sequence, turning each all-reduce into a reduce-scatter plus an
all-gather.

Llama-style blocks (Megatron-LM's GQA and SwiGLU layers, megatron/core/transformer/attention.py
and mlp.py): q and o as QKV and proj above; k and v column-split by t up to the KV-head count g,
and beyond it (t > g) split g ways and replicated t/g times, each device keeping the one KV head
its query heads read (Megatron's rule for tp > num_query_groups); SwiGLU's gate and up
projections column-split together (Megatron fuses them into one column-parallel linear_fc1), down
row-split; RMSNorms replicated, or under megatron-sp on s/t of the sequence with the residual adds.
"""

from __future__ import annotations

from parsim.errors import InfeasibleError
from parsim.model.attention import FUSED_OP

LAYOUTS = ("megatron", "megatron-sp")
SEARCHED = "auto"          # every operator's strategy searched (parsim.shard.auto)


def fused_attention(graph) -> bool:
    """Whether ``graph``'s attention is the fused operator (parsim.model.attention) rather than
    eager's two batched matmuls."""
    return graph is not None and any(op.kind == "Attention" for layer in graph.layers for op in layer.ops)


def _heads(where: str, t: int, kv_heads: int, fused: bool) -> dict[str, tuple]:
    """Attention split by heads: eager's QK^T and AV batched matmuls (over batch x heads), or the
    fused operator's Q by t and K, V by t up to the KV-head count (parsim.shard.strategy.attention)."""
    if fused:
        kv = (1, min(t, kv_heads), 1, 1)
        return {f"layers.*/{where}:{FUSED_OP}": ((1, t, 1, 1), kv, kv)}
    return {f"layers.*/{where}:bmm#0": ((t, 1, 1), (t, 1, 1)), f"layers.*/{where}:bmm#1": ((t, 1, 1), (t, 1, 1))}


def megatron(t: int, sequence_parallel: bool = False, fused: bool = False) -> dict[str, tuple]:
    col, row = ((1, 1), (1, t)), ((1, t), (t, 1))
    s = {
        "?embed/wte:embedding": ((t, 1),),
        "layers.*/qkv": col, **_heads("", t, t, fused), "layers.*/proj": row,
        "layers.*/fc1": col, "layers.*/fc2": row,
        "?head/:mm": col,
    }
    if sequence_parallel:
        seq = ((1, t, 1),)
        s.update({"?embed/:add": seq, "?embed/drop:*": seq, "layers.*/ln1": seq, "layers.*/ln2": seq,
                  "?layers.*/drop:*": seq,                     # dropouts exist only with dropout > 0
                  "?head/ln_f": seq})
    return s


def attention_heads(graph) -> tuple[int, int] | None:
    """(query heads, KV heads) of a Llama-style graph's first decoder layer, from its operators:
    q_proj's and k_proj's output widths over the head dimension (the last of QK^T's first input,
    or of fused attention's Q); None for a graph without Hugging Face attention projections."""
    for layer in graph.layers:
        by = {op.name.split(":")[0]: op for op in layer.ops if op.kind in ("MatMul", "BatchMatMul")}
        q, k = by.get("self_attn.q_proj"), by.get("self_attn.k_proj")
        qk = next((op for op in layer.ops if op.name in ("self_attn:bmm#0", f"self_attn:{FUSED_OP}")), None)
        if q is not None and k is not None and qk is not None:
            d = qk.input_shapes[0][-1]
            return q.input_shapes[1][1] // d, k.input_shapes[1][1] // d
    return None


def llama(t: int, heads: int, kv_heads: int, sequence_parallel: bool = False, fused: bool = False) -> dict[str, tuple]:
    """Megatron's layout for a Llama-style decoder of ``heads`` query and ``kv_heads`` KV heads."""
    if heads % t:
        raise InfeasibleError(f"tp={t} does not divide the {heads} attention heads; Megatron splits whole heads")
    if kv_heads % t and t % kv_heads:
        raise InfeasibleError(f"tp={t} and the {kv_heads} KV heads: one must divide the other (Megatron splits "
                              "KV heads by tp, or replicates each over tp / KV heads devices)")
    g = min(t, kv_heads)                 # KV-head groups across the tp devices; t / g copies of each
    col, row = ((1, 1), (1, t)), ((1, t), (t, 1))
    kv = ((1, 1), (1, g))
    s = {
        "?embed/embed_tokens:embedding": ((t, 1),),
        "layers.*/self_attn.q_proj": col, "layers.*/self_attn.k_proj": kv, "layers.*/self_attn.v_proj": kv,
        **_heads("self_attn", t, kv_heads, fused),
        "layers.*/self_attn.o_proj": row,
        "layers.*/mlp.gate_proj": col, "layers.*/mlp.up_proj": col, "layers.*/mlp.down_proj": row,
        "?head/lm_head": col,
    }
    if sequence_parallel:
        # the residual stream on s/t as well: each decoder layer's two residual adds (Megatron's
        # sequence-parallel hidden states between the blocks, Korthikanti et al. 2022, Fig. 5), so
        # that o_proj and down_proj end in a reduce-scatter, not an all-reduce (with the adds on the
        # whole sequence, a layer issued 3 all-reduces and twice the all-gathers: a Llama's
        # megatron-sp cost more than its megatron)
        seq = ((1, t, 1),)
        s.update({"layers.*/input_layernorm:*": seq, "layers.*/post_attention_layernorm:*": seq,
                  "layers.*/:add#*": ((1, t, 1), (1, t, 1)), "?head/norm:*": seq})
    return s


def strategies(layout: str, t: int, graph=None) -> dict[str, tuple]:
    """The patterns of a built-in layout on t devices, for ``graph``'s kind of block (the zoo's
    GPT unless the graph has Hugging Face attention projections)."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown tensor-parallel layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    sp, fused = layout == "megatron-sp", fused_attention(graph)
    found = attention_heads(graph) if graph is not None else None
    if found is not None:
        return llama(t, *found, sequence_parallel=sp, fused=fused)
    return megatron(t, sequence_parallel=sp, fused=fused)
