"""FP8 GEMMs beside bf16 (parsim.model.fp8, training.fp8): the Linear GEMMs priced at the
device's fp8 peak, memory in closed form, refusal where the device has no FP8 units and in the
executor."""

import math
import os

import pytest
import yaml

from parsim.cli import main
from parsim.cost.compute import AnalyticalCompute
from parsim.cost.kernels import kernel_time_s
from parsim.errors import InputError
from parsim.hardware import load_cluster
from parsim.model.fp8 import (AMAX_HISTORY_LEN, CAST_OP, FP8_KLASS, FP8_META_BYTES_PER_GEMM, GRAD_CAST_OP, fp8_graph,
                              fp8_static_bytes)
from parsim.model.spec import Training, load_model, with_fp8
from parsim.plan import ParallelConfig
from parsim.sim import simulate

# A GPT with eager attention: s = 512 tokens, h = 4096, a = 32 heads, 2 blocks
S, H, A = 512, 4096, 32


def _write(tmp_path, **training) -> str:
    doc = {"schema_version": 1, "name": "gpt-fp8", "model": "gpt",
           "args": {"layers": 2, "hidden": H, "heads": A, "seq_len": S, "vocab": 1024},
           "training": {"global_batch_size": 8, "dtype": "bf16", "optimizer": "adam", **training}}
    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fp8")
    bf16 = load_model(_write(folder))
    return bf16, with_fp8(bf16)


def test_fp8_linear_gemm_time_is_bf16_time_times_the_peak_ratio(specs):
    """Same efficiency and shape model, the fp8 peak (H100 SXM datasheet, dense: bf16 989, fp8
    1,979 TFLOP/s): t_fp8 = max(t_bf16 x 989 / 1979, bytes / bandwidth) for a GEMM compute-bound
    in bf16 -- its bytes stay as recorded (parsim.model.fp8), so the roofline's memory side can
    bound it in FP8.  The kernel's fixed launch and GEMM latency are left out of both."""
    bf16, fp8 = specs
    device = load_cluster("dgx-h100").device
    training = Training(8, "bf16", "adam", fp8=True)
    compute = AnalyticalCompute.for_training(device, training)
    assert compute.engines[FP8_KLASS].rate_flops_per_s == 1979e12
    assert compute.engines["matmul"].rate_flops_per_s == 989e12
    b = 8
    fixed = device.kernels.launch_s + device.kernels.gemm_latency_s     # per GEMM kernel, whatever its rate
    pairs = [(k0, k1) for k0, k1 in zip(bf16.graph.layers[1].kernels, fp8.graph.layers[1].kernels)]
    linear = [(k0, k1) for k0, k1 in pairs if k1.klass == FP8_KLASS]
    assert len(linear) == 4 * 3              # qkv, proj, fc1, fc2: forward, data and weight gradients
    bw = device.achieved_bandwidth_bytes_per_s()
    # the peaks' ratio, and FP8's own fitted efficiency against bf16's (results/published/fit.yaml)
    ratio = 989 / 1979 * compute.engines["matmul"].efficiency / compute.engines[FP8_KLASS].efficiency
    exact = 0
    for k0, k1 in linear:
        t0 = kernel_time_s(k0, b, device, compute.engines) - fixed
        t1 = kernel_time_s(k1, b, device, compute.engines) - fixed
        t_mem = k0.at(b)[1] / bw
        assert t0 > t_mem                    # compute-bound in bf16
        assert t1 == pytest.approx(max(t0 * ratio, t_mem), rel=1e-12)
        exact += t1 == pytest.approx(t0 * ratio, rel=1e-12)
    assert exact >= 8                        # most stay compute-bound in FP8 at h = 4096
    # attention's batched GEMMs and every memory-bound kernel stay bf16
    for k0, k1 in pairs:
        if k1.klass != FP8_KLASS:
            assert k1.klass == k0.klass and kernel_time_s(k1, b, device, compute.engines) == \
                kernel_time_s(k0, b, device, compute.engines)


