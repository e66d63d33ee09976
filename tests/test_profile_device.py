"""parsim profile-device: the CPU path end to end (a quick grid, seconds), the CUDA path against a
fake device whose kernels take known times, and the refusals of backends torch cannot reach."""

import csv
import json

import pytest
import torch

from parsim.cli import main
from parsim.hardware import load_cluster
from parsim.profile import device as dev
from parsim.profile.device_yaml import CUDA_TILES, efficiency_points
from parsim.profile.kernel_fit import GemmSample, Part, _Design

KERNELS = "hardware_profiles/kernels"


def _header(path) -> list[str]:
    with open(path, newline="") as f:
        return next(csv.reader(f))


def test_cpu_profile_end_to_end_loads_and_simulates(tmp_path, capsys):
    """Measure this CPU on the quick grid, write the tables in hardware_profiles/kernels' forms,
    rebuild a local-cpu-style profile (links from local-cpu, as profile-comm wrote them) from the
    tables, and plan and simulate on it."""
    out = tmp_path / "cpu.yaml"
    assert main(["profile-device", "-o", str(out), "--quick", "--repeats", "2", "--name", "rebuilt-cpu",
                 "--links", "hardware_profiles/local-cpu.yaml"]) == 0
    said = capsys.readouterr().out
    assert "profile-device: cpu: 8 GEMMs, 1 convolutions" in said and "about" in said and f"wrote {out}" in said
    tables = tmp_path / "cpu.kernels"
    assert _header(tables / "gemm.csv") == ["device", "dtype", "m", "n", "k", "time_us"]
    assert set(_header(tables / "gemm.csv")) <= set(_header(f"{KERNELS}/gemm_vidur.csv")) | {"dtype"}
    assert _header(tables / "conv.csv") == _header(f"{KERNELS}/conv_deepbench_v100.csv")
    m = dev.read_tables(str(tables))
    assert len(m.gemms) == 8 and len(m.convs) == 1 and m.copy_bytes_per_s > 0 and m.launch_s > 0
    c = load_cluster(str(out))
    local = load_cluster("local-cpu")
    assert c.profile.name == "rebuilt-cpu" and c.devices_per_node == local.devices_per_node == 2
    assert dict(c.profile.links) == dict(local.profile.links) and c.profile.collectives == local.profile.collectives
    best = max(g.flops / g.time_s for g in m.gemms)
    assert c.device.peak("fp32") == pytest.approx(best, rel=1e-4)          # the best GEMM of the table
    assert c.device.memory_bytes == m.info.memory_bytes // 2               # machine memory / ranks per node
    assert list(c.device.efficiency) == [(pytest.approx(w, rel=1e-2), pytest.approx(e, abs=1e-3))
                                         for w, e in efficiency_points(m, "fp32", c.device.peak("fp32"))]
    assert main(["simulate", "examples/gpt_tiny_local.yaml", "--cluster", str(out), "--dp", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step_time_s"] > 0
    assert main(["plan", "examples/gpt_tiny_local.yaml", "--cluster", str(out), "--json"]) == 0


@pytest.mark.parametrize("device, words", [
    ("cuda", ["--device cuda", "torch.cuda.is_available() is False", "--device cpu"]),
    ("npu", ["--device npu", "torch_npu"]),
])
def test_a_missing_backend_is_refused_in_one_line(tmp_path, capsys, monkeypatch, device, words):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["profile-device", "-o", str(tmp_path / "p.yaml"), "--device", device]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    for w in words:
        assert w in err, (w, err)
    assert not (tmp_path / "p.yaml").exists()


# ----------------------------------------------------------------------------- the CUDA path, faked

TRUTH = {"gemm_efficiency": 0.7, "k_half": 30.0, "m_half": 2.0, "gemm_latency_s": 5e-6, "vector": 0.8}
PEAK = {"fp16": 800e12, "fp32": 60e12}
BANDWIDTH, LAUNCH_S, DISPATCH_S, SMS = 3.0e12, 4e-6, 9e-6, 132


class _Clock:
    now = 0.0


class _Event:
    def __init__(self, enable_timing=False):
        self.t = None

    def record(self):
        self.t = _Clock.now

    def elapsed_time(self, end):              # milliseconds, as torch.cuda.Event's
        return (end.t - self.t) * 1e3


class _Props:
    name, total_memory, multi_processor_count = "Fake-GPU", 80 * 10**9, SMS


def _kernel_s(dtype, m, n, k) -> float:
    """The true time of one GEMM: parsim's kernel model with TRUTH's numbers on a 132-SM device."""
    from parsim.hardware.device import Device, KernelExecution
    device = Device("Fake-GPU", tuple(PEAK.items()), 80 * 10**9, BANDWIDTH,
                    kernels=KernelExecution(compute_units=SMS, tiles=tuple(map(tuple, CUDA_TILES))))
    part = Part("Fake-GPU", "measured", True, SMS, tuple(PEAK.items()), BANDWIDTH)
    design = _Design([GemmSample("t", "Fake-GPU", dtype, m, n, k, 1, 1.0)], {"Fake-GPU": part}, {"measured": device})
    eff = TRUTH["gemm_efficiency"] if dtype == "fp16" else TRUTH["vector"]
    return float(design.predict_s(eff, TRUTH["k_half"], TRUTH["m_half"], TRUTH["gemm_latency_s"])[0])


def _advance(seconds):
    def run():
        _Clock.now += seconds
    return run


@pytest.fixture
def fake_cuda(monkeypatch):
    """torch.cuda as a device whose operations take known times on a fake clock."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: _Props)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (79 * 10**9, 80 * 10**9))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda, "Event", _Event)
    switches = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32   # CudaBackend turns TF32 off
    cls = dev.CudaBackend
    monkeypatch.setattr(cls, "gemm_fn", lambda self, m, n, k, dtype: _advance(_kernel_s(dtype, m, n, k)))
    monkeypatch.setattr(cls, "conv_fns", lambda self, c: tuple(
        _advance(c.flops / (PEAK[c.dtype] * f)) for f in (0.5, 0.4, 0.45)))
    monkeypatch.setattr(cls, "copy_fn", lambda self, nbytes: _advance(2 * nbytes / BANDWIDTH))
    monkeypatch.setattr(cls, "launch_fn", lambda self: _advance(dev.LAUNCHES * LAUNCH_S))
    monkeypatch.setattr(cls, "host_dispatch_s", lambda self, repeats: DISPATCH_S)
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = switches


def test_the_cuda_path_measures_and_fits_a_fake_device(tmp_path, capsys, fake_cuda):
    out = tmp_path / "gpu.yaml"
    assert main(["profile-device", "-o", str(out), "--device", "cuda", "--name", "fake-gpu", "--repeats", "3",
                 "--peak", "fp16=800,fp32=60"]) == 0
    said = capsys.readouterr().out
    plan = dev.plan("cuda")
    assert f"profile-device: cuda: {len(plan.gemms)} GEMMs, {len(plan.convs)} convolutions" in said
    m = dev.read_tables(str(tmp_path / "gpu.kernels"))
    for g in m.gemms:                                   # the table holds each kernel's time, to 4 digits
        assert g.time_s == pytest.approx(_kernel_s(g.dtype, g.m, g.n, g.k), rel=1e-3)
    assert m.copy_bytes_per_s == pytest.approx(BANDWIDTH, rel=1e-4)       # 2 x bytes / time: read + write
    assert m.launch_s == pytest.approx(LAUNCH_S, rel=1e-3) and m.host_dispatch_s == pytest.approx(DISPATCH_S)
    assert (m.info.name, m.info.memory_bytes, m.info.compute_units, m.info.runtime_bytes) == \
        ("Fake-GPU", 80 * 10**9, SMS, 10**9)
    d = load_cluster(str(out)).device
    assert dict(d.peak_flops_per_s) == pytest.approx(PEAK)                # --peak: the datasheet's
    ex = d.kernels
    assert ex.compute_units == SMS and ex.launch_s == pytest.approx(LAUNCH_S, rel=1e-2)
    assert ex.gemm_efficiency == pytest.approx(TRUTH["gemm_efficiency"], abs=0.01)
    assert ex.vector_gemm_efficiency == pytest.approx(TRUTH["vector"], abs=0.01)
    assert ex.gemm_latency_s == pytest.approx(TRUTH["gemm_latency_s"], rel=0.05)
    assert ex.conv_efficiency == pytest.approx(0.5, abs=1e-3)             # the forward passes' rate / peak
    assert d.reserve.runtime_context_bytes == 10**9 and d.memory_bandwidth_bytes_per_s == pytest.approx(BANDWIDTH)


def test_without_a_datasheet_the_peak_is_the_best_gemm_measured(tmp_path, fake_cuda):
    out = tmp_path / "gpu.yaml"
    assert main(["profile-device", "-o", str(out), "--device", "cuda", "--repeats", "2"]) == 0
    m = dev.read_tables(str(tmp_path / "gpu.kernels"))
    d = load_cluster(str(out)).device
    for dtype in ("fp16", "fp32"):
        assert d.peak(dtype) == pytest.approx(max(g.flops / g.time_s for g in m.gemms if g.dtype == dtype), rel=1e-4)
        assert d.peak(dtype) < PEAK[dtype]


def test_the_estimate_is_said_first_and_the_grid_cut_to_the_budget(fake_cuda):
    p = dev.plan("cuda", repeats=5)
    rate, call_s, copy = 500e12, 5e-6, 3e12
    per = dev.WARMUP + 5
    work = sum(g.flops for g in p.gemms) + 3 * sum(c.flops for c in p.convs)
    assert p.estimate_s(rate, call_s, copy) == pytest.approx(
        per * (work / rate + 2 * p.copy_bytes / copy) + p.calls() * call_s)
    budget = p.estimate_s(rate, call_s, copy) / 3
    cut = dev.within_budget(p, lambda q: q.estimate_s(rate, call_s, copy), budget)
    assert cut.estimate_s(rate, call_s, copy) <= budget and cut.cut > 0
    assert max(g.flops for g in cut.gemms) <= min(g.flops for g in p.gemms if g not in cut.gemms)


def test_the_prepared_gpu_check_runs_here_on_the_cpu(tmp_path):
    """runners/device_check.sh, the one command a lent GPU machine is to run (issue 38), run here
    with DEVICE=cpu on the quick grid: it writes the files the device tool brings back (at most 8,
    no deeper than two folders), its run trains a model and reports the prediction beside it, the
    same plan is priced by the profiled model, each run is scored against both models' bands, and
    each of its four simulations prints a step, attention's batched GEMMs are timed by head
    dimension, and fused attention by sequence length."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, OUT=str(tmp_path), DEVICE="cpu", QUICK="1",
               PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    done = subprocess.run(["bash", "runners/device_check.sh"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["compare.txt", "env.txt", "measured.kernels/conv.csv", "measured.kernels/device.csv",
                     "measured.kernels/gemm.csv", "measured.yaml", "profile-device.log", "runs.txt"]
    runs = (tmp_path / "runs.txt").read_text()                  # the tiny bf16 GPT planned, then trained
    result = json.loads(next(ln for ln in runs.splitlines() if ln.startswith("RESULT "))[len("RESULT "):])
    assert result["model"] == "examples/gpt_tiny_local_bf16.yaml" and "(rc " not in runs
    assert result["step_time_s"] > 0 and result["predicted"]["step_time_s"] > 0 and len(result["step_times_s"]) == 20
    profiled = next(ln for ln in runs.splitlines() if ln.startswith("PROFILED "))    # the same plan, profiled
    assert "step " in profiled and "band" in profiled, profiled
    # each run against both models' bands (runners/band_coverage.py): the CPU has no public row, so
    # the analytical model has no band; the profiled model's rests on local-cpu's own residuals
    bands = runs[runs.index("BANDS "):]
    assert "analytical bands: 0 of 0 runs inside" in bands and "    analytical " in bands and "no band" in bands
    profiled_json = json.loads(next(ln for ln in runs.splitlines() if ln.startswith("PROFILED_JSON "))[14:])
    inside = profiled_json["step_time_band"]["low"] <= result["step_time_s"] <= profiled_json["step_time_band"]["high"]
    assert f"profiled bands: {int(inside)} of 1 runs inside" in bands and ("] in" if inside else "] OUT") in bands
    compare = (tmp_path / "compare.txt").read_text()
    assert compare.count("$ parsim simulate ") == 4 and compare.count("\nstep ") == 4 and "(rc " not in compare
    # attention's batched GEMMs by head dimension (runners/gemm_alignment.py): every head dimension timed
    assert "attention's batched GEMMs on cpu" in compare and compare.count("  head dim ") == 8
    # fused attention by sequence length (runners/attention_seq.py): two sequences, causal and not
    assert "fused attention on cpu" in compare and compare.count(" TFLOP/s (forward ") == 4
    assert "profile-device took" in (tmp_path / "profile-device.log").read_text()


def test_band_coverage_counts_the_runs_inside_each_models_band(tmp_path, capsys):
    """runners/band_coverage.py on a GPU's runs.txt as device_check.sh writes it: the first H200's
    two runs (results/2026-12-04e-amd-epyc/h200/rerun), the GPT inside both bands, ResNet-50
    outside both (its analytical band here made up, 0.9-1.1x)."""
    import runpy

    def band(lo, hi):
        return {"low": lo, "high": hi, "level": 0.9, "source": "", "value": (lo + hi) / 2, "rows": []}
    lines = [
        "RESULT " + json.dumps({"model": "gpt", "step_time_s": 0.2939, "predicted": {"step_time_s": 0.2753},
                                "step_time_band": band(0.25, 0.35)}),
        "PROFILED_JSON " + json.dumps({"model": "gpt", "step_time_s": 0.3054, "step_time_band": band(0.2778, 0.3578)}),
        "RESULT " + json.dumps({"model": "rn50", "step_time_s": 0.05638, "predicted": {"step_time_s": 0.0371},
                                "step_time_band": band(0.0334, 0.0408)}),
        "PROFILED_JSON " + json.dumps({"model": "rn50", "step_time_s": 0.06262, "step_time_band": band(0.05699, 0.07335)}),
        "RESULT " + json.dumps({"model": "llama", "step_time_s": None, "predicted": None, "step_time_band": None}),
    ]
    (tmp_path / "runs.txt").write_text("\n".join(lines) + "\n")
    mod = runpy.run_path("runners/band_coverage.py")
    mod["main"](str(tmp_path / "runs.txt"))
    out = capsys.readouterr().out
    assert "analytical bands: 1 of 2 runs inside" in out and "profiled bands: 1 of 2 runs inside" in out
    assert "llama: no measured step" in out and "( -6.3%)" in out and "[56.99, 73.35] OUT" in out
    plan = tmp_path / "plan.json"                   # the line device_check.sh writes from a priced plan
    plan.write_text(json.dumps({"estimate": {"step_time_s": 0.3, "step_time_band": band(0.28, 0.36)}}))
    line = mod["profiled_line"]("gpt", str(plan))
    assert line.startswith("PROFILED_JSON ") and json.loads(line[len("PROFILED_JSON "):]) == \
        {"model": "gpt", "step_time_s": 0.3, "step_time_band": band(0.28, 0.36)}
    measured = tmp_path / "measured.json"            # a run's RESULT line, as device_check.sh writes it
    measured.write_text(json.dumps({"step_time_s": 0.29, "predicted": {"step_time_s": 0.3}, "extra": 1}))
    line = mod["result_line"]("gpt", str(measured), str(plan))
    record = json.loads(line[len("RESULT "):])
    assert line.startswith("RESULT ") and record["model"] == "gpt" and record["step_time_s"] == 0.29
    assert record["step_time_band"] == band(0.28, 0.36) and "extra" not in record
    assert mod["records"]([line], "RESULT") == {"gpt": record}     # the line main reads back


def test_band_coverage_refuses_bad_input_in_one_line(tmp_path):
    """A missing runs.txt or measured.json, a wrong argument count or a runs.txt line that is not
    JSON: one line, a non-zero exit, no traceback."""
    import subprocess
    import sys

    (tmp_path / "runs.txt").write_text("RESULT {not json\n")
    for args in (["/nonexistent/runs.txt"], ["--profiled", "gpt"], [str(tmp_path / "runs.txt")],
                 ["--result", "gpt", "/nonexistent/measured.json", "/nonexistent/plan.json"], ["--result", "gpt"]):
        done = subprocess.run([sys.executable, "runners/band_coverage.py", *args], capture_output=True, text=True)
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("band_coverage: ")
