"""A long step from a few short ones (parsim.sim.steady): where simulate() extrapolates a step
from its steady state, every number of the Estimate equals the whole event run's, to a relative
1e-9, over the schedule kinds and what runs beside the pipeline (gradient buckets, ZeRO-2's
per-micro-batch reduce-scatters, a tied weight's reduction, a busy sender's delayed transfers,
expert parallelism's paired all-to-alls).  A test of equality, not of time: the time is
benchmarks/bench_simulator.py's."""

import math

import pytest

from parsim.hardware import load_cluster
from parsim.model.graph import Layer, LayerGraph
from parsim.model.spec import Training, load_model
from parsim.plan import ParallelConfig
from parsim.sim import simulate, steady

REL = 1e-9


def _uneven(stages: int) -> LayerGraph:
    """Stages of unequal compute, so that one of them sets the steady state's pace."""
    return LayerGraph("uneven", tuple(Layer(f"l{i}", 1e12 * (1 + i % 3), 2e12 * (1 + i % 3), 10_000_000, 40_000_000,
                                            1e6, 1e7) for i in range(stages)))


def _both(monkeypatch, graph, training, cluster, cfg, **kw):
    """(extrapolated, whole) Estimates of cfg; the first must have come from the steady state."""
    used = []
    real = steady.run

    def spy(*a, **k):
        tl = real(*a, **k)
        used.append(tl is not None)
        return tl
    monkeypatch.setattr(steady, "run", spy)
    monkeypatch.setattr(steady, "FROM_ACTIONS", 0)
    fast = simulate(graph, training, cluster, cfg, keep_timeline=False, **kw)
    assert used == [True], "the steady state was not found"
    monkeypatch.setattr(steady, "FROM_ACTIONS", math.inf)
    whole = simulate(graph, training, cluster, cfg, keep_timeline=False, **kw)
    return fast, whole


def _same(fast, whole):
    assert fast.step_time_s == pytest.approx(whole.step_time_s, rel=REL)
    assert fast.comm_bytes == whole.comm_bytes
    for a, b in zip(fast.ranks, whole.ranks):
        for field in ("busy_s", "bubble_s", "sync_wait_s", "exposed_comm_s", "input_s", "ep_comm_s"):
            assert getattr(a, field) == pytest.approx(getattr(b, field), rel=REL, abs=1e-12), field
        assert a.memory.total_bytes == pytest.approx(b.memory.total_bytes, rel=REL)
        assert a.max_inflight_microbatches == b.max_inflight_microbatches


@pytest.mark.parametrize("schedule,pp,m,v,dp", [("1f1b", 4, 64, 1, 2), ("gpipe", 3, 48, 1, 1),
                                                ("interleaved", 2, 64, 2, 2), ("zbh1", 4, 64, 1, 2),
                                                ("1f1b", 8, 96, 1, 1)])
def test_a_steady_step_equals_the_whole_run(monkeypatch, schedule, pp, m, v, dp):
    graph = _uneven(pp * v * 2)
    cluster = load_cluster("dgx-a100:4x8")
    cfg = ParallelConfig(dp=dp, pp=pp, microbatches=m, schedule=schedule, chunks=v,
                         bounds=tuple(range(0, pp * v * 2 + 1, 2)))
    _same(*_both(monkeypatch, graph, Training(global_batch_size=m * dp), cluster, cfg))


def test_zero2_reduce_scatters_every_microbatch_and_a_busy_sender(monkeypatch):
    """ZeRO-2 (a reduce-scatter after every micro-batch's backward, on the dp stream), and gloo's
    busy sender on local-cpu (transfers decided by what the sender does next)."""
    graph = _uneven(4)
    zero2 = ParallelConfig(dp=2, pp=1, microbatches=64, schedule="1f1b", bounds=(0, 4), zero=2)
    _same(*_both(monkeypatch, graph, Training(global_batch_size=128), load_cluster("dgx-a100:1x8"), zero2))
    local = load_cluster("local-cpu:1x2")
    assert local.profile.collectives.busy_sender_delay_s > 0
    piped = ParallelConfig(dp=1, pp=2, microbatches=48, schedule="1f1b", bounds=(0, 2, 4))
    _same(*_both(monkeypatch, graph, Training(global_batch_size=48), local, piped))


def test_a_tied_weight_and_expert_parallel_pairs(monkeypatch):
    """The GPT's embedding tied over the first and last stage (REDUCE_TIED, a collective that waits
    for its partner), and a mixture of experts under ep with its all-to-alls paired (ep_overlap)."""
    gpt = load_model("examples/gpt_tiny_local.yaml")
    cfg = ParallelConfig(dp=1, pp=2, microbatches=40, schedule="1f1b",
                         bounds=(0, len(gpt.graph) // 2, len(gpt.graph)))
    training = Training(global_batch_size=40, dtype=gpt.training.dtype, optimizer=gpt.training.optimizer)
    fast, whole = _both(monkeypatch, gpt.graph, training, load_cluster("dgx-a100:1x8"), cfg)
    _same(fast, whole)
    assert fast.tied_grad_bytes
    moe = load_model("examples/moe_tiny_local.yaml")
    ep = ParallelConfig(dp=2, pp=2, microbatches=32, schedule="1f1b", bounds=(0, len(moe.graph) // 2, len(moe.graph)),
                        ep=2, ep_overlap=True)
    training = Training(global_batch_size=64, dtype="bf16", optimizer=moe.training.optimizer)
    fast, whole = _both(monkeypatch, moe.graph, training, load_cluster("dgx-h100:1x8"), ep)
    _same(fast, whole)
    assert any(r.ep_comm_s for r in fast.ranks)


def test_short_steps_and_timelines_run_whole(monkeypatch):
    """Below FROM_ACTIONS, or with the timeline kept, the engine runs every micro-batch."""
    calls = []
    monkeypatch.setattr(steady, "run", lambda *a, **k: calls.append(1))
    graph = _uneven(4)
    cfg = ParallelConfig(dp=1, pp=2, microbatches=64, schedule="1f1b", bounds=(0, 2, 4))
    simulate(graph, Training(global_batch_size=64), load_cluster("dgx-a100:1x8"), cfg, keep_timeline=False)
    monkeypatch.setattr(steady, "FROM_ACTIONS", 0)
    simulate(graph, Training(global_batch_size=64), load_cluster("dgx-a100:1x8"), cfg, keep_timeline=True)
    assert calls == []
