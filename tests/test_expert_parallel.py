"""Expert parallelism in the executor (parsim.exec.expert_parallel): the tiny Mixtral with ep=2 on
2 gloo ranks (dp=2, each rank 4 of the 8 experts per layer, tokens exchanged by all_to_all_single)
equals one process with the same routing, its all-to-all bytes are Experts.all_to_all_bytes's rule, and
plans the executor cannot run are refused in one line; with dp=4 (two ranks per expert) the expert
gradients are averaged over their expert-data-parallel group; under a 1F1B pipeline (dp=2, pp=2,
4 ranks) too.  About 50 s on 2 cores (two of the runs have 4 ranks)."""

import json

import pytest

from executor_checks import assert_equals_reference
from parsim.cli import main
from parsim.errors import InputError
from parsim.exec import expert_parallel
from parsim.model.graph import DTYPE_BYTES
from parsim.model.spec import load_model
from parsim.plan import ParallelConfig


MOE = "examples/moe_tiny_local.yaml"          # 2 MoE layers, 8 experts top-2, h 64, 16 tokens, batch 8, fp32
STEPS = 2


def ep_plan(tmp_path, name, ep, *flags, model=MOE, **parallel):
    """A plan from ``parsim simulate`` with parallel.ep (and any other parallel field) set."""
    path = tmp_path / f"{name}.json"
    assert main(["simulate", model, "--cluster", "local-cpu", *flags, "-o", str(path), "--json"]) == 0
    d = json.loads(path.read_text())
    d["parallel"].update(ep=ep, **parallel)
    path.write_text(json.dumps(d))
    return str(path)


@pytest.fixture(scope="module")
def ep_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ep")
    plan = ep_plan(tmp, "dp2-ep2-m2", 2, "--dp", "2", "--microbatches", "2")
    out = tmp / "run"
    # step 1, then step 2 resumed from its checkpoint (whole experts saved, each rank's share loaded back)
    for steps, more in ((STEPS - 1, []), (STEPS, ["--resume"])):
        assert main(["run", plan, "--out", str(out), "--synthetic-size", "64", "--steps", str(steps), "--warmup", "1",
                     *more]) == 0
    return plan, str(out), json.loads((out / "measured.json").read_text())


def test_ep2_equals_the_single_process_reference(ep_run, capfd):
    plan, out, measured = ep_run
    # whole experts, gathered over the ep group at save; the loss of the resumed step, the run's last
    measured, got = assert_equals_reference(plan, out, STEPS, 64)
    assert len(measured["loss"]) == 1 and got["layers_0.mlp.experts.gate_up_proj"].shape == (8, 192, 64)
    # the dense gradients alone went through the dp all-reduce; experts have one rank each (dp x cp / ep = 1)
    spec = load_model(MOE)
    dense = sum(layer.param_count - (layer.experts.routed_params if layer.experts else 0) for layer in spec.graph.layers)
    assert sum(measured["grad_buckets_bytes"][0]) == dense * 4
    assert measured["expert_grad_buckets_bytes"] == [[]]


def test_all_to_all_bytes_are_the_rule(ep_run):
    plan, _, measured = ep_run
    spec = load_model(MOE)
    cfg = ParallelConfig(dp=2, pp=1, microbatches=2)
    tokens = cfg.microbatch_size(spec.training.global_batch_size) * 16          # T: the rank's tokens per micro-batch
    moe = [layer.experts for layer in spec.graph.layers if layer.experts is not None]
    dtype_bytes = DTYPE_BYTES[spec.graph.dtype]
    one = {ex.all_to_all_bytes(tokens, dtype_bytes) for ex in moe}
    assert one == {2 * 16 * 2 * 64 * 4}                                          # T k h x 4 bytes
    rule = sum(ex.all_to_all_bytes(tokens, dtype_bytes) for ex in moe) * cfg.microbatches
    ranks = measured["ep_all_to_all"]
    assert len(ranks) == 2
    for r in ranks:
        assert r["all_to_alls"] == 4 * len(moe) * cfg.microbatches
        # the dispatch and the combine's transpose scatter the rank's own T k rows: the rule exactly
        assert r["by_kind"]["dispatch"] == r["by_kind"]["combine-backward"] == rule
        # the combine and the dispatch's transpose scatter the rows its experts received (routing's share)
        assert r["by_kind"]["combine"] == r["by_kind"]["dispatch-backward"] == r["expert_rows"] * 64 * dtype_bytes
    # over the ep group, what was received is what was sent: the mean per rank is 4 x the rule
    assert sum(r["input_bytes"] for r in ranks) / len(ranks) == 4 * rule
    from parsim.report.cli_text import run_summary_lines
    line = next(x for x in run_summary_lines(measured, "run") if x.startswith("expert parallelism (ep=2)"))
    assert f"{4 * len(moe) * cfg.microbatches} token all-to-alls" in line and "busiest over mean" in line


