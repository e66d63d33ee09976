"""Activation recomputation modes (parsim.model.recompute): none, selective, full.

Memory against Korthikanti et al. 2022 (arXiv 2205.05198), Table 2, for a GPT layer with eager
attention; the selective time overhead against the prices of the recomputed attention kernels;
fused attention (nothing to recompute selectively); the planner picking selective; plan.json,
the CLI and the executor."""

import json

import pytest
import torch

from parsim.cli import main
from parsim.cost.compute import AnalyticalCompute
from parsim.cost.kernels import kernel_time_s
from parsim.cost.layer import layer_time_s, recompute_time_s, tp_comm_time_s
from parsim.errors import InputError
from parsim.hardware import load_cluster
from parsim.model.extract import InputSpec, extract_graph
from parsim.model.recompute import Recompute, recompute_mode
from parsim.model.spec import Training, load_model
from parsim.model.zoo.gpt import gpt
from parsim.plan import ParallelConfig, Plan
from parsim.search.planner import Constraints, plan
from parsim.shard.prepare import per_device_graph
from parsim.sim import simulate

# A GPT layer as Korthikanti et al. 2022 count it (Sec. 4.1: 16-bit activations, 1-byte dropout
# masks): s = 256 tokens, h = 512, a = 8 heads; per sample (b = 1)
S, H, A = 256, 512, 8


def _graph(attention: str):
    with torch.device("meta"):
        model = gpt(layers=2, hidden=H, heads=A, seq_len=S, vocab=1024, dropout=0.1, attention=attention)
    return extract_graph(model, InputSpec((S,), "int64"), dtype="fp16", batch=2)


@pytest.fixture(scope="module")
def eager():
    return _graph("eager")


@pytest.fixture(scope="module")
def fused():
    return _graph("sdpa")


# Extraction finds a few KiB per layer above the closed forms here (2 KiB with the sequence split,
# 4 KiB without; 32 KiB at GPT-3's size in tests/test_model.py): within 4 KiB of them, about 0.1%.
EXTRA_BYTES = 4096


@pytest.mark.parametrize("t", [1, 2, 4])
def test_memory_per_layer_matches_korthikanti_table_2(eager, t):
    """Table 2, bytes per layer (b = 1): no recomputation with tensor and sequence parallelism
    s h (34/t + 5 a s / (h t)); selective + sp 34 s h / t; full 2 s h, the layer's input (under
    sequence parallelism the input a rank holds is its 1/t of the sequence: 2 s h / t)."""
    layout = "megatron-sp" if t > 1 else ""
    none, sel, full = (per_device_graph(eager, t, layout, mode).layers[1] for mode in ("none", "selective", "full"))
    assert none.saved_bytes == pytest.approx(S * H * (34 / t + 5 * A * S / (H * t)), abs=EXTRA_BYTES)
    assert sel.saved_bytes == pytest.approx(34 * S * H / t, abs=EXTRA_BYTES)
    assert full.saved_bytes == 2 * S * H / t    # the previous layer's output
    # selective re-creates exactly what it dropped: the 5 a s^2 / t bytes of s x s tensors
    assert sel.recompute_bytes == none.saved_bytes - sel.saved_bytes == pytest.approx(5 * A * S * S / t)


@pytest.mark.parametrize("t", [2, 4])
def test_selective_with_tensor_parallelism_alone_matches_korthikanti_table_2(eager, t):
    """Table 2, tensor parallelism without sequence parallelism: s h (10 + 24/t + 5 a s / (h t))
    without recomputation, s h (10 + 24/t) with selective (the 10 s h the replicated norms and
    dropouts keep stay whole)."""
    none, sel = (per_device_graph(eager, t, "megatron", mode).layers[1] for mode in ("none", "selective"))
    assert none.saved_bytes == pytest.approx(S * H * (10 + 24 / t + 5 * A * S / (H * t)), abs=EXTRA_BYTES)
    assert sel.saved_bytes == pytest.approx(S * H * (10 + 24 / t), abs=EXTRA_BYTES)


