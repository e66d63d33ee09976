"""Profiling, communication fits, calibration, and the validation metrics."""

import json
import math
import statistics
from dataclasses import replace

import pytest

from parsim.cli import main
from parsim.cost.comm import all_to_all_time_s, collective_time_s
from parsim.cost.compute import AnalyticalCompute, load_profile_table
from parsim.hardware import load_cluster
from parsim.profile.rounds import RoundsPolicy
from parsim.hardware.cluster import load_profile
from parsim.hardware.device import KernelExecution
from parsim.model.spec import load_model
from parsim.errors import InputError
from parsim.profile.calibrate import calibrate, held_out, held_out_split
from parsim.profile.calibrate import profile_yaml as calibrated_yaml, profiled_layers
from parsim.profile.comm import fit_alpha_beta, profile_yaml
from parsim.report.validation import Row, summary, table

MODEL = "examples/resnet50_cifar10_local.yaml"


def test_alpha_beta_fit_recovers_a_known_link():
    sizes = [4096, 65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
    alpha, beta = fit_alpha_beta(sizes, [40e-6 + s / 2.5e9 for s in sizes])
    assert alpha == pytest.approx(40e-6, rel=1e-6) and beta == pytest.approx(2.5e9, rel=1e-6)


def _synthetic_table(tmp_path, graph, truth, sizes, **fields):
    """The profile ``truth`` would measure: each unit timed alone, the last with the loss."""
    table = {"schema_version": 1, "kind": "layer-profile", "microbatch_sizes": sizes, **fields,
             "layers": [{"name": l.name, "fwd_s": [truth.layer_time_s(l, "F", b) for b in sizes],
                         "bwd_s": [truth.layer_time_s(l, "B", b) for b in sizes]} for l in profiled_layers(graph)]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(table))
    return load_profile_table(str(path))


def test_calibration_recovers_a_known_kernel_level_device(tmp_path):
    spec = load_model(MODEL)
    base = load_cluster("local-cpu").device
    true = replace(base, memory_efficiency=0.6,
                   kernels=KernelExecution(gemm_efficiency=0.7, k_half=200.0, launch_s=25e-6))
    truth = AnalyticalCompute(true)
    table = _synthetic_table(tmp_path, spec.graph, truth, [2, 4, 8, 16, 32])
    fitted, report = calibrate(spec.graph, table, base)
    assert report["model"] == "kernel-level"
    assert report["step_mape"] < 0.01 and report["layer_max_error"] < 0.02
    ex = fitted.kernels
    assert ex.gemm_efficiency == pytest.approx(0.7, rel=0.02) and ex.k_half == pytest.approx(200, rel=0.05)
    assert ex.launch_s == pytest.approx(25e-6, rel=0.05) and fitted.memory_efficiency == pytest.approx(0.6, rel=0.02)
    # Fitted on sizes 2, 8, 32 only, it predicts 4 and 16 as well: the model's form is right.
    held = report["held_out"]
    assert held["fit_sizes"] == [2, 8, 32] and held["held_out_sizes"] == [4, 16]
    assert held["median_layer_error"] < 0.01


CPU_TRUTH = dict(gemm_efficiency=0.8, k_half=40.0, launch_s=12e-6, cpu_threads=1, weight_touch_bytes_per_s=6e9,
                 per_sample_gemm_efficiency=((1.0, 0.25), (4.0, 0.07), (16.0, 0.6), (64.0, 0.9)),
                 backward_weight_touch_bytes_per_s=3e9, m_half=2.0, conv_k_half=8.0,
                 memory_family_efficiency=(("norm", 0.3), ("norm_backward", 1.5), ("pool", 0.05),
                                           ("pool_backward", 2.0)), layer_call_s=150e-6)


def test_calibration_recovers_a_known_cpu_with_torch_conv_backends(tmp_path):
    """A profile taken on a CPU: torch's backend rule (parsim.cost.conv_backend) sends the 1x1
    convolutions under 16 samples to per-sample GEMMs, whose efficiency at 1, 4, 16 and 64 rows
    (layer4, layer3, layer2, layer1 at 32x32), oneDNN's weight-reorder rates (forward, backward),
    the GEMM rows at half efficiency, each memory-bound family's bandwidth and the host time per
    layer call are recovered."""
    spec = load_model(MODEL)
    base = load_cluster("local-cpu").device
    true = replace(base, memory_efficiency=0.5, kernels=KernelExecution(**CPU_TRUTH))
    table = _synthetic_table(tmp_path, spec.graph, AnalyticalCompute(true), [2, 4, 8, 16, 32],
                             device="cpu: x86_64", threads=1)
    fitted, report = calibrate(spec.graph, table, base)
    ex = fitted.kernels
    assert ex.cpu_threads == 1 and report["layer_max_error"] < 0.01 and report["convolutions"]
    assert ex.gemm_efficiency == pytest.approx(0.8, rel=0.02) and ex.k_half == pytest.approx(40, rel=0.05)
    assert ex.launch_s == pytest.approx(12e-6, rel=0.05) and fitted.memory_efficiency == pytest.approx(0.5, rel=0.02)
    assert ex.weight_touch_bytes_per_s == pytest.approx(6e9, rel=0.05)
    assert ex.backward_weight_touch_bytes_per_s == pytest.approx(3e9, rel=0.05)
    assert ex.m_half == pytest.approx(2, rel=0.05)
    assert ex.conv_k_half == pytest.approx(8, rel=0.05)
    assert ex.layer_call_s == pytest.approx(150e-6, rel=0.05)
    assert [f for f, _ in ex.memory_family_efficiency] == [f for f, _ in CPU_TRUTH["memory_family_efficiency"]]
    for (_, e), (_, want) in zip(ex.memory_family_efficiency, CPU_TRUTH["memory_family_efficiency"]):
        assert e == pytest.approx(want, rel=0.05)
    for (rows, e), (want_rows, want) in zip(ex.per_sample_gemm_efficiency, CPU_TRUTH["per_sample_gemm_efficiency"]):
        assert rows == want_rows and e == pytest.approx(want, rel=0.05)
    held = report["held_out"]
    assert held["median_layer_error"] < 0.01 and held["swapped"]["median_layer_error"] < 0.01
    # The calibrated profile carries every fitted number, and loads back to the same device.
    out = tmp_path / "cal.yaml"
    out.write_text(calibrated_yaml(load_profile("hardware_profiles/local-cpu.yaml"), fitted, "t.json"))
    back = load_profile(str(out)).device.kernels
    assert back.m_half == pytest.approx(ex.m_half, rel=1e-3)
    assert back.conv_k_half == pytest.approx(ex.conv_k_half, rel=1e-3)
    assert back.layer_call_s == pytest.approx(ex.layer_call_s, rel=1e-3)
    assert back.backward_weight_touch_bytes_per_s == pytest.approx(ex.backward_weight_touch_bytes_per_s, rel=1e-3)
    assert [f for f, _ in back.memory_family_efficiency] == [f for f, _ in ex.memory_family_efficiency]
    assert [e for _, e in back.memory_family_efficiency] == pytest.approx([e for _, e in ex.memory_family_efficiency],
                                                                          rel=1e-3)


def test_calibrate_reports_convolution_numbers_only_for_a_model_with_convolutions(tmp_path):
    """On a CPU profile of a model without convolutions (the GPT), oneDNN's reorder rates and
    slow_conv2d's efficiencies are whatever the fit left: the report says so instead of printing them."""
    from parsim.report.cli_text import calibrate_lines
    spec = load_model("examples/gpt_small_local.yaml")
    base = load_cluster("local-cpu").device
    true = replace(base, memory_efficiency=0.5, kernels=KernelExecution(**CPU_TRUTH))
    table = _synthetic_table(tmp_path, spec.graph, AnalyticalCompute(true), [1, 2, 4], device="cpu: x86_64", threads=1)
    _, report = calibrate(spec.graph, table, base)
    text = "\n".join(calibrate_lines("local-cpu", "t.json", report))
    assert not report["convolutions"] and "us per layer call" in text
    assert "none in this model" in text and "weight reorders" not in text


def test_a_memory_family_must_be_one_the_model_knows(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(open("hardware_profiles/local-cpu.yaml").read().replace(
        "  memory_efficiency: 1.0\n",
        "  memory_efficiency: 1.0\n  kernels: {memory_family_efficiency: {softmax: 0.5}}\n"))
    with pytest.raises(InputError, match="memory_family_efficiency.*softmax"):
        load_profile(str(bad))


def test_held_out_never_fits_on_the_sizes_it_is_judged_on(tmp_path):
    """Both splits of the protocol: fitted on one half of the sizes, its predictions of the other
    half do not move when that half's measurements are replaced by nonsense."""
    spec = load_model(MODEL)
    base = load_cluster("local-cpu").device
    truth = AnalyticalCompute(replace(base, memory_efficiency=0.6,
                                      kernels=KernelExecution(gemm_efficiency=0.7, k_half=200.0, launch_s=25e-6)))
    sizes = [2, 4, 8, 16]
    clean = _synthetic_table(tmp_path, spec.graph, truth, sizes)
    for fit_sizes, test_sizes in (([2, 8], [4, 16]), ([4, 16], [2, 8])):
        spoiled_truth = _Scaled(truth, set(test_sizes), 3.0)
        spoiled = _synthetic_table(tmp_path, spec.graph, spoiled_truth, sizes)
        a = held_out_split(spec.graph, clean, fit_sizes, test_sizes, base)
        b = held_out_split(spec.graph, spoiled, fit_sizes, test_sizes, base)
        assert a["fit_sizes"] == fit_sizes and a["held_out_sizes"] == test_sizes
        assert a["median_layer_error"] < 0.01              # the model's own form, predicted
        for ra, rb in zip(a["per_size"], b["per_size"]):   # same fit: same predictions, judged on 3x the times
            assert rb["predicted_s"] == pytest.approx(ra["predicted_s"], rel=1e-9)
            assert rb["measured_s"] == pytest.approx(3 * ra["measured_s"])
    report = held_out(spec.graph, clean, base)
    assert (report["fit_sizes"], report["held_out_sizes"]) == ([2, 8], [4, 16])
    assert (report["swapped"]["fit_sizes"], report["swapped"]["held_out_sizes"]) == ([4, 16], [2, 8])


class _Scaled:
    """A cost model's times, multiplied at some sizes."""

    def __init__(self, model, sizes, factor):
        self.model, self.sizes, self.factor = model, sizes, factor

    def layer_time_s(self, layer, kind, b):
        return self.model.layer_time_s(layer, kind, b) * (self.factor if b in self.sizes else 1.0)


def test_calibration_recovers_a_known_roofline_device_without_kernels(tmp_path):
    spec = load_model(MODEL)
    graph = replace(spec.graph, layers=tuple(replace(l, kernels=()) for l in spec.graph.layers))
    true = replace(load_cluster("local-cpu").device, memory_efficiency=0.6,
                   efficiency=((1e6, 0.2), (1e8, 0.55), (1e10, 0.8)))
    truth = AnalyticalCompute(true)
    table = _synthetic_table(tmp_path, graph, truth, [2, 8, 32])
    start = replace(true, efficiency=((1.0, 1.0),), memory_efficiency=1.0)
    fitted, report = calibrate(graph, table, start)
    assert report["model"] == "roofline"
    assert report["step_mape"] < 0.02 and report["layer_mape"] < 0.05
    model = AnalyticalCompute(fitted)
    total = sum(model.layer_time_s(l, k, 8) for l in graph.layers for k in "FB")
    assert total == pytest.approx(sum(truth.layer_time_s(l, k, 8) for l in graph.layers for k in "FB"), rel=0.02)


def test_calibrate_command_writes_a_loadable_profile(tmp_path, capsys):
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", "tests/data/profile_table.yaml", "--model", "tests/data/two_layers.yaml",
                 "-o", str(out)]) == 0
    assert "fit error" in capsys.readouterr().out
    p = load_profile(str(out))
    assert p.name == "local-cpu-calibrated" and len(p.device.efficiency) == 6
    assert p.device.reserve == load_profile("hardware_profiles/local-cpu.yaml").device.reserve    # kept as given


