"""A profile's honesty: which sizes were measured, how repeatable they were, where, and that
validate prices its plans from measured sizes only.  No real profiling: timings are injected."""

import dataclasses
import json
import warnings

import torch

import pytest

from parsim.cli import main
from parsim.cost.compute import AnalyticalCompute, ProfiledCompute, load_profile_table
from parsim.exec.precision import TORCH_DTYPES
from parsim.hardware import load_cluster
from parsim.model.graph import Layer
from parsim.hardware.machine import Machine, ProfileMachineWarning, this_machine
from parsim.errors import InputError
from parsim.model.spec import load_model
from parsim.profile.layers import _run_optimizer
from parsim.profile.tables import fwd_plus_bwd, mean_tables, slowest_rank
from parsim.profile.rounds import HostSample, falls, measure_rounds, median_interval, order_statistic_rank

MODEL = "examples/resnet50_cifar10_local.yaml"


def scripted(script):
    """measure(b) replaying ``script[b]``: a list of rounds, each {key: repeats}; records the calls."""
    calls = []

    def measure(b):
        calls.append(b)
        k = sum(1 for c in calls if c == b) - 1
        return script[b][min(k, len(script[b]) - 1)]
    return measure, calls


def steady(t, layer="a"):
    return {(layer, "fwd_s"): [t, t, t], (layer, "bwd_s"): [2 * t, 2 * t, 2 * t]}


def test_the_order_statistic_interval_of_a_median_covers_at_least_its_level():
    # 1 - 2 P(Binomial(n, 1/2) < k) >= 0.9: n = 5 -> the range (0.9375); n = 9 -> k = 2 (0.961, k = 3 gives
    # 0.820); n = 15 -> k = 4 (0.965, k = 5 gives 0.882); n < 5 -> the range, below the level
    assert [order_statistic_rank(n) for n in (3, 5, 9, 15)] == [1, 1, 2, 4]
    assert median_interval([5.0, 1.0, 3.0, 2.0, 4.0]) == (1.0, 5.0)
    assert median_interval([float(x) for x in range(1, 10)]) == (2.0, 8.0)


def test_rounds_interleave_the_sizes_and_take_the_median_of_the_rounds():
    script = {4: [steady(1.0), steady(1.2), steady(0.9), steady(1.0), steady(5.0)], 8: [steady(2.0)]}
    measure, calls = scripted(script)
    got = measure_rounds([4, 8], measure, target=0.0, min_rounds=5, max_rounds=5)
    assert calls == [4, 8, 8, 4, 4, 8, 8, 4, 4, 8]                # each round starts one size later
    assert got.stopped == "rounds" and len(got.kept) == 5
    assert got.median_s[("a", "fwd_s")] == [1.0, 2.0]              # the burst (5.0) moves the median not at all
    assert got.interval_s[("a", "fwd_s")][0] == (0.9, 5.0)         # the range of 5 rounds: 93.75% >= 90%


def test_rounds_stop_when_precise_when_the_budget_runs_out_or_at_the_most():
    measure, calls = scripted({4: [steady(1.0)]})
    precise = measure_rounds([4], measure, target=0.02, min_rounds=3, max_rounds=9)
    assert precise.stopped == "precise" and len(calls) == 3 and precise.precision == [0.0]
    wobbly = [steady(t) for t in (1.0, 1.1, 0.9, 1.05, 0.95)]
    now = iter(range(100))
    measure, calls = scripted({4: wobbly})
    budget = measure_rounds([4], measure, target=0.01, min_rounds=2, max_rounds=9, budget_s=2,
                            clock=lambda: next(now))
    assert budget.stopped == "budget" and len(calls) == 3          # the clock reads 0, then 1 per check
    measure, calls = scripted({4: wobbly})
    assert measure_rounds([4], measure, target=0.01, min_rounds=2, max_rounds=4).stopped == "rounds"
    assert len(calls) == 4


