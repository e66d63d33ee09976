"""Expert parallelism (ep) in the simulator, the memory model and the planner (parsim.cost.experts):
closed forms computed by hand from the configuration (examples/moe_tiny_local.yaml: 2 MoE layers,
hidden 64, 8 experts of 96, top-2, 16 tokens, fp32, Adam), the constraints refused in one line,
every schedule with MoE stages, and dense models unchanged."""

import os
from dataclasses import replace

import pytest

from parsim.errors import InfeasibleError
from parsim.plan import ParallelConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "examples", "moe_tiny_local.yaml")
DENSE = os.path.join(ROOT, "examples", "gpt_tiny_local.yaml")

H, I, E, K, SEQ, LAYERS = 64, 96, 8, 2, 16, 2           # examples/moe_tiny_local/config.json
ROUTED = 3 * H * I * E                                  # one layer's routed experts: gate, up, down


@pytest.fixture(scope="module")
def tiny():
    from parsim.model.spec import load_model
    return load_model(TINY)


def _sim(spec, cluster, batch=None, imbalance=None, **kw):
    from parsim.hardware import load_cluster
    from parsim.sim import simulate

    training = spec.training
    if batch:
        training = replace(training, global_batch_size=batch)
    if imbalance is not None:
        training = replace(training, moe_imbalance=imbalance)
    kw.setdefault("bounds", (0, len(spec.graph)) if kw.get("pp", 1) == 1 else None)
    if kw["bounds"] is None:
        n, stages = len(spec.graph), kw["pp"] * kw.get("chunks", 1)
        kw["bounds"] = tuple(round(i * n / stages) for i in range(stages + 1))
    kw.setdefault("pp", 1)
    kw.setdefault("microbatches", 1)
    return simulate(spec.graph, training, load_cluster(cluster), ParallelConfig(**kw), keep_timeline=False)


def _alpha_beta(cluster, link_class):
    from parsim.cost.comm import _alpha_beta
    return _alpha_beta(cluster, link_class, "all_to_all")


# ----------------------------------------------------------------------------- validation

@pytest.mark.parametrize("kw, says", [
    (dict(dp=4, ep=3), "ep=3 does not divide dp x cp = 4 x 1 = 4"),
    (dict(dp=16, ep=16), "do not split over 16 ranks: choose ep dividing 8"),
    (dict(dp=2, tp=2, tp_layout="megatron", ep=2), "which Megatron runs beside tensor parallelism with sequence "
                                                   "parallelism only"),
    (dict(dp=2, tp=2, tp_layout="megatron-sp", ep=4, etp=2), "ep=4 x etp 2 does not divide tp x cp x dp = 2 x 1 x 2"),
    (dict(dp=4, tp=2, tp_layout="megatron-sp", ep=2, etp=4), "etp=4: parsim prices an expert tensor-parallel size of 1"),
])
def test_simulate_refuses_ep_it_cannot_price_in_one_line(tiny, kw, says):
    with pytest.raises(InfeasibleError) as e:
        _sim(tiny, "dgx-h100:2x8", batch=16, **kw)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_simulate_refuses_ep_on_a_dense_model():
    from parsim.model.spec import load_model

    spec = load_model(DENSE)
    with pytest.raises(InfeasibleError, match="has no mixture-of-experts layer to shard; use ep=1"):
        _sim(spec, "dgx-h100:1x8", dp=2, ep=2, batch=2 * spec.training.global_batch_size)


def test_model_yaml_moe_imbalance_is_checked(tmp_path):
    import yaml

    from parsim.errors import InputError
    from parsim.model.spec import load_model

    base = yaml.safe_load(open(TINY))
    base["hf"] = os.path.join(ROOT, "examples", base["hf"])
    for training, says in (({"moe_imbalance": 0.5}, "training.moe_imbalance: the busiest"),):
        p = tmp_path / "m.yaml"
        p.write_text(yaml.safe_dump({**base, "training": {**base["training"], **training}}))
        with pytest.raises(InputError, match=says):
            load_model(p)
    p = tmp_path / "m.yaml"
    p.write_text(yaml.safe_dump({**base, "parallel": {"ep": 3}}))
    with pytest.raises(InputError, match="parallel.ep: 3 does not divide"):
        load_model(p)
    p.write_text(yaml.safe_dump({**base, "training": {**base["training"], "moe_imbalance": 1.5}}))
    assert load_model(p).training.moe_imbalance == 1.5


