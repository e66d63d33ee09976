"""Hugging Face causal LMs as parsim models: ``hf:`` in model.yaml.

``hf:`` is a path to a Hugging Face ``config.json`` (relative to the model.yaml) or the same
fields inline; ``args: {seq_len: N}`` is the training sequence length (default: the config's
``max_position_embeddings``).  The model is built by ``transformers`` (the optional extra
``[hf]``) on whatever device is current, the meta device for extraction, with the attention of
``args: {attn_implementation: sdpa | eager}`` (parsim.model.attention):
- ``sdpa`` (transformers' default): ``scaled_dot_product_attention`` with ``is_causal`` and, for
  grouped KV heads, ``enable_gqa`` (transformers passes both when no mask is given, which is why
  the layers get none), extracted as one fused kernel that saves Q, K, V, the output and the
  logsumexp;
- ``eager``: explicit ``QK^T``, softmax and ``AV`` operators over the repeated KV heads, with the
  s x s scores saved (Korthikanti et al. 2022, Sec. 4.1, without flash attention).
Either way attention's FLOPs and heads appear in the operator view that tensor parallelism shards.
A layer whose attention transformers gives a sliding window (Mistral's ``sliding_window``, Qwen2's
layers past ``max_window_layers`` with ``use_sliding_window``; parsim.model.attention.sliding_window_of) carries it
(``Decoder.attention_window``): extraction prices its fused attention at the window's share of the
causal pairs, and on real tensors it runs with the banded mask.

Cut units (thin wrappers whose submodules keep the Hugging Face names, so operator ids read
``layers.3/self_attn.q_proj:mm``):
- ``embed``: ``embed_tokens``, token ids (B, T) -> (B, T, h), times the model's embedding multiplier where
  transformers applies one outside the module (Granite, HyperCLOVA X: EMBEDDING_MULTIPLIED), or normed by the
  model's final norm where its forward norms the embeddings too (NanoChat: EMBEDDING_NORMED);
- ``layers.i``: one decoder layer, (B, T, h) -> (B, T, h).  Rotary position embeddings live on
  the model, not the layer (transformers passes ``position_embeddings=(cos, sin)`` into each
  layer), so cos, sin and the causal mask for T positions are computed once, as buffers of the
  model, and handed to every layer (one cos, sin per layer type where the model keeps a rotary
  frequency per type, Gemma 3 and Olmo 3: each layer gets its type's);
- ``head``: the final norm and ``lm_head``, (B, T, h) -> logits (B, T, V), the logits scaled (Granite,
  HyperCLOVA X, Cohere: LOGITS_SCALED) or soft-capped (Gemma 2, NanoChat: LOGITS_CAPPED) as the family's
  ForCausalLM does it; before them, where the
  config has one (``num_nextn_predict_layers``; ``args: {mtp_layers: 0}`` leaves it out),
  DeepSeek-V3's multi-token-prediction module (``head/mtp``: MultiTokenPrediction).  One unit, as
  Megatron-Core keeps its MTP layers on the last pipeline stage with the output layer (the
  "mL" of its pipeline layouts), and they share the output head.

Any architecture with Llama's layout (``model.embed_tokens``, ``model.layers``, ``model.norm``,
``model.rotary_emb``, ``lm_head``: Llama, Mistral, Qwen2; Mixtral, Qwen3-MoE and DeepSeek-V3 with
their experts) is accepted; ``llama_param_count`` is the closed form for Llama's blocks.

Mixtures of experts (parsim.model.moe).  transformers 5 keeps a MoE layer's routed experts as two
stacked parameters, ``mlp.experts.gate_up_proj`` (E, 2I, h) and ``mlp.experts.down_proj`` (E, h, I),
and runs them with a loop over the experts the router picked, which needs the routing's values
(``nonzero``) and so cannot run on the meta device.  For extraction (``causal_lm(...,
grouped_experts=True)``) each experts module runs instead as the grouped GEMM a MoE training
kernel runs (Megatron-LM's GroupedMLP, DeepSeek's DeepGEMM): dispatch T k token rows into E
groups of c = T k / E (balanced routing: every expert gets the mean), a batched matmul per
projection over the E experts, and combine the rows back weighted by the router's scores.  Same
parameters, same FLOPs as the loop on balanced routing, no data-dependent shapes.  The router,
the shared experts and attention run as transformers wrote them.  Each decoder unit carries its
``Experts`` (``Decoder.moe``), which extraction records on ``Layer.experts``.
"""

