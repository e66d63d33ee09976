"""The strategy search (AUTO_PARALLEL): MindSpore's eliminations with Pareto frontiers equal an
exhaustive search on random small graphs, and the default thinning stays close to them; on a
GPT it finds Megatron's layout by itself."""

import random

import pytest

from parsim.hardware import load_cluster
from parsim.model.attention import FUSED_OP
from parsim.model.spec import load_model
from parsim.shard.auto import auto_strategies, candidates
from parsim.shard.graph import shard_graph
from parsim.shard.prepare import ShardMemo, per_device_graph
from parsim.shard.search import CostGraph, Point, exhaustive, pareto, search


def _random_graph(rng: random.Random, n: int, fan_in: tuple[int, ...], strategies: int = 3) -> CostGraph:
    g = CostGraph([[(rng.uniform(0, 10), rng.uniform(0, 10)) for _ in range(rng.randint(1, strategies))]
                   for _ in range(n)])
    for v in range(1, n):
        for u in rng.sample(range(v), min(v, rng.choice(fan_in))):
            g.add_edge(u, v, [[rng.uniform(0, 5) for _ in g.node_costs[v]] for _ in g.node_costs[u]])
    return g


@pytest.mark.parametrize("fan_in", [(1,), (1, 1, 2), (1, 2, 3)], ids=["trees", "sparse", "dense"])
def test_search_equals_exhaustive_on_random_small_graphs(fan_in):
    rng = random.Random(len(fan_in))
    used = set()
    for _ in range(150):
        g = _random_graph(rng, rng.randint(2, 7), fan_in)
        cap = rng.choice([None, rng.uniform(5, 40)])
        ref, got = exhaustive(g, cap), search(g, cap, keep=None)
        if ref is None:
            assert got is None
            continue
        assert got.time_s == pytest.approx(ref[1])
        assert cap is None or got.mem_bytes <= cap
        used |= {k for k, v in got.eliminations.items() if v}
    expected = {"merge", "contract", "star"} if fan_in == (1,) else {"operator", "triangle", "edge", "merge", "contract"}
    assert expected <= used


def test_thinned_search_against_exact():
    """The default thinning (keep=16) against the exact search (keep=None, equal to exhaustive
    above), and a harsher keep=4 so that thinning surely bites.  Tolerances, from measurement:
    - no cap: equal, always (each frontier's fastest point survives thinning);
    - a result marked exact (no frontier outgrew keep, or no cap): equal;
    - otherwise within 2% at keep=16 (measured: equal on these 120 graphs; at worst 1.1% on
      300 graphs of 6-14 nodes) and within 10% at keep=4 (measured: at worst 7.8% here)."""
    for keep, tolerance in ((16, 0.02), (4, 0.10)):
        rng = random.Random(1)
        thinned = exact_under_cap = 0
        for _ in range(120):
            g = _random_graph(rng, rng.randint(6, 10), rng.choice([(1,), (1, 1, 2), (1, 2, 3)]), strategies=4)
            cap = rng.choice([None, rng.uniform(15, 60)])
            ref, got = search(g, cap, keep=None), search(g, cap, keep=keep)
            if ref is None:
                assert got is None
                continue
            assert got is not None and (cap is None or got.mem_bytes <= cap)   # the smallest point survives too
            if cap is None or got.exact:
                exact_under_cap += cap is not None and got.exact
                assert got.time_s == pytest.approx(ref.time_s, rel=1e-12)
            else:
                thinned += 1
                assert ref.time_s <= got.time_s <= ref.time_s * (1 + tolerance)
        assert thinned > 0 and exact_under_cap > 0     # both kinds occur; "exact" says which is which