# ----------------------------------------------------------------------------- all-to-all

def test_all_to_all_on_one_node_closed_form(tiny):
    """dp=8, ep=8 on one DGX H100: per MoE layer and micro-batch 4 all-to-alls (dispatch and
    combine, forward and backward) of T k h x 4 bytes, each (n-1) a + (n-1)/n S x 1.25 / B, and
    in the forward one exchange of the E int64 split sizes, (n-1) a + (n-1)/n 8 E / B."""
    from parsim.hardware import load_cluster

    est = _sim(tiny, "dgx-h100:1x8", dp=8, ep=8)
    a, b = _alpha_beta(load_cluster("dgx-h100:1x8").for_dtype("fp32"), "group")
    s = SEQ * K * H * 4                                   # one sample per micro-batch
    one = 7 * a + 7 / 8 * s * 1.25 / b
    counts = 7 * a + 7 / 8 * 8 * E / b
    assert est.ranks[0].ep_comm_s == pytest.approx(LAYERS * (4 * one + counts))
    assert est.ep_a2a_bytes == (LAYERS * 4 * s,)          # what the executor counts
    # exposed: in exposed communication, not in compute; the step still adds up
    r = est.ranks[0]
    assert r.exposed_comm_s >= r.ep_comm_s
    assert r.busy_s + r.exposed_comm_s + r.bubble_s + r.sync_wait_s + r.input_s == pytest.approx(est.step_time_s)


def test_all_to_all_across_nodes_closed_form(tiny):
    """dp=8, pp=2 pp-inner on 2 DGX H100 (one network tier, no rails): a stage's replicas are ranks
    0, 2, ..., 14, 4 on each node, so its ep=8 group spans both: (n-k)/n of S x 1.25 leaves the
    node over the NIC, the slower part, with k - 1 NVLink and n - k network steps of latency."""
    from parsim.hardware import load_cluster

    c = load_cluster("dgx-h100:2x8").for_dtype("fp32")
    a_in, b_in = _alpha_beta(c, "group")
    a_out, b_out = _alpha_beta(c, "network")
    est = _sim(tiny, "dgx-h100:2x8", batch=16, dp=8, pp=2, ep=8, placement="pp-inner", microbatches=2)
    s = SEQ * K * H * 4                                   # one sample per micro-batch, 2 micro-batches
    n, k = 8, 4
    assert (n - k) / n * s * 1.25 / b_out > (k - 1) / n * s * 1.25 / b_in
    one = (n - k) / n * s * 1.25 / b_out + (k - 1) * a_in + (n - k) * a_out
    counts = max((k - 1) / n * 8 * E / b_in, (n - k) / n * 8 * E / b_out) + (k - 1) * a_in + (n - k) * a_out
    bounds = est.config["bounds"]
    for r in est.ranks:
        moe = sum(1 for i in range(bounds[r.rank], bounds[r.rank + 1]) if tiny.graph.layers[i].experts is not None)
        assert r.ep_comm_s == pytest.approx(2 * moe * (4 * one + counts))
    assert sum(r.ep_comm_s for r in est.ranks) > 0


def test_full_recompute_runs_the_forward_all_to_alls_again(tiny):
    plain = _sim(tiny, "dgx-h100:1x8", dp=8, ep=8)
    again = _sim(tiny, "dgx-h100:1x8", dp=8, ep=8, recompute="full")
    # six token all-to-alls and two split-size exchanges per layer and micro-batch, where there were four and one
    from parsim.cost.comm import all_to_all_time_s
    from parsim.hardware import load_cluster

    c = load_cluster("dgx-h100:1x8").for_dtype("fp32")
    counts = all_to_all_time_s(c, list(range(8)), 8 * E)
    assert again.ranks[0].ep_comm_s - 2 * LAYERS * counts == \
        pytest.approx((plain.ranks[0].ep_comm_s - LAYERS * counts) * 6 / 4)
    assert again.ep_a2a_bytes[0] == pytest.approx(plain.ep_a2a_bytes[0] * 6 / 4)


