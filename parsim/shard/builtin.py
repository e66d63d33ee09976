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

Multi-head latent attention (DeepSeek-V2/V3; Megatron-Core's MLASelfAttention,
megatron/core/transformer/multi_latent_attention.py): the query and KV down projections
(q_a_proj, kv_a_proj_with_mqa) are "duplicated", whole on every device of the group and run on
its s/t tokens, so are their RMSNorms; the up projections (q_b_proj, kv_b_proj) column-split
after the sequence is gathered, attention on a/t heads, o_proj row-split; the decoupled RoPE key
is gathered from the sequence-parallel region.  Megatron runs it with sequence parallelism only
here (megatron-sp).

Mixture-of-experts layers beside attention's tp (``moe``; MoE Parallel Folding, Liu et al. 2025,
arXiv 2504.14960; Megatron-Core's MoELayer, which raises in training without sequence
parallelism when attention's tp > 1): megatron-sp only.  The router (mlp.gate) is whole on every
device and scores its s/t tokens (its gradient a partial sum over the group, as Megatron sums a
sequence-parallel weight's); the shared experts are split as a dense SwiGLU; the routed experts
either whole (expert tp 1: each device's experts compute its own s/t tokens' rows, which the
ep all-to-all then moves, parsim.cost.experts) or split as a SwiGLU over the group (expert tp =
tp: the rows gathered over the group, gate and up column-split, down row-split and
reduce-scattered, as Megatron's alltoall dispatcher gathers and scatters over the expert tp
group).
"""

from __future__ import annotations

from parsim.errors import InfeasibleError
from parsim.model.attention import FUSED_OP, sequence_length

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


def gated_mlp(graph) -> bool:
    """Whether a Llama-style graph's MLP is gated (a ``mlp.gate_proj`` operator: a SwiGLU); False
    for an MLP of up and down projections alone (Nemotron's squared ReLU)."""
    return any(op.module == "mlp.gate_proj" for layer in graph.layers for op in layer.ops)


def whole_weight_ops(graph) -> dict[str, tuple]:
    """Patterns keeping whole, on every device, the norms' operators that read parameters alone:
    LayerNorm1p's weight + 1 (Nemotron's norms, F.layer_norm(x, 1 + w): transformers'
    NemotronLayerNorm1P), an h-vector the sequence-parallel norm patterns, which split activations
    by sequence, cannot cut.  Megatron keeps a norm's weight whole on every tensor-parallel rank
    under sequence parallelism and all-reduces its gradient over the group (Megatron-Core,
    distributed/finalize_model_grads.py: _allreduce_layernorm_grads).  Empty for Llama's RMSNorm,
    whose every operator reads the activations."""
    out: dict[str, tuple] = {}
    for layer in graph.layers:
        prefix = "layers.*" if layer.name.startswith("layers.") else f"?{layer.name}"
        for op in layer.ops:
            if op.module.rsplit(".", 1)[-1].endswith("norm") and op.param_inputs and all(op.param_inputs):
                out[f"{prefix}/{op.name}"] = tuple((1,) * len(shape) for shape in op.input_shapes)
    return out


def mla_heads(graph) -> int | None:
    """The query heads of a multi-head-latent-attention graph (DeepSeek-V2/V3: a kv_a_proj_with_mqa
    projection), from its attention operator's Q (b, a, s, d); None for other attention."""
    for layer in graph.layers:
        if any(op.name == "self_attn.kv_a_proj_with_mqa:mm" for op in layer.ops):
            att = next((op for op in layer.ops if op.kind == "Attention"), None)
            return att.input_shapes[0][1] if att is not None else None
    return None


def mla(t: int, heads: int, fused: bool = True) -> dict[str, tuple]:
    """Megatron-Core's multi-head latent attention layout for ``heads`` heads under sequence
    parallelism (module docstring), with the decoder's norms, residual adds and dense SwiGLUs."""
    if heads % t:
        raise InfeasibleError(f"tp={t} does not divide the {heads} attention heads; Megatron splits whole heads")
    if not fused:
        raise InfeasibleError(f"tp={t} with eager multi-head latent attention: parsim lays out MLA's fused "
                              "attention; use args.attn_implementation sdpa")
    col, row, rows = ((1, 1), (1, t)), ((1, t), (t, 1)), ((t, 1), (1, 1))
    seq = ((1, t, 1),)
    return {
        "?embed/embed_tokens:embedding": ((t, 1),),
        "?layers.*/self_attn.q_a_proj": rows, "?layers.*/self_attn.q_b_proj": col, "?layers.*/self_attn.q_proj": col,
        "layers.*/self_attn.kv_a_proj_with_mqa": rows, "layers.*/self_attn.kv_b_proj": col,
        **_heads("self_attn", t, heads, fused), "layers.*/self_attn.o_proj": row,
        "?layers.*/mlp.gate_proj": col, "?layers.*/mlp.up_proj": col, "?layers.*/mlp.down_proj": row,
        "layers.*/input_layernorm:*": seq, "layers.*/post_attention_layernorm:*": seq,
        "layers.*/:add#*": ((1, t, 1), (1, t, 1)), "?head/norm:*": seq, "?head/lm_head": col,
    }


def moe(t: int, graph, etp: int = 1) -> dict[str, tuple]:
    """The mixture-of-experts operators' patterns beside Megatron's sequence-parallel layout on t
    devices, the routed experts whole (``etp`` 1) or split over the group (``etp`` = t) (module
    docstring), read from the operators of ``graph``'s first MoE layer: every operator of the
    routed experts gets a split of its rows (etp 1) or of its I columns (etp = t)."""
    if etp not in (1, t):
        raise InfeasibleError(f"etp={etp} with tp={t}: parsim lays out expert tp 1 or tp; choose one")
    layer = next((x for x in graph.layers if x.experts is not None), None)
    if layer is None:
        return {}
    col, row, rows = ((1, 1), (1, t)), ((1, t), (t, 1)), ((t, 1), (1, 1))
    out = {"layers.*/mlp.gate:mm": rows,
           "?layers.*/mlp.shared_experts.gate_proj": col, "?layers.*/mlp.shared_experts.up_proj": col,
           "?layers.*/mlp.shared_experts.down_proj": row,
           "?layers.*/mlp.shared_expert.gate_proj": col, "?layers.*/mlp.shared_expert.up_proj": col,
           "?layers.*/mlp.shared_expert.down_proj": row, "?layers.*/mlp.shared_expert_gate": rows,
           "?layers.*/mlp:add*": ((1, t, 1), (1, t, 1))}
    inter = layer.experts.intermediate
    gemms = [op for op in layer.ops if op.module == "mlp.experts" and op.kind == "BatchMatMul"]
    for op in layer.ops:
        if op.module != "mlp.experts":
            continue
        key, dims = f"?layers.*/{op.name}", len(op.output_shape)     # optional: rows that do not divide stay whole
        if op.kind == "BatchMatMul":
            up = op is gemms[0]
            out[key] = (((1, t, 1), (1, 1, 1)) if etp == 1 else ((1, 1, 1), (1, 1, t)) if up
                        else ((1, 1, t), (1, t, 1)))
        elif etp == 1 or dims != 3 or op.output_shape[-1] != inter:
            # the rows split: (E, c, .) on c, the combine's (T k, h) on its rows; under etp = t the
            # combine's rows too (the down projection's partial sums reduce-scattered into them)
            out[key] = ((1, t, 1),) if dims == 3 else ((t,) + (1,) * (dims - 1),)
        else:                                   # etp = t: the SwiGLU's (E, c, I) on I
            out[key] = ((1, 1, t),)
    return out


def llama(t: int, heads: int, kv_heads: int, sequence_parallel: bool = False, fused: bool = False,
          dense_mlp: bool = True, gated: bool = True) -> dict[str, tuple]:
    """Megatron's layout for a Llama-style decoder of ``heads`` query and ``kv_heads`` KV heads
    (``dense_mlp`` False: its SwiGLU patterns optional, for a mixture of experts whose first
    layers may be dense; ``gated`` False: an MLP of up_proj and down_proj alone, Nemotron's
    squared ReLU, whose up projection Megatron's ColumnParallelLinear splits as it does a
    SwiGLU's fused gate and up projection)."""
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
        **{("" if dense_mlp else "?") + k: v for k, v in ((("layers.*/mlp.gate_proj", col),) if gated else ()) +
           (("layers.*/mlp.up_proj", col), ("layers.*/mlp.down_proj", row))},
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


def strategies(layout: str, t: int, graph=None, etp: int = 1) -> dict[str, tuple]:
    """The patterns of a built-in layout on t devices, for ``graph``'s kind of block (the zoo's
    GPT unless the graph has Hugging Face attention projections; multi-head latent attention
    and mixtures of experts, their routed experts split over ``etp`` devices, under megatron-sp)."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown tensor-parallel layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    sp, fused = layout == "megatron-sp", fused_attention(graph)
    moe_graph = graph is not None and getattr(graph, "moe", False)
    if (moe_graph or (graph is not None and mla_heads(graph))) and not sp:
        what = "a mixture of experts" if moe_graph else "multi-head latent attention"
        raise InfeasibleError(f"tp={t} with the {layout} layout: {graph.name} has {what}, which Megatron runs "
                              "beside tensor parallelism with sequence parallelism only (its MoELayer raises "
                              "without it); use the megatron-sp layout")
    heads = mla_heads(graph) if graph is not None else None
    found = attention_heads(graph) if graph is not None else None
    if heads:
        out = mla(t, heads, fused)
    elif found is not None:
        out = llama(t, *found, sequence_parallel=sp, fused=fused, dense_mlp=not moe_graph, gated=gated_mlp(graph))
        if sp:
            out.update(whole_weight_ops(graph))
    elif moe_graph:
        raise InfeasibleError(f"tp={t}: {graph.name}'s attention is neither Llama-style (q_proj, k_proj) nor "
                              "multi-head latent attention; parsim lays out only those beside experts")
    elif graph is not None and sequence_length(graph) is None:
        raise InfeasibleError(f"tp={t} with the {layout} layout: {graph.name} has no attention, and Megatron's "
                              "layouts split transformer blocks (attention and MLP); use --tp-layout auto, which "
                              "searches each operator's split, or the model's shard: section (--tp-layout model)")
    else:
        return megatron(t, sequence_parallel=sp, fused=fused)
    out = {**out, **moe(t, graph, etp)} if moe_graph else out
    return {**out, **mtp(out, t, sp)} if graph.mtp_in_head else out


def mtp(decoder: dict[str, tuple], t: int, sp: bool) -> dict[str, tuple]:
    """The patterns of the head's multi-token-prediction module (``head/mtp.*``: parsim.model.hf.
    MultiTokenPrediction; Megatron-Core's MultiTokenPredictionLayer): its block as the decoder
    layers' ``decoder`` patterns lay them out, its embedding split by vocabulary as the model's is
    (its output head is the model's ``lm_head``, one module whose pattern names both products),
    its projection M column-parallel (a ColumnParallelLinear whose output Megatron gathers and
    scatters back to the sequence), and its three norms on s/t of the sequence under sequence
    parallelism; all optional."""
    col = ((1, 1), (1, t))
    out = {}
    for key, v in decoder.items():
        bare = key.lstrip("?")          # every pattern here is optional: the module may be absent
        if bare.startswith("layers.*/") and not bare.startswith("layers.*/:"):
            out["?head/mtp." + bare.split("/", 1)[1]] = v
    out.update({"?head/mtp.embed_tokens:embedding": ((t, 1),), "?head/mtp.eh_proj": col})
    if sp:
        out.update({f"?head/mtp.{norm}:*": ((1, t, 1),) for norm in ("enorm", "hnorm", "norm")})
        out["?head/mtp:add#*"] = ((1, t, 1), (1, t, 1))     # the block's residual adds
    return out