def test_fp8_memory_in_closed_form(specs):
    """Saved activations: the four Linear inputs (LayerNorm outputs s h each, the attention output
    s h, GeLU's output 4 s h) at 1 byte instead of 2: 7 s h bytes less per layer and sample.
    Static: 2 bytes per Linear weight (FP8 copy and its transpose) and per FP8 GEMM the
    DelayedScaling state, 5 tensors x (1024 amax entries + scale + scale_inv) x 4 bytes."""
    bf16, fp8 = specs
    assert fp8.graph.layers[1].saved_bytes == bf16.graph.layers[1].saved_bytes - 7 * S * H
    assert FP8_META_BYTES_PER_GEMM == 5 * (AMAX_HISTORY_LEN + 2) * 4 == 20520
    weights = 12 * H * H                    # qkv 3h^2, proj h^2, fc1 4h^2, fc2 4h^2
    assert fp8_static_bytes(fp8.graph, [1]) == 2 * weights + 4 * 20520
    assert fp8_static_bytes(bf16.graph, [1]) == 0
    # the head computes its logits with the tied word embedding: bf16, as Megatron's output layer
    head = fp8.graph.layers[-1]
    assert all(k.klass != FP8_KLASS for k in head.kernels) and fp8_static_bytes(fp8.graph, [len(fp8.graph) - 1]) == 0
    # the simulator: the rank holds every layer
    cluster = load_cluster("dgx-h100:1x1")
    cfg = ParallelConfig(1, 1, 1, bounds=(0, len(bf16.graph)))
    runs = [simulate(s.graph, s.training, cluster, cfg, AnalyticalCompute.for_training(cluster.device, s.training))
            for s in (bf16, fp8)]
    m0, m1 = runs[0].ranks[0].memory, runs[1].ranks[0].memory
    assert m1.params_bytes - m0.params_bytes == fp8_static_bytes(fp8.graph, range(len(fp8.graph))) \
        == 2 * (2 * weights) + 8 * 20520
    assert m1.activations_bytes < m0.activations_bytes
    assert runs[1].step_time_s < runs[0].step_time_s


def _casts(layer, phase):
    return [k for k in layer.kernels if k.op in (CAST_OP, GRAD_CAST_OP) and k.phase == phase]


def test_fp8_casts_in_closed_form(specs):
    """TE's cast-transpose kernels (parsim.model.fp8, Casts), 2 bytes an element read and 1 + 1
    written: forward, the inputs of proj (the attention's output, s h) and fc2 (GeLU's, 4 s h),
    not qkv's and fc1's, which the LayerNorms write in FP8 (LayerNormLinear); backward, every
    Linear's output gradient (qkv 3 s h, proj s h, fc1 4 s h, fc2 s h).  Memory-bound kernels
    priced at the device's bandwidth with their launches, in F and in B."""
    bf16, fp8 = specs
    layer0, layer = bf16.graph.layers[1], fp8.graph.layers[1]
    fwd, bwd = _casts(layer, "F"), _casts(layer, "I")
    assert [k.bytes for k in fwd] == [(0.0, 4 * S * H), (0.0, 4 * 4 * S * H)]
    assert sorted(k.bytes[1] for k in bwd) == sorted(4 * x * S * H for x in (3, 1, 4, 1))
    assert not _casts(layer0, "F") + _casts(layer0, "I") + _casts(layer, "W")
    assert layer.fwd_mem_bytes - layer0.fwd_mem_bytes == 20 * S * H
    assert layer.bwd_mem_bytes - layer0.bwd_mem_bytes == 36 * S * H
    device = load_cluster("dgx-h100").device
    engines = AnalyticalCompute.for_training(device, fp8.training).engines
    b, bw = 8, device.achieved_bandwidth_bytes_per_s()
    for k in fwd + bwd:
        assert kernel_time_s(k, b, device, engines) == pytest.approx(b * k.bytes[1] / bw + device.kernels.launch_s)


def test_fp8_casts_after_rmsnorm(tmp_path):
    """In a Llama block the norms are RMSNorm, recorded as elementwise operators that end in the
    product with the norm's weight: q, k and v (one input) and gate and up (one input) read a
    norm's output, so the forward casts only o_proj's input (the attention's output, h) and
    down_proj's (SwiGLU's, the intermediate size)."""
    import shutil

    data = os.path.join(os.path.dirname(__file__), "data")
    shutil.copytree(os.path.join(data, "hf_tiny_llama"), tmp_path / "hf_tiny_llama")
    doc = yaml.safe_load(open(os.path.join(data, "hf_tiny_llama.yaml")))
    doc["training"].update(dtype="bf16", fp8=True)
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(doc))
    layer = load_model(str(tmp_path / "m.yaml")).graph.layers[1]
    seq, h, inter, kv = 16, 64, 176, 2 * 16             # kv: 2 KV heads of 16
    assert [k.bytes[1] for k in _casts(layer, "F")] == [4 * seq * h, 4 * seq * inter]
    assert sum(k.bytes[1] for k in _casts(layer, "I")) == 4 * seq * (h + 2 * kv + h + 2 * inter + h)


