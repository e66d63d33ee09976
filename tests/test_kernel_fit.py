"""The GEMM kernel tables (hardware_profiles/kernels/) and the fit of the kernel-level model's
per-device numbers to them (parsim.profile.kernel_fit): the shipped profiles hold what the fit
computes, the fit prices kernels by parsim.cost.kernels' own rule, and its error on a GPU left out
of the fit is what the docs claim (benchmarks/bench_kernels.py prints it)."""

import pytest

from parsim.cost.kernels import kernel_time_s
from parsim.errors import InputError
from parsim.hardware import load_cluster
from parsim.hardware.numerics import Engine
from parsim.model.graph import Kernel
from parsim.profile import kernel_fit as kf

HELD_OUT_FP16_MEDIAN = 0.10       # claimed in the docs: 8.4% (python benchmarks/bench_kernels.py, at H100's GEMM memory
                                  # floor 0.85 since 2026-12-02, thirty-ninth sitting; 10.7% at its memory efficiency 0.8078;
                                  # 11.2% at 0.8007 since TE's FP8 casts were priced, 2026-12-01; 11.9% at 0.7886; 12.4% at 0.7821; 12.3% at 0.7824; 11.7% at 0.79;
                                  # 10.1% at 0.820, before 2026-11-30g; 7.9% before the 2026-11-28 refit)


@pytest.fixture(scope="module")
def tables():
    parts = kf.load_parts()
    return parts, kf.load_gemms()


def test_the_loader_reads_every_table_in_parsims_convention(tables):
    parts, rows = tables
    counts = {}
    for s in rows:
        counts[(s.source, s.dtype)] = counts.get((s.source, s.dtype), 0) + 1
    assert counts == {("gemm_deepbench_v100.csv", "fp32"): 160, ("gemm_deepbench_v100.csv", "fp16"): 160,
                      ("gemm_vidur.csv", "fp16"): 1656, ("gemm_neusight_fp32.csv", "fp32"): 780}
    assert {parts[s.device].profile for s in rows} == {"dgx1-v100", "dgx-a100", "dgx-h100"}
    # DeepBench's first GEMM, M=1760 N=16 K=1760 with N the batch: parsim's M is the batch-grown 16
    first = next(s for s in rows if s.source == "gemm_deepbench_v100.csv")
    assert (first.m, first.n, first.k, first.time_s) == (16, 1760, 1760, pytest.approx(38e-6))


def test_a_part_that_is_a_profiles_own_device_agrees_with_the_profile(tables):
    parts, _ = tables
    for part in parts.values():
        if part.same_part:
            device = load_cluster(f"{part.profile}:1x1").device
            assert device.kernels.compute_units == part.compute_units, part.name
            assert device.memory_bandwidth_bytes_per_s == pytest.approx(part.memory_bandwidth_bytes_per_s)
            for dtype, rate in part.peak_flops_per_s:
                assert device.peak(dtype) == pytest.approx(rate), (part.name, dtype)


def test_the_fit_prices_a_kernel_as_the_cost_model_does(tables):
    parts, rows = tables
    for name in ("dgx-a100", "dgx-h100", "dgx1-v100"):
        device = load_cluster(f"{name}:1x1").device
        ex = device.kernels
        f = kf.GemmFit(ex.gemm_efficiency, ex.k_half, ex.m_half, ex.gemm_latency_s, ex.vector_gemm_efficiency)
        sample = [s for s in rows if parts[s.device].profile == name and parts[s.device].same_part][::97]
        fitted = kf.predict_s(sample, parts, f)
        for s, t in zip(sample, fitted):
            eff = ex.gemm_efficiency if s.dtype == "fp16" else ex.vector_gemm_efficiency
            engine = Engine(s.dtype, device.peak(s.dtype), eff)
            nbytes = kf.DTYPE_BYTES[s.dtype] * s.batch * (s.m * s.k + s.k * s.n + s.m * s.n)
            kernel = Kernel("F", "mm", "matmul", flops=(0.0, 2.0 * s.batch * s.m * s.n * s.k), bytes=(0.0, nbytes),
                            gemm=((0, s.m), (0, s.n), (0, s.k), (0, s.batch)))
            priced = kernel_time_s(kernel, 1, device, {"matmul": engine}) - ex.launch_s
            assert t == pytest.approx(priced, rel=1e-9), (name, s)