def test_selective_recomputes_the_core_attention_kernels(eager):
    """The backward's extra time is the core attention's forward kernels (QK^T through AV) at
    their own prices, and their FLOPs are the forward's QK^T and AV, 4 b s^2 h per layer
    (Narayanan et al. 2021, Eq. 3's attention term; full recomputation re-runs 24 b s h^2 +
    4 b s^2 h)."""
    device = load_cluster("dgx-h100").device
    compute = AnalyticalCompute(device, "bf16")
    sel = per_device_graph(eager, recompute="selective").layers[1]
    none = eager.layers[1]
    core = sel.recompute_part.kernels
    assert [k.op for k in core if k.klass != "mem"] == ["bmm", "bmm"]
    assert {"_softmax", "native_dropout", "masked_fill"} <= {k.op for k in core}
    b = 4
    assert sum(k.at(b)[0] for k in core) == 4 * b * S * S * H
    priced = sum(kernel_time_s(k, b, device, compute.engines) for k in core)
    assert recompute_time_s(compute, sel, b) == pytest.approx(max(priced, len(core) * device.kernels.host_dispatch_s
                                                                   + device.kernels.layer_call_s))
    for kind in ("B", "I"):
        assert layer_time_s(compute, sel, kind, b) - layer_time_s(compute, none, kind, b) == pytest.approx(
            recompute_time_s(compute, sel, b))
    assert layer_time_s(compute, sel, "F", b) == layer_time_s(compute, none, "F", b)
    assert layer_time_s(compute, sel, "W", b) == layer_time_s(compute, none, "W", b)
    # full re-runs the whole forward: FLOPs 24 s h^2 + 4 s^2 h per sample
    full = per_device_graph(eager, recompute="full").layers[1]
    assert full.fwd_flops == pytest.approx(24 * S * H * H + 4 * S * S * H, rel=1e-3)
    assert recompute_time_s(compute, full, b) == compute.layer_time_s(full, "F", b)


def test_selective_under_tensor_parallelism_repeats_no_collective(eager):
    """The core attention is local to each tensor-parallel rank (whole heads): selective adds its
    kernels at 1/t of the work and no collective; full adds the forward's collectives again."""
    cluster = load_cluster("dgx-h100")
    compute = AnalyticalCompute(cluster.device, "bf16")
    t, b = 4, 2
    none, sel, full = (per_device_graph(eager, t, "megatron", mode).layers[1] for mode in ("none", "selective", "full"))
    assert sel.recompute_part.tp_share == 1 / t
    extra = layer_time_s(compute, sel, "B", b, cluster) - layer_time_s(compute, none, "B", b, cluster)
    assert extra == pytest.approx(recompute_time_s(compute, sel, b))
    forward_comm = tp_comm_time_s(full, "F", b, cluster)
    assert forward_comm > 0
    assert layer_time_s(compute, full, "B", b, cluster) == pytest.approx(
        layer_time_s(compute, none, "B", b, cluster) + compute.layer_time_s(full, "F", b) + forward_comm)


def test_fused_attention_has_nothing_to_recompute_selectively(fused):
    """sdpa (FlashAttention) keeps no s x s tensor and recomputes its scores in its own backward:
    selective equals none, in memory and in time."""
    sel = fused.with_recompute(Recompute.SELECTIVE)
    assert sel.recompute is Recompute.SELECTIVE
    assert [(x.saved_bytes, x.recompute_bytes) for x in sel.layers] == [(x.saved_bytes, 0.0) for x in fused.layers]
    spec = load_model("examples/gpt_tiny_local.yaml")
    cluster = load_cluster("local-cpu:1x1")
    training = Training(8, "fp32", "momentum")
    compute = AnalyticalCompute.for_training(cluster.device, training)
    g = _graph("sdpa")
    runs = [simulate(g, training, cluster, ParallelConfig(1, 1, 2, bounds=(0, 4), recompute=mode), compute)
            for mode in ("none", "selective")]
    assert runs[0].step_time_s == runs[1].step_time_s
    assert runs[0].peak_memory_bytes == runs[1].peak_memory_bytes
    del spec


def test_selective_sits_between_none_and_full_in_a_simulated_step():
    spec = load_model("examples/gpt_tiny_local.yaml")
    cluster = load_cluster("local-cpu:1x1")
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    runs = {mode: simulate(spec.graph, spec.training, cluster,
                           ParallelConfig(1, 1, 2, bounds=(0, len(spec.graph)), recompute=mode), compute)
            for mode in ("none", "selective", "full")}
    peak = {m: max(e.peak_memory_bytes) for m, e in runs.items()}
    step = {m: e.step_time_s for m, e in runs.items()}
    assert peak["full"] < peak["selective"] < peak["none"]
    assert step["none"] < step["selective"] < step["full"]
    assert runs["selective"].config["recompute"] == "selective"