def test_calibrate_keeps_the_input_pipeline(tmp_path):
    cpu = tmp_path / "local-cpu.yaml"
    cpu.write_text(open("hardware_profiles/local-cpu.yaml").read()
                   + "input_pipeline: {overlap: false, per_sample_s: 1.25e-4, sample_elements: 3072}\n")
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", "tests/data/profile_table.yaml", "--model", "tests/data/two_layers.yaml",
                 "--cluster", str(cpu), "-o", str(out)]) == 0
    assert load_profile(str(out)).input_pipeline == load_profile(str(cpu)).input_pipeline


def test_profile_command_measures_every_layer(tmp_path, capfd):
    out = tmp_path / "p.json"
    assert main(["profile", MODEL, "--microbatch-sizes", "2,4", "--repeats", "1", "--min-rounds", "2",
                 "--max-rounds", "2", "--nproc", "1", "-o", str(out)]) == 0
    table = load_profile_table(str(out))
    assert table.rounds.count == 2 and set(table.rounds.round_s) == set(spec_names := load_model(MODEL).graph.names)
    assert all(len(table.rounds.round_s[n]["fwd_s"][r]) == 2 for n in spec_names for r in range(2))
    spec = load_model(MODEL)
    assert [n for n, _ in table.layers] == spec.graph.names
    assert all(t > 0 for _, lt in table.layers for t in lt.fwd_s + lt.bwd_s)
    assert table.optimizer_s_per_param and table.optimizer_s_per_param > 0
    raw = json.loads(out.read_text())               # where, and how repeatable
    assert raw["machine"]["cpu_model"] and raw["machine"]["torch"] and raw["machine"]["cores"] > 0
    assert all(len(r["fwd_spread"]) == len(r["proc_spread"]) == 2 for r in raw["layers"])
    printed = capfd.readouterr().out
    assert "| spread" in printed and ("rounds: 2, stopped: --max-rounds reached" in printed
                                      or "rounds: 2, stopped: every size's chain within 2%" in printed)


