"""hf: in model.yaml: Hugging Face causal LMs (Llama 3) extracted on the meta device, their exact
parameter counts and FLOPs against closed forms, and Megatron's tensor-parallel layout for GQA,
SwiGLU and RMSNorm."""

import builtins
import json
import os
import subprocess
import sys

import pytest
import yaml

from parsim.errors import InputError
from parsim.model.spec import load_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "data", "hf_tiny_llama.yaml")
TINY_CFG = os.path.join(ROOT, "tests", "data", "hf_tiny_llama", "config.json")


def _cfg(name):
    with open(os.path.join(ROOT, "examples", name, "config.json")) as f:
        return json.load(f)


def test_without_transformers_hf_says_how_to_install_it(monkeypatch):
    real = builtins.__import__

    def no_transformers(name, *args, **kwargs):
        if name == "transformers" or name.startswith("transformers."):
            raise ImportError("No module named 'transformers'")
        return real(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_transformers)
    with pytest.raises(InputError) as e:
        load_model(TINY)
    msg = str(e.value)
    assert "\n" not in msg and TINY in msg and "pip install -e '.[hf]'" in msg


@pytest.mark.parametrize("name, published_b", [("llama3_8b", 8.03), ("llama3_70b", 70.6), ("llama3_405b", 405.9)])
def test_llama3_closed_form_matches_published_counts(name, published_b):
    from parsim.model.hf import llama_param_count

    c = _cfg(name)
    h, inter, L, V = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    a, g = c["num_attention_heads"], c["num_key_value_heads"]
    # V h (embeddings) + L [2 h^2 (q, o) + 2 h (h / a) g (k, v) + 3 h I (SwiGLU) + 2 h] + h + V h (untied head)
    assert llama_param_count(c) == V * h + L * (2 * h * h + 2 * h * (h // a) * g + 3 * h * inter + 2 * h) + h + V * h
    # Dubey et al. 2024 (Table 3; model cards): 8.03B, 70.6B, 405.9B, to the digits published
    assert round(llama_param_count(c) / 1e9, 2 if published_b < 10 else 1) == published_b
    assert llama_param_count(c) == {"llama3_8b": 8_030_261_248, "llama3_70b": 70_553_706_496,
                                    "llama3_405b": 405_853_388_800}[name]


def _attention_flops(c, seq_len, attn="sdpa"):
    """Forward FLOPs of attention's QK^T and AV over one sequence, 4 s h per token per layer
    (Narayanan et al. 2021, Eq. 3: 24 B s l h^2 (1 + s / 6h + ...) per pass; with GQA and SwiGLU the
    weights change, the attention term does not); fused causal attention computes half of the
    score blocks (Dao 2023, Sec. 4.1)."""
    full = 4 * c["num_hidden_layers"] * seq_len * seq_len * c["hidden_size"]
    return full // 2 if attn == "sdpa" else full


def _flops_closed_form(c, seq_len, attn="sdpa"):
    """Forward FLOPs of one sequence: 2 x MACs of every matmul weight (layers and head; the
    embedding is a lookup) per token, plus attention's (_attention_flops)."""
    from parsim.model.hf import llama_param_count

    h, L, V = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
    matmul_params = llama_param_count(c) - V * h - (2 * L + 1) * h      # no embedding, no norms
    return 2 * matmul_params * seq_len + _attention_flops(c, seq_len, attn)


def _tiny(tmp_path, attn):
    """The tiny Llama with ``attn_implementation: attn``."""
    d = yaml.safe_load(open(TINY))
    d["hf"], d["args"] = TINY_CFG, {**d["args"], "attn_implementation": attn}
    p = tmp_path / f"tiny_{attn}.yaml"
    p.write_text(yaml.safe_dump(d))
    return load_model(p).graph


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_tiny_llama_extracts_exactly(tmp_path, attn):
    from parsim.model.hf import llama_param_count

    g = _tiny(tmp_path, attn)
    with open(TINY_CFG) as f:
        c = json.load(f)
    assert g.names == ["embed", "layers.0", "layers.1", "head"]
    assert g.param_count == llama_param_count(c) == 125_248
    # exact: FlopCounterMode counts every matmul and attention (eager's bmm's, or the fused kernel)
    assert g.fwd_flops == pytest.approx(_flops_closed_form(c, 16, attn), rel=1e-12)
    # backward: 2x forward for every unit with an input gradient (all but the embedding's lookup),
    # fused attention's 2.5x (recomputed QK^T and four gradient GEMMs)
    assert g.layers[0].fwd_flops == g.layers[0].bwd_flops == 0
    att = _attention_flops(c, 16, attn) / c["num_hidden_layers"]
    for layer in g.layers[1:]:
        extra = 0.5 * att if attn == "sdpa" and layer.name.startswith("layers.") else 0
        assert layer.bwd_flops == pytest.approx(2 * layer.fwd_flops + extra, rel=1e-12)
    # the config's 4 heads and 2 KV heads are read back from the operators
    from parsim.shard.builtin import attention_heads
    assert attention_heads(g) == (4, 2)


def test_gqa_flops_count_under_torch_formulas_that_assert_equal_heads(monkeypatch):
    """torch 2.11's sdpa formulas assert that K/V have the query's head count (2.13's broadcast them):
    the H200 check's Llama 3.2 1B stopped there.  With such formulas standing in, parsim's formulas for
    the fused operator count 4 query heads over 2 KV heads as the kernel runs them: forward 4 b h s^2 d,
    backward 2.5x, each halved when causal."""
    import torch
    from torch.utils import flop_counter

    from parsim.model.attention import FUSED_BACKWARD_OP, FUSED_OP, register_flop_formulas

    def equal_heads(real):
        def formula(*shapes):
            assert len({s[1] for s in shapes}) == 1, f"shapes are incompatible: {shapes}"
            return real(*shapes)
        return formula
    for name in ("sdpa_flop_count", "sdpa_backward_flop_count"):
        monkeypatch.setattr(flop_counter, name, equal_heads(getattr(flop_counter, name)))
    register_flop_formulas()
    b, h, g, s, d = 2, 4, 2, 16, 8
    q, out = torch.empty(b, h, s, d, device="meta"), torch.empty(b, h, s, d, device="meta")
    k = v = torch.empty(b, g, s, d, device="meta")
    forward = flop_counter.flop_registry[getattr(torch.ops.aten, FUSED_OP)]
    backward = flop_counter.flop_registry[getattr(torch.ops.aten, FUSED_BACKWARD_OP)]
    assert forward(q, k, v, 0.0, True, out_val=None) == 4 * b * h * s * s * d // 2
    assert forward(q, k, v, 0.0, False, out_val=None) == 4 * b * h * s * s * d
    assert backward(out, q, k, v, out, None, 0.0, True, out_val=None) == 10 * b * h * s * s * d // 2


def test_tiny_llama_sdpa_saves_no_scores(tmp_path):
    """Fused attention (the default) keeps Q, K and V of its 2 KV heads, the output and the fp32
    logsumexp; eager keeps the probabilities (a s^2) and the KV heads repeated to 4, and the
    same rest: per layer and sample, eager - sdpa = 4 a s^2 + 4 * 2 (a - g) s d - 4 a s bytes."""
    eager, sdpa = _tiny(tmp_path, "eager"), _tiny(tmp_path, "sdpa")
    a, g, s, d = 4, 2, 16, 16
    for le, ls in zip(eager.layers[1:-1], sdpa.layers[1:-1]):
        assert le.saved_bytes - ls.saved_bytes == 4 * a * s * s + 4 * 2 * (a - g) * s * d - 4 * a * s
    assert eager.layers[0].saved_bytes == sdpa.layers[0].saved_bytes
    assert eager.layers[-1].saved_bytes == sdpa.layers[-1].saved_bytes
    assert load_model(TINY).graph.saved_bytes == sdpa.saved_bytes        # sdpa is the default


def test_inline_fields_equal_the_config_file(tmp_path):
    with open(TINY_CFG) as f:
        c = json.load(f)
    p = tmp_path / "inline.yaml"
    # yaml.safe_dump writes 1e-05 as 1.0e-05, which YAML reads as a float (1e-05 it reads as a string)
    p.write_text(yaml.safe_dump({"schema_version": 1, "hf": c, "args": {"seq_len": 16},
                                 "training": {"global_batch_size": 8}}))
    a, b = load_model(p).graph, load_model(TINY).graph
    assert a.param_count == b.param_count and a.fwd_flops == b.fwd_flops


def test_an_hf_model_is_extracted_once_per_config(tmp_path, extractions):
    """parsim.model.spec keeps an hf: model's graph by its config's text (ModelSource): loaded again,
    it is not extracted again; another config is (tests/test_model.py checks the rest of the key)."""
    calls = extractions
    first = load_model(TINY).graph
    assert load_model(TINY).graph is first and len(calls) == 1
    with open(TINY_CFG) as f:
        c = json.load(f)
    c["num_hidden_layers"] += 1
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text(json.dumps(c))
    p = tmp_path / "hf_tiny_llama.yaml"
    p.write_text(open(TINY).read().replace("hf_tiny_llama/config.json", "cfg/config.json"))
    deeper = load_model(p).graph
    assert len(calls) == 2 and len(deeper.layers) == len(first.layers) + 1


def test_bad_hf_fields_are_one_line_errors(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("schema_version: 1\nhf: {model_type: llama, hidden_size: 64, intermediate_size: 8, "
                 "num_hidden_layers: 1, num_attention_heads: 4, num_key_value_heads: 3, vocab_size: 8}\n"
                 "training: {global_batch_size: 8}\n")
    with pytest.raises(InputError, match="num_key_value_heads: 3 does not divide num_attention_heads 4"):
        load_model(p)
    p.write_text("schema_version: 1\nhf: missing/config.json\ntraining: {global_batch_size: 8}\n")
    with pytest.raises(InputError, match="missing/config.json"):
        load_model(p)


@pytest.mark.parametrize("t", [2, 4])
def test_tiny_llama_megatron_per_device_params(t):
    from parsim.shard.prepare import per_device_graph

    g = load_model(TINY).graph
    h, inter, V, d, kv = 64, 176, 256, 16, 2
    dev = per_device_graph(g, t, "megatron")
    # q, o by t; k, v: 2 KV heads split by min(t, 2), replicated beyond; SwiGLU by t; RMSNorms whole
    assert dev.layers[1].param_count == 2 * h * h // t + 2 * h * kv * d // min(t, kv) + 3 * h * inter // t + 2 * h
    assert dev.layers[0].param_count == V * h // t            # vocabulary-parallel embedding
    assert dev.layers[-1].param_count == h + V * h // t        # final norm whole, head by columns
    # one forward all-reduce after o_proj and after down_proj; one backward before q/k/v (fused in
    # Megatron) and one before gate/up; and layers.0 completes the vocabulary-parallel embedding
    comm = [(ph, s.kind) for ph, s, _ in dev.layers[2].tp_comm if ph != "grad" and s.group_size == t]
    assert comm == [("B", "AllReduce"), ("F", "AllReduce"), ("B", "AllReduce"), ("F", "AllReduce")]


@pytest.mark.parametrize("t", [2, 4])
def test_an_ungated_mlp_and_layernorm1p_lay_out_as_megatron_lays_them_out(t):
    """Nemotron's block (an MLP of up_proj, squared ReLU and down_proj; LayerNorm1p, whose weight + 1
    reads the weight alone) under megatron-sp: up by columns, down by rows, attention by heads, the
    norms whole (their weight + 1 on every device, the norm itself on s/t of the sequence); a
    Llama's RMSNorm keeps no operator whole and its MLP is gated."""
    from parsim.shard.builtin import gated_mlp, strategies, whole_weight_ops
    from parsim.shard.prepare import per_device_graph

    g = load_model(os.path.join(ROOT, "tests", "data", "hf_tiny_nemotron.yaml")).graph
    h, inter, V = 64, 256, 256
    assert not gated_mlp(g) and gated_mlp(load_model(TINY).graph) and whole_weight_ops(load_model(TINY).graph) == {}
    assert set(whole_weight_ops(g)) == {"layers.*/input_layernorm:add", "layers.*/post_attention_layernorm:add",
                                        "?head/norm:add"}
    dev = per_device_graph(g, t, "megatron-sp")
    norms = 2 * 2 * h                                      # two LayerNorm1p, weight and bias each, whole
    assert dev.layers[1].param_count == 4 * h * h // t + 2 * h * inter // t + norms
    assert dev.layers[-1].param_count == 2 * h + V * h // t
    patterns = strategies("megatron-sp", t, g)
    assert "layers.*/mlp.gate_proj" not in patterns and patterns["layers.*/mlp.up_proj"] == ((1, 1), (1, t))
    assert patterns["layers.*/input_layernorm:*"] == ((1, t, 1),)
    assert patterns["layers.*/input_layernorm:add"] == ((1,),)


def test_llama3_8b_tp8_and_tp16_per_device_params_match_the_closed_form():
    from parsim.shard.prepare import per_device_graph

    spec = load_model(os.path.join(ROOT, "examples", "llama3_8b.yaml"))
    c = _cfg("llama3_8b")
    h, inter, L, V = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    d, kv = h // c["num_attention_heads"], c["num_key_value_heads"]
    assert spec.graph.fwd_flops == pytest.approx(_flops_closed_form(c, 8192), rel=1e-12)   # 140.55 TFLOP
    assert round(spec.graph.fwd_flops / 1e12, 2) == 140.55       # sdpa: causal attention's half
    for t in (8, 16):
        dev = per_device_graph(spec.graph, t, "megatron")
        # q, o split by t; k, v: 8 KV heads split by 8 (t=8), each replicated twice at t=16
        layer = 2 * h * h // t + 2 * h * (kv * d) // min(t, kv) + 3 * h * inter // t + 2 * h
        assert [x.param_count for x in dev.layers[1:-1]] == [layer] * L
        assert dev.param_count == V * h // t + L * layer + h + V * h // t
    assert per_device_graph(spec.graph, 16, "megatron").layers[1].param_count - \
        (2 * h * h // 16 + 3 * h * inter // 16 + 2 * h) == 2 * h * d      # one KV head of k and v per device


def test_gqa_tp_that_neither_divides_nor_is_divided_by_kv_heads_is_refused():
    from parsim.errors import InfeasibleError
    from parsim.shard.builtin import llama

    with pytest.raises(InfeasibleError, match="KV heads"):
        llama(3, 12, 8)
    with pytest.raises(InfeasibleError, match="attention heads"):
        llama(8, 4, 2)


def test_cli_model_prints_the_exact_count_and_simulate_runs_tp8():
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "parsim.cli", "model", "examples/llama3_8b.yaml"], cwd=ROOT,
                         env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "total: 8,030,261,248 parameters" in out.stdout
    out = subprocess.run([sys.executable, "-m", "parsim.cli", "simulate", "examples/llama3_8b.yaml",
                          "--cluster", "dgx-h100:1x8", "--tp", "8", "--tp-layout", "megatron"], cwd=ROOT,
                         env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr + out.stdout
    assert "tp=8" in out.stdout or "tp 8" in out.stdout


def test_tiny_llama_sdpa_megatron_tp4_replicates_each_kv_head_and_sums_its_gradient():
    """tp=4 over 2 KV heads with fused attention: q, o, SwiGLU split 4 ways, k and v 2 ways (each
    KV head on 2 devices, as Megatron replicates beyond the KV-head count), attention on one query
    head per device; the forward needs no collective inside attention, the backward sums each
    replicated head's dK and dV over its 2 copies (s d fp32 bytes each per sample)."""
    from parsim.shard.prepare import per_device_graph

    g = load_model(TINY).graph
    h, inter, s, d, a, kv, t = 64, 176, 16, 16, 4, 2, 4
    dev = per_device_graph(g, t, "megatron").layers[2]          # layers.1 (layers.0 completes the embedding)
    matmul = 2 * s * (2 * h * a * d // t + 2 * h * kv * d // kv + 3 * h * inter // t)
    assert dev.fwd_flops == matmul + 4 * s * s * a * d / 2 / t
    fwd = [(st.kind, st.group_size) for ph, st, _ in dev.tp_comm if ph == "F"]
    assert fwd == [("AllReduce", t), ("AllReduce", t)]                  # after o_proj and down_proj
    pairs = [(st.kind, st.group_size, st.bytes_per_device) for ph, st, _ in dev.tp_comm
             if ph == "B" and st.group_size == t // kv and st.bytes_per_device == s * d * 4]
    assert pairs == [("AllReduce", 2, s * d * 4)] * 2                    # dK and dV over each head's 2 copies
