"""A layer's backward rise (Layer.bwd_rise_bytes), measured on meta at extraction: against torch's own formula for
a square's backward, against what torch allocates on this CPU for a squared-ReLU MLP block, and as the workspace
rule prices it (parsim.cost.memory.backward_rise_sets)."""

from dataclasses import replace

import pytest
import torch
from torch import nn

from parsim.cost.memory import backward_workspace_bytes
from parsim.exec.measure import profiled_events
from parsim.model.extract import InputSpec, extract_graph

SEQ, HIDDEN, FFN = 16, 32, 128


class Square(nn.Module):
    def forward(self, x):
        return torch.square(x)


class SquaredReluMLP(nn.Module):
    """A pre-norm residual block with a squared-ReLU MLP without a gate (Nemotron-4's, Primer's)."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.up = nn.Linear(HIDDEN, FFN, bias=False)
        self.down = nn.Linear(FFN, HIDDEN, bias=False)

    def forward(self, x):
        return x + self.down(torch.square(torch.relu(self.up(self.norm(x)))))


def _model(block: nn.Module) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(HIDDEN, HIDDEN), block, nn.Linear(HIDDEN, HIDDEN))


def test_a_squares_backward_holds_four_tensors_of_its_size():
    """torch's pow_backward (torch/csrc/autograd/FunctionsManual.cpp) computes grad * (2 * x.pow(1)): beside the
    gradient entering it, x.pow(1), 2 * x.pow(1) and the result, all alive when the result is made; the input
    x is the previous unit's (saved, made before the backward)."""
    graph = extract_graph(_model(Square()), InputSpec((SEQ, HIDDEN)), name="square")
    square = graph.layers[1]
    assert square.bwd_rise_bytes == 4 * SEQ * HIDDEN * 4
    assert square.bwd_rise_fixed_bytes == 0
    # a linear layer's backward: the gradient entering it and the input gradient it makes (its weight's
    # gradient is the parameter's, held as static memory)
    assert graph.layers[2].bwd_rise_bytes == 2 * SEQ * HIDDEN * 4


def _rise_on_cpu(block: nn.Module, batch: int) -> int:
    """The most bytes torch's CPU allocator holds in ``block``'s backward above what its forward left, the
    parameters' gradients held from an earlier step (as the executor keeps them)."""
    x = torch.randn(batch, SEQ, HIDDEN, requires_grad=True)
    for p in block.parameters():
        p.grad = torch.zeros_like(p)
    marks: dict = {}

    def step():
        y = block(x)
        marks["backward"] = torch.ones(7)               # a marker allocation: the backward starts here
        y.backward(torch.ones_like(y))
        # freed while the profiler still counts: its running total outlives the trace, and a tensor made here
        # and freed later would stay in it for every later measurement in the process (test_memory's)
        x.grad = None
        marks.clear()

    events = profiled_events(step)
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    k = next(i for i, e in enumerate(memory) if e["args"]["Bytes"] == 7 * 4)     # the marker
    start = memory[k]["args"]["Total Allocated"]
    return max(e["args"]["Total Allocated"] for e in memory[k:]) - start


@pytest.mark.parametrize("batch", [8, 24])
def test_a_squared_relu_blocks_rise_is_what_torch_on_this_cpu_allocates(batch):
    block = _model(SquaredReluMLP())[1]
    graph = extract_graph(_model(SquaredReluMLP()), InputSpec((SEQ, HIDDEN)), name="mlp")
    layer = graph.layers[1]
    assert layer.bwd_rise_fixed_bytes + layer.bwd_rise_bytes * batch == _rise_on_cpu(block, batch)


def test_the_workspace_prices_the_rise_where_the_weight_ops_see_less():
    """The MLP block's workspace in one stage: its measured rise, net of what the later layer freed, is above
    every weight operator's working set; with the rise left out the rule falls back to those, lower by more than
    one tensor of the MLP's hidden size."""
    graph = extract_graph(_model(SquaredReluMLP()), InputSpec((SEQ, HIDDEN)), name="mlp")
    b, stage = 8, [range(0, 3)]
    mlp = graph.layers[1]
    freed = graph.stage_saved_bytes(2, 3) - graph.layers[2].input_shared_bytes
    with_rise = backward_workspace_bytes(graph, stage, b)
    assert with_rise == pytest.approx(mlp.bwd_rise_fixed_bytes + (mlp.bwd_rise_bytes - freed) * b)
    without = replace(graph, layers=tuple(replace(a, bwd_rise_bytes=0.0) for a in graph.layers))
    assert backward_workspace_bytes(without, stage, b) < with_rise - SEQ * FFN * 4 * b     # a hidden-size tensor
