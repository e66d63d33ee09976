"""The zoo GPT's ``attention: megatron`` (parsim.model.attention, parsim.model.fused_softmax):
Megatron-LM's fused scale-mask-softmax extracts as one memory-bound kernel each way with the
bytes of Megatron's CUDA kernel, attention is found as eager's (selective recomputation, context
parallelism), it saves what eager saves, and on CPU it computes what eager computes."""

import json

import pytest
import torch

from parsim.model.attention import MEGATRON_SOFTMAX_BACKWARD_OP, MEGATRON_SOFTMAX_OP, attention_of
from parsim.model.extract import InputSpec, extract_graph
from parsim.model.zoo.gpt import gpt
from parsim.shard.prepare import per_device_graph

S, H, A = 128, 256, 4           # tokens, hidden, heads; fp16: 2 bytes an element
ELT = 2


def _graph(attention: str):
    with torch.device("meta"):
        model = gpt(layers=2, hidden=H, heads=A, seq_len=S, vocab=512, dropout=0.1, attention=attention)
    return extract_graph(model, InputSpec((S,), "int64"), dtype="fp16", batch=2)


@pytest.fixture(scope="module")
def graphs():
    return _graph("eager"), _graph("megatron")


def _between_qk_and_av(kernels, phase):
    """The kernels of ``phase`` from the first s x s x d batched GEMM (QK^T) to the next bmm."""
    ks = [k for k in kernels if k.phase == phase]
    first = next(i for i, k in enumerate(ks) if k.op == "bmm")
    last = next(i for i in range(first + 1, len(ks)) if ks[i].op == "bmm")
    return ks[first:last + 1]


def test_fused_softmax_is_one_kernel_each_way_with_megatrons_bytes(graphs):
    _, meg = graphs
    layer = meg.layers[1]
    fwd = _between_qk_and_av(layer.kernels, "F")
    # QK^T one GEMM (M = N = s, K = d, a per sample), one fused softmax, the dropout, AV (matmul's
    # _unsafe_view reshapes of its operands and output move nothing: parsim.model.recording.FREE_OPS)
    assert [k.op for k in fwd] == ["bmm", MEGATRON_SOFTMAX_OP, "native_dropout", "clone", "bmm"]
    qk = fwd[0]
    assert qk.klass == "matmul" and qk.gemm_at(1) == (S, S, H // A, A)
    soft = fwd[1]
    scores_bytes = A * S * S * ELT                     # per sample
    assert soft.klass == "mem" and soft.bytes == (0.0, 2 * scores_bytes)   # reads the scores, writes the probabilities
    bwd = [k for k in layer.kernels if k.op == MEGATRON_SOFTMAX_BACKWARD_OP]
    assert len(bwd) == 1 and bwd[0].phase == "I" and bwd[0].klass == "mem"
    assert bwd[0].bytes == (0.0, 3 * scores_bytes)    # reads the probabilities and the gradient, writes the gradient
    assert not {"mul", "masked_fill", "_softmax", "_softmax_backward_data"} & {k.op for k in layer.kernels
                                                                               if k.bytes[1] >= scores_bytes}


def test_megatron_moves_fewer_bytes_and_saves_what_eager_saves(graphs):
    eager, meg = graphs
    e, m = eager.layers[1], meg.layers[1]
    assert m.fwd_flops == e.fwd_flops and m.param_count == e.param_count
    assert m.saved_bytes == e.saved_bytes              # probabilities, dropout mask and output; no scores
    # eager's separate scale (mul) and mask (masked_fill) passes: read + write of a*s^2 each
    # (the masked_fill's bool mask s x s, 1 byte, read too)
    scores_bytes = A * S * S * ELT
    assert e.fwd_mem_bytes - m.fwd_mem_bytes == pytest.approx(2 * 2 * scores_bytes + S * S / 2, rel=0.01)
    att_e, att_m = attention_of(e, eager.extraction_batch), attention_of(m, meg.extraction_batch)
    assert att_m == att_e                              # context parallelism treats it as eager


def test_selective_recomputation_finds_the_megatron_core_attention(graphs):
    _, meg = graphs
    core = per_device_graph(meg, recompute="selective").layers[1].recompute_part.kernels
    assert [k.op for k in core if k.klass != "mem"] == ["bmm", "bmm"]
    assert MEGATRON_SOFTMAX_OP in {k.op for k in core}


def test_megatron_computes_what_eager_computes_on_cpu():
    torch.manual_seed(0)
    eager = gpt("gpt-tiny", dropout=0.0, attention="eager")
    meg = gpt("gpt-tiny", dropout=0.0, attention="megatron")
    meg.load_state_dict(eager.state_dict())
    idx = torch.randint(0, 512, (2, 32))
    out_e, out_m = eager(idx), meg(idx)
    assert torch.allclose(out_e, out_m, atol=1e-5)
    out_e.square().mean().backward()
    out_m.square().mean().backward()
    for (name, p), q in zip(eager.named_parameters(), meg.parameters()):
        assert torch.allclose(p.grad, q.grad, atol=1e-5), name


def test_unknown_attention_names_the_kinds():
    with pytest.raises(ValueError, match="eager, sdpa, megatron"):
        gpt("gpt-tiny", attention="flash")


def test_parsim_run_with_op_level_tensor_parallelism_matches_one_process(tmp_path):
    """2 gloo processes, tp=2 with DTensor layouts (tp_layout auto, whose rule for the fused
    softmax splits it over batch and heads only): one step's loss equals the single-process
    reference's, and eager's."""
    from parsim.cli import main
    from parsim.exec.reference import reference_run

    losses = {}
    for kind in ("megatron", "eager"):
        model = tmp_path / f"{kind}.yaml"
        model.write_text("schema_version: 1\nname: gpt-tiny\nmodel: gpt\n"
                         f"args: {{preset: gpt-tiny, dropout: 0.0, attention: {kind}}}\n"
                         "training: {global_batch_size: 8, dtype: fp32, optimizer: momentum}\n")
        plan = str(tmp_path / f"{kind}.json")
        assert main(["simulate", str(model), "--cluster", "local-cpu", "--dp", "1", "--pp", "1", "--tp", "2",
                     "--tp-layout", "auto", "-o", plan, "--json"]) == 0
        if kind == "eager":
            losses[kind] = reference_run(plan, 1, synthetic_size=64)[0]
            continue
        out = tmp_path / "out"
        assert main(["run", plan, "--out", str(out), "--synthetic-size", "64", "--steps", "1"]) == 0
        losses[kind] = json.loads((out / "measured.json").read_text())["loss"]
        torch.testing.assert_close(torch.tensor(losses[kind]), torch.tensor(reference_run(plan, 1, synthetic_size=64)[0]))
    torch.testing.assert_close(torch.tensor(losses["megatron"]), torch.tensor(losses["eager"]))
