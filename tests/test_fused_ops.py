"""args: {fused_ops: true} of an hf: model (parsim.model.fused_ops): RMSNorm, rotary embeddings and
SwiGLU as one kernel each way, computing what transformers' modules compute, extracted with the
same parameters and GEMM FLOPs and the bytes a fused kernel moves, laid out by tensor parallelism
as the modules they replace, and leaving what parsim's executor runs unchanged."""

import copy
import os

import pytest
import torch
import yaml

from parsim.errors import InputError
from parsim.model.spec import load_model

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "data", "hf_tiny_llama.yaml")
TINY_CFG = os.path.join(ROOT, "tests", "data", "hf_tiny_llama", "config.json")
NEMOTRON = os.path.join(ROOT, "tests", "data", "hf_tiny_nemotron.yaml")
TINY_FIELDS = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=100, max_position_embeddings=32)


def _tiny(tmp_path, fused: bool, dtype: str = "fp32"):
    d = yaml.safe_load(open(TINY))
    d["hf"], d["args"] = TINY_CFG, {**d["args"], "fused_ops": fused}
    d["training"]["dtype"] = dtype
    p = tmp_path / f"tiny_{fused}_{dtype}.yaml"
    p.write_text(yaml.safe_dump(d))
    return load_model(p)


@pytest.mark.parametrize("model_type,extra", [("llama", {}), ("qwen2", {}), ("qwen3", {"head_dim": 16})])
def test_fused_modules_compute_what_transformers_modules_compute(model_type, extra):
    """Swapped into a Llama, Qwen2 and Qwen3 (whose q/k norms are RMSNorms too), the ops give the
    same logits and the same gradients of every parameter as the modules as written."""
    from parsim.model.fused_ops import fuse
    from parsim.model.hf import causal_lm

    torch.manual_seed(0)
    plain = causal_lm(dict(model_type=model_type, **TINY_FIELDS, **extra), 16)
    fused = copy.deepcopy(plain)
    norms = 5 + (4 if model_type == "qwen3" else 0)      # 2 a layer and the final one; Qwen3: q and k norms
    assert fuse(fused) == {"rms_norm": norms, "rope": 2, "swiglu": 2}
    ids = torch.randint(0, 100, (2, 16))
    a, b = plain(ids), fused(ids)
    torch.testing.assert_close(b, a)
    (a ** 2).sum().backward()
    (b ** 2).sum().backward()
    for (name, p), (_, q) in zip(plain.named_parameters(), fused.named_parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5, msg=name)


def test_each_op_and_its_backward_against_autograd_of_the_composite():
    """Each backward op (one kernel) against autograd through the eager steps it replaces, as
    transformers writes them (LlamaRMSNorm's fp32 steps, silu then mul, rotate_half)."""
    from parsim.model.fused_ops import rms_norm, rope, swiglu

    def eager_norm(x, w):
        xf = x.float()
        return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)

    def eager_rope(t, cos, sin):
        return t * cos + torch.cat((-t[..., 4:], t[..., :4]), dim=-1) * sin

    torch.manual_seed(1)
    angle = torch.randn(1, 1, 5, 4)
    cos, sin = torch.cat((angle.cos(), angle.cos()), -1), torch.cat((angle.sin(), angle.sin()), -1)
    cases = [(lambda x, w: rms_norm(x, w, 1e-6)[0], eager_norm, [(3, 5, 8), (8,)]),
             (swiglu, lambda g, u: torch.nn.functional.silu(g) * u, [(4, 6), (4, 6)]),
             (lambda t: rope(t, cos, sin), lambda t: eager_rope(t, cos, sin), [(2, 3, 5, 8)])]
    for fused, eager, shapes in cases:
        inputs = [torch.randn(s, requires_grad=True) for s in shapes]
        twins = [x.detach().clone().requires_grad_() for x in inputs]
        a, b = fused(*inputs), eager(*twins)
        torch.testing.assert_close(a, b)
        grad = torch.randn_like(a)
        a.backward(grad)
        b.backward(grad)
        for x, y in zip(inputs, twins):
            torch.testing.assert_close(x.grad, y.grad, rtol=1e-5, atol=1e-5)


