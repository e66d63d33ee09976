"""Tensor-parallel communication overlapped with the adjacent GEMMs (ParallelConfig.tp_comm_overlap,
Megatron-Core's --tp-comm-overlap; the rule in parsim.sim.overlap): its closed form, one layer's
time in the simulator against it, the refusals, the plan file and the planner's search."""

import json

import pytest

from parsim.cli import main
from parsim.cost.compute import AnalyticalCompute
from parsim.cost.layer import tp_comm_time_s
from parsim.errors import InfeasibleError
from parsim.hardware import load_cluster
from parsim.model.fp8 import FP8_KLASS
from parsim.model.spec import load_model, with_fp8
from parsim.plan import ParallelConfig, Plan
from parsim.schedule.actions import Kind
from parsim.search.planner import Constraints, plan
from parsim.shard.prepare import per_device_graph
from parsim.sim import simulate
from parsim.sim.overlap import layer_time_s as overlap_layer_time_s, overlapped_s

GPT = "examples/gpt_small_local.yaml"        # 4 blocks, h 256, 8 heads of 32, s 128, fp32


def test_overlap_closed_form():
    # GEMM-bound: the GEMM on 116 of 132 SMs, then the one chunk of the collective nothing covers
    assert overlapped_s(10.0, 4.0, 132, 16, 4) == pytest.approx(10.0 * 132 / 116 + 4.0 / 4)
    # communication-bound: the collective, then the last GEMM chunk
    assert overlapped_s(2.0, 8.0, 100, 20, 4) == pytest.approx(8.0 + 2.0 * 100 / 80 / 4)
    assert overlapped_s(3.0, 0.0, 132, 16, 4) == 3.0                    # nothing to overlap: all units
    # against the sum without overlap: a gain where both streams are long, a loss where the collective is tiny
    assert overlapped_s(10.0, 4.0, 132, 16, 4) < 14.0
    assert overlapped_s(10.0, 0.01, 132, 16, 4) > 10.01
    # a library that takes no units (HCCL's MC2): the GEMMs on every unit, and 1 - overlap of the
    # collective's time beside them (all its chunks but the one nothing covers) charged to them
    assert overlapped_s(10.0, 4.0, 24, 0, 4, 0.25) == pytest.approx(10.0 + 0.25 * 4.0 * 3 / 4 + 4.0 / 4)
    # communication-bound: the charge lengthens the GEMMs' stream, which the collective still outlasts
    assert overlapped_s(2.0, 8.0, 24, 0, 4, 0.25) == pytest.approx(8.0 + 2.0 / 4)
    assert overlapped_s(6.0, 7.0, 24, 0, 4, 0.5) == pytest.approx(6.0 + 0.5 * 6.0 * 3 / 4 + 6.0 / 4)


def test_mc2_is_charged_the_librarys_overlap_and_te_is_not():
    """overlap_units' charge: 1 - collective.overlap where the collectives take no compute units
    (atlas-900-a2's HCCL), nothing where they take SMs of their own (dgx-h100's TE margin)."""
    from parsim.sim.overlap import overlap_units

    for name in ("atlas-900-a2", "atlas-800t-a2"):
        cluster = load_cluster(name)
        colls = cluster.profile.collectives
        assert colls.tp_overlap_comm_units == 0 and colls.overlap < 1      # fitted (results/published/fit.yaml)
        assert overlap_units(cluster)[3] == pytest.approx(1 - colls.overlap)
    h100 = load_cluster("dgx-h100")
    assert h100.profile.collectives.overlap < 1 and overlap_units(h100)[3] == 0.0


def _megatron_share(name: str, kind: Kind, h: int, s: int) -> float:
    """The share of a layer's FLOPs that its tensor-parallel collectives pipeline with, from
    Megatron's FLOP counts (Narayanan et al. 2021, Sec. 5.1; FLOPs = 2 x MACs): a block's forward
    runs its linear GEMMs (QKV, projection, MLP: 24 b s h^2) beside attention's batched matmuls
    (4 b s^2 h); its backward their data gradients (24 b s h^2, pipelined) and attention's
    (8 b s^2 h) beside the weight gradients (24 b s h^2, not pipelined).  The embedding is a
    lookup (no GEMM); the LM head is one GEMM, forward, then a data and a weight gradient."""
    if name == "embed":
        return 0.0
    if name == "head":
        return 1.0 if kind == Kind.F else 0.5
    return 6 * h / (6 * h + s) if kind == Kind.F else 24 * h / (48 * h + 8 * s)