from __future__ import annotations

import json
import os

import torch
from torch import nn

from parsim.errors import InputError
from parsim.model.attention import KINDS, sliding_window_of, window_cuts
from parsim.model.moe import Experts

INSTALL = "pip install -e '.[hf]'"
_LLAMA_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")


def read_config(value, base_dir: str, where: str) -> dict:
    """The config fields of ``hf:``: a path to a config.json (relative to ``base_dir``) or a mapping."""
    from parsim.inputs import load_file

    if isinstance(value, str):
        path = value if os.path.isabs(value) else os.path.join(base_dir, value)
        cfg = load_file(path, "a Hugging Face config.json")
        where = path
    elif isinstance(value, dict):
        cfg = dict(value)
    else:
        raise InputError(f"{where}: hf: expected a path to a config.json or a mapping of its fields, "
                         f"got {type(value).__name__}")
    if not isinstance(cfg, dict):
        raise InputError(f"{where}: expected a JSON object of config fields")
    if "model_type" not in cfg:
        raise InputError(f"{where}: hf: model_type: missing; add the architecture, e.g. \"model_type\": \"llama\"")
    missing = [k for k in _LLAMA_KEYS if k not in cfg]
    if missing:
        raise InputError(f"{where}: hf: {missing[0]}: missing; a decoder needs {', '.join(_LLAMA_KEYS)}")
    for k in _LLAMA_KEYS + ("num_key_value_heads",):
        if k in cfg and (not isinstance(cfg[k], int) or isinstance(cfg[k], bool) or cfg[k] <= 0):
            raise InputError(f"{where}: hf: {k}: expected a positive integer, got {cfg[k]!r}")
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    if cfg["hidden_size"] % heads and "head_dim" not in cfg:
        raise InputError(f"{where}: hf: num_attention_heads: {heads} does not divide hidden_size "
                         f"{cfg['hidden_size']}; give head_dim or change the head count")
    if heads % kv:
        raise InputError(f"{where}: hf: num_key_value_heads: {kv} does not divide num_attention_heads {heads}")
    return cfg


def require_transformers(where: str = "model"):
    """The ``transformers`` package, or an InputError saying how to install it."""
    try:
        import transformers
    except ImportError:
        raise InputError(f"{where}: hf: needs the transformers package, which is not installed; install it "
                         f"with {INSTALL}") from None
    return transformers


def llama_param_count(cfg: dict) -> int:
    """Parameters of a Llama decoder from its config (no biases, ``attention_bias``/``mlp_bias`` false):
    embeddings V h + per layer [attention q, o: 2 h (a d); k, v: 2 h (g d); SwiGLU 3 h I; two
    RMSNorms 2 h] + final RMSNorm h + an untied head V h, with a heads of d = h / a and g KV heads
    (Touvron et al. 2023; Dubey et al. 2024, Table 3)."""
    h, inter, L, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    a = cfg["num_attention_heads"]
    g = cfg.get("num_key_value_heads") or a
    d = cfg.get("head_dim") or h // a
    layer = 2 * h * a * d + 2 * h * g * d + 3 * h * inter + 2 * h
    head = 0 if cfg.get("tie_word_embeddings", False) else V * h
    return V * h + L * layer + h + head


