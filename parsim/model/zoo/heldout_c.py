"""A network for the held-out validation set 2026-11-28c (results/heldout/), of a family no
earlier set holds, built as a plain ``nn.Sequential`` the way users write it, each child a cut
unit (parsim.model.zoo): a SqueezeNet 1.1 (Fire modules: a 1x1 squeeze, then 1x1 and 3x3
expands concatenated along the channels).  The set's two other models, a Gemma-style and a
Phi-3-style decoder, are ``hf:`` (parsim.model.hf).  Used from model.yaml with
``module: "parsim.model.zoo.heldout_c:<name>"``.

Shapes: B images (B, 3, S, S); c channels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


# ----------------------------------------------------------------------------- SqueezeNet 1.1
# Iandola et al. 2016, "SqueezeNet", Sec. 3.1-3.3 and Table 1 (Fire modules); version 1.1's layer
# order (torchvision's squeezenet1_1: 3x3 stem of 64, pooling after the stem and after Fire 3 and
# 5).  At CIFAR size the stem has stride 1 and the classifier is a 1x1 convolution to the classes,
# ReLU and global average pooling, as in the paper.

class Fire(nn.Module):
    def __init__(self, cin: int, squeeze: int, expand: int):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1, self.expand3 = nn.Conv2d(squeeze, expand, 1), nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, cin, s, s) -> (B, 2 expand, s, s)
        s = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.expand1(s)), F.relu(self.expand3(s))], 1)


class ConvPoolHead(nn.Module):
    def __init__(self, cin: int, classes: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, c, s, s) -> (B, classes)
        return F.relu(self.conv(x)).mean((2, 3))


def squeezenet(width: float = 1.0, classes: int = 10) -> nn.Sequential:
    """SqueezeNet 1.1 with every width scaled by ``width`` (the paper's: stem 64; Fire squeeze/expand
    16/64, 16/64, 32/128, 32/128, 48/192, 48/192, 64/256, 64/256)."""
    w = lambda c: max(1, int(round(c * width)))      # noqa: E731
    fires = [(16, 64), (16, 64), "M", (32, 128), (32, 128), "M", (48, 192), (48, 192), (64, 256), (64, 256)]
    units: list[nn.Module] = [nn.Conv2d(3, w(64), 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
    cin = w(64)
    for f in fires:
        if f == "M":
            units.append(nn.MaxPool2d(2))
            continue
        units.append(Fire(cin, w(f[0]), w(f[1])))
        cin = 2 * w(f[1])
    return nn.Sequential(*units, ConvPoolHead(cin, classes))
