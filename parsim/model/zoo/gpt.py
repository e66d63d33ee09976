"""A GPT-style decoder (Radford et al. 2019; Brown et al. 2020), written the way Megatron-LM lays
out a layer so that its saved activations match Korthikanti et al. 2022, Sec. 4.1:
pre-LayerNorm, fused QKV projection, attention with dropout, a 4h GeLU MLP, and dropout on both
residual branches.  Embedding and LM head share one weight.  Attention (parsim.model.attention) is
by default ``attention="sdpa"``: one ``F.scaled_dot_product_attention`` (with its dropout), the
fused FlashAttention kernel every GPU training stack runs (Megatron-Core through Transformer
Engine's fused attention, torchtitan, transformers' default); ``attention="eager"`` runs explicit
QK^T, softmax and AV, saving the s x s scores (Korthikanti et al. 2022, Sec. 4.1, without flash
attention); ``attention="megatron"`` as Megatron-LM did in 2021-2022 (Narayanan et al. 2021): the
scale folded into QK^T and one fused masked-softmax kernel (parsim.model.fused_softmax).
Parameters are the same for all three.

Parameters: 12*L*h^2 + 13*L*h (layers: QKV 3h^2+3h, proj h^2+h, fc1 4h^2+4h, fc2 4h^2+h, two
LayerNorms 4h) + V*h (tied word embedding) + s*h (positions) + 2h (final LayerNorm).

Cut units: ``embed``, ``layers.0`` ... ``layers.{L-1}``, ``head``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from parsim.model.attention import ZOO_KINDS
from parsim.model.fused_softmax import masked_softmax
from parsim.model.zoo.weights import has_values


@dataclass(frozen=True)
class GPTConfig:
    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int
    dropout: float = 0.1
    ffn_mult: int = 4
    # eager | sdpa | megatron (parsim.model.attention.ZOO_KINDS).  Default sdpa, fused attention:
    # what GPU training has run since FlashAttention (Dao et al. 2022): Megatron-Core's default
    # attention backend is Transformer Engine's fused attention, torchtitan calls
    # F.scaled_dot_product_attention, transformers defaults attn_implementation to sdpa.
    attention: str = "sdpa"

    def param_count(self) -> int:
        L, h, V, s = self.layers, self.hidden, self.vocab, self.seq_len
        return 12 * L * h * h + 13 * L * h + V * h + s * h + 2 * h


GPT_PRESETS = {
    "gpt-tiny": GPTConfig(layers=4, hidden=64, heads=4, seq_len=32, vocab=512),
    "gpt2-small": GPTConfig(layers=12, hidden=768, heads=12, seq_len=1024, vocab=50257),
    "gpt3-1.3b": GPTConfig(layers=24, hidden=2048, heads=16, seq_len=2048, vocab=50257),   # Brown et al. Table 2.1
    "gpt3-175b": GPTConfig(layers=96, hidden=12288, heads=96, seq_len=2048, vocab=50257),  # Brown et al. Table 2.1
    # Narayanan et al. 2021 (arXiv 2104.04473) Table 1, the 39.1B row; vocabulary padded to 51,200.
    "megatron-39b": GPTConfig(layers=48, hidden=8192, heads=64, seq_len=2048, vocab=51200),
}


class Dropout(nn.Module):
    """Dropout through ``torch.native_dropout``, which keeps a 1-byte bool mask for backward on
    every backend (``F.dropout`` on CPU keeps a mask in the activation dtype).  Megatron counts
    1-byte masks (Korthikanti et al. 2022, Sec. 4.1)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        return torch.native_dropout(x, self.p, True)[0]

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Embedding(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab, cfg.hidden)
        self.wpe = nn.Embedding(cfg.seq_len, cfg.hidden)
        self.drop = Dropout(cfg.dropout)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # idx: (B, T) -> (B, T, h)
        return self.drop(self.wte(idx) + self.wpe(self.positions(idx.shape[1], idx.device)))

    def positions(self, n: int, device) -> torch.Tensor:
        """The positions of the n tokens this device holds: 0..n-1 (context parallelism holds others)."""
        return torch.arange(n, device=device)


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        h = cfg.hidden
        self.heads, self.head_dim = cfg.heads, cfg.hidden // cfg.heads
        self.ln1 = nn.LayerNorm(h)
        self.qkv = nn.Linear(h, 3 * h)
        self.proj = nn.Linear(h, h)
        self.ln2 = nn.LayerNorm(h)
        self.fc1 = nn.Linear(h, cfg.ffn_mult * h)
        self.fc2 = nn.Linear(cfg.ffn_mult * h, h)
        self.drop = Dropout(cfg.dropout)
        self.kind = cfg.attention
        self.fused = cfg.attention == "sdpa"
        if self.fused:
            self.attn_dropout = cfg.dropout
        else:
            self.attn_drop = Dropout(cfg.dropout)
            # True above the diagonal: the future positions a token may not attend to.
            self.register_buffer("future", torch.ones(cfg.seq_len, cfg.seq_len, dtype=torch.bool).triu(1),
                                 persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, T, h), or (B, T / t, h) sequence-parallel
        d = self.head_dim
        # QKV columns are grouped per head, [q | k | v] of each head (Megatron's layout), so that a
        # column split over t devices gives each device whole heads: a = heads / t below.
        qkv = self.qkv(self.ln1(x))                                        # (B, T, 3h / t)
        B, T, _ = qkv.shape
        q, k, v = qkv.view(B, T, -1, 3 * d).transpose(1, 2).split(d, dim=-1)   # (B, a, T, d)
        y = self.attend(q, k, v).transpose(1, 2).contiguous().view(B, T, -1)    # (B, T, h / t)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Causal softmax attention of (B, a, T, d) queries, keys and values, eager or fused
        (parsim.model.attention); context parallelism replaces it with a ring over the sequence
        (parsim.exec.context_parallel)."""
        if self.fused:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_dropout if self.training else 0.0,
                                                  is_causal=True)
        if self.kind == "megatron":
            # Megatron-LM's ParallelAttention: QK^T one GEMM, then scale, mask and softmax in one
            # kernel (FusedScaleMaskSoftmax), no elementwise pass over the scores of their own
            att = q @ k.transpose(-2, -1)                                     # (B, a, T, T)
            return self.attn_drop(masked_softmax(att, 1.0 / math.sqrt(q.shape[-1]))) @ v
        T = q.shape[2]
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))  # (B, a, T, T)
        att = att.masked_fill(self.future[:T, :T], float("-inf"))
        return self.attn_drop(F.softmax(att, dim=-1)) @ v


class Head(nn.Module):
    def __init__(self, cfg: GPTConfig, wte: nn.Embedding):
        super().__init__()
        self.ln_f = nn.LayerNorm(cfg.hidden)
        self.wte = wte  # tied with the embedding (same Parameter)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, h) -> logits (B, T, V)
        return F.linear(self.ln_f(x), self.wte.weight)


def gpt(preset: str | None = None, **overrides) -> nn.Sequential:
    """A GPT as ``Sequential(embed, layers (Sequential of Blocks), head)``."""
    if preset is not None:
        if preset not in GPT_PRESETS:
            raise ValueError(f"unknown GPT preset {preset!r}; choose one of {', '.join(GPT_PRESETS)}")
        cfg = GPTConfig(**{**GPT_PRESETS[preset].__dict__, **overrides})
    else:
        cfg = GPTConfig(**overrides)
    if cfg.hidden % cfg.heads:
        raise ValueError(f"hidden ({cfg.hidden}) must be a multiple of heads ({cfg.heads})")
    if cfg.attention not in ZOO_KINDS:
        raise ValueError(f"unknown attention {cfg.attention!r}; choose one of {', '.join(ZOO_KINDS)}")
    model = nn.Sequential()
    embed = Embedding(cfg)
    model.add_module("embed", embed)
    model.add_module("layers", nn.Sequential(*[Block(cfg) for _ in range(cfg.layers)]))
    model.add_module("head", Head(cfg, embed.wte))
    model.config = cfg
    # GPT-2's initialisation (Radford et al. 2019; nanoGPT's _init_weights), none on the meta device
    for m in model.modules() if has_values(model) else ():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)
    return model