def _overlap_delta(G: float, C: float, U: int = 132, u: int = 16, n: int = 4) -> float:
    """What overlapping G s of GEMMs with C s of collectives saves or costs: the GEMMs on U - u of
    U SMs (H100 SXM5's 132; TE's 16 for the collectives), a two-stage pipeline of n chunks."""
    stretched = G * U / (U - u)
    return max(stretched, C) + min(stretched, C) / n - G - C


@pytest.mark.parametrize("fp8", [False, True])
def test_one_layer_in_the_simulator_equals_the_closed_form(gpt, h100, fp8, tmp_path):
    """pp = dp = 1, one micro-batch: each F and B action is its layers' times, and each layer's is
    its time without overlap plus _overlap_delta(G, C), with G the layer's time for the phase
    times its pipelined GEMMs' share of the FLOPs (Megatron's counts, _megatron_share) and C
    its tensor-parallel collectives'.  Under FP8 (TE's Linear GEMMs in FP8) the same GEMMs are
    pipelined: the share is the same."""
    if fp8:
        bf16 = tmp_path / "gpt_bf16.yaml"
        bf16.write_text(open(GPT).read().replace("dtype: fp32", "dtype: bf16"))
    spec = with_fp8(load_model(str(bf16))) if fp8 else gpt
    graph, training = spec.graph, spec.training
    assert any(k.klass == FP8_KLASS for layer in graph.layers for k in layer.kernels) == fp8
    compute = AnalyticalCompute.for_training(h100.device, training)
    L, b = len(graph), 8
    h, s = 256, 128                                 # examples/gpt_small_local.yaml
    assert (h100.device.kernels.compute_units, h100.profile.collectives.tp_overlap_comm_units,
            h100.profile.collectives.tp_overlap_chunks) == (132, 16, 4)
    runs = {ov: simulate(graph, training, h100,
                         ParallelConfig(1, 1, 1, bounds=(0, L), tp=2, tp_layout="megatron-sp", tp_comm_overlap=ov),
                         compute) for ov in (False, True)}
    g = per_device_graph(graph, 2, "megatron-sp", False, None, h100, training)
    assert [layer.name for layer in g.layers] == ["embed", "layers.0", "layers.1", "layers.2", "layers.3", "head"]
    for kind in (Kind.F, Kind.B):
        delta = 0.0
        for layer in g.layers:
            C = tp_comm_time_s(layer, kind.value, b, h100)
            assert C > 0, layer.name
            G = compute.layer_time_s(layer, kind.value, b) * _megatron_share(layer.name, kind, h, s)
            delta += _overlap_delta(G, C)
        assert delta != 0.0
        got = {ov: [e - s_ for r, a, _, s_, e in runs[ov].timeline.records if a.kind == kind] for ov in runs}
        assert got[True] == [pytest.approx(got[False][0] + delta, rel=1e-9)]
    assert runs[True].config["tp_comm_overlap"] is True


@pytest.mark.parametrize("recompute", ["selective", "full"])
def test_a_recomputed_layer_overlaps_only_the_collectives_it_runs_again(gpt, h100, recompute):
    """Under full recompute a block's backward re-runs its forward, collectives included
    (parsim.cost.layer), so the backward pipelines the forward's GEMMs and collectives too; under
    selective recompute it re-runs only the core attention, which communicates nothing: the
    backward's overlap is the one without recomputation (Korthikanti et al. 2022, Sec. 5)."""
    compute = AnalyticalCompute.for_training(h100.device, gpt.training)
    h, s, b = 256, 128, 8
    g = per_device_graph(gpt.graph, 2, "megatron-sp", recompute, None, h100, gpt.training)
    block = g.layers[1]
    assert block.name == "layers.0" and block.recompute_bytes
    B = compute.layer_time_s(block, "B", b) * _megatron_share(block.name, Kind.B, h, s)
    expected = _overlap_delta(B, tp_comm_time_s(block, "B", b, h100))
    if recompute == "full":
        F = compute.layer_time_s(block, "F", b) * _megatron_share(block.name, Kind.F, h, s)
        expected += _overlap_delta(F, tp_comm_time_s(block, "F", b, h100))
    got = overlap_layer_time_s(compute, block, "B", b, h100, tp_overlap=True) \
        - overlap_layer_time_s(compute, block, "B", b, h100, tp_overlap=False)
    assert got == pytest.approx(expected, rel=1e-12)


