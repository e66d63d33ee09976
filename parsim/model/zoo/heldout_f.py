"""A network for the held-out validation set 2026-12-06b (results/heldout/), of a family no earlier
set holds, built as a plain ``nn.Sequential`` the way users write it, each child a cut unit
(parsim.model.zoo): a DenseNet-BC (each layer's output concatenated to its input).  The set's two
other models, a GLM-4-style and an EXAONE-4-style decoder, are ``hf:`` (parsim.model.hf).  Used
from model.yaml with ``module: "parsim.model.zoo.heldout_f:<name>"``.

Shapes: B images (B, 3, S, S); c channels.
"""

from __future__ import annotations

import torch
from torch import nn


# ----------------------------------------------------------------------------- DenseNet-BC
# Huang et al. 2017, "Densely Connected Convolutional Networks", Sec. 3: a dense layer is
# BN-ReLU-Conv(1x1, 4k) then BN-ReLU-Conv(3x3, k) ("bottleneck", B), its k new channels
# concatenated to its input; a transition between blocks is BN-ReLU-Conv(1x1) to theta x the
# channels ("compression", C, theta = 0.5) and a 2x2 average pool; the CIFAR network (their
# Sec. 4.1) has a 3x3 stem of 2k channels and three dense blocks at 32, 16, 8 pixels, and its
# head is BN-ReLU, global average pooling and a Linear.  Here a growth rate k = 12 and 4 layers a
# block, so that a step fits the 2-core machine.

def _bn_relu_conv(cin: int, cout: int, kernel: int) -> nn.Sequential:
    return nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU(), nn.Conv2d(cin, cout, kernel, 1, kernel // 2, bias=False))


class DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int):
        super().__init__()
        self.body = nn.Sequential(_bn_relu_conv(cin, 4 * growth, 1), _bn_relu_conv(4 * growth, growth, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, cin, s, s) -> (B, cin + growth, s, s)
        return torch.cat([x, self.body(x)], 1)


class Transition(nn.Sequential):
    def __init__(self, cin: int, cout: int):
        super().__init__(_bn_relu_conv(cin, cout, 1), nn.AvgPool2d(2))


class DenseHead(nn.Module):
    def __init__(self, cin: int, classes: int):
        super().__init__()
        self.norm, self.fc = nn.BatchNorm2d(cin), nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:   # (B, c, s, s) -> (B, classes)
        return self.fc(torch.relu(self.norm(x)).mean((2, 3)))


def densenet_bc_cifar(growth: int = 12, layers: int = 4, blocks: int = 3, compression: float = 0.5,
                      classes: int = 10) -> nn.Sequential:
    """A CIFAR DenseNet-BC of ``blocks`` dense blocks of ``layers`` layers at growth rate ``growth``:
    the stem (a 3x3 convolution to 2 x growth channels) one unit, each dense layer one, each
    transition one, the head one."""
    cin = 2 * growth
    units: list[nn.Module] = [nn.Conv2d(3, cin, 3, 1, 1, bias=False)]
    for b in range(blocks):
        for _ in range(layers):
            units.append(DenseLayer(cin, growth))
            cin += growth
        if b < blocks - 1:
            cout = int(cin * compression)
            units.append(Transition(cin, cout))
            cin = cout
    return nn.Sequential(*units, DenseHead(cin, classes))
