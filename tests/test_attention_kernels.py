"""training.attention_kernel: which fused attention kernel a model runs, and the efficiency each
prices at (parsim.hardware.numerics.engines): the device's production kernel by default,
FlashAttention-2 (fa2) or FlashAttention in Triton (triton) where the device has a number for it,
else the production kernel's; and a head dimension below 128 priced by the device's K fill, or
by the kernel's own fill at 128 where the profile states one (kernels.attention_head_fill:
parsim.cost.kernels.attention_head_efficiency)."""

import re
from dataclasses import replace

import pytest
import yaml

from parsim.cli import main
from parsim.cost.kernels import attention_head_efficiency, kernel_time_s
from parsim.errors import InputError
from parsim.hardware import load_cluster
from parsim.hardware.device import ATTENTION_KERNEL_FIELDS
from parsim.hardware.numerics import MathMode, engines
from parsim.model.attention import FUSED_OP
from parsim.model.graph import Kernel
from parsim.model.spec import ATTENTION_KERNELS, load_model
from parsim.profile.loso import Parameter, _may_affect
from parsim.profile.published import load_figures


def _attention_efficiency(profile: str, kernel: str, dtype: str = "bf16") -> float:
    device = load_cluster(f"{profile}:1x1").device
    return engines(device, MathMode(dtype, attention_kernel=kernel))["attention"].efficiency


def test_each_kernel_a_model_may_name_has_its_field():
    assert set(ATTENTION_KERNEL_FIELDS) == set(ATTENTION_KERNELS)


def test_each_kernel_prices_at_its_own_field():
    ex = load_cluster("dgx-h100:1x1").device.kernels
    assert len({ex.attention_efficiency, ex.attention_efficiency_fa2, ex.attention_efficiency_triton}) == 3
    assert _attention_efficiency("dgx-h100", "") == ex.attention_efficiency
    assert _attention_efficiency("dgx-h100", "fa2") == ex.attention_efficiency_fa2
    assert _attention_efficiency("dgx-h100", "triton") == ex.attention_efficiency_triton
    a100 = load_cluster("dgx-a100:1x1").device.kernels
    assert _attention_efficiency("dgx-a100", "triton") == a100.attention_efficiency_triton
    assert _attention_efficiency("dgx-a100", "fa2") == a100.attention_efficiency    # FlashAttention-2 is A100's own
    # the Triton port is the slower kernel: FlashAttention-2 is 1.3-2.5x faster (Dao 2023, Sec. 1)
    assert a100.attention_efficiency_triton < a100.attention_efficiency
    assert ex.attention_efficiency_triton < ex.attention_efficiency_fa2


def test_a_device_without_a_kernels_number_prices_its_production_kernel():
    ex = load_cluster("ascend910:1x1").device.kernels
    assert ex.attention_efficiency_triton is None and ex.attention_efficiency_fa2 is None
    assert _attention_efficiency("ascend910", "triton", "fp16") == _attention_efficiency("ascend910", "", "fp16")


def test_a_bad_kernel_names_the_field(tmp_path):
    path = tmp_path / "model.yaml"
    path.write_text("model: gpt\nargs: {preset: gpt-tiny}\n"
                    "training: {global_batch_size: 8, dtype: bf16, attention_kernel: fa3}\n")
    with pytest.raises(InputError, match="attention_kernel") as e:
        load_model(str(path))
    assert "fa2" in str(e.value) and "triton" in str(e.value)


def test_a_kernels_fitted_number_moves_only_the_rows_that_run_that_kernel():
    figures = load_figures("results/published/llmfoundry_figures.yaml").figures
    triton = Parameter("attention-h100-triton", (("dgx-h100", "device.kernels.attention_efficiency_triton"),),
                       0.194, (0.05, 1.0))
    fa2 = Parameter("attention-h100-fa2", (("dgx-h100", "device.kernels.attention_efficiency_fa2"),), 0.35, (0.1, 1.0))
    row = next(f for f in figures if f.id == "llmfoundry-mpt7b-h100-8gpu-s2048")
    assert _may_affect(triton, row) and not _may_affect(fa2, row)
    production = load_figures("results/published/dgxc_figures.yaml").by_id("dgxc-llama31-8b-h100-8gpu-bf16")
    assert not _may_affect(triton, production) and not _may_affect(fa2, production)


def test_the_llm_foundry_rows_run_the_cited_harness_default():
    """At the cited commit llm-foundry's benchmark harness defaults to attn_impl triton
    (results/published/llmfoundry_figures.yaml's header quotes the line)."""
    raw = yaml.safe_load(open("results/published/llmfoundry_figures.yaml").read())
    assert all(f["model"]["training"]["attention_kernel"] == "triton" for f in raw["figures"])


def test_extraction_records_the_head_dim_of_fused_attention_only():
    """The fused kernels carry Q's head dimension, forward and backward (the tiny Llama: 64 wide,
    4 heads of 16); every other kernel 0."""
    graph = load_model("tests/data/hf_tiny_llama.yaml").graph
    attention = [k for layer in graph.layers for k in layer.kernels if k.klass == "attention"]
    assert sorted({k.phase for k in attention}) == ["F", "I"] and len(attention) == 4    # 2 layers x (F, I)
    assert {k.head_dim for k in attention} == {16}
    assert all(k.head_dim == 0 for layer in graph.layers for k in layer.kernels if k.klass != "attention")


