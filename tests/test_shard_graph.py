"""Per-operator strategies on a LayerGraph (SEMI_AUTO): Megatron's communication per layer,
Korthikanti's activation memory with tensor parallelism, per-device FLOPs and parameters,
recomputation, and the simulator pricing it all on the cluster."""

import fnmatch

import pytest
import torch

from parsim.cli import main
from parsim.cost.comm import collective_time_s
from parsim.cost.compute import AnalyticalCompute
from parsim.cost.layer import layer_time_s, tp_comm_time_s
from parsim.errors import InfeasibleError
from parsim.hardware import load_cluster
from parsim.model.extract import InputSpec, extract_graph
from parsim.model.spec import Training, load_model
from parsim.model.zoo.gpt import gpt
from parsim.plan import ParallelConfig
from parsim.shard.builtin import megatron
from parsim.shard.graph import select, shard_graph
from parsim.shard.ops import CONTRACTIONS, PRIMARY
from parsim.shard.ops import reshape_layout
from parsim.shard.prepare import per_device_graph
from parsim.shard.layout import Layout
from parsim.sim import simulate

B, S, H, A = 2, 256, 512, 8          # extraction batch, sequence, hidden, heads


@pytest.fixture(scope="module")
def gpt_fp16():
    with torch.device("meta"):
        # eager attention (not the zoo's fused default): Korthikanti et al.'s closed forms are eager's
        model = gpt(layers=2, hidden=H, heads=A, seq_len=S, vocab=1024, dropout=0.1, attention="eager")
    return extract_graph(model, InputSpec((S,), "int64"), dtype="fp16", batch=B)


def _steps(layer, phase):
    return sorted((step.kind, step.group_size, step.bytes_per_device) for ph, step, _ in layer.tp_comm if ph == phase)


@pytest.mark.parametrize("t", [2, 4, 8])
def test_megatron_layout_gives_two_all_reduces_each_way(gpt_fp16, t):
    block = shard_graph(gpt_fp16, megatron(t), t).layers[1]
    sbh = S * H * 2                                   # per sample, fp16
    assert _steps(block, "F") == [("AllReduce", t, sbh)] * 2
    assert _steps(block, "B") == [("AllReduce", t, sbh)] * 2
    assert _steps(block, "grad") == []                # norms replicated: no partial gradients


@pytest.mark.parametrize("t", [2, 4])
def test_sequence_parallel_gives_gathers_and_scatters_and_norm_gradient_mirrors(gpt_fp16, t):
    block = shard_graph(gpt_fp16, megatron(t, sequence_parallel=True), t).layers[1]
    sbh = S * H * 2
    # Korthikanti et al. 2022, Sec. 4.2.2: each all-reduce becomes an all-gather + a reduce-scatter
    assert _steps(block, "F") == [("AllGather", t, sbh)] * 2 + [("ReduceScatter", t, sbh)] * 2
    assert _steps(block, "B") == [("AllGather", t, sbh)] * 2 + [("ReduceScatter", t, sbh)] * 2
    # the two LayerNorms' weights see 1/t of the sequence: partial gradients, reduced per step
    assert _steps(block, "grad") == [("AllReduce", t, H * 2)] * 2


@pytest.mark.parametrize("t", [1, 2, 4, 8])
def test_activation_memory_matches_korthikanti_with_tensor_parallelism(gpt_fp16, t):
    """Korthikanti et al. 2022, Eq. 2 and Sec. 4.2.2: bytes per layer per sample
    s h (10 + 24/t + 5 a s / (h t)) with tensor parallelism, s h (34/t + 5 a s / (h t)) with
    sequence parallelism too."""
    full = gpt_fp16.layers[1].saved_bytes
    five = 5 * A * S / H
    assert full == pytest.approx(S * H * (34 + five), rel=0.01)
    if t == 1:
        return
    tp = shard_graph(gpt_fp16, megatron(t), t).layers[1]
    sp = shard_graph(gpt_fp16, megatron(t, sequence_parallel=True), t).layers[1]
    assert tp.saved_bytes == pytest.approx(S * H * (10 + 24 / t + five / t), rel=0.01)
    assert sp.saved_bytes == pytest.approx(S * H * (34 / t + five / t), rel=0.01)


