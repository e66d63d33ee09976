"""Attention as a CPU runs it (parsim.model.attention.cpu_attention): torch on a CPU sends
scaled_dot_product_attention with dropout through its decomposed math path, and a layer whose sliding
window is shorter than its sequence runs with its banded mask, with which transformers expands grouped KV
heads to every query head; both save more for backward than the fused kernel a GPU runs.  Extraction
measures such a unit both ways, and a CPU cluster's plans are priced with the second
(LayerGraph.cpu_graph, parsim.shard.prepare)."""

from dataclasses import replace

import pytest
import torch

from parsim.cost.compute import AnalyticalCompute
from parsim.hardware import load_cluster
from parsim.model.extract import _saved_storage_bytes, cut_units
from parsim.model.spec import build_module, load_model
from parsim.plan import ParallelConfig
from parsim.shard.prepare import per_device_graph
from parsim.sim import simulate

DROPOUT = "results/heldout/models/seed_oss_tiny.yaml"      # attention_dropout 0.1 (and residual dropout 0.1)
NO_DROPOUT = "results/heldout/models/mistral_tiny.yaml"       # no dropout, no sliding window
# 8 query heads over 2 KV heads of 24, 56 tokens; a window of 32 on layers 0-2, full attention on layer 3
WINDOWED = "results/heldout/models/ministral_tiny.yaml"


@pytest.fixture(scope="module")
def spec():
    return load_model(DROPOUT)


def _saved_per_sample_on_cpu(module, unit, shape) -> float:
    """What autograd keeps of one forward of ``unit`` on this CPU, per sample: the storages saved at
    4 samples less those at 2, over 2 (parameters and buffers left out, as extraction does)."""
    excluded = {t.untyped_storage()._cdata for t in (*module.parameters(), *module.buffers())}

    def saved(n):
        return _saved_storage_bytes(unit, torch.randn(n, *shape, requires_grad=True), excluded)
    return (saved(4) - saved(2)) / 2


def test_the_cpu_graph_saves_what_torch_on_this_cpu_saves(spec):
    """A decoder layer with attention dropout, run forward on this CPU: its saved bytes per sample
    are the CPU graph's, above the fused kernel's by the math path's s x s tensors; the other layers
    (the embedding, the head) are the same in both graphs."""
    torch.manual_seed(0)
    module = build_module(spec.source, spec.path).train()
    units = dict(cut_units(module))
    graph, cpu = spec.graph, spec.graph.cpu_graph
    assert cpu is not None and cpu.names == graph.names and cpu.cpu_graph is None
    layer = next(i for i, name in enumerate(graph.names) if name.startswith("layers."))
    shape = (40, 192)                                                   # seq_len, hidden_size
    measured = _saved_per_sample_on_cpu(module, units[graph.names[layer]], shape)
    assert cpu.layers[layer].saved_bytes == pytest.approx(measured, rel=1e-9)
    # the math path keeps at least the probabilities and the dropped probabilities, 6 heads x 40 x 40 fp32
    assert cpu.layers[layer].saved_bytes - graph.layers[layer].saved_bytes >= 2 * 6 * 40 * 40 * 4
    assert [a.saved_bytes for a in cpu.layers if not a.name.startswith("layers.")] == \
        [a.saved_bytes for a in graph.layers if not a.name.startswith("layers.")]
    assert load_model(NO_DROPOUT).graph.cpu_graph is None               # nothing differs without dropout


def test_a_windowed_layer_of_the_cpu_graph_saves_what_torch_on_this_cpu_saves():
    """A decoder whose sliding window is shorter than its sequence: each windowed layer, run forward on
    this CPU with its banded mask, keeps per sample what the CPU graph says, above the fused kernel's by at
    least the keys and values expanded from 2 to 8 heads; the full-attention layer, the embedding and the
    head are the same in both graphs."""
    spec = load_model(WINDOWED)
    torch.manual_seed(0)
    module = build_module(spec.source, spec.path).train()
    units = dict(cut_units(module))
    graph, cpu = spec.graph, spec.graph.cpu_graph
    assert cpu is not None and cpu.names == graph.names and cpu.cpu_graph is None
    windowed = [i for i, name in enumerate(graph.names) if getattr(units[name], "attention_window", 0)]
    assert [graph.names[i] for i in windowed] == ["layers.0", "layers.1", "layers.2"]
    for i in windowed:
        measured = _saved_per_sample_on_cpu(module, units[graph.names[i]], (56, 192))   # seq_len, hidden_size
        assert cpu.layers[i].saved_bytes == pytest.approx(measured, rel=1e-9)
        assert cpu.layers[i].saved_bytes - graph.layers[i].saved_bytes >= 2 * (8 - 2) * 56 * 24 * 4
    assert [a.saved_bytes for i, a in enumerate(cpu.layers) if i not in windowed] == \
        [a.saved_bytes for i, a in enumerate(graph.layers) if i not in windowed]


def test_a_cpu_cluster_prices_the_cpu_graph_and_a_gpu_cluster_the_fused_one(spec):
    cpu, gpu = load_cluster("local-cpu"), load_cluster("dgx-h100:1x8")
    assert per_device_graph(spec.graph, cluster=cpu) is spec.graph.cpu_graph
    assert per_device_graph(spec.graph, cluster=gpu) is spec.graph
    assert per_device_graph(spec.graph) is spec.graph                   # no cluster: the model's graph
    # full recomputation keeps each layer's input only, however its attention runs
    full = per_device_graph(spec.graph, recompute="full", cluster=cpu)
    assert [a.saved_bytes for a in full.layers] == \
        [a.saved_bytes for a in per_device_graph(spec.graph, recompute="full").layers]
    # one process, b samples: the activations grow by b x the per-sample difference, nothing else moves
    b = spec.training.global_batch_size
    cfg = ParallelConfig(1, 1, 1, "1f1b", 1, (0, len(spec.graph)))
    compute = AnalyticalCompute.for_training(cpu.device, spec.training)
    on_cpu, fused = (simulate(g, spec.training, cpu, cfg, compute, keep_timeline=False).ranks[0].memory
                     for g in (spec.graph, replace(spec.graph, cpu_graph=None)))
    extra = b * (spec.graph.cpu_graph.saved_bytes - spec.graph.saved_bytes)
    assert extra > 0.05 * fused.total_bytes
    assert on_cpu.activations_bytes - fused.activations_bytes == pytest.approx(extra, rel=1e-9)
    assert on_cpu.total_bytes - on_cpu.activations_bytes == pytest.approx(fused.total_bytes - fused.activations_bytes)
