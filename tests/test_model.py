"""LayerGraph extraction: exact parameter and MAC counts, GPT closed forms, speed at 175B."""

import time

import pytest
import torch

import parsim.model.extracted as extracted_module
from parsim.model.extract import InputSpec, cut_units, extract_graph
from parsim.model.spec import load_model
from parsim.model.zoo import GPT_PRESETS, gpt, resnet50


def _meta(factory):
    with torch.device("meta"):
        return factory()


def test_resnet50_imagenet_counts_match_torchvision():
    g = extract_graph(_meta(lambda: resnet50(1000)), InputSpec((3, 224, 224)))
    # torchvision model card for resnet50 (IMAGENET1K_V1): 25,557,032 params, 4.09 GFLOPS (= MACs)
    assert g.param_count == 25_557_032
    assert round(g.fwd_flops / 2 / 1e9, 2) == 4.09
    # Exact: sum over conv and fc of Cout*Cin*k*k*Hout*Wout, independently by module hooks below.
    assert g.fwd_flops == 2 * _conv_fc_macs(224, 1000, "imagenet")


def _conv_fc_macs(size, classes, stem):
    """MACs of conv and linear layers, from their shapes (independent of FlopCounterMode)."""
    model = resnet50(classes, stem)
    total = 0

    def hook(m, inp, out):
        nonlocal total
        if isinstance(m, torch.nn.Conv2d):
            total += out.numel() // out.shape[0] * m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1]
        elif isinstance(m, torch.nn.Linear):
            total += m.in_features * m.out_features
    for m in model.modules():
        m.register_forward_hook(hook)
    with torch.no_grad():
        model.eval()(torch.zeros(1, 3, size, size))
    return total


@pytest.mark.parametrize("stem", ["imagenet", "cifar"])
def test_resnet50_cifar10_variants(stem):
    g = extract_graph(_meta(lambda: resnet50(10, stem)), InputSpec((3, 32, 32)))
    assert g.param_count == 25_557_032 - 2048 * 1000 - 1000 + 2048 * 10 + 10 - (7 * 7 - 3 * 3) * 3 * 64 * (stem == "cifar")
    assert g.fwd_flops == 2 * _conv_fc_macs(32, 10, stem)
    assert g.names[0] == "head" and g.names[-1] == "fc" and len(g) == 18
    # backward of a conv/linear is two matmuls of the forward's size, except the first layer
    # (no grad of the image): bwd = 2 x fwd for every unit but the first.
    for layer in g.layers[1:]:
        assert layer.bwd_flops == pytest.approx(2 * layer.fwd_flops)
    assert g.layers[0].bwd_flops == pytest.approx(g.layers[0].fwd_flops)
    assert g.layers[-1].output_bytes == 10 * 4


def test_cut_units_never_split_a_residual_block():
    units = cut_units(_meta(lambda: resnet50(10)))
    assert [n for n, _ in units][:5] == ["head", "layer1.0", "layer1.1", "layer1.2", "layer2.0"]
    assert all(type(m).__name__ in ("Bottleneck", "Sequential") for _, m in units)


@pytest.mark.parametrize("preset", ["gpt-tiny", "gpt2-small", "gpt3-175b"])
def test_gpt_params_closed_form(preset):
    cfg = GPT_PRESETS[preset]
    g = extract_graph(_meta(lambda: gpt(preset)), InputSpec((cfg.seq_len,), "int64"), dtype="fp16")
    L, h, V, s = cfg.layers, cfg.hidden, cfg.vocab, cfg.seq_len
    # 12 L h^2 + V h, plus biases and norms (13 L h + 2 h) and learned positions (s h)
    assert g.param_count == 12 * L * h * h + V * h + 13 * L * h + 2 * h + s * h
    assert len(g) == L + 2


