"""A run's measurement, reported: what ``parsim run`` writes beside measured.json and prints
(the executor, parsim.exec.measure.record_run, hands its numbers here through parsim.run)."""

from __future__ import annotations

import json
import os

from parsim.fileio import write_json
from parsim.fmt import human_bytes
from parsim.report.cli_text import run_summary_lines
from parsim.report.timeline import trace_from_records


def report_measurement(out: dict, records: list, names: dict, out_dir: str, as_json: bool) -> None:
    """measured_trace.json in ``out_dir`` (replica 0's timed actions, ``records``, on its pipeline
    ranks, ``names``), then the summary on stdout: a few fields of ``out`` (measured.json) as JSON,
    or lines."""
    write_json(os.path.join(out_dir, "measured_trace.json"),
               trace_from_records(records, names, None, {"config": out["config"]}))
    if as_json:
        print(json.dumps({"step_time_s": out["step_time_s"], "peak_memory_bytes": out["peak_memory_bytes"],
                          "peak_memory_reserved_bytes": out["peak_memory_reserved_bytes"],
                          "loss": out["loss"], "accuracy": out.get("accuracy"), "predicted": out["predicted"],
                          "out": out_dir}, indent=2))
        return
    if out["peak_memory_reserved_bytes"] is not None:
        print("peak memory per rank, allocated / reserved by the caching allocator (unused share of its pool): "
              + ", ".join(f"{human_bytes(a)} / {human_bytes(r)} ({f:.1%})" for a, r, f in
                          zip(out["peak_memory_bytes"], out["peak_memory_reserved_bytes"], out["allocator_fragmentation"])))
    for line in run_summary_lines(out, out_dir):
        print(line)
