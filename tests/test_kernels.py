"""The kernel-level cost model: extraction's kernel view, GEMM shape efficiency, launch costs, and
the numeric modes that pick each kernel's engine."""

import math
from dataclasses import replace

import pytest

from parsim.cost.compute import AnalyticalCompute
from parsim.cost.kernels import (gemm_shape_efficiency, kernel_counts, kernel_time_s, layer_kernels_time_s,
                                  memory_family)
from parsim.errors import InputError
from parsim.hardware import load_cluster
from parsim.hardware.device import KernelExecution
from parsim.hardware.numerics import MathMode, engine_dtype, engines
from parsim.model.graph import Kernel, Layer
from parsim.model.spec import load_model

A100 = load_cluster("dgx-a100:1x1").device
V100 = load_cluster("dgx1-v100:1x1").device
ASCEND = load_cluster("ascend910:1x1").device


@pytest.fixture(scope="module")
def resnet():
    return load_model("examples/resnet50_cifar10_local.yaml").graph


def test_kernels_add_up_to_the_flop_counters_totals(resnet):
    gpt = load_model("examples/gpt_tiny_local.yaml").graph
    for graph in (resnet, gpt):
        for layer in graph.layers:
            fwd = sum(k.flops[1] for k in layer.kernels if k.phase == "F")
            bwd = sum(k.flops[1] for k in layer.kernels if k.phase in "IW")
            assert fwd == pytest.approx(layer.fwd_flops, rel=1e-9), layer.name
            assert bwd == pytest.approx(layer.bwd_flops, rel=1e-9), layer.name
            assert all(k.flops[0] == 0 for k in layer.kernels), layer.name   # no work independent of the batch


def test_convolution_kernels_are_implicit_gemms_affine_in_the_batch(resnet):
    block = resnet.layers[resnet.index("layer1.0")]
    conv = next(k for k in block.kernels if k.phase == "F" and k.klass == "conv")
    # layer1.0's first 1x1 conv at 32x32 input: 8x8 maps after the stem, 64 -> 64 channels
    # (the unit's first conv is its downsample or conv1; both read 64 channels at 8x8)
    m, n, k, g = conv.gemm_at(16)
    assert m == 16 * 8 * 8 and k == 64 and g == 1
    assert conv.at(16)[0] == pytest.approx(2 * m * n * k)
    # every convolution has a weight gradient (W) whose K grows with the batch
    counts = kernel_counts(block)
    convs = sum(1 for x in block.kernels if x.phase == "F" and x.klass == "conv")
    assert sum(1 for x in block.kernels if x.phase == "W") == convs == 4
    assert counts["F"] == 16 and counts["I"] + counts["W"] == 16
    w = next(x for x in block.kernels if x.phase == "W")
    assert w.gemm[2][1] > 0 and w.gemm[0][1] == w.gemm[1][1] == 0


def test_full_waves_reach_full_efficiency_and_a_partial_wave_pays_for_its_idle_units():
    ex = KernelExecution(compute_units=4, tiles=((128, 128),))
    assert gemm_shape_efficiency(256, 256, 4096, 1, ex) == pytest.approx(1.0)          # 4 tiles, 1 wave
    assert gemm_shape_efficiency(5 * 128, 128, 4096, 1, ex) == pytest.approx(5 / 8)    # 5 tiles in 2 waves
    assert gemm_shape_efficiency(64, 128, 4096, 1, replace(ex, compute_units=1)) == pytest.approx(0.5)  # padding


def test_split_k_rescues_a_small_output_with_a_long_reduction():
    ex = KernelExecution(compute_units=4, tiles=((128, 128),), k_half=64)
    # one tile, K long: split 4 ways, each K/4 long
    assert gemm_shape_efficiency(128, 128, 65536, 1, ex) == pytest.approx(16384 / (16384 + 64))
    # one tile, K short: splitting cannot help, one unit of four works
    assert gemm_shape_efficiency(128, 128, 64, 1, ex) == pytest.approx(max(0.25 * 0.5, 0.5 * 32 / 96, 16 / 80))


