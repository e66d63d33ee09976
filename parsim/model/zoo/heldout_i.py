"""Networks for the held-out validation set 2026-12-06e (results/heldout/), of families no earlier set
holds, built as plain ``nn.Sequential`` the way users write them, each child a cut unit
(parsim.model.zoo): a pre-activation ResNet and an Xception-style network (depthwise separable
convolutions with residual shortcuts).  The set's third model, a Helium-style decoder, is ``hf:``
(parsim.model.hf).  Used from model.yaml with ``module: "parsim.model.zoo.heldout_i:<name>"``.

Shapes: B images (B, 3, S, S); c channels.
"""

from __future__ import annotations

import torch
from torch import nn

from parsim.model.zoo.heldout_f import DenseHead     # the last BN-ReLU, global average pooling and a Linear
from parsim.model.zoo.heldout_g import PoolHead      # global average pooling and a Linear


# ----------------------------------------------------------------------------- pre-activation ResNet
# He et al. 2016, "Identity Mappings in Deep Residual Networks", Fig. 1(b) and Fig. 4(e): each basic
# block runs BN-ReLU-3x3 conv twice, and adds its input (or, where the stride or width changes, a 1x1
# convolution of the first BN-ReLU's output) with no activation after the addition; the network ends
# with BN-ReLU before the pooling.  Here a CIFAR stem (one 3x3 convolution), three stages of widths 16,
# 32, 64 at two blocks each (the first of each later stage at stride 2), so that a step fits the 2-core
# machine.

class PreActBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.bn1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2, self.conv2 = nn.BatchNorm2d(cout), nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.shortcut = nn.Conv2d(cin, cout, 1, stride, bias=False) if stride != 1 or cin != cout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, cin, s, s) -> (B, cout, s / stride, s / stride)
        a = torch.relu(self.bn1(x))
        skip = self.shortcut(a) if self.shortcut is not None else x
        return self.conv2(torch.relu(self.bn2(self.conv1(a)))) + skip


def preact_resnet_cifar(widths: tuple[int, ...] = (16, 32, 64), blocks: int = 2, classes: int = 10) -> nn.Sequential:
    """The stem one unit, each block one, the head one."""
    units: list[nn.Module] = [nn.Conv2d(3, widths[0], 3, 1, 1, bias=False)]
    cin = widths[0]
    for i, c in enumerate(widths):
        for j in range(blocks):
            units.append(PreActBlock(cin, c, 2 if i > 0 and j == 0 else 1))
            cin = c
    return nn.Sequential(*units, DenseHead(cin, classes))


# ----------------------------------------------------------------------------- Xception
# Chollet 2017, "Xception: Deep Learning with Depthwise Separable Convolutions", Fig. 5: blocks of
# depthwise separable convolutions (a 3x3 depthwise convolution then a 1x1 pointwise one, each
# followed by BatchNorm), ReLU before each, with residual shortcuts: the entry flow's blocks end in a
# 3x3 max pool of stride 2 and take a 1x1 convolution of stride 2 as their shortcut; the middle flow's
# blocks keep the width and add their input.  Here a CIFAR stem (a 3x3 conv-BN-ReLU), two entry blocks
# of 32 and 64 channels, two middle blocks of 64, and the exit as global average pooling and a Linear,
# so that a step fits the 2-core machine.

class SeparableConv(nn.Sequential):
    def __init__(self, cin: int, cout: int):
        super().__init__(nn.ReLU(), nn.Conv2d(cin, cin, 3, 1, 1, groups=cin, bias=False),
                         nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))


class EntryBlock(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.body = nn.Sequential(SeparableConv(cin, cout), SeparableConv(cout, cout), nn.MaxPool2d(3, 2, 1))
        self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, 2, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, cin, s, s) -> (B, cout, s / 2, s / 2)
        return self.body(x) + self.shortcut(x)


class MiddleBlock(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.body = nn.Sequential(SeparableConv(c, c), SeparableConv(c, c), SeparableConv(c, c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, c, s, s) -> (B, c, s, s)
        return self.body(x) + x


def xception_cifar(stem: int = 16, entry: tuple[int, ...] = (32, 64), middle: int = 2,
                   classes: int = 10) -> nn.Sequential:
    """The stem one unit, each entry and middle block one, the head (ReLU, pooling, Linear) one."""
    units: list[nn.Module] = [nn.Sequential(nn.Conv2d(3, stem, 3, 1, 1, bias=False), nn.BatchNorm2d(stem), nn.ReLU())]
    cin = stem
    for c in entry:
        units.append(EntryBlock(cin, c))
        cin = c
    units += [MiddleBlock(cin) for _ in range(middle)]
    return nn.Sequential(*units, nn.Sequential(nn.ReLU(), PoolHead(cin, classes)))