def causal_mask(t: int, window: int = 0) -> torch.Tensor:
    """The additive causal mask (1, 1, t, t): 0 where query i sees key j (j <= i, and i - window < j
    under a sliding ``window``: transformers' sliding-window mask), -inf elsewhere."""
    i = torch.arange(t)
    seen = i[None, :] <= i[:, None]
    if window:
        seen &= i[None, :] > i[:, None] - window
    return torch.zeros((t, t)).masked_fill(~seen, float("-inf"))[None, None]


class _Positions(nn.Module):
    """cos, sin (1, T, d) of the rotary embedding (DeepSeek-V2's: one complex tensor, which its
    layers apply themselves), for eager attention the causal mask (1, 1, T, T)
    for T positions, and the mask banded for each sliding window of ``windows``, computed once per
    model as transformers' model forward does, and read by every layer.  Fused attention takes
    ``is_causal`` instead of a mask, which extraction records as the fused kernel, its work at a
    windowed layer's share (parsim.model.attention.windowed); on real tensors a windowed layer
    shorter than its sequence gets its banded mask, so that what runs is what the model computes."""

    def __init__(self, rotary: nn.Module, head_dim: int, seq_len: int, eager: bool, windows=(), layer_types=()):
        super().__init__()
        probe, positions = torch.empty(1, seq_len, head_dim), torch.arange(seq_len)[None]
        # Gemma 3 and Olmo 3 keep one rotary frequency per layer type (Gemma 3: the sliding layers'
        # base 10,000, the full ones' 1,000,000), and their model forward computes (cos, sin) for each
        # type and hands a layer its type's (modeling_gemma3.Gemma3TextModel.forward): ``layer_types``,
        # a type per layer, given where the rotary module takes one (CausalLM: takes_layer_type)
        self.types = tuple(dict.fromkeys(layer_types))
        emb = rotary(probe, positions, self.types[0]) if self.types else rotary(probe, positions)
        # transformers' DeepSeek-V2 returns one complex tensor (freqs_cis), which its layers move to
        # their device and apply themselves (modeling_deepseek_v2.apply_rotary_emb): kept out of the
        # buffers, which a module's .to(dtype) would cast to a real dtype; every other model returns
        # (cos, sin)
        self.freqs = emb if isinstance(emb, torch.Tensor) else None
        cos, sin = (None, None) if self.freqs is not None else emb
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for kind in self.types[1:]:
            cos, sin = rotary(probe, positions, kind)
            self.register_buffer(f"cos_{kind}", cos, persistent=False)
            self.register_buffer(f"sin_{kind}", sin, persistent=False)
        self.eager = eager
        self.register_buffer("mask", causal_mask(seq_len) if eager else None, persistent=False)
        for w in sorted(set(windows) - {0}):
            self.register_buffer(f"mask_window_{w}", causal_mask(seq_len, w), persistent=False)

    def take(self, t: int, dtype: torch.dtype, window: int = 0, meta: bool = False, layer_type: str | None = None):
        """(cos, sin) and the mask for t positions, (cos, sin) of ``layer_type`` where the model keeps one per
        type: eager's mask buffer (banded under ``window``); for fused attention none, but the banded one on real
        tensors when the window is shorter than t."""
        if self.eager or (window_cuts(window, t) and not meta):
            mask = getattr(self, f"mask_window_{window}" if window else "mask")[..., :t, :t].to(dtype)
        else:
            mask = None
        if self.freqs is not None:
            return self.freqs[:, :t], mask
        own = "" if not self.types or layer_type == self.types[0] else f"_{layer_type}"
        return (getattr(self, "cos" + own)[:, :t], getattr(self, "sin" + own)[:, :t]), mask


def takes_layer_type(rotary: nn.Module) -> bool:
    """Whether a transformers rotary module computes (cos, sin) per layer type (its forward's
    ``layer_type``: Gemma 3, Olmo 3), rather than one for every layer."""
    import inspect

    return "layer_type" in inspect.signature(rotary.forward).parameters


