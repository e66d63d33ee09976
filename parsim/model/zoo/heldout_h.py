"""A network for the held-out validation set 2026-12-06d (results/heldout/), of a family no earlier
set holds, built as a plain ``nn.Sequential`` the way users write it, each child a cut unit
(parsim.model.zoo): an Inception network (parallel branches concatenated).  The set's two other
models, a Granite-style and an Arcee-style decoder, are ``hf:`` (parsim.model.hf).  Used from
model.yaml with ``module: "parsim.model.zoo.heldout_h:<name>"``.

Shapes: B images (B, 3, S, S); c channels.
"""

from __future__ import annotations

import torch
from torch import nn

from parsim.model.zoo.heldout_g import PoolHead      # global average pooling and a Linear


# ----------------------------------------------------------------------------- Inception
# Szegedy et al. 2015, "Going Deeper with Convolutions" (GoogLeNet), Sec. 4 and Fig. 2(b): an
# Inception module runs four branches on its input, a 1x1 convolution, a 1x1 reduction then a 3x3,
# a 1x1 reduction then a 5x5, and a 3x3 max pool then a 1x1 projection, and concatenates their
# outputs along the channels; max pools of stride 2 between groups of modules.  Here the 5x5 is two
# 3x3 convolutions (Szegedy et al. 2016, "Rethinking the Inception Architecture", Sec. 3.1), every
# convolution is followed by BatchNorm and ReLU (their Sec. 6, BN-Inception), a CIFAR stem (one 3x3
# convolution at stride 1), and five modules of 36 to 104 channels, so that a step fits the 2-core
# machine.

def _conv_bn_relu(cin: int, cout: int, kernel: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, 1, kernel // 2, bias=False), nn.BatchNorm2d(cout), nn.ReLU())


class InceptionModule(nn.Module):
    def __init__(self, cin: int, c1: int, c3_reduce: int, c3: int, c5_reduce: int, c5: int, pool: int):
        super().__init__()
        self.one = _conv_bn_relu(cin, c1, 1)
        self.three = nn.Sequential(_conv_bn_relu(cin, c3_reduce, 1), _conv_bn_relu(c3_reduce, c3, 3))
        self.five = nn.Sequential(_conv_bn_relu(cin, c5_reduce, 1), _conv_bn_relu(c5_reduce, c5, 3),
                                  _conv_bn_relu(c5, c5, 3))
        self.pool = nn.Sequential(nn.MaxPool2d(3, 1, 1), _conv_bn_relu(cin, pool, 1))
        self.out_channels = c1 + c3 + c5 + pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, cin, s, s) -> (B, c1 + c3 + c5 + pool, s, s)
        return torch.cat([self.one(x), self.three(x), self.five(x), self.pool(x)], 1)


# (c1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool projection) of each module; None: a 3x3 max pool of stride 2
_MODULES = ((8, 12, 16, 4, 8, 4), (12, 16, 24, 4, 12, 8), None, (16, 16, 32, 8, 12, 12), (20, 20, 40, 8, 16, 12),
            None, (24, 24, 48, 8, 16, 16))


def inception_cifar(stem: int = 24, classes: int = 10) -> nn.Sequential:
    """A CIFAR Inception network: the stem (3x3 conv-BN-ReLU to ``stem`` channels) one unit, each
    Inception module one, each stride-2 max pool one, the head (global average pooling and a Linear)
    one."""
    units: list[nn.Module] = [_conv_bn_relu(3, stem, 3)]
    cin = stem
    for widths in _MODULES:
        if widths is None:
            units.append(nn.MaxPool2d(3, 2, 1))
            continue
        units.append(InceptionModule(cin, *widths))
        cin = units[-1].out_channels
    return nn.Sequential(*units, PoolHead(cin, classes))
