"""The one rule the built-in models' initialisations share."""

from __future__ import annotations

from torch import nn


def has_values(model: nn.Module) -> bool:
    """Whether initialising ``model``'s parameters sets anything: not on the meta device (extraction's),
    where there are no values to set, and ``nn.init.normal_`` and ``kaiming_normal_`` run through torch's
    Python decompositions (load_model of ResNet-50: 3.6-3.8 s with them, 2.9-3.5 s
    without, results/2026-12-01d-amd-epyc/startup-ab.txt; pricing BLOOM's 100 topology rows, 44 GPTs of up to
    96 blocks, took 0.81x and 0.86x as long without GPT-2's normal_ there as with it,
    results/2026-12-07b-amd-epyc/meta-init-ab.txt)."""
    return not next(model.parameters()).is_meta
