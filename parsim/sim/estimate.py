"""Estimate: what the simulator predicts for one training step."""

from __future__ import annotations

from dataclasses import dataclass, field

from parsim.cost.memory import MemoryBreakdown


@dataclass(frozen=True)
class RankEstimate:
    """One pipeline rank's step, split by what the rank is doing:

        busy_s + input_s + exposed_comm_s + bubble_s + sync_wait_s == step_time_s

    - busy_s: its compute actions (F, B, I, W) and optimizer steps;
    - input_s: loading samples inline, or waiting on the overlapped loader (stage 0's rank only);
    - exposed_comm_s: its own communication that compute does not hide: a received activation or
      gradient in transit (or queued on the link), the cycles a gradient all-reduce takes from the
      compute engine, the optimizer waiting on its stage's all-reduces;
    - bubble_s, the pipeline bubble: idle while the pipeline still has forward or backward work,
      i.e. before the last F/B/I/W on any rank ends (the "drain").  It holds the warm-up fill
      before the rank's first compute, the stalls between its actions waiting for a peer to send,
      and the cool-down after its own last backward until the drain;
    - sync_wait_s, waiting on others: idle after the drain and after the rank's own work
      (backward, gradient all-reduce, optimizer) has ended, until the step ends: the time it
      waits for other ranks' gradient all-reduces and optimizer steps, because the step ends
      when the last rank finishes.

    Idle before the first compute is bubble, not waiting on others: it is warm-up fill, and the
    closed form (p-1)/(m+p-1) (GPipe, Huang et al. 2019; 1F1B, Narayanan et al. 2021) counts it
    together with the cool-down.  Counting a rank's cool-down (after its own last action) as
    bubble up to the drain, not as waiting on others, keeps that closed form exact for uniform
    stages; only the idle a faster gradient synchronisation or optimizer step elsewhere would
    remove is sync wait.
    """

    rank: int                 # pipeline rank (replica 0; replicas are symmetric)
    global_rank: int
    stages: tuple[int, ...]
    busy_s: float
    bubble_s: float           # idle before the pipeline drains (see above)
    sync_wait_s: float        # idle after the drain and the rank's own work: waiting on others
    exposed_comm_s: float
    memory: MemoryBreakdown
    max_inflight_microbatches: int
    input_s: float = 0.0      # loading inline plus waiting on the loader (parsim.cost.input)
    # of exposed_comm_s, the MoE layers' token all-to-alls (expert parallelism, parsim.cost.experts):
    # dispatch and combine forward, their transposes backward, on the compute stream
    ep_comm_s: float = 0.0

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
    # ZeRO (config["zero"] > 0): per stage, each collective one rank issues on its dp group per
    # step, (op, bytes) with op reduce_scatter or all_gather, bytes the full (padded) buffer;
    # what the executor counts (parsim.exec.grad_sync at stage 1, parsim.exec.fsdp at stages 2-3)
    sharded_collectives: tuple[tuple[tuple[str, float], ...], ...] = ()
    # context parallelism (config["cp"] > 1): per stage, the bytes one rank sends around its cp ring
    # per step, K and V forward, K, V, dK and dV backward (parsim.cost.context.ring_sent_bytes);
    # what parsim.exec.context_parallel counts
    cp_ring_bytes: tuple[float, ...] = ()
    # expert parallelism (config["ep"] > 1): per stage, the bytes one rank's token all-to-alls scatter
    # per step, each all_to_all_single's input buffer (parsim.model.moe.Experts.all_to_all_bytes,
    # its own share included), four per MoE layer and micro-batch (six when fully recomputed);
    # and the routed experts' gradient buckets, over the expert-data-parallel group
    ep_a2a_bytes: tuple[float, ...] = ()
    expert_grad_buckets_bytes: tuple[tuple[float, ...], ...] = ()
    # the step time's interval (parsim.sim.band.Interval): from the layer profile's rounds and the
    # profiled model's development residuals (parsim.sim.interval) where it was priced from a profile
    # taken in rounds, else the public benchmark's out-of-sample residuals for this kind of plan
    # (parsim.sim.band.with_band); None: nothing measured gives one
    step_time_band: object = field(default=None, compare=False)
    peak_memory_band: object = field(default=None, compare=False)     # the same of the peak memory

    @property
    def throughput_samples_per_s(self) -> float:
        return self.global_batch_size / self.step_time_s

    def _share(self, attr: str) -> float:
        return sum(getattr(r, attr) for r in self.ranks) / (len(self.ranks) * self.step_time_s)

    @property
    def bubble_fraction(self) -> float:
        """The pipeline bubble's share of the step, averaged over pipeline ranks (RankEstimate.bubble_s)."""
        return self._share("bubble_s")

    @property
    def sync_wait_fraction(self) -> float:
        """The share of the step ranks wait, their own work done, on other ranks' gradient
        all-reduces and optimizer steps, averaged over pipeline ranks (RankEstimate.sync_wait_s)."""
        return self._share("sync_wait_s")

    @property
    def exposed_comm_fraction(self) -> float:
        return self._share("exposed_comm_s")

    @property
    def peak_memory_bytes(self) -> list[float]:
        return [r.peak_memory_bytes for r in self.ranks]

    def to_json(self) -> dict:
        return {
            "step_time_s": self.step_time_s,
            "throughput_samples_per_s": self.throughput_samples_per_s,
            "bubble_fraction": self.bubble_fraction,
            "sync_wait_fraction": self.sync_wait_fraction,
            "exposed_comm_fraction": self.exposed_comm_fraction,
            "input_bound": self.input_bound,
            "input": self.input,
            "peak_memory_bytes": self.peak_memory_bytes,
            "memory_breakdown": [r.memory.to_dict() for r in self.ranks],
            "comm_bytes": self.comm_bytes,
            "grad_buckets_bytes": [list(b) for b in self.grad_buckets_bytes],
            "tied_grad_bytes": {str(s): b for s, b in self.tied_grad_bytes.items()},
            "sharded_collectives": [[list(c) for c in st] for st in self.sharded_collectives],
            "cp_ring_bytes": list(self.cp_ring_bytes),
            **({"ep_a2a_bytes": list(self.ep_a2a_bytes),
                "expert_grad_buckets_bytes": [list(b) for b in self.expert_grad_buckets_bytes]}
               if self.ep_a2a_bytes else {}),
            "ranks": [{"rank": r.rank, "global_rank": r.global_rank, "stages": list(r.stages), "busy_s": r.busy_s,
                       "bubble_s": r.bubble_s, "sync_wait_s": r.sync_wait_s, "exposed_comm_s": r.exposed_comm_s,
                       "input_s": r.input_s, **({"ep_comm_s": r.ep_comm_s} if r.ep_comm_s else {}),
                       "max_inflight_microbatches": r.max_inflight_microbatches} for r in self.ranks],
            "config": self.config,
            "step_time_band": self.step_time_band.to_json() if self.step_time_band is not None else None,
            **({"peak_memory_band": self.peak_memory_band.to_json()} if self.peak_memory_band is not None else {}),
        }
