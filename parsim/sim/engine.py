"""Discrete-event execution of a lowered schedule.

Resources: one compute stream per rank; one FIFO stream per directed link between pipeline
ranks (transfers on the same link queue, so they share its bandwidth in turn); one data-parallel
communication stream per rank for REDUCE_GRAD buckets.

Semantics (as torch.distributed.pipelining runs with isend/irecv):
- a compute action starts when its rank is free; its inputs arrived through the RECV before it;
- SEND posts a transfer that starts when the data is ready and the link is free; it does not
  block the compute stream;
- a busy sender (``busy_sender_delay_s``, Collectives.busy_sender_delay_s, measured by
  profile-comm; 0 for GPUs and Ascend): where the library moves the data on threads that share
  the cores with compute (gloo on CPU), a transfer whose sender starts its next compute action
  (F, B, I, W) before the transfer would have arrived arrives no earlier than its post + the
  delay: the I/O thread waits for a core (benchmarks/bench_p2p_busy_sender.py: 0.2-0.3 ms when
  the sender waits, about 4 ms when it computes, on the 2-core local-cpu).  The sender's next
  compute decides, so a transfer stays pending until then; a sender that waits on a RECV first
  decides it by when that RECV lets it compute; one that reaches OPTIMIZER, REDUCE_TIED or the end
  of its list waits on its sends (torch does at the end of a schedule step); when every rank is
  blocked, a sender blocked on a pending transfer computes no earlier than that transfer's
  undelayed arrival, which settles its own that arrive by then (``unblock``).  A delayed
  transfer holds its link until it arrives (a pair's messages arrive in order);
- RECV blocks the compute stream until the matching transfer has arrived;
- REDUCE_GRAD bucket k becomes ready part-way through the stage's last backward, when the
  layers of that bucket have their gradients (DDP's overlap), and runs on the dp stream; without
  that overlap (``reduce_after_backward``: Megatron-Core without --overlap-grad-reduce) every
  bucket is ready at the end of the rank's last compute before it, which lowering puts last.  Where
  communication shares the compute engine (gloo on CPU cores), the part that does not hide
  ((1 - overlap + contention) x its time: overlap in [0, 1] and contention >= 0 measured on
  synthetic kernels by profile-comm, parsim.hardware.interaction; else profile-comm's overlap
  in the run's dtype, no contention) delays the compute stream;
- REDUCE_TIED (a tied weight's gradient, Megatron's embedding-gradient all-reduce between the
  first and last stage) waits for the stage's buckets, then for every stage of its group to
  reach its own REDUCE_TIED (a blocking collective), and holds the compute stream while it runs;
  the wait for the partners is idle time, the all-reduce exposed communication;
- OPTIMIZER waits for the stage's buckets, then runs on the compute stream;
- ZeRO (parsim.plan.ParallelConfig.zero): stage 1 all-gathers the updated parameter shards
  after OPTIMIZER (``after_optimizer_s``, exposed: not overlapped with the next step's forward);
  stages 2-3 (FSDP2's units) reduce-scatter their buckets after every micro-batch's last
  backward, not only the last one (``buckets_every_microbatch``: the gradients are kept as
  shards, so each micro-batch's must leave the full buffer), and gather each unit's parameters
  before its forward, prefetched one unit ahead, the part compute does not hide delaying the
  compute action (``gather_s``, exposed communication): stage 2 before the step's first forward
  only (``gather_first_microbatch_only``), stage 3 before every forward and backward; FSDP2's
  per-unit host time around the reduce-scatters (``hooks_s``) before every backward that
  reduce-scatters (with ParallelConfig.no_sync only the last micro-batch's, whose backward reduces
  the step's sum: ``buckets_every_microbatch`` false, the buckets as ZeRO 0-1 run them);
- input (parsim.cost.input): stage 0's forward of micro-batch k first loads its samples on the
  compute stream (``input_s``, an inline loader), or waits until the node's loader stream has
  them ready (``input_ready_s[k]``, loader workers running ahead).
- expert parallelism (parsim.cost.experts): a MoE layer's token all-to-alls run inside its F and
  B (I) actions, exposed (``a2a_s`` says how much of each); with ``a2a_overlap_cost`` set
  (ParallelConfig.ep_overlap) a forward and the next backward of another micro-batch on the
  rank, or a backward and the next forward, run side by side and hide each other's all-to-alls
  under their compute (``_paired``: DeepSeek-V3's DualPipe pairing of chunks, without its
  bidirectional schedule).

Every moment of a rank's compute stream, from 0 to ``end_s``, is one of: busy (a compute action
or the optimizer), input, exposed communication (a RECV's transfer time, a bucket's stolen cycles,
the optimizer waiting on its buckets) or idle (a RECV waiting for the peer to reach its SEND, or
a REDUCE_TIED waiting for its partners: ``collective_waits``).

The engine is a work-list over ranks: a rank runs its actions in order, each once what it waits
for is done, and those waits are parsim.schedule.deps' (``templates``, ``waits``: the one rule,
which the validator and the lowering read too; what a rank waits for on its own rank its order
has done before, so only another rank's is looked up); a rank blocks on an action of another rank
not done yet (a RECV's SEND) or on a REDUCE_TIED its partners have not reached, and is woken when
it is.  Each
kind of action has its handler (``_Step``, a table as DeepSpeed's pipeline engine keeps).  Each
action is visited once (a REDUCE_TIED that waited, twice).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import is_, is_not

from parsim.schedule.actions import Action, Kind, Schedule
from parsim.schedule.deps import dependencies
from parsim.schedule.validate import ScheduleError
from parsim.sim.memory import activation_deltas, activation_peaks

# Stream names in records.
COMPUTE, P2P, DP, INPUT = "compute", "p2p", "dp", "input"   # input: inline loading before stage 0's F


@dataclass
class Costs:
    """Per-(stage, kind) prices, the same for every micro-batch."""

    compute_s: dict[tuple[int, Kind], float]                 # F, B, I, W, OPTIMIZER
    transfer_s: dict[tuple[int, Kind], float]                # SEND_F / SEND_B of a stage
    # REDUCE_GRAD bucket: (fraction of the last backward after which it is ready, all-reduce seconds)
    bucket: dict[tuple[int, int], tuple[float, float]] = field(default_factory=dict)
    # bytes a micro-batch keeps for backward on each stage, from its F until its B (W if split)
    saved_bytes: dict[int, float] = field(default_factory=dict)
    # share of a gradient all-reduce hidden behind compute, in [0, 1]; the rest delays the compute stream
    overlap: float = 1.0
    # and what running both costs beyond running them in turn, per second of the collective
    # (parsim.hardware.interaction): it delays the compute stream too
    contention: float = 0.0
    # inline loading of one micro-batch, on the compute stream before stage 0's forward
    input_s: float = 0.0
    # when the overlapped loader has micro-batch k ready for stage 0's forward (empty: always)
    input_ready_s: tuple[float, ...] = ()
    # REDUCE_TIED per stage: (group, all-reduce seconds); a group's stages run it together
    tied: dict[int, tuple[str, float]] = field(default_factory=dict)
    # under a split backward, bytes a micro-batch's I keeps for its W on each stage (the weight
    # operators' output gradients, Layer.w_held_bytes), net of what it frees (torch's last stage:
    # parsim.cost.memory.last_stage_freed_at_i_bytes)
    w_held_bytes: dict[int, float] = field(default_factory=dict)
    # under torch's runtime schedules, per stage: (input gradient, output) a micro-batch's backward leaves
    # until the step ends (parsim.cost.memory.runtime_sent_bytes)
    sent_bytes: dict[int, tuple[float, float]] = field(default_factory=dict)
    # ZeRO >= 2: the buckets run after every micro-batch's last backward (reduce-scatters)
    buckets_every_microbatch: bool = False
    # ParallelConfig.overlap_grad_reduce false: every bucket of a rank waits for the rank's compute
    # before it (lowered at the end of its list: parsim.schedule.lower, reduce_after_backward)
    reduce_after_backward: bool = False
    # ZeRO 1-2: all-gather of the updated parameter shards after a stage's OPTIMIZER, exposed
    after_optimizer_s: dict[int, float] = field(default_factory=dict)
    # ZeRO 2-3: exposed parameter all-gather before each (stage, F/B) (what prefetching does not hide)
    gather_s: dict[tuple[int, Kind], float] = field(default_factory=dict)
    # ZeRO 2: the gathered parameters are kept over the step's micro-batches: gather before the first only
    gather_first_microbatch_only: bool = False
    # ZeRO 2-3: host time on the compute stream before each (stage, F/B), every micro-batch (FSDP2's
    # per-unit hooks around the reduce-scatters its backward issues), exposed communication
    hooks_s: dict[tuple[int, Kind], float] = field(default_factory=dict)
    # a transfer whose sender computes next arrives no earlier than post + this (Collectives.busy_sender_delay_s)
    busy_sender_delay_s: float = 0.0
    # expert parallelism: the token all-to-alls' seconds inside each (stage, F/B/I) compute action
    a2a_s: dict[tuple[int, Kind], float] = field(default_factory=dict)
    # ParallelConfig.ep_overlap: a forward and the next backward (or backward and next forward) of
    # another micro-batch on a rank hide each other's all-to-alls under their compute, each second
    # hidden costing this much more compute (the units the all-to-all's kernels take); None: off
    a2a_overlap_cost: float | None = None


@dataclass
class Timeline:
    """Everything the engine observed; records are (rank, action, stream, start_s, end_s)
    (empty unless asked for)."""

    records: list[tuple[int, Action, str, float, float]]
    end_s: list[float]
    busy_s: list[float]
    exposed_comm_s: list[float]
    peak_activation_bytes: list[float]
    max_inflight: list[int]
    frees_activations: Kind = Kind.B       # the backward kind that releases a micro-batch's activations
    input_s: list[float] = field(default_factory=list)          # per rank: loading inline + waiting on the loader
    first_forward_s: list[float] = field(default_factory=list)  # per micro-batch: start of stage 0's forward
    idle_s: list[float] = field(default_factory=list)           # per rank: RECVs waiting for the peer's SEND
    last_compute_end_s: list[float] = field(default_factory=list)   # per rank: end of its last F, B, I or W
    # per rank: (start, end) of each wait at a REDUCE_TIED for the other stages of its group
    collective_waits: list[list[tuple[float, float]]] = field(default_factory=list)
    # kind -> per stage, what a compute action changes in its rank's activations (parsim.sim.memory.
    # activation_deltas; kept with the records)
    activation_deltas: dict[Kind, tuple[float, ...]] = field(default_factory=dict)
    # per rank: all-to-all seconds hidden under the compute of a paired action (Costs.a2a_overlap_cost;
    # the compute that hiding them slows is in busy_s)
    a2a_hidden_s: list[float] = field(default_factory=list)

    def activation_changes(self, rank: int) -> list[tuple[float, float]]:
        """(time_s, bytes) of each change to a rank's activations, in time order: an F or I adds
        its bytes (activation_deltas) when it starts, the backward that frees them removes them
        (less what it leaves sent under torch's runtime schedules) when it ends; frees first at equal
        times, as the rank's order has them.  Only records on
        the compute stream are the actions themselves: the same action's record on another stream
        (ZeRO's parameter gather before it, the samples loaded before stage 0's F) changes nothing.
        Replayed from zero, their running sum peaks at activation_peaks' value for the rank."""
        free = self.frees_activations
        changes = []
        for r, a, stream, start, end in self.records:
            if r != rank or stream != COMPUTE:
                continue
            per_stage = self.activation_deltas.get(a.kind)
            if per_stage is not None and per_stage[a.stage]:
                changes.append((end if a.kind is free else start, per_stage[a.stage]))
        changes.sort(key=lambda c: (c[0], c[1]))
        return changes


def _by_kind(by_stage_kind: dict, num_stages: int) -> dict[Kind, list[float]]:
    """{(stage, kind): seconds} as kind -> seconds by stage: one hash of the kind per lookup in the
    event loop instead of a (stage, kind) tuple's."""
    out: dict[Kind, list[float]] = {}
    for (s, k), d in by_stage_kind.items():
        out.setdefault(k, [0.0] * num_stages)[s] = d
    return out


def templates(schedule: Schedule) -> dict[tuple[int, Kind], tuple[tuple[int, Kind, bool, int | None], ...]]:
    """What each (stage, kind) of a lowered schedule waits for, from parsim.schedule.deps (the one
    rule: ``dependencies``, each REDUCE_TIED and OPTIMIZER told its stage's buckets and whether it
    holds a tied weight), as (stage, kind, own, micro-batch): ``own`` where the action waited for
    is of the waiting action's own micro-batch, else the micro-batch named (a bucket waits for the
    last micro-batch's backward).  The rule is asked once per (stage, kind), at a micro-batch no
    action has (-1): what it names there is the action's own."""
    split, last = schedule.split_backward, schedule.num_microbatches - 1
    buckets: Counter[int] = Counter()       # per stage, its REDUCE_GRAD actions
    tied: set[int] = set()                  # the stages with a REDUCE_TIED
    kinds: dict[tuple[int, Kind], bool] = {}    # (stage, kind) -> whether its actions name a micro-batch
    for r in range(schedule.num_ranks):
        stages, kinds_of, numbers = schedule.columns(r)
        kinds.update(zip(zip(stages, kinds_of), map(is_not, numbers, repeat(None))))
        buckets.update(compress(stages, map(is_, kinds_of, repeat(Kind.REDUCE_GRAD))))
        tied.update(compress(stages, map(is_, kinds_of, repeat(Kind.REDUCE_TIED))))
    return {(s, k): tuple((d.stage, d.kind, d.microbatch == -1, d.microbatch)
                          for d in dependencies(Action(s, k, -1 if numbered else None), schedule.num_stages,
                                                schedule.rank_of, lowered=True, split_backward=split,
                                                last_microbatch=last, buckets=buckets.get(s, 0), tied=s in tied))
            for (s, k), numbered in kinds.items()}


def waits(schedule: Schedule) -> tuple[tuple[tuple[Action, ...], ...], ...]:
    """Per rank, per action of its order: what the engine waits for before it starts the action
    (``templates``, each with the action's micro-batch put in)."""
    t = templates(schedule)
    return tuple(tuple(tuple(Action(ds, dk, mb if own else dm) for ds, dk, own, dm in t[(s, k)])
                       for s, k, mb in schedule.actions(r)) for r in range(schedule.num_ranks))


def run(schedule: Schedule, costs: Costs, keep_records: bool = True, prices=None) -> Timeline:
    """Execute a lowered schedule (module docstring): each rank runs its actions in order, an
    action once what it waits for (``templates``) is done, by the handler of its kind (``_Step``);
    a rank blocked on an action of another rank is woken when that action is done.  ``prices``:
    the run's pricing context (parsim.sim.prices), which keeps each schedule's waits and
    activation events."""
    if prices is None:
        waited = templates(schedule)
    else:
        table = prices.table("engine waits")
        hit = table.get(id(schedule))
        if hit is None:
            hit = table[id(schedule)] = (schedule, templates(schedule))
        waited = hit[1]
    step = _Step(schedule, costs, keep_records, waited)
    while step.stack:
        step.advance(step.stack.pop())
        if not step.stack and step.delay and any(step.pending):   # every rank blocked, some on a pending send
            step.unblock()
    stuck = [f"rank {r} waits at {step.orders[r][step.pos[r]]}" for r in range(step.R)
             if step.pos[r] < len(step.orders[r])]
    if stuck:
        raise ScheduleError("deadlock: " + "; ".join(stuck) + " (run parsim.schedule.validate for the grid)")
    # the activations' peaks follow from each rank's order of compute actions alone (parsim.sim.memory)
    peak, max_inflight = activation_peaks(schedule, costs.saved_bytes, costs.w_held_bytes, costs.sent_bytes, prices)
    deltas = activation_deltas(schedule.num_stages, schedule.split_backward, costs.saved_bytes,
                               costs.w_held_bytes, costs.sent_bytes) if keep_records else {}
    return Timeline(step.records, step.t, step.busy, step.exposed, peak, max_inflight, step.last_bwd,
                    step.input_rank, step.first_forward, step.idle, step.last_compute, step.collective_waits, deltas,
                    step.hidden)


class _Step:
    """The state of one step's execution and a handler per action kind (DeepSpeed's instruction
    table): each takes the rank, the action and what it waited for, and moves the rank's clock.
    A handler returns False where the action cannot run yet (a REDUCE_TIED whose partners have
    not reached theirs); the rank is then visited again when they have."""

    def __init__(self, schedule: Schedule, costs: Costs, keep_records: bool, waited: dict):
        R, M, S = schedule.num_ranks, schedule.num_microbatches, schedule.num_stages
        # kind -> per stage: what its actions wait for (templates), and of it what another rank does:
        # an action's own rank runs in order, so what it waits for there is done before it
        # (parsim.schedule.validate checks the order by the same rule)
        self.waited: dict[Kind, list] = {}
        self.elsewhere: dict[Kind, list] = {}
        for (st, k), template in waited.items():
            self.waited.setdefault(k, [()] * S)[st] = template
            self.elsewhere.setdefault(k, [()] * S)[st] = tuple(
                t for t in template if schedule.rank_of(t[0]) != schedule.rank_of(st))
        self.R, self.M, self.costs, self.keep = R, M, costs, keep_records
        # the rank each stage's SEND_F and SEND_B goes to (Schedule.rank_of: the placement's one rule)
        self.peer = {Kind.SEND_F: [schedule.rank_of(s + 1) for s in range(S)],
                     Kind.SEND_B: [schedule.rank_of(s - 1) for s in range(S)]}
        self.last_bwd = Kind.W if schedule.split_backward else Kind.B
        self.orders = [schedule.actions(r) for r in range(R)]
        self.pos = [0] * R
        self.t = [0.0] * R                  # per rank: its compute stream's clock
        self.busy, self.exposed, self.idle = [0.0] * R, [0.0] * R, [0.0] * R
        self.last_compute, self.input_rank, self.hidden = [0.0] * R, [0.0] * R, [0.0] * R
        self.first_forward = [0.0] * M
        self.collective_waits: list[list[tuple[float, float]]] = [[] for _ in range(R)]
        self.records: list[tuple[int, Action, str, float, float]] = []
        self.done: dict[Action, float] = {}                     # when each action's result is available
        self.span: dict[Action, tuple[float, float]] = {}       # compute actions: (start, seconds)
        self.sent: dict[Action, tuple[float, float]] = {}       # SEND: (posted_s, arrived_s)
        self.waiting: dict[Action, int] = {}                    # an action not yet done -> the rank blocked on it
        self.stack = list(range(R - 1, -1, -1))
        self.dp_free = [0.0] * R
        self.link_free: dict[tuple[int, int], float] = {}
        self.dur = _by_kind({**costs.compute_s, **costs.transfer_s}, S)
        self.gather, self.hooks, self.a2a = (_by_kind(x, S) for x in (costs.gather_s, costs.hooks_s, costs.a2a_s))
        self.every_mb: dict[int, list[tuple[float, float]]] = {}    # stage -> its buckets, when run per micro-batch
        if costs.buckets_every_microbatch:
            for (s, _), entry in sorted(costs.bucket.items()):
                self.every_mb.setdefault(s, []).append(entry)
        self.exposed_share = 1.0 - costs.overlap + costs.contention     # of a bucket's time, charged to compute
        self.tied_size: dict[str, int] = {}                     # group -> its stages (one REDUCE_TIED each)
        for g, _ in costs.tied.values():
            self.tied_size[g] = self.tied_size.get(g, 0) + 1
        self.tied_arrived: dict[str, dict[int, float]] = {}     # group -> stage -> when it reached REDUCE_TIED
        self.tied_waiting: dict[str, list[int]] = {}            # group -> ranks blocked on it
        self.delay = costs.busy_sender_delay_s
        # per rank: sends whose arrival waits on what the sender does next (delay > 0 only):
        # (action, posted_s, start_s, undelayed end_s, link)
        self.pending: list[list[tuple]] = [[] for _ in range(R)]
        self.unpaired: list[tuple | None] = [None] * R          # per rank: its last F/B/I (ep_overlap)
        compute = self.compute
        self.handlers = {Kind.F: compute, Kind.B: compute, Kind.I: compute, Kind.W: compute,
                         Kind.SEND_F: self.send, Kind.SEND_B: self.send, Kind.RECV_F: self.recv,
                         Kind.RECV_B: self.recv, Kind.REDUCE_GRAD: self.reduce_grad,
                         Kind.REDUCE_TIED: self.reduce_tied, Kind.OPTIMIZER: self.optimizer}

    def advance(self, r: int) -> None:
        """Run rank r's actions in order until one waits for an action not done (then it sleeps
        in ``waiting`` until that action is done) or its list ends."""
        order, i, n = self.orders[r], self.pos[r], len(self.orders[r])
        done, handlers, waited, elsewhere = self.done, self.handlers, self.waited, self.elsewhere
        while i < n:
            a = order[i]
            s, k, mb = a
            for ds, dk, own, dm in elsewhere[k][s]:
                d = (ds, dk, mb if own else dm)
                if d not in done:
                    self.waiting[d] = r
                    self.pos[r] = i
                    return
            if not handlers[k](r, a, waited[k][s]):
                self.pos[r] = i
                return
            i += 1
        self.pos[r] = n
        if self.pending[r]:                 # its list done: the step waits on its sends
            self.settle(r, None)

    def record(self, r: int, a: Action, stream: str, start: float, end: float) -> None:
        if self.keep:
            self.records.append((r, a, stream, start, end))

    @staticmethod
    def deps(a: Action, template) -> list[tuple]:
        """What ``a`` waited for (its (stage, kind)'s template with its micro-batch put in)."""
        return [(ds, dk, a[2] if own else dm) for ds, dk, own, dm in template]

    def compute(self, r: int, a: Action, template) -> bool:
        """F, B, I, W: what it waits for ran on this rank (or arrived through a RECV before it)."""
        s, k, mb = a
        t, costs = self.t[r], self.costs
        d = self.dur[k][s]
        if costs.a2a_overlap_cost is not None and k is not Kind.W:
            d = _paired(r, k is Kind.F, d, self.a2a[k][s] if k in self.a2a else 0.0, mb, self.unpaired, self.hidden,
                        costs.a2a_overlap_cost)
        ready_s = costs.input_ready_s
        if self.pending[r]:                 # this rank's sends: does it compute before they arrive?
            self.settle(r, max(t, ready_s[mb]) if s == 0 and k is Kind.F and ready_s else t)
        if s == 0 and k is Kind.F:          # the micro-batch's samples enter here
            if ready_s and ready_s[mb] > t:
                self.input_rank[r] += ready_s[mb] - t
                t = ready_s[mb]
            if costs.input_s:
                self.record(r, a, INPUT, t, t + costs.input_s)
                t += costs.input_s
                self.input_rank[r] += costs.input_s
            self.first_forward[mb] = t
        g = self.gather[k][s] if k in self.gather and (mb == 0 or not costs.gather_first_microbatch_only) else 0.0
        if k in self.hooks and (costs.buckets_every_microbatch or mb == self.M - 1):    # the reduce-scatters' hooks
            g += self.hooks[k][s]
        if g:                               # ZeRO 2-3: parameters not yet gathered
            self.record(r, a, DP, t, t + g)
            t += g
            self.exposed[r] += g
        if self.keep:
            self.records.append((r, a, COMPUTE, t, t + d))
        self.span[a] = (t, d)
        stolen = 0.0
        if k is self.last_bwd and mb != self.M - 1 and s in self.every_mb:   # ZeRO >= 2: this one's reduce-scatters
            for j, (frac, dd) in enumerate(self.every_mb[s]):
                start = max(t + frac * d, self.dp_free[r])
                self.dp_free[r] = start + dd
                stolen += self.exposed_share * dd
                self.record(r, Action(s, Kind.REDUCE_GRAD, j), DP, start, start + dd)
        t += d
        self.busy[r] += d
        self.last_compute[r] = self.done[a] = t
        if stolen:                          # cycles the collectives take, after this backward
            self.exposed[r] += stolen
            t += stolen
        self.t[r] = t
        return True

    def send(self, r: int, a: Action, template) -> bool:
        """SEND_F, SEND_B: posted now, on the FIFO link to the receiving stage's rank; arrives when
        it is through (with a busy sender, decided by what the sender does next: ``settle``)."""
        s, k, _ = a
        t = self.t[r]
        link = (r, self.peer[k][s])
        start = max(t, self.link_free.get(link, 0.0))
        end = start + self.dur[k][s]
        self.link_free[link] = end
        if self.delay:
            self.pending[r].append((a, t, start, end, link))
        else:
            self.deliver(r, a, t, start, end)
        return True

    def deliver(self, r: int, a: Action, posted: float, start: float, arrived: float) -> None:
        """A send of rank r's arrives: done, recorded, and the rank waiting on it woken."""
        self.sent[a] = (posted, arrived)
        self.done[a] = arrived
        if self.keep:
            self.records.append((r, a, P2P, start, arrived))
        w = self.waiting.pop(a, None)
        if w is not None:
            self.stack.append(w)

    def recv(self, r: int, a: Action, template) -> bool:
        """RECV_F, RECV_B: the rank waits for the send it waited for to arrive: idle until the peer
        posted it, exposed communication while it travels (and queues on the link)."""
        ds, dk, own, dm = template[0]       # the SEND it waits for (deps, inline: one per RECV)
        posted, arrived = self.sent[(ds, dk, a[2] if own else dm)]
        t = self.t[r]
        if arrived > t:
            if posted > t:
                self.idle[r] += posted - t
                t = posted
            self.exposed[r] += arrived - t
            t = arrived
        self.t[r] = self.done[a] = t
        return True

    def reduce_grad(self, r: int, a: Action, template) -> bool:
        """A gradient bucket: ready part-way through the backward it waits for, on the dp stream;
        the part compute does not hide delays the compute stream."""
        frac, d = self.costs.bucket[(a.stage, a.microbatch)]
        b_start, b_dur = self.span[self.deps(a, template)[0]]
        start = max(b_start + frac * b_dur, self.dp_free[r])
        if self.costs.reduce_after_backward:     # issued once the rank's backward is done
            start = max(start, self.t[r])
        self.dp_free[r] = self.done[a] = start + d
        stolen = self.exposed_share * d
        if stolen:                          # cycles the collective takes from compute: exposed
            self.t[r] += stolen
            self.exposed[r] += stolen
        self.record(r, a, DP, start, start + d)
        return True

    def _ready(self, r: int, a: Action, template) -> None:
        """Wait on the compute stream, exposed, until what the action waits for is done."""
        ready = max((self.done[d] for d in self.deps(a, template)), default=self.t[r])
        if ready > self.t[r]:
            self.exposed[r] += ready - self.t[r]
            self.t[r] = ready

    def reduce_tied(self, r: int, a: Action, template) -> bool:
        """A tied weight's gradient, all-reduced by the stages of its group together (a blocking
        collective): after the stage's buckets, once every partner has reached its own."""
        s = a.stage
        if self.pending[r]:                 # the sends go while it waits
            self.settle(r, None)
        g, d = self.costs.tied[s]
        arrived = self.tied_arrived.setdefault(g, {})
        if s not in arrived:
            self._ready(r, a, template)
            arrived[s] = self.t[r]
        if len(arrived) < self.tied_size[g]:
            self.tied_waiting.setdefault(g, []).append(r)
            return False
        self.stack.extend(self.tied_waiting.pop(g, ()))
        start = max(arrived.values())       # the wait for the partners: idle
        if start > arrived[s]:
            self.collective_waits[r].append((arrived[s], start))
        self.record(r, a, DP, start, start + d)
        self.t[r] = self.done[a] = start + d
        self.exposed[r] += d
        return True

    def optimizer(self, r: int, a: Action, template) -> bool:
        """The stage's optimizer step on the compute stream, once its gradients are reduced; under
        ZeRO 1-2, then the updated shards all-gathered (exposed)."""
        s = a.stage
        if self.pending[r]:                 # torch waits on a step's sends before it returns
            self.settle(r, None)
        self._ready(r, a, template)
        t, d = self.t[r], self.dur[Kind.OPTIMIZER][s]
        self.record(r, a, COMPUTE, t, t + d)
        t += d
        self.busy[r] += d
        g = self.costs.after_optimizer_s.get(s, 0.0)
        if g:                               # ZeRO 1-2: gather the updated parameter shards
            self.record(r, a, DP, t, t + g)
            t += g
            self.exposed[r] += g
        self.t[r] = self.done[a] = t
        return True

    def settle(self, r: int, computes_at: float | None, idle_until: float | None = None) -> None:
        """Decide rank r's pending sends: delayed if it starts computing at ``computes_at`` before
        they would have arrived, else (None: it waits on them) as priced; with ``idle_until``,
        only those that arrive by then (the rank cannot compute before it)."""
        keep = []
        for item in self.pending[r]:
            a, posted, start, end, link = item
            if idle_until is not None and end > idle_until:
                keep.append(item)
                continue
            arrived = end
            if computes_at is not None and computes_at < end and posted + self.delay > end:
                arrived = posted + self.delay
                if arrived > self.link_free[link]:
                    self.link_free[link] = arrived
            self.deliver(r, a, posted, start, arrived)
        self.pending[r] = keep

    def unblock(self) -> None:
        """Every rank is blocked, some on sends still pending: a blocked sender computes no earlier
        than the send it waits for arrives undelayed, so its own sends that arrive by then are
        settled as waited on; if none is, all are (a cycle of waits)."""
        ends = {item[0]: item[3] for q in range(self.R) for item in self.pending[q]}
        before = sum(map(len, self.pending))
        for a, q in list(self.waiting.items()):
            if self.pending[q]:
                self.settle(q, None, max(self.t[q], ends.get(a, self.t[q])))
        if sum(map(len, self.pending)) == before:
            for q in range(self.R):
                if self.pending[q]:
                    self.settle(q, None)


def _paired(r: int, forward: bool, d: float, a2a_s: float, mb: int, unpaired: list, hidden: list[float],
            cost: float) -> float:
    """The all-to-all overlap rule (Costs.a2a_overlap_cost), the one place it is stated: a compute
    action of one direction right after one of the other direction and another micro-batch on the
    same rank (W left aside) runs beside it, as DeepSeek-V3's DualPipe pairs a forward chunk with a
    backward chunk (DeepSeek-AI 2024, Sec. 3.2.1, Fig. 4): each one's all-to-alls hide under the
    other's compute, up to that compute's length, and each second hidden slows the compute by
    ``cost`` (the SMs the all-to-all's kernels take).  The pair's time: C1 + A1 + C2 + A2 less
    (min(A2, C1) + min(A1, C2)) x (1 - cost), taken off the second action (never below zero);
    an action that pairs with none keeps its all-to-alls exposed."""
    prev = unpaired[r]
    compute = d - a2a_s
    if prev is None or prev[0] == forward or prev[3] == mb:
        unpaired[r] = (forward, compute, a2a_s, mb)
        return d
    unpaired[r] = None
    gross = min(a2a_s, prev[1]) + min(prev[2], compute)
    hidden[r] += gross
    return d - gross * (1.0 - cost)
