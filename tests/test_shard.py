"""Layouts, shard strategies and redistribution: pure algebra, Megatron's formulas, pricing."""

import pytest

from parsim.errors import InfeasibleError
from parsim.hardware import load_cluster
from parsim.shard.layout import Layout
from parsim.cost.layer import redistribution_time_s as step_time_s
from parsim.shard.redistribute import edge, redistribute
from parsim.shard.strategy import conv2d, elementwise, layer_norm, matmul


def test_layout_validity_normalization_and_placements_round_trip():
    lay = Layout((2, 1, 2), (2, 0), (8, 16))
    assert lay.local_shape() == (4, 8)
    norm = lay.normalized()
    assert norm.device_matrix == (2, 2) and norm.tensor_map == (1, 0)
    assert norm.placements() == [("S", 0), ("S", 1)]
    assert Layout.from_placements([("S", 0), ("P",)], (2, 2), (8, 16)) == Layout((2, 2), (1, -1), (8, 16), {0})
    with pytest.raises(InfeasibleError, match="does not split into 3"):
        Layout((3,), (0, -1), (8, 16))
    with pytest.raises(InfeasibleError, match="two tensor dimensions"):
        Layout((2, 2), (0, 0), (8, 16))


def test_strategy_errors_say_which_dimension_and_what_would():
    with pytest.raises(InfeasibleError, match=r"input 1 dimension 1 has size 10.*one of \[1, 2, 5, 10\]"):
        matmul((8, 16), (16, 10), ((1, 1), (1, 4)), 4)
    with pytest.raises(InfeasibleError, match="contracted dimension is split 2 ways in X but 4"):
        matmul((8, 16), (16, 16), ((1, 2), (4, 1)), 8)
    with pytest.raises(InfeasibleError, match="spatial"):
        conv2d((4, 8, 16, 16), (8, 8, 3, 3), (4, 8, 16, 16), ((1, 1, 2, 1), (1, 1, 1, 1)), 2)


def test_matmul_derivation_and_mirror():
    op = matmul((8, 16), (16, 32), ((2, 2), (2, 2)), 8)
    assert op.device_matrix == (2, 2, 2)
    assert op.output.partial == {1}                 # split contraction: forward AllReduce to complete
    assert op.input_grads[0].partial == {0}         # dX = dY W^T sums over W's column split
    assert op.mirrors == [(1, op.input_grads[1])] and op.input_grads[1].partial == {2}   # dW sums over batch
    dp = matmul((8, 16), (16, 32), ((8, 1), (1, 1)), 8)     # data parallel: only the mirror
    assert not dp.output.partial and not dp.input_grads[0].partial and dp.mirrors


def test_repeated_devices_hold_the_same_slices():
    op = matmul((8, 16), (16, 16), ((1, 1), (1, 2)), 8)
    assert op.device_matrix == (4, 1, 1, 2) and not op.mirrors


def test_redistribution_steps():
    base = dict(device_matrix=(4,), shape=(8, 16))
    rows, cols, rep = Layout(tensor_map=(0, -1), **base), Layout(tensor_map=(-1, 0), **base), Layout(tensor_map=(-1, -1), **base)
    partial = Layout(tensor_map=(-1, -1), partial={0}, **base)
    kinds = lambda a, b: [s.kind for s in redistribute(a, b)]  # noqa: E731
    assert kinds(rows, rep) == ["AllGather"] and kinds(rep, rows) == ["Split"]
    assert kinds(cols, rows) == ["AllToAll"] and kinds(rows, rows) == []
    assert kinds(partial, rep) == ["AllReduce"] and kinds(partial, rows) == ["ReduceScatter"]
    # backward pairs: AllGather <-> ReduceScatter, AllReduce <-> identity
    f, b = edge(rows, rep, partial)
    assert [s.kind for s in f] == ["AllGather"] and [s.kind for s in b] == ["ReduceScatter"]
    f, b = edge(partial, rep, rep)
    assert [s.kind for s in f] == ["AllReduce"] and b == []


def _transformer_layer_comm(b, s, h, tp, sequence_parallel):
    """Megatron's tensor-parallel layer: attention (QKV colwise, proj rowwise) and MLP (fc1 colwise,
    fc2 rowwise), each entered from and left to the residual stream."""
    T = b * s
    qkv = matmul((T, h), (h, 3 * h), ((1, 1), (1, tp)), tp)
    proj = matmul((T, h), (h, h), ((1, tp), (tp, 1)), tp)
    fc1 = matmul((T, h), (h, 4 * h), ((1, 1), (1, tp)), tp)
    fc2 = matmul((T, 4 * h), (4 * h, h), ((1, tp), (tp, 1)), tp)
    resid = Layout(qkv.device_matrix, (0, -1) if sequence_parallel else (-1, -1), (T, h))
    fwd, bwd = [], []
    for first, last in ((qkv, proj), (fc1, fc2)):
        for prod_out, cons_in, cons_grad in ((resid, first.inputs[0], first.input_grads[0]),
                                             (last.output, resid, resid)):
            f, g = edge(prod_out, cons_in, cons_grad, elem_bytes=2)
            fwd += f
            bwd += g
    return fwd, bwd


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_megatron_tensor_parallel_communication_per_layer(tp):
    b, s, h = 2, 512, 1024
    fwd, bwd = _transformer_layer_comm(b, s, h, tp, sequence_parallel=False)
    # Narayanan et al. 2021 / Korthikanti et al. 2022: 2 all-reduces of b*s*h forward and 2 backward
    assert [x.kind for x in fwd] == ["AllReduce"] * 2 and [x.kind for x in bwd] == ["AllReduce"] * 2
    assert all(x.bytes_per_device == b * s * h * 2 for x in fwd + bwd)
    fwd, bwd = _transformer_layer_comm(b, s, h, tp, sequence_parallel=True)
    # with sequence parallelism: all-gathers plus reduce-scatters of the same volume
    assert sorted(x.kind for x in fwd) == ["AllGather", "AllGather", "ReduceScatter", "ReduceScatter"]
    assert sorted(x.kind for x in bwd) == ["AllGather", "AllGather", "ReduceScatter", "ReduceScatter"]
    assert all(x.bytes_per_device == b * s * h * 2 for x in fwd + bwd)