def test_a_fused_block_extracts_one_kernel_each_way_with_the_same_parameters_and_gemms(tmp_path):
    """Each RMSNorm, each of Q's and K's rotary embeddings and the SwiGLU product is one forward and
    one backward kernel, no eager step of theirs is left, and the parameters, FLOPs and GEMMs are
    the block's as written; the forward norm moves x, its weight, y and one fp32 1/rms a row."""
    plain, fused = _tiny(tmp_path, False, "bf16").graph, _tiny(tmp_path, True, "bf16").graph
    assert fused.param_count == plain.param_count
    h, s = 64, 16
    for lp, lf in zip(plain.layers, fused.layers):
        assert (lf.fwd_flops, lf.bwd_flops) == (lp.fwd_flops, lp.bwd_flops)
        gemms = sorted(k.gemm for k in lf.kernels if k.klass == "matmul")
        assert gemms == sorted(k.gemm for k in lp.kernels if k.klass == "matmul")
    block = fused.layers[1]
    ops = [k.op for k in block.kernels if k.klass == "mem"]
    for op, n in (("fused_rms_norm", 2), ("fused_rope", 2), ("fused_swiglu", 1)):
        assert ops.count(op) == ops.count(op + "_backward") == n
    assert not {"pow", "rsqrt", "mean", "silu", "neg", "cat"} & set(ops)
    norm = next(k for k in block.kernels if k.op == "fused_rms_norm")
    assert norm.bytes[1] == 2 * s * h * 2 + s * 4          # per sample: x and y in bf16, 1/rms in fp32
    assert norm.bytes[0] == h * 2                           # the weight, once whatever the batch
    # what the fused kernels keep for backward is less than the eager steps' fp32 copies
    assert block.saved_bytes < plain.layers[1].saved_bytes
    assert block.fwd_mem_bytes < plain.layers[1].fwd_mem_bytes


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("layout", ["megatron", "megatron-sp"])
def test_a_fused_block_lays_out_as_the_block_as_written(tmp_path, layout, dtype):
    """Megatron's tensor-parallel layouts give the fused graph the same parameters a device as the
    graph as written, at tp 2 and 4, and each block the same activation collectives (the
    all-reduces, or sequence parallelism's gathers and reduce-scatters, of s x h); the first block
    also completes the vocabulary-parallel embedding's output, once (the eager norm's fp32 copy
    and mean of the layer input read it too, through operators the view does not record: the
    same tensor, its completion charged once).  Under sequence parallelism a norm's weight
    gradient is summed over the group (Megatron-Core's _allreduce_layernorm_grads), h fp32 a
    norm, fused or eager; the eager norm's per-row statistics stay on the device's rows
    (parsim.shard.ops.broadcast_layout), so its steps are the fused norm's, collective for
    collective, in bf16 as in fp32 (the eager norm's fp32 copy reads the bf16 layer input, whose
    completion moves bf16)."""
    from parsim.shard.prepare import per_device_graph

    eb = 4 if dtype == "fp32" else 2

    def steps(layer, t):
        act = 2 * 16 * 64 * eb / t           # the extraction's 2 samples of s x h, over t
        return [(ph, st.kind, st.group_size) for ph, st, _ in layer.tp_comm if st.bytes_per_device >= act]

    plain, fused = _tiny(tmp_path, False, dtype).graph, _tiny(tmp_path, True, dtype).graph
    for t in (2, 4):
        a, b = per_device_graph(plain, t, layout), per_device_graph(fused, t, layout)
        for la, lb in zip(a.layers, b.layers):
            assert lb.param_count == la.param_count
            assert steps(lb, t) == steps(la, t)
            assert [(ph, st.kind, st.group_size, st.bytes_per_device) for ph, st, _ in lb.tp_comm] == \
                [(ph, st.kind, st.group_size, st.bytes_per_device) for ph, st, _ in la.tp_comm]
        first, block = steps(b.layers[1], t), steps(b.layers[2], t)
        completion = [("F", "AllReduce", t)] if layout == "megatron" else [("F", "ReduceScatter", t),
                                                                         ("B", "AllGather", t)]
        assert first == completion + block
        norm_grads = [st.bytes_per_device for ph, st, _ in b.layers[2].tp_comm if ph == "grad" and st.group_size == t]
        assert norm_grads == ([64 * eb] * 2 if layout == "megatron-sp" else [])


