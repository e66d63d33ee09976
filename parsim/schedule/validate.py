"""One validator for compute-only and lowered schedules.

Checks, each with a message that names the rank and action:
1. every stage runs F and B (or I and W) exactly once per micro-batch, on the rank that owns it;
2. every SEND has its RECV and every RECV its SEND;
3. the schedule can run: ranks execute in order, an action waits for its dependencies
   (``parsim.schedule.deps``); if no rank can move, that is a deadlock, reported with a
   step x rank grid that marks the step where it stuck.
"""

from __future__ import annotations

from collections import Counter

from parsim.schedule.actions import Action, Kind, Schedule
from parsim.schedule.deps import dependencies


class ScheduleError(ValueError):
    pass


def render_grid(columns: list[list[Action | None]], mark_step: int | None = None) -> str:
    """A step x rank text grid, ``columns[r]`` being rank r's cells; ``mark_step`` marks that row."""
    steps = max((len(c) for c in columns), default=0)
    width = max([len(str(a)) for c in columns for a in c if a is not None] + [6])
    head = "step  " + " ".join(f"{'rank ' + str(r):>{width}}" for r in range(len(columns)))
    lines = [head]
    for t in range(steps):
        cells = []
        for c in columns:
            a = c[t] if t < len(c) else None
            cells.append(f"{'' if a is None else str(a):>{width}}")
        marker = "  <-- stuck here" if t == mark_step else ""
        lines.append(f"{t:>4}  " + " ".join(cells) + marker)
    return "\n".join(lines)


def _check_counts(schedule: Schedule, lowered: bool) -> None:
    split = schedule.split_backward
    needed = (Kind.F, Kind.I, Kind.W) if split else (Kind.F, Kind.B)
    seen: Counter = Counter()
    for r, acts in enumerate(schedule.order):
        for a in acts:
            if a is None:
                continue
            if schedule.rank_of(a.stage) != r:
                raise ScheduleError(f"rank {r} runs {a}, but stage {a.stage} belongs to rank {schedule.rank_of(a.stage)}")
            if a.kind is Kind.B and split:
                raise ScheduleError(f"rank {r} mixes B ({a}) with split I/W backward")
            seen[a] += 1
    for s in range(schedule.num_stages):
        for k in needed:
            for i in range(schedule.num_microbatches):
                n = seen[Action(s, k, i)]
                if n != 1:
                    raise ScheduleError(f"{Action(s, k, i)} appears {n} times on rank {schedule.rank_of(s)}; "
                                        "each compute action must appear exactly once")
    if lowered:
        for a, n in seen.items():
            if a.kind is Kind.SEND_F and seen[Action(a.stage + 1, Kind.RECV_F, a.microbatch)] != n:
                raise ScheduleError(f"{a} on rank {schedule.rank_of(a.stage)} has no matching "
                                    f"{Action(a.stage + 1, Kind.RECV_F, a.microbatch)}")
            if a.kind is Kind.SEND_B and seen[Action(a.stage - 1, Kind.RECV_B, a.microbatch)] != n:
                raise ScheduleError(f"{a} has no matching {Action(a.stage - 1, Kind.RECV_B, a.microbatch)}")
            if a.kind is Kind.RECV_F and seen[Action(a.stage - 1, Kind.SEND_F, a.microbatch)] != n:
                raise ScheduleError(f"{a} has no matching {Action(a.stage - 1, Kind.SEND_F, a.microbatch)}")
            if a.kind is Kind.RECV_B and seen[Action(a.stage + 1, Kind.SEND_B, a.microbatch)] != n:
                raise ScheduleError(f"{a} has no matching {Action(a.stage + 1, Kind.SEND_B, a.microbatch)}")


def validate(schedule: Schedule) -> list[list[Action | None]]:
    """Validate and return the step x rank grid of a unit-time execution (one column per rank)."""
    lowered = any(a is not None and not a.kind.is_compute for acts in schedule.order for a in acts)
    _check_counts(schedule, lowered)
    split = schedule.split_backward
    buckets = Counter(a.stage for acts in schedule.order for a in acts if a is not None and a.kind is Kind.REDUCE_GRAD)
    tied = {a.stage for acts in schedule.order for a in acts if a is not None and a.kind is Kind.REDUCE_TIED}
    orders = [schedule.actions(r) for r in range(schedule.num_ranks)]
    pos = [0] * schedule.num_ranks
    done: set[Action] = set()
    grid: list[list[Action | None]] = [[] for _ in orders]
    remaining = sum(len(o) for o in orders)
    while remaining:
        ready = []
        for r, o in enumerate(orders):
            if pos[r] < len(o):
                a = o[pos[r]]
                deps = dependencies(a, schedule.num_stages, schedule.rank_of, lowered=lowered, split_backward=split,
                                    last_microbatch=schedule.num_microbatches - 1, buckets=buckets[a.stage],
                                    tied=a.stage in tied)
                if all(d in done for d in deps):
                    ready.append(r)
        if not ready:
            step = max(len(c) for c in grid)
            for r, o in enumerate(orders):
                grid[r].append(o[pos[r]] if pos[r] < len(o) else None)
            waiting = "; ".join(f"rank {r} waits at {o[pos[r]]}" for r, o in enumerate(orders) if pos[r] < len(o))
            raise ScheduleError(f"deadlock at step {step}: {waiting}\n" + render_grid(grid, step))
        for r in range(schedule.num_ranks):
            if r in ready:
                grid[r].append(orders[r][pos[r]])
            else:
                grid[r].append(None)
        for r in ready:          # commit after the step, so a step is simultaneous
            done.add(orders[r][pos[r]])
            pos[r] += 1
            remaining -= 1
    return grid