def test_a_disturbed_measurement_is_left_out_and_a_mostly_disturbed_size_is_named():
    canaries = iter([1.0, 1.0, 1.25, 1.0, 1.0] + [1.0] * 10)       # the third round's canary ran 25% slow
    measure, _ = scripted({4: [steady(1.0), steady(1.0), steady(3.0), steady(1.0), steady(1.0)]})
    got = measure_rounds([4], measure, canary=lambda: next(canaries), target=0.0, min_rounds=5, max_rounds=5)
    assert [k[0] for k in got.kept] == [True, True, False, True, True]
    assert got.median_s[("a", "fwd_s")] == [1.0] and got.interval_s[("a", "fwd_s")] == [(1.0, 1.0)]
    assert got.disturbed == []                                      # 1 of 5: not the profile's verdict
    busy = iter([HostSample()] + [HostSample(foreign=0.9)] * 3 + [HostSample()] * 2)
    measure, _ = scripted({4: [steady(1.0)]})
    got = measure_rounds([4], measure, host=lambda: next(busy), target=0.0, min_rounds=5, max_rounds=5)
    assert [k[0] for k in got.kept] == [False, False, False, True, True]
    assert got.disturbed == ["micro-batch size 4: 3 of 5 rounds disturbed (canary up to +0%, other processes "
                             "up to 90% of a core)"]


def test_another_process_still_imprecise_keeps_every_process_measuring():
    measure, calls = scripted({4: [steady(1.0)]})
    asked = []

    def agree(local):              # the other profiler wants two more rounds
        asked.append(local)
        return local | ({"go on"} if len(asked) <= 2 else set())
    got = measure_rounds([4], measure, target=0.02, min_rounds=2, max_rounds=9, agree=agree)
    assert len(calls) == 4 and asked == [set(), set(), set()] and got.stopped == "precise"


def test_a_fall_with_size_is_confirmed_only_beyond_both_intervals():
    # F+B of 0.216 s at 8 and 0.192 s at 16 (as measured on this CPU), every round
    measure, _ = scripted({8: [steady(0.072)], 16: [steady(0.064)]})
    got = measure_rounds([8, 16], measure, min_rounds=5, max_rounds=5)
    assert falls(got, fwd_plus_bwd) == {"a": [(8, 16)]}
    # the same medians, but the rounds at 8 reach below 16's: not confirmed
    measure, _ = scripted({8: [steady(t) for t in (0.072, 0.06, 0.08, 0.072, 0.072)], 16: [steady(0.064)]})
    assert falls(measure_rounds([8, 16], measure, min_rounds=5, max_rounds=5), fwd_plus_bwd) == {}


def row(name, f, b, **extra):
    return {"name": name, "fwd_s": f, "bwd_s": b, "bwd_input_s": [x / 4 for x in b],
            "bwd_weight_s": [x * 3 / 4 for x in b], "fwd_spread": [0.01, 0.02], "bwd_spread": [0.0, 0.1], **extra}


def test_the_mean_of_concurrent_profilers_covers_every_time_and_their_disagreement():
    one = {"layers": [row("a", [1.0, 2.0], [2.0, 4.0], noisy=[4])], "optimizer_s_per_param": 1e-9, "remeasured": [4]}
    two = {"layers": [row("a", [1.2, 2.0], [2.4, 4.0], nonmonotone_confirmed=[[2, 4]])],
           "optimizer_s_per_param": 3e-9}
    out = mean_tables([one, two])
    a = out["layers"][0]
    assert a["fwd_s"] == pytest.approx([1.1, 2.0])
    assert a["bwd_input_s"] == pytest.approx([0.55, 1.0])         # averaged, not the first process's
    assert a["bwd_weight_s"] == pytest.approx([1.65, 3.0])
    assert a["proc_spread"] == pytest.approx([0.6 / 3.3, 0.0])
    assert a["noisy"] == [4] and a["nonmonotone_confirmed"] == [[2, 4]]
    assert "remeasured" not in out and out["concurrent_processes"] == 2