def test_ep_on_a_dense_model_is_refused_in_one_line(tmp_path, capfd):
    plan = ep_plan(tmp_path, "dense", 2, "--dp", "2", model="tests/data/hf_tiny_llama.yaml")
    capfd.readouterr()
    assert main(["run", plan, "--out", str(tmp_path / "run")]) == 2
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "parallel.ep" in err and "no mixture-of-experts layers" in err


def test_ep_not_dividing_the_experts_is_refused(tmp_path, capfd):
    cfg = json.loads(open("examples/moe_tiny_local/config.json").read())
    cfg["num_local_experts"] = 6
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    model = tmp_path / "moe6.yaml"
    model.write_text(open(MOE).read().replace("moe_tiny_local/config.json", "config.json"))
    plan = ep_plan(tmp_path, "ep4", 4, "--dp", "2", model=str(model), dp=4)
    capfd.readouterr()
    assert main(["run", plan, "--out", str(tmp_path / "run")]) == 2
    err = capfd.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "parallel.ep: 4 does not divide the 6 routed experts" in err


def test_ep_with_zero_is_refused():
    spec = load_model(MOE)
    with pytest.raises(InputError, match="parallel.ep: the executor runs ep > 1 with zero 0 .got zero=1."):
        expert_parallel.check_supported(ParallelConfig(dp=2, pp=1, microbatches=2, ep=2, zero=1), spec, "plan.json")
    for cfg in (ParallelConfig(dp=2, pp=2, microbatches=2, ep=2), ParallelConfig(dp=2, pp=1, microbatches=2, ep=2,
                                                                                 recompute=True)):
        expert_parallel.check_supported(cfg, spec, "plan.json")
    with pytest.raises(InputError, match="parallel.recompute: the executor recomputes beside ep > 1 at tp 1 only"):
        expert_parallel.check_supported(ParallelConfig(dp=1, pp=1, tp=2, tp_layout="megatron-sp", microbatches=2, ep=2,
                                                       recompute=True), spec, "plan.json")


def test_ep_under_full_recomputation_equals_the_reference_and_exchanges_again(tmp_path):
    """dp=2, ep=2, every layer recomputed: the backward re-runs each MoE layer's forward, its
    split-size exchange, dispatch and combine again, so each rank issues 6 token all-to-alls a MoE
    layer and micro-batch (the simulator's a2a_calls: 2 forward, 4 backward) and 2 split-size
    exchanges (split_exchanges: 1 and 1); the step equals the single-process reference."""
    from parsim.cost.experts import a2a_calls, split_exchanges

    plan = ep_plan(tmp_path, "dp2-ep2-full", 2, "--dp", "2", "--microbatches", "2", "--recompute", "full")
    out = tmp_path / "run"
    assert main(["run", plan, "--out", str(out), "--synthetic-size", "64", "--steps", "2", "--warmup", "1"]) == 0
    measured, _ = assert_equals_reference(plan, out, 2, 64)
    graph = load_model(MOE).graph.with_recompute("full")
    moe = [layer for layer in graph.layers if layer.experts is not None]
    calls = sum(a2a_calls(layer, kind) for layer in moe for kind in "FBW") * 2        # 2 micro-batches
    exchanges = sum(split_exchanges(layer, kind) for layer in moe for kind in "FBW") * 2
    assert calls == 6 * len(moe) * 2 and exchanges == 2 * len(moe) * 2
    for r in measured["ep_all_to_all"]:
        assert r["all_to_alls"] == calls
        assert r["by_kind"]["dispatch"] == 2 * r["by_kind"]["combine-backward"]    # each forward's again
        assert r["split_bytes"] == exchanges * 8 * 8                                # E = 8 int64 counts each