class _Adopt(nn.Module):
    """A cut unit whose submodules are another module's children under their own names."""

    def __init__(self, **children: nn.Module):
        super().__init__()
        for name, child in children.items():
            self.add_module(name, child)


# What transformers computes outside the decoder layers beyond Llama's embed_tokens -> layers -> norm -> lm_head,
# which the cut units compute too, for the model parsim prices and runs to be the one transformers defines
# (transformers 5, modeling_<model_type>.py; tests/test_hf_scalings.py compares the logits with transformers' own):
# - <Family>Model.forward scales the embeddings, ``inputs_embeds = inputs_embeds * self.embedding_multiplier``
#   (Granite's and HyperCLOVA X's maximal-update parametrization); Gemma's sqrt(hidden) is inside its embedding
#   module (GemmaScaledWordEmbedding), so the cut has it already;
EMBEDDING_MULTIPLIED = frozenset({"granite", "granite_swa", "granitemoe", "granitemoe_swa", "granitemoeshared",
                                  "hyperclovax"})
# - NanoChatModel.forward norms the embeddings before the first layer with the norm it applies after the last,
#   ``hidden_states = self.norm(hidden_states)  # Additional norm before the layers`` (a weight-free RMSNorm, so the
#   embedding unit's copy shares nothing with the head's);
EMBEDDING_NORMED = frozenset({"nanochat"})
# - <Family>ForCausalLM.forward scales the logits by a config field: Granite divides, ``logits /
#   self.config.logits_scaling``; HyperCLOVA X multiplies, ``self.lm_head(...) * self.config.logits_scaling``; Cohere
#   multiplies, ``logits * self.logit_scale``;
LOGITS_SCALED = {**{t: (torch.div, "logits_scaling") for t in ("granite", "granite_swa", "granitemoe",
                                                               "granitemoe_swa", "granitemoeshared")},
                 "hyperclovax": (torch.mul, "logits_scaling"),
                 **{t: (torch.mul, "logit_scale") for t in ("cohere", "cohere2", "cohere2_moe")}}
# - and Gemma 2's, Gemma 3's, VaultGemma's and NanoChat's cap them where the config sets
#   ``final_logit_softcapping``: ``logits / cap``, ``torch.tanh``, ``* cap`` (a family whose forward reads no such
#   field ignores it).
LOGITS_CAPPED = frozenset({"gemma2", "gemma3_text", "vaultgemma", "nanochat"})


def outer_scalings(cfg) -> tuple[float | None, tuple | None, float | None]:
    """(the embedding multiplier, (torch.div or torch.mul, the logits' scale), the logits' cap) that the forward of
    ``cfg``'s family (a transformers config) computes outside its decoder layers, each None where it has none."""
    op, field = LOGITS_SCALED.get(cfg.model_type, (None, None))
    return (cfg.embedding_multiplier if cfg.model_type in EMBEDDING_MULTIPLIED else None,
            (op, getattr(cfg, field)) if op else None,
            getattr(cfg, "final_logit_softcapping", None) if cfg.model_type in LOGITS_CAPPED else None)


class Embed(_Adopt):
    """``embed_tokens``, and after it the model's embedding multiplier where transformers applies one
    (EMBEDDING_MULTIPLIED; ``multiplier`` None elsewhere), or the model's ``norm`` where its forward norms the
    embeddings (EMBEDDING_NORMED; None elsewhere)."""

    def __init__(self, embed_tokens: nn.Module, multiplier: float | None = None, norm: nn.Module | None = None):
        super().__init__(embed_tokens=embed_tokens, **({"norm": norm} if norm is not None else {}))
        self.multiplier = multiplier

    def forward(self, ids: torch.Tensor) -> torch.Tensor:        # (B, T) -> (B, T, h)
        x = self.embed_tokens(ids)
        if "norm" in self._modules:
            x = self.norm(x)
        return x if self.multiplier is None else x * self.multiplier


