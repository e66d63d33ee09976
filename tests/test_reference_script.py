"""benchmarks/reference_torch.py, the independent reference, cuts a model where parsim does: its own
few lines give the plan's layer names for the zoo's models (built on the meta device; nothing run)."""

import importlib.util

import pytest
import torch

from parsim.model.extract import cut_units
from parsim.model.spec import build_module, load_model

spec_ = importlib.util.spec_from_file_location("reference_torch", "benchmarks/reference_torch.py")
reference = importlib.util.module_from_spec(spec_)
spec_.loader.exec_module(reference)


@pytest.mark.parametrize("path", ["examples/resnet50_cifar10_local.yaml", "examples/gpt_tiny_local.yaml",
                                  "results/heldout/models/mobilenet_v2_cifar.yaml",
                                  "results/heldout/models/llama_tiny.yaml"])
def test_the_reference_cuts_the_model_into_parsims_units(path):
    spec = load_model(path)
    with torch.device("meta"):
        model = build_module(spec.source, spec.path)
    assert [n for n, _ in reference.units_of(model)] == [n for n, _ in cut_units(model)] == spec.graph.names
