"""Two networks for the held-out validation set 2026-11-28b (results/heldout/), of families no
earlier set holds, built as plain ``nn.Sequential`` stacks the way users write them, each child a
cut unit (parsim.model.zoo): a VGG-11 with BatchNorm (plain 3x3 convolutions and max pooling, no
residual), and an MLP-Mixer (token-mixing MLPs over transposed views, channel-mixing MLPs).
The third model of the set, a StarCoder2-style decoder, is ``hf:`` (parsim.model.hf).  Used from
model.yaml with ``module: "parsim.model.zoo.heldout_b:<name>"``.

Shapes: B images (B, 3, S, S); c channels; N patches of h features.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from parsim.model.zoo.heldout import PoolHead


# ----------------------------------------------------------------------------- VGG-11 (BN)
# Simonyan & Zisserman 2015, "Very Deep Convolutional Networks", Table 1, configuration A (eight
# 3x3 convolutions: 64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M), each followed by
# BatchNorm (Ioffe & Szegedy 2015) and ReLU, as torchvision's vgg11_bn; at CIFAR size the five
# poolings end at 1x1, so the classifier is one Linear (the CIFAR variants' head).
VGG11 = (1, "M", 2, "M", 4, 4, "M", 8, 8, "M", 8, 8, "M")      # widths as multiples of c (c = 64 in the paper)


def vgg11_bn(width: int = 64, classes: int = 10) -> nn.Sequential:
    """VGG-11 with BatchNorm at widths c x (1, 2, 4, 8): each convolution, BatchNorm, ReLU and
    pooling its own unit, then ``Flatten(1)`` and ``Linear``."""
    units: list[nn.Module] = []
    cin = 3
    for v in VGG11:
        if v == "M":
            units.append(nn.MaxPool2d(2))
            continue
        units += [nn.Conv2d(cin, v * width, 3, padding=1, bias=False), nn.BatchNorm2d(v * width), nn.ReLU()]
        cin = v * width
    return nn.Sequential(*units, nn.Flatten(1), nn.Linear(cin, classes))


# ----------------------------------------------------------------------------- MLP-Mixer
# Tolstikhin et al. 2021, "MLP-Mixer", Sec. 2 and Fig. 1: a per-patch linear embedding, then
# layers of a token-mixing MLP (over the N patches, applied to the transposed (B, h, N) view) and
# a channel-mixing MLP (over the h features), each pre-LayerNorm with a residual and GELU, then
# LayerNorm, global average pooling and a linear classifier (the ViT's PoolHead, parsim.model.zoo.heldout).

class MixerEmbed(nn.Module):
    def __init__(self, patch: int, hidden: int):
        super().__init__()
        self.proj = nn.Conv2d(3, hidden, patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, 3, S, S) -> (B, N, h)
        return self.proj(x).flatten(2).transpose(1, 2)


class MixerBlock(nn.Module):
    def __init__(self, tokens: int, hidden: int, token_mlp: int, channel_mlp: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.tok1, self.tok2 = nn.Linear(tokens, token_mlp), nn.Linear(token_mlp, tokens)
        self.ch1, self.ch2 = nn.Linear(hidden, channel_mlp), nn.Linear(channel_mlp, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, N, h) -> (B, N, h)
        y = self.norm1(x).transpose(1, 2)                   # (B, h, N)
        x = x + self.tok2(F.gelu(self.tok1(y))).transpose(1, 2)
        return x + self.ch2(F.gelu(self.ch1(self.norm2(x))))


def mixer(image_size: int = 32, patch: int = 4, hidden: int = 128, layers: int = 6, token_mlp: int = 64,
          channel_mlp: int = 512, classes: int = 10) -> nn.Sequential:
    """An MLP-Mixer at CIFAR size: N = (S / patch)^2 patches of h features; the token MLP's width
    h/2 and the channel MLP's 4h, as Mixer-B/16's ratios (Table 1: 384 and 3072 for h = 768)."""
    tokens = (image_size // patch) ** 2
    return nn.Sequential(MixerEmbed(patch, hidden),
                         *[MixerBlock(tokens, hidden, token_mlp, channel_mlp) for _ in range(layers)],
                         PoolHead(hidden, classes))
