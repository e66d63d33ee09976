"""Decoders whose rotary embedding differs by layer type (parsim.model.hf._Positions: Gemma 3's sliding layers
at base 10,000 and its full ones at 1,000,000; Olmo 3's, where configured): parsim's cut units hand each layer its
type's (cos, sin) and window, as transformers' model forward does, so they compute the logits transformers
computes; and the model extracts, each windowed layer carrying its window."""

import pytest
import torch

from parsim.model.spec import model_from_mapping

TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 16, "tie_word_embeddings": False,
        "sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10.0},
                            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}}}
SEQ = 16
FAMILIES = {
    "gemma3_text": {"head_dim": 16, "query_pre_attn_scalar": 16},
    "olmo3": {},
}


def _model(family: str, attn: str):
    from parsim.model.hf import causal_lm

    torch.manual_seed(0)
    return causal_lm({**TINY, **FAMILIES[family], "model_type": family}, SEQ, attn)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_layer_gets_its_types_rotary_and_the_units_compute_transformers_logits(family, attn):
    model = _model(family, attn)
    units = dict(model.pipeline_units())
    assert [units[f"layers.{i}"].layer_type for i in range(2)] == TINY["layer_types"]
    assert [units[f"layers.{i}"].attention_window for i in range(2)] == [4, 0]
    ids = torch.randint(0, TINY["vocab_size"], (2, SEQ))
    with torch.no_grad():
        theirs = model.hf(ids).logits
        torch.testing.assert_close(model(ids), theirs, rtol=1e-5, atol=1e-5)
        # every layer at the sliding layers' rotary computes another model: the test can fail
        object.__setattr__(units["layers.1"], "layer_type", "sliding_attention")
        assert (model(ids) - theirs).abs().max() > 1e-3


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_model_with_rotaries_per_layer_type_extracts(family):
    spec = model_from_mapping({"schema_version": 1, "name": family, "hf": {**TINY, **FAMILIES[family],
                                                                              "model_type": family},
                               "args": {"seq_len": SEQ}, "training": {"global_batch_size": 8, "dtype": "fp32",
                                                                      "optimizer": "adam"}}, f"{family}.yaml")
    layers = {layer.name: layer for layer in spec.graph.layers}
    windows = [op.window for op in layers["layers.0"].ops if op.kind == "Attention"]
    assert windows and set(windows) == {4}
    assert all(op.window == 0 for op in layers["layers.1"].ops if op.kind == "Attention")
