"""Megatron-Core's MoE-block recomputation (parsim.model.recompute's ``moe`` mode,
``--recompute-granularity selective --recompute-modules layernorm moe``) on the tiny Mixtral-style
model (examples/moe_tiny_local.yaml): what each layer drops and re-runs, by hand from its
operators and kernels; the all-to-alls its backward issues again; one ep rank's recomputed block;
the step and the peak between none and full; Megatron's flags both ways; the planner."""

import os

import pytest

from parsim.cost.experts import a2a_calls, expert_parallel_graph, split_exchanges
from parsim.model.recompute import Recompute
from parsim.model.recompute_modules import recomputed_ops

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "examples", "moe_tiny_local.yaml")


@pytest.fixture(scope="module")
def tiny():
    from parsim.model.spec import load_model
    return load_model(TINY)


def _block_ops(layer):
    """The decoder layer's own norms and every operator of its MLP block, by hand."""
    return [op for op in layer.ops if op.module in ("input_layernorm", "post_attention_layernorm")
            or op.module.split(".")[0] == "mlp"]


def test_moe_mode_drops_the_block_norms_and_the_moe_block(tiny):
    """Each MoE layer drops what its two block norms and its MLP block keep; its backward re-runs
    both norms' kernels and the block's forward from the router's GEMM (N = E experts) to the
    layer's end, less the residual add: the router, both grouped GEMMs, the SwiGLU and the
    combine, not the attention."""
    graph = tiny.graph
    done = graph.with_recompute("moe")
    assert done.recompute is Recompute.MOE
    for before, after in zip(graph.layers, done.layers):
        if before.experts is None:
            assert after is before
            continue
        dropped = sum(op.saved_bytes for op in _block_ops(before)) / graph.extraction_batch
        assert after.recompute_bytes == pytest.approx(dropped)
        assert after.saved_bytes == pytest.approx(before.saved_bytes - dropped)
        part = after.recompute_part
        assert part.experts == before.experts and after.recomputes_dispatch and not after.recomputes_forward
        fwd = [k for k in before.kernels if k.phase == "F"]
        router = next(i for i, k in enumerate(fwd) if k.gemm_at(1) is not None
                      and k.gemm_at(1)[1:3] == (before.experts.experts, before.experts.hidden))
        block = fwd[router:-1]
        assert fwd[-1].op == "add" and list(part.kernels[-len(block):]) == block
        runs = [i for i, k in enumerate(fwd) if k.op == "pow"]           # each RMSNorm run: pow ... mul, mul
        norms = fwd[runs[0]:runs[0] + 6] + fwd[runs[1]:runs[1] + 6]
        assert len(runs) == 2 and list(part.kernels[:-len(block)]) == norms
        assert [k.op for k in block].count("bmm") == 2 and not any(k.klass == "attention" for k in part.kernels)
        assert part.fwd_flops == pytest.approx(sum(op.flops for op in _block_ops(before)) / graph.extraction_batch)


def test_the_recomputed_block_issues_its_all_to_alls_again(tiny):
    """A MoE layer's backward under moe runs the dispatch and combine again, and their split-size
    exchange, as under full; none and deepseek do not."""
    layer = {m: next(x for x in tiny.graph.with_recompute(m).layers if x.experts is not None)
             for m in ("none", "deepseek", "moe", "full")}
    assert [a2a_calls(layer[m], "B") for m in ("none", "deepseek", "moe", "full")] == [2, 2, 4, 4]
    assert [split_exchanges(layer[m], "B") for m in ("none", "deepseek", "moe", "full")] == [0, 0, 1, 1]
    assert all(a2a_calls(layer[m], "F") == 2 and a2a_calls(layer[m], "W") == 0 for m in layer)


