"""The command line: model, cluster, simulate; --json keys; output files."""

import json

import pytest

from parsim.cli import main


def _json(capsys, argv):
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_model_json(capsys):
    d = _json(capsys, ["model", "examples/resnet50_cifar10.yaml"])
    assert d["totals"]["param_count"] == 23_528_522 and len(d["graph"]["layers"]) == 18


def test_cluster_json_from_rank_table(capsys):
    d = _json(capsys, ["cluster", "examples/rank_table_16pcs.json"])
    assert d["world_size"] == 16 and d["groups_per_node"] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_simulate_json_keys_and_files(capsys, tmp_path):
    trace, png, mem, csv = (tmp_path / n for n in ("t.json", "g.png", "m.svg", "a.csv"))
    d = _json(capsys, ["simulate", "examples/resnet50_cifar10.yaml", "--cluster", "ascend910:1x8", "--dp", "4",
                       "--pp", "2", "--microbatches", "8", "--schedule", "1f1b", "--trace", str(trace),
                       "--gantt", str(png), "--memory-plot", str(mem), "--csv", str(csv)])
    for key in ("step_time_s", "throughput_samples_per_s", "bubble_fraction", "sync_wait_fraction",
                "exposed_comm_fraction", "peak_memory_bytes", "memory_breakdown", "comm_bytes"):
        assert key in d
    for r in d["ranks"]:     # each rank's step, by cause (parsim.sim.estimate.RankEstimate)
        parts = ("busy_s", "input_s", "exposed_comm_s", "bubble_s", "sync_wait_s")
        assert sum(r[k] for k in parts) == pytest.approx(d["step_time_s"], rel=1e-9)
    assert d["bubble_fraction"] == pytest.approx(sum(r["bubble_s"] for r in d["ranks"]) / (2 * d["step_time_s"]))
    assert d["sync_wait_fraction"] == pytest.approx(sum(r["sync_wait_s"] for r in d["ranks"]) / (2 * d["step_time_s"]))
    assert d["sync_wait_fraction"] > d["bubble_fraction"]    # rank 0 waits on rank 1's gradient all-reduce
    assert len(d["peak_memory_bytes"]) == 2 and d["throughput_samples_per_s"] > 0
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["pid"] for e in events} == {0, 1} and any(e["name"] == "1B7" for e in events)
    assert png.read_bytes()[:4] == b"\x89PNG" and mem.read_text().lstrip().startswith("<?xml")
    assert "REDUCE_GRAD" in csv.read_text()


def test_simulate_manual_split_from_model_yaml(capsys):
    d = _json(capsys, ["simulate", "examples/resnet50_cifar10_seeds_split.yaml", "--cluster", "ascend910:1x8"])
    assert d["config"]["split"] == "head..layer2.3 | layer3.0..fc" and d["config"]["dp"] == 4


def test_simulate_text_output(capsys):
    assert main(["simulate", "examples/resnet50_cifar10.yaml", "--pp", "2", "--dp", "1", "--microbatches", "4",
                 "--schedule", "zbh1", "--grid"]) == 0
    out = capsys.readouterr().out
    assert "bubble" in out and "1W3" in out
    header = next(line for line in out.splitlines() if line.split()[:1] == ["rank"])
    assert header.split()[:6] == ["rank", "stages", "busy", "bubble", "sync", "wait"]
    assert "memory: peak " in out and " GiB usable (32.00 GiB raw less " in out and "fragmentation): margin " in out


def test_infeasible_simulation_is_one_line(capsys):
    assert main(["simulate", "examples/resnet50_cifar10.yaml", "--pp", "4", "--dp", "1", "--microbatches", "2",
                 "--schedule", "interleaved", "--chunks", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "multiple of pp" in err
    assert main(["simulate", "examples/resnet50_cifar10.yaml", "--dp", "3"]) == 2
    assert "does not divide" in capsys.readouterr().err
    assert main(["simulate", "examples/resnet50_cifar10.yaml", "--dp", "16", "--cluster", "ascend910:1x8"]) == 2
    assert "lower dp or pp" in capsys.readouterr().err


def test_plan_reports_its_margin_against_the_usable_memory_or_the_cap_given(capsys):
    from parsim.hardware import load_cluster
    from parsim.fmt import human_bytes

    usable = load_cluster("ascend910:1x8").device.usable_memory_bytes
    argv = ["plan", "examples/resnet50_cifar10_seeds_split.yaml", "--tp", "1", "--top", "2"]
    d = _json(capsys, argv)
    peak = max(d["candidates"][0]["estimate"]["peak_memory_bytes"])
    assert d["capacity_bytes"] == usable and d["margin_bytes"] == usable - peak > 0
    assert any(x == f"memory: peak {human_bytes(peak)} of {human_bytes(usable)} usable (32.00 GiB raw less 381.47 MiB "
               f"runtime context and 1.49 GiB collective buffers, then 15% fragmentation): margin "
               f"{human_bytes(usable - peak)}" for x in d["explanation"])
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"memory: peak {human_bytes(peak)} of {human_bytes(usable)} usable (32.00 GiB raw less " in out
    assert f"margin {human_bytes(usable - peak)}" in out
    d = _json(capsys, argv + ["--max-memory", "1GiB"])
    assert d["capacity_bytes"] == 2**30 and d["margin_bytes"] == 2**30 - peak
    assert any(x.startswith("memory: ") and "of the 1.00 GiB cap given" in x for x in d["explanation"])