def test_fp8_casts_an_input_once_for_the_linears_that_read_it():
    """Two Linears reading one tensor no norm wrote (a GeLU's output) share its one cast; a Linear
    reading the layer's input casts it; each Linear's output gradient has its own."""
    from parsim.model.fp8 import cast_kernels
    from parsim.model.graph import FROM_ELSEWHERE, FROM_LAYER_INPUT, OpInfo

    def linear(src, n):
        return OpInfo("MatMul", "mm", ((4, 8), (8, n)), (4, n), "bfloat16", (False, True),
                      inputs_from=(src, FROM_ELSEWHERE))
    gelu = OpInfo("ElementWise", "gelu", ((4, 8),), (4, 8), "bfloat16", (False,), inputs_from=(FROM_LAYER_INPUT,))
    ops = (gelu, linear(0, 8), linear(0, 16), linear(FROM_LAYER_INPUT, 8))
    casts = cast_kernels(ops, [1, 2, 3], extraction_batch=2)
    assert [(k.phase, k.bytes[1]) for k in casts] == [("F", 4 * 16), ("F", 4 * 16), ("I", 4 * 16),
                                                      ("I", 4 * 32), ("I", 4 * 16)]


@pytest.mark.parametrize("profile", ["dgx-a100", "dgx1-v100", "ascend910"])
def test_fp8_is_refused_on_devices_without_fp8_units(specs, profile):
    _, fp8 = specs
    device = load_cluster(profile).device
    with pytest.raises(InputError, match=rf"^training.fp8: {device.name} has no FP8 units \(its profile's "
                                         r"device.peak_tflops has no fp8"):
        AnalyticalCompute.for_training(device, fp8.training)


def test_fp8_needs_bf16(tmp_path):
    with pytest.raises(InputError, match=r"model.yaml: training.fp8: FP8 GEMMs run beside bf16"):
        load_model(_write(tmp_path, dtype="fp16", fp8=True))


def test_cli_fp8_on_a100_is_one_line_exit_2(tmp_path, capsys):
    assert main(["simulate", _write(tmp_path), "--cluster", "dgx-a100:1x1", "--dp", "1", "--pp", "1",
                 "--fp8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no FP8 units" in err[0] and "peak_tflops" in err[0]


def test_cli_plan_and_simulate_with_fp8_and_the_executor_refusal(tmp_path, capsys):
    from parsim.exec.train import RunOptions, check_run

    model = _write(tmp_path, fp8=True)
    out = tmp_path / "plan.json"
    assert main(["plan", model, "--cluster", "dgx-h100:1x2", "--tp", "1", "--top", "2", "-o", str(out)]) == 0
    assert "bf16 + fp8 GEMMs" in capsys.readouterr().out
    import json

    assert json.loads(out.read_text())["model"]["fp8"] is True
    assert main(["simulate", str(out)]) == 0
    assert "bf16 + fp8 GEMMs" in capsys.readouterr().out
    with pytest.raises(InputError, match=r"plan.json: model.fp8: the executor has no FP8 GEMMs"):
        check_run(RunOptions(plan=str(out), synthetic_size=256))


def test_fp8_graph_is_applied_once(specs):
    _, fp8 = specs
    assert fp8_graph(fp8.graph) is fp8.graph
    assert math.isclose(fp8.graph.layers[1].fwd_flops, specs[0].graph.layers[1].fwd_flops)


def test_a_layer_profile_is_refused_for_an_fp8_plan(tmp_path, capsys):
    assert main(["simulate", _write(tmp_path), "--cluster", "dgx-h100:1x1", "--dp", "1", "--pp", "1", "--fp8",
                 "--profile", "no-such-profile.yaml"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--profile: no-such-profile.yaml timed the layers without FP8 GEMMs" in err[0]
