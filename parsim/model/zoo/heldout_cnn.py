"""Two convolutional networks for the held-out validation set 2026-11-28 (results/heldout/), built
as plain ``nn.Sequential`` stacks the way users write them, each child a cut unit
(parsim.model.zoo): a ResNet-18-shaped network whose last units are torch's own
``AdaptiveAvgPool2d``, ``Flatten`` and ``Linear`` (``Flatten`` returns a view that crosses a unit
boundary), and a ConvNeXt-style network (7x7 depthwise convolutions, LayerNorm and the MLP over
channels-last views, GELU).  Used from model.yaml with
``module: "parsim.model.zoo.heldout_cnn:<name>"``.

Shapes: B images (B, 3, S, S); c channels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


# ----------------------------------------------------------------------------- ResNet-18 shape
# He et al. 2016, "Deep Residual Learning", Table 1's 18-layer column (two BasicBlocks per stage,
# widths c, 2c, 4c, 8c), with the CIFAR stem of their Sec. 4.2 (one 3x3 convolution, no max
# pooling) so that 32x32 inputs end at 4x4.

class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(y + (x if self.down is None else self.down(x)))


def resnet18_sequential(width: int = 64, classes: int = 10) -> nn.Sequential:
    """A ResNet-18 as one flat ``nn.Sequential``: stem convolution, BatchNorm and ReLU as three
    children, eight BasicBlocks, then ``AdaptiveAvgPool2d(1)``, ``Flatten(1)`` and ``Linear``."""
    units: list[nn.Module] = [nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
    cin = width
    for stage, cout in enumerate((width, 2 * width, 4 * width, 8 * width)):
        for j in range(2):
            units.append(BasicBlock(cin, cout, 2 if stage > 0 and j == 0 else 1))
            cin = cout
    return nn.Sequential(*units, nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(cin, classes))


# ----------------------------------------------------------------------------- ConvNeXt style
# Liu et al. 2022, "A ConvNet for the 2020s", Sec. 2 and Fig. 4: a patchify stem (k = s = 2 here,
# for 32x32 inputs), blocks of a 7x7 depthwise convolution, LayerNorm over channels, a 4x MLP
# with GELU over channels (channels-last, as their reference code runs it), a residual, and
# downsampling by a LayerNorm and a 2x2 stride-2 convolution between stages.  Layer scale and
# stochastic depth are left out (they do not change the work of a step).

class ChannelNorm(nn.Module):
    """LayerNorm over the channels of an NCHW tensor, through a channels-last view."""

    def __init__(self, channels: int):
        super().__init__()
        self.norm = nn.LayerNorm(channels, eps=1e-6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, c, s, s) -> (B, c, s, s)
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.dw = nn.Conv2d(channels, channels, 7, padding=3, groups=channels)
        self.norm = nn.LayerNorm(channels, eps=1e-6)
        self.fc1, self.fc2 = nn.Linear(channels, 4 * channels), nn.Linear(4 * channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, c, s, s) -> (B, c, s, s)
        y = self.norm(self.dw(x).permute(0, 2, 3, 1))       # (B, s, s, c)
        return x + self.fc2(F.gelu(self.fc1(y))).permute(0, 3, 1, 2)


class Stem(nn.Sequential):
    def __init__(self, channels: int):
        super().__init__(nn.Conv2d(3, channels, 2, 2), ChannelNorm(channels))


class Downsample(nn.Sequential):
    def __init__(self, cin: int, cout: int):
        super().__init__(ChannelNorm(cin), nn.Conv2d(cin, cout, 2, 2))


class NormHead(nn.Module):
    def __init__(self, channels: int, classes: int):
        super().__init__()
        self.norm, self.fc = nn.LayerNorm(channels, eps=1e-6), nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, c, s, s) -> (B, classes)
        return self.fc(self.norm(x.mean((2, 3))))


def convnext(dims: tuple[int, ...] = (32, 64, 128), depths: tuple[int, ...] = (2, 2, 2),
             classes: int = 10) -> nn.Sequential:
    """ConvNeXt-style stages ``depths`` blocks deep at widths ``dims``; each block a unit."""
    units: list[nn.Module] = [Stem(dims[0])]
    for i, (c, n) in enumerate(zip(dims, depths)):
        if i:
            units.append(Downsample(dims[i - 1], c))
        units += [ConvNeXtBlock(c) for _ in range(n)]
    return nn.Sequential(*units, NormHead(dims[-1], classes))