def test_concurrent_profilers_rounds_pair_by_index_and_a_round_either_left_out_is_left_out():
    def table(fwd_rounds, kept, canary):
        rounds = {"count": 3, "kept": kept, "stopped": "rounds", "target": 0.02, "precision": [0.0],
                  "canary_s": canary, "foreign": [[0.0]] * 3, "steal": [[0.0]] * 3, "disturbed": [],
                  "optimizer_s_per_param": [1e-9, 2e-9]}
        layer = {"name": "a", "fwd_s": [0.0], "bwd_s": [0.0], "fwd_spread": [0.0], "bwd_spread": [0.0],
                 "round_s": {"fwd_s": fwd_rounds, "bwd_s": [[2 * r[0]] for r in fwd_rounds]}}
        return {"microbatch_sizes": [4], "noise_threshold": 0.05, "layers": [layer], "rounds": rounds,
                "optimizer_s_per_param": 1.5e-9}
    one = table([[1.0], [1.2], [3.0]], [[True], [True], [False]], [[1e-3], [1e-3], [2e-3]])
    two = table([[1.2], [1.0], [1.1]], [[True], [True], [True]], [[1e-3], [1e-3], [1e-3]])
    out = mean_tables([one, two])
    a = out["layers"][0]
    assert a["round_s"]["fwd_s"] == [[pytest.approx(1.1)], [pytest.approx(1.1)], [pytest.approx(2.05)]]
    assert out["rounds"]["kept"] == [[True], [True], [False]]       # process one left round 3 out
    assert a["fwd_s"] == [pytest.approx(1.1)] and a["bwd_s"] == [pytest.approx(2.2)] and "noisy" not in a
    assert out["rounds"]["canary_s"] == [[1e-3], [1e-3], [2e-3]]   # the slower process's canary
    assert out["rounds"]["optimizer_s_per_param"] == [pytest.approx(1e-9), pytest.approx(2e-9)]
    three = table([[1.0], [1.3], [1.1]], [[True], [True], [True]], [[1e-3], [1e-3], [1e-3]])
    assert mean_tables([three])["layers"][0]["noisy"] == [4]       # the range of 3 rounds: 1.0..1.3 about 1.1


def write_profile(path, **top):
    data = {"schema_version": 1, "kind": "layer-profile", "microbatch_sizes": [1, 2, 4],
            "layers": [{"name": "a", "fwd_s": [0.010, 0.016, 0.030], "bwd_s": [0.020, 0.034, 0.060],
                        "fwd_spread": [0.01, 0.02, 0.01], "bwd_spread": [0.0, 0.0, 0.3], "proc_spread": [0, 0, 0],
                        "noisy": [4], "nonmonotone_confirmed": [[1, 2]]},
                       {"name": "b", "fwd_s": [0.001, 0.002, 0.004], "bwd_s": [0.002, 0.004, 0.008]}],
            "optimizer_s_per_param": 1e-9, "noise_threshold": 0.05, "max_remeasure": 2, "remeasured": [4], **top}
    path.write_text(json.dumps(data))
    return str(path)


def test_new_fields_load_and_old_files_still_load_without_a_warning(tmp_path):
    t = load_profile_table(write_profile(tmp_path / "p.json"))
    assert t.noisy == (("a", 4),) and t.nonmonotone_confirmed == (("a", 1, 2),) and t.machine is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        old = load_profile_table("tests/data/profile_table.yaml")
    assert old.machine is None and old.noisy == ()


def test_a_profile_from_another_machine_warns_once_and_loads(tmp_path, capsys):
    here = this_machine()
    assert here.cores > 0 and here.python and here.cpu_model
    other = {"cpu_model": "Some Other CPU", "cores": 64, "torch": "0.1", "numpy": "1", "python": "3", "date": "x"}
    path = write_profile(tmp_path / "p.json", machine=other)
    with pytest.warns(ProfileMachineWarning, match="Some Other CPU"):
        load_profile_table(path)
    same = {**other, "cpu_model": here.cpu_model, "torch": here.torch}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_profile_table(write_profile(tmp_path / "q.json", machine=same)).machine == Machine(**same)
    # the CLI: one line on stderr, and the command goes on
    assert main(["simulate", "tests/data/two_layers.yaml", "--cluster", "local-cpu", "--pp", "2", "--dp", "1",
                 "--microbatches", "2", "--profile", path]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("parsim: warning:") and "another machine" in err[0]


def test_plan_with_a_profile_says_which_sizes_were_priced_how(capsys):
    assert main(["plan", "tests/data/two_layers.yaml", "--cluster", "local-cpu", "--tp", "1",
                 "--profile", "tests/data/profile_table.yaml"]) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if "micro-batch sizes priced" in ln]
    assert len(line) == 1
    assert "by the fallback model (outside the profiled 1..4) 8" in line[0]    # global batch 8 on one rank