def test_steps_are_priced_on_the_cluster_link_class():
    rows = Layout((8,), (0, -1), (1024, 1024))
    rep = Layout((8,), (-1, -1), (1024, 1024))
    step = redistribute(rows, rep)[0]
    inside = step_time_s(step, load_cluster("dgx-a100:2x8"), (8,))
    ascend = step_time_s(step, load_cluster("ascend910:1x8"), (8,))
    assert 0 < inside < ascend                          # NVSwitch beats HCCS + PCIe
    a2a = redistribute(Layout((2,), (0, -1), (1024, 1024)), Layout((2,), (-1, 0), (1024, 1024)))[0]
    gloo = load_cluster("local-cpu")
    gather_whole = step_time_s(redistribute(Layout((2,), (0, -1), (1024, 1024)),
                                            Layout((2,), (-1, -1), (1024, 1024)))[0], gloo, (2,))
    assert step_time_s(a2a, gloo, (2,)) == pytest.approx(gather_whole)   # gloo: all_gather + local chunk


def test_elementwise_and_norm_strategies():
    assert elementwise((8, 16), ((2, 2), (2, 2)), 4).output.tensor_map == (1, 0)
    with pytest.raises(InfeasibleError, match="split alike"):
        elementwise((8, 16), ((2, 2), (4, 1)), 4)
    ln = layer_norm((8, 16), ((4, 1),), 4)
    assert ln.mirrors and ln.input_grads[1].partial == {1}   # device matrix (4, 1): the 4 is dim 1
    with pytest.raises(InfeasibleError, match="reduced over"):
        layer_norm((8, 16), ((1, 4),), 4)


def test_an_all_to_all_step_is_priced_by_the_one_all_to_all_rule():
    """A redistribution's AllToAll and a MoE dispatch of the same bytes over the same ranks take
    the same time: parsim.cost.comm.all_to_all_time_s prices both (the library's bandwidth
    efficiency and per-step latency included), inside a node and across nodes."""
    from parsim.cost.comm import all_to_all_time_s
    from parsim.cost.layer import group_ranks

    a2a = redistribute(Layout((8,), (0, -1), (4096, 4096)), Layout((8,), (-1, 0), (4096, 4096)))[0]
    assert a2a.kind == "AllToAll"
    for spec, first in (("dgx-a100:1x8", 0), ("dgx-h100-superpod:2x8", 4)):     # ranks 4..11: two nodes
        cluster = load_cluster(spec)
        ranks = group_ranks((8,), a2a.device_dim, first)
        assert len({cluster.node_of(r) for r in ranks}) == (1 if first == 0 else 2)
        assert step_time_s(a2a, cluster, (8,), first) == pytest.approx(
            all_to_all_time_s(cluster, ranks, a2a.bytes_per_device))


def test_a_broadcast_input_follows_the_output_on_the_dimensions_it_shares():
    """numpy's broadcasting, aligned from the right: a norm's row statistics [b, s, 1] split with
    a sequence-split output, its weight [h] whole with its gradient summed over the split (a
    mirror), a bias [h] split with a column-split output; a shape that does not broadcast,
    whole."""
    from parsim.shard.ops import broadcast_layout

    seq = Layout((1, 2, 1), (-1, 1, -1), (2, 16, 64))
    stats, summed = broadcast_layout(seq, (2, 16, 1))
    assert stats == Layout((1, 2, 1), (-1, 1, -1), (2, 16, 1)) and summed == frozenset()
    weight, summed = broadcast_layout(seq, (64,))
    assert weight == Layout((1, 2, 1), (-1,), (64,)) and summed == frozenset({1})
    cols = Layout((2, 1), (-1, -1, 0), (2, 16, 64))
    assert broadcast_layout(cols, (64,)) == (Layout((2, 1), (0,), (64,)), frozenset())
    assert broadcast_layout(cols, (16, 1, 64))[0].tensor_map == (-1, -1, -1)


def test_a_tensor_read_through_an_unrecorded_reduction_is_redistributed_as_the_tensor():
    """An eager RMSNorm's mean reads [b, s, h] and the view records only its [b, s, 1] output:
    the consumer's layout stands for the tensor's on the kept dimensions, so a partial sum
    settled onto s/t is the same reduce-scatter its other readers need, not a gather back."""
    from parsim.shard.ops import edge_steps, expanded, reduced_from

    partial = Layout((2, 1), (-1, -1, 0), (2, 16, 64), frozenset({1}))
    rows = Layout((1, 2, 1), (-1, 1, -1), (2, 16, 1))
    assert reduced_from((2, 16, 1), (2, 16, 64)) and not reduced_from((2, 16, 64), (2, 16, 64))
    assert not reduced_from((32, 64), (2, 16, 64))
    assert expanded(rows, (2, 16, 64)) == Layout((1, 2, 1), (-1, 1, -1), (2, 16, 64))
    whole = Layout((1, 2, 1), (-1, 1, -1), (2, 16, 64))
    assert edge_steps(partial, rows, rows, 2, True) == edge_steps(partial, whole, whole, 2)
