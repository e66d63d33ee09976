"""The loss is priced: extraction records the kernels of the run's loss (parsim.model.loss: mean
cross-entropy in fp32) on the last layer's output, and the simulator runs them with the last
layer, the forward after its F and the backward before its B, on the logits the device's loss
takes.  A layer profile already times the last unit with the loss, so it adds nothing there."""

from dataclasses import replace

import pytest

from parsim.cost.compute import AnalyticalCompute, LayerTimes, ProfiledCompute, ProfileTable
from parsim.cost.layer import loss_time_s
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.plan import ParallelConfig
from parsim.shard.prepare import per_device_graph
from parsim.sim import simulate

GPT = "examples/gpt_small_local.yaml"           # fp32, s 128, vocabulary 2048
GPT_BF16 = "examples/gpt_tiny_local_bf16.yaml"


@pytest.fixture(scope="module")
def gpt():
    return load_model(GPT)


def test_extraction_records_the_runs_loss_on_the_logits(gpt):
    g = gpt.graph
    elements = g.layers[-1].output_bytes / 4             # fp32 logits per sample: s x V
    assert elements == 128 * 2048 and g.loss_logits_bytes == g.layers[-1].output_bytes
    # operand bytes per logit, as every memory-bound kernel is counted (read plus written): log_softmax
    # reads and writes the logits, nll_loss reads them; backward nll_loss writes a gradient of their
    # size (counting its input), log_softmax's backward reads two and writes one
    assert [(k.phase, k.op, round(k.bytes[1] / elements, 2)) for k in g.loss_kernels] == [
        ("F", "_log_softmax", 8.0), ("F", "nll_loss_forward", 4.0),     # and its int64 targets
        ("I", "nll_loss_backward", 8.0), ("I", "_log_softmax_backward_data", 12.0)]
    loss = g.loss_layer
    targets = 8 * 128                                      # int64, one a token: nll_loss reads them both ways
    assert loss.fwd_mem_bytes == 12 * elements + targets and loss.param_count == 0
    assert loss.bwd_mem_bytes == 20 * elements + targets


def test_a_bf16_model_casts_its_logits_up_and_the_gradient_back():
    g = load_model(GPT_BF16).graph
    ops = [(k.phase, k.op) for k in g.loss_kernels]
    assert ops[0] == ("F", "_to_copy") and ops[-1] == ("I", "_to_copy")
    elements = g.layers[-1].output_bytes / 2
    assert g.loss_kernels[0].bytes[1] == pytest.approx(6 * elements)      # 2 bytes read, 4 written


def test_a_graph_built_by_hand_prices_no_loss(gpt):
    bare = replace(gpt.graph, loss_kernels=())
    compute = AnalyticalCompute.for_training(load_cluster("local-cpu").device, gpt.training)
    assert bare.loss_layer is None and loss_time_s(compute, bare, "F", 4) == 0.0


@pytest.mark.parametrize("where, kernel_level", [("local-cpu", False), ("dgx-a100:1x1", True)])
def test_one_device_pays_the_loss_once_per_microbatch(gpt, where, kernel_level):
    """pp = 1, dp = 1: the step with the loss less the step without it is m micro-batches' loss,
    forward and backward, in closed form (the roofline and the kernel-level model)."""
    cluster = load_cluster(where)
    compute = AnalyticalCompute.for_training(cluster.device, gpt.training)
    assert compute.kernel_level is kernel_level
    L, m = len(gpt.graph), 2
    b = gpt.training.global_batch_size // m
    cfg = ParallelConfig(1, 1, m, bounds=(0, L))
    with_loss = simulate(gpt.graph, gpt.training, cluster, cfg, compute, keep_timeline=False)
    without = simulate(replace(gpt.graph, loss_kernels=()), gpt.training, cluster, cfg, compute,
                       keep_timeline=False)
    loss = loss_time_s(compute, gpt.graph, "F", b) + loss_time_s(compute, gpt.graph, "B", b)
    assert loss > 0 and loss_time_s(compute, gpt.graph, "W", b) == 0.0
    assert with_loss.step_time_s - without.step_time_s == pytest.approx(m * loss, rel=1e-9)


def test_the_loss_runs_on_the_logits_the_device_takes(gpt):
    """Split by classes over tp = 2 and taken where it lies (vocabulary-parallel), each device's
    loss is half the whole one; cut by tokens over cp = 2, half again."""
    g = gpt.graph
    tp = per_device_graph(g, 2, "megatron")
    assert tp.loss_vocab_parallel and tp.loss_gather_ways == 1
    assert tp.loss_layer.fwd_mem_bytes == pytest.approx(g.loss_layer.fwd_mem_bytes / 2, rel=1e-12)
    assert tp.loss_layer.tp_share == pytest.approx(0.5, rel=1e-12)
    cp = per_device_graph(g, cp=2)
    assert cp.loss_layer.bwd_mem_bytes == pytest.approx(g.loss_layer.bwd_mem_bytes / 2, rel=1e-12)


def test_a_layer_profile_holds_the_loss_where_it_measured_and_not_past_it(gpt):
    cluster = load_cluster("local-cpu")
    fallback = AnalyticalCompute.for_training(cluster.device, gpt.training)
    table = ProfileTable((1, 2), tuple((n, LayerTimes((1e-3, 2e-3), (2e-3, 4e-3))) for n in gpt.graph.names))
    profiled = ProfiledCompute(table, fallback)
    assert loss_time_s(profiled, gpt.graph, "F", 2) == 0.0                 # measured with the last unit
    assert loss_time_s(profiled, gpt.graph, "B", 4) == loss_time_s(fallback, gpt.graph, "B", 4) > 0
