"""Estimate: what the simulator predicts for one training step."""

from __future__ import annotations

from dataclasses import dataclass, field

from parsim.cost.memory import MemoryBreakdown


@dataclass(frozen=True)
class RankEstimate:
    rank: int                 # pipeline rank (replica 0; replicas are symmetric)
    global_rank: int
    stages: tuple[int, ...]
    busy_s: float
    bubble_s: float
    exposed_comm_s: float
    memory: MemoryBreakdown
    max_inflight_microbatches: int
    input_s: float = 0.0      # loading inline plus waiting on the loader (parsim.cost.input)

    @property
    def peak_memory_bytes(self) -> float:
        return self.memory.total_bytes


@dataclass(frozen=True)
class Estimate:
    step_time_s: float
    global_batch_size: int
    ranks: tuple[RankEstimate, ...]
    comm_bytes: dict = field(default_factory=dict)        # link class -> bytes moved per step, all ranks
    config: dict = field(default_factory=dict)
    stage_saved_bytes: tuple[float, ...] = ()            # per micro-batch, held from F to B (W)
    timeline: object = field(default=None, compare=False, repr=False)   # engine.Timeline, if kept
    input_bound: bool = False          # the overlapped loader, not compute, sets the step
    input: dict | None = None          # parsim.cost.input.InputCost as a dict; None: not priced
    # per stage, the data-parallel gradient all-reduces it issues per step, bytes each, in launch
    # order (parsim.cost.comm.ddp_buckets); what parsim.exec.grad_sync runs
    grad_buckets_bytes: tuple[tuple[float, ...], ...] = ()
    # per stage holding a copy of a tied weight, the bytes of its gradient all-reduced between the
    # stages that hold it (Kind.REDUCE_TIED); what parsim.exec.grad_sync.TiedGrads runs
    tied_grad_bytes: dict[int, float] = field(default_factory=dict)

    @property
    def throughput_samples_per_s(self) -> float:
        return self.global_batch_size / self.step_time_s

    @property
    def bubble_fraction(self) -> float:
        """Idle share of the step, not waiting on communication, averaged over pipeline ranks."""
        return sum(r.bubble_s for r in self.ranks) / (len(self.ranks) * self.step_time_s)

    @property
    def exposed_comm_fraction(self) -> float:
        return sum(r.exposed_comm_s for r in self.ranks) / (len(self.ranks) * self.step_time_s)

    @property
    def peak_memory_bytes(self) -> list[float]:
        return [r.peak_memory_bytes for r in self.ranks]

    def to_json(self) -> dict:
        return {
            "step_time_s": self.step_time_s,
            "throughput_samples_per_s": self.throughput_samples_per_s,
            "bubble_fraction": self.bubble_fraction,
            "exposed_comm_fraction": self.exposed_comm_fraction,
            "input_bound": self.input_bound,
            "input": self.input,
            "peak_memory_bytes": self.peak_memory_bytes,
            "memory_breakdown": [r.memory.to_dict() for r in self.ranks],
            "comm_bytes": self.comm_bytes,
            "grad_buckets_bytes": [list(b) for b in self.grad_buckets_bytes],
            "tied_grad_bytes": {str(s): b for s, b in self.tied_grad_bytes.items()},
            "ranks": [{"rank": r.rank, "global_rank": r.global_rank, "stages": list(r.stages), "busy_s": r.busy_s,
                       "bubble_s": r.bubble_s, "exposed_comm_s": r.exposed_comm_s, "input_s": r.input_s,
                       "max_inflight_microbatches": r.max_inflight_microbatches} for r in self.ranks],
            "config": self.config,
        }