def test_per_device_flops_and_parameters(gpt_fp16):
    t = 4
    g = shard_graph(gpt_fp16, megatron(t), t)
    block, full = g.layers[1], gpt_fp16.layers[1]
    assert block.fwd_flops == pytest.approx(full.fwd_flops / t)       # every FLOP is in a split contraction
    assert block.bwd_flops == pytest.approx(full.bwd_flops / t)
    # 12 h^2 weights split t ways, and the column-parallel biases with them (qkv 3h, fc1 4h: Megatron's
    # ColumnParallelLinear holds output_size_per_partition of its bias); the row-parallel biases (2h)
    # and the two norms' weights and biases (4h) stay whole
    assert block.param_count == 12 * H * H // t + 7 * H // t + 6 * H
    assert block.output_bytes == full.output_bytes                     # replicated between blocks
    assert g.layers[0].param_count == 1024 * H // t + S * H            # vocabulary-parallel embedding
    assert g.tp == t


def test_unsplittable_strategies_say_where_and_what_would(gpt_fp16):
    with pytest.raises(InfeasibleError, match=r"layers.0/fc1:addmm: MatMul: input 1 dimension 1 has size 2048"):
        shard_graph(gpt_fp16, {"layers.0/fc1": ((1, 1), (1, 3))}, 3)
    with pytest.raises(InfeasibleError, match=r"'layers.0/nope' names no operator"):
        shard_graph(gpt_fp16, {"layers.0/nope": ((1, 1), (1, 2))}, 2)


def test_unspecified_operators_follow_their_input_or_replicate(gpt_fp16):
    # Only fc1 split by columns: gelu follows (no communication); fc2, replicated, needs fc1's
    # output gathered forward, and its gradient is split back locally.
    g = shard_graph(gpt_fp16, {"layers.0/fc1": ((1, 1), (1, 2))}, 2)
    block = g.layers[1]
    assert [s[0] for s in _steps(block, "F")] == ["AllGather"]
    assert [s[0] for s in _steps(block, "B")] == ["AllReduce"]        # fc1's input gradient is partial


def test_reshape_layout_moves_the_split_to_the_dimension_it_divides():
    lay = Layout((4,), (0, -1, -1), (8, 32, 16))                     # [b*a, s, d] split on b*a
    assert reshape_layout(lay, (2, 4, 32, 16)).tensor_map == (-1, 0, -1, -1)   # 2 does not split 4 ways
    assert reshape_layout(Layout((2,), (0, -1, -1), (8, 32, 16)), (2, 4, 32, 16)).tensor_map == (0, -1, -1, -1)
    assert reshape_layout(Layout((2,), (-1, 0), (64, 64)), (2, 32, 64)).tensor_map == (-1, -1, 0)


def test_recomputation_trades_memory_for_a_second_forward(gpt_fp16):
    g = gpt_fp16.with_recompute()
    plain, rc = gpt_fp16.layers[1], g.layers[1]
    assert rc.saved_bytes == gpt_fp16.layers[0].output_bytes           # only the layer's input is kept
    assert rc.recompute_bytes == plain.saved_bytes
    compute = AnalyticalCompute(load_cluster("dgx-a100").device, "fp16")
    for kind in ("B", "I"):
        assert layer_time_s(compute, rc, kind, 4) == pytest.approx(
            compute.layer_time_s(plain, kind, 4) + compute.layer_time_s(plain, "F", 4))
    assert layer_time_s(compute, rc, "F", 4) == compute.layer_time_s(plain, "F", 4)


def test_simulator_prices_tensor_parallel_steps_on_the_group_link():
    cluster = load_cluster("dgx-a100:1x8")
    graph = per_device_graph(_tiny(), 4, "megatron")             # gpt-tiny has 4 heads
    block = graph.layers[1]
    b = 4
    sbh = b * block.tp_comm[0][1].bytes_per_device
    expected = 2 * collective_time_s(cluster, list(range(4)), sbh, "all_reduce")
    assert tp_comm_time_s(block, "F", b, cluster) == pytest.approx(expected)
    compute = AnalyticalCompute(cluster.device, "fp16")
    assert layer_time_s(compute, block, "F", b, cluster) == pytest.approx(compute.layer_time_s(block, "F", b) + expected)
    training = Training(global_batch_size=8, dtype="fp16", optimizer="adam")
    cfg = ParallelConfig(dp=1, pp=1, microbatches=2, bounds=(0, len(graph)), tp=4, tp_layout="megatron")
    est = simulate(_tiny(), training, cluster, cfg, compute)
    single = simulate(_tiny(), training, cluster, ParallelConfig(dp=1, pp=1, microbatches=2, bounds=(0, len(graph))),
                      compute)
    assert est.comm_bytes["group"] > 0 and "group" not in single.comm_bytes
    assert est.ranks[0].memory.params_bytes < single.ranks[0].memory.params_bytes / 2


