"""FSDP beside a pipeline, as torchtitan runs it (ZeRO-2 with pp > 1; parsim.sim.simulate's
check_config, ParallelConfig.grads_reduced_once): FSDP2 stages driven by torch.distributed.pipelining
keep the gathered parameters through the step (torchtitan's reshard_after_forward "default": False
under pp) and reduce-scatter once, after each stage's last backward (torch's PipelineStage:
backward_maybe_with_nosync, perform_reduce_grad).  The collectives, their timing, the memory, the
refusals, the search, the export and import, and the executor against the single-process reference."""

import json
from collections import Counter
from dataclasses import replace

import pytest

from parsim.cli import main
from parsim.cost.compute import AnalyticalCompute
from parsim.errors import InfeasibleError
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.schedule.actions import Kind
from parsim.search.planner import Constraints, plan

from executor_checks import assert_equals_reference
from test_export import GPT_SDPA, LLAMA_DEBUG_TOML, _roundtrip, _same_plan
from test_sim import assert_step_adds_up
from test_zero import _run

PARAMS = 1000          # a layer's, tests/test_zero.py's uniform graph (fp16 + Adam there)


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_each_unit_gathers_once_and_reduce_scatters_once_a_step(schedule):
    """Whatever the micro-batches: one all-gather and one reduce-scatter of each unit a step, on
    every stage, as ZeRO-2 at pp = 1 under no_sync runs them (its per-stage view of the same layers)."""
    m = 4
    _, cfg, piped = _run(2, dp=2, pp=2, m=m, schedule=schedule)
    two = _run(2, dp=2, pp=2, m=2, schedule=schedule)[2]
    assert cfg.grads_reduced_once and not cfg.no_sync
    for stage in range(2):
        got = Counter(piped.sharded_collectives[stage])
        assert {op for op, _ in got} == {"all_gather", "reduce_scatter"}
        assert got == Counter(two.sharded_collectives[stage])         # each unit once, whatever m
    _, _, flat = _run(2, dp=2, pp=1, n_layers=2, m=m, no_sync=True)      # one stage's two layers
    assert Counter(flat.sharded_collectives[0]) == Counter(piped.sharded_collectives[1])
    assert_step_adds_up(piped)


def test_the_reduce_scatters_start_after_the_stages_last_backward():
    """torch's PipelineStage calls FSDP's post-backward once every backward of the stage is done: no
    bucket overlaps a backward; at pp = 1 under no_sync FSDP2's hooks reduce during the last one."""
    def starts(est):
        recs = est.timeline.records
        last_b = {r: max(e for rr, a, _, _, e in recs if rr == r and a.kind is Kind.B) for r in {x[0] for x in recs}}
        return [(s, last_b[r]) for r, a, _, s, _ in recs if a.kind is Kind.REDUCE_GRAD]
    _, _, piped = _run(2, dp=2, pp=2, m=4)
    reduced = starts(piped)
    assert reduced and all(s >= last - 1e-12 for s, last in reduced)
    _, _, flat = _run(2, dp=2, pp=1, m=4, no_sync=True)
    assert any(s < last - 1e-12 for s, last in starts(flat))


def test_the_memory_holds_the_gathered_parameters_and_unsharded_gradients_through_the_step():
    """A stage's 2 x 1,000 fp16 parameters over dp = 2: the unsharded copies and the shards (2 +
    2/2 bytes each), the gradients' shards and their unsharded sum (2/2 + 2), Adam's 12 bytes over 2."""
    dp, held = 2, 2 * PARAMS
    _, _, est = _run(2, dp=dp, pp=2, m=4)
    for rank in est.ranks:
        mem = rank.memory
        assert mem.params_bytes == pytest.approx(held * 2 * (1 + 1 / dp))
        assert mem.grads_bytes == pytest.approx(held * 2 / dp + held * 2)
        assert mem.optimizer_bytes == pytest.approx(held * 12 / dp)
    # no_sync says nothing more beside a pipeline
    assert _run(2, dp=dp, pp=2, m=4, no_sync=True)[2].step_time_s == est.step_time_s


@pytest.mark.parametrize("fields,words", [
    ({"zero": 3}, "zero=3 with pp=2: beside a pipeline parsim prices FSDP as torchtitan runs it"),
    ({"zero": 2, "overlap_grad_reduce": False}, "overlap_grad_reduce=false with zero 2 and pp=2"),
])
def test_what_it_does_not_price_is_refused_in_one_line(fields, words):
    with pytest.raises(InfeasibleError, match=words):
        _run(dp=2, pp=2, m=2, **fields)


def test_the_search_takes_it_where_zero_2_is_fixed_only():
    spec = load_model("examples/resnet50_cifar10_seeds_split.yaml")
    cluster = load_cluster("ascend910:1x8")
    compute = AnalyticalCompute.for_training(cluster.device, spec.training)
    c = Constraints(top=8, tp=1, pp=4)
    fixed = plan(spec, cluster, compute, replace(c, zero=2), progress=False)
    assert {(x.config.zero, x.config.pp) for x in fixed.ranked} == {(2, 4)}
    assert all(x.estimate.step_time_s > 0 for x in fixed.ranked)
    searched = plan(spec, cluster, compute, c, progress=False)
    assert {x.config.zero for x in searched.ranked} <= {0, 1}


