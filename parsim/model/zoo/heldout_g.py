"""A network for the held-out validation set 2026-12-06c (results/heldout/), of a family no earlier
set holds, built as a plain ``nn.Sequential`` the way users write it, each child a cut unit
(parsim.model.zoo): a RegNetY (grouped bottlenecks with squeeze-and-excitation).  The set's two other
models, a SmolLM3-style and an OLMo-style decoder, are ``hf:`` (parsim.model.hf).  Used from model.yaml
with ``module: "parsim.model.zoo.heldout_g:<name>"``.

Shapes: B images (B, 3, S, S); c channels.
"""

from __future__ import annotations

import torch
from torch import nn


# ----------------------------------------------------------------------------- RegNetY
# Radosavovic et al. 2020, "Designing Network Design Spaces", Sec. 3 and 5: the X block is ResNet's
# bottleneck with a 3x3 group convolution of group width g and bottleneck ratio 1 (1x1 conv-BN-ReLU,
# 3x3 group conv-BN-ReLU, 1x1 conv-BN, added to the shortcut, then ReLU; a 1x1 conv-BN projection
# where the stride or width changes); the Y block adds squeeze-and-excitation (Hu et al. 2018) after
# the group convolution, its reduction 1/4 of the block's input width.  Here a CIFAR stem (a 3x3
# convolution at stride 1), three stages of widths 24, 48, 96 at depths 1, 2, 2, group width 8, so that
# a step fits the 2-core machine.

def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout))


class SqueezeExcite(nn.Module):
    def __init__(self, c: int, reduced: int):
        super().__init__()
        self.reduce, self.expand = nn.Conv2d(c, reduced, 1), nn.Conv2d(reduced, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, c, s, s) -> (B, c, s, s)
        w = torch.sigmoid(self.expand(torch.relu(self.reduce(x.mean((2, 3), keepdim=True)))))
        return x * w


class YBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, group_width: int):
        super().__init__()
        self.body = nn.Sequential(_conv_bn(cin, cout, 1), nn.ReLU(),
                                  _conv_bn(cout, cout, 3, stride, cout // group_width), nn.ReLU(),
                                  SqueezeExcite(cout, max(1, cin // 4)), _conv_bn(cout, cout, 1))
        self.shortcut = _conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, cin, s, s) -> (B, cout, s / stride, s / stride)
        return torch.relu(self.body(x) + self.shortcut(x))


class PoolHead(nn.Module):
    def __init__(self, cin: int, classes: int):
        super().__init__()
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # (B, c, s, s) -> (B, classes)
        return self.fc(x.mean((2, 3)))


def regnety_cifar(widths: tuple[int, ...] = (24, 48, 96), depths: tuple[int, ...] = (1, 2, 2),
                  group_width: int = 8, stem: int = 16, classes: int = 10) -> nn.Sequential:
    """A CIFAR RegNetY: the stem (3x3 conv-BN-ReLU to ``stem`` channels) one unit, each Y block one (the
    first of every stage at stride 2 but the first stage's), the head (global average pooling and a
    Linear) one."""
    units: list[nn.Module] = [nn.Sequential(_conv_bn(3, stem, 3), nn.ReLU())]
    cin = stem
    for i, (width, depth) in enumerate(zip(widths, depths)):
        for d in range(depth):
            units.append(YBlock(cin, width, 2 if d == 0 and i > 0 else 1, group_width))
            cin = width
    return nn.Sequential(*units, PoolHead(cin, classes))
