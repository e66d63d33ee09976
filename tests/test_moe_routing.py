"""How production routes and moves a mixture of experts' tokens, priced (parsim.cost.experts,
parsim.cost.comm, parsim.model.moe, parsim.model.recompute_modules): node-limited routing and the
dispatchers that send a token once per node, token dropping and padding to capacity, the
alltoall dispatcher's permutations, DeepSeek-V3's recomputation.  Closed forms by hand."""

import math
import os
from dataclasses import replace

import pytest

from parsim.model.moe import Experts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "examples", "moe_tiny_local.yaml")
DEEPSEEK_V3 = Experts(256, 8, 7168, 2048, 2048, 256 * 7168, groups=8, group_limit=4)


@pytest.fixture(scope="module")
def tiny():
    from parsim.model.spec import load_model
    return load_model(TINY)


# ----------------------------------------------------------------------------- node-limited routing

def test_remote_nodes_per_token_closed_form():
    """Uniform routing over E experts on N nodes: a node holds none of a token's k experts with
    probability C(E - E/N, k) / C(E, k); the token's own node is one of N."""
    q = Experts(128, 8, 2048, 768)                       # Qwen3-30B-A3B: no group limit
    for n in (2, 4, 8):
        missed = math.comb(128 - 128 // n, 8) / math.comb(128, 8)
        assert q.remote_nodes_per_token(n) == pytest.approx(n * (1 - missed) * (n - 1) / n)
    assert q.remote_nodes_per_token(1) == 0.0


def test_deepseek_v3_node_limit_bounds_the_nodes_a_token_reaches():
    """DeepSeek-V3 (Sec. 2.1.2): 8 groups, 4 a token; on 8 nodes each group a node, so a token's 8
    experts come from 128 of the 256, on at most 4 nodes.  Its report's "3.2 experts per node"
    at 4 nodes (Sec. 3.2.2) is 8 / 2.5: 3.62 nodes of 4 reached, 3.17 of them remote."""
    missed = math.comb(128 - 32, 8) / math.comb(128, 8)
    assert DEEPSEEK_V3.remote_nodes_per_token(8) == pytest.approx(4 * (1 - missed) * 7 / 8)
    assert DEEPSEEK_V3.remote_nodes_per_token(8) == pytest.approx(3.17, abs=0.01)
    unlimited = replace(DEEPSEEK_V3, groups=1, group_limit=0)
    assert unlimited.remote_nodes_per_token(8) > 4 > DEEPSEEK_V3.remote_nodes_per_token(8)
    for n in (2, 4, 8, 16, 32):                          # never more than the limit allows
        assert DEEPSEEK_V3.remote_nodes_per_token(n) <= min(n - 1, 4 * max(1, n // 8))


def test_flex_dispatcher_sends_once_per_node():
    """Across nodes a flex dispatch moves off_node_share x S over the NICs and (k-1)/k x S over
    NVLink, the slower bound (parsim.cost.comm.all_to_all_time_s), against NCCL's (n-k)/n x S
    with PXN; inside a node both are the same."""
    from parsim.cost.comm import _alpha_beta, all_to_all_time_s
    from parsim.cost.experts import off_node_share
    from parsim.hardware import load_cluster

    cluster = load_cluster("dgx-h100-superpod:8x8")
    ranks = list(range(64))
    share = off_node_share(DEEPSEEK_V3, cluster, ranks, "flex")
    assert share == pytest.approx(DEEPSEEK_V3.remote_nodes_per_token(8) / 8)
    assert off_node_share(DEEPSEEK_V3, cluster, ranks, "alltoall") is None
    assert off_node_share(DEEPSEEK_V3, cluster, ranks[:8], "flex") is None
    s = 2048 * 8 * 7168 * 2.0
    a_in, b_in = _alpha_beta(cluster, "group", "all_to_all")
    a_out, b_out = _alpha_beta(cluster, cluster.span_class(ranks), "all_to_all")
    want = max(7 / 8 * s / b_in, share * s / b_out) + 7 * a_in + 7 * a_out
    assert all_to_all_time_s(cluster, ranks, s, 1.0, share) == pytest.approx(want)
    assert all_to_all_time_s(cluster, ranks, s, 1.0, share) < all_to_all_time_s(cluster, ranks, s) / 2


def test_simulate_prices_the_flex_dispatcher(tiny):
    from parsim.hardware import load_cluster
    from parsim.plan import ParallelConfig
    from parsim.sim import simulate

    cluster = load_cluster("dgx-h100-superpod:2x8")
    cfg = ParallelConfig(dp=16, pp=1, microbatches=1, bounds=(0, len(tiny.graph)), ep=8, placement="pp-inner")
    training = replace(tiny.training, global_batch_size=16, moe_imbalance=1.0)
    # ep = 8 of 16 in pp-inner order: ranks 0..7, one node; the same ep over ranks 0, 2, ... : two
    plain = simulate(tiny.graph, training, cluster, cfg, keep_timeline=False)
    flex = simulate(tiny.graph, replace(training, moe_dispatcher="flex"), cluster, cfg, keep_timeline=False)
    assert flex.ranks[0].ep_comm_s == pytest.approx(plain.ranks[0].ep_comm_s)      # one node: the same
    two = ParallelConfig(dp=8, pp=2, microbatches=2, bounds=(0, 2, len(tiny.graph)), ep=8, placement="pp-inner")
    plain2 = simulate(tiny.graph, training, cluster, two, keep_timeline=False)
    flex2 = simulate(tiny.graph, replace(training, moe_dispatcher="flex"), cluster, two, keep_timeline=False)
    assert len({cluster.node_of(r) for r in two.ep_group(0)}) == 2
    assert flex2.ranks[0].ep_comm_s < plain2.ranks[0].ep_comm_s


# ----------------------------------------------------------------------------- capacity

@pytest.mark.parametrize("kw, imbalance", [
    ({}, 1.25), (dict(moe_imbalance=1.1), 1.1),
    (dict(moe_capacity_factor=1.0), 1.0), (dict(moe_capacity_factor=2.0), 1.25),
    (dict(moe_capacity_factor=2.0, moe_pad_to_capacity=True), 2.0),
    (dict(moe_capacity_factor=1.0, moe_pad_to_capacity=True, moe_imbalance=1.5), 1.0),
])
def test_capacity_sets_the_busiest_load(tiny, kw, imbalance):
    """Dropping caps an expert at cf x the mean; padding makes every expert cf x the mean."""
    from parsim.cost.experts import routing_imbalance
    assert routing_imbalance(replace(tiny.training, **kw)) == imbalance


def test_model_yaml_capacity_fields(tmp_path):
    import yaml

    from parsim.errors import InputError
    from parsim.model.spec import load_model

    raw = yaml.safe_load(open(TINY))
    raw["hf"] = os.path.join(ROOT, "examples", raw["hf"])
    raw["training"].update(moe_capacity_factor=1.0, moe_pad_to_capacity=True, moe_dispatcher="flex")
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(raw))
    t = load_model(str(path)).training
    assert (t.moe_capacity_factor, t.moe_pad_to_capacity, t.moe_dispatcher) == (1.0, True, "flex")
    del raw["training"]["moe_capacity_factor"]
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(InputError, match="training.moe_pad_to_capacity: .*moe_capacity_factor"):
        load_model(str(path))


# ----------------------------------------------------------------------------- permutations

def test_local_sorts_copy_the_dispatched_rows(tiny):
    """A rank with several experts sorts the rows the dispatch brought by local expert and back
    (two copies forward, two backward), each reading and writing R h x 4 bytes, R = E c rows of
    the extraction's grouped GEMMs per sample x the imbalance; one expert a rank: none."""
    from parsim.cost.experts import expert_parallel_graph

    layer = tiny.graph.layers[1]
    e, c, h = next(op for op in layer.ops if op.kind == "BatchMatMul" and "experts" in op.module).input_shapes[0]
    per_sample = 2.0 * e * c * h * 4 / tiny.graph.extraction_batch
    for ep, sorts in ((2, 4), (4, 4), (8, 0)):
        g = expert_parallel_graph(tiny.graph, ep, 1.5)
        added = [k for k in g.layers[1].kernels if k.op == "moe_sort_chunks"]
        assert len(added) == sorts and all(k.bytes == (0.0, per_sample * 1.5) for k in added)
        assert sorted(k.phase for k in added) == (["F", "F", "I", "I"] if sorts else [])


def test_with_the_experts_split_over_tp_each_rank_sorts_the_groups_rows(tiny):
    """Under etp = tp the dispatcher gathers the expert-tp group's rows before the sort and scatters
    them after the unsort (Megatron-Core's token_dispatcher.py at 3b85d982d5, L525-630), so a rank's
    sorts copy etp ranks' rows: etp x the bytes, which the layer's tp share then prices at 1/tp."""
    from parsim.cost.experts import expert_parallel_graph

    def sorted_bytes(etp):
        g = expert_parallel_graph(replace(tiny.graph, tp=etp, etp=etp), 2, 1.5)
        return [k.bytes[1] for k in g.layers[1].kernels if k.op == "moe_sort_chunks"]
    whole, split = sorted_bytes(1), sorted_bytes(2)
    assert len(whole) == len(split) == 4 and split == [2 * b for b in whole]


# ----------------------------------------------------------------------------- DeepSeek's recomputation

def test_deepseek_recompute_drops_norms_up_projections_and_swiglus():
    """On a tiny DeepSeek-V3: the bytes dropped are those the norms', up-projections' and SwiGLU
    products' outputs held, and the backward re-runs their kernels: the up-projections' GEMMs
    (their FLOPs), every RMSNorm's six kernels and each silu with its product."""
    import tempfile

    from parsim.model.recompute_modules import recomputed_ops
    from tiny_deepseek import tiny_deepseek_graph

    with tempfile.TemporaryDirectory() as d:
        graph = tiny_deepseek_graph(d)
    moe = graph.layers[2]
    names = {op.name for op in recomputed_ops(moe)}
    assert {"self_attn.q_b_proj:mm", "self_attn.kv_b_proj:mm", "mlp.experts:mul#0", "mlp.shared_experts:mul",
            "post_attention_layernorm:mul#1", "self_attn.kv_a_layernorm:mul#1"} <= names
    assert not any("mlp.experts:mul#1" == n or "q_a_proj" in n or "attn:_scaled" in n for n in names)
    done = graph.with_recompute("deepseek").layers[2]
    dropped = sum(op.saved_bytes for op in recomputed_ops(moe)) / graph.extraction_batch
    assert done.recompute_bytes == pytest.approx(dropped) and done.saved_bytes == pytest.approx(moe.saved_bytes - dropped)
    part = done.recompute_part
    ups = [op for op in moe.ops if op.module in ("self_attn.q_b_proj", "self_attn.kv_b_proj")]
    assert part.fwd_flops == pytest.approx(sum(op.flops for op in ups) / graph.extraction_batch)
    ops = [k.op for k in part.kernels]
    assert ops.count("rsqrt") == 4 and ops.count("mm") == 2 and ops.count("silu") == 2   # 4 norms, experts + shared
    assert not done.recomputes_forward and graph.with_recompute("deepseek").recompute.value == "deepseek"


def test_deepseek_recompute_in_the_planner_for_experts_only(tiny):
    from parsim.hardware import load_cluster
    from parsim.model.recompute import Recompute
    from parsim.model.spec import load_model
    from parsim.search.enumerate import Constraints, variants

    cluster = load_cluster("dgx-h100:1x8")
    moe = {rc for _, _, rc, _, _ in variants(tiny, cluster, Constraints(tp=1))}
    dense = {rc for _, _, rc, _, _ in variants(load_model(os.path.join(ROOT, "examples", "gpt_tiny_local.yaml")),
                                                 cluster, Constraints(tp=1))}
    assert Recompute.DEEPSEEK in moe and Recompute.DEEPSEEK not in dense