def test_validate_names_the_sizes_its_plans_run_and_refuses_a_profile_without_them(tmp_path):
    from parsim.validation import case_microbatch_sizes, sizes_to_profile, validate

    spec = load_model(MODEL)
    assert case_microbatch_sizes(spec) == [4, 8, 16, 32]        # batch 32: single, dp2, pp2 m 1..8, seeds m2
    assert case_microbatch_sizes(spec, "quick") == [8, 16]      # dp2, pp2-1f1b-m4
    # the sizes asked for besides them, but none a batch of 32 cannot hold
    assert sizes_to_profile(spec, {2, 64}) == [2, 4, 8, 16, 32]
    data = {"schema_version": 1, "kind": "layer-profile", "microbatch_sizes": [2, 4, 8],
            "layers": [{"name": n, "fwd_s": [1e-3] * 3, "bwd_s": [2e-3] * 3} for n in spec.graph.names]}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError) as e:
        validate(MODEL, "local-cpu", {2: str(path)}, str(tmp_path / "out"))
    msg = str(e.value)
    assert "\n" not in msg and "lacks 16, 32" in msg
    assert f"parsim profile {MODEL} --microbatch-sizes 2,4,8,16,32 --nproc 2 -o {path}" in msg


def test_validate_keeps_the_planners_pick_to_profiled_sizes():
    from parsim.cost.compute import AnalyticalCompute
    from parsim.hardware import load_cluster
    from parsim.validation import default_cases

    spec, cluster = load_model(MODEL), load_cluster("local-cpu")
    model = AnalyticalCompute(cluster.device)
    free = default_cases(spec, cluster, model, "quick")[-1].config
    assert free.microbatch_size(32) == 4                        # unrestricted, it runs 4 samples per micro-batch
    kept = default_cases(spec, cluster, model, "quick", profiled_sizes=(16,))[-1].config
    assert kept.microbatch_size(32) == 16


def test_a_cluster_profile_measured_on_another_cpu_warns(tmp_path):
    from parsim.hardware.cluster import load_profile

    text = open("hardware_profiles/local-cpu.yaml").read()
    assert "cpu_model" not in text                 # the shipped one names no CPU model: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_profile("hardware_profiles/local-cpu.yaml")
    other = tmp_path / "c.yaml"
    other.write_text(text.replace("measured: {date:", "measured: {cpu_model: 'Some Other CPU', date:"))
    with pytest.warns(ProfileMachineWarning, match="Some Other CPU"):
        load_profile(str(other))


def test_a_tensor_parallel_profile_adds_the_collectives_only_where_its_fallback_prices(tmp_path):
    from parsim.cost.compute import AnalyticalCompute, ProfiledCompute
    from parsim.cost.layer import layer_time_s, tp_comm_time_s
    from parsim.hardware import load_cluster
    from parsim.shard.prepare import per_device_graph

    spec, cluster = load_model("examples/gpt_tiny_local.yaml"), load_cluster("local-cpu")
    layer = per_device_graph(spec.graph, 2, "megatron").layers[1]
    assert layer.tp_comm
    path = tmp_path / "tp.json"
    path.write_text(json.dumps({"schema_version": 1, "kind": "layer-profile", "microbatch_sizes": [1, 2], "tp": 2,
                                "tp_layout": "megatron", "layers": [{"name": n, "fwd_s": [1e-3, 2e-3],
                                                                     "bwd_s": [2e-3, 4e-3]} for n in spec.graph.names]}))
    fallback = AnalyticalCompute(cluster.device)
    model = ProfiledCompute(load_profile_table(path), fallback)
    assert layer_time_s(model, layer, "F", 2, cluster) == 2e-3                  # measured, collectives inside
    assert layer_time_s(model, layer, "F", 8, cluster) == pytest.approx(
        fallback.layer_time_s(layer, "F", 8) + tp_comm_time_s(layer, "F", 8, cluster, 0))


