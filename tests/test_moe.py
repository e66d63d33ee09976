"""Mixtures of experts (parsim.model.moe, parsim.model.hf): exact parameter counts against
transformers' own count of the meta model, active parameters and forward FLOPs against closed
forms, the grouped GEMMs extraction records, DeepSeek-V3's MTP module; and the all-to-all's
closed forms on one node and across nodes (parsim.cost.comm)."""

import json
import os

import pytest
import yaml

from parsim.model.moe import Experts, config_experts, mtp_param_count, param_count

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "examples", "moe_tiny_local.yaml")

# A DeepSeek-V3-shaped decoder at toy size: MLA (query rank 32, KV rank 16, 8 + 8 query/key dims
# per head and 8 value dims, so V is narrower than Q and K as in DeepSeek-V3's 192 / 128), the
# first layer dense, then 8 routed experts of 32 (top-2 within 1 of 2 groups) and 1 shared.
TINY_DEEPSEEK = {
    "model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 4, "n_routed_experts": 8,
    "n_shared_experts": 1, "num_experts_per_tok": 2, "n_group": 2, "topk_group": 1, "first_k_dense_replace": 1,
    "q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8,
    "vocab_size": 128, "max_position_embeddings": 16, "num_nextn_predict_layers": 1, "tie_word_embeddings": False,
}


# Qwen2-MoE's layout (transformers' Qwen2MoeSparseMoeBlock): routed experts beside one shared expert
# whose output a sigmoid gate (h -> 1) scales, and biases on q, k and v
TINY_QWEN2 = {
    "model_type": "qwen2_moe", "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 96, "num_experts": 8, "num_experts_per_tok": 2, "decoder_sparse_step": 1,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128,
    "max_position_embeddings": 16, "tie_word_embeddings": False, "norm_topk_prob": False,
}

# DeepSeek-V2's spelling of the tiny model (transformers' DeepseekV2ForCausalLM: MLA with a rotary embedding
# given as one complex tensor, a group-limited router under its topk_method)
TINY_DEEPSEEK_V2 = {**{k: v for k, v in TINY_DEEPSEEK.items() if k != "num_nextn_predict_layers"},
                    "model_type": "deepseek_v2", "topk_method": "group_limited_greedy"}


def _cfg(name):
    with open(os.path.join(ROOT, "examples", name, "config.json")) as f:
        return json.load(f)


def _transformers_count(cfg) -> int:
    """transformers' own count: the parameters of the model it builds on the meta device."""
    import torch

    from parsim.model.hf import causal_lm
    with torch.device("meta"):
        model = causal_lm(cfg, 16)
    return sum(p.numel() for p in model.hf.parameters())


def _load(tmp_path, cfg, seq_len=16, **args):
    from parsim.model.spec import load_model

    p = tmp_path / "m.yaml"
    p.write_text(yaml.safe_dump({"schema_version": 1, "hf": cfg, "args": {"seq_len": seq_len, **args},
                                 "training": {"global_batch_size": 8}}))
    return load_model(p)


def _matmul_flops_closed_form(cfg, seq_len) -> float:
    """Forward FLOPs of one sequence's GEMMs: 2 x active matmul parameters x tokens (FLOPs = 2 x
    MACs; the router's E h included), i.e. all active parameters but the embedding lookup and the
    RMSNorms' (two per layer, the final one, MLA's two latent norms)."""
    h, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
    norms = (2 * L + 1) * h + L * (cfg.get("q_lora_rank", 0) + cfg.get("kv_lora_rank", 0))
    return 2.0 * (param_count(cfg)[1] - V * h - norms) * seq_len


def test_tiny_mixtral_counts_match_transformers_and_the_closed_form():
    from parsim.model.spec import load_model

    spec = load_model(TINY)
    g, cfg = spec.graph, _cfg("moe_tiny_local")
    assert g.param_count == _transformers_count(cfg) == param_count(cfg)[0] == 337_216
    # active: all but the 6 of 8 experts a token skips, in each of 2 layers: 3 h I (E - k) each
    assert g.active_param_count == param_count(cfg)[1] == 337_216 - 2 * 3 * 64 * 96 * (8 - 2) == 116_032
    for i, layer in enumerate(g.layers[1:-1]):
        assert layer.experts == config_experts(cfg, i) == Experts(8, 2, 64, 96, 0, 8 * 64)
    # the layer table's JSON keeps the experts (parsim model --json; plans)
    from parsim.model.graph import LayerGraph
    back = LayerGraph.from_dict(g.to_dict())
    assert [layer.experts for layer in back.layers] == [layer.experts for layer in g.layers]
    assert back.active_param_count == g.active_param_count and g.totals()["active_param_count"] == 116_032


