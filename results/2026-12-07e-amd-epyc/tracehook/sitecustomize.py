# Diagnosis only (first_stage_schedules.py beside this folder): under PARSIM_TRACE_PEAK, the executor's
# measured step also writes, per rank, the allocations alive at its peak, by the operator that made them.
import os

if os.environ.get("PARSIM_TRACE_PEAK"):
    import json
    import sys

    import parsim.exec.measure as measure

    # where an allocation falls: the shortest operator spanning it, as the last sitting's first-stage trace reads it
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "2026-12-07c-amd-epyc"))
    from first_stage_trace import innermost as _innermost

    _events = measure.profiled_events

    def profiled_peak_bytes(step_fn):
        events = _events(step_fn)
        ops = [e for e in events if e.get("ph") == "X" and "dur" in e]
        memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
        totals = [e["args"].get("Total Allocated", 0) for e in memory]
        k = max(range(len(totals)), key=totals.__getitem__)
        live = {}
        for e in memory[:k + 1]:
            a = e["args"]
            if a["Bytes"] > 0:
                live[a["Addr"]] = (a["Bytes"], e["ts"])
            else:
                live.pop(a["Addr"], None)
        rows = [(size, _innermost(ops, ts), ts - memory[0]["ts"]) for size, ts in live.values()]
        out = {"peak_total": totals[k], "start_total": totals[0] - memory[0]["args"]["Bytes"],
               "peak_op": _innermost(ops, memory[k]["ts"]), "peak_t_us": memory[k]["ts"] - memory[0]["ts"],
               "live": sorted(rows, reverse=True)}
        with open(f"{os.environ['PARSIM_TRACE_PEAK']}.rank{os.environ.get('RANK', '0')}.json", "w") as f:
            json.dump(out, f)
        return int(totals[k])

    measure.profiled_peak_bytes = profiled_peak_bytes
