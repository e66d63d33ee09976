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
  layers of that bucket have their gradients (DDP's overlap), and runs on the dp stream.  Where
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
  per-unit host time around the reduce-scatters (``hooks_s``) before every backward;
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

The engine is a work-list over ranks: a rank runs until it blocks on a RECV whose SEND has not
been issued, or on a REDUCE_TIED its partners have not reached, and is woken when it is.  Each
action is visited once (a REDUCE_TIED that waited, twice).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from parsim.schedule.actions import Action, Kind, Schedule
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
    # operators' output gradients, Layer.w_held_bytes)
    w_held_bytes: dict[int, float] = field(default_factory=dict)
    # ZeRO >= 2: the buckets run after every micro-batch's last backward (reduce-scatters)
    buckets_every_microbatch: bool = False
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
        when it ends; frees first at equal times, as the rank's order has them.  Only records on
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


def run(schedule: Schedule, costs: Costs, keep_records: bool = True, prices=None) -> Timeline:
    R, M = schedule.num_ranks, schedule.num_microbatches
    last_bwd = Kind.W if schedule.split_backward else Kind.B
    orders = [schedule.actions(r) for r in range(R)]
    pos = [0] * R
    t_rank = [0.0] * R
    busy = [0.0] * R
    exposed = [0.0] * R
    idle = [0.0] * R
    last_compute = [0.0] * R
    dp_free = [0.0] * R
    link_free: dict[tuple[int, int], float] = {}
    arrival: dict[int, tuple[float, float]] = {}     # transfer key -> (posted_s, arrived_s)
    waiting: dict[int, int] = {}                     # transfer key -> blocked rank
    last_bwd_span: dict[int, tuple[float, float]] = {}
    buckets_done: dict[int, float] = {}
    records: list[tuple[int, Action, str, float, float]] = []
    input_rank = [0.0] * R
    first_forward = [0.0] * M
    load_s, ready_s = costs.input_s, costs.input_ready_s
    dur = _by_kind({**costs.compute_s, **costs.transfer_s}, schedule.num_stages)
    bucket = costs.bucket
    every_mb: dict[int, list[tuple[float, float]]] = {}    # stage -> its buckets, when run per micro-batch
    if costs.buckets_every_microbatch:
        for (s_, k_), v_ in sorted(bucket.items()):
            every_mb.setdefault(s_, []).append(v_)
    gather = _by_kind(costs.gather_s, schedule.num_stages)
    gather_once = costs.gather_first_microbatch_only
    hooks = _by_kind(costs.hooks_s, schedule.num_stages)
    after_opt = costs.after_optimizer_s
    exposed_share = 1.0 - costs.overlap + costs.contention      # of a bucket's time, charged to compute
    rank_of = schedule.rank_of
    F, B, I, W = Kind.F, Kind.B, Kind.I, Kind.W
    SEND_F, RECV_F = Kind.SEND_F, Kind.RECV_F
    COMPUTE_KINDS = frozenset((F, B, I, W))
    SEND_KINDS = frozenset((SEND_F, Kind.SEND_B))
    RECV_KINDS = frozenset((RECV_F, Kind.RECV_B))
    tied = costs.tied
    tied_size: dict[str, int] = {}                   # group -> its stages (one REDUCE_TIED each)
    for g, _ in tied.values():
        tied_size[g] = tied_size.get(g, 0) + 1
    tied_arrived: dict[str, dict[int, float]] = {}   # group -> stage -> when it reached REDUCE_TIED
    tied_waiting: dict[str, list[int]] = {}          # group -> ranks blocked on it
    waits: list[list[tuple[float, float]]] = [[] for _ in range(R)]
    delay = costs.busy_sender_delay_s
    # per rank: transfers posted whose arrival waits on what the sender does next (delay > 0 only):
    # (action, key, posted_s, start_s, undelayed end_s, link)
    pending: list[list[tuple[Action, int, float, float, float, tuple[int, int]]]] = [[] for _ in range(R)]

    def deliver(r: int, a: Action, key: int, posted: float, start: float, arrived: float) -> None:
        """A transfer of rank r's arrives: recorded, and the rank blocked on its RECV woken."""
        arrival[key] = (posted, arrived)
        if keep_records:
            records.append((r, a, P2P, start, arrived))
        w = waiting.pop(key, None)
        if w is not None:
            stack.append(w)

    def settle(r: int, computes_at: float | None, idle_until: float | None = None) -> None:
        """Decide rank r's pending transfers: delayed if it starts computing at ``computes_at``
        before they would have arrived, else (None: it waits on them) as priced; with
        ``idle_until``, only those that arrive by then (the rank cannot compute before it)."""
        keep = []
        for item in pending[r]:
            a, key, posted, start, end, link = item
            if idle_until is not None and end > idle_until:
                keep.append(item)
                continue
            arrived = end
            if computes_at is not None and computes_at < end and posted + delay > end:
                arrived = posted + delay
                if arrived > link_free[link]:
                    link_free[link] = arrived
            deliver(r, a, key, posted, start, arrived)
        pending[r] = keep

    def unblock() -> None:
        """Every rank is blocked, some on transfers still pending: a blocked sender computes
        no earlier than the transfer it waits for arrives undelayed, so its own transfers that
        arrive by then are settled as waited on; if none is, all are (a cycle of waits)."""
        ends = {it[1]: it[4] for q in range(R) for it in pending[q]}
        before = sum(map(len, pending))
        for key, q in list(waiting.items()):
            if pending[q]:
                settle(q, None, max(t_rank[q], ends.get(key, t_rank[q])))
        if sum(map(len, pending)) == before:
            for q in range(R):
                if pending[q]:
                    settle(q, None)

    a2a = _by_kind(costs.a2a_s, schedule.num_stages)
    pair_cost = costs.a2a_overlap_cost
    hidden = [0.0] * R
    unpaired: list[tuple | None] = [None] * R    # per rank: (forward?, compute s, a2a s, micro-batch) of its last F/B/I

    stack = list(range(R - 1, -1, -1))
    while stack:
        r = stack.pop()
        order, i, t = orders[r], pos[r], t_rank[r]
        # this rank's counters live in locals while it runs, and are written back when it blocks
        busy_r, exposed_r = busy[r], exposed[r]
        idle_r, last_r = idle[r], last_compute[r]
        n = len(order)
        while i < n:
            a = order[i]
            s, k, mb = a
            if k in COMPUTE_KINDS:
                d = dur[k][s]
                if pair_cost is not None and k is not W:
                    d = _paired(r, k is F, d, a2a[k][s] if k in a2a else 0.0, mb, unpaired, hidden, pair_cost)
                if pending[r]:                    # this rank's sends: does it compute before they arrive?
                    settle(r, max(t, ready_s[mb]) if s == 0 and k is F and ready_s else t)
                if s == 0 and k is F:             # the micro-batch's samples enter here
                    if ready_s and ready_s[mb] > t:
                        input_rank[r] += ready_s[mb] - t
                        t = ready_s[mb]
                    if load_s:
                        if keep_records:
                            records.append((r, a, INPUT, t, t + load_s))
                        t += load_s
                        input_rank[r] += load_s
                    first_forward[mb] = t
                g = gather[k][s] if k in gather and (mb == 0 or not gather_once) else 0.0
                if k in hooks:
                    g += hooks[k][s]
                if g:                             # ZeRO 2-3: parameters not yet gathered
                    if keep_records:
                        records.append((r, a, DP, t, t + g))
                    t += g
                    exposed_r += g
                if keep_records:
                    records.append((r, a, COMPUTE, t, t + d))
                if k is last_bwd:
                    if mb == M - 1:
                        last_bwd_span[s] = (t, d)
                    elif s in every_mb:           # ZeRO >= 2: this micro-batch's reduce-scatters
                        stolen = 0.0
                        for j, (frac, dd) in enumerate(every_mb[s]):
                            start = max(t + frac * d, dp_free[r])
                            dp_free[r] = start + dd
                            buckets_done[s] = max(buckets_done.get(s, 0.0), start + dd)
                            stolen += exposed_share * dd
                            if keep_records:
                                records.append((r, Action(s, Kind.REDUCE_GRAD, j), DP, start, start + dd))
                        exposed_r += stolen       # cycles the collectives take, after this backward
                        t += d
                        busy_r += d
                        last_r = t
                        t += stolen
                        i += 1
                        continue
                t += d
                busy_r += d
                last_r = t
            elif k in SEND_KINDS:
                forward = k is SEND_F
                link = (r, rank_of(s + 1) if forward else rank_of(s - 1))
                start = link_free.get(link, 0.0)
                if t > start:
                    start = t
                end = start + dur[k][s]
                link_free[link] = end
                key = (s * M + mb) * 2 + (not forward)
                if delay:                         # decided at the sender's next compute or wait
                    pending[r].append((a, key, t, start, end, link))
                    i += 1
                    continue
                deliver(r, a, key, t, start, end)
            elif k in RECV_KINDS:
                key = ((s - 1) * M + mb) * 2 if k is RECV_F else ((s + 1) * M + mb) * 2 + 1
                got = arrival.get(key)
                if got is None:
                    waiting[key] = r
                    break
                posted, arrived = got
                if arrived > t:
                    if posted > t:                 # waiting for the peer to reach its SEND: idle
                        idle_r += posted - t
                        t = posted
                    exposed_r += arrived - t       # the transfer itself (and its queue on the link)
                    t = arrived
            elif k is Kind.REDUCE_GRAD:
                frac, d = bucket[(s, mb)]
                b_start, b_dur = last_bwd_span[s]
                start = max(b_start + frac * b_dur, dp_free[r])
                dp_free[r] = start + d
                buckets_done[s] = max(buckets_done.get(s, 0.0), start + d)
                stolen = exposed_share * d
                if stolen:                         # cycles the collective takes from compute:
                    t += stolen                    # exposed communication on this rank
                    exposed_r += stolen
                if keep_records:
                    records.append((r, a, DP, start, start + d))
            elif k is Kind.REDUCE_TIED:
                if pending[r]:                    # a blocking collective: the sends go while it waits
                    settle(r, None)
                g, d = tied[s]
                arrived = tied_arrived.setdefault(g, {})
                if s not in arrived:
                    ready = buckets_done.get(s, t)
                    if ready > t:
                        exposed_r += ready - t
                        t = ready
                    arrived[s] = t
                if len(arrived) < tied_size[g]:
                    tied_waiting.setdefault(g, []).append(r)
                    break
                stack.extend(tied_waiting.pop(g, ()))
                start = max(arrived.values())      # the wait for the partners: idle
                if start > arrived[s]:
                    waits[r].append((arrived[s], start))
                if keep_records:
                    records.append((r, a, DP, start, start + d))
                t = start + d
                exposed_r += d
            elif k is Kind.OPTIMIZER:
                if pending[r]:                    # torch waits on a step's sends before it returns
                    settle(r, None)
                ready = buckets_done.get(s, t)
                if ready > t:
                    exposed_r += ready - t
                    t = ready
                d = dur[k][s]
                if keep_records:
                    records.append((r, a, COMPUTE, t, t + d))
                t += d
                busy_r += d
                g = after_opt.get(s, 0.0)
                if g:                             # ZeRO 1-2: gather the updated parameter shards
                    if keep_records:
                        records.append((r, a, DP, t, t + g))
                    t += g
                    exposed_r += g
            else:
                raise ValueError(f"the engine cannot run {a}")
            i += 1
        pos[r], t_rank[r] = i, t
        busy[r], exposed[r] = busy_r, exposed_r
        idle[r], last_compute[r] = idle_r, last_r
        if i == n and pending[r]:                 # its list done: the step waits on its sends
            settle(r, None)
        if not stack and delay and any(pending):  # every rank blocked, some on a pending transfer
            unblock()
    stuck = [f"rank {r} waits at {orders[r][pos[r]]}" for r in range(R) if pos[r] < len(orders[r])]
    if stuck:
        raise ScheduleError("deadlock: " + "; ".join(stuck) + " (run parsim.schedule.validate for the grid)")
    # the activations' peaks follow from each rank's order of compute actions alone (parsim.sim.memory)
    peak, max_inflight = activation_peaks(schedule, costs.saved_bytes, costs.w_held_bytes, prices)
    deltas = activation_deltas(schedule.num_stages, schedule.split_backward, costs.saved_bytes,
                               costs.w_held_bytes) if keep_records else {}
    return Timeline(records, t_rank, busy, exposed, peak, max_inflight, last_bwd, input_rank, first_forward, idle,
                    last_compute, waits, deltas, hidden)


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
