"""Actions and schedules, in torch.distributed.pipelining's text format.

An action is ``(stage, kind, microbatch)`` and prints as ``1F3`` (stage 1, forward, micro-batch 3),
``0SEND_B2``, ``3REDUCE_GRAD0`` (bucket 0), ``3REDUCE_TIED`` or ``2OPTIMIZER``; ``Action.parse`` reads it back.
A schedule maps each pipeline rank to its ordered list of actions.

Index conventions (as Megatron states its own at the top of schedules.py):
- ``p`` pipeline ranks, ``S = v * p`` stages (``v`` model chunks per rank), ``m`` micro-batches;
- stage ``s`` runs on rank ``s % p`` (the looped placement of interleaved 1F1B);
- SEND_F on stage s sends its output to stage s+1; RECV_F on stage s receives its input from s-1;
  SEND_B on stage s sends the input gradient to s-1; RECV_B on stage s receives from s+1.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple


class Kind(str, Enum):
    F = "F"                     # forward
    B = "B"                     # full backward (input and weight gradients)
    I = "I"                     # backward, input gradient only (zero-bubble split)  # noqa: E741
    W = "W"                     # backward, weight gradient only (zero-bubble split)
    SEND_F = "SEND_F"
    RECV_F = "RECV_F"
    SEND_B = "SEND_B"
    RECV_B = "RECV_B"
    REDUCE_GRAD = "REDUCE_GRAD"  # data-parallel gradient all-reduce of one bucket
    REDUCE_TIED = "REDUCE_TIED"  # a tied weight's gradient, all-reduced between the stages holding a copy
    OPTIMIZER = "OPTIMIZER"

    # Enum's own __hash__ is Python-level; the simulator keys dicts by (stage, kind) millions of
    # times, so hash as the value string does (equal members have equal values).
    __hash__ = str.__hash__

    @property
    def is_compute(self) -> bool:
        return self in COMPUTE

    @property
    def is_backward(self) -> bool:
        return self in (Kind.B, Kind.I, Kind.W)


COMPUTE = frozenset({Kind.F, Kind.B, Kind.I, Kind.W, Kind.OPTIMIZER})


def whole_backward_in_w(stage: int, split_backward: bool) -> bool:
    """Whether ``stage``'s W runs its whole backward and its I nothing: torch's first pipeline stage
    under a split backward, whose input needs no gradient (PipelineStage.backward_one_chunk skips the
    input gradient, then backward_weight_one_chunk runs the "full" backward).  The one rule the
    simulator's prices (parsim.sim.simulate) and its activation bytes (parsim.sim.memory) follow;
    the profiler times the model's first unit the same way (parsim.profile.layers)."""
    return split_backward and stage == 0


_PATTERN = re.compile(r"^(\d+)(SEND_F|RECV_F|SEND_B|RECV_B|REDUCE_GRAD|REDUCE_TIED|OPTIMIZER|F|B|I|W)(\d*)$")


class Action(NamedTuple):
    stage: int
    kind: Kind
    microbatch: int | None = None   # bucket index for REDUCE_GRAD; None for REDUCE_TIED and OPTIMIZER

    def __str__(self) -> str:
        return f"{self.stage}{self.kind.value}{'' if self.microbatch is None else self.microbatch}"

    __repr__ = __str__

    @staticmethod
    def parse(text: str) -> "Action | None":
        text = text.strip()
        if not text:
            return None
        m = _PATTERN.match(text)
        if not m:
            raise ValueError(f"not an action: {text!r} (expected e.g. 1F3, 0SEND_B2, 2OPTIMIZER)")
        return Action(int(m.group(1)), Kind(m.group(2)), int(m.group(3)) if m.group(3) else None)


@dataclass(frozen=True)
class Schedule:
    """Per-rank action lists.  ``order[r]`` is rank r's program order (None = an idle slot)."""

    name: str
    num_ranks: int
    num_stages: int
    num_microbatches: int
    order: tuple[tuple[Action | None, ...], ...]
    # True when backward is split into I and W (zero-bubble); derived from the order if not given.
    split_backward: bool = None  # type: ignore[assignment]

    def __post_init__(self):
        if self.split_backward is None:
            split = any(a is not None and a.kind is Kind.I for acts in self.order for a in acts)
            object.__setattr__(self, "split_backward", split)

    def rank_of(self, stage: int) -> int:
        return stage % self.num_ranks

    @property
    def chunks(self) -> int:
        return self.num_stages // self.num_ranks

    def actions(self, rank: int) -> list[Action]:
        return [a for a in self.order[rank] if a is not None]

    def columns(self, rank: int) -> tuple[tuple[int, ...], tuple[Kind, ...], tuple[int | None, ...]]:
        """Rank ``rank``'s actions (``actions``) as three columns: their stages, kinds and
        micro-batches, for a reader of every action of a long schedule (the simulator's waits and
        activation events: one zip, not a loop in Python, over thousands of actions)."""
        acts = self.order[rank]
        if None in acts:
            acts = [a for a in acts if a is not None]
        return tuple(zip(*acts)) if acts else ((), (), ())

    def as_dict(self) -> dict[int, list[Action | None]]:
        return {r: list(acts) for r, acts in enumerate(self.order)}

    def to_csv(self) -> str:
        """One row per rank, torch.distributed.pipelining's CSV layout."""
        buf = io.StringIO()
        w = csv.writer(buf)
        for acts in self.order:
            w.writerow(["" if a is None else str(a) for a in acts])
        return buf.getvalue()

    @classmethod
    def from_csv(cls, text: str, name: str, num_stages: int, num_microbatches: int) -> "Schedule":
        rows = [tuple(Action.parse(c) for c in row) for row in csv.reader(io.StringIO(text))]
        return cls(name, len(rows), num_stages, num_microbatches, tuple(rows))
