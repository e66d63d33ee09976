"""A network for the held-out validation set 2026-12-06f (results/heldout/), of a family no earlier set
holds, built as a plain ``nn.Sequential`` the way users write it, each child a cut unit
(parsim.model.zoo): ConvMixer.  The set's other two models, a Seed-OSS-style and an ERNIE-4.5-style
decoder, are ``hf:`` (parsim.model.hf).  Used from model.yaml with
``module: "parsim.model.zoo.heldout_j:<name>"``.

Shapes: B images (B, 3, S, S); c channels.
"""

from __future__ import annotations

import torch
from torch import nn

from parsim.model.zoo.heldout_g import PoolHead      # global average pooling and a Linear


# ----------------------------------------------------------------------------- ConvMixer
# Trockman and Kolter 2022, "Patches Are All You Need?" (TMLR 2023), Fig. 2 and its code: a patch
# embedding (a convolution with kernel and stride p, then GELU and BatchNorm), then ``depth`` blocks,
# each a depthwise k x k convolution (GELU, BatchNorm) around which the input is added, followed by a
# pointwise 1x1 convolution (GELU, BatchNorm); global average pooling and a Linear.  Every map keeps the
# patch grid's size.  Here 2x2 patches of a CIFAR image (a 16x16 grid), 80 channels, 5x5 depthwise
# kernels and six blocks, so that a step fits the 2-core machine.

class MixerBlock(nn.Module):
    def __init__(self, c: int, kernel: int):
        super().__init__()
        self.depthwise = nn.Sequential(nn.Conv2d(c, c, kernel, groups=c, padding="same"), nn.GELU(),
                                       nn.BatchNorm2d(c))
        self.pointwise = nn.Sequential(nn.Conv2d(c, c, 1), nn.GELU(), nn.BatchNorm2d(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, c, s, s) -> (B, c, s, s)
        return self.pointwise(self.depthwise(x) + x)


def convmixer_cifar(dim: int = 80, depth: int = 6, kernel: int = 5, patch: int = 2,
                    classes: int = 10) -> nn.Sequential:
    """The patch embedding one unit, each block one, the head (pooling, Linear) one."""
    stem = nn.Sequential(nn.Conv2d(3, dim, patch, patch), nn.GELU(), nn.BatchNorm2d(dim))
    return nn.Sequential(stem, *(MixerBlock(dim, kernel) for _ in range(depth)), PoolHead(dim, classes))