def test_few_rows_halve_a_gemm_at_m_half_in_each_phase_own_shape():
    """M / (M + m_half) times K / (K + k_half): a forward (or data gradient) of one image's 1x1 map
    has M = 1 row, its weight gradient K = 1; each pays its own half-saturation."""
    ex = KernelExecution(m_half=1.5, k_half=4.0)
    assert gemm_shape_efficiency(1, 512, 2048, 1, ex) == pytest.approx(1 / 2.5 * 2048 / 2052)   # F: M = 1
    assert gemm_shape_efficiency(2048, 512, 1, 1, ex) == pytest.approx(2048 / 2049.5 * 1 / 5)  # W: K = 1
    assert gemm_shape_efficiency(3, 64, 1e12, 1, replace(ex, m_half=3.0)) == pytest.approx(0.5)  # M = m_half
    assert gemm_shape_efficiency(1, 64, 1e12, 1, replace(ex, m_half=0.0)) == pytest.approx(1.0)  # 0: rows never limit


def test_memory_bound_kernels_run_at_their_familys_bandwidth():
    """A batch norm or a max-pool at its family's fraction of the bandwidth, forward and backward
    apart; an activation (no family of its own) at the device's memory efficiency."""
    assert [memory_family(op) for op in ("native_batch_norm", "native_batch_norm_backward", "native_layer_norm",
                                         "max_pool2d_with_indices", "max_pool2d_with_indices_backward",
                                         "relu", "threshold_backward", "add")] == \
        ["norm", "norm_backward", "norm", "pool", "pool_backward", "elementwise", "elementwise", "elementwise"]
    ex = KernelExecution(launch_s=1e-6, memory_family_efficiency=(("norm", 0.25), ("pool_backward", 2.0)))
    dev = replace(A100, memory_efficiency=0.5, kernels=ex)
    bw = dev.memory_bandwidth_bytes_per_s
    for op, frac in (("native_batch_norm", 0.25), ("max_pool2d_with_indices_backward", 2.0), ("relu", 0.5),
                     ("native_batch_norm_backward", 0.5)):
        k = Kernel("F", op, "mem", bytes=(100.0, 1e6))
        assert kernel_time_s(k, 8, dev, {}) == pytest.approx((100 + 8e6) / (bw * frac) + 1e-6), op


def test_launch_costs_add_on_a_synchronous_device_and_overlap_on_an_asynchronous_one():
    kernels = tuple(Kernel("F", "relu", "mem", bytes=(0.0, 1e3)) for _ in range(10))
    layer = Layer("l", 0.0, 0.0, 0, 0, 0.0, 0.0, kernels=kernels)
    dev = replace(A100, memory_efficiency=1.0, kernels=KernelExecution(launch_s=2e-6, host_dispatch_s=10e-6))
    per_kernel = 1e3 * 4 / dev.memory_bandwidth_bytes_per_s + 2e-6
    assert layer_kernels_time_s(layer, "F", 4, dev, {}) == pytest.approx(10 * (per_kernel + 10e-6))
    dev = replace(dev, kernels=replace(dev.kernels, asynchronous=True))
    assert layer_kernels_time_s(layer, "F", 4, dev, {}) == pytest.approx(max(10 * per_kernel, 10 * 10e-6))


def test_a_layer_call_is_paid_once_per_pass_of_the_layer():
    """layer_call_s: once for a forward, once for a whole backward, once for each of a split
    backward's two passes (input, then weight), never for a pass with no kernels; host time, so
    added on a synchronous device and overlapped on an asynchronous one."""
    kernels = (Kernel("F", "relu", "mem", bytes=(0.0, 1e3)), Kernel("I", "threshold_backward", "mem", bytes=(0.0, 1e3)),
               Kernel("W", "mm", "mem", bytes=(0.0, 1e3)))
    layer = Layer("l", 0.0, 0.0, 0, 0, 0.0, 0.0, kernels=kernels)
    no_weight = Layer("m", 0.0, 0.0, 0, 0, 0.0, 0.0, kernels=kernels[:2])
    dev = replace(A100, memory_efficiency=1.0, kernels=KernelExecution(launch_s=2e-6, layer_call_s=100e-6))
    one = 1e3 * 4 / dev.memory_bandwidth_bytes_per_s + 2e-6
    assert layer_kernels_time_s(layer, "F", 4, dev, {}) == pytest.approx(one + 100e-6)
    assert layer_kernels_time_s(layer, "B", 4, dev, {}) == pytest.approx(2 * one + 100e-6)
    split = sum(layer_kernels_time_s(layer, k, 4, dev, {}) for k in "IW")
    assert split == pytest.approx(2 * one + 200e-6)
    assert layer_kernels_time_s(no_weight, "W", 4, dev, {}) == 0.0
    dev = replace(dev, kernels=replace(dev.kernels, asynchronous=True))
    assert layer_kernels_time_s(layer, "F", 4, dev, {}) == pytest.approx(max(one, 100e-6))


