"""torch's CPU convolution backend rule (parsim.cost.conv_backend) against torch itself, and its
pricing in the kernel-level model."""

from dataclasses import replace

import pytest
import torch

from parsim.cost.conv_backend import (ONEDNN, SLOW2D, cpu_conv_backend, per_sample_dims, per_sample_rows,
                                      valid_tap_fraction)
from parsim.cost.kernels import kernel_time_s
from parsim.hardware import load_cluster
from parsim.hardware.device import KernelExecution
from parsim.hardware.numerics import MathMode, engines
from parsim.model.graph import ConvWindow, Kernel
from parsim.model.spec import load_model

# (C_in, C_out, kernel, stride, dilation, H, groups)
SHAPES = [(1024, 256, 1, 1, 1, 2, 1), (64, 256, 1, 1, 1, 8, 1), (256, 512, 1, 2, 1, 4, 1), (64, 64, 3, 1, 1, 8, 1),
          (3, 64, 7, 2, 1, 32, 1), (8, 8, 1, 1, 2, 4, 1), (16, 16, 1, 1, 1, 4, 4), (4, 4, 3, 1, 1, 2, 1),
          (3, 8, 5, 1, 1, 4, 1)]


@pytest.mark.parametrize("threads", [1, 2])
def test_backend_rule_matches_torch(threads):
    if not torch.backends.mkldnn.is_available():
        pytest.skip("torch built without oneDNN")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for cin, cout, k, s, d, h, g in SHAPES:
            w = torch.empty(cout, cin // g, k, k)
            for b in (1, 2, 8, 15, 16, 17, 32):
                x = torch.empty(b, cin, h, h)
                got = torch._C._select_conv_backend(x, w, None, [s, s], [k // 2, k // 2], [d, d], False, [0, 0], g,
                                                    None)
                want = {ONEDNN: "Mkldnn", SLOW2D: "Slow2d"}[cpu_conv_backend(ConvWindow((k, k), (s, s), (d, d), False,
                                                                                        cin * h * h), g, b, threads)]
                if want == "Slow2d" and d > 1:
                    want = "SlowDilated2d"        # torch's own slow path for a dilated window
                assert got.name == want, (cin, cout, k, s, d, h, g, b, threads, got)
    finally:
        torch.set_num_threads(before)


def test_extraction_records_each_convolution_window():
    graph = load_model("examples/resnet50_cifar10_local.yaml").graph
    stem = [k for k in graph.layers[0].kernels if k.klass == "conv"]
    assert {k.conv for k in stem} == {ConvWindow((7, 7), (2, 2), (1, 1), False, 3 * 32 * 32, (3, 3), (32, 32))}
    block = [k.conv for k in graph.layers[1].kernels if k.phase == "F" and k.klass == "conv"]
    assert [w.kernel for w in block] == [(1, 1), (1, 1), (3, 3), (1, 1)]   # downsample first, as extraction records it
    assert [w.padding for w in block] == [(0, 0), (0, 0), (1, 1), (0, 0)] and {w.input_hw for w in block} == {(8, 8)}
    layer4 = [k.conv for k in graph.layers[-2].kernels if k.klass == "conv"]
    assert {w.input_hw for w in layer4} == {(1, 1)}            # forward and both gradients see the 1x1 map
    assert all(k.conv is None for k in graph.layers[-1].kernels)   # the head's matmuls have no window


LAYER3_1X1 = Kernel("F", "convolution", "conv", flops=(0.0, 2.0 * 4 * 1024 * 256), bytes=(1024 * 256 * 4, 4 * 1280 * 4),
                    gemm=((0, 4), (256, 0), (1024, 0), (1, 0)), conv=ConvWindow((1, 1), (1, 1), (1, 1), False, 4096))


def _cpu(**kw):
    base = load_cluster("local-cpu").device
    ex = KernelExecution(gemm_efficiency=0.8, k_half=0.0, cpu_threads=1, **kw)
    return replace(base, kernels=ex, memory_efficiency=1.0)


def test_slow2d_prices_one_gemm_per_sample_at_its_rows_efficiency():
    dev = _cpu(per_sample_gemm_efficiency=((1.0, 0.2), (4.0, 0.05), (16.0, 0.8)))
    eng = engines(dev, MathMode("fp32"))
    assert per_sample_dims(LAYER3_1X1) == (4, 256, 1024, 1) and per_sample_rows(LAYER3_1X1) == 4
    peak = dev.peak("fp32")
    for b in (2, 8):       # slow_conv2d: b GEMMs of 4 rows at 5% of peak
        assert kernel_time_s(LAYER3_1X1, b, dev, eng) == pytest.approx(LAYER3_1X1.at(b)[0] / (0.05 * peak))
    # at 16 samples oneDNN runs it: the large-GEMM efficiency, plus nothing for reorders here
    assert kernel_time_s(LAYER3_1X1, 16, dev, eng) == pytest.approx(LAYER3_1X1.at(16)[0] / (0.8 * peak))


def test_onednn_pays_its_weight_reorder_every_call():
    dev = _cpu(weight_touch_bytes_per_s=5e9)
    eng = engines(dev, MathMode("fp32"))
    flops = LAYER3_1X1.at(32)[0]
    assert kernel_time_s(LAYER3_1X1, 32, dev, eng) == pytest.approx(flops / (0.8 * dev.peak("fp32"))
                                                                    + 1024 * 256 * 4 / 5e9)


def _window(k, s, p, h, d=1):
    return ConvWindow((k, k), (s, s), (d, d), False, 0, (p, p), (h, h))


def test_valid_taps_are_the_window_inside_the_input():
    """A 3x3 window with padding 1: on a 1x1 map only the centre tap is inside (1/9); on 2x2,
    per dimension each output sees 2 of 3 rows (4/9); on 4x4, (1*2 + 2*3) + ... = 10 of 12 per
    dimension.  The 7x7/2 stem on 32x32 (padding 3): outputs 0, 1, 15 see 4, 6, 5 rows of 7 and
    the 13 others all 7, so 106 of 112 per dimension."""
    assert valid_tap_fraction(_window(3, 1, 1, 1)) == pytest.approx(1 / 9)
    assert valid_tap_fraction(_window(3, 1, 1, 2)) == pytest.approx(4 / 9)
    assert valid_tap_fraction(_window(3, 1, 1, 4)) == pytest.approx((10 / 12) ** 2)
    assert valid_tap_fraction(_window(7, 2, 3, 32)) == pytest.approx((106 / 112) ** 2)
    assert valid_tap_fraction(_window(3, 2, 1, 8)) == pytest.approx((11 / 12) ** 2)   # 4 outputs: 2 + 3 + 3 + 3
    assert valid_tap_fraction(_window(3, 1, 0, 4)) == 1.0          # no padding, nothing skipped
    assert valid_tap_fraction(_window(3, 1, 2, 1, d=2)) == pytest.approx(1 / 9)   # dilated: still the centre only
    assert valid_tap_fraction(ConvWindow((3, 3), (1, 1), (1, 1), False, 9)) == 1.0   # padding unknown


def test_onednn_computes_only_the_valid_taps_and_slow2d_all():
    """layer4's 3x3 on a 1x1 map in oneDNN: a ninth of the counted FLOPs; the same window as a
    transposed convolution goes to slow_conv2d, whose im2col multiplies the zeros too."""
    dev = _cpu()
    eng = engines(dev, MathMode("fp32"))
    w = _window(3, 1, 1, 1)
    k3 = Kernel("F", "convolution", "conv", flops=(0.0, 2.0 * 512 * 4608), gemm=((0, 1), (512, 0), (4608, 0), (1, 0)),
                conv=w)
    flops, peak = k3.at(32)[0], dev.peak("fp32")
    assert kernel_time_s(k3, 32, dev, eng) == pytest.approx(flops / 9 / (0.8 * peak))
    slow = replace(k3, conv=w._replace(transposed=True))
    assert kernel_time_s(slow, 32, replace(dev, kernels=replace(dev.kernels, per_sample_gemm_efficiency=((1.0, 0.5),))),
                         eng) == pytest.approx(flops / (0.5 * peak))


def test_onednn_backward_reorders_at_their_own_rate():
    """A forward pays its weights at weight_touch_bytes_per_s, a data or weight gradient its share
    of the backward call's at backward_weight_touch_bytes_per_s."""
    dev = _cpu(weight_touch_bytes_per_s=20e9, backward_weight_touch_bytes_per_s=4e9)
    eng = engines(dev, MathMode("fp32"))
    peak = dev.peak("fp32")
    for phase, rate in (("F", 20e9), ("I", 4e9), ("W", 4e9)):
        k = replace(LAYER3_1X1, phase=phase)
        assert kernel_time_s(k, 32, dev, eng) == pytest.approx(k.at(32)[0] / (0.8 * peak) + 1024 * 256 * 4 / rate)


def test_onednn_convolutions_fill_their_reduction_at_their_own_k_half():
    """A weight gradient of layer4's 1x1 (K = one image's single row): oneDNN's conv_k_half, not
    the matmul library's k_half; without a conv_k_half, k_half."""
    w = Kernel("W", "convolution_backward", "conv", flops=(0.0, 2.0 * 2048 * 512),
               gemm=((2048, 0), (512, 0), (0, 1), (1, 0)),
               conv=ConvWindow((1, 1), (1, 1), (1, 1), False, 512, (0, 0), (1, 1)))
    dev = _cpu()
    dev = replace(dev, kernels=replace(dev.kernels, k_half=100.0, conv_k_half=3.0))
    eng = engines(dev, MathMode("fp32"))
    flops, peak = w.at(64)[0], dev.peak("fp32")
    assert kernel_time_s(w, 64, dev, eng) == pytest.approx(flops / (0.8 * peak * 1 / (1 + 3.0)))
    dev = replace(dev, kernels=replace(dev.kernels, conv_k_half=0.0))
    assert kernel_time_s(w, 64, dev, eng) == pytest.approx(flops / (0.8 * peak * 1 / (1 + 100.0)))