def test_tiny_mixtral_flops_are_2_x_active_params_x_tokens_plus_attention():
    from parsim.model.spec import load_model

    g, cfg, s = load_model(TINY).graph, _cfg("moe_tiny_local"), 16
    # fused causal attention: 4 s^2 a d / 2 per layer (Dao 2023, Sec. 4.1), a d = h here
    attention = cfg["num_hidden_layers"] * 4 * s * s * cfg["hidden_size"] / 2
    assert g.fwd_flops == pytest.approx(_matmul_flops_closed_form(cfg, s) + attention, rel=1e-12)
    for layer in g.layers[1:-1]:        # backward: 2x forward, fused attention's 2.5x
        assert layer.bwd_flops == pytest.approx(2 * layer.fwd_flops + 0.5 * attention / 2, rel=1e-12)


def test_routed_experts_are_grouped_gemms_at_the_mean_tokens_per_expert():
    """Forward: gate+up (c, 2I, h) and down (c, h, I) over 8 groups, c = b s k / E tokens per
    expert; backward: their data gradients (I) and weight gradients (W, K = c grows with b)."""
    from parsim.model.spec import load_model

    layer = load_model(TINY).graph.layers[1]
    ex = layer.experts
    grouped = [k for k in layer.kernels if k.gemm and k.gemm_at(1)[3] == ex.experts]
    for b in (1, 3):
        c = b * 16 * 2 / 8
        fwd = [k.gemm_at(b) for k in grouped if k.phase == "F"]
        assert fwd == [tuple(float(x) for x in gemm) for gemm in ex.routed_gemms(b * 16)]
        assert fwd == [(c, 192.0, 64.0, 8.0), (c, 64.0, 96.0, 8.0)]
    assert sorted(k.phase for k in grouped) == ["F", "F", "I", "I", "W", "W"]
    # the router: a (b s, h) x (h, E) GEMM
    assert any(k.gemm_at(2) == (32.0, 8.0, 64.0, 1.0) for k in layer.kernels if k.phase == "F")


@pytest.mark.parametrize("model", [TINY, os.path.join(ROOT, "results", "heldout", "models", "qwen2_moe_small.yaml")])
def test_a_moe_layer_keeps_for_backward_what_the_run_keeps(model):
    """Extraction's grouped stand-in (meta, balanced routing) against the module a run executes
    (CPU, transformers' grouped_mm experts at the routing its random init makes): the saved
    storages of one MoE decoder unit at 2 sequences agree within 2% (the same T k rows whatever
    the routing).  Until the stand-in combined as transformers does, it kept the T k x h
    weighted rows once more (+7% on the tiny Mixtral, +9% on the Qwen2-MoE one)."""
    import torch

    from parsim.exec.stages import cut_units
    from parsim.model.spec import build_module, load_model

    spec = load_model(model)
    seq, hidden = dict(spec.source.args)["seq_len"], json.loads(spec.source.target)["hidden_size"]
    torch.manual_seed(0)
    name, unit = cut_units(build_module(spec.source, spec.path))[1]
    seen: dict[int, int] = {}

    def pack(t):
        seen[t.untyped_storage()._cdata] = t.untyped_storage().nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        unit(torch.randn(2, seq, hidden, requires_grad=True))
    params = {p.untyped_storage()._cdata for p in unit.parameters()}
    kept = sum(n for k, n in seen.items() if k not in params) / 2
    layer = spec.graph.layers[spec.graph.names.index(name)]
    assert layer.experts is not None
    assert layer.saved_bytes == pytest.approx(kept, rel=0.02)


def test_tiny_qwen2_moe_reads_its_gated_shared_expert(tmp_path):
    """Qwen2-MoE: every layer's 8 routed experts of 32 (top-2) and its shared expert of 96, whose
    sigmoid gate (64 parameters) counts with the router; the traced graph, transformers and the
    closed form (q, k, v biases included) agree on every parameter, and the active ones leave out
    the 6 idle experts of each layer."""
    g = _load(tmp_path, TINY_QWEN2).graph
    assert g.param_count == _transformers_count(TINY_QWEN2) == param_count(TINY_QWEN2)[0]
    assert g.active_param_count == param_count(TINY_QWEN2)[1] == g.param_count - 2 * 3 * 64 * 32 * (8 - 2)
    assert [layer.experts for layer in g.layers[1:-1]] == [config_experts(TINY_QWEN2, i) for i in range(2)] == \
        [Experts(8, 2, 64, 32, 96, 8 * 64 + 64)] * 2


