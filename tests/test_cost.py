"""Cost model: alpha-beta collectives, DDP buckets, roofline, the profiled table."""

import math
from dataclasses import replace

import nccl_closed_form
import pytest

from parsim.cost.comm import collective_time_s, ddp_buckets, p2p_time_s
from parsim.cost.compute import AnalyticalCompute, ProfiledCompute, load_profile_table
from parsim.errors import InputError
from parsim.hardware import load_cluster
from parsim.model.graph import Layer

A100 = load_cluster("dgx-a100:4x8")


def test_ring_allreduce_matches_bus_bandwidth_factor():
    ranks = list(range(8))                      # one node, NVSwitch
    S = 1e12                                    # large enough that latency vanishes
    link = A100.link_for("group")
    coll = A100.profile.collectives
    beta = link.bandwidth_bytes_per_s * link.efficiency * coll.bandwidth_efficiency
    # the latency: NCCL's own model (dgx-a100's collective.latency_model: nccl, parsim.cost.nccl)
    assert coll.latency_model == "nccl"
    t = collective_time_s(A100, ranks, S, algorithm="ring")
    assert t == pytest.approx(nccl_closed_form.ring_s("all_reduce", 8, 1, 2.0) + 2 * 7 / 8 * S / beta)
    # nccl-tests: busbw = algbw * 2(n-1)/n, and busbw -> link bandwidth for large S
    algbw = S / t
    assert algbw * 2 * 7 / 8 == pytest.approx(beta, rel=1e-3)
    ag = collective_time_s(A100, ranks, S, op="all_gather")
    assert ag == pytest.approx(nccl_closed_form.ring_s("all_gather", 8, 1, 2.0) + 7 / 8 * S / beta)
    # without it, alpha-beta steps: the link's latency and the library's a step
    steps = replace(A100, profile=replace(A100.profile, collectives=replace(coll, latency_model="")))
    alpha = link.latency_s + coll.latency_s
    assert collective_time_s(steps, ranks, S, algorithm="ring") == pytest.approx(2 * 7 * alpha + 2 * 7 / 8 * S / beta)
    assert collective_time_s(steps, ranks, S, op="all_gather") == pytest.approx(7 * alpha + 7 / 8 * S / beta)


def test_nccl_latency_model_inside_and_between_nodes():
    """NCCL's tuning model (parsim.cost.nccl) on small messages, where it is all there is: a ring's
    steps inside a node at NVLink's hop, between nodes at the network's, the cross-node ring's
    inside steps no faster than the host posts them (AMD hosts: 6 us under Simple); a tree's
    chain inside the node and log2(nodes) hops between, twice."""
    a100 = load_cluster("dgx-a100:4x8")           # AMD EPYC hosts: net_overhead_us 2
    h100 = load_cluster("dgx-h100:4x8")           # Intel Xeon hosts: 1
    tiny = 8.0                                    # bytes: the bandwidth term is nothing
    for c, overhead in ((a100, 2.0), (h100, 1.0)):
        assert c.profile.collectives.net_overhead_s == overhead * 1e-6
        for op in ("all_gather", "reduce_scatter", "all_reduce"):
            for ranks, nodes in ((list(range(8)), 1), (list(range(32)), 4), (list(range(0, 32, 8)), 4)):
                t = collective_time_s(c, ranks, tiny, op, "ring")
                assert t == pytest.approx(nccl_closed_form.ring_s(op, len(ranks), nodes, overhead), rel=1e-3), \
                    (op, len(ranks))
        assert collective_time_s(c, list(range(32)), tiny, "all_reduce", "tree") == pytest.approx(
            nccl_closed_form.tree_s(32, 4), rel=1e-3)
    # 32 ranks on 4 nodes: 27 of the all-gather's 31 steps inside at 6 us (AMD), 3.4 us (Intel)
    assert collective_time_s(a100, list(range(32)), tiny, "all_gather") == pytest.approx(
        (8.4 + 28 * 6 + 3 * 14) * 1e-6, rel=1e-3)
    assert collective_time_s(h100, list(range(32)), tiny, "all_gather") == pytest.approx(
        (8.4 + 28 * 3.4 + 3 * 14) * 1e-6, rel=1e-3)


def test_hierarchical_wins_across_nodes_and_auto_picks_the_fastest():
    ranks = list(range(32))
    S = 1e9
    ascend = load_cluster("ascend910:4x8")             # hccl: ring, halving-doubling, hierarchical
    times = {a: collective_time_s(ascend, ranks, S, algorithm=a) for a in ("ring", "halving-doubling", "hierarchical")}
    assert times["hierarchical"] < times["ring"]
    assert collective_time_s(ascend, ranks, S) == min(times.values())
    assert collective_time_s(ascend, [3], S) == 0.0
    assert math.isinf(collective_time_s(ascend, list(range(6)), S, algorithm="halving-doubling"))


