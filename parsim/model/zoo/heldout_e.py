"""A network for the held-out validation set 2026-12-06 (results/heldout/), of a family no earlier
set holds, built as a plain ``nn.Sequential`` the way users write it, each child a cut unit
(parsim.model.zoo): a ResNeXt (each block's 3x3 convolution split into groups).  The set's two
other models, a StableLM-2-style and a Nemotron-style decoder, are ``hf:`` (parsim.model.hf).  Used
from model.yaml with ``module: "parsim.model.zoo.heldout_e:<name>"``.

Shapes: B images (B, 3, S, S); c channels.
"""

from __future__ import annotations

import torch
from torch import nn

from parsim.model.zoo.heldout import ConvBN, ConvHead


# ----------------------------------------------------------------------------- ResNeXt
# Xie et al. 2017, "Aggregated Residual Transformations for Deep Neural Networks", Sec. 3.3 and
# Fig. 3(c): a bottleneck block of 1x1 convolution to width d x C, a 3x3 convolution in C groups
# of d channels (the stride on it), and a 1x1 convolution to the block's output, BatchNorm after
# each and ReLU after the first two and after the sum; the shortcut is a 1x1 convolution with
# BatchNorm where the shape changes (projection shortcuts, their Sec. 4).  The CIFAR variant (their
# Sec. 5.3) has a 3x3 stem at stride 1 and three stages at 32, 16, 8 pixels; here narrow (a
# cardinality of 8 groups of 4 channels at the first stage, doubling each stage) and 2 blocks a
# stage, so that a step fits the 2-core machine.

class ResNeXtBlock(nn.Module):
    def __init__(self, cin: int, cout: int, width: int, groups: int, stride: int):
        super().__init__()
        self.body = nn.Sequential(ConvBN(cin, width, 1, activation=nn.ReLU),
                                  ConvBN(width, width, 3, stride, groups, activation=nn.ReLU),
                                  ConvBN(width, cout, 1, act=False))
        self.shortcut = ConvBN(cin, cout, 1, stride, act=False) if stride > 1 or cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, cin, s, s) -> (B, cout, s / stride, s / stride)
        return torch.relu(self.body(x) + self.shortcut(x))


def resnext_cifar(stages: tuple[int, ...] = (64, 128, 256), groups: int = 8, group_width: int = 4,
                  repeats: int = 2, stem: int = 32, classes: int = 10) -> nn.Sequential:
    """A CIFAR ResNeXt with the given output channels per stage, ``groups`` groups of
    ``group_width`` channels in the first stage's grouped convolution (the width doubling each
    stage), and ``repeats`` blocks a stage; the stem (3x3 convolution, BatchNorm, ReLU) one unit,
    each block one, the head (pooling, Linear; a 1x1 convolution to the last width first, as
    parsim.model.zoo.heldout's ConvHead) one."""
    units: list[nn.Module] = [ConvBN(3, stem, 3, activation=nn.ReLU)]
    cin = stem
    for i, cout in enumerate(stages):
        width = groups * group_width * 2 ** i
        units += [ResNeXtBlock(cin if j == 0 else cout, cout, width, groups, 2 if (j == 0 and i > 0) else 1)
                  for j in range(repeats)]
        cin = cout
    return nn.Sequential(*units, ConvHead(cin, cin, classes, activation=nn.ReLU))
