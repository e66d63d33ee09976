"""One dependency rule: the simulator's event engine waits for what parsim.schedule.deps says an
action waits for, and for nothing else, over every schedule kind and a grid of (pipeline ranks,
micro-batches, chunks), lowered with gradient buckets and a tied weight's reduction."""

import itertools

import pytest

from parsim.errors import InfeasibleError
from parsim.schedule import build_schedule, lower
from parsim.schedule.actions import Kind
from parsim.schedule.deps import dependencies
from parsim.schedule.generators import SCHEDULES, check_feasible
from parsim.sim import engine

BUCKETS = 2


def _tied_stages(pp: int, stages: int, tied: bool) -> tuple[int, ...]:
    """The first and last stage share a weight (the GPT's embedding), reduced between their ranks
    (parsim.sim.simulate.tied_reductions: only where they sit on different ranks)."""
    return (0, stages - 1) if tied and pp > 1 else ()


def _lowered(name, pp, m, v, tied: bool):
    schedule = build_schedule(name, pp, m, v)
    return lower(schedule, {s: BUCKETS for s in range(schedule.num_stages)},
                 _tied_stages(pp, schedule.num_stages, tied))


def _grid():
    for name, pp, m, v, tied in itertools.product(sorted(SCHEDULES), (1, 2, 3, 4), (1, 2, 3, 4, 6, 8), (1, 2, 3),
                                                  (False, True)):
        if (v > 1) != (name == "interleaved") or (tied and pp == 1):
            continue
        try:
            check_feasible(name, pp, m, v)
        except InfeasibleError:
            continue
        yield name, pp, m, v, tied


GRID = list(_grid())


def _costs(lowered, transfer_s=0.003, tied: bool = False) -> engine.Costs:
    """Unequal prices per stage and kind, so that an action that started before what it waits for
    would show in the times."""
    S = lowered.num_stages
    compute = {(s, k): 0.01 * (1 + s % 3) * (2 if k in (Kind.B, Kind.I) else 1)
               for s in range(S) for k in (Kind.F, Kind.B, Kind.I, Kind.W, Kind.OPTIMIZER)}
    transfer = {(s, k): transfer_s for s in range(S) for k in (Kind.SEND_F, Kind.SEND_B)}
    bucket = {(s, b): (0.5 + 0.5 * b / BUCKETS, 0.004) for s in range(S) for b in range(BUCKETS)}
    tied_s = {s: ("embedding", 0.002) for s in _tied_stages(lowered.num_ranks, S, tied)}
    return engine.Costs(compute, transfer, bucket, tied=tied_s, overlap=0.5)


@pytest.mark.parametrize("name,pp,m,v,tied", GRID)
def test_the_engine_waits_for_what_deps_says(name, pp, m, v, tied):
    """engine.waits(schedule) is, action for action, parsim.schedule.deps.dependencies of the
    lowered schedule; and in the timed run every action starts only once each of them is done
    (a RECV's send arrived, a bucket's backward started, an optimizer's buckets finished)."""
    lowered = _lowered(name, pp, m, v, tied)
    split = lowered.split_backward
    tied_stages = set(_tied_stages(pp, lowered.num_stages, tied))
    expected = [[dependencies(a, lowered.num_stages, lowered.rank_of, lowered=True, split_backward=split,
                              last_microbatch=m - 1, buckets=BUCKETS, tied=a.stage in tied_stages)
                 for a in lowered.actions(r)] for r in range(lowered.num_ranks)]
    got = engine.waits(lowered)
    assert [[list(d) for d in row] for row in got] == expected

    tl = engine.run(lowered, _costs(lowered, tied=tied))
    start, end = {}, {}
    for r, a, stream, s0, s1 in tl.records:
        if stream in (engine.COMPUTE, engine.P2P) or a.kind in (Kind.REDUCE_GRAD, Kind.REDUCE_TIED):
            start[a], end[a] = s0, s1
    waits_of = {a: deps for r in range(lowered.num_ranks) for a, deps in zip(lowered.actions(r), got[r])}
    checked = 0
    for a, deps in waits_of.items():
        for d in deps:
            if d.kind in (Kind.RECV_F, Kind.RECV_B):          # a RECV's result: its send's arrival
                d, = waits_of[d]
            if a.kind is Kind.REDUCE_GRAD:                    # ready part-way through its backward
                assert start[a] >= start[d], (a, d)
            elif a in start and d in end:
                assert start[a] >= end[d] - 1e-12, (a, d)
                checked += 1
    assert checked > 0


@pytest.mark.parametrize("name,pp,m,v", [("1f1b", 4, 8, 1), ("gpipe", 3, 4, 1), ("zbh1", 3, 6, 1)])
def test_the_engine_reads_its_waits_from_deps(monkeypatch, name, pp, m, v):
    """A change to the rule changes the engine: with each RECV_F made to wait for the send of
    micro-batch 0 (which arrives first) instead of its own, receiving ranks start before their data
    and the step changes; the engine keeps no second copy of the rule that would have kept it."""
    lowered = _lowered(name, pp, m, v, tied=False)
    costs = _costs(lowered, transfer_s=0.2)            # transfers that bind: the receiver waits on them
    honest = engine.run(lowered, costs).end_s

    def too_early(a, *args, **kwargs):
        deps = dependencies(a, *args, **kwargs)
        return [d._replace(microbatch=0) for d in deps] if a.kind is Kind.RECV_F else deps
    monkeypatch.setattr(engine, "dependencies", too_early)
    assert engine.run(lowered, costs).end_s != honest