def test_tiny_deepseek_dense_first_layer_shared_expert_and_mla(tmp_path):
    g = _load(tmp_path, TINY_DEEPSEEK, mtp_layers=0).graph      # the main model, as transformers builds it
    assert g.param_count == _transformers_count(TINY_DEEPSEEK) == param_count(TINY_DEEPSEEK)[0]
    assert g.active_param_count == param_count(TINY_DEEPSEEK)[1]
    # the tiny config's n_group 2, topk_group 1: group-limited routing, read from the config and the router alike
    assert [layer.experts for layer in g.layers[1:-1]] == [None] + [Experts(8, 2, 64, 32, 32, 8 * 64, 2, 1)] * 2
    assert [config_experts(TINY_DEEPSEEK, i) for i in range(3)] == [layer.experts for layer in g.layers[1:-1]]
    # MLA's value heads (8) narrower than its query/key heads (16): fused attention counted on V
    # padded to 16 (parsim.model.attention.fused_on_meta), 4 s^2 a d_qk / 2 per layer
    s, a, d_qk = 16, 4, 16
    attention = 3 * 4 * s * s * a * d_qk / 2
    assert g.fwd_flops == pytest.approx(_matmul_flops_closed_form(TINY_DEEPSEEK, s) + attention, rel=1e-12)


def test_tiny_deepseek_v2_builds_with_its_complex_rotary_and_its_router_limit(tmp_path):
    """transformers' DeepSeek-V2 gives its layers the rotary embedding as one complex tensor, not
    (cos, sin); its router limits a token to topk_group of n_group groups only under topk_method
    group_limited_greedy.  The model builds, counted as transformers and the config count it."""
    g = _load(tmp_path, TINY_DEEPSEEK_V2).graph
    assert g.param_count == _transformers_count(TINY_DEEPSEEK_V2) == param_count(TINY_DEEPSEEK_V2)[0]
    assert g.active_param_count == param_count(TINY_DEEPSEEK_V2)[1]
    assert [layer.experts for layer in g.layers[1:-1]] == [None] + [Experts(8, 2, 64, 32, 32, 8 * 64, 2, 1)] * 2
    greedy = {**TINY_DEEPSEEK_V2, "topk_method": "greedy"}
    free = _load(tmp_path, greedy).graph
    assert [layer.experts for layer in free.layers[1:-1]] == [None] + [Experts(8, 2, 64, 32, 32, 8 * 64)] * 2
    assert [config_experts(greedy, i) for i in range(3)] == [layer.experts for layer in free.layers[1:-1]]


def test_deepseek_mtp_module_is_one_moe_layer_plus_its_projection_and_norms(tmp_path):
    """DeepSeek-V3 Sec. 2.2: an MTP depth adds a Transformer block, M (d x 2d) and RMSNorms (the
    two inputs', the module's final one); embedding and head shared (the checkpoint stores copies)."""
    g = _load(tmp_path, TINY_DEEPSEEK).graph
    h, V = 64, 128
    mtp = mtp_param_count(TINY_DEEPSEEK)
    assert mtp["own"] == g.layers[-2].param_count + 2 * h * h + 3 * h
    assert mtp["checkpoint"] == mtp["own"] + 2 * V * h
    assert mtp_param_count(_cfg("mixtral_8x7b"))["depths"] == 0