@pytest.mark.parametrize("ep", [2, 4])
def test_an_ep_rank_recomputes_its_own_experts(tiny, ep):
    """Under expert parallelism the recomputed block is the rank's: its grouped GEMMs are the
    layer's own rescaled ones (E/ep groups, rows x ep x imbalance), and the local sorts the
    dispatch adds run again with the forward's; its routed activations are recomputed, not kept."""
    base = tiny.graph.with_recompute("moe")
    g = expert_parallel_graph(base, ep, 1.5)
    for before, layer in zip(base.layers, g.layers):
        if layer.experts is None:
            continue
        part = layer.recompute_part
        own = [k for k in layer.kernels if k.phase == "F" and k.op in ("bmm", "moe_sort_chunks")]
        redone = [k for k in part.kernels if k.op in ("bmm", "moe_sort_chunks")]
        assert redone == own and [k.gemm[3] for k in redone if k.op == "bmm"] == [(8 / ep, 0.0)] * 2
        assert layer.saved_bytes == pytest.approx(before.saved_bytes)       # the imbalance's rows are recomputed
        assert layer.recompute_bytes > before.recompute_bytes


def test_the_step_and_the_peak_sit_between_none_and_full(tiny):
    from parsim.cost.compute import AnalyticalCompute
    from parsim.hardware import load_cluster
    from parsim.plan import ParallelConfig
    from parsim.sim import simulate

    cluster = load_cluster("dgx-h100:1x8")
    compute = AnalyticalCompute.for_training(cluster.device, tiny.training)
    whole = (0, len(tiny.graph.layers))
    est = {m: simulate(tiny.graph, tiny.training, cluster,
                       ParallelConfig(dp=8, pp=1, microbatches=1, bounds=whole, ep=4, recompute=m),
                       compute, keep_timeline=False) for m in ("none", "moe", "full")}
    steps = [est[m].step_time_s for m in ("none", "moe", "full")]
    peaks = [max(est[m].peak_memory_bytes) for m in ("none", "moe", "full")]
    assert steps[0] < steps[1] < steps[2]
    assert peaks[0] > peaks[1] > peaks[2]


@pytest.mark.parametrize("mode, modules", [("deepseek", "layernorm mla_up_proj moe_act"), ("moe", "layernorm moe")])
def test_megatron_flags_carry_the_modules_both_ways(tmp_path, capsys, mode, modules):
    """Exported as --recompute-modules with every module; read back as the same mode (the modules
    in any order, as Megatron's list takes them), and the step priced the same."""
    import json

    from parsim.cli import main

    plan = tmp_path / "moe.json"
    assert main(["simulate", TINY, "--cluster", "local-cpu:1x2", "--dp", "2", "--ep", "2", "--microbatches", "2",
                 "--recompute", mode, "-o", str(plan)]) == 0
    out = tmp_path / "export.megatron"
    assert main(["export", str(plan), "--to", "megatron", "-o", str(out)]) == 0
    assert f"--recompute-modules {modules}" in out.read_text().splitlines()
    out.write_text(out.read_text().replace(f"--recompute-modules {modules}",
                                           "--recompute-modules " + " ".join(reversed(modules.split()))))
    again = tmp_path / "again.json"
    assert main(["simulate", "--from", "megatron", str(out), "--cluster", "local-cpu:1x2", "-o", str(again)]) == 0
    a, b = (json.loads(p.read_text()) for p in (plan, again))
    assert b["parallel"]["recompute"] == mode
    assert b["estimate"]["step_time_s"] == pytest.approx(a["estimate"]["step_time_s"], rel=1e-9)
    capsys.readouterr()


def test_megatron_modules_parsim_does_not_price_are_one_line(tmp_path, capsys):
    from parsim.cli import main

    args = tmp_path / "args.sh"
    args.write_text("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 16 --micro-batch-size 1 "
                    "--global-batch-size 8 --vocab-size 128 --recompute-granularity selective "
                    "--recompute-modules mlp layernorm\n")
    rc = main(["simulate", "--from", "megatron", str(args), "--cluster", "local-cpu:1x2"])
    err = capsys.readouterr().err
    assert rc != 0 and len(err.strip().splitlines()) == 1
    assert "--recompute-modules" in err and "mlp layernorm" in err and "layernorm moe (moe)" in err


