"""What a run optimises, shared by the executor, its single-process reference and the layer
profiler: the seeds' optimizer settings and the loss."""

from __future__ import annotations

import torch
import torch.nn.functional as F

LR, MOMENTUM = 0.01, 0.9          # the seeds' Momentum(…, 0.01, 0.9)
ADAM_LR = 1e-3                    # training.optimizer: adam; Kingma & Ba 2015's default (torch's too), betas (0.9, 0.999)


def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over every prediction: an image's class, or each token's next token;
    in fp32 whatever the model's dtype (parsim.exec.precision)."""
    return F.cross_entropy(logits.flatten(0, -2).float(), target.flatten())