# ----------------------------------------------------------------------------- compute

def test_routed_flops_grow_by_the_imbalance_and_gemms_shrink_groups(tiny):
    """The busiest rank multiplies T k x imbalance routed tokens: its forward FLOPs per sample grow
    by (imbalance - 1) x 2 x T k x 3 h I; each routed grouped GEMM has E/ep groups of
    c = T ep k / E x imbalance rows."""
    from parsim.shard.prepare import per_device_graph

    training = replace(tiny.training, moe_imbalance=1.5)
    g1 = tiny.graph
    g4 = per_device_graph(g1, ep=4, training=training)
    assert g4.ep == 4 and g4.moe_imbalance == 1.5
    for a, b in zip(g1.layers, g4.layers):
        if a.experts is None:
            assert b is a
            continue
        assert b.fwd_flops - a.fwd_flops == pytest.approx(0.5 * 2 * SEQ * K * 3 * H * I)
        assert b.bwd_flops - a.bwd_flops == pytest.approx(0.5 * 2 * 2 * SEQ * K * 3 * H * I)
        routed = [k for k in b.kernels if k.klass == "matmul" and k.gemm and k.gemm[3] == (E / 4, 0.0)]
        assert len(routed) == 6                          # gate+up, down: forward, data and weight gradients
        c = SEQ * 4 * K / E * 1.5
        for k in routed:
            m, n, kk, groups = k.gemm_at(1)
            assert groups == E / 4 and (kk if k.phase == "W" else m) == pytest.approx(c)
        assert b.param_count == a.param_count - ROUTED + ROUTED // 4


def test_ep_1_leaves_a_moe_model_as_it_was(tiny):
    from parsim.shard.prepare import per_device_graph

    assert per_device_graph(tiny.graph, ep=1, training=tiny.training) is tiny.graph
    one = _sim(tiny, "dgx-h100:1x8", dp=8)
    assert one.ep_a2a_bytes == () and all(r.ep_comm_s == 0 for r in one.ranks)


# ----------------------------------------------------------------------------- memory

@pytest.mark.parametrize("zero", [0, 1])
def test_memory_per_rank_closed_form(tiny, zero):
    """dp=8, ep=4 (expert_dp=2), fp32 Adam (4 + 4 + 8 bytes a parameter): a rank holds the dense
    parameters and a quarter of the routed experts; ZeRO-1 shards the dense optimizer state over
    8 ranks, the experts' over 2."""
    est = _sim(tiny, "dgx-h100:1x8", dp=8, ep=4, zero=zero)
    total = tiny.graph.param_count
    dense, experts = total - LAYERS * ROUTED, LAYERS * ROUTED // 4
    mem = est.ranks[0].memory
    assert mem.params_bytes == 4 * (dense + experts)
    assert mem.grads_bytes == 4 * (dense + experts)
    assert mem.optimizer_bytes == (8 * dense + 8 * experts if zero == 0 else 8 * dense / 8 + 8 * experts / 2)


def test_routed_activations_follow_the_routed_tokens(tiny):
    """At imbalance 1 a rank's experts keep as much as at ep = 1 (the same T k routed tokens); at
    imbalance x the routed path's activations grow by (x - 1) of their own, the rest unchanged."""
    base = _sim(tiny, "dgx-h100:1x8", dp=8).ranks[0].memory.activations_bytes
    one = _sim(tiny, "dgx-h100:1x8", dp=8, ep=4, imbalance=1.0).ranks[0].memory.activations_bytes
    two = _sim(tiny, "dgx-h100:1x8", dp=8, ep=4, imbalance=2.0).ranks[0].memory.activations_bytes
    three = _sim(tiny, "dgx-h100:1x8", dp=8, ep=4, imbalance=3.0).ranks[0].memory.activations_bytes
    assert one == pytest.approx(base)
    assert two > one and three - two == pytest.approx(two - one)
    # what autograd keeps of the routed path per token slot (T k of them a sample): the gate and up
    # outputs (2I), SiLU's (I), their product (I, the down projection's input) and the down output
    # (h, for the routing weight's gradient), in fp32; the combine (gathered back, summed over the
    # k slots, as transformers' grouped_mm experts) keeps none; imbalance 2 adds one more of each
    assert two - one == LAYERS * SEQ * K * (4 * I + H) * 4


