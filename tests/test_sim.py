"""Simulator: closed forms (bubble, activations in flight), Megatron's activation memory,
the seeds' split, communication overlap and memory accounting."""

from dataclasses import dataclass

import pytest

from parsim.cost.memory import bytes_per_param
from parsim.hardware import load_cluster
from parsim.model.graph import Layer, LayerGraph
from parsim.model.spec import Training, load_model
from parsim.plan import ParallelConfig, bounds_from_assignment
from parsim.schedule.actions import Kind
from parsim.search.partition import balanced_bounds
from parsim.sim import simulate


@dataclass(frozen=True)
class UnitCost:
    """F = 1, B = 2 (I = W = 1) per layer, free optimizer: uniform stages for closed forms."""

    def layer_time_s(self, layer, kind, microbatch):
        return {"F": 1.0, "B": 2.0, "I": 1.0, "W": 1.0}[kind]

    def optimizer_time_s(self, param_count, bytes_per_param_moved):
        return 0.0


IDEAL = load_cluster("tests/data/ideal.yaml")


def uniform_graph(n_layers=8, saved=100.0, params=10):
    return LayerGraph("uniform", tuple(Layer(f"l{i}", 1.0, 2.0, params, params * 4, 8.0, saved)
                                       for i in range(n_layers)))


def run(p, m, schedule="1f1b", v=1, dp=1, layers_per_stage=1):
    g = uniform_graph(p * v * layers_per_stage)
    cfg = ParallelConfig(dp=dp, pp=p, microbatches=m, schedule=schedule, chunks=v,
                         bounds=tuple(range(0, len(g) + 1, layers_per_stage)))
    return simulate(g, Training(global_batch_size=m * dp), IDEAL, cfg, UnitCost())


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", [(1, 1), (2, 4), (4, 4), (4, 8), (4, 16), (8, 32), (3, 7), (4, 2)])
def test_gpipe_and_1f1b_bubble_closed_form(schedule, p, m):
    if schedule == "1f1b" and m < p:
        pytest.skip("torch's Schedule1F1B needs m >= p")
    e = run(p, m, schedule)
    assert e.bubble_fraction == pytest.approx((p - 1) / (m + p - 1))
    assert e.step_time_s == pytest.approx(3 * (m + p - 1))


@pytest.mark.parametrize("p,m,v", [(2, 4, 2), (4, 8, 2), (4, 8, 4), (4, 16, 2), (2, 8, 3)])
def test_interleaved_bubble_closed_form(p, m, v):
    # each chunk is 1/v of a rank's work: (p-1)/(v m + p - 1)  (Narayanan et al. 2021, Sec. 2.2)
    e = run(p, m, "interleaved", v)
    assert e.bubble_fraction == pytest.approx((p - 1) / (v * m + p - 1))


@pytest.mark.parametrize("p,m", [(2, 4), (4, 4), (4, 8), (8, 16), (4, 2)])
def test_activations_in_flight(p, m):
    if m >= p:   # torch's Schedule1F1B needs m >= p; the min(m, p - s) form is exercised by m = p
        one = run(p, m, "1f1b")
        assert [r.max_inflight_microbatches for r in one.ranks] == [min(m, p - s) for s in range(p)]
        assert [r.memory.activations_bytes for r in one.ranks] == [min(m, p - s) * 100.0 for s in range(p)]
    gp = run(p, m, "gpipe")
    assert [r.max_inflight_microbatches for r in gp.ranks] == [m] * p


def test_zero_bubble_beats_1f1b():
    assert run(4, 8, "zbh1").bubble_fraction < run(4, 8, "1f1b").bubble_fraction


def test_megatron_activation_memory_from_extracted_gpt():
    spec = load_model("examples/gpt3_175b.yaml")
    s, h, a = 2048, 12288, 96
    per_layer = spec.graph.layers[1].saved_bytes                     # b = 1
    assert per_layer == pytest.approx(s * h * (34 + 5 * a * s / h), rel=0.05)


def test_static_memory_matches_zero_table():
    g = uniform_graph(2, params=1000)
    cfg = ParallelConfig(dp=2, pp=1, microbatches=1, bounds=(0, 2))
    e = simulate(g, Training(2, "fp16", "adam"), IDEAL, cfg, UnitCost())
    mem = e.ranks[0].memory
    assert (mem.params_bytes + mem.grads_bytes + mem.optimizer_bytes) == 16 * 2000    # ZeRO's 16 bytes/param
    assert bytes_per_param("fp32", "momentum") == {"params": 4, "grads": 4, "optimizer": 4}


