"""The objective every run trains on, on one device: mean cross-entropy in fp32 over every
prediction (an image's class, each token's next token), whatever the model's dtype.

Megatron-LM takes its loss in fp32 (megatron/core/tensor_parallel/cross_entropy.py,
``VocabParallelCrossEntropy.calculate_logits_max``, casts the logits up first).  The executor
(parsim.exec.objective) calls it, or its vocabulary-parallel form on the same flattened fp32
logits; extraction (parsim.model.extract) records its kernels, so that the simulator prices the
loss the run computes (LayerGraph.loss_layer).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def flat_fp32(logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits as rows of predictions in fp32, the targets as one index per row."""
    return logits.flatten(0, -2).float(), target.flatten()


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy in fp32 over every prediction (the loss taken whole on one device)."""
    return F.cross_entropy(*flat_fp32(logits, target))
