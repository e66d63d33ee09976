"""Sliding-window attention (parsim.model.attention): the band's share of causal attention's pairs
in closed form, what extraction prices for a windowed layer's fused attention (and does not for
eager, which computes every score), the window each layer reads the way transformers hands it to
its attention function, that what the units run on real tensors is the model transformers runs,
and context parallelism refused beside a window."""

import pytest
import torch

from parsim.errors import InfeasibleError
from parsim.model.attention import attention_window, check_cp, window_pairs, window_share
from parsim.model.spec import model_from_mapping

TINY = {"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 32, "rms_norm_eps": 1e-05,
        "rope_theta": 10000.0, "tie_word_embeddings": False, "hidden_act": "silu"}
SEQ, WINDOW = 16, 4


def _graph(config: dict, attn: str = "sdpa", seq: int = SEQ):
    raw = {"schema_version": 1, "name": "tiny", "hf": config, "args": {"seq_len": seq, "attn_implementation": attn},
           "training": {"global_batch_size": 8, "dtype": "fp32", "optimizer": "adam"}}
    return model_from_mapping(raw, "tiny.yaml").graph


def _mistral(window):
    return {**TINY, "model_type": "mistral", "sliding_window": window}


def test_the_bands_pairs_in_closed_form():
    # sum over i = 1..s of min(i, w): 1 + 2 + 3 + 3 x 5 at s = 8, w = 3; causal s (s + 1) / 2 = 36
    assert window_pairs(8, 3) == 1 + 2 + 3 + 3 * 5 == 21
    assert window_pairs(8) == window_pairs(8, 8) == window_pairs(8, 100) == 36
    assert window_share(8, 3) == pytest.approx(21 / 36)
    assert window_share(8, 0) == window_share(8, 8) == 1.0
    # Mistral 7B's 4,096-token window over 32,768 tokens: under a quarter of the causal work
    assert window_share(32768, 4096) == pytest.approx((4096 * 4097 / 2 + 28672 * 4096) / (32768 * 32769 / 2))
    assert 0.23 < window_share(32768, 4096) < 0.24


def test_a_windowed_layers_fused_attention_is_priced_at_the_bands_share():
    full, band = _graph(_mistral(None)), _graph(_mistral(WINDOW))
    share = window_share(SEQ, WINDOW)
    for lf, lb in zip(full.layers, band.layers):
        af = [k for k in lf.kernels if k.klass == "attention"]
        ab = [k for k in lb.kernels if k.klass == "attention"]
        assert len(af) == len(ab) == (2 if lf.name.startswith("layers.") else 0)
        for kf, kb in zip(af, ab):
            assert kb.flops == pytest.approx((kf.flops[0] * share, kf.flops[1] * share), rel=1e-12)
            assert kb.bytes == kf.bytes                       # Q, K, V and the output move all the same
        # the layer's FLOP totals lose exactly the attention's (1 - share)
        att_f = sum(k.at(band.extraction_batch)[0] for k in af if k.phase == "F") / band.extraction_batch
        att_b = sum(k.at(band.extraction_batch)[0] for k in af if k.phase != "F") / band.extraction_batch
        assert lb.fwd_flops == pytest.approx(lf.fwd_flops - (1 - share) * att_f, rel=1e-12)
        assert lb.bwd_flops == pytest.approx(lf.bwd_flops - (1 - share) * att_b, rel=1e-12)
        ops = [op for op in lb.ops if op.kind == "Attention"]
        assert all(op.window == WINDOW for op in ops)
        full_ops = sum(op.flops for op in lf.ops if op.kind == "Attention")
        assert sum(op.flops for op in ops) == pytest.approx(share * full_ops)
    assert attention_window(band) == WINDOW and attention_window(full) == 0
    # a window as long as the sequence changes nothing
    assert _graph(_mistral(SEQ)).fwd_flops == full.fwd_flops


def test_eager_attention_computes_every_score_under_a_window():
    assert _graph(_mistral(WINDOW), "eager").fwd_flops == _graph(_mistral(None), "eager").fwd_flops