_TINY = None


def _tiny():
    global _TINY
    if _TINY is None:
        with torch.device("meta"):
            model = gpt("gpt-tiny", attention="eager")       # eager's batched matmuls (not the fused default)
        _TINY = extract_graph(model, InputSpec((32,), "int64"), dtype="fp16")
    return _TINY


def test_model_yaml_shard_section_is_priced(capsys):
    spec = load_model("examples/mlp_semi_auto.yaml")
    assert spec.parallel.tp == 2 and spec.parallel.tp_layout == "model"
    assert main(["simulate", "examples/mlp_semi_auto.yaml", "--cluster", "local-cpu", "--pp", "1", "--dp", "1",
                 "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["config"]["tp"] == 2 and out["comm_bytes"]["group"] > 0
    g = per_device_graph(spec.graph, 2, "model", False, spec.shard)
    unit1, unit3, unit4 = (g.layers[g.index(n)] for n in ("1", "3", "4"))
    # a column split's dX is partial, but unit 1's input (the images, through a Flatten) takes no
    # gradient: no backward all-reduce leaves it (Megatron's "f" runs only where autograd needs dX)
    assert _steps(unit1, "B") == []
    later = per_device_graph(spec.graph, 2, "model", False, {"5": ((1, 1), (1, 2))})
    assert _steps(later.layers[later.index("5")], "B") == [("AllReduce", 2, 256 * 4)]   # after a weight: it does
    assert _steps(unit3, "F") == [] == _steps(unit3, "B")              # row split takes the columns as they are
    assert _steps(unit4, "F") == [("AllReduce", 2, 256 * 4)]          # the ReLU completes the row split's sum
    assert unit1.param_count == 3072 * 256 // 2 + 256 // 2          # the bias splits with the columns


def test_model_ops_lists_operator_ids_and_strategies(capsys):
    import json

    assert main(["model", "examples/mlp_semi_auto.yaml", "--ops", "--json"]) == 0
    rows = {r["op"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["1/:addmm"]["strategy"] == "((1, 1), (1, 2))" and rows["1/:addmm"]["kind"] == "MatMul"
    assert rows["2/:relu"]["strategy"] == ""


def test_plan_lists_the_picks_strategies_that_differ_from_data_parallelism(capsys):
    import json

    assert main(["plan", "examples/gpt_tiny_local.yaml", "--cluster", "local-cpu", "--tp", "2", "--tp-layout",
                 "megatron", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["plan"]["parallel"]["tp"] == 2
    rows = {r["op"]: r for r in out["strategies"]}
    assert rows["qkv:addmm"] == {"op": "qkv:addmm", "strategy": "((1, 1), (1, 2))", "layers": 4}
    assert rows["fc2:addmm"]["strategy"] == "((1, 2), (2, 1))"
    assert not any(r["op"].startswith("ln") for r in out["strategies"])      # norms stay replicated


def test_megatron_gpt_with_fused_attention_splits_it_by_heads():
    """attention: sdpa: the fused operator is split by heads like eager's two batched matmuls;
    the same collectives, the per-device FLOPs and attention's saved output halved at t=2."""
    import torch

    from parsim.model.extract import InputSpec, extract_graph
    from parsim.model.zoo import gpt
    from parsim.shard.builtin import strategies

    graphs = {}
    for att in ("eager", "sdpa"):
        with torch.device("meta"):
            m = gpt("gpt-tiny", dropout=0.0, attention=att)
        graphs[att] = extract_graph(m, InputSpec((32,), "int64"))
    sdpa = graphs["sdpa"]
    assert "layers.*/:_scaled_dot_product_flash_attention_for_cpu" in strategies("megatron", 2, sdpa)
    dev = {att: shard_graph(g, strategies("megatron", 2, g), 2) for att, g in graphs.items()}
    comm = {att: [(ph, s.kind, s.group_size, s.bytes_per_device) for ph, s, _ in d.layers[1].tp_comm]
            for att, d in dev.items()}
    assert comm["sdpa"] == comm["eager"]
    assert dev["sdpa"].layers[1].fwd_flops == sdpa.layers[1].fwd_flops / 2
    attn = next(op for op in sdpa.layers[1].ops if op.kind == "Attention")
    assert attn.causal and attn.flops == 4 * 2 * 4 * 32 * 32 * 16 / 2        # b=2, a=4, s=32, d=16


def test_edges_scaled_by_signature_equal_edges_worked_out(monkeypatch):
    """On one device dimension graph.edge_steps works each (device matrices, tensor maps,
    partials) signature out once and scales its steps' bytes by the tensor's elements; every
    edge of the auto layout's cost graphs of ResNet-50 and GPT-3 (tp 2, 4, 8) equals
    redistribute.edge worked out for its own shape, and signatures repeat (else nothing is saved)."""
    from parsim.shard import auto, ops as sg
    from parsim.shard.redistribute import edge
    checked = []

    def compare(src, dst, dst_grad, eb, memo):
        got = scaled(src, dst, dst_grad, eb, memo)
        assert tuple(map(list, got)) == tuple(map(list, edge(src, dst, dst_grad, eb))), (src, dst, dst_grad)
        checked.append(src.shape)
        return got

    scaled = sg._edge_by_signature
    monkeypatch.setattr(sg, "_edge_by_signature", compare)
    memo = auto.StrategySearches()
    for path, ts in (("examples/resnet50_imagenet.yaml", (2, 4, 8)), ("examples/gpt3_175b.yaml", (2, 8))):
        spec = load_model(path)
        cluster = load_cluster("dgx-a100:1x8").for_dtype(spec.training.dtype)
        for t in ts:
            auto.cost_graph(spec.graph, t, cluster, spec.training.dtype, spec.training.optimizer, 1, memo=memo)
    signatures = [key for key in memo.edges if key[0] == "signature"]
    assert len(checked) > 1000 and len(signatures) < len(checked) / 3


def test_a_pattern_picks_the_operators_its_rule_names_in_order(gpt_fp16):
    """select's rule, asked of each operator in turn: a pattern with ':' names "<layer>/<op>"; one
    without names a primary operator by "<layer>/<module>" (its layer's name where the layer is
    the module) and a contraction by its layer's name too; a later pattern's strategy replaces an
    earlier one's where both pick an operator, which keeps its first place."""
    layers = gpt_fp16.layers

    def picked(pattern):
        out = []
        for li, layer in enumerate(layers):
            for oi, op in enumerate(layer.ops):
                where = f"{layer.name}/{op.module}" if op.module else layer.name
                if (fnmatch.fnmatchcase(f"{layer.name}/{op.name}", pattern) if ":" in pattern else
                        op.kind in PRIMARY and fnmatch.fnmatchcase(where, pattern)
                        or op.kind in CONTRACTIONS and fnmatch.fnmatchcase(layer.name, pattern)):
                    out.append((li, oi))
        return out
    names = [f"{layer.name}/{op.name}" for layer in layers for op in layer.ops]
    patterns = {"*": ((1,),), "?*/ln*": ((2,),), f"?{names[5]}": ((3,),), "?*:*bmm*": ((4,),),
                "?layers.1": ((5,),), "?*/fc?": ((6,),), "?nothing.here": ((7,),)}
    expected = {}
    for key, strategy in patterns.items():
        for at in picked(key.lstrip("?")):
            expected[at] = (strategy, key.startswith("?"))
    got = select(gpt_fp16, patterns)
    assert list(got.items()) == list(expected.items())
    assert {s for s, _ in got.values()} == {((k,),) for k in range(1, 7)}      # every pattern but the last picks
    # a contraction of a module picked by its layer's name alone (layers.1/qkv:addmm)
    assert any(layers[li].ops[oi].kind in CONTRACTIONS and layers[li].ops[oi].module and s == ((5,),)
               for (li, oi), (s, _) in got.items())
    with pytest.raises(InfeasibleError, match="names no operator"):
        select(gpt_fp16, {"nothing.here": ((1,),)})