@pytest.mark.parametrize("keep", [2, 4, 16])
def test_capped_search_in_numpy_equals_the_list_search(keep, monkeypatch):
    """Under a cap the frontiers are numpy batches (search_np.capped); the list search
    (search.pareto on Points) is the reference: the same strategies, time, memory, eliminations
    and exactness, thinned or not, fitting or not."""
    from parsim.shard import search as module
    from parsim.shard.search_np import capped, fastest
    rng = random.Random(keep)
    graphs = [(_random_graph(rng, rng.randint(2, 12), rng.choice([(1,), (1, 1, 2), (1, 2, 3)]),
                             strategies=rng.choice([2, 4, 6])), rng.uniform(3, 60)) for _ in range(100)]
    fast = [capped(g, cap, keep) for g, cap in graphs]
    monkeypatch.setattr(module, "capped", lambda *args: None)
    kinds = {"thinned": 0, "exact": 0, "none fits": 0}
    for (g, cap), got in zip(graphs, fast):
        ref = search(g, cap, keep=keep)
        if got is None and fastest(g) is None:
            continue                        # an irreducible rest: the list search alone handles it
        assert got == ref
        kinds["none fits" if ref is None else "exact" if ref.exact else "thinned"] += 1
    assert min(kinds.values()) > 0


def _renumbered(rng: random.Random, g: CostGraph) -> CostGraph:
    """A graph of ``g``'s shape (nodes, strategies, edges) with numbers of its own, as one model's
    cost graphs at two micro-batch sizes are."""
    out = CostGraph([[(rng.uniform(0, 10), rng.uniform(0, 10)) for _ in costs] for costs in g.node_costs])
    out.edge_costs = {k: [[rng.uniform(0, 5) for _ in row] for row in cost] for k, cost in g.edge_costs.items()}
    return out


@pytest.mark.parametrize("keep", [2, 4, 16])
def test_capped_search_of_several_graphs_at_once_gives_each_its_own_answer(keep):
    """search_np.capped_many (the planner's searches under one cap at several micro-batch sizes, in
    one pass): each graph's answer is capped's on it alone, strategies, time, memory, eliminations
    and exactness, in batches whose graphs differ in whether they thin and whether anything fits
    (each graph's thinning is its own); graphs of different shapes are refused."""
    from parsim.shard.search_np import capped, capped_many
    rng = random.Random(100 + keep)
    mixed = 0
    for _ in range(60):
        base = _random_graph(rng, rng.randint(2, 12), rng.choice([(1,), (1, 1, 2)]), strategies=rng.choice([2, 4, 6]))
        graphs = [base] + [_renumbered(rng, base) for _ in range(rng.randint(1, 3))]
        cap = rng.uniform(3, 60)
        alone = [capped(g, cap, keep) for g in graphs]
        assert capped_many(graphs, cap, keep) == alone
        mixed += len({None if r is None else r.exact for r in alone}) > 1
    assert mixed >= 10
    other = _random_graph(rng, 5, (1,), strategies=3)
    with pytest.raises(ValueError, match="differ in shape"):
        capped_many([other, _random_graph(rng, 6, (1,), strategies=3)], 30.0, keep)


