"""Each run of runners/device_check.sh against the two models' 90% step-time bands: the plan's
(the analytical model's, from the public benchmark's out-of-sample residuals, parsim.sim.band) and
the profiled model's (its profile's noise with the profiled model's errors, own or borrowed,
parsim.sim.interval), read from the RESULT and PROFILED_JSON lines of runs.txt; a BANDS section
and, per model, how many of the runs fell inside: the coverage the bands claim, measured.

    python3 runners/band_coverage.py runs.txt
    python3 runners/band_coverage.py --result MODEL MEASURED.json PLAN.json   # a run's RESULT line
    python3 runners/band_coverage.py --profiled MODEL PLAN.json    # the PROFILED_JSON line of a priced plan

The lines it reads are the lines it writes (result_line, profiled_line): one module for the section.
"""

from __future__ import annotations

import json
import sys

from parsim.sim.band import Interval


def records(lines, tag: str) -> dict:
    """model -> the JSON of each line starting with ``tag`` (the last where a model has several)."""
    out = {}
    for line in lines:
        if line.startswith(tag + " "):
            d = json.loads(line[len(tag) + 1:])
            out[d["model"]] = d
    return out


def verdict(measured: float, predicted: float | None, band: dict | None) -> tuple[str, bool | None]:
    if predicted is None:
        return "not priced", None
    err = f"{predicted * 1e3:9.2f} ms ({(predicted / measured - 1):+6.1%})"
    if band is None:
        return err + "  no band", None
    iv = Interval.from_json(band)
    inside = iv.contains(measured)
    return f"{err}  [{iv.low * 1e3:.2f}, {iv.high * 1e3:.2f}] {'in' if inside else 'OUT'}", inside


def main(path: str) -> None:
    lines = open(path).read().splitlines()
    runs, profiled = records(lines, "RESULT"), records(lines, "PROFILED_JSON")
    held = {"analytical": [], "profiled": []}
    print("BANDS (measured step; each model's prediction, its error against the measurement, its 90% band)")
    for model, r in runs.items():
        measured = r.get("step_time_s")
        if not measured:
            print(f"  {model}: no measured step")
            continue
        p = profiled.get(model, {})
        rows = (("analytical", (r.get("predicted") or {}).get("step_time_s"), r.get("step_time_band")),
                ("profiled", p.get("step_time_s"), p.get("step_time_band")))
        print(f"  {model}: measured {measured * 1e3:.2f} ms")
        for name, predicted, band in rows:
            text, inside = verdict(measured, predicted, band)
            print(f"    {name:10s} {text}")
            if inside is not None:
                held[name].append(inside)
    for name, seen in held.items():
        print(f"  {name} bands: {sum(seen)} of {len(seen)} runs inside")


# what a RESULT line keeps of `parsim run`'s measured.json (parsim.exec.measure)
RESULT_KEYS = ("step_time_s", "step_times_s", "peak_memory_bytes", "peak_memory_reserved_bytes", "predicted",
               "microbatch_size", "config", "device", "backend")


def result_line(model: str, measured_path: str, plan_path: str) -> str:
    """The RESULT line of ``model``'s run: what its measured.json says, beside the band of its plan
    as `parsim plan -o` wrote it (the analytical model's)."""
    m = json.load(open(measured_path))
    band = json.load(open(plan_path))["estimate"].get("step_time_band")
    return "RESULT " + json.dumps({"model": model, **{k: m.get(k) for k in RESULT_KEYS}, "step_time_band": band})


def profiled_line(model: str, plan_path: str) -> str:
    """The PROFILED_JSON line of ``model``'s plan as `parsim simulate --profile ... -o` wrote it."""
    e = json.load(open(plan_path))["estimate"]
    return "PROFILED_JSON " + json.dumps({"model": model, "step_time_s": e["step_time_s"],
                                          "step_time_band": e.get("step_time_band")})


if __name__ == "__main__":
    args = sys.argv[1:]
    if not (len(args) == 1 or (len(args) == 3 and args[0] == "--profiled")
            or (len(args) == 4 and args[0] == "--result")):
        sys.exit("band_coverage: usage: band_coverage.py runs.txt | band_coverage.py --result MODEL MEASURED.json "
                 "PLAN.json | band_coverage.py --profiled MODEL PLAN.json")
    try:
        if args[0] == "--result":
            print(result_line(*args[1:]))
        elif args[0] == "--profiled":
            print(profiled_line(*args[1:]))
        else:
            main(args[0])
    except (OSError, ValueError, KeyError) as e:       # a missing file, a line or a plan not as written
        sys.exit(f"band_coverage: error: {' '.join(args)}: {type(e).__name__}: {e}")
