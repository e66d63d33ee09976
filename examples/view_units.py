"""Small ``nn.Sequential`` networks whose second cut unit hands on a view of its input, one per
kind of view a model crosses a unit boundary with (issue 41: the profiler and the executor must
take each).  Used from model.yaml with ``module: "examples.view_units:view_net"`` and
``args: {kind: transpose}``; the tests write such files.

Shapes: B images (B, 3, 4, 4) (the executor's image input, at 4x4); the view unit sees
(B, 3, 4, 8).
"""

from __future__ import annotations

import torch
from torch import nn

# kind -> (the view of a (B, 3, 4, 8) tensor, the size of its last dimension)
VIEWS = {
    "flatten": (lambda x: x.flatten(1), 96),                           # contiguous
    "reshape": (lambda x: x.reshape(x.shape[0], 12, 8), 8),            # contiguous
    "view": (lambda x: x.view(x.shape[0], 3, 32), 32),                 # contiguous
    "transpose": (lambda x: x.transpose(2, 3), 4),                     # not contiguous
    "permute": (lambda x: x.permute(3, 0, 1, 2), 4),                   # not contiguous; the batch moves to dimension 1
    "narrow": (lambda x: x.narrow(3, 1, 6), 6),                        # not contiguous
}


class View(nn.Module):
    """A unit that holds no parameters and returns a view of its input."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return VIEWS[self.kind][0](x)

    def extra_repr(self) -> str:
        return self.kind


class Head(nn.Module):
    """Mean over every dimension but the last features, then the classifier: (…, f) -> (B, classes).
    ``permute`` moved the batch to dimension 1."""

    def __init__(self, features: int, classes: int, batch_dim: int):
        super().__init__()
        self.fc, self.batch_dim = nn.Linear(features, classes), batch_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.movedim(self.batch_dim, 0)
        return self.fc(x.flatten(1, -2).mean(1) if x.dim() > 2 else x)


class Raises(nn.Module):
    """A unit whose forward fails (``raises: forward``) or whose backward does (``backward``): for
    the profiler's one-line error."""

    def __init__(self, when: str):
        super().__init__()
        self.when = when

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.when == "forward" and not x.is_meta:
            raise ValueError("this unit refuses to run")
        return _FailingBackward.apply(x) if self.when == "backward" else x


class _FailingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        if not grad.is_meta:           # extraction runs the model on the meta device: let it
            raise ValueError("this unit's backward refuses to run")
        return grad


def view_net(kind: str = "transpose", classes: int = 10, raises: str = "") -> nn.Sequential:
    """Linear(4, 8) over the last dimension, the view unit, Linear over the view's last
    dimension, then the head; with ``raises``, a failing unit after the view."""
    _, features = VIEWS[kind]
    units = [nn.Linear(4, 8), View(kind), nn.Linear(features, 12)]
    if raises:
        units.append(Raises(raises))
    return nn.Sequential(*units, Head(12, classes, 1 if kind == "permute" else 0))
