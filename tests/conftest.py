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
