"""Views of a simulated (or measured) step: per-action DataFrame, Chrome trace, text grid.

Records are (rank, action, stream, start_s, end_s), the engine's format; the executor writes
the same, so a measured trace lines up with a simulated one action by action.
"""

from __future__ import annotations

from parsim.schedule.actions import Kind
from parsim.sim.estimate import Estimate

STREAM_TID = {"compute": 0, "p2p": 1, "dp": 2, "input": 3}


def _records(est: Estimate):
    if est.timeline is None:
        raise ValueError("this Estimate kept no timeline; simulate(..., keep_timeline=True)")
    return est.timeline.records


def action_frame(est: Estimate):
    """A pandas DataFrame, one row per action: rank, stage, kind, microbatch, stream, times."""
    import pandas as pd

    rows = [{"rank": r, "global_rank": est.ranks[r].global_rank, "action": str(a), "stage": a.stage,
             "kind": a.kind.value, "microbatch": a.microbatch, "stream": stream,
             "start_s": start, "end_s": end, "duration_s": end - start}
            for r, a, stream, start, end in _records(est)]
    return pd.DataFrame(rows).sort_values(["rank", "start_s"], kind="stable").reset_index(drop=True)


def memory_timeline(est: Estimate) -> list[list[tuple[float, float]]]:
    """Per rank: (time_s, bytes) steps of total memory (static + activations in flight)."""
    out = []
    records = _records(est)
    free_kind = est.timeline.frees_activations      # the engine's own rule
    for rank in est.ranks:
        m = rank.memory
        static = m.params_bytes + m.grads_bytes + m.optimizer_bytes + m.comm_buffers_bytes
        events = []
        for r, a, _, start, end in records:
            if r != rank.rank:
                continue
            if a.kind is Kind.F:
                events.append((start, est.stage_saved_bytes[a.stage]))
            elif a.kind is free_kind:
                events.append((end, -est.stage_saved_bytes[a.stage]))
        events.sort(key=lambda e: (e[0], e[1]))
        cur, points = static, [(0.0, static)]
        for t, delta in events:
            cur += delta
            points.append((t, cur))
        points.append((est.step_time_s, cur))
        out.append(points)
    return out


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
        events.append({"ph": "X", "name": str(a), "cat": a.kind.value, "pid": r, "tid": STREAM_TID[stream],
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