def test_seeds_split_has_a_larger_bubble_than_a_balanced_split():
    spec = load_model("examples/resnet50_cifar10_seeds_split.yaml")
    cluster = load_cluster("ascend910:1x8")
    g = spec.graph
    seeds = ParallelConfig(dp=4, pp=2, microbatches=4, schedule="1f1b", bounds=bounds_from_assignment(spec.manual_stages))
    cost = [l.fwd_flops + l.bwd_flops for l in g.layers]
    balanced = ParallelConfig(dp=4, pp=2, microbatches=4, schedule="1f1b", bounds=balanced_bounds(cost, 2))
    e_seeds = simulate(g, spec.training, cluster, seeds)
    e_bal = simulate(g, spec.training, cluster, balanced)
    busy = [r.busy_s for r in e_seeds.ranks]
    assert busy[0] != pytest.approx(busy[1], rel=0.2)       # the seeds' stages are imbalanced
    assert e_seeds.bubble_fraction > e_bal.bubble_fraction
    assert e_seeds.step_time_s > e_bal.step_time_s


def test_gradient_allreduce_overlaps_the_last_backward():
    g = LayerGraph("big", tuple(Layer(f"l{i}", 1e12, 2e12, 50_000_000, 200_000_000, 1e6, 1e6) for i in range(4)))
    cluster = load_cluster("dgx-a100:1x8")
    cfg = ParallelConfig(dp=8, pp=1, microbatches=1, bounds=(0, 4))
    e = simulate(g, Training(8), cluster, cfg)
    tl = e.timeline
    last_b = next(r for r in tl.records if r[1].kind is Kind.B)
    reduces = [r for r in tl.records if r[1].kind is Kind.REDUCE_GRAD]
    assert len(reduces) > 1
    assert reduces[0][3] < last_b[4]                       # the first bucket starts before backward ends
    assert e.ranks[0].exposed_comm_s < sum(r[4] - r[3] for r in reduces)   # only the tail is exposed


def test_transfers_share_a_link():
    # 1 s of compute per action, 2 s per transfer on local-cpu's 3.5 GB/s link: the link is the
    # bottleneck, so sends from rank 0 must queue behind each other rather than overlap.
    g = LayerGraph("wide", tuple(Layer(f"l{i}", 1.0, 2.0, 0, 0, 7e9, 1.0) for i in range(2)))
    cfg = ParallelConfig(dp=1, pp=2, microbatches=4, schedule="gpipe", bounds=(0, 1, 2))
    e = simulate(g, Training(4), load_cluster("local-cpu"), cfg, UnitCost())
    recs = e.timeline.records
    f_end = {r[1].microbatch: r[4] for r in recs if r[0] == 0 and r[1].kind is Kind.F}
    sends = sorted((r[3], r[4], r[1].microbatch) for r in recs if r[1].kind is Kind.SEND_F)
    assert all(b[0] >= a[1] - 1e-9 for a, b in zip(sends, sends[1:]))       # never two at once
    assert any(start > f_end[mb] + 0.5 for start, _, mb in sends)           # some waited for the link
    assert e.step_time_s > 4 * 2.0                                           # link-bound


def test_gpt_pipeline_holds_and_reduces_a_copy_of_the_tied_embedding():
    """pp=2 puts the GPT's head, which computes its logits with the word embedding's weight, on
    the last stage: that rank holds a copy (weights, gradient and optimizer state), and the two
    copies' gradients are all-reduced between the first and last stage after the backward, both
    ranks starting it together (Megatron's embedding group).  pp=1 holds the weight once."""
    spec = load_model("examples/gpt_tiny_local.yaml")
    g, cluster = spec.graph, load_cluster("local-cpu:1x2")
    vocab, hidden = 512, 64
    per = sum(bytes_per_param("fp32", "momentum").values())
    one = simulate(g, spec.training, cluster, ParallelConfig(dp=1, pp=1, microbatches=4, bounds=(0, 6)))
    assert one.tied_grad_bytes == {} and one.ranks[0].memory.params_bytes == 4 * g.param_count
    e = simulate(g, spec.training, cluster, ParallelConfig(dp=1, pp=2, microbatches=4, bounds=(0, 3, 6)))
    first = sum(layer.param_count for layer in g.layers[:3])
    last = sum(layer.param_count for layer in g.layers[3:]) + vocab * hidden
    assert [r.memory.params_bytes + r.memory.grads_bytes + r.memory.optimizer_bytes for r in e.ranks] == \
        [first * per, last * per]
    assert e.tied_grad_bytes == {0: vocab * hidden * 4, 1: vocab * hidden * 4}
    tied = [r for r in e.timeline.records if r[1].kind is Kind.REDUCE_TIED]
    assert sorted(r[0] for r in tied) == [0, 1] and tied[0][3] == tied[1][3] > 0
    opt = {r[0]: r[3] for r in e.timeline.records if r[1].kind is Kind.OPTIMIZER}
    assert all(opt[r[0]] >= r[4] for r in tied)            # the optimizer steps the summed gradient
