"""The executor trains a ``module:`` language model on token ids (the held-out set's BERT-style
encoder, parsim.model.zoo.heldout, made tiny) as one process does: dp=2 and pp=2 (1F1B) on 2 gloo
ranks, the parameters after two steps and the losses equal to the single-process reference."""

import pytest

from executor_checks import assert_equals_reference
from parsim.cli import main

TINY_BERT = """schema_version: 1
name: bert-tiny
module: "parsim.model.zoo.heldout:bert"
args: {vocab: 64, seq_len: 16, hidden: 32, layers: 2, heads: 2, mlp: 64}
input: {shape: [16], dtype: int64}
training: {global_batch_size: 8, dtype: fp32, optimizer: momentum}
"""


@pytest.mark.parametrize("name,flags", [
    ("dp2", ["--dp", "2", "--pp", "1", "--microbatches", "1"]),
    ("1f1b", ["--dp", "1", "--pp", "2", "--microbatches", "2", "--schedule", "1f1b"]),
])
def test_a_token_module_model_matches_the_single_process_reference(tmp_path, capfd, name, flags):
    model = tmp_path / "bert_tiny.yaml"
    model.write_text(TINY_BERT)
    plan = str(tmp_path / f"{name}.json")
    assert main(["simulate", str(model), "--cluster", "local-cpu", *flags, "-o", plan, "--json"]) == 0
    capfd.readouterr()
    out = tmp_path / "run"
    assert main(["run", plan, "--out", str(out), "--synthetic-size", "64", "--steps", "2", "--warmup", "1"]) == 0
    assert_equals_reference(plan, out, 2, 64)
