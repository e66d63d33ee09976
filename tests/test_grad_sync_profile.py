"""The gradient all-reduce measured under the model's own backward by the concurrent profilers
(parsim.profile.grad_sync), and the simulator pricing the data-parallel buckets from it."""

import json
from dataclasses import replace

import pytest
import torch
from torch import nn

from parsim.cli import main
from parsim.cost.comm import collective_time_s
from parsim.cost.compute import AnalyticalCompute, FsdpSync, GradSync, ProfiledCompute, load_profile_table
from parsim.errors import InputError
from parsim.exec.grad_sync import GradBuckets
from parsim.hardware import load_cluster
from parsim.model.spec import load_model
from parsim.plan import ParallelConfig
from parsim.profile.grad_sync import choose_size, grad_sync_cost, summarize, summarize_fsdp
from parsim.sim import simulate
from parsim.sim.simulate import fsdp_sync_overlap, grad_sync_overlap

GPT = "examples/gpt_tiny_local.yaml"


def test_cost_is_what_the_all_reduces_add_per_second_alone():
    assert grad_sync_cost(0.100, 0.040, 0.140) == pytest.approx(1.0)     # as if run after the backward
    assert grad_sync_cost(0.100, 0.040, 0.100) == 0.0                     # hidden
    assert grad_sync_cost(0.100, 0.040, 0.160) == pytest.approx(1.5)     # and slowing the backward
    assert grad_sync_cost(0.100, 0.040, 0.090) == 0.0                     # noise below the backward
    entry = summarize([(0.10, 0.04, 0.14), (0.12, 0.05, 0.15), (0.11, 0.04, 0.17)], 16, 2, [8, 4])
    assert entry["backward_s"] == 0.11 and entry["all_reduce_s"] == 0.04 and entry["both_s"] == 0.15
    assert entry["cost"] == pytest.approx(1.0)
    assert entry["cost_min"] == pytest.approx(0.6) and entry["cost_max"] == pytest.approx(1.5)


def test_the_size_is_the_smallest_whose_backward_covers_the_all_reduce():
    backward = {2: 0.05, 4: 0.10, 8: 0.20, 16: 0.40}
    assert choose_size([2, 4, 8, 16], backward, 0.03) == 4        # 0.10 >= 3 x 0.03
    assert choose_size([2, 4, 8, 16], backward, 0.06) == 8
    assert choose_size([2, 4, 8, 16], backward, 1.00) == 16       # none covers it: the largest


def test_unsynced_backward_starts_no_bucket(monkeypatch):
    started = []
    monkeypatch.setattr(GradBuckets, "_start", lambda self, k: started.append(k))
    stage = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    buckets = GradBuckets(stage, None, 2, 1)
    with buckets.unsynced():
        stage(torch.ones(3, 4)).sum().backward()
    assert started == []
    stage(torch.ones(3, 4)).sum().backward()                       # the hooks count from zero again
    assert started == list(range(len(buckets.flat)))


def test_fsdp_sync_is_what_zero2_adds_to_the_plain_backward():
    entry = summarize_fsdp([(0.10, 0.15), (0.12, 0.14), (0.11, 0.19)], 8, 2, [400, 300])
    assert entry["backward_s"] == 0.11 and entry["fsdp_backward_s"] == 0.15
    assert entry["added_s"] == pytest.approx(0.04)
    assert entry["added_min_s"] == pytest.approx(0.02) and entry["added_max_s"] == pytest.approx(0.08)
    assert summarize_fsdp([(0.10, 0.09)], 8, 2, [400])["added_s"] == 0.0        # noise below the plain backward


def test_the_same_workload_terms_split_what_was_measured_into_overlap_and_contention():
    """Diagnostic only: overlap stays in [0, 1]; what costs more than the collective priced alone
    is contention, its own term (it used to read as a negative overlap)."""
    sync = FsdpSync(2, 8, (400, 300), 0.030)
    assert sync.terms(0.010, 0.040) == pytest.approx((0.5, 0.0))     # 0.010 + (1 - 0.5) x 0.040 = 0.030
    assert sync.terms(0.010, 0.010) == pytest.approx((0.0, 1.0))     # 0.010 + (1 - 0 + 1) x 0.010 = 0.030
    assert sync.terms(0.050, 0.040) == (1.0, 0.0)                    # the host time alone is more: hidden
    assert GradSync(2, 4, (1,), 0.015, 0.01).terms(0.010) == pytest.approx((0.0, 0.5))


def _table(tmp_path, sync: dict | None, fsdp: dict | None = None):
    """A profile of the tiny GPT with made-up times (the simulator's arithmetic is under test)."""
    spec = load_model(GPT)
    doc = {"schema_version": 1, "kind": "layer-profile", "model": spec.name, "dtype": "fp32",
           "microbatch_sizes": [2, 4],
           "layers": [{"name": n, "fwd_s": [0.002, 0.004], "bwd_s": [0.004, 0.008]} for n in spec.graph.names]}
    if sync is not None:
        doc["grad_sync"] = sync
    if fsdp is not None:
        doc["fsdp_sync"] = fsdp
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    return load_profile_table(str(path))


