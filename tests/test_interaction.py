"""The interaction of collectives and compute (parsim.hardware.interaction), measured on
synthetic kernels by profile-comm (parsim.profile.overlap), and how the simulator prices every
model's gradient all-reduces and reduce-scatters from it: overlap in [0, 1], contention >= 0."""

import os
import tempfile
from dataclasses import replace

import pytest
import torch.multiprocessing as mp

from parsim.cost.compute import AnalyticalCompute, split_added
from parsim.errors import InputError
from parsim.hardware import load_cluster
from parsim.hardware.interaction import Interaction, interaction_at
from parsim.model.spec import load_model
from parsim.plan import ParallelConfig
from parsim.profile.overlap import overlap_terms
from parsim.sim import simulate


def test_what_a_collective_adds_splits_into_overlap_and_contention():
    assert overlap_terms(0.100, 0.040, 0.100) == (1.0, 0.0)                     # hidden
    assert overlap_terms(0.100, 0.040, 0.120) == pytest.approx((0.5, 0.0))      # half hidden
    assert overlap_terms(0.100, 0.040, 0.140) == pytest.approx((0.0, 0.0))      # as if in turn
    assert overlap_terms(0.100, 0.040, 0.160) == pytest.approx((0.0, 0.5))      # and slowing each other
    assert overlap_terms(0.100, 0.040, 0.090) == (1.0, 0.0)                     # noise below the compute
    assert split_added(0.01, 0.0) == (1.0, 0.0)


def _p(op, nbytes, fpb, overlap, contention, threads=1):
    return Interaction(op, nbytes, "gemm" if fpb > 1 else "stream", fpb, threads, overlap, contention)


TABLE = (_p("all_reduce", 1 << 20, 40.0, 0.8, 0.0), _p("all_reduce", 16 << 20, 40.0, 0.4, 0.2),
         _p("all_reduce", 1 << 20, 0.1, 0.2, 0.4), _p("all_reduce", 16 << 20, 0.1, 0.0, 1.0),
         _p("all_reduce", 1 << 20, 40.0, 0.1, 0.0, threads=4))


def test_the_table_interpolates_in_log_bytes_and_log_intensity_and_clamps():
    assert interaction_at(TABLE, "all_reduce", 1 << 20, 40.0, 1) == (0.8, 0.0)
    assert interaction_at(TABLE, "all_reduce", 4 << 20, 40.0, 1) == pytest.approx((0.6, 0.1))     # log midpoint
    assert interaction_at(TABLE, "all_reduce", 64 << 20, 40.0, 1) == pytest.approx((0.4, 0.2))    # clamped
    assert interaction_at(TABLE, "all_reduce", 1 << 20, 2.0, 1) == pytest.approx((0.5, 0.2))      # sqrt(40 x 0.1)
    assert interaction_at(TABLE, "all_reduce", 1 << 20, 40.0, 3) == (0.1, 0.0)                    # nearest threads
    assert interaction_at(TABLE, "reduce_scatter", 1 << 20, 40.0, 1) is None