def test_torchtitan_runs_it_and_reads_it_back(tmp_path, capsys):
    """torchtitan's FSDP over 2 ranks beside 2 pipeline stages, its default reshard policy: read as
    zero 2 at pp 2; exported with the parameters kept (never resharded) and read back, the same plan."""
    toml = tmp_path / "tt.toml"
    toml.write_text(LLAMA_DEBUG_TOML.replace("data_parallel_replicate_degree = 2", "data_parallel_replicate_degree = 1")
                    .replace("data_parallel_shard_degree = 1", "data_parallel_shard_degree = 2"))
    plan_json = tmp_path / "plan.json"
    assert main(["simulate", "--from", "torchtitan", str(toml), "--cluster", "dgx-h100:1x8", "-o", str(plan_json)]) == 0
    assert "grads-last-microbatch" in capsys.readouterr().out
    a, b = _roundtrip(tmp_path, capsys, plan_json, "torchtitan", "dgx-h100:1x8")
    assert (a["parallel"]["dp"], a["parallel"]["pp"], a["parallel"]["zero"]) == (2, 2, 2)
    _same_plan(a, b)
    assert 'fsdp_reshard_after_forward = "never"' in (tmp_path / "export.torchtitan").read_text()
    # an explicit no_sync changes nothing beside a pipeline, and torchtitan takes it
    saved = json.loads(plan_json.read_text())
    saved["parallel"]["no_sync"] = True
    plan_json.write_text(json.dumps(saved))
    assert main(["export", str(plan_json), "--to", "torchtitan", "-o", str(tmp_path / "again.toml")]) == 0


@pytest.mark.parametrize("target", ["megatron", "deepspeed", "mindspore"])
def test_other_frameworks_refuse_it_in_one_line(tmp_path, capsys, target):
    """A zero 2 x pp 2 plan of the tiny GPT with fused attention (Megatron refuses eager attention first),
    refused in one line naming the file and the field."""
    out, model = str(tmp_path / "plan.json"), tmp_path / "gpt.yaml"
    model.write_text(GPT_SDPA)
    assert main(["simulate", str(model), "--cluster", "local-cpu:2x2", "--dp", "2", "--pp", "2", "--microbatches", "2",
                 "--zero", "2", "-o", out]) == 0
    assert "grads-last-microbatch" in capsys.readouterr().out
    assert main(["export", out, "--to", target]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "parallel.zero" in err[0] and out in err[0]


def test_a_torchtitan_config_that_reshards_under_pp_is_refused(tmp_path, capsys):
    toml = tmp_path / "job.toml"
    toml.write_text('[model]\nname = "llama3"\nflavor = "debugmodel"\n[training]\nlocal_batch_size = 8\nseq_len = 256\n'
                    '[parallelism]\ndata_parallel_shard_degree = 2\npipeline_parallel_degree = 2\n'
                    'fsdp_reshard_after_forward = "always"\n')
    assert main(["simulate", "--from", "torchtitan", str(toml), "--cluster", "dgx-a100:1x8"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "parallelism.fsdp_reshard_after_forward" in err[0]


def test_a_mindformers_config_sharding_accumulated_gradients_beside_a_pipeline_is_refused(tmp_path, capsys):
    src = tmp_path / "run.yaml"
    src.write_text("parallel_config:\n  data_parallel: 2\n  model_parallel: 1\n  pipeline_stage: 2\n"
                   "  micro_batch_num: 2\nparallel:\n  enable_parallel_optimizer: true\n"
                   "  parallel_optimizer_config:\n    gradient_accumulation_shard: true\n"
                   "model:\n  model_config:\n    type: LlamaConfig\n    num_layers: 4\n    hidden_size: 64\n"
                   "    num_heads: 4\n    seq_length: 32\n    vocab_size: 128\n    intermediate_size: 128\n")
    assert main(["simulate", "--from", "mindformers", str(src), "--cluster", "dgx-a100:1x8"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gradient_accumulation_shard" in err[0], err


@pytest.mark.parametrize("schedule", [["1f1b"], ["interleaved", "--chunks", "2"], ["zbh1"]])
def test_the_executor_runs_it_equal_to_the_reference_with_the_priced_collectives(tmp_path, capfd, schedule):
    """dp 2 x pp 2 at ZeRO-2 on 4 gloo ranks, FSDP2 stages under torch.distributed.pipelining (one stage
    a rank; two, interleaved; the split backward of ZB-H1): two steps equal the single-process reference,
    and each stage's all-gathers and reduce-scatters (kind and bytes) are the simulator's, each unit once
    a step."""
    plan = str(tmp_path / "plan.json")
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", "local-cpu:2x2", "--dp", "2", "--pp", "2",
                 "--microbatches", "4", "--schedule", *schedule, "--zero", "2", "-o", plan, "--json"]) == 0
    out = tmp_path / "run"
    assert main(["run", plan, "--out", str(out), "--synthetic-size", "256", "--steps", "2"]) == 0
    measured, _ = assert_equals_reference(plan, out, 2, 256)
    saved = json.loads(open(plan).read())["estimate"]
    counted = [Counter(tuple(c) for c in stage) for stage in measured["sharded_collectives"]]
    assert counted == [Counter(tuple(c) for c in stage) for stage in saved["sharded_collectives"]]
    for stage, units in zip(counted, saved["grad_buckets_bytes"]):       # FSDP2's units, each reduced once
        assert sum(n for (op, _), n in stage.items() if op == "reduce_scatter") == len(units)
