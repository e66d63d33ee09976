"""MoE Parallel Folding in the executor (parsim.exec.folding): the tiny Mixtral at tp=2 (megatron-sp),
dp=2, ep=2 on 4 gloo ranks, each ep group the two tensor-parallel ranks of a replica (the MoE
blocks on each rank's half of the sequence), equals one process; its all-to-all bytes are the
simulator's, its expert gradients go over the folded expert-data-parallel group; what it cannot
run is refused in one line.  About 40 s on 2 cores."""

import json

import pytest

from executor_checks import assert_equals_reference
from parsim.cli import main
from parsim.model.spec import load_model
from parsim.plan import ParallelConfig

MOE = "examples/moe_tiny_local.yaml"          # 2 MoE layers, 8 experts top-2, h 64, 16 tokens, batch 8, fp32


def folded_plan(tmp_path, name, *flags):
    path = tmp_path / f"{name}.json"
    assert main(["simulate", MOE, "--cluster", "local-cpu:2x2", "--dp", "2", "--tp", "2", "--microbatches", "2",
                 *flags, "-o", str(path), "--json"]) == 0
    return str(path)


def test_tp2_ep2_folded_equals_the_single_process_reference(tmp_path):
    plan = folded_plan(tmp_path, "dp2-tp2-ep2", "--ep", "2")
    cfg = ParallelConfig(dp=2, pp=1, microbatches=2, tp=2, ep=2)
    assert cfg.ep_group(0, 0) == (0, 1) and cfg.expert_dp_group(0, 0) == (0, 2)     # ep across tp, edp across dp
    out = tmp_path / "run"
    assert main(["run", plan, "--nproc", "4", "--out", str(out), "--synthetic-size", "64", "--steps", "2",
                 "--warmup", "1"]) == 0
    measured, got = assert_equals_reference(plan, out, 2, 64)
    assert got["layers_0.mlp.experts.gate_up_proj"].shape == (8, 192, 64)              # whole experts saved
    spec = load_model(MOE)
    moe = [layer.experts for layer in spec.graph.layers if layer.experts is not None]
    # each rank dispatches its s/tp tokens: b = 8 / (dp x m) = 2 sequences of 16 / 2 tokens, k = 2, h = 64, fp32
    one = moe[0].all_to_all_bytes(2 * 16 // 2, 4)
    assert one == 2 * 8 * 2 * 64 * 4
    for r in measured["ep_all_to_all"]:
        assert r["all_to_alls"] == 4 * len(moe) * 2 and r["by_kind"]["dispatch"] == one * len(moe) * 2
    estimate = json.loads(open(plan).read())["estimate"]
    ranks = measured["ep_all_to_all"]
    assert sum(estimate["ep_a2a_bytes"]) == sum(r["input_bytes"] for r in ranks) / len(ranks)
    # the experts' gradients over their expert-data-parallel group (2 ranks), E/2 of each layer's a rank
    routed = sum(ex.routed_params for ex in moe)
    assert sum(measured["expert_grad_buckets_bytes"][0]) == routed // 2 * 4


@pytest.mark.parametrize("flags, says", [
    (("--ep", "2", "--etp", "2"), "parallel.etp: the executor keeps each expert whole beside tp"),
    (("--ep", "2", "--zero", "1"), "parallel.ep: the executor runs ep > 1 with zero 0"),
])
def test_what_the_folded_executor_cannot_run_is_refused(tmp_path, capfd, flags, says):
    plan = folded_plan(tmp_path, "p", *flags)
    capfd.readouterr()
    assert main(["run", plan, "--out", str(tmp_path / "run")]) == 2
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err