def test_refused_where_megatron_does_not_allow_it(gpt, h100):
    L = len(gpt.graph)
    for cfg in (ParallelConfig(1, 1, 1, bounds=(0, L), tp=2, tp_layout="megatron", tp_comm_overlap=True),
                ParallelConfig(1, 1, 1, bounds=(0, L), tp_comm_overlap=True)):
        with pytest.raises(InfeasibleError, match="megatron-sp"):
            simulate(gpt.graph, gpt.training, h100, cfg)
    cpu = load_cluster("local-cpu:1x2")
    with pytest.raises(InfeasibleError, match="compute_units"):
        simulate(gpt.graph, gpt.training, cpu,
                 ParallelConfig(1, 1, 1, bounds=(0, L), tp=2, tp_layout="megatron-sp", tp_comm_overlap=True))


def test_plan_file_keeps_it_and_the_executor_refuses_it(tmp_path, capsys):
    path = str(tmp_path / "p.json")
    assert main(["simulate", GPT, "--cluster", "dgx-h100:1x8", "--dp", "1", "--tp", "2", "--tp-layout", "megatron-sp",
                 "--tp-comm-overlap", "-o", path, "--json"]) == 0
    capsys.readouterr()
    d = json.loads(open(path).read())
    assert d["parallel"]["tp_comm_overlap"] is True
    assert Plan.from_json(d, path).config.tp_comm_overlap
    assert main(["run", path, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "parallel.tp_comm_overlap" in err[0] and "--no-tp-comm-overlap" in err[0]


def test_planner_searches_it_with_megatron_sp_only(gpt, h100):
    compute = AnalyticalCompute.for_training(h100.device, gpt.training)
    base = dict(tp=2, pp=1, zero=0, recompute=False, prune=False, top=100)
    sp = plan(gpt, h100, compute, Constraints(tp_layout="megatron-sp", **base), progress=False)
    assert {x.config.tp_comm_overlap for x in sp.ranked} == {False, True}
    plain = plan(gpt, h100, compute, Constraints(tp_layout="megatron", **base), progress=False)
    assert {x.config.tp_comm_overlap for x in plain.ranked} == {False}
    fixed = plan(gpt, h100, compute, Constraints(tp_layout="megatron-sp", tp_comm_overlap=True, **base),
                 progress=False)
    assert {x.config.tp_comm_overlap for x in fixed.ranked} == {True}
    # the pruned search ranks what the exhaustive one ranks
    pruned = plan(gpt, h100, compute, Constraints(tp_layout="megatron-sp", **{**base, "prune": True, "top": 3}),
                  progress=False)
    assert [x.key() for x in pruned.ranked] == [x.key() for x in sp.ranked[:3]]


def test_selective_recompute_adds_no_overlapped_forward_pass(h100):
    """Under selective recomputation a layer's backward re-runs only its core attention, which
    communicates nothing (parsim.cost.layer prices no forward collective again): the overlap
    changes its backward by the backward's own pass, G_B and C_B, and by nothing for a second
    forward.  Under full recomputation the forward's collectives do re-run, overlapped as well."""
    from parsim.cost.layer import layer_time_s as plain
    from parsim.model.spec import model_from_mapping
    from parsim.sim.overlap import gemm_share, layer_time_s, overlap_units

    spec = model_from_mapping({"model": "gpt", "args": {"layers": 2, "hidden": 256, "heads": 8, "seq_len": 128,
                                                         "vocab": 2048, "dropout": 0.0, "attention": "eager"},
                               "training": {"global_batch_size": 8, "dtype": "bf16", "optimizer": "adam"}}, "test")
    compute = AnalyticalCompute.for_training(h100.device, spec.training)
    units, comm_units, chunks, charge = overlap_units(h100)
    assert charge == 0.0                    # TE takes SMs of its own: nothing more is charged
    b, checked = 4, 0
    for mode in ("selective", "full"):
        g = per_device_graph(spec.graph, 2, "megatron-sp", mode, None, h100, spec.training)
        for layer in g.layers:
            if not layer.tp_comm or not layer.recompute_bytes:
                continue
            passes = [("B", "B")] + ([("F", "F")] if mode == "full" else [])
            delta = 0.0
            for k, ph in passes:
                comm = tp_comm_time_s(layer, ph, b, h100)
                gemm = compute.layer_time_s(layer, k, b) * gemm_share(layer, k, b)
                delta += overlapped_s(gemm, comm, units, comm_units, chunks) - gemm - comm
            got = layer_time_s(compute, layer, "B", b, h100, tp_overlap=True) - plain(compute, layer, "B", b, h100)
            assert got == pytest.approx(delta, rel=1e-9, abs=1e-15)
            checked += 1
    assert checked >= 4


def test_gemm_share_is_the_one_product_gemms_share_of_the_phase_flops(h100):
    """gemm_share, which the planner asks for thousands of layers, is exactly (==, so in the order
    sum() adds) the FLOPs (Kernel.at) of a phase's matmul kernels of one product (gemm_at's groups 1
    at every size), F and I only, over the FLOPs of all the phase's kernels (a phase without kernels: 1, W's 0)."""
    from parsim.cost.kernels import PHASES
    from parsim.model.spec import model_from_mapping
    from parsim.sim.overlap import GEMM_KLASSES, gemm_share

    spec = model_from_mapping({"model": "gpt", "args": {"layers": 2, "hidden": 256, "heads": 8, "seq_len": 128,
                                                         "vocab": 2048, "dropout": 0.0, "attention": "eager"},
                               "training": {"global_batch_size": 8, "dtype": "bf16", "optimizer": "adam"}}, "test")
    graph = per_device_graph(spec.graph, 2, "megatron-sp", False, None, h100, spec.training)
    shares = []
    for layer in graph.layers:
        for kind in ("F", "B", "I", "W"):
            ks = [k for k in layer.kernels if k.phase in PHASES[kind]]
            for b in (1, 3, 8):
                total = sum(k.at(b)[0] for k in ks)
                one_product = sum(k.at(b)[0] for k in ks if k.phase in ("F", "I") and k.klass in GEMM_KLASSES
                                  and k.gemm_at(b) is not None and all(k.gemm_at(x)[3] == 1.0 for x in (1, 2, b)))
                want = (one_product / total if total else 0.0) if ks else (0.0 if kind == "W" else 1.0)
                assert gemm_share(layer, kind, b) == want, (layer.name, kind, b)
                shares.append(want)
    assert any(0 < s < 1 for s in shares) and 0.0 in shares


def test_a_runs_kept_shares_price_each_layer_as_it_alone(h100):
    """Under tp overlap the run's pricing context keeps the GEMM shares by the layers' kernels
    (parsim.sim.overlap._kept_gemm_share), shared by a graph and its recomputed twins and asked
    again by a fully recomputed layer's backward: every layer's time is still exactly (==) the one
    pricing that layer alone, without a context, gives."""
    from parsim.cost.layer import loss_time_s
    from parsim.model.spec import model_from_mapping
    from parsim.sim.overlap import layer_time_s
    from parsim.sim.prices import Prices

    spec = model_from_mapping({"model": "gpt", "args": {"layers": 2, "hidden": 256, "heads": 8, "seq_len": 128,
                                                         "vocab": 2048, "dropout": 0.0, "attention": "eager"},
                               "training": {"global_batch_size": 8, "dtype": "bf16", "optimizer": "adam"}}, "test")
    compute = AnalyticalCompute.for_training(h100.device, spec.training)
    prices = Prices(h100)
    checked = 0
    for b in (1, 4, 1):
        for mode in ("none", "selective", "full"):
            graph = per_device_graph(spec.graph, 2, "megatron-sp", mode, None, h100, spec.training, memo=prices.shard)
            for kind in ("F", "B", "I", "W"):
                got = prices.layer_times(compute, graph, kind, b, 0, True, layer_time_s)
                own = [layer_time_s(compute, layer, kind, b, h100, 0, True) for layer in graph.layers]
                own[-1] += loss_time_s(compute, graph, kind, b)
                assert got == own, (mode, kind, b)
                checked += sum(bool(layer.tp_comm) for layer in graph.layers)
    assert checked and len(prices.table("gemm shares")) > 0


def test_a_steps_price_with_the_contexts_group_shapes_is_its_own():
    """parsim.cost.layer.redistribution_time_s with the group shapes a run's pricing context keeps
    (shape_of: Prices.shape, as Prices.tp_comm_s passes it) is exactly (==) the price it gives
    working each group's shape out itself: every kind of step, groups inside a node and across
    two, from several first ranks."""
    from parsim.cost.layer import redistribution_time_s
    from parsim.shard.redistribute import Step
    from parsim.sim.prices import Prices

    cluster = load_cluster("dgx-h100:2x8")
    prices = Prices(cluster)
    for kind in ("AllReduce", "AllGather", "ReduceScatter", "AllToAll"):
        for matrix, d in (((8,), 0), ((2, 8), 0), ((2, 8), 1), ((16,), 0), ((4, 4), 1)):
            step = Step(kind, d, matrix[len(matrix) - 1 - d], 3.0e6)
            for first in (0, 1, 3):
                for _ in range(2):          # the second asks the kept shape
                    got = redistribution_time_s(step, cluster, matrix, first, 4.0, prices.shape)
                    assert got == redistribution_time_s(step, cluster, matrix, first, 4.0), (kind, matrix, d, first)