def test_the_shipped_profiles_hold_what_the_fit_computes():
    for name, f in kf.fit_profiles().items():
        ex = load_cluster(f"{name}:1x1").device.kernels
        shipped = {"gemm_efficiency": ex.gemm_efficiency, "k_half": ex.k_half, "m_half": ex.m_half,
                   "gemm_latency_us": ex.gemm_latency_s * 1e6, "vector_gemm_efficiency": ex.vector_gemm_efficiency}
        for key, value in kf.shipped_values(f).items():
            # the fit depends on the profile's memory_efficiency, which the end-to-end fit sets, and
            # that one on these numbers: the two are iterated to a fixed point (docs/hardware.md,
            # Calibration), whose last round moved A100's k_half by 1.1 (of 41) and the GEMM
            # latencies by 0.03 us; held to that round's step, not to the last written digit
            tol = {"k_half": 0.05 * max(1.0, abs(value)), "m_half": 0.1, "gemm_latency_us": 0.05}.get(
                key, 1.01 * 10 ** -kf.ROUNDING[key])
            assert shipped[key] == pytest.approx(value, abs=tol), (name, key)


def test_the_held_out_gpu_is_priced_within_the_claimed_median_error():
    f, summary = kf.held_out(("dgx1-v100", "dgx-a100"), "dgx-h100")
    n, median, p90 = summary["fp16"]
    assert n == 828
    assert median <= HELD_OUT_FP16_MEDIAN
    assert p90 < 0.35                  # the tail: skinny, misaligned shapes (docs: 29.9%)


def test_convolutions_are_read_as_implicit_gemms_and_priced_within_the_claimed_error():
    convs = kf.load_convs()
    assert len(convs) == 544          # 94 layers x 3 passes x 2 dtypes, less the input layers' data gradients
    # DeepSpeech's first layer: 700 x 161 x 1 input, 32 filters of 5 x 20, stride 2, batch 4
    first = convs[0]
    assert (first.phase, first.out_hw, first.gemm()) == ("F", (79, 341), (4 * 79 * 341, 32, 100))
    n, median, _ = kf.conv_errors(convs, kf.load_parts())["fp16"]
    assert n == 272 and median < 0.25  # docs: 23.5% (python benchmarks/bench_kernels.py)


def test_a_bad_table_names_its_file_and_field(tmp_path):
    (tmp_path / "devices.csv").write_text("device,profile,same_part,compute_units,fp16_tflops,fp32_tflops,"
                                          "memory_bandwidth_gb_per_s,source\nX,dgx-a100,no,108,312,19.5,0,x\n")
    with pytest.raises(InputError, match=r"devices.csv: field memory_bandwidth_gb_per_s: must be > 0"):
        kf.load_parts(tmp_path)


def test_a_gemm_floor_of_its_own_moves_the_gemms_and_not_the_memory_bound_kernels():
    """kernels.gemm_memory_efficiency (H100's 0.85) prices a memory-bound GEMM's floor and what the
    kernel fit models; the memory-bound kernels stay at the device's memory_efficiency, which the
    end-to-end fit sets: the two fits no longer move each other on H100."""
    from dataclasses import replace

    device = load_cluster("dgx-h100:1x1").device
    assert device.kernels.gemm_memory_efficiency == 0.85 and device.memory_efficiency < 0.85
    assert load_cluster("dgx-a100:1x1").device.kernels.gemm_memory_efficiency is None
    assert kf.gemm_memory_efficiency(device) == 0.85
    assert kf.gemm_memory_efficiency(load_cluster("dgx-a100:1x1").device) == \
        load_cluster("dgx-a100:1x1").device.memory_efficiency
    engine = Engine("fp16", device.peak("fp16"), 1.0)
    m, n, k = 16384, 16384, 8                      # K = 8: the operands' traffic bounds it
    nbytes = 2 * (m * k + k * n + m * n)
    gemm = Kernel("F", "mm", "matmul", flops=(0.0, 2.0 * m * n * k), bytes=(0.0, nbytes), gemm=((0, m), (0, n), (0, k), (0, 1)))
    elementwise = Kernel("F", "add", "mem", bytes=(0.0, nbytes))
    ex = device.kernels
    floor = nbytes / (device.memory_bandwidth_bytes_per_s * 0.85)
    assert kernel_time_s(gemm, 1, device, {"matmul": engine}) == pytest.approx(
        floor + ex.gemm_latency_s + ex.launch_s, rel=1e-12)
    coupled = replace(device, kernels=replace(ex, gemm_memory_efficiency=None))
    assert kernel_time_s(gemm, 1, coupled, {"matmul": engine}) == pytest.approx(
        nbytes / device.achieved_bandwidth_bytes_per_s() + ex.gemm_latency_s + ex.launch_s, rel=1e-12)
    assert kernel_time_s(elementwise, 1, device, {}) == kernel_time_s(elementwise, 1, coupled, {}) == \
        pytest.approx(nbytes / device.achieved_bandwidth_bytes_per_s() + ex.launch_s, rel=1e-12)
