"""``parsim run`` for a newcomer: it ends with the measured step and peak memory against the
plan's prediction; it warns when --steps leaves no step to time; it refuses, in one line and
before any process starts, a plan made for another kind of cluster or for a model.yaml that has
changed since (unless --force).  One 2-rank run of the tiny GPT; the rest launch nothing."""

import json
import shutil

import pytest

from parsim.cli import main
from parsim.errors import InputError
from parsim.exec import launch as launch_module
from parsim.exec.measure import predicted_against_measured
from parsim.exec.train import RunOptions, check_run, run_warnings
from parsim.plan import load_plan
from parsim.report.cli_text import run_summary_lines

GPT = "examples/gpt_tiny_local.yaml"


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "gpt.yaml"
    shutil.copy(GPT, path)
    return path


def _plan(tmp_path, model, cluster="local-cpu", *flags):
    path = str(tmp_path / f"plan-{cluster.replace(':', '_')}.json")
    assert main(["simulate", str(model), "--cluster", cluster, *flags, "-o", path, "--json"]) == 0
    return path


@pytest.fixture
def no_launch(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("launched processes")
    monkeypatch.setattr(launch_module, "launch", refuse)


def test_a_plan_for_another_cluster_is_refused_before_any_process_starts(tmp_path, model, capsys, no_launch):
    plan = _plan(tmp_path, model, "ascend910:1x8", "--dp", "8", "--pp", "1", "--microbatches", "1")
    capsys.readouterr()
    assert main(["run", plan, "--steps", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "cluster.spec: the plan was made for ascend910:1x8 (Ascend NPUs, hccl)" in err
    assert "this machine runs gloo on CPUs" in err and "--cluster local-cpu" in err and "--force" in err
    # told to, it goes on, and says what it is doing
    warned = run_warnings(RunOptions(plan=plan, force=True), load_plan(plan))
    assert len(warned) == 1 and "running it anyway: --force" in warned[0]


def test_a_changed_model_is_refused_and_a_reformatted_one_is_not(tmp_path, model, capsys, no_launch):
    plan = _plan(tmp_path, model, "local-cpu", "--dp", "1", "--pp", "2", "--microbatches", "2")
    recorded = json.loads(open(plan).read())["model"]["sha256"]
    assert len(recorded) == 64
    model.write_text("# a comment, the keys reflowed\n" + model.read_text().replace(", optimizer: momentum",
                                                                                  ",\n  optimizer: momentum"))
    check_run(RunOptions(plan=plan))                          # the same content: not stale
    model.write_text(model.read_text().replace("global_batch_size: 8", "global_batch_size: 8, recompute: true"))
    with pytest.raises(InputError, match=r"model\.sha256: .*gpt\.yaml changed since the plan was made"):
        check_run(RunOptions(plan=plan))
    assert main(["run", plan, "--steps", "4"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "plan again, or pass --force" in err
    warned = run_warnings(RunOptions(plan=plan, force=True), load_plan(plan))
    assert len(warned) == 1 and "model.sha256" in warned[0]
    # simulate re-prices the plan on the model as it is now, and says so in one line
    capsys.readouterr()
    assert main(["simulate", plan]) == 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("parsim: note: ") and "model.sha256" in err and "priced on the model as it is now" in err
    # a plan written before the digest is not judged
    d = json.loads(open(plan).read())
    del d["model"]["sha256"]
    open(plan, "w").write(json.dumps(d))
    assert run_warnings(RunOptions(plan=plan), load_plan(plan)) == []


def test_steps_not_above_the_warmup_warn_and_the_summary_says_why_there_is_no_time(tmp_path, model):
    plan = _plan(tmp_path, model, "local-cpu", "--dp", "2", "--pp", "1", "--microbatches", "1")
    loaded = load_plan(plan)
    warned = run_warnings(RunOptions(plan=plan, steps=3, warmup=3), loaded)
    assert warned == ["--steps 3 is not above --warmup 3: every step is a warm-up step, so no step time is "
                      "measured (step_time_s: null); use --steps 4 or more"]
    assert run_warnings(RunOptions(plan=plan, steps=4, warmup=3), loaded) == []
    out = {"world_size": 2, "backend": "gloo", "device": "cpu", "steps": 3, "warmup": 3,
           "step_times_s": [0.1, 0.1, 0.1], "step_time_s": None, "peak_memory_bytes": [2 * 2**20, 3 * 2**20]}
    out["predicted"] = predicted_against_measured(loaded, out, "gloo")
    assert out["predicted"]["step_time_error"] is None
    line = run_summary_lines(out, "runs/x")[0]
    assert "step time: not measured: all 3 step(s) were warm-up (--warmup 3); run with --steps 4 or more" in line
    peak = max(loaded.estimate["peak_memory_bytes"])
    assert f"error {(peak - 3 * 2**20) / (3 * 2**20):+.1%}" in line
    # a forced run on other devices: the comparison is flagged as not this machine's
    other = predicted_against_measured(loaded, out, "nccl")
    assert other["same_cluster"] is False
    assert "not this machine" in run_summary_lines({**out, "predicted": other}, "runs/x")[1]


def test_a_run_ends_with_its_measurement_against_the_plan(tmp_path, model, capfd):
    plan = _plan(tmp_path, model, "local-cpu", "--dp", "1", "--pp", "2", "--microbatches", "2")
    capfd.readouterr()
    out = tmp_path / "run"
    assert main(["run", plan, "--steps", "4", "--out", str(out), "--synthetic-size", "64"]) == 0
    printed = capfd.readouterr().out.splitlines()
    measured = json.loads((out / "measured.json").read_text())
    p = measured["predicted"]
    predicted = load_plan(plan).estimate
    assert p["step_time_s"] == predicted["step_time_s"] and p["same_cluster"]
    assert p["measured_step_time_s"] == measured["step_time_s"] > 0
    assert p["step_time_error"] == pytest.approx((p["step_time_s"] - p["measured_step_time_s"])
                                                 / p["measured_step_time_s"])
    assert p["measured_peak_memory_bytes"] == max(measured["peak_memory_bytes"]) > 0
    summary = next(line for line in printed if line.startswith("summary"))
    assert "(2 ranks, gloo on cpu)" in summary and "median of 1 step(s) after 3 warm-up" in summary
    assert f"error {p['step_time_error']:+.1%}" in summary and f"error {p['peak_memory_error']:+.1%}" in summary
    assert printed[-1] == f"wrote {out}/measured.json and measured_trace.json"
