"""Layer classes (parsim.model.graph.twin_signature, parsim.sim.prices.Prices.classes): the layers
that hold the same work, in any graph of a run, are priced once, and every price is the one the
layer's own pricing gives, bit for bit.  examples/moe_tiny_local.yaml: two identical MoE decoder
layers, each extracted with its own Experts object."""

import os
from dataclasses import replace

import pytest

from parsim.model.graph import twin_signature
from parsim.model.recompute import Recompute

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "examples", "moe_tiny_local.yaml")


@pytest.fixture(scope="module")
def run():
    from parsim.cost.compute import AnalyticalCompute
    from parsim.hardware import load_cluster
    from parsim.model.spec import load_model
    from parsim.sim.prices import Prices

    spec = load_model(TINY)
    cluster = load_cluster("dgx-h100:1x8").for_dtype(spec.training.dtype)
    return spec, cluster, AnalyticalCompute.for_training(cluster.device, spec.training), Prices(cluster)


def _graph(spec, cluster, prices, recompute, ep=1):
    from parsim.shard.prepare import per_device_graph
    return per_device_graph(spec.graph, 1, "", recompute, spec.shard, cluster, spec.training, ep=ep,
                            memo=prices.shard)


def _moe(graph) -> list[int]:
    return [i for i, layer in enumerate(graph.layers) if layer.experts is not None]


@pytest.mark.parametrize("recompute", list(Recompute))
def test_identical_moe_layers_are_one_class(run, recompute):
    """Each MoE layer carries its own (equal) Experts and, under selective or DeepSeek
    recomputation, its own recomputed part named after it: still one class."""
    spec, cluster, _, prices = run
    graph = _graph(spec, cluster, prices, recompute)
    first, second = _moe(graph)
    assert graph.layers[first].experts is not graph.layers[second].experts     # what extraction gives
    assert graph.layers[first].name != graph.layers[second].name
    classes = prices.classes(graph)
    assert classes[first] == classes[second]
    assert len(set(classes)) < len(classes)


def test_a_layer_that_differs_in_one_field_is_its_own_class(run):
    spec, cluster, _, prices = run
    graph = _graph(spec, cluster, prices, "none")
    first, second = _moe(graph)
    other = replace(graph, layers=tuple(replace(layer, fwd_flops=layer.fwd_flops * 2) if i == second else layer
                                        for i, layer in enumerate(graph.layers)))
    classes = prices.classes(other)
    assert classes[first] != classes[second]
    heavier = replace(graph.layers[first], experts=replace(graph.layers[first].experts, top_k=4))
    assert twin_signature(heavier) != twin_signature(graph.layers[first])


@pytest.mark.parametrize("recompute", ["none", "deepseek"])
@pytest.mark.parametrize("ep", [1, 2, 4])
def test_prices_by_class_equal_each_layers_own(run, recompute, ep):
    """Across the run's graphs (ep = 1 and its expert-parallel graphs share the dense layers),
    every layer's time from the class table is the one pricing that layer alone gives (the last
    with the loss, parsim.cost.layer.loss_time_s)."""
    from parsim.cost.layer import loss_time_s
    from parsim.sim.overlap import layer_time_s

    spec, cluster, compute, prices = run
    graph = _graph(spec, cluster, prices, recompute, ep)
    for kind in ("F", "B", "I", "W"):
        for b in (1, 1024):           # 1: launch-bound on an H100; 1024: not
            got = prices.layer_times(compute, graph, kind, b, 0, False, layer_time_s)
            own = [layer_time_s(compute, layer, kind, b, cluster, 0, False, None) for layer in graph.layers]
            own[-1] += loss_time_s(compute, graph, kind, b)            # the last layer runs the loss
            assert got == own


def test_expert_parallel_layers_share_their_kernels_and_operators(run):
    """An expert-parallel graph's identical MoE layers are built once (parsim.cost.experts):
    the same kernel and operator tuples, so the cost model's memos, keyed by their identity, price
    them once."""
    spec, cluster, _, prices = run
    graph = _graph(spec, cluster, prices, "none", ep=2)
    first, second = _moe(graph)
    a, b = graph.layers[first], graph.layers[second]
    assert a.kernels is b.kernels and a.ops is b.ops
    assert a.name != b.name and twin_signature(a) == twin_signature(b)


@pytest.mark.parametrize("recompute", list(Recompute))
def test_a_signature_is_each_fields_key_in_order(run, recompute):
    """twin_signature skips _field_key's call for the types that rule keeps as they are: the
    signature is still the rule's, field by field (a layer it carries by that layer's signature,
    the kernels and operators by identity), also where a number's type is a subclass of one it
    keeps (a numpy float)."""
    import numpy as np

    from parsim.model.graph import _TWIN_FIELDS, _field_key

    spec, cluster, _, prices = run
    layers = list(_graph(spec, cluster, prices, recompute).layers)
    layers.append(replace(layers[-1], fwd_flops=np.float64(layers[-1].fwd_flops)))
    for layer in layers:
        assert twin_signature(layer) == tuple(_field_key(getattr(layer, name)) for name in _TWIN_FIELDS)
    if recompute is Recompute.DEEPSEEK:          # a layer carried (the recomputed part) is among them
        assert any(layer.recompute_part is not None for layer in layers)
