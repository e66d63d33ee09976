"""Views of a simulated (or measured) step: per-action DataFrame, memory over time, Chrome trace,
text grid.

Records are (rank, action, stream, start_s, end_s), the engine's format; the executor writes
the same, so a measured trace lines up with a simulated one action by action.  What a record is
(record_kind) is decided here once, for the trace, the charts and the page; which records change
memory, by the engine (Timeline.activation_changes).
"""

from __future__ import annotations

from parsim.schedule.actions import Action
from parsim.sim.engine import COMPUTE, DP, INPUT, P2P
from parsim.sim.estimate import Estimate

STREAM_TID = {COMPUTE: 0, P2P: 1, DP: 2, INPUT: 3}


def _records(est: Estimate):
    if est.timeline is None:
        raise ValueError("this Estimate kept no timeline; simulate(..., keep_timeline=True)")
    return est.timeline.records


def action_frame(est: Estimate):
    """A pandas DataFrame, one row per record: rank, the action, its stage, kind and micro-batch,
    the stream, what the record is (record_kind: the kind on the compute stream, GATHER or INPUT
    for the work done for a compute action elsewhere), times."""
    import pandas as pd

    rows = [{"rank": r, "global_rank": est.ranks[r].global_rank, "action": str(a), "stage": a.stage,
             "kind": a.kind.value, "microbatch": a.microbatch, "stream": stream, "record": record_kind(a, stream),
             "start_s": start, "end_s": end, "duration_s": end - start}
            for r, a, stream, start, end in _records(est)]
    return pd.DataFrame(rows).sort_values(["rank", "start_s"], kind="stable").reset_index(drop=True)


def memory_timeline(est: Estimate) -> list[list[tuple[float, float]]]:
    """Per rank: (time_s, bytes) steps of its memory over the step, the estimate's account of it:
    everything but the activations (parameters, gradients, optimizer state, buffers, the
    backward's workspace), held through the step, plus the activations in flight, changed by the
    compute actions alone (the engine's Timeline.activation_changes).  Its maximum is the
    rank's estimated peak (RankEstimate.peak_memory_bytes)."""
    _records(est)
    out = []
    for rank in est.ranks:
        cur = rank.memory.total_bytes - rank.memory.activations_bytes
        points = [(0.0, cur)]
        for t, delta in est.timeline.activation_changes(rank.rank):
            cur += delta
            points.append((t, cur))
        points.append((est.step_time_s, cur))
        out.append(points)
    return out


def record_kind(action: Action, stream: str) -> str:
    """What a (rank, action, stream, start_s, end_s) record is, as charts and traces name and
    colour it: on the compute stream, its action's kind (F, B, I, W, OPTIMIZER); elsewhere the
    work done for the action, never a compute kind: INPUT (stage 0's samples loaded before its
    F), GATHER (ZeRO's parameter all-gather and FSDP2's hooks around an F, B or OPTIMIZER, where
    not hidden), else the communication's own kind (SEND_F, SEND_B, REDUCE_GRAD, REDUCE_TIED)."""
    if stream == COMPUTE:
        return action.kind.value
    if stream == INPUT:
        return "INPUT"
    return "GATHER" if action.kind.is_compute else action.kind.value


def record_name(action: Action, stream: str) -> str:
    """A record's label: the action ('1F3') on the compute stream and for communication actions,
    the work and the action it serves elsewhere ('GATHER 1F3', 'INPUT 0F3')."""
    kind = record_kind(action, stream)
    return str(action) if kind == action.kind.value else f"{kind} {action}"


def bars(records) -> list[tuple[int, str, str, str, float, float]]:
    """(rank, stream, kind, name, start_s, end_s) of each record as the Gantt chart draws it and
    the report page lists it: kind and name as record_kind and record_name give them."""
    return [(r, stream, record_kind(a, stream), record_name(a, stream), start, end)
            for r, a, stream, start, end in records]


def trace_from_records(records, process_names: dict[int, str], memory: list | None = None,
                       other: dict | None = None) -> dict:
    """Chrome trace JSON (open in Perfetto / chrome://tracing) from (rank, action, stream, start_s,
    end_s) records: one process per pipeline rank, one thread per stream, optional memory counters.
    The simulator and the executor both write this layout, so the two traces line up."""
    events = []
    for pid, name in sorted(process_names.items()):
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}})
        for stream, tid in STREAM_TID.items():
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": stream}})
    for r, a, stream, start, end in records:
        events.append({"ph": "X", "name": record_name(a, stream), "cat": record_kind(a, stream), "pid": r,
                       "tid": STREAM_TID[stream],
                       "ts": start * 1e6, "dur": (end - start) * 1e6,
                       "args": {"stage": a.stage, "microbatch": a.microbatch}})
    for r, points in enumerate(memory or []):
        for t, nbytes in points:
            events.append({"ph": "C", "name": "memory", "pid": r, "ts": t * 1e6, "args": {"MiB": nbytes / 2**20}})
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other or {}}


def chrome_trace(est: Estimate, label: str = "simulated") -> dict:
    names = {r.rank: f"{label} rank {r.rank} (global {r.global_rank}, stages {','.join(map(str, r.stages))})"
             for r in est.ranks}
    return trace_from_records(_records(est), names, memory_timeline(est), {"config": est.config})


def timeline_grid(est: Estimate) -> str:
    """Compute actions as a step x rank grid: one row per distinct start time, in time order."""
    from parsim.schedule.validate import render_grid

    compute = [(r, a, start) for r, a, stream, start, _ in _records(est) if stream == "compute"]
    starts = sorted({round(start, 12) for _, _, start in compute})
    row = {t: i for i, t in enumerate(starts)}
    columns = [[None] * len(starts) for _ in est.ranks]
    for r, a, start in compute:
        columns[r][row[round(start, 12)]] = a
    return render_grid(columns)