def test_searching_sizes_under_a_cap_at_once_gives_what_each_search_gives():
    """The planner's searches under one cap (auto.search_sizes with caps: those sizes whose answer
    without a cap misses it, in one pass): the memo then holds them, and auto_strategies answers
    each size as it does alone.  At 108 MB, GPT small's sizes 14 and 16 miss the cap without one
    and fit it with one; 12 fits it without (no search under the cap)."""
    from parsim.shard import auto
    spec = load_model("examples/gpt_small_local.yaml")
    cl = load_cluster("dgx-a100:1x8").for_dtype(spec.training.dtype)
    g, tr, cap, sizes = spec.graph, spec.training, 108e6, [12, 14, 16]
    memo = auto.StrategySearches()
    auto.search_sizes(g, 2, cl, tr.dtype, tr.optimizer, sizes, memo=memo, caps={(b, cap) for b in sizes})
    assert sorted(k[5] for k in memo.searched if len(k) == 8) == [14, 16]
    batched = [auto.auto_strategies(g, 2, cl, tr.dtype, tr.optimizer, b, cap_bytes=cap, memo=memo) for b in sizes]
    assert batched == [auto.auto_strategies(g, 2, cl, tr.dtype, tr.optimizer, b, cap_bytes=cap) for b in sizes]
    assert all(result.mem_bytes <= cap for _, result in batched)
    # what the planner asks before searching ahead (auto.answered): each size answered from the memo
    # under the cap, and a size nothing searched, or a cap whose search has not run, not
    assert all(auto.answered(g, 2, cl, tr.dtype, tr.optimizer, b, cap, memo=memo) for b in sizes)
    assert not auto.answered(g, 2, cl, tr.dtype, tr.optimizer, 8, cap, memo=memo)
    fresh = auto.StrategySearches()
    auto.search_sizes(g, 2, cl, tr.dtype, tr.optimizer, sizes, memo=fresh)        # without a cap only
    assert auto.answered(g, 2, cl, tr.dtype, tr.optimizer, 12, cap, memo=fresh)       # fits the cap as it is
    assert not auto.answered(g, 2, cl, tr.dtype, tr.optimizer, 14, cap, memo=fresh)   # misses it: a search is due


@pytest.mark.parametrize("path, cluster, t, sizes", [
    ("examples/gpt_small_local.yaml", "dgx-a100:1x8", 2, [1, 4, 16, 64]),     # 3 different answers
    ("examples/resnet50_cifar10.yaml", "local-cpu:1x2", 2, [1, 8, 64, 512]),
])
def test_searching_several_sizes_at_once_gives_each_its_own_answer(path, cluster, t, sizes):
    """The planner searches the auto layout at several micro-batch sizes in one pass
    (auto.search_sizes): cost_graphs equals cost_graph at each size, fastest_many equals fastest
    on each graph alone (strategies, time and memory, float for float), and the cache then holds
    what auto_strategies finds alone.  Graphs of different shapes are refused."""
    from parsim.shard import auto
    from parsim.shard.search_np import fastest, fastest_many
    spec = load_model(path)
    cl = load_cluster(cluster).for_dtype(spec.training.dtype)
    g, tr = spec.graph, spec.training
    together = auto.cost_graphs(g, t, cl, tr.dtype, tr.optimizer, sizes)
    for size, built in zip(sizes, together):
        alone = auto.cost_graph(g, t, cl, tr.dtype, tr.optimizer, size)
        assert built[0].node_costs == alone[0].node_costs and built[0].edge_costs == alone[0].edge_costs
        assert built[1:] == alone[1:]
    graphs = [built[0] for built in together]
    many = fastest_many(graphs)
    assert many == [fastest(x) for x in graphs]
    if path.startswith("examples/gpt"):
        # the columns do not leak into each other: several sizes, several answers (3 under the
        # shipped dgx-a100; their count follows the profile's numbers)
        assert len({r.strategies for r in many}) >= 2
    with pytest.raises(ValueError, match="differ in shape"):
        fastest_many([graphs[0], auto.cost_graph(g, 2 * t, load_cluster("dgx-a100:1x8"), tr.dtype, tr.optimizer, 1)[0]])

    memo = auto.StrategySearches()
    auto.search_sizes(g, t, cl, tr.dtype, tr.optimizer, sizes, memo=memo)
    assert len(memo.searched) == len(sizes)
    batched = [auto.auto_strategies(g, t, cl, tr.dtype, tr.optimizer, size, memo=memo) for size in sizes]
    assert batched == [auto.auto_strategies(g, t, cl, tr.dtype, tr.optimizer, size) for size in sizes]


def test_pareto_keeps_what_no_point_beats_in_both():
    pts = [Point(1, 5), Point(2, 3), Point(3, 4), Point(4, 1), Point(1, 6)]
    assert [(p.time_s, p.mem_bytes) for p in pareto(pts)] == [(1, 5), (2, 3), (4, 1)]
    assert [(p.time_s, p.mem_bytes) for p in pareto(pts, cap=4)] == [(2, 3), (4, 1)]