def test_the_zoo_initialises_values_on_a_device_and_nothing_on_meta():
    """GPT-2's initialisation (weights N(0, 0.02), biases 0) and torchvision's (Kaiming-normal convs, BN 1 and 0)
    where parameters hold values; on the meta device the same modules, with no initialisation to run."""
    torch.manual_seed(0)
    model = gpt(layers=2, hidden=64, heads=4, seq_len=16, vocab=512)
    weights = torch.cat([m.weight.detach().flatten() for m in model.modules()
                         if isinstance(m, (torch.nn.Linear, torch.nn.Embedding))])
    assert weights.std().item() == pytest.approx(0.02, rel=0.02)
    assert all(not m.bias.any() for m in model.modules() if isinstance(m, torch.nn.Linear))
    net = resnet50(10)
    bn = [m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert all(m.weight.eq(1).all() and not m.bias.any() for m in bn)
    conv = next(m for m in net.modules() if isinstance(m, torch.nn.Conv2d) and m.out_channels >= 256)
    fan_out = conv.out_channels * conv.kernel_size[0] * conv.kernel_size[1]
    assert conv.weight.std().item() == pytest.approx((2 / fan_out) ** 0.5, rel=0.05)
    for build in (lambda: gpt(layers=2, hidden=64, heads=4, seq_len=16, vocab=512), lambda: resnet50(10)):
        meta = _meta(build)
        assert all(p.is_meta for p in meta.parameters())
    assert sum(p.numel() for p in _meta(lambda: resnet50(10)).parameters()) == sum(p.numel() for p in net.parameters())


def test_gpt_layer_flops_and_saved_activations_match_megatron():
    cfg = GPT_PRESETS["gpt3-175b"]
    # eager attention (not the zoo's fused default): the closed forms below are eager's
    g = extract_graph(_meta(lambda: gpt("gpt3-175b", attention="eager")), InputSpec((cfg.seq_len,), "int64"),
                      dtype="fp16")
    s, h, a = cfg.seq_len, cfg.hidden, cfg.heads
    layer = g.layers[1]
    # Narayanan et al. 2021 Eq. 3 per layer and sample: forward 24 s h^2 + 4 s^2 h FLOPs
    assert layer.fwd_flops == pytest.approx(24 * s * h * h + 4 * s * s * h, rel=1e-3)
    # Korthikanti et al. 2022: s b h (34 + 5 a s / h) bytes per layer in fp16 (b = 1 here); measured
    # 1.14e-5 above it (32 KiB in 2.7 GiB), asserted within 2e-5 as the README states (0.002%)
    assert layer.saved_bytes == pytest.approx(s * h * (34 + 5 * a * s / h), rel=2e-5)


def test_gpt3_175b_extracts_in_seconds(monkeypatch):
    monkeypatch.setattr(extracted_module, "_EXTRACTED", {})    # extracted here, not found from an earlier test
    t = time.perf_counter()
    load_model("examples/gpt3_175b.yaml")
    assert time.perf_counter() - t < 10


def test_a_built_in_or_hf_model_is_extracted_once_and_a_module_model_every_time(monkeypatch, tmp_path, extractions):
    """parsim.model.extracted keeps a built-in or Hugging Face model's graph by its ModelSource, input,
    name and dtype (the newest EXTRACTED_KEPT); a module: model, whose code is the user's, is
    extracted at every load."""
    calls = extractions
    first = load_model("examples/gpt_tiny_local.yaml")
    again = load_model("examples/gpt_tiny_local.yaml")
    assert calls == ["fp32"] and again.graph is first.graph and again is not first
    tiny = open("examples/gpt_tiny_local.yaml").read()

    def variant(old: str, new: str):
        path = tmp_path / f"{len(calls)}.yaml"
        path.write_text(tiny.replace(old, new) + ("" if old else "\n"))
        assert path.read_text() != tiny
        return load_model(path).graph

    # the same model in another file: the same graph; in another dtype, other args or another name: its own
    assert variant("", "") is first.graph and len(calls) == 1
    bf16 = variant("dtype: fp32", "dtype: bf16")
    assert calls == ["fp32", "bf16"] and bf16 is not first.graph and bf16.dtype == "bf16"
    assert variant("attention: eager}", "attention: sdpa}") is not first.graph and len(calls) == 3
    assert variant("name: gpt-tiny", "name: gpt-other").name == "gpt-other" and len(calls) == 4
    load_model("examples/mlp_module.yaml")
    load_model("examples/mlp_module.yaml")
    assert len(calls) == 6
    monkeypatch.setattr(extracted_module, "EXTRACTED_KEPT", 1)
    monkeypatch.setattr(extracted_module, "_EXTRACTED", {})
    load_model("examples/gpt_tiny_local.yaml")      # kept, then pushed out by the next
    load_model("examples/gpt_tiny_local_bf16.yaml")
    load_model("examples/gpt_tiny_local.yaml")
    assert len(calls) == 9 and len(extracted_module._EXTRACTED) == 1


def test_examples_load():
    spec = load_model("examples/resnet50_cifar10_seeds_split.yaml")
    assert spec.manual_stages == (0,) * 8 + (1,) * 10
    assert spec.parallel.pp == 2 and spec.parallel.dp == 4
    mlp = load_model("examples/mlp_module.yaml")
    assert [layer.param_count for layer in mlp.graph.layers if layer.param_count][0] == 3 * 32 * 32 * 256 + 256


def test_operator_view_of_layers():
    g = extract_graph(_meta(lambda: resnet50(10)), InputSpec((3, 32, 32)))
    kinds = [op.kind for op in g.layers[1].ops]          # layer1.0: a Bottleneck with a downsample
    assert kinds.count("Conv2d") == 4 and kinds.count("BatchNorm") == 4
    conv = next(op for op in g.layers[1].ops if op.kind == "Conv2d")
    assert conv.param_inputs == (False, True) and conv.input_shapes[1] == (256, 64, 1, 1)   # downsample runs first
    cfg = GPT_PRESETS["gpt-tiny"]
    gg = extract_graph(_meta(lambda: gpt("gpt-tiny", attention="eager")), InputSpec((cfg.seq_len,), "int64"))
    block = [op.kind for op in gg.layers[1].ops]
    assert block.count("MatMul") == 4 and block.count("BatchMatMul") == 2
    assert block.count("Softmax") == 1 and block.count("LayerNorm") == 2
    qkv = next(op for op in gg.layers[1].ops if op.kind == "MatMul")
    assert qkv.param_inputs == (False, True) and qkv.input_shapes == ((2 * 32, 64), (64, 192))


def test_gpt_sdpa_is_one_fused_kernel_with_flash_attention_costs():
    """attention: sdpa (parsim.model.attention): the same parameters; attention's FLOPs halved by
    the causal mask, its backward 2.5x (Dao 2023); the eager s x s tensors (probabilities and
    their dropout's output in fp16, its 1-byte mask: Korthikanti et al. 2022's 5 a s^2 per layer
    and sample) no longer saved, the fp32 logsumexp (4 a s) saved instead; one forward and one
    backward kernel reading Q, K, V (and O, dO) instead of eager's dozen."""
    cfg = GPT_PRESETS["gpt3-175b"]
    s, h, a = cfg.seq_len, cfg.hidden, cfg.heads
    graphs = {att: extract_graph(_meta(lambda: gpt("gpt3-175b", layers=2, attention=att)),
                                 InputSpec((s,), "int64"), dtype="fp16") for att in ("eager", "sdpa")}
    eager, sdpa = graphs["eager"], graphs["sdpa"]
    assert sdpa.param_count == eager.param_count
    le, ls = eager.layers[1], sdpa.layers[1]
    assert ls.fwd_flops == le.fwd_flops - 2 * s * s * h == 24 * s * h * h + 2 * s * s * h
    assert ls.bwd_flops == 48 * s * h * h + 2.5 * 2 * s * s * h
    assert le.saved_bytes - ls.saved_bytes == 5 * a * s * s - 4 * a * s
    # Korthikanti et al. with flash attention: 34 s b h, plus the logsumexp; 32 KiB above it, as
    # eager is above its closed form (test above)
    assert ls.saved_bytes - (34 * s * h + 4 * a * s) == le.saved_bytes - s * h * (34 + 5 * a * s / h) == 32768
    fused = [k for k in ls.kernels if k.klass == "attention"]
    assert [(k.phase, k.op) for k in fused] == [("F", "_scaled_dot_product_flash_attention_for_cpu"),
                                                ("I", "_scaled_dot_product_flash_attention_for_cpu_backward")]
    assert [k.flops[1] for k in fused] == [2 * s * s * h, 5 * s * s * h]
    # bytes per sample: Q, K, V, O in fp16 and the logsumexp forward; backward reads dO, Q, K, V,
    # O and the logsumexp and writes dQ, dK, dV
    assert [k.bytes[1] for k in fused] == [4 * 2 * s * h + 4 * a * s, 8 * 2 * s * h + 4 * a * s]
    assert not any(k.klass == "attention" for k in le.kernels)
    # the forward: LayerNorm, QKV, attention, projection, dropout, residual add, then the MLP's six
    assert [k.op for k in ls.kernels if k.phase == "F"] == [
        "native_layer_norm", "addmm", "_scaled_dot_product_flash_attention_for_cpu", "addmm", "native_dropout",
        "add", "native_layer_norm", "addmm", "gelu", "addmm", "native_dropout", "add"]
    # eager's softmax alone reads and writes the a s^2 scores
    assert next(k.bytes[1] for k in le.kernels if k.op == "_softmax") == 2 * 2 * a * s * s


def test_a_depthwise_convolutions_backward_counts_its_groups():
    """Each gradient of a convolution takes the forward's MACs; torch 2.13's FlopCounterMode counts
    a grouped convolution's weight gradient groups x over (parsim.model.extract._conv_backward_flops),
    which made the held-out MobileNetV2's depthwise layers' backward 10-65x their forward."""
    from torch import nn as tnn

    from parsim.model.extract import _flop_counter
    for groups in (64, 8, 1):
        conv = tnn.Conv2d(64, 64, 3, stride=2 if groups == 8 else 1, padding=1, groups=groups, bias=False)
        x = torch.randn(2, 64, 16, 16, requires_grad=True)
        with _flop_counter() as fwd:
            y = conv(x)
        with _flop_counter() as bwd:
            y.sum().backward()
        ho = y.shape[-1]
        assert fwd.get_total_flops() == 2 * 2 * ho * ho * 64 * (64 // groups) * 9
        assert bwd.get_total_flops() == 2 * fwd.get_total_flops()
    spec = load_model("results/heldout/models/mobilenet_v2_cifar.yaml")
    for layer in spec.graph.layers:
        assert layer.bwd_flops <= 2 * layer.fwd_flops * (1 + 1e-9), layer.name


def test_unsafe_view_moves_no_data():
    """aten's ``_unsafe_view`` (matmul folding a bmm's operands and output) is a view on the GPU,
    though not in aten's schema: no kernel records it (and _MemoryBoundBytes, on the same
    _FREE_OPS, counts none of its bytes), so eager attention's bmm output, the a s^2 scores, is
    not priced as one more copy."""
    cfg = GPT_PRESETS["gpt-tiny"]
    g = extract_graph(_meta(lambda: gpt("gpt-tiny", attention="eager")), InputSpec((cfg.seq_len,), "int64"),
                      dtype="fp16")
    block = g.layers[1]
    assert any(k.op == "bmm" for k in block.kernels)                  # eager attention: matmul's bmm path
    assert not any(k.op == "_unsafe_view" for layer in g.layers for k in layer.kernels)


def test_saved_storages_count_each_storage_once_and_never_mistake_a_reused_address():
    """parsim.model.extract.SavedStorages: views of one storage count once; a storage freed while
    the forward records (a branch whose result only feeds indices) keeps its address from the next
    one, so a hundred short-lived storages of different sizes count a hundred times.  Keyed by
    address alone, a later storage at a freed address replaced or was taken for the first, as the
    allocator placed them (DeepSeek-V3's MoE layer's saved bytes moved from process to process)."""
    from parsim.model.extract import SavedStorages

    recorded = SavedStorages()
    kept = torch.empty(16, device="meta")
    recorded.pack(kept)
    recorded.pack(kept.view(4, 4))                       # a view: the same storage
    sizes = [4 * (i % 7 + 1) for i in range(100)]
    for n in sizes:
        recorded.pack(torch.empty(n, device="meta"))       # freed at once by the caller
    assert sum(recorded.nbytes.values()) == 4 * (16 + sum(sizes))
    excluded = torch.empty(8, device="meta")
    only = SavedStorages({excluded.untyped_storage()._cdata})
    only.pack(excluded)
    assert only.nbytes == {}
