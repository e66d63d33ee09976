"""``parsim validate`` prices each pass from measurements taken right before it: the layer
profiles and the collectives (hardware.cluster.with_measured_fits), and reports the spread of
the predictions over the passes beside the spread of the runs."""

import json
import os
import statistics

import pytest
import yaml

from parsim import validation
from parsim.cost.compute import load_profile_table
from parsim.errors import InputError
from parsim.hardware import load_cluster
from parsim.hardware.cluster import load_profile, with_measured_fits
from parsim.model.spec import load_model
from parsim.plan import ParallelConfig
from parsim.profile.calibrate import profiled_compute
from parsim.sim import simulate

MODEL, TABLE = "tests/data/two_layers.yaml", "tests/data/profile_table.yaml"

# What profile-comm writes on a 2-process node, with every number unlike local-cpu's
MEASURED = """schema_version: 1
name: local-cpu
device: {{name: x86_64-core, memory: 8GiB, memory_bandwidth_gb_per_s: 20, peak_tflops: {{fp32: 0.1}}}}
node: {{devices: {devices}, group_link: {{bandwidth_gb_per_s: 5.0, latency_us: 50}}}}
collective: {{library: gloo, bandwidth_efficiency: 0.25, latency_us: 40, overlap: 0.9, busy_sender_delay_us: 7,
             all_gather: {{bandwidth_efficiency: 0.5, latency_us: 60}},
             reduce_scatter: {{bandwidth_efficiency: 0.125, latency_us: 70}},
             fsdp_gather_overhead_us: 3, fsdp_reduce_scatter_overhead_us: 4,
             dtypes: {{bf16: {{bandwidth_efficiency: 0.2, latency_us: 45, overlap: 0.95}}}}}}
"""


def _measured(tmp_path, devices=2):
    path = tmp_path / f"collectives{devices}.yaml"
    path.write_text(MEASURED.format(devices=devices))
    return str(path)


def test_the_measured_fits_replace_the_profiles_and_the_readings_that_do_not_repeat_stay(tmp_path):
    base = load_cluster("local-cpu")
    path = _measured(tmp_path)
    got = with_measured_fits(base, load_profile(path), path)
    c, was = got.profile.collectives, base.profile.collectives
    assert got.link(0, 1).bandwidth_bytes_per_s == pytest.approx(5e9)
    assert got.link(0, 1).latency_s == pytest.approx(50e-6)
    assert (c.bandwidth_efficiency, c.latency_s) == pytest.approx((0.25, 40e-6))
    assert c.op_fit("all_gather") == pytest.approx((60e-6, 0.5))
    assert c.op_fit("reduce_scatter") == pytest.approx((70e-6, 0.125))
    # bf16's own fit, with the profile's bf16 overlap
    bf16 = dict(c.dtypes)["bf16"]
    assert (bf16.bandwidth_efficiency, bf16.latency_s) == pytest.approx((0.2, 45e-6))
    assert bf16.overlap == dict(was.dtypes)["bf16"].overlap
    # kept from the profile: the overlap, the busy sender's delay, FSDP2's host time, the device
    assert (c.overlap, c.busy_sender_delay_s) == (was.overlap, was.busy_sender_delay_s)
    assert (c.fsdp_gather_overhead_s, c.fsdp_reduce_scatter_overhead_s, c.fsdp_gather_copy_bytes_per_s) == \
        (was.fsdp_gather_overhead_s, was.fsdp_reduce_scatter_overhead_s, was.fsdp_gather_copy_bytes_per_s)
    assert got.device == base.device and got.num_nodes == base.num_nodes


