"""Vocabulary-parallel cross-entropy (parsim.exec.vocab_parallel, Megatron's
megatron/core/tensor_parallel/cross_entropy.py): the executor's loss from each tensor-parallel
rank's slice of the logits equals F.cross_entropy on the gathered logits, and the simulator
prices it (parsim.shard.graph.loss_steps): three forward all-reduces of one fp32 per token
instead of a gather, the loss holding its slice."""

import pytest
import torch

from executor_checks import spawned

from parsim.cost.memory import loss_workspace_bytes
from parsim.model.graph import LOSS_BYTES_PER_ELEMENT, VOCAB_PARALLEL_LOSS_BACKWARD_BUFFERS
from parsim.model.spec import load_model
from parsim.shard.graph import collective_counts, shard_graph
from parsim.shard.prepare import per_device_graph

# (batch, tokens, vocabulary) of the logits; the targets hit both halves of the vocabulary,
# including each half's first and last class
B, T, V = 2, 4, 10
TARGETS = [[0, 4, 5, 9], [3, 6, 1, 8]]
MEMORY_ROWS, MEMORY_VOCAB = 64, 4096          # the backward's allocations, measured on a larger slice


def _worker(rank):
    import torch.distributed as dist
    import torch.nn.functional as F

    from parsim.exec.objective import loss_fn
    from parsim.exec.tensor_parallel import CollectiveCounter
    from parsim.exec.measure import profiled_peak_bytes

    group = dist.group.WORLD
    found = {}
    for name, scale in (("unit", 1.0), ("large", 60.0)):     # large: exp overflows without the max shift
        torch.manual_seed(0)
        whole = (torch.randn(B, T, V, dtype=torch.float64) * scale).float().requires_grad_()
        target = torch.tensor(TARGETS)
        want = F.cross_entropy(whole.flatten(0, 1), target.flatten())
        want.backward()
        mine = whole.detach()[..., rank * V // 2:(rank + 1) * V // 2].clone().requires_grad_()
        with CollectiveCounter() as fwd:
            loss = loss_fn(mine, target, group)
        with CollectiveCounter() as bwd:
            loss.backward()
        found[(name, rank)] = (loss.item(), want.item(), mine.grad, whole.grad[..., rank * V // 2:(rank + 1) * V // 2],
                               fwd.counts, bwd.counts)
    mine = torch.randn(MEMORY_ROWS, MEMORY_VOCAB // 2, requires_grad=True)
    loss = loss_fn(mine, torch.randint(0, MEMORY_VOCAB, (MEMORY_ROWS,)), group)
    found[("backward_peak_bytes", rank)] = profiled_peak_bytes(loss.backward)
    return found


@pytest.fixture(scope="module")
def two_ranks():
    return spawned(_worker, 2)


@pytest.mark.parametrize("name", ["unit", "large"])
@pytest.mark.parametrize("rank", [0, 1])
def test_vocab_parallel_loss_equals_cross_entropy_on_the_gathered_logits(two_ranks, name, rank):
    got, want, grad, want_grad, fwd, bwd = two_ranks[(name, rank)]
    assert got == pytest.approx(want, rel=1e-6, abs=1e-6)          # the same mean, on every rank
    torch.testing.assert_close(grad, want_grad)                      # this rank's slice of the gradient
    assert fwd == {"all_reduce": 3} and bwd == {}                    # max, target logit, sum of exp; local backward


@pytest.mark.parametrize("rank", [0, 1])
def test_vocab_parallel_loss_backward_allocates_one_slice(two_ranks, rank):
    # torch.profiler's allocation trace of the backward: one fp32 gradient of the slice (and a
    # few row-sized tensors), what loss_workspace_bytes charges
    slice_bytes = MEMORY_ROWS * MEMORY_VOCAB // 2 * 4
    assert two_ranks[("backward_peak_bytes", rank)] == pytest.approx(
        VOCAB_PARALLEL_LOSS_BACKWARD_BUFFERS * slice_bytes, rel=0.01)


@pytest.mark.parametrize("model,tokens,hidden", [("examples/gpt_tiny_local.yaml", 32, 64),
                                                ("examples/gpt_small_local.yaml", 128, 256)])
@pytest.mark.parametrize("layout", ["megatron", "megatron-sp"])
def test_simulator_prices_the_vocab_parallel_loss(model, tokens, hidden, layout):
    g = load_model(model).graph
    tp = per_device_graph(g, 2, layout)
    vocab = g.layers[-1].ops[-1].output_shape[-1]
    # the loss keeps log-probabilities of its half of the vocabulary, fp32
    assert tp.loss_gather_ways == 1 and tp.loss_vocab_parallel
    assert tp.loss_saved_bytes == g.loss_saved_bytes / 2 == tokens * vocab / 2 * LOSS_BYTES_PER_ELEMENT
    # its backward: one gradient of the slice, against two of the whole before
    assert loss_workspace_bytes(tp, 2) == tokens * vocab / 2 * 4 * 2 == loss_workspace_bytes(g, 2) / 4
    # the head's steps: three all-reduces of one fp32 per token (per sample), once per micro-batch,
    # no gather of the logits and nothing more for the loss backward
    loss = [(step.kind, step.group_size, step.bytes_per_device) for ph, step, _ in tp.layers[-1].tp_comm
            if ph == "loss"]
    assert loss == [("AllReduce", 2, tokens * 4)] * 3
    # the rest is the head's input, [tokens, hidden] fp32: its gradient all-reduced (megatron),
    # or the sequence gathered and its gradient reduce-scattered (megatron-sp, with ln_f's
    # gradient mirror); no step for the logits [tokens, vocab]
    rest = {(ph, step.kind, step.bytes_per_device if ph != "grad" else None) for ph, step, _ in tp.layers[-1].tp_comm
            if ph != "loss"}
    x = tokens * hidden * 4
    assert rest == ({("B", "AllReduce", x)} if layout == "megatron" else
                    {("grad", "AllReduce", None), ("F", "AllGather", x), ("B", "ReduceScatter", x)})
    # per step of 2 micro-batches: the loss's 3 each (megatron: and the head's input-gradient
    # all-reduce), not again under recomputation, which re-runs the forward's collectives only
    last = [len(g.layers) - 1]
    head = collective_counts(tp, 2, last)
    assert head["all_reduce"] == 3 * 2 + (2 if layout == "megatron" else 0)
    again = collective_counts(per_device_graph(g, 2, layout, recompute=True), 2, last)
    assert again["all_reduce"] == head["all_reduce"]

def test_other_splits_of_the_output_are_gathered_for_the_loss():
    # the head split by rows of its input (tokens): the logits are gathered whole for the loss
    g = load_model("examples/gpt_tiny_local.yaml").graph
    tp = shard_graph(g, {"head/:mm": ((2, 1), (1, 1))}, 2)
    assert tp.loss_gather_ways == 2 and tp.loss_saved_bytes == g.loss_saved_bytes and not tp.loss_vocab_parallel
    assert loss_workspace_bytes(tp, 2) == loss_workspace_bytes(g, 2)
    assert [(ph, s.kind) for ph, s, _ in tp.layers[-1].tp_comm if s.communicates][-1:] == [("F", "AllGather")]
    assert not any(ph == "loss" for ph, _, _ in tp.layers[-1].tp_comm)
