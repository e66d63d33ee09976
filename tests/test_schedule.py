"""Schedules: torch parity, text format, lowering, validation and deadlock reports."""

import itertools
from types import SimpleNamespace

import pytest
from torch.distributed.pipelining import schedules as ts

from parsim.errors import InfeasibleError
from parsim.schedule import Action, Kind, build_schedule, lower, validate
from parsim.schedule.actions import Schedule
from parsim.schedule.validate import ScheduleError


def _torch_order(name, p, m, v):
    """torch.distributed.pipelining's own per-rank compute order, from its generator code
    (called on a stand-in for the schedule object, so no process group is needed)."""
    if name in ("gpipe", "1f1b"):
        cls = ts.ScheduleGPipe if name == "gpipe" else ts.Schedule1F1B
        order = cls._get_pipeline_order(SimpleNamespace(_num_stages=p, _n_microbatches=m))
    else:
        cls = ts.ScheduleInterleaved1F1B if name == "interleaved" else ts.ScheduleInterleavedZeroBubble
        rounds = max(1, m // p)
        fake = SimpleNamespace(n_local_stages=v, pp_group_size=p, _n_microbatches=m,
                               microbatches_per_round=m // rounds, number_of_rounds=rounds)
        order = {r: cls._calculate_single_rank_operations(fake, r) for r in range(p)}
    return {r: [str(a) for a in acts if a is not None and a.computation_type != ts.REDUCE_GRAD]
            for r, acts in order.items()}


GRID = [(name, p, m, v)
        for name, vs in (("gpipe", [1]), ("1f1b", [1]), ("interleaved", [2, 3]), ("zbh1", [1, 2]))
        for p, m, v in itertools.product([1, 2, 3, 4, 8], [1, 2, 4, 8, 12, 16], vs)
        if not (name in ("interleaved", "zbh1") and v > 1 and m % p) and not (name == "1f1b" and m < p)]


@pytest.mark.parametrize("name,p,m,v", GRID)
def test_matches_torch_pipeline_order(name, p, m, v):
    ours = build_schedule(name, p, m, v)
    theirs = _torch_order(name, p, m, v)
    if name == "1f1b":
        # torch's Schedule1F1B._get_pipeline_order is off by one on the last rank (no warm-up: it
        # prints F1, B0, F2, ...); its runtime loop runs F0, B0, F1, B1, ... which is ours.
        last = theirs.pop(p - 1)
        assert last[0] == f"{p - 1}F1" and last[-2] == f"{p - 1}F{m}"
        assert [str(a) for a in ours.actions(p - 1)] == [f"{p - 1}{k}{i}" for i in range(m) for k in "FB"]
    assert {r: [str(a) for a in ours.actions(r)] for r in theirs} == theirs
    validate(ours)
    validate(lower(ours, {s: 2 for s in range(ours.num_stages)}))


def test_action_text_round_trips_and_matches_torch_format():
    for text in ["1F3", "0B0", "2I1", "2W1", "0SEND_F2", "3RECV_B0", "1REDUCE_GRAD0", "2OPTIMIZER"]:
        assert str(Action.parse(text)) == text
    assert str(Action(2, Kind.F, 0)) == str(ts._Action(2, ts.F, 0))
    assert Action.parse("") is None
    with pytest.raises(ValueError):
        Action.parse("1X3")


def test_csv_round_trip():
    s = build_schedule("interleaved", 2, 4, 2)
    back = Schedule.from_csv(s.to_csv(), s.name, s.num_stages, s.num_microbatches)
    assert back.order == s.order


def test_lowering_adds_matched_sends_and_one_reduce_per_bucket():
    low = lower(build_schedule("1f1b", 3, 6), {0: 2, 1: 1, 2: 3})
    kinds = [a.kind for r in range(3) for a in low.actions(r)]
    assert kinds.count(Kind.SEND_F) == kinds.count(Kind.RECV_F) == 2 * 6
    assert kinds.count(Kind.SEND_B) == kinds.count(Kind.RECV_B) == 2 * 6
    assert kinds.count(Kind.REDUCE_GRAD) == 6 and kinds.count(Kind.OPTIMIZER) == 3
    last = low.actions(1)
    assert last[-1] == Action(1, Kind.OPTIMIZER)
    # the bucket reduce comes after the last backward has sent its gradient upstream
    assert last.index(Action(1, Kind.REDUCE_GRAD, 0)) > last.index(Action(1, Kind.SEND_B, 5))


def test_deadlock_is_reported_with_a_marked_grid():
    # rank 0 waits for a backward before sending the forward that produces it
    order = ((Action(0, Kind.F, 0), Action(0, Kind.B, 0)), (Action(1, Kind.F, 0), Action(1, Kind.B, 0)))
    bad = Schedule("bad", 2, 2, 1, order)
    validate(bad)  # fine before lowering
    low = lower(bad)
    swapped = list(low.order[0])
    i, j = swapped.index(Action(0, Kind.SEND_F, 0)), swapped.index(Action(0, Kind.RECV_B, 0))
    swapped[i], swapped[j] = swapped[j], swapped[i]
    broken = Schedule("bad", 2, 2, 1, (tuple(swapped), low.order[1]))
    with pytest.raises(ScheduleError) as e:
        validate(broken)
    msg = str(e.value)
    assert "deadlock" in msg and "<-- stuck here" in msg and "rank 0 waits at 0RECV_B0" in msg


def test_missing_action_is_named():
    s = build_schedule("gpipe", 2, 2)
    order = (s.order[0][:-1], s.order[1])
    with pytest.raises(ScheduleError, match="0B1 appears 0 times"):
        validate(Schedule("g", 2, 2, 2, order))


@pytest.mark.parametrize("args,words", [
    (("interleaved", 4, 6, 2), "multiple of pp"),
    (("interleaved", 4, 8, 1), "chunks >= 2"),
    (("1f1b", 4, 8, 2), "interleaved"),
    (("pipedream", 2, 2, 1), "unknown"),
    (("1f1b", 4, 2, 1), "at least pp"),
])
def test_infeasible_configurations_say_what_to_change(args, words):
    with pytest.raises(InfeasibleError, match=words):
        build_schedule(*args)


def test_tied_reduction_lowers_before_the_optimizer_and_validates():
    """REDUCE_TIED (a tied weight's gradient summed over the stages holding it) follows the dp
    buckets and precedes the optimizer; it parses back from its text."""
    lowered = lower(build_schedule("interleaved", 2, 4, 2), {0: 2, 3: 1}, tied_stages=(0, 3))
    validate(lowered)
    rank0 = [str(a) for a in lowered.actions(0)]
    assert rank0[-3:] == ["0REDUCE_TIED", "0OPTIMIZER", "2OPTIMIZER"]
    assert rank0.index("0REDUCE_GRAD1") < rank0.index("0REDUCE_TIED")
    assert [str(a) for a in lowered.actions(1)][-3:] == ["3REDUCE_TIED", "1OPTIMIZER", "3OPTIMIZER"]
    assert Action.parse("3REDUCE_TIED") == Action(3, Kind.REDUCE_TIED)


def test_a_ranks_columns_are_its_actions_by_field_without_idle_slots():
    """Schedule.columns, which the simulator reads long schedules by: rank r's actions (idle
    slots dropped), as (stages, kinds, micro-batches), on a schedule with idle slots, its lowered
    form (none) and a rank with no action."""
    order = ((Action(0, Kind.F, 0), None, Action(0, Kind.B, 0)), (None, None), (None, Action(2, Kind.F, 1)))
    sched = Schedule("toy", 3, 3, 2, order)
    assert sched.columns(0) == ((0, 0), (Kind.F, Kind.B), (0, 0))
    assert sched.columns(1) == ((), (), ())
    assert sched.columns(2) == ((2,), (Kind.F,), (1,))
    for built in (build_schedule("interleaved", 4, 8, 2), lower(build_schedule("zbh1", 4, 8), {0: 2}, (0, 3))):
        for r in range(built.num_ranks):
            acts = built.actions(r)
            assert built.columns(r) == tuple(tuple(a[i] for a in acts) for i in range(3))
