"""The parallel configuration of one training step: what the planner chooses, what the simulator
prices and what the executor runs.

    dp x pp devices (tp joins with operator sharding); m micro-batches per replica;
    a schedule with v chunks per rank; a split of the layers into v*pp stages;
    a placement of (replica, pipeline rank) on global ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

from parsim.errors import InfeasibleError

PLACEMENTS = ("pp-inner", "dp-inner")


@dataclass(frozen=True)
class ParallelConfig:
    dp: int
    pp: int
    microbatches: int
    schedule: str = "1f1b"
    chunks: int = 1
    # stage boundaries: stage k holds layers [bounds[k], bounds[k+1]); len = stages + 1
    bounds: tuple[int, ...] = ()
    # pp-inner: a replica's pipeline ranks are consecutive (neighbours share a node);
    # dp-inner: a stage's replicas are consecutive (MindSpore: pipeline across nodes).
    placement: str = "pp-inner"
    tp: int = 1

    @property
    def stages(self) -> int:
        return self.pp * self.chunks

    @property
    def world_size(self) -> int:
        return self.dp * self.pp * self.tp

    def global_rank(self, replica: int, pipe_rank: int) -> int:
        if self.placement == "pp-inner":
            return replica * self.pp + pipe_rank
        return pipe_rank * self.dp + replica

    def dp_group(self, pipe_rank: int) -> list[int]:
        return [self.global_rank(d, pipe_rank) for d in range(self.dp)]

    def microbatch_size(self, global_batch: int) -> int:
        if global_batch % (self.dp * self.microbatches):
            raise InfeasibleError(f"global batch {global_batch} does not divide into dp={self.dp} x "
                                  f"microbatches={self.microbatches}; pick microbatches dividing "
                                  f"{global_batch // self.dp if global_batch % self.dp == 0 else 'the batch'}")
        return global_batch // (self.dp * self.microbatches)

    def stage_layers(self, stage: int) -> range:
        return range(self.bounds[stage], self.bounds[stage + 1])

    def describe_split(self, names: list[str]) -> str:
        return " | ".join(f"{names[a]}..{names[b - 1]}" if b - a > 1 else names[a]
                          for a, b in zip(self.bounds, self.bounds[1:]))


def bounds_from_assignment(stages: tuple[int, ...]) -> tuple[int, ...]:
    """(0,0,1,1,1) -> (0, 2, 5)."""
    bounds = [0] + [i for i in range(1, len(stages)) if stages[i] != stages[i - 1]] + [len(stages)]
    return tuple(bounds)