def test_the_planner_picks_selective_where_none_does_not_fit():
    """A cap between selective's peak and none's: without recomputation nothing fits, selective
    does and is faster than full."""
    spec = load_model("examples/gpt_tiny_local.yaml")
    cluster = load_cluster("local-cpu:1x1")
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    fixed = dict(dp=1, pp=1, tp=1, cp=1, zero=0, microbatches=1)
    peaks = {mode: plan(spec, cluster, compute, Constraints(top=1, recompute=mode, **fixed), progress=False)
             .chosen.peak_memory_bytes for mode in ("none", "selective")}
    assert peaks["selective"] < peaks["none"]
    cap = int((peaks["selective"] + peaks["none"]) / 2)
    r = plan(spec, cluster, compute, Constraints(top=10, max_memory_bytes=cap, prune=False, **fixed), progress=False)
    assert r.chosen.config.recompute is Recompute.SELECTIVE
    assert {c.config.recompute for c in r.ranked} == {Recompute.SELECTIVE, Recompute.FULL}


def test_modes_read_bools_as_before_and_refuse_others():
    assert recompute_mode(True) is Recompute.FULL and recompute_mode(False) is Recompute.NONE
    assert ParallelConfig(1, 1, 1, recompute=True) == ParallelConfig(1, 1, 1, recompute="full")
    assert not Recompute.NONE and Recompute.SELECTIVE and Recompute.FULL
    assert f"{Recompute.SELECTIVE}" == str(Recompute.SELECTIVE) == "selective"
    with pytest.raises(ValueError, match="none, selective, full"):
        recompute_mode("partial")


def _plan_json(recompute) -> dict:
    spec = load_model("examples/gpt_tiny_local.yaml")
    cfg = ParallelConfig(1, 1, 1, bounds=(0, len(spec.graph)), recompute=recompute)
    p = Plan(spec.path, spec.name, tuple(spec.graph.names), 8, "fp32", "momentum", "local-cpu", 1, cfg, {})
    return p.to_json()


@pytest.mark.parametrize("written, read", [(True, Recompute.FULL), (False, Recompute.NONE),
                                           ("selective", Recompute.SELECTIVE), ("none", Recompute.NONE)])
def test_plan_json_keeps_the_mode_and_reads_old_bools(written, read):
    d = _plan_json("none")
    d["parallel"]["recompute"] = written
    assert Plan.from_json(d, "plan.json").config.recompute is read
    assert _plan_json(read)["parallel"]["recompute"] == read.value


def test_plan_json_with_an_unknown_mode_is_one_line_naming_the_field():
    d = _plan_json("none")
    d["parallel"]["recompute"] = "some"
    with pytest.raises(InputError, match=r"^plan.json: parallel.recompute: expected one of none, selective, full"):
        Plan.from_json(d, "plan.json")


def test_cli_simulate_and_plan_take_the_modes(tmp_path, capsys):
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", "local-cpu:1x1", "--dp", "1", "--pp", "1",
                 "--recompute", "selective", "-o", str(tmp_path / "s.json")]) == 0
    assert "recompute=selective" in capsys.readouterr().out
    assert json.loads((tmp_path / "s.json").read_text())["parallel"]["recompute"] == "selective"
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", "local-cpu:1x1", "--dp", "1", "--pp", "1",
                 "--recompute", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["recompute"] == "full"
    assert main(["plan", "examples/gpt_tiny_local.yaml", "--cluster", "local-cpu:1x1", "--dp", "1", "--pp", "1", "--tp", "1",
                 "--recompute", "selective", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "selective" in out


def test_executor_recomputes_the_attention_with_the_same_gradients():
    """stages.recompute_attention: the built-in GPT's attention checkpointed (dropout's random
    state replayed) gives the gradients of the plain run."""
    from parsim.exec.stages import recompute_attention

    grads = []
    for selective in (False, True):
        torch.manual_seed(0)
        model = gpt(layers=2, hidden=32, heads=4, seq_len=16, vocab=64, dropout=0.1)
        if selective:
            recompute_attention(model)
        torch.manual_seed(1)
        model(torch.randint(0, 64, (2, 16))).float().pow(2).mean().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)
