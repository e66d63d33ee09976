"""What every framework adapter shares: the decoder's shape as the frameworks name it, the model.yaml
mapping a read config builds, the value a reader returns, and the one-line refusal.

An adapter (parsim.export.megatron, .torchtitan, .deepspeed, .mindspore, .mindformers) is a pure
translation: Plan -> the target's names, and the target's config -> the plan's fields.  It holds
no planning logic: a split, a schedule or a layout the target has no name for is refused in one
line naming the field and the target (``refuse``), never approximated.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from parsim.errors import InputError
from parsim.model.attention import attention_window
from parsim.plan import EMBED, HEAD


@dataclass(frozen=True)
class Decoder:
    """A GPT- or Llama-shaped decoder as the frameworks' configs describe it.

    ``kind``: "gpt" (the zoo's GPT: LayerNorm, learned positions, GeLU MLP of ffn = 4 h, tied
    embedding) or "llama" (a Hugging Face Llama config: RMSNorm, RoPE, SwiGLU, grouped KV heads)."""

    kind: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq_len: int
    tied: bool
    attention: str = "sdpa"          # parsim.model.attention: sdpa | eager | megatron
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    dropout: float = 0.0             # the zoo GPT's hidden and attention dropout
    experts: int = 0                 # a Mixtral-style mixture of experts: routed experts per layer (ffn each)
    topk: int = 0                    # experts a token is routed to
    window: int = 0                  # a sliding window shorter than the sequence (parsim.model.attention), 0 none


def decoder_of(spec) -> Decoder | None:
    """The decoder shape of a model built from the zoo's ``gpt`` or an ``hf:`` Llama config; None
    for anything else (a CNN, a ``module:``, a ``layers:`` table)."""
    source = spec.source
    if source.kind == "builtin" and source.target == "gpt":
        from parsim.model.zoo import GPT_PRESETS

        args = dict(source.args)
        base = GPT_PRESETS[args["preset"]].__dict__ if "preset" in args else {}
        c = {**base, **{k: v for k, v in args.items() if k != "preset"}}
        return Decoder("gpt", c["layers"], c["hidden"], c["heads"], c["heads"], c.get("ffn_mult", 4) * c["hidden"],
                       c["vocab"], c["seq_len"], True, c.get("attention", "eager"), dropout=c.get("dropout", 0.1))
    if source.kind == "hf":
        cfg = json.loads(source.target)
        kw = source.kwargs
        if cfg.get("model_type") not in ("llama", "mixtral"):
            return None
        heads = cfg["num_attention_heads"]
        return Decoder("llama", cfg["num_hidden_layers"], cfg["hidden_size"], heads,
                       cfg.get("num_key_value_heads") or heads, cfg["intermediate_size"], cfg["vocab_size"],
                       kw["seq_len"], bool(cfg.get("tie_word_embeddings", False)), kw["attn_implementation"],
                       float(cfg.get("rope_theta", 10000.0)), float(cfg.get("rms_norm_eps", 1e-5)),
                       experts=cfg.get("num_local_experts", 0) if cfg["model_type"] == "mixtral" else 0,
                       topk=cfg.get("num_experts_per_tok", 2) if cfg["model_type"] == "mixtral" else 0,
                       window=attention_window(spec.graph))
    return None


def model_mapping(d: Decoder, name: str) -> dict:
    """The model.yaml mapping (without ``training:``) that builds ``d``: the zoo's GPT, or a Llama
    through ``hf:`` with the config's fields inline (parsim.model.hf; the [hf] extra)."""
    if d.kind == "gpt":
        return {"schema_version": 1, "name": name, "model": "gpt",
                "args": {"layers": d.layers, "hidden": d.hidden, "heads": d.heads, "seq_len": d.seq_len,
                         "vocab": d.vocab, "attention": d.attention, "dropout": d.dropout}}
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": d.hidden,
           "intermediate_size": d.ffn, "num_hidden_layers": d.layers, "num_attention_heads": d.heads,
           "num_key_value_heads": d.kv_heads, "vocab_size": d.vocab, "max_position_embeddings": d.seq_len,
           "tie_word_embeddings": d.tied, "rope_theta": d.rope_theta, "rms_norm_eps": d.norm_eps,
           "hidden_act": "silu"}
    if d.experts:               # Mixtral: every layer's MLP is d.experts routed SwiGLU experts of width ffn
        cfg.update(model_type="mixtral", architectures=["MixtralForCausalLM"], num_local_experts=d.experts,
                   num_experts_per_tok=d.topk)
    else:
        cfg.update(attention_bias=False, mlp_bias=False)
    return {"schema_version": 1, "name": name, "hf": cfg,
            "args": {"seq_len": d.seq_len, "attn_implementation": d.attention}}


@dataclass(frozen=True)
class Imported:
    """What a reader found in a framework's config.

    ``model``: a model.yaml mapping without ``training:`` (None where the config names no model, as
    a DeepSpeed JSON: the user gives ``--model``); ``training``: the model.yaml ``training:`` fields
    the config sets (global_batch_size, dtype, optimizer, fp8); ``parallel``: the keyword arguments
    of parsim.search.resolve.resolve_config (``split`` as boundaries "0,9,18"); ``world_size``: the
    devices the config names, where it names them; ``shard``: operator strategies (MindSpore)."""

    model: dict | None
    training: dict
    parallel: dict
    world_size: int | None = None
    shard: dict = field(default_factory=dict)


def refuse(source: str, key: str, value, target: str, why: str) -> InputError:
    """The one-line refusal: ``source: key: value: why`` naming the target."""
    return InputError(f"{source}: {key}: {value}: {target} {why}")


def stage_units(bounds: tuple[int, ...], names: tuple[str, ...]) -> list[list[str]]:
    """The unit names of each stage."""
    return [list(names[a:b]) for a, b in zip(bounds, bounds[1:])]


def decoder_counts(bounds: tuple[int, ...], names: tuple[str, ...], source: str, target: str) -> list[int]:
    """Transformer layers per (virtual) stage of a decoder split; the embedding must open the first
    stage and the head close the last, as every framework places them."""
    if names[0] != EMBED or names[-1] != HEAD:
        raise refuse(source, "model.layers", f"{names[0]}..{names[-1]}", target,
                     "splits decoders (embed, layers.N, head), which this model is not")
    return [b - a - (a == 0) - (b == len(names)) for a, b in zip(bounds, bounds[1:])]


def split_arg(bounds: tuple[int, ...]) -> str:
    return ",".join(map(str, bounds))


def set_dotted(mapping: dict, key: str, value, source: str) -> None:
    """``--set section.key=value``: one override of a nested config, as torchtitan's and
    Megatron's command lines override their files."""
    parts = key.split(".")
    node = mapping
    for p in parts[:-1]:
        nxt = node.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise InputError(f"{source}: --set {key}: {p} is not a section")
        node = nxt
    node[parts[-1]] = value


def parse_value(text: str):
    """A --set value as YAML reads it (1, 2.5, true, [a, b], "text")."""
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text