def test_deepseek_recomputation_drops_and_reruns_the_fused_norms_and_swiglu(tmp_path):
    """DeepSeek's selective recomputation (parsim.model.recompute_modules) finds the fused kernels
    as it finds the eager runs: it re-runs each RMSNorm and the SwiGLU product in the backward."""
    from parsim.model.recompute_modules import modules_recomputed

    spec = _tiny(tmp_path, True, "bf16")
    layer = spec.graph.layers[1]
    part = modules_recomputed(layer, spec.graph.extraction_batch).recompute_part
    assert sorted(k.op for k in part.kernels if k.klass == "mem") == ["fused_rms_norm"] * 2 + ["fused_swiglu"]


def test_code_not_llamas_is_left_as_written():
    """Nemotron's LayerNorm1p, partial rotary embeddings and squared-ReLU MLP are not Llama's code:
    nothing is swapped."""
    from parsim.model.fused_ops import fuse
    from parsim.model.hf import causal_lm

    cfg = yaml.safe_load(open(NEMOTRON))["hf"]
    assert fuse(causal_lm(cfg, 16)) == {}


def test_the_executor_runs_the_modules_as_written(tmp_path):
    """fused_ops prices the fused kernels; parsim's executor builds transformers' modules as written."""
    from parsim.model.spec import build_module

    spec = _tiny(tmp_path, True)
    assert spec.source.kwargs["fused_ops"] == ("rms_norm", "rope", "swiglu")
    module = build_module(spec.source)
    assert not any("forward" in vars(m) for m in module.modules())


def test_a_list_fuses_only_the_kinds_it_names(tmp_path):
    """``fused_ops: [rms_norm, swiglu]`` (MindSpeed's --use-fused-rmsnorm and --use-fused-swiglu
    without --use-fused-rotary-pos-emb) leaves the rotary embeddings' eager steps."""
    d = yaml.safe_load(open(TINY))
    d["hf"], d["args"] = TINY_CFG, {**d["args"], "fused_ops": ["swiglu", "rms_norm"]}
    p = tmp_path / "some.yaml"
    p.write_text(yaml.safe_dump(d))
    spec = load_model(p)
    assert spec.source.kwargs["fused_ops"] == ("rms_norm", "swiglu")
    ops = {k.op for k in spec.graph.layers[1].kernels}
    assert {"fused_rms_norm", "fused_swiglu"} <= ops and "fused_rope" not in ops and {"neg", "cat"} <= ops


@pytest.mark.parametrize("value,message", [("yes", r"args\.fused_ops: expected"),
                                           (["rms_norm", "layer_norm"], r"args\.fused_ops: 'layer_norm' is not one of")])
def test_bad_fused_ops_are_one_line_errors(tmp_path, value, message):
    d = yaml.safe_load(open(TINY))
    d["hf"], d["args"] = TINY_CFG, {**d["args"], "fused_ops": value}
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(d))
    with pytest.raises(InputError, match=message):
        load_model(p)


def test_parsim_model_says_which_kernels_it_priced(tmp_path):
    from parsim.report.cli_text import default_lines

    assert "fused kernels: rms_norm, rope, swiglu (args.fused_ops" in "\n".join(default_lines(_tiny(tmp_path, True)))
    assert "fused kernels: none" in "\n".join(default_lines(_tiny(tmp_path, False)))
