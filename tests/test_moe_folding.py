"""MoE Parallel Folding (Liu et al. 2025, arXiv 2504.14960; Megatron-Core's expert mesh): attention's
tp beside expert parallelism with its own expert tp (etp), in the rank layout, the simulator and the
planner.  Closed forms by hand from examples/moe_tiny_local.yaml (2 MoE layers, hidden 64, 8 experts
of 96, top-2, 4 heads over 2 KV heads, 16 tokens, fp32, Adam)."""

import os
from dataclasses import replace

import pytest

from parsim.errors import InfeasibleError
from parsim.plan import ParallelConfig, Plan
from parsim.refusals import fold_refusal

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "examples", "moe_tiny_local.yaml")
H, I, E, K, SEQ = 64, 96, 8, 2, 16
ROUTED = 3 * H * I * E                                  # one layer's routed experts: gate, up, down
FP32 = 4


@pytest.fixture(scope="module")
def tiny():
    from parsim.model.spec import load_model
    return load_model(TINY)


# ----------------------------------------------------------------------------- the rank layout

def _megatron_expert_groups(tp, dp, pp, ep, etp):
    """Megatron-Core's expert RankGenerator written out (order "tp-cp-ep-dp-pp" with tp = etp, cp =
    1; megatron/core/parallel_state.py): global rank = et + etp (e + ep (d + edp p)); the ep group
    of a rank varies e, the expert-dp group varies d."""
    edp = tp * dp // (ep * etp)
    rank = lambda et, e, d, p: et + etp * (e + ep * (d + edp * p))   # noqa: E731
    ep_groups = {tuple(rank(et, e, d, p) for e in range(ep)) for et in range(etp) for d in range(edp) for p in range(pp)}
    edp_groups = {tuple(rank(et, e, d, p) for d in range(edp)) for et in range(etp) for e in range(ep) for p in range(pp)}
    return ep_groups, edp_groups


@pytest.mark.parametrize("tp, dp, pp, ep, etp", [(2, 4, 1, 4, 1), (2, 4, 2, 2, 2), (4, 2, 1, 8, 1), (2, 2, 1, 2, 1),
                                                 (1, 8, 1, 4, 1), (2, 8, 2, 4, 2)])