def test_ep_with_a_dispatcher_the_executor_does_not_run_is_refused():
    """The executor dispatches every row by all_to_all_single, dropless: a model priced with the flex
    dispatcher or token dropping is refused, naming the field."""
    from dataclasses import replace

    spec = load_model(MOE)
    cfg = ParallelConfig(dp=2, pp=1, microbatches=2, ep=2)
    for training, field in ((replace(spec.training, moe_dispatcher="flex"), "training.moe_dispatcher"),
                            (replace(spec.training, moe_capacity_factor=1.0), "training.moe_capacity_factor")):
        with pytest.raises(InputError, match=f"plan.json: {field}: the executor runs the alltoall dispatcher"):
            expert_parallel.check_supported(cfg, replace(spec, training=training), "plan.json")


def test_ep_under_a_pipeline_equals_the_reference(tmp_path):
    """dp=2, pp=2 (1F1B, 2 micro-batches), ep=2 on 4 ranks: each stage's ep group (its pipeline rank
    in both replicas) exchanges the tokens of its own MoE layer."""
    plan = ep_plan(tmp_path, "dp2-pp2-ep2", 2, "--dp", "1", "--pp", "2", "--microbatches", "2", "--schedule", "1f1b",
                   dp=2)
    out = tmp_path / "run"
    assert main(["run", plan, "--nproc", "4", "--out", str(out), "--synthetic-size", "64", "--steps", "2",
                 "--warmup", "1"]) == 0
    measured, _ = assert_equals_reference(plan, out, 2, 64)
    rule = load_model(MOE).graph.layers[1].experts.all_to_all_bytes(2 * 16, 4)     # 2 sequences per micro-batch
    for r in measured["ep_all_to_all"]:                                            # one MoE layer per stage
        assert r["all_to_alls"] == 4 * 2 and r["by_kind"]["dispatch"] == 2 * rule


def test_experts_held_twice_average_over_their_expert_data_parallel_group(tmp_path):
    """dp=4, ep=2 on 4 ranks: each expert on 2 ranks (ParallelConfig.expert_dp_group), its gradient
    all-reduced over them (the expert buckets), the dense ones over all 4."""
    plan = ep_plan(tmp_path, "dp4-ep2", 2, "--dp", "2", dp=4)
    out = tmp_path / "run"
    assert main(["run", plan, "--nproc", "4", "--out", str(out), "--synthetic-size", "64", "--steps", "2",
                 "--warmup", "1"]) == 0
    measured, _ = assert_equals_reference(plan, out, 2, 64)
    spec = load_model(MOE)
    routed = sum(layer.experts.routed_params for layer in spec.graph.layers if layer.experts)
    assert sum(measured["expert_grad_buckets_bytes"][0]) == routed // 2 * 4      # this rank's half, fp32


def test_measured_all_to_all_bytes_equal_the_simulators(ep_run, tmp_path):
    """The simulator's per-rank all-to-all bytes (Estimate.ep_a2a_bytes, priced from the same rule)
    equal the run's mean over its ep group."""
    _, _, measured = ep_run
    path = tmp_path / "sim.json"
    assert main(["simulate", MOE, "--cluster", "local-cpu", "--dp", "2", "--microbatches", "2", "--ep", "2",
                 "-o", str(path), "--json"]) == 0
    estimate = json.loads(path.read_text())["estimate"]
    ranks = measured["ep_all_to_all"]
    assert sum(estimate["ep_a2a_bytes"]) == sum(r["input_bytes"] for r in ranks) / len(ranks)