def test_profile_rejects_sizes_below_the_batchnorm_minimum(capsys):
    assert main(["profile", MODEL, "--microbatch-sizes", "1,2"]) == 2
    assert "at least 2 samples" in capsys.readouterr().err


def test_profile_comm_writes_a_measured_cluster_profile(tmp_path, capfd):
    out = tmp_path / "c.yaml"
    assert main(["profile-comm", "--nproc", "2", "--repeats", "2", "-o", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# Measured ") and "measured:" in text
    p = load_profile(str(out))
    assert p.devices_per_node == 2 and p.device.peak("fp32") > 1e9
    assert 0 <= p.collectives.overlap <= 1 and p.link("group").bandwidth_bytes_per_s > 1e7
    assert "busy_sender_delay_us" in text and 0 < p.collectives.busy_sender_delay_s < 1.0
    r = p.device.reserve             # a rank's own footprint (python + torch: hundreds of MiB), nothing else
    assert 50 * 2**20 < r.runtime_context_bytes < p.device.memory_bytes
    assert r.collective_buffers_bytes == 0 and r.fragmentation_fraction == 0


def test_profile_comm_writes_the_busy_sender_delay_the_simulator_reads(tmp_path):
    """profile_yaml writes measure_busy_sender's busy median in microseconds; load_profile reads it
    back in seconds; a profile without the field (every GPU and Ascend one) reads 0."""
    sizes = [4 << 10, 64 << 20]
    links = {"group": (sizes, [1e-4 + n / 2e9 for n in sizes]), "all_reduce": (sizes, [2e-4 + n / 1e9 for n in sizes])}
    device = {"peak_flops_per_s": 1e11, "efficiency": [(1e6, 0.5), (1e9, 1.0)], "copy_bytes_per_s": 2e10}
    out = tmp_path / "c.yaml"
    out.write_text(profile_yaml("t", device, links, 2, 2, "gloo", 1 << 30, "parsim profile-comm", 0.1, 0,
                                busy_sender_s=(2.5e-4, 4.2e-3)))
    assert load_profile(str(out)).collectives.busy_sender_delay_s == pytest.approx(4.2e-3)
    assert load_profile("hardware_profiles/dgx-h100.yaml").collectives.busy_sender_delay_s == 0.0


def test_profile_comm_fits_zeros_collectives_and_fsdps_overhead_as_the_simulator_reads_them(tmp_path):
    """All-gather and reduce-scatter timed as t = a + S/b over the whole buffer S (all-to-all over
    each rank's buffer) are written as ring (pairwise-exchange) fits the cost model reads back: (n-1) steps of latency beyond the link's, and
    (n-1)/n S at the bus bandwidth; FSDP2's per-unit overheads in microseconds, read as seconds,
    and its per-byte copy rates in GB/s.
    A profile without them (every shipped GPU and Ascend one) prices rings at the all-reduce's."""
    sizes = [4 << 10, 1 << 20, 64 << 20]
    links = {"group": (sizes, [1e-4 + n / 2e9 for n in sizes]), "all_reduce": (sizes, [2e-4 + n / 1e9 for n in sizes]),
             "all_gather": (sizes, [3e-4 + n / 1e9 for n in sizes]), "reduce_scatter": (sizes, [5e-4 + n / 0.5e9 for n in sizes]),
             "all_to_all": (sizes, [7e-4 + n / 2e9 for n in sizes])}
    device = {"peak_flops_per_s": 1e11, "efficiency": [(1e6, 0.5), (1e9, 1.0)], "copy_bytes_per_s": 2e10}
    out = tmp_path / "c.yaml"
    out.write_text(profile_yaml("t", device, links, 2, 2, "gloo", 1 << 30, "parsim profile-comm", 0.1, 0,
                                fsdp_host={"all_gather": (1.5e-3, 4e9), "reduce_scatter": (2.5e-3, 2e9)}))
    coll = load_profile(str(out)).collectives
    assert coll.op_fit("all_gather") == pytest.approx((2e-4, 0.25), rel=1e-3)      # 0.5 * 1e9 / 2e9
    assert coll.op_fit("reduce_scatter") == pytest.approx((4e-4, 0.125), rel=1e-3)
    assert (coll.fsdp_gather_overhead_s, coll.fsdp_reduce_scatter_overhead_s) == pytest.approx((1.5e-3, 2.5e-3))
    assert coll.fsdp_host_s("all_gather", 4e6) == pytest.approx(1.5e-3 + 1e-3)           # 4 MB at 4 GB/s
    assert coll.fsdp_host_s("reduce_scatter", 4e6) == pytest.approx(2.5e-3 + 2e-3)
    cluster = load_cluster(str(out))          # the profile as measured: 1 node x 2 ranks
    for op, (a, b) in (("all_gather", (3e-4, 1e9)), ("reduce_scatter", (5e-4, 0.5e9))):
        assert collective_time_s(cluster, [0, 1], 1 << 26, op) == pytest.approx(a + (1 << 26) / b, rel=1e-3)
    # all_to_all_single over 2 ranks: one pairwise step, half of each rank's buffer crosses
    assert coll.op_fit("all_to_all") == pytest.approx((6e-4, 0.5), rel=1e-3)       # 0.5 * 2e9 / 2e9
    for nbytes in (4 << 10, 1 << 26):
        assert all_to_all_time_s(cluster, [0, 1], nbytes) == pytest.approx(7e-4 + nbytes / 2e9, rel=1e-3)
    gpu = load_profile("hardware_profiles/dgx-h100.yaml").collectives
    assert gpu.op_fits == () and gpu.fsdp_gather_overhead_s == 0.0 and gpu.fsdp_host_s("reduce_scatter", 1e9) == 0.0


def test_fsdp_host_time_is_the_line_through_the_two_unit_sizes():
    """measure_fsdp_overhead's two sizes give per-unit time and a per-byte rate, the line through
    them; a larger unit that adds nothing leaves no per-byte term, and neither term goes below 0."""
    from parsim.profile.comm import fsdp_host_fit
    small, large = 4 << 10, 4 << 20
    fit = fsdp_host_fit({large: (2e-3 + large / 2e9, 1e-3 + large / 1e9), small: (2e-3 + small / 2e9, 1e-3 + small / 1e9)})
    assert fit["all_gather"] == pytest.approx((2e-3, 2e9)) and fit["reduce_scatter"] == pytest.approx((1e-3, 1e9))
    flat = fsdp_host_fit({small: (2e-3, -1e-4), large: (1.5e-3, -3e-4)})
    assert flat == {"all_gather": (2e-3, 0.0), "reduce_scatter": (0.0, 0.0)}


def _row(label, pred, meas, mem_pred=100.0, mem_meas=100.0):
    return Row(label, 1, 1, 1, "1f1b", "", pred, meas, mem_pred, mem_meas, 0.5, 0.3, 0.2, 0.5)


def test_validation_summary_metrics():
    rows = [_row("a", 1.1, 1.0, 110, 100), _row("b", 1.8, 2.0, 90, 100), _row("planner", 0.95, 0.9)]
    s = summary(rows)
    assert s["mape_step_time"] == pytest.approx((0.1 + 0.1 + 0.05 / 0.9) / 3)
    assert s["max_error_step_time"] == pytest.approx(0.1)
    assert s["mape_peak_memory"] == pytest.approx((0.1 + 0.1 + 0) / 3)
    assert s["spearman_throughput"] == pytest.approx(1.0)
    assert s["pick_is_best"] and s["measured_best"] == "planner"
    worse = summary([_row("planner", 1.0, 1.2), _row("x", 1.05, 1.0), _row("y", 2, 2)])
    assert not worse["pick_is_best"] and worse["pick_gap_to_best"] == pytest.approx(0.2)
    assert math.isfinite(worse["spearman_throughput"]) and worse["pick_same_as"] == []


def _runs(label, pred, runs_s):
    """A row measured over several runs (one step each): its median is the row's measurement."""
    return replace(_row(label, pred, statistics.median(runs_s)), measured_steps_s=tuple((t,) for t in runs_s))


def test_a_pick_that_is_one_of_the_sets_plans_is_pooled_with_it_and_counted_once():
    """The planner picked dp2 itself: its runs and dp2's are one plan's, pooled into one median, and
    the plan counts once in MAPE and Spearman.  The old summary took the faster of the two labels'
    medians (0.9 here), which made the pick beat "a" (1.0) by noise alone."""
    rows = [_runs("planner", 1.0, [0.9, 0.9, 0.9]), _runs("dp2", 1.0, [1.2, 1.2, 1.2]), _runs("a", 1.1, [1.0] * 3),
            _runs("y", 2.0, [2.0] * 3)]
    s = summary(rows)
    assert s["pick_same_as"] == ["dp2"] and [p["label"] for p in s["plans"]] == ["dp2", "a", "y"]
    pooled_row = s["plans"][0]
    assert pooled_row["pooled_with"] == "planner" and pooled_row["measured_step_s"] == pytest.approx(1.05)
    assert len(pooled_row["measured_steps_s"]) == 6
    assert not s["pick_is_best"] and s["measured_best"] == "a"
    assert s["pick_gap_to_best"] == pytest.approx(0.05)
    assert s["mape_step_time"] == pytest.approx((0.05 / 1.05 + 0.1 + 0.0) / 3)
    assert table(rows)["plan"].tolist() == ["dp2 = planner", "a", "y"]
    # a pick of its own is left as it is
    own = summary([_runs("planner", 1.0, [1.2]), _runs("dp2", 1.1, [1.1]), _runs("y", 1.1, [1.0])])
    assert own["pick_same_as"] == [] and len(own["plans"]) == 3 and own["pick_gap_to_best"] == pytest.approx(0.2)


def test_tensor_parallel_profile_times_the_shards_with_their_collectives(tmp_path, capsys):
    """`parsim profile --tp 2` runs the executor's layout on 2 processes; the profiled model then
    takes those times as they are and adds no tensor-parallel communication of its own."""
    from parsim.cost.compute import ProfiledCompute
    from parsim.cost.layer import layer_time_s
    from parsim.shard.prepare import per_device_graph

    out = tmp_path / "tp.json"
    assert main(["profile", "examples/gpt_tiny_local.yaml", "--tp", "2", "--microbatch-sizes", "1,2",
                 "--repeats", "2", "--min-rounds", "2", "--max-rounds", "2", "-o", str(out), "--json"]) == 0
    table = load_profile_table(str(out))
    assert table.tp == 2 and table.tp_layout == "megatron"
    spec = load_model("examples/gpt_tiny_local.yaml")
    cluster = load_cluster("local-cpu")
    model = ProfiledCompute(table, AnalyticalCompute(cluster.device))
    layer = per_device_graph(spec.graph, 2, "megatron").layers[1]
    assert model.includes_tp_comm and layer.tp_comm
    assert layer_time_s(model, layer, "F", 2, cluster) == table.times(layer.name).fwd_s[1]
    unsharded = ProfiledCompute(replace(table, tp=1), AnalyticalCompute(cluster.device))
    assert layer_time_s(unsharded, layer, "F", 2, cluster) > layer.tp_share * table.times(layer.name).fwd_s[1]


def test_the_collective_section_round_trips_every_field(tmp_path):
    """collectives_flow, which profile-comm and calibrate both write, holds every field
    load_profile reads back: nothing measured is dropped when a profile is calibrated."""
    from parsim.hardware.collectives import Collectives, DtypeCollectives, collectives_flow
    coll = Collectives(library="gloo", bandwidth_efficiency=0.5, latency_s=1e-4, overlap=0.08, busy_sender_delay_s=4e-3,
                       op_fits=(("all_gather", 2e-4, 0.25), ("reduce_scatter", 0.0, 0.125)),
                       fsdp_gather_overhead_s=1.5e-3, fsdp_reduce_scatter_overhead_s=2e-3,
                       fsdp_gather_copy_bytes_per_s=3.2e9, fsdp_reduce_scatter_copy_bytes_per_s=1.7e9,
                       dtypes=(("bf16", DtypeCollectives(bandwidth_efficiency=0.4, latency_s=1e-4, overlap=0.0)),))
    text = open("hardware_profiles/local-cpu.yaml").read().splitlines()
    text = [f"collective: {collectives_flow(coll)}" if line.startswith("collective:") else line for line in text]
    out = tmp_path / "c.yaml"
    out.write_text("\n".join(text) + "\n")
    back = load_profile(str(out)).collectives
    assert collectives_flow(back) == collectives_flow(coll)           # every field, as written
    assert back.op_fit("reduce_scatter") == pytest.approx((0.0, 0.125))
    assert (back.busy_sender_delay_s, back.fsdp_gather_overhead_s) == pytest.approx((4e-3, 1.5e-3))
    assert back.fsdp_reduce_scatter_copy_bytes_per_s == pytest.approx(1.7e9)
    assert back.for_dtype("bf16").overlap == 0.0
    # NCCL's latency model (Collectives.latency_model) and its host overhead survive a calibration too
    nccl = Collectives(library="nccl", bandwidth_efficiency=0.9, latency_s=5e-6, latency_model="nccl",
                       net_overhead_s=2e-6)
    out.write_text("\n".join(f"collective: {collectives_flow(nccl)}" if line.startswith("collective:") else line
                             for line in text) + "\n")
    back = load_profile(str(out)).collectives
    assert (back.latency_model, back.net_overhead_s) == ("nccl", pytest.approx(2e-6))
    assert collectives_flow(back) == collectives_flow(nccl)


def test_concurrent_profilers_start_every_optimizer_step_together(monkeypatch):
    """The optimizer step is memory-bound, and a data-parallel run's ranks step at once: each timed
    step follows a barrier of the concurrent profilers, at least OPTIMIZER_REPEATS of them, and is
    timed with the zeroing of the gradients that opens a run's step."""
    from parsim.profile import layers

    events = []
    for name in ("zero_grad", "step"):
        def logged(self, *a, _name=name, _fn=getattr(layers.MasterWeightOptimizer, name), **k):
            events.append(_name)
            return _fn(self, *a, **k)
        monkeypatch.setattr(layers.MasterWeightOptimizer, name, logged)
    layers.profile_layers(load_model("examples/gpt_tiny_local.yaml"), [1], policy=RoundsPolicy(1, 1, 1), warmup=1,
                          barrier=lambda: events.append("barrier"))
    first = events.index("zero_grad")
    # each timed repeat zeroes the gradients and steps, as every step of a run does
    assert events[first - 1:] == ["barrier", "zero_grad", "step"] * (1 + layers.OPTIMIZER_REPEATS)