def experts_of(layer: nn.Module) -> Experts | None:
    """The ``Experts`` of a transformers decoder layer, read from its modules: ``mlp.experts``
    with stacked ``gate_up_proj`` (E, 2I, h), ``mlp.gate`` (the router, ``top_k``, ``weight``
    (E, h)) and optionally ``mlp.shared_experts`` (a SwiGLU MLP; DeepSeek) or ``mlp.shared_expert``
    with its sigmoid gate ``mlp.shared_expert_gate`` (Qwen2-MoE), counted with the router; None
    for a dense layer."""
    mlp = getattr(layer, "mlp", None)
    experts, gate = getattr(mlp, "experts", None), getattr(mlp, "gate", None)
    stacked = getattr(experts, "gate_up_proj", None)
    if stacked is None or gate is None or stacked.dim() != 3:
        return None
    e, two_i, h = stacked.shape
    shared = getattr(mlp, "shared_experts", None) or getattr(mlp, "shared_expert", None)
    shared_i = shared.gate_proj.out_features if shared is not None else 0
    shared_gate = getattr(mlp, "shared_expert_gate", None)
    router = sum(p.numel() for p in gate.parameters(recurse=False)) + \
        (sum(p.numel() for p in shared_gate.parameters()) if shared_gate is not None else 0)
    groups, limit = getattr(gate, "num_group", 1) or 1, getattr(gate, "topk_group", 0) or 0   # DeepSeek's routers
    if getattr(gate, "topk_method", None) == "greedy":        # DeepSeek-V2's router without its group limit
        groups, limit = 1, 0
    return Experts(experts=e, top_k=gate.top_k, hidden=h, intermediate=two_i // 2, shared_intermediate=shared_i,
                   router_params=router, groups=groups if limit and groups > 1 else 1,
                   group_limit=limit if limit and groups > 1 else 0)


