"""What transformers computes outside a decoder's layers (parsim.model.hf: EMBEDDING_MULTIPLIED, EMBEDDING_NORMED,
LOGITS_SCALED, LOGITS_CAPPED): parsim's cut units give the logits transformers' own forward gives, for each family
that scales its embeddings or its logits there, and extraction prices the scaling as the units run it."""

import pytest
import torch

from parsim.model.spec import model_from_mapping

TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 16, "rope_theta": 10000.0,
        "tie_word_embeddings": False}
SEQ = 16
# each family with scalings no 1.0 hides (the published models': Granite 3.0 8B's embedding multiplier 12 and
# logits scaling 16, Command R's logit scale 0.0625, Gemma 2's cap 30, which random logits this small never reach,
# so a cap of 0.5 here)
FAMILIES = {
    "granite": ({"model_type": "granite", "embedding_multiplier": 12.0, "logits_scaling": 16.0,
                 "residual_multiplier": 0.22, "attention_multiplier": 0.0078125}, "sdpa"),
    "hyperclovax": ({"model_type": "hyperclovax", "embedding_multiplier": 0.5, "logits_scaling": 0.25,
                     "residual_multiplier": 0.7, "attention_multiplier": 0.1, "use_post_norm": True}, "sdpa"),
    "cohere": ({"model_type": "cohere", "logit_scale": 0.0625}, "sdpa"),
    "gemma2": ({"model_type": "gemma2", "head_dim": 16, "query_pre_attn_scalar": 16, "sliding_window": 64,
                "final_logit_softcapping": 0.5, "attn_logit_softcapping": 50.0}, "eager"),
    # NanoChat's weight-free norm before the first layer as well as after the last, and its cap (15 published)
    "nanochat": ({"model_type": "nanochat", "hidden_act": "relu2", "final_logit_softcapping": 0.5}, "sdpa"),
}


def _model(family: str):
    from parsim.model.hf import causal_lm

    fields, attn = FAMILIES[family]
    torch.manual_seed(0)
    return causal_lm({**TINY, **fields}, SEQ, attn)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_the_units_compute_the_logits_transformers_computes(family):
    model = _model(family)
    ids = torch.randint(0, TINY["vocab_size"], (2, SEQ))
    with torch.no_grad():
        ours, theirs = model(ids), model.hf(ids).logits
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
        # without the scalings the units compute another model: the test can fail
        units = dict(model.pipeline_units())
        units["embed"].multiplier, units["head"].scale, units["head"].softcap = None, None, None
        units["embed"]._modules.pop("norm", None)
        assert (model(ids) - theirs).abs().max() > 1e-3


def test_a_family_without_scalings_runs_none():
    model = _model("granite")
    from parsim.model.hf import causal_lm

    # LlamaForCausalLM reads no cap, even where a config carries the field
    llama = dict(causal_lm({**TINY, "model_type": "llama", "final_logit_softcapping": 0.5}, SEQ).pipeline_units())
    assert llama["embed"].multiplier is None and llama["head"].scale is None and llama["head"].softcap is None
    assert not hasattr(llama["embed"], "norm")
    granite = dict(model.pipeline_units())
    assert granite["embed"].multiplier == 12.0 and granite["head"].scale == (torch.div, 16.0)
    # NanoChat's embedding unit norms with the model's norm, the one its head applies (it holds no weight)
    nanochat = dict(_model("nanochat").pipeline_units())
    assert nanochat["embed"].norm is nanochat["head"].norm and not list(nanochat["embed"].norm.parameters())


def test_extraction_prices_the_scalings():
    """The head of a model whose logits are capped reads and writes a sample's logits three more times (the
    division, tanh and the multiplication) than the same head without the cap."""
    def head(fields: dict, attn: str):
        raw = {"schema_version": 1, "name": "tiny", "hf": {**TINY, **fields},
               "args": {"seq_len": SEQ, "attn_implementation": attn},
               "training": {"global_batch_size": 8, "dtype": "fp32", "optimizer": "adam"}}
        return model_from_mapping(raw, "tiny.yaml").graph.layers[-1]

    fields, attn = FAMILIES["gemma2"]
    capped, plain = head(fields, attn), head({**fields, "final_logit_softcapping": None}, attn)
    logits_bytes = SEQ * TINY["vocab_size"] * 4                    # a sample's fp32 logits
    extra = capped.fwd_mem_bytes - plain.fwd_mem_bytes
    assert extra == pytest.approx(3 * 2 * logits_bytes, rel=0.01)  # three elementwise ops, each reads and writes