# ----------------------------------------------------------------------------- gradient sync

def test_expert_gradients_go_over_the_expert_dp_group(tiny):
    est = _sim(tiny, "dgx-h100:1x8", dp=8, ep=2)
    total = tiny.graph.param_count
    assert sum(est.grad_buckets_bytes[0]) == 4 * (total - LAYERS * ROUTED)       # dense: over dp=8
    assert sum(est.expert_grad_buckets_bytes[0]) == 4 * LAYERS * ROUTED / 2      # experts: 1/ep, over 4
    full = _sim(tiny, "dgx-h100:1x8", dp=8, ep=8)                                # expert_dp = 1: none
    assert full.expert_grad_buckets_bytes == ((),)


# ----------------------------------------------------------------------------- schedules

@pytest.mark.parametrize("schedule, chunks", [("1f1b", 1), ("gpipe", 1), ("interleaved", 2), ("zbh1", 1)])
def test_every_schedule_runs_moe_stages(tiny, schedule, chunks):
    kw = dict(dp=2, pp=2, microbatches=4, schedule=schedule, chunks=chunks)
    plain = _sim(tiny, "dgx-h100:1x8", batch=8, **kw)
    est = _sim(tiny, "dgx-h100:1x8", batch=8, ep=2, **kw)
    assert sum(r.ep_comm_s for r in est.ranks) > 0
    assert est.step_time_s > plain.step_time_s
    # 4 micro-batches x 4 all-to-alls x 2 MoE layers of T k h x 4 bytes, over the stages
    assert sum(est.ep_a2a_bytes) == pytest.approx(4 * 4 * LAYERS * SEQ * K * H * 4)


# ----------------------------------------------------------------------------- planner

def test_dense_search_has_ep_1_only(tiny):
    from parsim.model.spec import load_model
    from parsim.search.enumerate import Constraints, ep_values

    assert ep_values(load_model(DENSE), Constraints(), 8, 1, 1) == [1]
    assert ep_values(tiny, Constraints(), 8, 1, 1) == [1, 2, 4, 8]
    assert ep_values(tiny, Constraints(), 6, 1, 1) == [1, 2]
    # tp > 1: folded from tp x cp x dp (MoE Parallel Folding), over the expert tp
    assert ep_values(tiny, Constraints(), 2, 1, 2) == [1, 2, 4]
    assert ep_values(tiny, Constraints(), 2, 1, 2, etp=2) == [1, 2]
    assert ep_values(tiny, Constraints(ep=4), 8, 1, 1) == [4]
    assert ep_values(tiny, Constraints(ep=4), 2, 1, 2, etp=2) == []


def test_planner_picks_ep_where_memory_asks_for_it(tiny):
    """Under a cap that the tiny model's replicated experts exceed, the pick shards them."""
    from parsim.hardware import load_cluster
    from parsim.search.planner import Constraints, plan

    cluster = load_cluster("dgx-h100:1x8")
    free = plan(tiny, cluster, None or _compute(cluster, tiny), Constraints(top=3), progress=False)
    cap = 1.8 * 2**20
    assert free.chosen.peak_memory_bytes > cap
    tight = plan(tiny, cluster, _compute(cluster, tiny), Constraints(top=3, max_memory_bytes=cap), progress=False)
    assert tight.chosen.config.ep > 1 and tight.chosen.peak_memory_bytes <= cap
    assert any(line.startswith("expert parallelism: ep=") for line in tight.explanation)


def _compute(cluster, spec):
    from parsim.cost.compute import AnalyticalCompute
    return AnalyticalCompute.for_training(cluster.device, spec.training)


# ----------------------------------------------------------------------------- all-to-all overlap

