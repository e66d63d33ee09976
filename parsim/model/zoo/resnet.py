"""ResNet-50 v1.5, layer for layer as torchvision's ``resnet50`` (He et al. 2016, "Deep Residual
Learning", Table 1; v1.5 puts the stride-2 on the 3x3 conv of the bottleneck, as torchvision and
NVIDIA's DeepLearningExamples do).  1000 classes at 224x224: 25,557,032 parameters and
4.09 G MACs forward (torchvision model card), checked in tests/test_model.py.

The CIFAR-10 variant the seeds train keeps the same body with 10 classes at 32x32, with either
the ImageNet stem (7x7/2 conv + 3x3/2 max-pool) or the common CIFAR stem (3x3/1 conv, no pool).

Cut units, named as in the seeds' MindSpore ResNet so that its ``pipeline_stage`` lines carry over
unchanged: ``head`` (the stem: conv, BN, ReLU, max-pool), every ``layerN.i`` Bottleneck, and ``fc``
(average pool, flatten, linear) -- never inside a residual block.
"""

from __future__ import annotations

import torch
from torch import nn

from parsim.model.zoo.weights import has_values


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_ch: int, width: int, stride: int = 1):
        super().__init__()
        out_ch = width * self.expansion
        self.conv1 = nn.Conv2d(in_ch, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)  # v1.5 stride
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_ch, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch)
        self.relu = nn.ReLU(inplace=False)
        self.downsample = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, C, H, W)
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + identity)


def _stem(kind: str) -> nn.Sequential:
    if kind == "imagenet":
        return nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64),
                             nn.ReLU(), nn.MaxPool2d(3, stride=2, padding=1))
    if kind == "cifar":
        return nn.Sequential(nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU())
    raise ValueError(f"stem must be 'imagenet' or 'cifar', got {kind!r}")


def resnet50(num_classes: int = 1000, stem: str = "imagenet") -> nn.Sequential:
    """Returns ``Sequential(head, layer1..layer4, fc)``; layerN are Sequentials of Bottlenecks."""
    blocks = (3, 4, 6, 3)  # ResNet-50, He et al. 2016 Table 1
    parts: dict[str, nn.Module] = {"head": _stem(stem)}
    in_ch = 64
    for i, (n, width) in enumerate(zip(blocks, (64, 128, 256, 512))):
        stride = 1 if i == 0 else 2
        layer = []
        for j in range(n):
            layer.append(Bottleneck(in_ch, width, stride if j == 0 else 1))
            in_ch = width * Bottleneck.expansion
        parts[f"layer{i + 1}"] = nn.Sequential(*layer)
    parts["fc"] = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(in_ch, num_classes))
    model = nn.Sequential()
    for name, module in parts.items():
        model.add_module(name, module)
    _init(model)
    return model


def _init(model: nn.Module) -> None:
    # torchvision's initialisation: Kaiming-normal convs, BN weight 1 / bias 0 (none on the meta device)
    if not has_values(model):
        return
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