def test_small_microbatches_are_not_free_any_more(resnet):
    model = AnalyticalCompute(A100, "fp16")
    per_sample = {b: sum(model.layer_time_s(l, k, b) for l in resnet.layers for k in "FB") / b for b in (2, 256)}
    assert per_sample[2] > 20 * per_sample[256]     # launch- and dispatch-bound at 2 samples


def test_numeric_modes_pick_each_kernels_engine():
    assert engine_dtype(A100, MathMode("fp32"), "conv") == "tf32"           # cudnn.allow_tf32 default on
    assert engine_dtype(A100, MathMode("fp32"), "matmul") == "fp32"         # cuda.matmul.allow_tf32 default off
    assert engine_dtype(A100, MathMode("fp32", tf32_matmul=True), "matmul") == "tf32"
    assert engine_dtype(A100, MathMode("fp32", tf32_conv=False), "conv") == "fp32"
    assert engine_dtype(V100, MathMode("fp32"), "conv") == "fp32"            # no TF32 on Volta
    assert engine_dtype(A100, MathMode("bf16"), "matmul") == "bf16"
    assert engine_dtype(ASCEND, MathMode("fp32"), "conv") == "fp16"          # allow_fp32_to_fp16 on the Cube
    assert engine_dtype(ASCEND, MathMode("fp32", ascend_precision_mode="must_keep_origin_dtype"), "conv") == "fp32"


@pytest.mark.parametrize("device", [V100, ASCEND], ids=["v100", "ascend910"])
def test_bf16_on_a_device_without_bf16_units_is_refused_with_what_to_change(device):
    with pytest.raises(InputError, match=r"training\.dtype: bf16: .* has no bf16 units .*use dtype: fp16"):
        AnalyticalCompute(device, "bf16")