def test_fits_measured_on_another_node_shape_are_refused_in_one_line(tmp_path):
    path = _measured(tmp_path, devices=4)
    with pytest.raises(InputError) as e:
        with_measured_fits(load_cluster("local-cpu"), load_profile(path), path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: node:") and "4 devices per node" in msg


def _scaled_table(tmp_path, name: str, factor: float) -> str:
    """TABLE with every layer's times ``factor`` times as long."""
    data = yaml.safe_load(open(TABLE))
    for row in data["layers"]:
        row["fwd_s"], row["bwd_s"] = ([t * factor for t in row[k]] for k in ("fwd_s", "bwd_s"))
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _fake_runs(monkeypatch, cases, step_times_s):
    """validate's set replaced by ``cases``; the executor by a stub writing each run's measured.json
    with the next of ``step_times_s``."""
    monkeypatch.setattr(validation, "default_cases", lambda *a, **k: cases)
    monkeypatch.setattr(validation, "check_profiled_sizes", lambda *a, **k: None)
    times = iter(step_times_s)

    def fake_run(args, nproc, timeout_s, **kw):
        out = args[args.index("--out") + 1]
        os.makedirs(out)
        with open(os.path.join(out, "measured.json"), "w") as f:
            json.dump({"step_time_s": next(times), "actions": [], "peak_memory_bytes": [1.0] * nproc}, f)
        return 0
    monkeypatch.setattr(validation, "launch", fake_run)


def _direct_s(cluster, table_path, cfg) -> float:
    spec = load_model(MODEL)
    model = profiled_compute(load_profile_table(table_path), spec.graph, cluster.device, spec.training.dtype)
    return simulate(spec.graph, spec.training, cluster, cfg, model, keep_timeline=False).step_time_s


def test_each_pass_is_priced_from_the_profiles_measured_before_it(monkeypatch, tmp_path):
    cfg = ParallelConfig(2, 1, 1, "1f1b", 1, (0, 2))                        # dp=2: its all-reduce is priced
    _fake_runs(monkeypatch, [validation.Case("dp2", cfg)], [0.1, 0.3, 0.2])
    slow = _scaled_table(tmp_path, "slow.yaml", 1.5)
    comm = _measured(tmp_path)
    per_pass = [validation.Measured({2: TABLE}), validation.Measured({2: slow}, collectives=comm),
                validation.Measured({2: TABLE})]
    asked = []

    def measure(k):
        asked.append(k)
        return per_pass[k]
    out = validation.validate(MODEL, "local-cpu", measure, str(tmp_path / "v"), passes=3, log=lambda *a: None)
    assert asked == [0, 1, 2]                  # pass k measured right before its runs, in turn
    base = load_cluster("local-cpu")
    expected = sorted([_direct_s(base, TABLE, cfg),
                       _direct_s(with_measured_fits(base, load_profile(comm), comm), slow, cfg),
                       _direct_s(base, TABLE, cfg)])
    assert expected[0] < expected[-1]
    row = out["plans"][0]
    assert row["predicted_step_s"] == pytest.approx(expected[1])
    assert row["predicted_spread"] == pytest.approx((expected[-1] - expected[0]) / expected[1])
    assert row["measured_step_s"] == pytest.approx(0.2)
    assert out["median_profile_spread"] == pytest.approx(row["predicted_spread"])
    assert [p["collectives"] for p in out["measured_per_pass"]] == [None, comm, None]


def test_one_fixed_profile_prices_every_pass_alike(monkeypatch, tmp_path):
    cfg = ParallelConfig(1, 1, 1, "1f1b", 1, (0, 2))
    _fake_runs(monkeypatch, [validation.Case("single", cfg)], [0.1, 0.3])
    out = validation.validate(MODEL, "local-cpu", {1: TABLE}, str(tmp_path / "v"), passes=2, log=lambda *a: None)
    row = out["plans"][0]
    assert row["predicted_step_s"] == pytest.approx(_direct_s(load_cluster("local-cpu"), TABLE, cfg))
    assert row["predicted_spread"] == 0.0
    assert row["measured_step_s"] == pytest.approx(statistics.median([0.1, 0.3]))
    assert out["measured_per_pass"] == [{"layers": {1: TABLE}, "tp": (), "collectives": None, "ep": ()}] * 2


@pytest.mark.parametrize("flags, wheres, collectives", [
    ([], ["profiles.pass1", "profiles.pass2", "profiles.pass3"], True),
    (["--profile-once"], [""], True),
    (["--keep-collectives"], ["profiles.pass1", "profiles.pass2", "profiles.pass3"], False),
])
def test_the_cli_measures_before_each_pass_unless_told_once(monkeypatch, tmp_path, flags, wheres, collectives):
    from parsim.cli import main

    calls = []

    def fake_measure(model_path, spec, sizes, per_node, out_dir, collectives=True, log=print):
        calls.append((os.path.relpath(out_dir, tmp_path) if out_dir != str(tmp_path) else "", per_node, collectives))
        return validation.Measured({per_node: f"{out_dir}/p.json"})

    class Done(Exception):
        pass

    def fake_validate(model, cluster, profiles, out_dir, steps, which, timeout_s, passes, log, results_root):
        got = [profiles(k) for k in range(passes)]
        assert len({id(m) for m in got}) == len(wheres)
        raise Done
    monkeypatch.setattr(validation, "measure_this_machine", fake_measure)
    monkeypatch.setattr(validation, "validate", fake_validate)
    with pytest.raises(Done):
        main(["validate", MODEL, "--passes", "3", "--out", str(tmp_path), *flags])
    assert calls == [(w, 2, collectives) for w in wheres]


@pytest.mark.parametrize("fails, ok", [(1, True), (2, False)])
def test_a_failed_measurement_of_the_collectives_is_taken_once_more(monkeypatch, tmp_path, fails, ok):
    from parsim.profile import comm, layers

    calls = []
    monkeypatch.setattr(layers, "launch_profilers", lambda *a, **k: 0)

    def flaky(output, nproc, *a, **k):
        calls.append(output)
        return 134 if len(calls) <= fails else 0
    monkeypatch.setattr(comm, "launch_profile_comm", flaky)
    spec = load_model(MODEL)
    if ok:
        got = validation.measure_this_machine(MODEL, spec, [1], 2, str(tmp_path), log=lambda *a: None)
        assert got.collectives == str(tmp_path / "collectives.profile.yaml") and len(calls) == 2
    else:
        with pytest.raises(InputError, match="failed twice"):
            validation.measure_this_machine(MODEL, spec, [1], 2, str(tmp_path), log=lambda *a: None)
        assert len(calls) == 2


def test_the_analytical_column_is_priced_from_a_fit_that_did_not_see_the_plans_size(monkeypatch, tmp_path):
    """Leave-one-size-out: dp=2, m=1 on a global batch of 8 runs 4 samples per micro-batch; its
    analytical price comes from the calibration fitted to sizes 1 and 2 only (not to 4), and so
    differs from the fit to all three that the profiled model falls back on."""
    from parsim.profile.calibrate import leave_size_out

    cfg = ParallelConfig(2, 1, 1, "1f1b", 1, (0, 2))
    _fake_runs(monkeypatch, [validation.Case("dp2", cfg)], [0.1])
    out = validation.validate(MODEL, "local-cpu", {2: TABLE}, str(tmp_path / "v"), log=lambda *a: None)
    spec, cluster = load_model(MODEL), load_cluster("local-cpu")
    table = load_profile_table(TABLE)
    left_out = leave_size_out(spec.graph, table, cluster.device, 4, spec.training.dtype)
    expected = simulate(spec.graph, spec.training, cluster, cfg, left_out, keep_timeline=False).step_time_s
    everything = profiled_compute(table, spec.graph, cluster.device, spec.training.dtype).fallback
    seen = simulate(spec.graph, spec.training, cluster, cfg, everything, keep_timeline=False).step_time_s
    assert out["plans"][0]["analytical_step_s"] == pytest.approx(expected)
    assert abs(expected / seen - 1) > 1e-6
    one = yaml.safe_load(open(TABLE))
    assert leave_size_out(spec.graph, load_profile_table(_one_size(tmp_path, one)), cluster.device, 4) is None


def _one_size(tmp_path, data) -> str:
    """TABLE cut to its micro-batch size 4 alone."""
    i = data["microbatch_sizes"].index(4)
    data["microbatch_sizes"] = [4]
    for row in data["layers"]:
        row["fwd_s"], row["bwd_s"] = [row["fwd_s"][i]], [row["bwd_s"][i]]
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_the_evidence_is_copied_under_results_with_the_profiles_it_was_priced_from(monkeypatch, tmp_path):
    from parsim.hardware.machine import this_machine
    from parsim.report.evidence import slug

    cfg = ParallelConfig(2, 1, 1, "1f1b", 1, (0, 2))
    _fake_runs(monkeypatch, [validation.Case("dp2", cfg)], [0.1, 0.2])
    comm = _measured(tmp_path)
    per_pass = [validation.Measured({2: TABLE}, collectives=comm), validation.Measured({2: TABLE})]
    out = validation.validate(MODEL, "local-cpu", lambda k: per_pass[k], str(tmp_path / "v"), passes=2,
                              log=lambda *a: None, results_root=str(tmp_path / "results"))
    m = this_machine()
    where = tmp_path / "results" / f"{m.date}-{slug(m.cpu_model)}" / "default" / slug(load_model(MODEL).name)
    assert out["evidence"] == str(where)
    assert sorted(p.name for p in where.iterdir()) == ["memory_breakdown.csv", "profiles", "validation.csv",
                                                       "validation.json"]
    saved = json.load(open(where / "validation.json"))
    assert saved["profiles"] == {"2": "profiles/pass1/profile_table.yaml"}
    assert saved["collectives"] == "profiles/pass1/collectives2.yaml"
    assert [p["collectives"] for p in saved["measured_per_pass"]] == ["profiles/pass1/collectives2.yaml", None]
    assert (where / "profiles/pass1/profile_table.yaml").read_text() == open(TABLE).read()
    assert saved["run_order"] == [[0, "dp2"], [1, "dp2"]] and saved["plans"][0]["measured_step_s"] == pytest.approx(0.15)


def test_cpu_slug():
    from parsim.report.evidence import slug

    assert slug("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz") == "intel-xeon-platinum-8481c-cpu-2-70ghz"
    assert slug("AMD EPYC 7B13") == "amd-epyc-7b13" and slug("") == "unknown"


def test_a_run_other_processes_took_cpu_from_is_named(monkeypatch, tmp_path):
    """The host's counters over each run: the one during which other processes used 80% of a core
    names its run (kept in the figures), in validation.json and in the printed summary."""
    from parsim.profile import host
    from parsim.profile.rounds import HostSample
    from parsim.report.cli_text import validate_lines

    cfg = ParallelConfig(1, 1, 1, "1f1b", 1, (0, 2))
    _fake_runs(monkeypatch, [validation.Case("single", cfg)], [0.1, 0.3, 0.2])
    # before and after each run: what the counter saw since its previous sample
    seen = iter([HostSample(), HostSample(0.05), HostSample(), HostSample(0.1, 0.02), HostSample(), HostSample(0.8)])
    monkeypatch.setattr(host.HostCounter, "sample", lambda self: next(seen))
    monkeypatch.setattr(host, "canary_s", lambda: pytest.fail("validate times no canary"))
    out = validation.validate(MODEL, "local-cpu", {2: TABLE}, str(tmp_path / "v"), passes=3, log=lambda *a: None)
    assert out["runs_watched"] == 3 and out["disturbed_runs"] == ["pass 3 single: other processes 80% of a core"]
    assert [(r["run"], r["foreign_cores"], r["steal_cores"]) for r in out["runs_host"]] == \
        [("pass 1 single", 0.05, 0.0), ("pass 2 single", 0.1, 0.02), ("pass 3 single", 0.8, 0.0)]
    assert out["plans"][0]["measured_step_s"] == pytest.approx(0.2)          # kept: the median of all three
    lines = validate_lines(out["table"], out, str(tmp_path / "v"))
    assert "host: 1 of 3 runs disturbed (other processes' CPU or hypervisor steal over a quarter of a core during " \
           "the run): pass 3 single: other processes 80% of a core" in lines