def test_a_measured_grad_sync_prices_nothing_it_is_a_diagnostic(tmp_path):
    """No plan is priced from its own workload: a profile's grad_sync entry (the buckets under the
    model's own backward) leaves every step as it is; its terms are reported beside the price."""
    spec = load_model(GPT)
    cluster = load_cluster("local-cpu:1x2")
    buckets = [400_000, 300_000]
    sync = {"microbatch_size": 4, "dp": 2, "bucket_bytes": buckets, "backward_s": 0.10, "all_reduce_s": 0.01,
            "both_s": 0.115, "cost": 1.5, "cost_min": 1.2, "cost_max": 1.8, "repeats": 5}
    fallback = AnalyticalCompute(cluster.device)
    with_sync = ProfiledCompute(_table(tmp_path, sync), fallback)
    without = ProfiledCompute(replace(with_sync.table, grad_sync=None), fallback)
    assert with_sync.grad_sync == GradSync(2, 4, tuple(buckets), pytest.approx(0.015), 0.01)
    cfg = ParallelConfig(2, 1, 1, "1f1b", 1, (0, len(spec.graph)))
    for plan in (cfg, replace(cfg, zero=2)):
        assert simulate(spec.graph, spec.training, cluster, plan, with_sync, keep_timeline=False).step_time_s == \
            simulate(spec.graph, spec.training, cluster, plan, without, keep_timeline=False).step_time_s
    priced = sum(collective_time_s(cluster, cfg.grad_group(0), x, "all_reduce") for x in buckets)
    overlap, contention = grad_sync_overlap(with_sync.grad_sync, cluster, cfg.grad_group(0), "auto")
    assert 0 <= overlap <= 1 and contention >= 0
    assert priced * (1 - overlap + contention) == pytest.approx(0.015)       # the terms reproduce the measurement


FSDP = {"microbatch_size": 4, "dp": 2, "reduce_scatter_bytes": [400_000, 300_000], "backward_s": 0.10,
        "fsdp_backward_s": 0.13, "added_s": 0.03, "added_min_s": 0.02, "added_max_s": 0.04, "repeats": 5}


def test_a_measured_fsdp_sync_prices_nothing_it_is_a_diagnostic(tmp_path):
    """ZeRO-2's reduce-scatters under the model's own backward: reported, never priced."""
    spec = load_model(GPT)
    cluster = load_cluster("local-cpu:1x2")
    fallback = AnalyticalCompute(cluster.device)
    cfg = ParallelConfig(2, 1, 2, "1f1b", 1, (0, len(spec.graph)), zero=2)
    overlap, contention = fsdp_sync_overlap(FsdpSync(2, 4, (400_000, 300_000), 0.03), cluster, cfg.grad_group(0),
                                            "auto")
    assert overlap == 0.0 and contention > 0           # 30 ms for 0.7 MB: more than priced alone
    high = ProfiledCompute(_table(tmp_path, None, FSDP), fallback)
    without = ProfiledCompute(replace(high.table, fsdp_sync=None), fallback)
    for plan in (cfg, replace(cfg, zero=0), replace(cfg, zero=1)):
        assert simulate(spec.graph, spec.training, cluster, plan, high, keep_timeline=False).step_time_s == \
            simulate(spec.graph, spec.training, cluster, plan, without, keep_timeline=False).step_time_s


def test_a_bad_fsdp_sync_entry_names_the_field(tmp_path):
    with pytest.raises(InputError, match=r"fsdp_sync\.added_s"):
        _table(tmp_path, None, {**FSDP, "added_s": -0.01})
    with pytest.raises(InputError, match=r"fsdp_sync\.reduce_scatter_bytes"):
        _table(tmp_path, None, {**FSDP, "reduce_scatter_bytes": [0]})


def test_a_bad_grad_sync_entry_names_the_field(tmp_path):
    sync = {"microbatch_size": 3, "dp": 2, "bucket_bytes": [10], "backward_s": 0.1, "all_reduce_s": 0.01,
            "both_s": 0.12}
    with pytest.raises(InputError, match=r"grad_sync\.microbatch_size"):
        _table(tmp_path, sync)
    with pytest.raises(InputError, match=r"grad_sync\.bucket_bytes"):
        _table(tmp_path, {**sync, "microbatch_size": 4, "bucket_bytes": []})


def test_concurrent_profilers_measure_the_executors_buckets_under_the_backward(tmp_path):
    """`parsim profile --nproc 2` records the all-reduce under the backward, on the executor's
    buckets: the same bytes the simulator prices for a dp=2 plan of the whole model."""
    out = tmp_path / "p.json"
    assert main(["profile", GPT, "--microbatch-sizes", "1,2", "--repeats", "2", "--nproc", "2",
                 "-o", str(out), "--json"]) == 0
    table = load_profile_table(str(out))
    sync = table.grad_sync
    assert sync is not None and sync.dp == 2 and sync.microbatch_size in (1, 2)
    raw = json.loads(out.read_text())["grad_sync"]
    assert raw["backward_s"] > 0 and raw["all_reduce_s"] > 0 and raw["cost_min"] <= raw["cost"] <= raw["cost_max"]
    spec = load_model(GPT)
    cfg = ParallelConfig(2, 1, 1, "1f1b", 1, (0, len(spec.graph)))
    est = simulate(spec.graph, spec.training, load_cluster("local-cpu:1x2"), cfg, keep_timeline=False)
    assert list(sync.bucket_bytes) == [int(x) for x in est.grad_buckets_bytes[0]]
    # ... and ZeRO-2's reduce-scatters as FSDP2 issued them: those the simulator prices for the plan
    fsdp = table.fsdp_sync
    assert fsdp is not None and fsdp.dp == 2 and fsdp.microbatch_size == sync.microbatch_size
    est = simulate(spec.graph, spec.training, load_cluster("local-cpu:1x2"), replace(cfg, zero=2), keep_timeline=False)
    assert sorted(fsdp.reduce_scatter_bytes) == sorted(int(x) for op, x in est.sharded_collectives[0]
                                                       if op == "reduce_scatter")