def test_the_extracted_mtp_module_is_the_closed_form_in_the_head(tmp_path):
    """The config's num_nextn_predict_layers 1 puts the module in the head unit (parsim.model.hf.Head):
    its own parameters (the closed form above; embedding and head shared: the embedding a tied
    copy), its forward FLOPs one MoE layer's plus M's and the shared head's GEMMs, its tokens
    routed as a decoder layer's, and a second loss; ``mtp_layers: 0`` leaves it out."""
    with_mtp, main = _load(tmp_path, TINY_DEEPSEEK).graph, _load(tmp_path, TINY_DEEPSEEK, mtp_layers=0).graph
    h, V, s = 64, 128, 16
    head, last = with_mtp.layers[-1], with_mtp.layers[-2]
    assert [x.name for x in with_mtp.layers] == [x.name for x in main.layers]
    assert head.param_count == main.layers[-1].param_count + mtp_param_count(TINY_DEEPSEEK)["own"]
    assert head.tied == (("embed", V * h),) and main.layers[-1].tied == ()
    assert head.experts == last.experts
    assert head.fwd_flops == pytest.approx(main.layers[-1].fwd_flops + last.fwd_flops + 2 * (2 * h * h) * s
                                           + 2 * h * V * s, rel=1e-12)
    assert head.routed_bytes == last.output_bytes and last.routed_bytes == 0
    from parsim.cost.experts import a2a_bytes
    assert a2a_bytes(head, "F", 2, with_mtp.dtype) == a2a_bytes(last, "F", 2, with_mtp.dtype) > 0
    assert (with_mtp.losses, main.losses) == (2, 1)
    assert with_mtp.loss_layer.fwd_mem_bytes == pytest.approx(2 * main.loss_layer.fwd_mem_bytes)
    assert with_mtp.loss_saved_bytes == 2 * main.loss_saved_bytes


def test_mtp_layers_beyond_the_config_and_the_executor_are_refused(tmp_path):
    from parsim.errors import InputError
    from parsim.exec.stages import build_units

    with pytest.raises(InputError, match="args.mtp_layers: the config states no multi-token-prediction module"):
        _load(tmp_path, _cfg("mixtral_8x7b"), mtp_layers=1)
    with pytest.raises(InputError, match="parsim prices one"):
        _load(tmp_path, {**TINY_DEEPSEEK, "num_nextn_predict_layers": 2})
    with pytest.raises(InputError, match="args.mtp_layers: the executor does not train"):
        build_units(_load(tmp_path, TINY_DEEPSEEK), None, 0)      # before the plan is read


@pytest.mark.parametrize("name, total, active, published", [
    # Mistral AI, "Mixtral of experts" (blog, 2023-12-11): 46.7B total, 12.9B used per token
    ("mixtral_8x7b", 46_702_792_704, 12_879_925_248, (46.7, 12.9, 0.1)),
    # Qwen3 Technical Report, Table 2: 30.5B total, 3.3B activated
    ("qwen3_30b_a3b", 30_532_122_624, 3_353_032_704, (30.5, 3.3, 0.1)),
    # DeepSeek-V3 report, abstract: 671B total, 37B activated per token
    ("deepseek_v3", 671_026_404_352, 37_552_282_624, (671, 37, 1)),
    # DeepSeek-V2 report (arXiv 2405.04434), abstract: 236B total, 21B activated for each token
    ("deepseek_v2", 235_741_434_880, 21_375_800_320, (236, 21, 1)),
])
def test_published_moe_counts(name, total, active, published):
    cfg = _cfg(name)
    assert param_count(cfg) == (total, active)
    digits = 0 if published[0] > 100 else 1
    assert round(total / 1e9, digits) == published[0]
    # active, within one unit of the published figure's last digit (Qwen3 and DeepSeek-V3 truncate:
    # 3.35B as "3.3B", 37.55B as "37B")
    assert abs(active / 1e9 - published[1]) < published[2]


def test_deepseek_v3_layout_and_mtp():
    cfg = _cfg("deepseek_v3")
    kinds = [config_experts(cfg, i) for i in range(61)]
    # node-limited routing: 8 groups, a token's experts from 4 of them (Sec. 2.1.2)
    assert kinds[:3] == [None] * 3 and all(k == Experts(256, 8, 7168, 2048, 2048, 256 * 7168, 8, 4) for k in kinds[3:])
    mtp = mtp_param_count(cfg)
    # README_WEIGHTS.md of deepseek-ai/DeepSeek-V3: "11.5B unique parameters" besides the shared
    # 0.9B embedding and 0.9B head; the MoE block alone is 11.51B, with M (7168 x 14336) 11.61B
    assert mtp["depths"] == 1 and mtp["own"] == 11_610_067_968
    assert mtp["checkpoint"] - mtp["own"] == 2 * 129_280 * 7168


def test_mixtral_extracted_count_matches_transformers(tmp_path):
    """The full 8x7B on the meta device, at a short sequence (the count does not depend on it)."""
    cfg = _cfg("mixtral_8x7b")
    g = _load(tmp_path, cfg, seq_len=64).graph
    assert g.param_count == _transformers_count(cfg) == 46_702_792_704
    assert g.active_param_count == 12_879_925_248


# ----------------------------------------------------------------------------- all-to-all

def _a2a_terms(cluster, link_class):
    from parsim.cost.comm import _alpha_beta
    return _alpha_beta(cluster, link_class)