def test_auto_takes_only_what_the_library_implements():
    ranks, S = list(range(8)), 1e6                      # 8 ranks: halving-doubling would win
    ring, tree = (collective_time_s(A100, ranks, S, algorithm=a) for a in ("ring", "tree"))
    assert collective_time_s(A100, ranks, S) == min(ring, tree)    # nccl: Ring and Tree (NCCL_ALGO)
    with pytest.raises(InputError, match="nccl does not implement it; use auto or one of ring, tree"):
        collective_time_s(A100, ranks, S, algorithm="halving-doubling")
    with pytest.raises(InputError, match="hccl"):
        collective_time_s(load_cluster("ascend910:1x8"), ranks, S, algorithm="tree")
    cpu = load_cluster("local-cpu:4x2")                 # gloo has halving-doubling, and here it wins
    assert collective_time_s(cpu, ranks, S) == collective_time_s(cpu, ranks, S, algorithm="halving-doubling")


def test_p2p_uses_the_link_class_of_the_two_ranks():
    c = load_cluster("ascend910:2x8")
    S = 1e8
    assert p2p_time_s(c, 0, 1, S) < p2p_time_s(c, 3, 4, S) < p2p_time_s(c, 7, 8, S)
    assert p2p_time_s(c, 7, 8, S) == pytest.approx(10e-6 + S / 12.5e9)


def test_ddp_buckets_fill_as_torch_ddp_does():
    """torch's reducer adds a gradient, then closes the bucket once it holds at least its cap: the
    first cap 1 MiB (_DEFAULT_FIRST_BUCKET_BYTES), every later one 25 MiB (bucket_cap_mb)."""
    mib = 2**20
    assert ddp_buckets([0.5 * mib, 0.75 * mib, 10 * mib, 20 * mib, 30 * mib]) == [[0, 1], [2, 3], [4]]
    assert ddp_buckets([10 * mib, 10 * mib, 10 * mib, 30 * mib, 0, 1 * mib]) == [[0], [1, 2, 3, 4], [5]]
    # ZeRO-1's buckets (Megatron's contiguous buffer): no smaller first bucket
    assert ddp_buckets([10 * mib, 10 * mib, 10 * mib, 30 * mib, 0, 1 * mib], first_cap_bytes=25 * mib) == \
        [[0, 1, 2], [3, 4], [5]]
    assert ddp_buckets([0.5 * mib, 3 * mib, 2 * mib], alone=frozenset({1})) == [[0], [1], [2]]


def test_roofline_is_compute_bound_for_big_matmuls_and_memory_bound_for_elementwise():
    dev = A100.device
    model = AnalyticalCompute(dev, "fp16")
    big = Layer("mm", fwd_flops=2e12, bwd_flops=4e12, param_count=1, param_bytes=2, output_bytes=1, saved_bytes=1)
    assert model.layer_time_s(big, "F", 1) == pytest.approx(2e12 / (dev.peak("fp16") * dev.compute_efficiency(2e12)))
    relu = Layer("relu", 0.0, 0.0, 0, 0, 1, 1, fwd_mem_bytes=1e9)
    assert model.layer_time_s(relu, "F", 4) == pytest.approx(4e9 / dev.achieved_bandwidth_bytes_per_s())
    # a tiny matmul with big weights is bound by reading them
    skinny = Layer("gemv", 2e6, 4e6, 10**9, 2 * 10**9, 1, 1)
    assert model.layer_time_s(skinny, "F", 1) == pytest.approx(2e9 / dev.achieved_bandwidth_bytes_per_s())
    # the zero-bubble split adds up to the full backward's FLOPs
    assert model.layer_time_s(big, "I", 1) + model.layer_time_s(big, "W", 1) == pytest.approx(
        model.layer_time_s(big, "B", 1), rel=0.05)


def test_profiled_table_measures_interpolates_and_falls_back_and_says_so():
    table = load_profile_table("tests/data/profile_table.yaml")
    fallback = AnalyticalCompute(A100.device)
    model = ProfiledCompute(table, fallback)
    a = Layer("a", 1.0, 2.0, 1, 4, 1, 1)
    assert model.coverage().measured == ()
    assert model.layer_time_s(a, "F", 2) == pytest.approx(0.016)
    assert model.layer_time_s(a, "F", 3) == pytest.approx(0.023)       # linear between 2 and 4
    # outside the profiled 1..4: the fallback model, not a proportional extrapolation
    assert model.layer_time_s(a, "B", 8) == pytest.approx(fallback.layer_time_s(a, "B", 8))
    assert model.layer_time_s(a, "B", 8) != pytest.approx(0.120)
    assert model.layer_time_s(a, "I", 4) + model.layer_time_s(a, "W", 4) == pytest.approx(0.060)
    cov = model.coverage()
    assert (cov.measured, cov.interpolated, cov.fallback) == ((2, 4), (3,), (8,))
    assert "measured 2, 4; interpolated 3; by the fallback model (outside the profiled 1..4) 8" in cov.describe()
    # the record stays off equality, so two models of one table compare equal
    assert model == ProfiledCompute(table, fallback)
    assert model.optimizer_time_s(1000, 12) == pytest.approx(1e-6)
    with pytest.raises(InputError, match="no times for layer 'zzz'"):
        model.layer_time_s(Layer("zzz", 1.0, 2.0, 0, 0, 1, 1), "F", 1)


def test_profiled_table_rejects_bad_rows(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text(open("tests/data/profile_table.yaml").read().replace("[0.010, 0.016, 0.030]", "[0.010]"))
    with pytest.raises(InputError, match=r"layers\[0\].fwd_s"):
        load_profile_table(str(bad))
