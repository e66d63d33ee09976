"""A validation set frozen in a file (results/heldout/*.yaml): its models, and per model the plans
``parsim validate --set FILE`` runs beside the planner's pick.

    schema_version: 1
    name: heldout-2026-11-27            # the folder its results go to (parsim.report.accuracy)
    date: 2026-11-27                    # chosen, and committed, before any run
    rule: "..."                         # when the set stops being held out
    models:
      - model: results/heldout/models/vit_tiny_cifar.yaml
        plans:
          - {label: dp2, dp: 2}                                   # defaults: dp 1, pp 1, m 1, 1f1b
          - {label: pp2-gpipe-m4, pp: 2, microbatches: 4, schedule: gpipe}
          - {label: dp2-ep2, dp: 2, ep: 2}                        # MoE models: experts split over ep of the dp ranks

A plan's micro-batch size is global batch / (dp x microbatches); ``parsim validate`` profiles
exactly those sizes.  Model paths are relative to the repository root (where parsim runs).
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

from parsim.errors import InputError
from parsim.inputs import Fields, load_file

SCHEDULES = ("gpipe", "1f1b", "interleaved", "zbh1")


@dataclass(frozen=True)
class SetPlan:
    label: str
    dp: int = 1
    pp: int = 1
    microbatches: int = 1
    schedule: str = "1f1b"
    ep: int = 1                      # expert parallelism (MoE models): a divisor of dp

    def shape(self) -> tuple[str, int, int, int, str, int, int, int, int]:
        """validation._fixed_shapes' row: (label, dp, pp, m, schedule, tp, cp, zero, ep)."""
        return (self.label, self.dp, self.pp, self.microbatches, self.schedule, 1, 1, 0, self.ep)


@dataclass(frozen=True)
class PlanSet:
    path: str
    name: str
    date: str
    rule: str
    models: tuple[tuple[str, tuple[SetPlan, ...]], ...]     # (model path, its plans)

    def plans_for(self, model_path: str) -> tuple[SetPlan, ...]:
        want = os.path.realpath(model_path)
        for path, plans in self.models:
            if os.path.realpath(path) == want:
                return plans
        raise InputError(f"{self.path}: models: no entry for {model_path}; the set's models are "
                         + ", ".join(p for p, _ in self.models))


def is_set_file(which: str) -> bool:
    return which.endswith((".yaml", ".yml"))


def load_plan_set(path: str) -> PlanSet:
    r = Fields(load_file(path, "a validation set (results/heldout/*.yaml)"), path)
    r.schema_version(1)
    name, date, rule = r.get("name", str), str(r.get("date", (str, datetime.date))), r.get("rule", str)
    models = []
    entries = r.get("models", list)
    if not entries:
        raise r.fail("models", "empty; list at least one {model: <model.yaml>, plans: [...]}")
    for i, entry in enumerate(entries):
        e = Fields(entry, path, f"models[{i}].")
        model = e.get("model", str)
        plans = []
        for j, p in enumerate(e.get("plans", list)):
            f = Fields(p, path, f"models[{i}].plans[{j}].")
            plans.append(SetPlan(f.get("label", str), f.positive_int("dp", 1), f.positive_int("pp", 1),
                                 f.positive_int("microbatches", 1), f.choice("schedule", SCHEDULES, "1f1b"),
                                 f.positive_int("ep", 1)))
            if plans[-1].dp % plans[-1].ep:
                raise f.fail("ep", f"{plans[-1].ep} does not divide dp {plans[-1].dp} (ep is carved from the "
                                   "data-parallel ranks); choose a divisor of dp")
            f.done()
        labels = [p.label for p in plans]
        if len(set(labels)) != len(labels) or "planner" in labels:
            raise e.fail("plans", f"labels must be unique and not 'planner' (the pick's own); got {labels}")
        e.done()
        models.append((model, tuple(plans)))
    r.done()
    return PlanSet(path, name, date, rule, tuple(models))