def test_all_to_all_in_one_node_is_pairwise_exchange_on_nvlink():
    from parsim.cost.comm import all_to_all_time_s
    from parsim.hardware import load_cluster

    c = load_cluster("dgx-h100:1x8")
    a, b = _a2a_terms(c, "group")
    # dgx-h100: NVLink4 450 GB/s, 3 us, at the link's and NCCL's fitted efficiencies and 5 us per step
    eff = c.link_for("group").efficiency * c.profile.collectives.bandwidth_efficiency
    assert b == pytest.approx(450e9 * eff) and a == pytest.approx(8e-6)
    s = 64 * 2**20
    for n in (2, 4, 8):
        assert all_to_all_time_s(c, list(range(n)), s) == pytest.approx((n - 1) * a + (n - 1) / n * s / b)
    # the hottest rank moves imbalance x its share
    assert all_to_all_time_s(c, list(range(8)), s, imbalance=1.25) == pytest.approx(7 * a + 7 / 8 * 1.25 * s / b)
    assert all_to_all_time_s(c, [0], s) == 0.0


def test_all_to_all_across_nodes_is_bound_by_the_nics():
    from parsim.cost.comm import all_to_all_time_s
    from parsim.hardware import load_cluster

    s = 64 * 2**20
    # one tier (dgx-h100): 2 nodes x 8; a rank sends 8/16 of S off the node over its NIC share
    c = load_cluster("dgx-h100:2x8")
    a_in, b_in = _a2a_terms(c, "group")
    a_out, b_out = _a2a_terms(c, "network")
    nccl = c.profile.collectives.bandwidth_efficiency
    assert b_out == pytest.approx(50e9 * c.link_for("network").efficiency * nccl)
    t = all_to_all_time_s(c, list(range(16)), s)
    assert t == pytest.approx(8 / 16 * s / b_out + 7 * a_in + 8 * a_out)
    assert 8 / 16 * s / b_out > 7 / 16 * s / b_in          # the NIC part is the slower
    # rail-optimised (SuperPOD): across rails the PXN path, node + network latency, NIC bandwidth;
    # the forwarded (k-1)/k of the off-node bytes rides NVLink beside the NIC's transfer
    pod = load_cluster("dgx-h100-superpod:4x8")
    ranks = list(range(32))
    assert pod.span_class(ranks) == "rail"
    a_in, b_in = _a2a_terms(pod, "group")
    a_rail, b_rail = _a2a_terms(pod, "rail")
    assert b_rail == pytest.approx(50e9 * pod.link_for("rail").efficiency * nccl) and a_rail == pytest.approx(a_in + 5e-6)
    assert all_to_all_time_s(pod, ranks, s) == pytest.approx(24 / 32 * s / b_rail + 7 * a_in + 24 * a_rail)
    # one rank per node, all on rail 0: the leaf alone, no NVLink hop
    rail0 = [0, 8, 16, 24]
    assert pod.span_class(rail0) == "network"
    a_net, b_net = _a2a_terms(pod, "network")
    assert all_to_all_time_s(pod, rail0, s) == pytest.approx(3 / 4 * s / b_net + 3 * a_net)


def test_a_token_all_to_all_scatters_every_routed_copy():
    from parsim.cost.comm import ROUTING_IMBALANCE
    from parsim.model.moe import Experts

    # DeepSeek-V3: 4096 tokens x top-8 x 7168 x 2 bytes (bf16) per rank
    ex = Experts(experts=256, top_k=8, hidden=7168, intermediate=2048, shared_intermediate=2048)
    assert ex.all_to_all_bytes(4096, 2) == 4096 * 8 * 7168 * 2
    assert ROUTING_IMBALANCE == 1.25


def test_a_unit_that_names_something_else_losses_adds_no_loss():
    """LayerGraph.losses counts a head's multi-token-prediction losses (an int it states), not a
    user module's attribute of that name (a list of losses, a flag)."""
    import torch
    from torch import nn

    from parsim.model.extract import InputSpec, extract_graph

    class Logged(nn.Linear):
        def __init__(self):
            super().__init__(8, 8)
            self.losses = []                # a user's own bookkeeping

    class Flagged(nn.Linear):
        def __init__(self):
            super().__init__(8, 8)
            self.losses = True
    graph = extract_graph(nn.Sequential(Logged(), torch.nn.ReLU(), Flagged()), InputSpec((8,)))
    assert graph.losses == 1