def test_validate_zero_set_runs_each_stage_beside_plain_data_parallelism():
    """``parsim validate --set zero``: dp=2 with two micro-batches under ZeRO 0, 1, 2 and 3 (the
    micro-batch size of all four: one profile prices them), and the planner's pick with ZeRO
    searched, among the profiled sizes."""
    from parsim.cost.compute import AnalyticalCompute
    from parsim.hardware import load_cluster
    from parsim.validation import case_microbatch_sizes, default_cases

    spec, cluster = load_model(MODEL), load_cluster("local-cpu")
    cases = default_cases(spec, cluster, AnalyticalCompute(cluster.device), "zero", profiled_sizes=(8, 16))
    assert [c.label for c in cases] == ["dp2-m2", "dp2-m2-zero1", "dp2-m2-zero2", "dp2-m2-zero3", "planner"]
    assert [(c.config.dp, c.config.pp, c.config.microbatches, c.config.zero) for c in cases[:4]] == \
        [(2, 1, 2, z) for z in range(4)]
    assert case_microbatch_sizes(spec, "zero") == [8]
    assert cases[-1].config.microbatch_size(32) in (8, 16)



def test_the_slowest_rank_pairs_the_profilers_repeats():
    """Per size: the median over repeats of the slower process's chain time, over the mean of the
    processes' medians.  Noise alone costs a synchronous step something (repeat by repeat one
    process or the other is the slower), and a process slower throughout costs its whole lag."""
    # both medians 1.0; the slower per repeat: 1.2, 1.2, 1.0, 1.0, median 1.1
    assert slowest_rank([[[1.0, 1.2, 0.9, 1.0]], [[1.2, 0.9, 1.0, 1.0]]]) == pytest.approx([1.1])
    # one process 10% slower throughout, at two sizes: 1.1 / 1.05
    assert slowest_rank([[[1.0] * 3, [2.0] * 3], [[1.1] * 3, [2.2] * 3]]) == pytest.approx([1.1 / 1.05] * 2)
    # identical processes cost nothing
    assert slowest_rank([[[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0]]]) == pytest.approx([1.0])


def test_concurrent_profilers_record_the_slowest_rank_and_the_profiled_model_prices_at_it(tmp_path):
    one = {"layers": [row("a", [1.0, 2.0], [2.0, 4.0])], "optimizer_s_per_param": 1e-9,
           "chain_s": [[3.0, 3.0, 3.0], [6.0, 6.0, 6.0]]}
    two = {**one, "chain_s": [[3.3, 3.3, 3.3], [6.0, 6.6, 6.0]]}
    out = mean_tables([one, two])
    assert "chain_s" not in out and out["slowest_rank"] == pytest.approx([3.3 / 3.15, 6.0 / 6.0])
    assert "slowest_rank" not in mean_tables([one])                         # one process: none
    assert "slowest_rank" not in mean_tables([{**one, "tp": 2}, {**two, "tp": 2}])   # tp: waits inside the layers
    t = load_profile_table(write_profile(tmp_path / "p.json", slowest_rank=[1.0, 1.1, 1.2], optimizer="adam"))
    assert t.slowest_rank == (1.0, 1.1, 1.2)
    model = ProfiledCompute(t, AnalyticalCompute(load_cluster("local-cpu").device))
    layer = Layer("a", fwd_flops=1.0, bwd_flops=2.0, param_count=0, param_bytes=0, output_bytes=0.0, saved_bytes=0.0)
    assert model.layer_time_s(layer, "F", 2) == pytest.approx(0.016 * 1.1)
    assert model.layer_time_s(layer, "B", 4) == pytest.approx(0.060 * 1.2)
    assert model.layer_time_s(layer, "F", 3) == pytest.approx((0.016 + 0.030) / 2 * 1.15)   # both interpolated
    with pytest.raises(InputError, match=r"p.json: slowest_rank: expected 3 factors of at least 1"):
        load_profile_table(write_profile(tmp_path / "p.json", slowest_rank=[1.0, 0.9, 1.0]))


