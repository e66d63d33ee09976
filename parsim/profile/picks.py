"""How well parsim's out-of-sample prices choose among the ways one source ran one model on one cluster.

A planner needs its prices to order the plans it weighs, not to match each one's step: a source's own
speed (its harness, its kernels) scales all of its rows alike and leaves the order where it was.  So
among the public rows, each group of rows one source family measured for one model (shape, dtype,
global batch, a MoE row's routing) on one cluster (profile, nodes) in one metric, laid out more than one
way, is a choice a planner could have faced.  ``pick_groups`` takes parsim's pick in each (the row it prices fastest, out
of sample) and says how far the measured speed of that row falls from the group's measured fastest:

    regret = 1 - measured rate of parsim's pick / measured rate of the group's fastest row

beside what a row drawn at random would lose on average (the mean of 1 - rate / fastest over the group's
rows).  Rates are the row's metric where higher is faster (tokens, samples or TFLOP/s) and 1 / step where
it is a step time.  The activation recomputation is a choice of the plan, as the layout is, so rows that
differ in it share a group.  benchmarks/bench_published.py prints the summary; nothing is fitted to it.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass

# the training fields a planner chooses, as it chooses the layout: rows that differ only in them share a group
PLAN_FIELDS = ("recompute",)


@dataclass(frozen=True)
class PickGroup:
    family: str
    rows: tuple[str, ...]       # the group's row ids
    fastest: str                # the measured fastest
    pick: str                   # parsim's fastest, out of sample
    regret: float               # 1 - measured rate of the pick / the fastest's
    random_regret: float        # the mean over the group's rows of 1 - rate / the fastest's


def _rate(metric: str, value: float) -> float:
    return 1.0 / value if metric == "step_time_s" else value


def group_key(figure, family: str) -> str:
    """What rows of one choice share: the family, the model without the plan's own training fields, the
    routing (a MoE row's balance and capacity factor), the cluster, the metric."""
    from parsim.profile.published import _thaw

    model = _thaw(figure.model)
    training = {k: v for k, v in (model.get("training") or {}).items() if k not in PLAN_FIELDS}
    model = {**model, "training": training}
    return json.dumps([family, model, _thaw(figure.routing), figure.profile, figure.nodes, figure.devices_per_node,
                       figure.metric], sort_keys=True, default=str)


def pick_groups(rows) -> list[PickGroup]:
    """``rows``: (figure, family, measured, predicted out of sample) of every scored row, in the figure's
    metric.  The groups of two rows or more, in the order first seen."""
    groups: dict[str, list] = {}
    for figure, family, measured, predicted in rows:
        groups.setdefault(group_key(figure, family), []).append((figure, family, measured, predicted))
    out = []
    for members in groups.values():
        if len(members) < 2:
            continue
        metric = members[0][0].metric
        best = max(members, key=lambda m: _rate(metric, m[2]))
        pick = max(members, key=lambda m: _rate(metric, m[3]))
        top = _rate(metric, best[2])
        out.append(PickGroup(members[0][1], tuple(m[0].id for m in members), best[0].id, pick[0].id,
                             1 - _rate(metric, pick[2]) / top,
                             statistics.mean(1 - _rate(metric, m[2]) / top for m in members)))
    return out


def picks_text(groups: list[PickGroup], held_out=frozenset()) -> list[str]:
    """The summary lines: over every group, over the groups of the families in ``held_out`` (fitted on by no
    fold), and per family."""
    def line(label: str, gs: list[PickGroup]) -> str:
        if not gs:
            return f"{label}: no group of two rows or more"
        regrets, randoms = [g.regret for g in gs], [g.random_regret for g in gs]
        return (f"{label}: {len(gs)} groups of {sum(len(g.rows) for g in gs)} rows; parsim's pick the measured "
                f"fastest in {sum(g.pick == g.fastest for g in gs)}; its measured speed short of the fastest by "
                f"a median {statistics.median(regrets):.1%} (mean {statistics.mean(regrets):.1%}, worst "
                f"{max(regrets):.1%}), where a row at random falls short by a median "
                f"{statistics.median(randoms):.1%} (mean {statistics.mean(randoms):.1%})")
    lines = [line("every family", groups),
             line("the families fitted on by no fold", [g for g in groups if g.family in held_out])]
    for family in sorted({g.family for g in groups}):
        lines.append("  " + line(family, [g for g in groups if g.family == family]))
    return lines