def test_ep_overlap_hides_the_all_to_alls_of_paired_actions(tiny):
    """pp = 1, m = 4: the order F0 B0 F1 B1 F2 B2 F3 B3 pairs each B(i) with F(i+1) (another
    micro-batch): 3 pairs, each hiding both actions' all-to-alls (far shorter than the compute
    here), each hidden second costing 20 / (132 - 20) s of compute (DeepSeek-V3's 20 SMs of an
    H100's 132); F0's and B3's stay exposed."""
    from parsim.cost.experts import A2A_OVERLAP_COMM_UNITS

    kw = dict(dp=8, ep=8, microbatches=4)
    plain = _sim(tiny, "dgx-h100:1x8", batch=32, **kw)
    hid = _sim(tiny, "dgx-h100:1x8", batch=32, ep_overlap=True, **kw)
    per_mb = plain.ranks[0].ep_comm_s / 4                     # F's and B's all-to-alls of one micro-batch
    assert hid.ranks[0].ep_comm_s == pytest.approx(per_mb)
    cost = A2A_OVERLAP_COMM_UNITS / (132 - A2A_OVERLAP_COMM_UNITS)
    assert hid.ranks[0].busy_s - plain.ranks[0].busy_s == pytest.approx(3 * per_mb * cost)
    assert plain.step_time_s - hid.step_time_s == pytest.approx(3 * per_mb * (1 - cost), rel=1e-6)
    r = hid.ranks[0]
    assert r.busy_s + r.exposed_comm_s + r.bubble_s + r.sync_wait_s + r.input_s == pytest.approx(hid.step_time_s)
    with pytest.raises(InfeasibleError, match="with ep=1 there are none"):
        _sim(tiny, "dgx-h100:1x8", dp=8, ep_overlap=True)


def test_plan_json_keeps_ep_and_its_overlap(tiny, tmp_path):
    from parsim.hardware import load_cluster
    from parsim.plan import Plan, plan_from_candidate

    cfg = ParallelConfig(dp=8, pp=1, microbatches=1, bounds=(0, len(tiny.graph)), ep=4, ep_overlap=True)
    est = _sim(tiny, "dgx-h100:1x8", dp=8, ep=4, ep_overlap=True)
    assert est.config["ep"] == 4 and est.config["ep_overlap"] is True
    d = plan_from_candidate(tiny, load_cluster("dgx-h100:1x8"), cfg, est.to_json()).to_json()
    assert d["parallel"]["ep"] == 4 and d["parallel"]["ep_overlap"] is True
    assert d["estimate"]["ep_a2a_bytes"] == list(est.ep_a2a_bytes)
    back = Plan.from_json(d, "plan.json").config
    assert back.ep == 4 and back.ep_overlap


def test_expert_graphs_made_from_a_runs_shared_parts_equal_those_made_alone(tiny):
    """expert_parallel_graph with the run's table of rescaled kernels and operators (ShardMemo.
    expert_parts, shared by the graphs of one search) makes the graph it makes alone, field for
    field, and reuses the table's tuples for a second graph of the same layers."""
    from parsim.cost.experts import expert_parallel_graph
    from parsim.model.recompute import Recompute
    from parsim.shard.prepare import per_device_graph

    parts: dict = {}
    plain, full = (per_device_graph(tiny.graph, 1, "", rc) for rc in (Recompute.NONE, Recompute.FULL))
    for base in (plain, full):
        for ep in (2, 8):
            shared, alone = expert_parallel_graph(base, ep, 1.2, parts), expert_parallel_graph(base, ep, 1.2)
            assert shared == alone and shared.layers == alone.layers
            assert [x.ops for x in shared.layers] == [x.ops for x in alone.layers]     # (not in Layer's ==)
    moe = [i for i, layer in enumerate(plain.layers) if layer.experts is not None]
    first, second = (expert_parallel_graph(base, 8, 1.2, parts) for base in (plain, full))
    assert all(first.layers[i].ops is second.layers[i].ops for i in moe)     # the recompute twin's, reused


# ----------------------------------------------------------------------------- ZeRO 2-3 beside ep