@pytest.mark.parametrize("optimizer,dtype,inner", [("adam", "fp32", torch.optim.Adam), ("momentum", "fp32", torch.optim.SGD),
                                                   ("adam", "bf16", torch.optim.Adam), ("momentum", "bf16", None)])
def test_a_profile_times_the_optimizer_its_run_steps(optimizer, dtype, inner):
    """Adam as the executor runs it, on the parameters (fp32) or on fp32 masters (bf16); momentum
    SGD by hand on fp32 masters (bf16)."""
    spec = load_model("examples/gpt_tiny_local.yaml")
    spec = dataclasses.replace(spec, training=dataclasses.replace(spec.training, optimizer=optimizer),
                               graph=dataclasses.replace(spec.graph, dtype=dtype))
    opt = _run_optimizer(spec, [torch.nn.Parameter(torch.zeros(4, dtype=TORCH_DTYPES[dtype]))])
    assert (type(opt.inner) if opt.inner is not None else None) is inner


def test_profile_comm_names_its_disturbed_phases_and_strict_refuses_them(tmp_path, monkeypatch, capsys):
    from parsim.profile import comm
    from parsim.profile.host import disturbed_phases

    phases = [("device", 1e-3, HostSample()), ("links and collectives", 1.3e-3, HostSample()),
              ("overlap", 1e-3, HostSample(foreign=0.6, steal=0.1)), ("fsdp", 1.05e-3, HostSample())]
    assert disturbed_phases(phases) == ["links and collectives: canary +27%",         # against the median, 1.025 ms
                                        "overlap: canary -2%, other processes 60% of a core, hypervisor steal 10%"]
    sizes = [4 << 10, 64 << 20]
    links = {"group": (sizes, [1e-4 + n / 2e9 for n in sizes]), "all_reduce": (sizes, [2e-4 + n / 1e9 for n in sizes])}
    device = {"peak_flops_per_s": 1e11, "efficiency": [(1e6, 0.5), (1e9, 1.0)], "copy_bytes_per_s": 2e10}
    text = comm.profile_yaml("t", device, links, 2, 2, "gloo", 1 << 30, "parsim profile-comm", 0.1, 0,
                             disturbed=["rank 1: overlap: canary +20%"])
    assert text.startswith("# Measured ") and "\n# DISTURBED: rank 1: overlap: canary +20%\n" in text

    def fake(output, *a, **k):
        open(output, "w").write(text)
        return 0
    monkeypatch.setattr(comm, "launch_profile_comm", fake)
    out = tmp_path / "c.yaml"
    assert main(["profile-comm", "-o", str(out)]) == 0                 # flagged, kept
    assert main(["profile-comm", "-o", str(out), "--strict"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--strict" in err[0] and "overlap: canary +20%" in err[0]


def test_the_host_counter_counts_the_children_it_waited_for_as_its_own(monkeypatch):
    """What a run's ranks (child processes) use is not another process's: with ``children`` the
    counter subtracts their CPU seconds from the cores' busy time, as it does its own."""
    import os
    import types

    from parsim.profile import host

    clock = iter([0.0, 2.0] * 2)                                 # wall seconds: a 2 s phase, twice
    cpu = iter([1.0, 1.1] * 2)                                   # this process: 0.1 s
    kids = iter([10.0, 13.6])                                    # its waited-for children: 3.6 s
    stat = iter([(100.0, 5.0), (104.0, 5.5)] * 2)                # cores busy 4 s, 0.5 s stolen
    monkeypatch.setattr(host, "time", types.SimpleNamespace(perf_counter=lambda: next(clock),
                                                            process_time=lambda: next(cpu)))
    monkeypatch.setattr(host, "os", types.SimpleNamespace(
        times=lambda: os.times_result((0.0, 0.0, next(kids), 0.0, 0.0)), sysconf=os.sysconf))
    monkeypatch.setattr(host, "_proc_stat", lambda: next(stat))
    with_children = host.HostCounter(children=True).sample()
    assert with_children.foreign == pytest.approx((4.0 - 0.1 - 3.6) / 2) and with_children.steal == pytest.approx(0.25)
    alone = host.HostCounter().sample()                          # the children's seconds count as foreign
    assert alone.foreign == pytest.approx((4.0 - 0.1) / 2)