def test_each_layer_reads_the_window_transformers_gives_its_attention():
    # Llama's attention reads no window even where the config has one; Qwen2's last layers past
    # max_window_layers slide, the first does not
    assert attention_window(_graph({**TINY, "model_type": "llama", "sliding_window": WINDOW})) == 0
    qwen2 = _graph({**TINY, "model_type": "qwen2", "use_sliding_window": True, "sliding_window": WINDOW,
                    "max_window_layers": 1})
    windows = [[op.window for op in layer.ops if op.kind == "Attention"] for layer in qwen2.layers[1:-1]]
    assert windows == [[0], [WINDOW]]
    # Qwen2's configs as published turn it off
    assert attention_window(_graph({**TINY, "model_type": "qwen2", "use_sliding_window": False,
                                    "sliding_window": WINDOW})) == 0


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_the_units_compute_what_transformers_computes_under_a_window(attn):
    """parsim's units on real tensors (what parsim run executes) give transformers' own logits,
    its sliding-window mask included, at a sequence four windows long."""
    import transformers as tf

    from parsim.model.hf import causal_lm

    torch.manual_seed(0)
    model = causal_lm(_mistral(WINDOW), SEQ, attn)
    ref = tf.AutoModelForCausalLM.from_config(tf.AutoConfig.for_model(**_mistral(WINDOW)), attn_implementation=attn)
    ref.load_state_dict(model.hf.state_dict())
    ids = torch.randint(0, TINY["vocab_size"], (2, SEQ))
    with torch.no_grad():
        ours, theirs = model(ids), ref(ids).logits
        unwindowed = causal_lm(_mistral(None), SEQ, attn)
        unwindowed.hf.load_state_dict(model.hf.state_dict())
        full = unwindowed(ids)
    torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    assert (ours - full).abs().max() > 1e-3           # the window changes the result: the test can fail


def test_context_parallelism_is_refused_beside_a_window():
    g = _graph(_mistral(WINDOW))
    with pytest.raises(InfeasibleError) as e:
        check_cp(g, 2)
    assert "4-token window" in str(e.value) and "use cp 1" in str(e.value)
    assert check_cp(g, 1) == SEQ
    assert check_cp(_graph(_mistral(None)), 2) == SEQ


def test_parsim_model_says_which_window_its_attention_is_priced_at():
    from parsim.report.cli_text import window_lines

    (line,) = window_lines(_graph(_mistral(WINDOW)))
    share = (4 * 5 / 2 + 12 * 4) / (16 * 17 / 2)         # 58 of 136 pairs
    assert line.startswith(f"sliding window: {WINDOW} keys a query on 2 of 2 attention layers")
    assert f"{share:.1%}" in line
    assert window_lines(_graph(_mistral(None))) == window_lines(_graph(_mistral(WINDOW), "eager")) == []


def test_the_search_tries_no_context_parallelism_beside_a_window():
    from types import SimpleNamespace

    from parsim.search.enumerate import CP_SEARCH_MIN_TOKENS, cp_values

    def searched(window):
        cfg = {**_mistral(window), "max_position_embeddings": CP_SEARCH_MIN_TOKENS}
        spec = SimpleNamespace(graph=_graph(cfg, seq=CP_SEARCH_MIN_TOKENS), parallel=SimpleNamespace(cp=None))
        return cp_values(spec, SimpleNamespace(cp=None))
    assert searched(4096) == [1]
    assert searched(None)[:2] == [1, 2]              # the same sequence without the window: cp is searched


def test_megatron_export_refuses_a_window_it_would_not_write(tmp_path, capsys):
    """Megatron-LM's export writes no --window-size: a plan priced windowed is refused in one line
    that names the field, not exported as a run over the whole sequence."""
    import yaml

    from parsim.cli import main

    cfg = {**TINY, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2}
    for window, expect in ((WINDOW, 2), (None, 0)):
        model, plan = tmp_path / f"m{window}.yaml", tmp_path / f"p{window}.json"
        model.write_text(yaml.safe_dump({"schema_version": 1, "name": "mix", "hf": {**cfg, "sliding_window": window},
                                         "args": {"seq_len": SEQ}, "training": {"global_batch_size": 8, "dtype": "bf16",
                                                                               "optimizer": "adam"}}))
        assert main(["simulate", str(model), "--cluster", "dgx-h100:1x8", "--dp", "8", "-o", str(plan)]) == 0
        capsys.readouterr()
        assert main(["export", str(plan), "--to", "megatron", "-o", str(tmp_path / "out.args")]) == expect
        err = capsys.readouterr().err
        if window:
            assert err.count("\n") == 1 and f"model.hf.sliding_window: {WINDOW}" in err and "Traceback" not in err