def _fused(head_dim: int) -> Kernel:
    """A forward fused-attention kernel of 1 TFLOP a sample."""
    return Kernel("F", FUSED_OP, "attention", flops=(0.0, 1e12), head_dim=head_dim)


def _compute_s(kernel: Kernel, device) -> float:
    """The kernel's compute time on ``device``, its fixed costs taken off."""
    t = kernel_time_s(kernel, 1, device, engines(device, MathMode("bf16")))
    return t - device.kernels.launch_s


def test_short_heads_price_fused_attention_by_the_devices_k_fill():
    """Heads of d < 128 run at fill(d) / fill(128) of the device's attention rate, fill(d) =
    d / (d + k_half), where the profile gives no head fill of its own (A100); heads of 128 and more
    at the rate itself."""
    device = load_cluster("dgx-a100:1x1").device
    assert device.kernels.attention_head_fill is None
    kh = device.kernels.k_half
    ratio = _compute_s(_fused(128), device) / _compute_s(_fused(64), device)
    assert ratio == pytest.approx((64 / (64 + kh)) / (128 / (128 + kh)), rel=1e-9)
    assert attention_head_efficiency(64, device.kernels) == pytest.approx(ratio, rel=1e-9)
    assert _compute_s(_fused(256), device) == _compute_s(_fused(128), device)
    assert _compute_s(_fused(0), device) == _compute_s(_fused(128), device)     # not recorded: the stated rate


def test_h100s_short_heads_run_at_the_rate_flashattention_3_measured():
    """H100's head fill (kernels.attention_head_fill, since its GEMMs' k_half stopped standing for its
    attention): the FlashAttention-3 paper's forward benchmark on H100 at 16K tokens (Shah et al.
    2024, Fig. 5) runs head dim 64 at 0.69-0.72 (cuDNN) to 0.77 (FlashAttention-3) of head dim 128's
    rate."""
    device = load_cluster("dgx-h100:1x1").device
    u = device.kernels.attention_head_fill
    ratio = _compute_s(_fused(128), device) / _compute_s(_fused(64), device)
    assert ratio == pytest.approx(1 / (2 - u), rel=1e-9)
    assert 0.69 <= ratio <= 0.72


def test_a_cpu_profile_prices_every_head_dim_at_its_measured_rate():
    device = load_cluster("dgx-h100:1x1").device
    cpu = replace(device, kernels=replace(device.kernels, cpu_threads=2))
    assert _compute_s(_fused(64), cpu) == _compute_s(_fused(128), cpu)


def test_a_profiles_head_fill_prices_short_heads_in_closed_form():
    """attention_head_fill u: heads of d < 128 run at d / (d u + 128 (1 - u)) of the reference rate
    (1 / (2 - u) at 64); u = 1 prices every head alike, u -> 0 a time per score that does not
    depend on d (f(64) -> 1/2), and u = fill(128) at the device's k_half is the rule without it."""
    device = load_cluster("atlas-900-a2:1x1").device
    u = device.kernels.attention_head_fill
    assert u is not None and 0 < u <= 1
    ratio = _compute_s(_fused(128), device) / _compute_s(_fused(64), device)
    assert ratio == pytest.approx(1 / (2 - u), rel=1e-9)
    assert _compute_s(_fused(256), device) == _compute_s(_fused(128), device)

    def with_fill(fill):
        return replace(device.kernels, attention_head_fill=fill)

    assert attention_head_efficiency(64, with_fill(1.0)) == 1.0
    assert attention_head_efficiency(64, with_fill(1e-9)) == pytest.approx(0.5, rel=1e-6)
    assert attention_head_efficiency(96, with_fill(0.25)) == pytest.approx(96 / (96 * 0.25 + 128 * 0.75), rel=1e-12)
    kh = device.kernels.k_half
    for d in (16, 64, 80, 112):
        assert attention_head_efficiency(d, with_fill(128 / (128 + kh))) == pytest.approx(
            attention_head_efficiency(d, with_fill(None)), rel=1e-12)


def test_a_head_fill_out_of_range_gives_one_line_naming_the_field(tmp_path, capsys):
    text = re.sub(r"attention_head_fill: [0-9.]+", "attention_head_fill: 1.5",
                  open("hardware_profiles/atlas-900-a2.yaml").read())
    assert "attention_head_fill: 1.5" in text
    (tmp_path / "npu.yaml").write_text(text)
    assert main(["cluster", str(tmp_path / "npu.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "npu.yaml" in err and "attention_head_fill" in err and "(0, 1]" in err, err


def test_the_head_fill_moves_only_the_rows_with_short_heads():
    """The public fit prices a row at a moved attention_head_fill only where its heads are under
    128 (parsim.profile.loso._may_affect): Qwen1.5 0.5B's heads of 64, not Qwen1.5 7B's of 128."""
    fill = Parameter("attention-head-910b", (("atlas-900-a2", "device.kernels.attention_head_fill"),),
                     0.6667, (0.02, 1.0), "time")
    figures = load_figures("results/published/mindspeed_llm_figures.yaml")
    assert _may_affect(fill, figures.by_id("msllm-qwen1_5-0_5b-a2-8npu"))
    assert not _may_affect(fill, figures.by_id("msllm-qwen1_5-7b-a2-8npu"))