def _grouped_experts_forward(module: nn.Module, fused_swiglu: bool = False):
    """A forward for a transformers experts module (stacked ``gate_up_proj``, ``down_proj``,
    ``act_fn``) that runs its experts as grouped GEMMs on balanced routing (module docstring):
    (T, h) tokens, their top-k expert indices and weights (T, k) -> (T, h); ``fused_swiglu``: a
    SiLU activation and its product run as one fused SwiGLU (parsim.model.fused_ops)."""
    from parsim.model.fused_ops import is_silu, swiglu

    def act(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return swiglu(gate, up) if fused_swiglu and is_silu(module.act_fn) else module.act_fn(gate) * up

    def forward(hidden_states: torch.Tensor, top_k_index: torch.Tensor, top_k_weights: torch.Tensor):
        if not hidden_states.is_meta:       # shapes only: its row indices are placeholders, not the routing
            raise RuntimeError("grouped_experts runs on the meta device only (extraction); build the model "
                               "without it to compute values")
        t, h = hidden_states.shape
        e, k = module.gate_up_proj.shape[0], top_k_index.shape[-1]
        c = -(-t * k // e)                  # tokens per expert, the mean, rounded up
        rows = torch.zeros(e * c, dtype=torch.long, device=hidden_states.device)   # which token each row is
        x = hidden_states.index_select(0, rows).view(e, c, h)                       # dispatch: (E, c, h)
        gate, up = torch.bmm(x, module.gate_up_proj.transpose(1, 2)).chunk(2, dim=-1)   # (E, c, I) each
        y = torch.bmm(act(gate, up), module.down_proj.transpose(1, 2))               # (E, c, h)
        w = top_k_weights.reshape(-1).index_select(0, torch.zeros(e * c, dtype=torch.long, device=y.device))
        y = y.reshape(e * c, h) * w[:, None].to(y.dtype)
        return _Combine.apply(y, rows, t)                                            # combine: (T, h)
    return forward


class _Combine(torch.autograd.Function):
    """The routed rows (R, h) added into their T tokens (``rows``: each row's token): one read of
    the rows and one write of the tokens, as a fused unpermute moves them (Megatron-Core's
    moe_unpermute), and a backward that keeps only the indices, as transformers' grouped_mm
    experts (what the runs execute: the rows gathered back, summed over the k slots) keep no row.
    A plain index_add kept all T k x h rows for its backward (its derivative refers to the
    source): on set moe-2026-11-27c's model 123 KiB a sample and layer more than the runs'
    autograd saved."""

    @staticmethod
    def forward(ctx, y: torch.Tensor, rows: torch.Tensor, tokens: int) -> torch.Tensor:
        ctx.save_for_backward(rows)
        return y.new_zeros((tokens, y.shape[-1])).index_add_(0, rows, y)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (rows,) = ctx.saved_tensors
        return grad.index_select(0, rows), None, None


class Decoder(_Adopt):
    """One decoder layer, given the model's rotary cos/sin and causal mask; ``moe`` its experts
    (None: dense)."""

    def __init__(self, layer: nn.Module, positions: _Positions, layer_type: str | None = None):
        super().__init__(**dict(layer.named_children()))
        object.__setattr__(self, "_layer", layer)        # not a child: its children are ours
        object.__setattr__(self, "_positions", positions)
        object.__setattr__(self, "layer_type", layer_type)     # its rotary's, where the model keeps one per type
        object.__setattr__(self, "moe", experts_of(layer))
        # the keys a query sees at most (0: every earlier one), read by extraction (parsim.model.extract)
        object.__setattr__(self, "attention_window", sliding_window_of(getattr(layer, "self_attn", None)))

    # On the meta device a windowed layer runs as fused attention takes it, without its banded mask
    # (_Positions.take); extraction sets this to measure it as a CPU runs it, with the mask
    # (parsim.model.extract, parsim.model.attention.cpu_attention).
    banded_on_meta = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:           # (B, T, h) -> (B, T, h)
        meta = x.is_meta and not self.banded_on_meta
        pos, mask = self._positions.take(x.shape[1], x.dtype, self.attention_window, meta, self.layer_type)
        return self._layer(x, attention_mask=mask, position_embeddings=pos)


class Head(_Adopt):
    """The final norm and the output head, after the multi-token-prediction module where given
    (``mtp``: its ``losses`` and ``moe`` are the unit's)."""

    def __init__(self, norm: nn.Module, lm_head: nn.Module, mtp: nn.Module | None = None,
                 scale: tuple | None = None, softcap: float | None = None):
        super().__init__(norm=norm, lm_head=lm_head, **({"mtp": mtp} if mtp is not None else {}))
        self.losses = 0 if mtp is None else mtp.losses
        object.__setattr__(self, "moe", None if mtp is None else mtp.moe)
        self.scale, self.softcap = scale, softcap       # (torch.div or torch.mul, value): LOGITS_SCALED

    def forward(self, x: torch.Tensor) -> torch.Tensor:          # (B, T, h) -> (B, T, V)
        if "mtp" in self._modules:
            x = self.mtp(x)
        logits = self.lm_head(self.norm(x))
        if self.scale is not None:
            op, value = self.scale
            logits = op(logits, value)
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits


class _JoinLoss(torch.autograd.Function):
    """The main model's hidden states ``x`` unchanged forward; backward, x's gradient and a
    gradient for the multi-token-prediction ``logits`` besides: how Megatron-Core joins the MTP
    loss to the main one without adding it to the output (MTPLossAutoScaler, megatron/core/
    transformer/multi_token_prediction.py: forward returns its input, backward returns the loss's
    scaled gradient too).  The loss itself is priced as the main loss is (LayerGraph.losses), so
    its gradient here is a constant broadcast (a view, no kernel) of the logits' shape."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        ctx.shape, ctx.dtype = logits.shape, logits.dtype
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, torch.ones((), dtype=ctx.dtype, device=grad.device).expand(ctx.shape)


class MultiTokenPrediction(_Adopt):
    """DeepSeek-V3's multi-token-prediction module of depth 1 (DeepSeek-AI 2024, Sec. 2.2, Fig. 3;
    Megatron-Core's MultiTokenPredictionLayer, ``--mtp-num-layers 1``), which transformers does
    not build: the main model's last hidden states h and the embedding of the tokens one further
    ahead, each RMS-normalised (``hnorm``, ``enorm``), concatenated and projected by M (``eh_proj``,
    2d -> d), one Transformer block as the model's MoE layers (its children adopted, so operators
    read ``self_attn.q_b_proj`` as a decoder's do), its final norm (``norm``), and the output head
    it shares with the main model (``lm_head``, as the embedding: tied weights, parsim.model.
    extract; the main head owns it, as a module of the same unit: Head).  Its loss joins the main
    one (_JoinLoss); its output is h itself, which the main head reads next.  The tokens ahead are
    placeholders (Megatron rolls the input ids by one): their values change no cost, and only
    extraction and a device's layer profile run this unit (the executor refuses it:
    parsim.exec.stages)."""

    losses = 1          # the cross-entropies it adds to the main model's (LayerGraph.losses)

    def __init__(self, layer: nn.Module, positions: _Positions, *, embed_tokens, lm_head, norm_class, hidden: int,
                 eps: float):
        super().__init__(embed_tokens=embed_tokens, enorm=norm_class(hidden, eps=eps), hnorm=norm_class(hidden, eps=eps),
                         eh_proj=nn.Linear(2 * hidden, hidden, bias=False), **dict(layer.named_children()),
                         norm=norm_class(hidden, eps=eps), lm_head=lm_head)
        object.__setattr__(self, "_layer", layer)
        object.__setattr__(self, "_positions", positions)
        object.__setattr__(self, "moe", experts_of(layer))

    def forward(self, x: torch.Tensor) -> torch.Tensor:           # (B, T, h) -> (B, T, h)
        ahead = torch.zeros(x.shape[:2], dtype=torch.long, device=x.device)
        y = self.eh_proj(torch.cat([self.hnorm(x), self.enorm(self.embed_tokens(ahead))], dim=-1))
        pos, mask = self._positions.take(x.shape[1], x.dtype)
        y = self._layer(y, attention_mask=mask, position_embeddings=pos)
        return _JoinLoss.apply(x, self.lm_head(self.norm(y)))


class CausalLM(nn.Module):
    """A transformers causal LM cut into ``embed``, ``layers.0`` ... ``layers.{L-1}``, ``head``
    (with ``mtp_layers`` 1, DeepSeek-V3's MultiTokenPrediction inside it)."""

    def __init__(self, hf_model: nn.Module, seq_len: int, mtp_layers: int = 0):
        super().__init__()
        self.hf = hf_model
        inner, cfg = hf_model.model, hf_model.config
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        windows = [sliding_window_of(getattr(layer, "self_attn", None)) for layer in inner.layers]
        types = list(getattr(cfg, "layer_types", None) or ()) if takes_layer_type(inner.rotary_emb) else []
        self.positions = _Positions(inner.rotary_emb, head_dim, seq_len, cfg._attn_implementation == "eager", windows,
                                    types)
        self.config = cfg
        multiplier, scale, softcap = outer_scalings(cfg)
        units = [("embed", Embed(inner.embed_tokens, multiplier,
                                 inner.norm if cfg.model_type in EMBEDDING_NORMED else None))]
        units += [(f"layers.{i}", Decoder(layer, self.positions, types[i] if types else None))
                  for i, layer in enumerate(inner.layers)]
        mtp = None
        if mtp_layers:
            # its block as the model's next layer would be (DeepSeek-V3: an MoE layer), in the
            # module tree (moved and cast with the model), and its embedding and head the model's
            block = type(inner.layers[-1])(cfg, cfg.num_hidden_layers)
            mtp = self.mtp = MultiTokenPrediction(block, self.positions, embed_tokens=inner.embed_tokens,
                                                  lm_head=hf_model.lm_head, norm_class=type(inner.norm),
                                                  hidden=cfg.hidden_size, eps=cfg.rms_norm_eps)
        units.append(("head", Head(norm=inner.norm, lm_head=hf_model.lm_head, mtp=mtp, scale=scale,
                                   softcap=softcap)))
        object.__setattr__(self, "_units", units)

    def pipeline_units(self) -> list[tuple[str, nn.Module]]:
        return list(self._units)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = ids
        for _, unit in self._units:
            x = unit(x)
        return x


def mtp_depths(cfg: dict) -> int:
    """The multi-token-prediction depths a config states: DeepSeek-V3's ``num_nextn_predict_layers``
    (1 in its config.json, and as DeepSeek and Megatron-Bridge's DeepSeek-V3 recipe train it:
    ``mtp_num_layers=1``), 0 for other architectures, whose configs have no such modules."""
    return int(cfg.get("num_nextn_predict_layers") or 0) if cfg.get("model_type") == "deepseek_v3" else 0


def causal_lm(config: str | dict, seq_len: int, attn_implementation: str = "sdpa",
              grouped_experts: bool = False, mtp_layers: int = 0, fused_ops: tuple[str, ...] = ()) -> CausalLM:
    """The model for ``config`` (a dict of config.json fields, or their JSON text) at ``seq_len``,
    with ``attn_implementation`` (parsim.model.attention.KINDS) attention; ``grouped_experts``:
    MoE experts run as grouped GEMMs on balanced routing, for extraction on meta (module docstring);
    ``mtp_layers``: 1 adds DeepSeek-V3's multi-token-prediction module (MultiTokenPrediction);
    ``fused_ops``: of RMSNorm, rotary embeddings and SwiGLU (parsim.model.fused_ops.KINDS), those
    run as the fused kernels Megatron-Core, NeMo and MindSpeed run (parsim.model.fused_ops), for
    extraction."""
    tf = require_transformers()
    fields = json.loads(config) if isinstance(config, str) else dict(config)
    model_type = fields.pop("model_type")
    for k in ("architectures", "transformers_version", "torch_dtype", "dtype", "_name_or_path", "auto_map",
              "quantization_config"):
        fields.pop(k, None)
    try:
        cfg = tf.AutoConfig.for_model(model_type, **fields)
    except ValueError as e:
        raise InputError(f"hf: model_type: {model_type!r} is unknown to transformers {tf.__version__} ({e})") from None
    if attn_implementation not in KINDS:
        raise InputError(f"hf: args.attn_implementation: must be one of {', '.join(KINDS)}; "
                         f"got {attn_implementation!r}")
    cfg._attn_implementation = attn_implementation
    model = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation=attn_implementation)
    inner = getattr(model, "model", None)
    if not all(hasattr(inner, a) for a in ("embed_tokens", "layers", "norm", "rotary_emb")) \
            or not hasattr(model, "lm_head"):
        raise InputError(f"hf: model_type: {model_type!r} is not laid out like Llama (model.embed_tokens, "
                         "model.layers, model.norm, model.rotary_emb, lm_head); parsim cuts only such decoders")
    lm = CausalLM(model, seq_len, mtp_layers)
    if grouped_experts:
        for layer in list(inner.layers) + ([lm.mtp._layer] if mtp_layers else []):
            if experts_of(layer) is not None:
                layer.mlp.experts.forward = _grouped_experts_forward(layer.mlp.experts, "swiglu" in fused_ops)
    if fused_ops:
        from parsim.model.fused_ops import fuse
        fuse(lm, fused_ops)
    return lm