def test_model_yaml_carries_the_numeric_modes(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("schema_version: 1\nlayers:\n  - {name: a, fwd_flops: 1.0e+9, params: 10, output_bytes: 4, "
                    "saved_bytes: 4}\ntraining:\n  global_batch_size: 8\n  tf32: {conv: false, matmul: true}\n"
                    "  ascend_precision_mode: must_keep_origin_dtype\n  memory_format: channels_last\n")
    t = load_model(str(path)).training
    assert (t.tf32_conv, t.tf32_matmul, t.ascend_precision_mode) == (False, True, "must_keep_origin_dtype")
    assert t.memory_format == "channels_last"
    with pytest.raises(InputError, match="memory_format"):
        path.write_text(path.read_text().replace("channels_last", "nhwc"))
        load_model(str(path))
    path.write_text(path.read_text().replace("nhwc", "channels_last"))
    path.write_text(path.read_text().replace("must_keep_origin_dtype", "fastest"))
    with pytest.raises(InputError, match="ascend_precision_mode"):
        load_model(str(path))


def test_tf32_prices_fp32_convolutions_at_the_tensor_core_rate(resnet):
    conv_heavy = resnet.layers[resnet.index("layer3.1")]
    channels_last = MathMode("fp32", channels_last=True)     # no layout transposes: the rate alone
    tf32 = AnalyticalCompute(A100, "fp32", channels_last).layer_time_s(conv_heavy, "F", 256)
    plain = AnalyticalCompute(A100, "fp32", replace(channels_last, tf32_conv=False)).layer_time_s(conv_heavy, "F", 256)
    # the rates: TF32 156 TFLOP/s at the A100's calibrated convolution efficiency (0.39, results/
    # published/figures.yaml) against fp32 19.5 at 1.0, 3.1x; the block's memory-bound kernels
    # (batch norms, ReLUs, the add) take the same time in both, so the layer gains less (1.98x)
    assert plain > 1.5 * tf32
    assert math.isfinite(tf32)


def test_engines_carry_their_own_efficiency_and_the_nchw_transposes():
    a100 = engines(A100, MathMode("fp32"))
    ex = A100.kernels
    assert (a100["conv"].dtype, a100["conv"].efficiency, a100["conv"].nchw_transposes) == ("tf32", ex.conv_efficiency, True)
    fp16 = engines(A100, MathMode("fp16"))     # on the tensor cores: a convolution's own efficiency, the GEMMs' theirs
    assert (fp16["conv"].efficiency, fp16["matmul"].efficiency) == (ex.conv_efficiency, ex.gemm_efficiency)
    without = replace(A100, kernels=replace(ex, conv_efficiency=None))     # none in the profile: the GEMMs'
    assert engines(without, MathMode("fp16"))["conv"].efficiency == ex.gemm_efficiency
    # fp32 matmuls stay on the CUDA cores (TF32 off for matmul): the vector efficiency, no layout cost
    assert (a100["matmul"].dtype, a100["matmul"].efficiency, a100["matmul"].nchw_transposes) == \
        ("fp32", ex.vector_gemm_efficiency, False)
    assert not engines(A100, MathMode("fp16", channels_last=True))["conv"].nchw_transposes
    v100 = engines(V100, MathMode("fp32"))["conv"]          # Volta: fp32 convolutions on CUDA cores, NCHW native
    assert (v100.dtype, v100.efficiency, v100.nchw_transposes) == ("fp32", V100.kernels.vector_conv_efficiency, False)
    assert engines(V100, MathMode("fp32"))["matmul"].efficiency == V100.kernels.vector_gemm_efficiency
    assert engines(V100, MathMode("fp16"))["conv"].nchw_transposes
    # a device with one engine (a CPU profile lists fp32 only): its GEMM efficiency, whatever else is set
    cpu = replace(load_cluster("local-cpu:1x1").device,
                  kernels=KernelExecution(gemm_efficiency=0.6, vector_gemm_efficiency=0.9, nhwc_matrix_engine=True))
    e = engines(cpu, MathMode("fp32"))["conv"]
    assert (e.dtype, e.efficiency) == ("fp32", 0.6)


def test_an_nchw_tensor_core_convolution_pays_a_read_and_write_of_its_activations():
    conv = Kernel("F", "convolution", "conv", flops=(0.0, 1e9), bytes=(1e5, 1e6), gemm=((0, 4096), (256, 0), (576, 0), (1, 0)))
    nchw, nhwc = (engines(A100, MathMode("fp16", channels_last=c)) for c in (False, True))
    extra = kernel_time_s(conv, 8, A100, nchw) - kernel_time_s(conv, 8, A100, nhwc)
    assert extra == pytest.approx(2 * 8 * 1e6 / A100.achieved_bandwidth_bytes_per_s())    # weights are not transposed


def test_a_layers_kept_price_is_its_kernels_priced_one_by_one(resnet):
    """AnalyticalCompute keeps each kernel's price per (micro-batch, share) and each GEMM shape's
    efficiency: whatever it kept before, a layer's price is exactly (==) the sum of its kernels
    priced afresh, at every size and share, asked in an order that reuses what is kept."""
    layers = [layer for layer in resnet.layers if layer.kernels]
    layers += [replace(layer, tp_share=0.5) for layer in layers[:6]]        # the same kernels at a share
    for device in (A100, ASCEND):
        compute = AnalyticalCompute(device, "fp16")
        for b in (1, 3, 8, 3, 1):
            for layer in layers:
                for kind in "FBIW":
                    assert compute.layer_time_s(layer, kind, b) == \
                        layer_kernels_time_s(layer, kind, b, device, compute.engines), (layer.name, kind, b)