def test_the_planner_tries_the_moe_mode_where_asked_only(tiny):
    """The search leaves moe out unless the run fixes it (parsim.search.enumerate: searched, it adds
    a third to DeepSeek-V3's candidates for the same pick); fixed, every candidate takes it."""
    from parsim.hardware import load_cluster
    from parsim.search.enumerate import Constraints, variants

    cluster = load_cluster("dgx-h100:1x8")
    searched = {rc for _, _, rc, _, _ in variants(tiny, cluster, Constraints(tp=1))}
    fixed = {rc for _, _, rc, _, _ in variants(tiny, cluster, Constraints(tp=1, recompute="moe"))}
    assert Recompute.MOE not in searched and Recompute.DEEPSEEK in searched and fixed == {Recompute.MOE}


def test_a_deepseek_layer_and_its_mtp_head_recompute_the_block_only(tmp_path):
    """On a tiny DeepSeek-V3 with its multi-token-prediction block in the head: each MoE block's
    recomputed forward ends at the add joining the shared expert (not the residual add, not the
    head's norms and logits), with the block norms of the layer or of the MTP block (not q_a/kv_a's,
    nor the model's final norm); what is dropped is those norms' and the MLP block's."""
    from tiny_deepseek import tiny_deepseek_graph

    graph = tiny_deepseek_graph(str(tmp_path), mtp_layers=1)
    done = graph.with_recompute("moe")
    for name in ("layers.1", "head"):
        before = next(x for x in graph.layers if x.name == name)
        part = next(x for x in done.layers if x.name == name).recompute_part
        ops = [k.op for k in part.kernels]
        assert ops.count("rsqrt") == 2 and ops.count("bmm") == 2 and ops[-1] == "add"
        assert ops[-6:-1] == ["mm", "silu", "mm", "mul", "mm"]          # the shared expert, then its add
        fwd = [k for k in before.kernels if k.phase == "F"]
        assert len(fwd) - fwd.index(part.kernels[-1]) > 1                 # the residual add (and the head) left out
        dropped = {op.module for op in recomputed_ops(before, Recompute.MOE)}
        prefix = "mtp." if name == "head" else ""
        assert {m for m in dropped if "norm" in m} <= {prefix + "input_layernorm", prefix + "post_attention_layernorm"}
        assert any(m.startswith(prefix + "mlp") for m in dropped)


@pytest.mark.parametrize("ep, cap_bytes", [(2, None), (4, None), (2, 3 * 2**20)])
def test_the_pruned_search_under_moe_ranks_what_the_exhaustive_search_ranks(tiny, ep, cap_bytes):
    """With every candidate recomputing its MoE blocks (at ep 2 or 4, every schedule and ZeRO stage),
    the branch and bound's floors, lower bounds and peak floors (which read the recomputed part, its
    all-to-alls and its routed activations) prune nothing the exhaustive search ranks; under a cap
    that drops some, too."""
    from parsim.cost.compute import AnalyticalCompute
    from parsim.hardware import load_cluster
    from parsim.search.planner import Constraints, plan

    cluster = load_cluster("dgx-h100:2x8")
    compute = AnalyticalCompute.for_training(cluster.device, tiny.training)
    only = dict(recompute="moe", ep=ep, **({"max_memory_bytes": cap_bytes} if cap_bytes else {}))
    pruned = plan(tiny, cluster, compute, Constraints(top=8, **only), progress=False)
    full = plan(tiny, cluster, compute, Constraints(top=8, prune=False, **only), progress=False)
    assert pruned.simulated < full.simulated and pruned.considered == full.considered
    assert {x.config.ep for x in full.ranked} == {ep}
    assert [x.key() for x in pruned.ranked] == [x.key() for x in full.ranked]
    assert [x.estimate.step_time_s for x in pruned.ranked] == [x.estimate.step_time_s for x in full.ranked]
    assert all(x.config.recompute is Recompute.MOE for x in full.ranked)