def test_a_memory_cap_trades_time_for_memory():
    g = CostGraph([[(1.0, 10.0), (2.0, 1.0)], [(1.0, 10.0), (2.0, 1.0)]])
    g.add_edge(0, 1, [[0.0, 5.0], [5.0, 0.0]])
    assert search(g).strategies == (0, 0)
    assert search(g, cap=12.0).strategies == (1, 1)      # 0,1 fits too but pays the edge
    assert search(g, cap=1.5) is None


def test_auto_layout_on_a_gpt_rediscovers_megatron():
    spec = load_model("examples/gpt3_175b.yaml")
    chosen, result = auto_strategies(spec.graph, 8, load_cluster("dgx-a100:1x8"), "fp16", "adam")
    block = {k.split("/", 1)[1]: v for k, v in chosen.items() if k.startswith("layers.5/")}
    assert block["qkv:addmm"] == block["fc1:addmm"] == ((1, 1), (1, 8))          # column splits
    assert block["proj:addmm"] == block["fc2:addmm"] == ((1, 8), (8, 1))         # row splits
    # heads: the fused attention (the zoo GPT's default) splits Q, K and V by head, as eager's
    # batched matmuls split their batch x heads
    assert block[f":{FUSED_OP}"] == ((1, 8, 1, 1),) * 3
    assert block["ln1:native_layer_norm"] == ((1, 8, 1),)                         # sequence parallel
    assert sum(result.eliminations.values()) > 1000
    per_device = shard_graph(spec.graph, chosen, 8)
    assert per_device.layers[5].fwd_flops == pytest.approx(spec.graph.layers[5].fwd_flops / 8)


def test_auto_layout_follows_the_microbatch_size_and_the_memory_cap(tmp_path):
    """On gloo (110 us per message) a micro-batch of 1 is cheaper replicated; of 256 samples the
    splits pay; a cap below the replicated layout's memory forces splits at any size."""
    path = tmp_path / "gpt.yaml"
    path.write_text("schema_version: 1\nmodel: gpt\nargs: {preset: gpt-tiny}\n"
                    "training: {global_batch_size: 16, dtype: fp16, optimizer: adam}\n")
    spec = load_model(path)
    g, cluster, training = spec.graph, load_cluster("local-cpu"), spec.training
    memo = ShardMemo()                 # one run's: the same settings give the same graph

    def per_device(microbatch, memory_bytes=None):
        return per_device_graph(g, 2, "auto", False, None, cluster, training, microbatch, memory_bytes, memo=memo)
    one, many = per_device(1), per_device(256)
    assert one.fwd_flops == pytest.approx(g.fwd_flops) and one.param_count == g.param_count   # replicated
    assert many.fwd_flops < 0.75 * g.fwd_flops
    replicated_bytes = auto_strategies(g, 2, cluster, training.dtype, training.optimizer, 1)[1].mem_bytes
    capped = per_device(1, 0.7 * replicated_bytes)
    assert capped.param_count < 0.8 * g.param_count
    assert per_device(1, 10 * replicated_bytes) is one         # a cap the free answer fits changes nothing


def test_auto_layout_without_operators_is_infeasible_not_a_crash():
    from parsim.errors import InfeasibleError
    from parsim.model.graph import Layer, LayerGraph

    g = LayerGraph("bare", (Layer("a", 1.0, 2.0, 1, 2, 1.0, 1.0), Layer("b", 1.0, 2.0, 1, 2, 1.0, 1.0)))
    with pytest.raises(InfeasibleError, match="no operator view"):
        auto_strategies(g, 2, load_cluster("local-cpu"))


