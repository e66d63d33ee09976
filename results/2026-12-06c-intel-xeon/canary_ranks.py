"""Why is a two-process layer profile's canary noisier than a one-process one?  (Issue 37, the last
stop's next step 1.)

The host term of the CPU step intervals (parsim.sim.interval.host_log_errors) draws log(reading /
median) over a profile's canary readings.  A two-process profile (``parsim profile --nproc 2``)
keeps, for each measurement, the larger of its two ranks' readings (parsim.profile.tables), taken
at once on the two cores after a barrier (parsim.profile.layers).  Its p90 / median was 1.13-1.25
against 1.00-1.21 for one process on set 2026-12-06's first report.  This script runs the real
profiler, alternating one and two processes, and keeps each rank's own readings (the merge is
wrapped, not changed), so that the spread of one rank's readings, of the larger of two, and of a
lone process can be told apart, with the two ranks' correlation.

    python results/2026-12-06c-intel-xeon/canary_ranks.py results/heldout/models/resnext_cifar.yaml \
        --sizes 60,30,15 --reps 2 --out results/2026-12-06c-intel-xeon/canary-ranks

Run it alone on the machine: the figures are timings.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys


def _worker() -> int:
    """A profiler rank: parsim.profile.layers.main, with its merge wrapped to keep each rank's readings."""
    import parsim.profile.layers as layers
    from parsim.fileio import write_json

    merge = layers.mean_tables
    out = sys.argv[sys.argv.index("-o") + 1]

    def keep(tables):
        write_json(out + ".ranks.json", {"canary_s": [t["rounds"]["canary_s"] for t in tables]})
        return merge(tables)

    layers.mean_tables = keep
    return layers.main(sys.argv[1:])


def _ratio(readings, q: float) -> float:
    mid = statistics.median(readings)
    xs = sorted(readings)
    return xs[min(len(xs) - 1, int(q * len(xs)))] / mid


def summary(ranks: list[list[list[float]]]) -> dict:
    """p90 / median of each rank's readings, of the per-measurement max over ranks, and the ranks'
    correlation of log(reading / median)."""
    flat = [[c for row in r for c in row] for r in ranks]
    out = {f"rank{i}_p90": _ratio(f, 0.9) for i, f in enumerate(flat)}
    out.update({f"rank{i}_p50_ms": statistics.median(f) * 1e3 for i, f in enumerate(flat)})
    if len(flat) == 2:
        both = [max(a, b) for a, b in zip(*flat)]
        out["max_p90"] = _ratio(both, 0.9)
        logs = [[math.log(c / statistics.median(f)) for c in f] for f in flat]
        out["corr"] = statistics.correlation(*logs) if len(logs[0]) > 2 else float("nan")
        out["disturbed_share"] = {f"rank{i}": sum(c > 1.1 * statistics.median(f) for c in f) / len(f)
                                  for i, f in enumerate(flat)}
        out["disturbed_share"]["max"] = sum(c > 1.1 * statistics.median(both) for c in both) / len(both)
    else:
        out["disturbed_share"] = {"rank0": sum(c > 1.1 * statistics.median(flat[0]) for c in flat[0]) / len(flat[0])}
    out["readings"] = len(flat[0])
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--sizes", required=True)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    sys.path.insert(0, os.getcwd())
    os.environ["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(__file__)),
                                                os.environ.get("PYTHONPATH", "")])
    from parsim.exec.launch import launch
    from parsim.fileio import write_text
    from parsim.profile.rounds import RoundsPolicy

    os.makedirs(args.out, exist_ok=True)
    name = os.path.splitext(os.path.basename(args.model))[0]
    lines, rows = [f"# python {' '.join(sys.argv)}"], []
    for rep in range(args.reps):
        for nproc in (1, 2):                     # alternated: the host drifts
            out = os.path.join(args.out, f"{name}.rep{rep}.{nproc}proc.profile.json")
            rc = launch([args.model, "--sizes", args.sizes, "--device", "cpu", *RoundsPolicy().argv(), "-o", out],
                        nproc, timeout_s=1200, module="canary_ranks", quiet=True)
            if rc:
                return rc
            with open(out + ".ranks.json") as f:
                s = summary(json.load(f)["canary_s"])
            rows.append({"rep": rep, "nproc": nproc, **s})
            lines.append(f"{name} rep {rep} {nproc} proc: " + json.dumps(s, default=lambda x: round(x, 3)))
            print(lines[-1], flush=True)
    write_text(os.path.join(args.out, f"{name}.txt"), "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    if "RANK" in os.environ:
        from parsim.exec.runtime import exit_without_teardown

        exit_without_teardown(_worker())
    sys.exit(main())
