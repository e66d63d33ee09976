"""FSDP's gradient accumulation without communication (ParallelConfig.no_sync: FSDP2's
set_requires_gradient_sync(False) on every micro-batch but the last, FSDP1's no_sync()): the
reduce-scatters priced once a step, the unsharded gradients held in memory, FSDP2's reduce hooks on
the last backward only, the refusals, and the plan's inputs and outputs.  The executor against the
single-process reference: tests/test_exec.py."""

import json
from collections import Counter

import pytest

from parsim.cli import main
from parsim.model.spec import Training
from parsim.plan import ParallelConfig, Plan
from parsim.refusals import config_refusal

from test_sim import IDEAL, assert_step_adds_up
from test_zero import _run as zero_run, _with_collectives


def _run(zero, no_sync, dp=4, m=3, cluster=IDEAL, training=None):
    """The estimate of tests/test_zero.py's uniform four-layer graph, with or without no_sync."""
    return zero_run(zero, dp=dp, m=m, cluster=cluster, training=training, no_sync=no_sync)[2]


@pytest.mark.parametrize("zero", [2, 3])
def test_the_reduce_scatters_run_once_a_step_and_the_gathers_as_before(zero):
    m = 3
    every, once = _run(zero, False, m=m), _run(zero, True, m=m)
    got, before = Counter(once.sharded_collectives[0]), Counter(every.sharded_collectives[0])
    assert {k: v * m for k, v in got.items() if k[0] == "reduce_scatter"} == \
        {k: v for k, v in before.items() if k[0] == "reduce_scatter"}
    assert {k: v for k, v in got.items() if k[0] == "all_gather"} == \
        {k: v for k, v in before.items() if k[0] == "all_gather"}
    # ring bytes: each reduce-scatter's (dp - 1) x its buffer, m - 1 of them fewer a unit
    units = sum(v for k, v in got.items() if k[0] == "reduce_scatter")
    unit = next(k[1] for k in got if k[0] == "reduce_scatter")
    assert sum(every.comm_bytes.values()) - sum(once.comm_bytes.values()) == pytest.approx(3 * unit * units * (m - 1))
    assert once.config["no_sync"] is True and "no_sync" not in every.config
    assert_step_adds_up(once)
    assert once.step_time_s <= every.step_time_s


@pytest.mark.parametrize("zero", [2, 3])
@pytest.mark.parametrize("reduce_dtype", [None, "fp32"])
def test_the_unsharded_gradients_are_held_beside_the_shards(zero, reduce_dtype):
    """Every parameter's gradient, unsharded, in the parameters' dtype (fp16 here: FSDP's unsharded parameters
    make them), beside the shards in the reduce dtype."""
    dp, params = 4, 4 * 1000
    training = Training(dp * 3, "fp16", "adam", grad_reduce_dtype=reduce_dtype)
    every, once = _run(zero, False, dp=dp, training=training), _run(zero, True, dp=dp, training=training)
    shard = every.ranks[0].memory.grads_bytes
    assert shard == pytest.approx(params * (4 if reduce_dtype else 2) / dp)
    assert once.ranks[0].memory.grads_bytes == pytest.approx(shard + params * 2)


@pytest.mark.parametrize("zero", [2, 3])
def test_fsdp2s_reduce_hooks_run_in_the_last_backward_only(zero):
    """FSDP2's host time per unit around a reduce-scatter (Collectives.fsdp_reduce_scatter_overhead_s)
    lands once a step under no_sync, m times without it."""
    x, m, units = 1e-3, 3, 4
    cluster = _with_collectives(IDEAL, fsdp_reduce_scatter_overhead_s=x)
    for no_sync, hooks in ((False, units * m), (True, units)):
        base, slow = _run(zero, no_sync, dp=2, m=m), _run(zero, no_sync, dp=2, m=m, cluster=cluster)
        assert slow.step_time_s - base.step_time_s == pytest.approx(hooks * x)


@pytest.mark.parametrize("zero,overlap,words", [
    (0, True, "below ZeRO-2 the gradients are reduced once a step already"),
    (1, True, "below ZeRO-2 the gradients are reduced once a step already"),
    (2, False, "with overlap_grad_reduce false"),
])
def test_no_sync_is_refused_where_it_does_not_apply(zero, overlap, words):
    cfg = ParallelConfig(dp=2, pp=1, microbatches=2, bounds=(0, 4), zero=zero, overlap_grad_reduce=overlap,
                         no_sync=True)
    field, why = config_refusal(cfg)
    assert field == "no_sync" and words in why


def test_no_sync_in_plan_json_cli_and_reports(tmp_path, capsys):
    plan = str(tmp_path / "plan.json")
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", "local-cpu", "--dp", "2", "--pp", "1",
                 "--microbatches", "2", "--zero", "3", "--no-sync", "-o", plan]) == 0
    assert "grads-last-microbatch" in capsys.readouterr().out
    saved = json.loads(open(plan).read())
    assert saved["parallel"]["no_sync"] is True and saved["estimate"]["config"]["no_sync"] is True
    assert Plan.from_json(saved, plan).config.no_sync
    del saved["parallel"]["no_sync"]
    assert not Plan.from_json(saved, plan).config.no_sync
    # a plan at zero 1 with it: one line naming the file and the field
    saved["parallel"].update(zero=1, no_sync=True)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(saved))
    assert main(["simulate", str(bad)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "parallel.no_sync" in err[0]
    # every export target reduces each micro-batch's gradients: refused in one line
    assert main(["export", plan, "--to", "torchtitan"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "parallel.no_sync" in err[0]