@pytest.mark.parametrize("zero", [2, 3])
def test_zero_2_and_3_shard_the_experts_over_their_own_ranks(tiny, zero):
    """ep 2 on 8 ranks: each MoE layer's routed experts leave the dense FSDP units for a unit of their
    own, reduce-scattered over the 4 ranks holding the same experts, ROUTED / ep fp32 gradients (8
    ranks x 73,728 elements pads nothing); the dense units keep every other parameter."""
    est = _sim(tiny, "dgx-h100:1x8", batch=16, dp=8, ep=2, zero=zero)
    assert est.expert_grad_buckets_bytes == ((ROUTED / 2 * 4,) * LAYERS,)
    dense = (sum(layer.param_count for layer in tiny.graph.layers) - LAYERS * ROUTED) * 4
    units = len(est.grad_buckets_bytes[0])
    assert dense <= sum(est.grad_buckets_bytes[0]) < dense + units * 8 * 4       # each padded to 8 shards


def _without_expert_collectives(monkeypatch, *which):
    """Price the experts' own FSDP collectives (parsim.sim.expert_grads.FsdpExperts) at nothing."""
    import importlib

    module = importlib.import_module("parsim.sim.expert_grads")
    real = module.FsdpExperts.__init__

    def silent(self, *args, **kwargs):
        real(self, *args, **kwargs)
        for name in which:
            setattr(self, name, (0.0,) * len(self.grads))
    monkeypatch.setattr(module.FsdpExperts, "__init__", silent)


@pytest.mark.parametrize("which", ["reduce_s", "gather_s"])
def test_zero_3_charges_the_experts_collectives_to_the_step(tiny, monkeypatch, which):
    """ZeRO-3 with ep 2 over 16 ranks on two nodes: the experts' reduce-scatters and all-gathers run
    over their 8 ranks, across the nodes, and the step holds them; priced at nothing, it is shorter."""
    priced = _sim(tiny, "dgx-h100:2x8", batch=32, dp=16, ep=2, zero=3).step_time_s
    _without_expert_collectives(monkeypatch, which)
    assert _sim(tiny, "dgx-h100:2x8", batch=32, dp=16, ep=2, zero=3).step_time_s < priced * 0.99


def test_zero_3_experts_held_whole_by_their_ranks_communicate_nothing(tiny, monkeypatch):
    """dp 2 x ep 2: each rank holds its experts alone (expert_dp 1), so ZeRO-3 shards only the dense
    units: the step is the same with the experts' collectives priced at nothing."""
    priced = _sim(tiny, "dgx-h100:1x8", batch=16, dp=2, ep=2, zero=3)
    assert priced.expert_grad_buckets_bytes == ((ROUTED / 2 * 4,) * LAYERS,)
    _without_expert_collectives(monkeypatch, "reduce_s", "gather_s")
    assert _sim(tiny, "dgx-h100:1x8", batch=16, dp=2, ep=2, zero=3).step_time_s == priced.step_time_s


def test_zero_3_experts_collectives_run_over_the_expert_data_parallel_group(tiny):
    """ep 8 on two nodes of 8: the ranks holding an expert shard are one a node (expert_dp 2), not
    the 16 dense shard ranks: each unit's reduce-scatter and all-gather cost what
    parsim.cost.comm prices them at over ParallelConfig.expert_dp_group."""
    from parsim.cost.memory import bytes_per_param
    from parsim.hardware import load_cluster
    from parsim.sim.expert_grads import FsdpExperts
    from parsim.sim.prices import Prices

    cfg = ParallelConfig(dp=16, pp=1, microbatches=1, ep=8, zero=3, bounds=(0, len(tiny.graph)))
    prices = Prices(load_cluster("dgx-h100:2x8").for_dtype(tiny.training.dtype))
    group = cfg.expert_dp_group(0)
    assert group == (0, 8)
    per_param = bytes_per_param(tiny.training.dtype, tiny.training.optimizer)
    units = [[i] for i in range(LAYERS)]
    experts = FsdpExperts(cfg, prices, 0, units, [ROUTED // 8] * LAYERS, per_param, 4, "auto")
    assert experts.shard_bytes == (ROUTED / 8 * 4,) * LAYERS
    assert experts.reduce_s == tuple(prices.collective_s(group, x, "reduce_scatter", "auto") for x in experts.shard_bytes)
    assert experts.gather_s == tuple(prices.collective_s(group, x, "all_gather") for x in experts.shard_bytes)
    assert 0 < experts.reduce_s[0] != prices.collective_s(cfg.grad_group(0), ROUTED / 8 * 4, "reduce_scatter", "auto")