def test_fold_matches_megatron_expert_rank_generator(tp, dp, pp, ep, etp):
    """dp-inner is Megatron's order (tp, then dp, then pp): the folded groups equal its expert
    RankGenerator's, for every pipeline rank."""
    cfg = ParallelConfig(dp=dp, pp=pp, microbatches=1, tp=tp, ep=ep, etp=etp, placement="dp-inner")
    assert fold_refusal(cfg) is None
    ep_groups = {cfg.ep_group(p, i) for p in range(pp) for i in range(cfg.expert_dp * etp)}
    edp_groups = {cfg.expert_dp_group(p, e, t) for p in range(pp) for e in range(ep) for t in range(etp)}
    assert (ep_groups, edp_groups) == _megatron_expert_groups(tp, dp, pp, ep, etp)
    assert cfg.expert_dp == tp * dp // (ep * etp)
    for p in range(pp):                  # an etp group is the tp group where etp = tp
        for i in range(tp * dp // etp):
            group = cfg.etp_group(p, i)
            assert etp == 1 or group == tuple(cfg.tp_group(i, p))


def test_fold_at_tp_1_is_the_data_parallel_carving():
    """tp = 1: an ep group is ep consecutive members of the stage's dp x cp ranks, as before folding."""
    cfg = ParallelConfig(dp=4, pp=2, microbatches=1, cp=2, ep=4, placement="pp-inner")
    grad = cfg.grad_group(1)
    assert cfg.ep_group(1, 1) == grad[4:8] and cfg.expert_dp_group(1, 2) == grad[2::4]
    assert not replace(cfg, ep=1).experts_apart and cfg.experts_apart


@pytest.mark.parametrize("kw, field, says", [
    (dict(tp=2, dp=4, ep=2, etp=4), "etp", "choose etp 1 or 2"),
    (dict(tp=2, dp=2, ep=4, etp=2), "ep", "4 x etp 2 does not divide tp x cp x dp = 2 x 1 x 2 = 4"),
    (dict(tp=1, dp=6, ep=4), "ep", "4 does not divide dp x cp = 6 x 1 = 6"),
    (dict(tp=1, dp=8, ep=2, etp=2), "etp", "2: the expert tp splits experts beside attention's tp, and tp is 1"),
])
def test_fold_refusals_name_the_field(kw, field, says):
    why = fold_refusal(ParallelConfig(pp=1, microbatches=1, **kw))
    assert why[0] == field and says in why[1] and "\n" not in why[1]


def test_plan_json_keeps_etp(tiny):
    cfg = ParallelConfig(dp=2, pp=1, microbatches=1, bounds=(0, len(tiny.graph)), tp=2, tp_layout="megatron-sp",
                         ep=2, etp=2)
    plan = Plan("m.yaml", "moe-tiny", tuple(tiny.graph.names), 8, "fp32", "adam", "dgx-h100:1x4", 4, cfg, {})
    back = Plan.from_json(plan.to_json(), "plan.json")
    assert back.config == cfg and plan.to_json()["parallel"]["etp"] == 2
    bad = plan.to_json()
    bad["parallel"]["ep"] = 4
    from parsim.errors import InputError
    with pytest.raises(InputError, match=r"plan.json: parallel.ep: 4 x etp 2 does not divide"):
        Plan.from_json(bad, "plan.json")


# ----------------------------------------------------------------------------- the per-device graph

def _graph(tiny, **kw):
    from parsim.shard.prepare import per_device_graph

    training = replace(tiny.training, moe_imbalance=1.0)
    return per_device_graph(tiny.graph, kw.pop("tp", 1), "megatron-sp" if kw.get("etp") is not None else "",
                            training=training, **{"etp": 1, **kw})


def test_folded_layer_holds_tp_attention_and_its_experts(tiny):
    """tp=2 etp=1: attention's projections split over the group, the router and every expert whole
    on each device; ep=4 then keeps E/4 experts.  etp=2: the experts split too."""
    whole = tiny.graph.layers[1]
    attention = whole.param_count - ROUTED - E * H - 2 * H            # q, k, v, o (no biases)
    tp2 = _graph(tiny, tp=2, etp=1).layers[1]
    assert tp2.param_count == attention // 2 + E * H + 2 * H + ROUTED
    assert tp2.tp_share == pytest.approx(0.5)                          # s/2 tokens' rows, or a/2 heads
    ep4 = _graph(tiny, tp=2, etp=1, ep=4)
    assert ep4.layers[1].param_count == attention // 2 + E * H + 2 * H + ROUTED // 4
    from parsim.cost.experts import expert_param_count
    assert expert_param_count(ep4.layers[1], ep4) == ROUTED // 4
    assert expert_param_count(tp2, _graph(tiny, tp=2, etp=1)) == ROUTED      # apart from the dense ones
    split = _graph(tiny, tp=2, etp=2).layers[1]
    assert split.param_count == attention // 2 + E * H + 2 * H + ROUTED // 2
    assert expert_param_count(split, _graph(tiny, tp=2, etp=2)) == 0        # with the dense ones


def test_folded_experts_have_no_mirror_over_tp(tiny):
    """etp=1: the experts' weight gradients go over the expert-dp group (tp ranks inside), not a tp
    all-reduce; the router's, a whole weight on s/tp tokens, is summed over tp as Megatron sums a
    sequence-parallel weight's."""
    grads = [step.bytes_per_device for ph, step, _ in _graph(tiny, tp=2, etp=1).layers[1].tp_comm if ph == "grad"]
    assert E * H * FP32 in grads                                        # the router
    assert not {E * H * 2 * I * FP32, E * I * H * FP32} & set(grads)    # gate_up, down


def test_folded_all_to_all_moves_a_devices_sequence_share(tiny):
    """Under sequence parallelism each device dispatches its s/tp tokens: at tp=2, b=2 the buffer is
    b s/2 k h x 4 bytes, the same as tp=1 at b=1."""
    from parsim.cost.experts import a2a_bytes

    g2, g1 = _graph(tiny, tp=2, etp=1, ep=4), _graph(tiny, ep=4)
    one = 2 * SEQ // 2 * K * H * FP32
    assert a2a_bytes(g2.layers[1], "F", 2, "fp32") == 2 * one             # dispatch and combine
    assert a2a_bytes(g1.layers[1], "F", 1, "fp32") == 2 * one


def test_simulate_folds_and_prices_expert_grads_over_the_folded_group(tiny):
    from parsim.hardware import load_cluster
    from parsim.sim import simulate

    cluster = load_cluster("dgx-h100:1x8")
    n = len(tiny.graph)
    base = dict(dp=4, pp=1, microbatches=1, bounds=(0, n), tp=2, tp_layout="megatron-sp")
    ests = {etp_ep: simulate(tiny.graph, tiny.training, cluster, ParallelConfig(**base, ep=etp_ep[1], etp=etp_ep[0]),
                             keep_timeline=False) for etp_ep in ((1, 1), (1, 4), (2, 2), (2, 1))}
    assert ests[(1, 4)].ep_a2a_bytes[0] > 0 and not ests[(1, 1)].ep_a2a_bytes and not ests[(2, 1)].ep_a2a_bytes
    # memory falls as the experts spread: whole (etp 1), E/4 (ep 4), halves (etp 2)
    peak = {k: e.peak_memory_bytes[0] for k, e in ests.items()}
    assert peak[(1, 1)] > peak[(2, 1)] > peak[(2, 2)] and peak[(1, 1)] > peak[(1, 4)]
    cfg = ParallelConfig(**base, ep=4)
    assert cfg.expert_dp_group(0) == (0, 4) and cfg.ep_group(0) == (0, 1, 2, 3)


def test_tp_beside_experts_needs_megatron_sp(tiny):
    from parsim.shard.prepare import per_device_graph

    for layout in ("megatron", "auto"):
        with pytest.raises(InfeasibleError, match="megatron-sp"):
            per_device_graph(tiny.graph, 2, layout, cluster=None, training=tiny.training)


def test_planner_searches_etp_beside_tp(tiny):
    from parsim.hardware import load_cluster
    from parsim.search.planner import Constraints, plan

    from parsim.cost.compute import AnalyticalCompute

    cluster = load_cluster("dgx-h100:1x8")
    result = plan(tiny, cluster, AnalyticalCompute.for_training(cluster.device, tiny.training),
                  Constraints(tp=2, pp=1, top=200, recompute="none", zero=0), progress=False)
    seen = {(c.config.ep, c.config.etp) for c in result.ranked}
    assert {(1, 1), (1, 2), (2, 1), (4, 1), (2, 2)} <= seen


def test_pruned_search_with_exposed_all_to_alls_equals_exhaustive(tiny):
    """The bounds hold the least all-to-all time any placement gives an ep group (exposed, the
    group on consecutive ranks): still below every simulated step, so pruning ranks the same plans
    as simulating them all, here with ep groups across two nodes."""
    from parsim.cost.compute import AnalyticalCompute
    from parsim.hardware import load_cluster
    from parsim.search.planner import Constraints, plan

    cluster = load_cluster("dgx-h100-superpod:2x8")
    compute = AnalyticalCompute.for_training(cluster.device, tiny.training)
    kw = dict(top=5, zero=0, recompute="none", tp=2, pp=1)
    training = replace(tiny.training, global_batch_size=16)
    spec = replace(tiny, training=training)
    pruned = plan(spec, cluster, compute, Constraints(**kw), progress=False)
    full = plan(spec, cluster, compute, Constraints(**kw, prune=False), progress=False)
    assert full.simulated > pruned.simulated
    assert [c.key() for c in pruned.ranked] == [c.key() for c in full.ranked]
