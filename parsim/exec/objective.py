"""What a run optimises, shared by the executor, its single-process reference and the layer
profiler: the seeds' optimizer settings and the loss."""

from __future__ import annotations

import torch

from parsim.model.loss import cross_entropy as whole_cross_entropy, flat_fp32

LR, MOMENTUM = 0.01, 0.9          # the seeds' Momentum(…, 0.01, 0.9)
ADAM_LR = 1e-3                    # training.optimizer: adam; Kingma & Ba 2015's default (torch's too), betas (0.9, 0.999)


def loss_fn(logits: torch.Tensor, target: torch.Tensor, vocab_group=None) -> torch.Tensor:
    """Mean cross-entropy over every prediction: an image's class, or each token's next token;
    in fp32 whatever the model's dtype (parsim.exec.precision).  ``vocab_group``: the
    tensor-parallel group whose ranks each hold a slice of the classes (the logits here are this
    rank's; vocab_parallel.loss_group), taken vocabulary-parallel, the same value
    (parsim.exec.vocab_parallel).  The rule is parsim.model.loss's, whose kernels the simulator
    prices."""
    if vocab_group is not None:
        from parsim.exec.vocab_parallel import cross_entropy

        return cross_entropy(*flat_fp32(logits, target), vocab_group)
    return whole_cross_entropy(logits, target)
