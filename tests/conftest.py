"""Fixtures several test files share: the models and clusters they price, loaded once per session."""

import pytest

from parsim.hardware import load_cluster
from parsim.model.spec import load_model

GPT_SMALL = "examples/gpt_small_local.yaml"        # 4 blocks, h 256, 8 heads of 32, s 128, vocabulary 2048, fp32


@pytest.fixture(scope="session")
def gpt():
    return load_model(GPT_SMALL)


@pytest.fixture(scope="session")
def h100():
    return load_cluster("dgx-h100:1x8")


@pytest.fixture
def extractions(monkeypatch) -> list[str]:
    """The dtype of each graph extraction from here on, with parsim.model.extracted's kept graphs emptied
    (tests/test_model.py, tests/test_hf.py)."""
    import parsim.model.extract as extract_module
    import parsim.model.extracted as extracted_module

    monkeypatch.setattr(extracted_module, "_EXTRACTED", {})
    calls: list[str] = []
    real = extract_module.extract_graph
    monkeypatch.setattr(extract_module, "extract_graph", lambda *a, **k: calls.append(k["dtype"]) or real(*a, **k))
    return calls
