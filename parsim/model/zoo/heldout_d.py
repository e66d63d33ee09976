"""A network for the held-out validation set 2026-11-28d (results/heldout/), of a family no
earlier set holds, built as a plain ``nn.Sequential`` the way users write it, each child a cut
unit (parsim.model.zoo): a ShuffleNet V2 (each block splits its channels in two, transforms one
half, concatenates and shuffles them).  The set's two other models, a Cohere-style and an
OLMo-2-style decoder, are ``hf:`` (parsim.model.hf).  Used from model.yaml with
``module: "parsim.model.zoo.heldout_d:<name>"``.

Shapes: B images (B, 3, S, S); c channels.
"""

from __future__ import annotations

import torch
from torch import nn

from parsim.model.zoo.heldout import ConvBN, ConvHead


# ----------------------------------------------------------------------------- ShuffleNet V2
# Ma et al. 2018, "ShuffleNet V2", Sec. 4 and Fig. 3 (c, d): a block of stride 1 splits the
# channels in half, passes one half through 1x1 conv, 3x3 depthwise conv and 1x1 conv (BatchNorm
# after each, ReLU after the 1x1s) and concatenates it with the other; a block of stride 2 runs
# both halves from the whole input (the left one a 3x3 depthwise conv of stride 2, then a 1x1).
# Either ends in a channel shuffle of 2 groups.  Table 5's 0.5x widths: stages of 48, 96, 192
# channels, a 24-channel stem, and a 1x1 convolution to 1024 before pooling.  At CIFAR size the stem
# has stride 1 and no max pooling.  Convolutions and head: MobileNetV2's ConvBN and ConvHead
# (parsim.model.zoo.heldout) with ReLU.

def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """(B, c, s, s) with its channels interleaved across ``groups`` (Zhang et al. 2018, ShuffleNet,
    Sec. 3.1): a view of a dense transpose, which leaves the block as a view."""
    b, c, h, w = x.shape
    return x.view(b, groups, c // groups, h, w).transpose(1, 2).contiguous().view(b, c, h, w)


class ShuffleBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        half = cout // 2
        self.stride = stride
        self.left = (nn.Sequential(ConvBN(cin, cin, 3, stride, cin, act=False),
                                   ConvBN(cin, half, 1, activation=nn.ReLU)) if stride > 1 else None)
        self.right = nn.Sequential(ConvBN(cin if stride > 1 else half, half, 1, activation=nn.ReLU),
                                   ConvBN(half, half, 3, stride, half, act=False),
                                   ConvBN(half, half, 1, activation=nn.ReLU))

    def forward(self, x: torch.Tensor) -> torch.Tensor:     # (B, cin, s, s) -> (B, cout, s / stride, s / stride)
        if self.stride == 1:
            keep, x = x.chunk(2, dim=1)
            out = torch.cat([keep, self.right(x)], 1)
        else:
            out = torch.cat([self.left(x), self.right(x)], 1)
        return channel_shuffle(out, 2)


def shufflenet_v2(stages: tuple[int, ...] = (48, 96, 192), repeats: tuple[int, ...] = (4, 8, 4), stem: int = 24,
                  head: int = 1024, classes: int = 10) -> nn.Sequential:
    """ShuffleNet V2 at the given widths (default: the paper's 0.5x) and blocks per stage (the
    paper's 4, 8, 4); the stem (3x3 convolution, BatchNorm, ReLU) one unit, each block one, the
    head (1x1 convolution to ``head`` channels, pooling, Linear) one."""
    units: list[nn.Module] = [ConvBN(3, stem, 3, activation=nn.ReLU)]
    cin = stem
    for cout, n in zip(stages, repeats):
        units += [ShuffleBlock(cin if i == 0 else cout, cout, 2 if i == 0 else 1) for i in range(n)]
        cin = cout
    return nn.Sequential(*units, ConvHead(cin, head, classes, activation=nn.ReLU))
