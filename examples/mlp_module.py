"""An example of `module: "examples.mlp_module:mlp"` in model.yaml: any factory returning an
nn.Module.  Sequential children are the cut units."""

from torch import nn


def mlp(width: int = 256, depth: int = 4, classes: int = 10) -> nn.Sequential:
    layers = [nn.Flatten(1), nn.Linear(3 * 32 * 32, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, classes))
    return nn.Sequential(*layers)