def test_candidates_include_replication_and_megatron_splits():
    spec = load_model("examples/gpt_tiny_local.yaml")
    fc1 = next(op for op in spec.graph.layers[1].ops if op.name == "fc1:addmm")
    c = candidates(fc1, 2)
    assert c[0] == ((1, 1), (1, 1)) and ((1, 1), (1, 2)) in c and ((1, 2), (2, 1)) in c


def test_auto_search_handles_a_llama_block_with_gqa_and_swiglu(tmp_path):
    """A Llama-style block (32 heads over 2 KV heads, SwiGLU, fused attention) on t=8 > 2 KV heads:
    Megatron's strategies for it are among the candidates (k/v projections split by the KV-head
    count, gate/up by columns, attention by heads with each KV head on t/2 devices); the search
    splits attention by heads with K and V split 2 ways, splits gate and up alike, runs no more
    FLOPs per device than Megatron, and its layout shards the graph into valid collectives."""
    import yaml

    from parsim.hardware import load_cluster
    from parsim.model.spec import load_model
    from parsim.shard.auto import candidates, kv_head_paths
    from parsim.shard.builtin import strategies
    from parsim.shard.graph import collective_counts, select, shard_graph

    cfg = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 2,
           "num_attention_heads": 32, "num_key_value_heads": 2, "vocab_size": 8192, "tie_word_embeddings": False}
    p = tmp_path / "llama.yaml"
    p.write_text(yaml.safe_dump({"schema_version": 1, "hf": cfg, "args": {"seq_len": 8192},
                                 "training": {"global_batch_size": 8, "dtype": "bf16", "optimizer": "adam"}}))
    g, t = load_model(p).graph, 8
    megatron = strategies("megatron", t, g)
    layer = g.layers[2]
    kv = kv_head_paths(layer.ops, t)
    for (li, oi), (strategy, _) in select(g, megatron).items():
        if li == 2:
            assert strategy in candidates(layer.ops[oi], t, kv.get(oi, 0)), layer.ops[oi].name
    auto, _ = auto_strategies(g, t, load_cluster("dgx-h100:1x8"), "bf16", "adam", 1)
    mine = {k.split("/", 1)[1]: v for k, v in auto.items() if k.startswith("layers.1/")}
    assert mine["self_attn:_scaled_dot_product_flash_attention_for_cpu"] == ((1, 8, 1, 1), (1, 2, 1, 1), (1, 2, 1, 1))
    assert mine["mlp.gate_proj:mm"] == mine["mlp.up_proj:mm"] != ((1, 1), (1, 1))
    a, m = shard_graph(g, auto, t), shard_graph(g, megatron, t)
    assert a.layers[2].fwd_flops <= m.layers[2].fwd_flops
    assert all(t % step.group_size == 0 for layer in a.layers for _, step, _ in layer.tp_comm)
    assert collective_counts(a, 1)


def test_collective_counts_per_pipeline_rank_are_its_stages_layers():
    """Megatron's GPT layout at tp=2, pp=2 split embed..layers.1 | layers.2..head, m=4: per micro-batch
    the embedding's all-reduce and two blocks' two forward and two backward all-reduces on rank 0;
    two blocks', the head's backward all-reduce and the vocabulary-parallel loss's three
    all-reduces on rank 1 (no gather of the logits).  No collective at the boundary: the ranks'
    counts add up to the whole graph's."""
    from collections import Counter

    from parsim.plan import ParallelConfig
    from parsim.shard.graph import collective_counts

    graph = per_device_graph(load_model("examples/gpt_tiny_local.yaml").graph, 2, "megatron")
    cfg = ParallelConfig(1, 2, 4, "1f1b", 1, (0, 3, 6), tp=2, tp_layout="megatron")
    ranks = [collective_counts(graph, 4, cfg.rank_layers(r)) for r in range(2)]
    assert ranks == [{"all_reduce": 4 * (1 + 2 * 4)}, {"all_reduce": 4 * (2 * 4 + 1 + 3)}]
    assert Counter(ranks[0]) + Counter(ranks[1]) == Counter(collective_counts(graph, 4))
