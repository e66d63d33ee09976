"""Small models of three families parsim was not developed on, for the held-out validation set
(results/heldout/): a ViT, a MobileNetV2-style CNN (depthwise convolutions) and a BERT-style
encoder.  Each is an ``nn.Sequential`` of cut units (parsim.model.zoo), used from model.yaml with
``module: "parsim.model.zoo.heldout:<name>"``.  The fourth held-out model, a Llama-style decoder,
is ``hf:`` (parsim.model.hf).

Shapes: B samples; images (B, 3, S, S); tokens (B, T); hidden width h.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn


# ----------------------------------------------------------------------------- ViT
# Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words", Sec. 3.1: patches -> linear embedding +
# learned positions, pre-LN transformer blocks (MSA, MLP with GELU), a classifier on the pooled tokens
# (mean pooling here instead of the class token, as in their Appendix D.3's "GAP" variant).

class PatchEmbed(nn.Module):
    def __init__(self, image_size: int, patch: int, hidden: int):
        super().__init__()
        self.proj = nn.Conv2d(3, hidden, patch, stride=patch)
        self.pos = nn.Parameter(torch.zeros(1, (image_size // patch) ** 2, hidden))
        nn.init.normal_(self.pos, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # (B, 3, S, S) -> (B, N, h), N = (S / patch)^2
        return self.proj(x).flatten(2).transpose(1, 2) + self.pos


class EncoderBlock(nn.Module):
    """Pre-LN (ViT) or post-LN (BERT) self-attention over every token (no mask) and a GELU MLP."""

    def __init__(self, hidden: int, heads: int, mlp: int, pre_norm: bool):
        super().__init__()
        self.heads, self.pre_norm = heads, pre_norm
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, mlp), nn.Linear(mlp, hidden)

    def attention(self, x: torch.Tensor) -> torch.Tensor:                 # (B, T, h) -> (B, T, h)
        b, t, h = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)  # (B, nh, T, hs)
        return self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, h))

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.attention(self.ln1(x))
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attention(x))
        return self.ln2(x + self.mlp(x))


class PoolHead(nn.Module):
    def __init__(self, hidden: int, classes: int):
        super().__init__()
        self.norm, self.fc = nn.LayerNorm(hidden), nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # (B, N, h) -> (B, classes)
        return self.fc(self.norm(x).mean(1))


def vit(image_size: int = 32, patch: int = 4, hidden: int = 192, layers: int = 6, heads: int = 3,
        mlp: int = 768, classes: int = 10) -> nn.Sequential:
    """ViT-Tiny's width (h = 192, 3 heads, MLP 768; Touvron et al. 2021, DeiT Table 1) at CIFAR size."""
    units = [("embed", PatchEmbed(image_size, patch, hidden))]
    units += [(f"block{i}", EncoderBlock(hidden, heads, mlp, pre_norm=True)) for i in range(layers)]
    return nn.Sequential(OrderedDict(units + [("head", PoolHead(hidden, classes))]))


# ----------------------------------------------------------------------------- MobileNetV2
# Sandler et al. 2018, "MobileNetV2", Table 2: inverted residual blocks (1x1 expand, 3x3 depthwise,
# 1x1 linear projection), ReLU6, residual where stride 1 and widths match.

class ConvBN(nn.Sequential):
    """Convolution (no bias, same padding), BatchNorm and, with ``act``, ``activation`` (MobileNetV2's
    ReLU6 by default; ShuffleNet V2's ReLU, parsim.model.zoo.heldout_d)."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1, act: bool = True,
                 activation: type[nn.Module] = nn.ReLU6):
        super().__init__(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), *([activation()] if act else []))


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        mid = cin * expand
        self.residual = stride == 1 and cin == cout
        self.body = nn.Sequential(*([ConvBN(cin, mid, 1)] if expand != 1 else []),
                                  ConvBN(mid, mid, 3, stride, groups=mid),          # depthwise
                                  ConvBN(mid, cout, 1, act=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class ConvHead(nn.Module):
    def __init__(self, cin: int, width: int, classes: int, activation: type[nn.Module] = nn.ReLU6):
        super().__init__()
        self.conv, self.fc = ConvBN(cin, width, 1, activation=activation), nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # (B, c, s, s) -> (B, classes)
        return self.fc(self.conv(x).mean((2, 3)))


def mobilenet_v2(width: float = 0.5, classes: int = 10) -> nn.Sequential:
    """MobileNetV2 (Table 2's (t, c, n, s) rows) at width multiplier ``width`` for 32x32 inputs: the
    stem and the first two downsampling rows keep stride 1 (CIFAR-size inputs, as in common
    CIFAR ports), so the last feature map is 4x4."""
    rows = [(1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 1), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
            (6, 320, 1, 2)]
    c = lambda n: max(8, int(n * width + 4) // 8 * 8)     # noqa: E731  (channels rounded to 8, as the paper's code)
    units, cin = [("stem", ConvBN(3, c(32), 3))], c(32)
    for i, (t, ch, n, s) in enumerate(rows):
        for j in range(n):
            units.append((f"ir{i}_{j}", InvertedResidual(cin, c(ch), s if j == 0 else 1, t)))
            cin = c(ch)
    units.append(("head", ConvHead(cin, c(1280), classes)))
    return nn.Sequential(OrderedDict(units))


# ----------------------------------------------------------------------------- BERT-style encoder
# Devlin et al. 2019, "BERT", Sec. 3 and Vaswani et al. 2017: token + learned position embeddings,
# LayerNorm, post-LN encoder layers with GELU, and the masked-LM head (dense, GELU, LayerNorm,
# decoder tied to nothing here).  Every position is predicted (the executor's loss over all
# tokens); the workload of a step is the same as with 15% masking up to the head's rows.

class TokenEmbed(nn.Module):
    def __init__(self, vocab: int, seq_len: int, hidden: int):
        super().__init__()
        self.tok, self.pos, self.norm = nn.Embedding(vocab, hidden), nn.Embedding(seq_len, hidden), nn.LayerNorm(hidden)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, h)
        return self.norm(self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device)))


class MLMHead(nn.Module):
    def __init__(self, hidden: int, vocab: int):
        super().__init__()
        self.dense, self.norm, self.decoder = nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.Linear(hidden, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:    # (B, T, h) -> logits (B, T, V)
        return self.decoder(self.norm(F.gelu(self.dense(x))))


def bert(vocab: int = 2048, seq_len: int = 64, hidden: int = 256, layers: int = 4, heads: int = 4,
         mlp: int = 1024) -> nn.Sequential:
    """BERT-Mini's shape (4 layers, h = 256, 4 heads; Turc et al. 2019, Table 7), small vocabulary."""
    units = [("embed", TokenEmbed(vocab, seq_len, hidden))]
    units += [(f"layer{i}", EncoderBlock(hidden, heads, mlp, pre_norm=False)) for i in range(layers)]
    return nn.Sequential(OrderedDict(units + [("head", MLMHead(hidden, vocab))]))