def test_a_dp_plan_is_priced_from_the_table_as_one_charge_on_the_compute_stream():
    """(overlap o, contention c) from the table charges (1 - o + c) of each bucket to compute: the
    same step as a cluster without a table whose overlap is o - c; the grad_sync of a profile
    plays no part (test_grad_sync_profile)."""
    spec = load_model("examples/gpt_tiny_local.yaml")
    cluster = load_cluster("local-cpu:1x2")
    colls = cluster.profile.collectives
    flat = tuple(_p(op, n, f, 0.3, 0.5) for op in ("all_reduce", "reduce_scatter") for n in (1 << 10, 1 << 30)
                 for f in (0.01, 1e4))
    tabled = replace(cluster, profile=replace(cluster.profile, collectives=replace(colls, interaction=flat, dtypes=())))
    scalar = replace(cluster, profile=replace(cluster.profile, collectives=replace(colls, overlap=0.3 - 0.5, dtypes=())))
    compute = AnalyticalCompute(cluster.device)
    cfg = ParallelConfig(2, 1, 2, "1f1b", 1, (0, len(spec.graph)))
    got = simulate(spec.graph, spec.training, tabled, cfg, compute, keep_timeline=False).step_time_s
    want = simulate(spec.graph, spec.training, scalar, cfg, compute, keep_timeline=False).step_time_s
    plain = simulate(spec.graph, spec.training, cluster, cfg, compute, keep_timeline=False).step_time_s
    assert got == pytest.approx(want, rel=1e-12) and got > plain
    # ZeRO-2: its reduce-scatters take the table's terms (its gathers keep the cluster's overlap), so
    # the step grows with contention and shrinks with overlap
    zero2 = replace(cfg, zero=2)

    def step(o, c):
        rows = tuple(replace(p, overlap=o, contention=c) for p in flat)
        cl = replace(cluster, profile=replace(cluster.profile, collectives=replace(colls, interaction=rows, dtypes=())))
        return simulate(spec.graph, spec.training, cl, zero2, compute, keep_timeline=False).step_time_s
    assert step(1.0, 0.0) < step(0.3, 0.0) < step(0.3, 0.5)
    single = ParallelConfig(1, 1, 1, "1f1b", 1, (0, len(spec.graph)))
    assert simulate(spec.graph, spec.training, tabled, single, compute, keep_timeline=False).step_time_s == \
        simulate(spec.graph, spec.training, cluster, single, compute, keep_timeline=False).step_time_s


@pytest.mark.parametrize("row, field", [
    ("[all_reduce, 1048576, gemm, 40, 1, 1.5, 0]", "overlap in"),
    ("[all_gather, 1048576, gemm, 40, 1, 0.5, 0]", "op must be one of"),
    ("[all_reduce, 1048576, gemm, 40, 1, 0.5]", "expected [op, message_bytes"),
])
def test_a_bad_interaction_row_is_one_line(tmp_path, row, field):
    text = open("hardware_profiles/local-cpu.yaml").read()
    text = text.replace("collective: {library: gloo,", f"collective: {{interaction: [{row}], library: gloo,")
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as e:
        load_cluster(str(path))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: collective.interaction[0]:") and field in msg


def test_the_table_round_trips_through_the_profile_yaml(tmp_path):
    from parsim.hardware.collectives import collectives_flow

    cluster = load_cluster("local-cpu")
    colls = replace(cluster.profile.collectives, interaction=TABLE)
    text = open("hardware_profiles/local-cpu.yaml").read().splitlines()
    i = next(k for k, line in enumerate(text) if line.startswith("collective:"))
    text[i] = f"collective: {collectives_flow(colls)}"
    path = tmp_path / "p.yaml"
    path.write_text("\n".join(text) + "\n")
    assert load_cluster(str(path)).profile.collectives.interaction == TABLE


def _worker(rank, init, out):
    import json

    import torch
    import torch.distributed as dist

    from parsim.profile.overlap import measure_interaction
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    got = measure_interaction(rank, 2, repeats=1, sizes=(64 << 10,))
    if rank == 0:
        with open(out, "w") as f:
            json.dump([list(p.__dict__.values()) for p in got], f)
    dist.destroy_process_group()
    from parsim.exec.runtime import exit_without_teardown
    exit_without_teardown(0)            # torch's teardown after gloo can abort a finished process


def test_the_synthetic_kernels_measure_every_point_on_two_ranks():
    """Two gloo ranks, one small size, one repeat: every (op, load) point, terms in range (no
    timing is judged here)."""
    import json

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.json")
        mp.spawn(_worker, args=(f"file://{os.path.join(d, 'init')}", out), nprocs=2)
        rows = json.load(open(out))
    assert [(r[0], r[2]) for r in rows] == [(op, load) for op in ("all_reduce", "reduce_scatter", "p2p")
                                            for load in ("gemm", "stream")]
    for op, nbytes, load, fpb, threads, overlap, contention in rows:
        assert nbytes == 64 << 10 and threads == 1 and 0 <= overlap <= 1 and contention >= 0
