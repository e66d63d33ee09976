"""Is parsim.sim.simulate.paused_gc still worth its lines?  Issue 40 asked that the planner's garbage-
collector changes go unless a benchmark shows them worth keeping; their docstring's figure was one run
each on a shared host ("unconfirmed").  Here: searches and simulations with the collector paused (as
shipped) and running (paused_gc replaced by a null context in both modules that use it), alternated
A B A B in fresh processes on a quiet host, and each pair's ratio.

    python results/2026-12-04f-intel-xeon/gc_ab.py > results/2026-12-04f-intel-xeon/gc-ab.txt
"""

import json
import statistics
import subprocess
import sys

CHILD = r'''
import contextlib, json, sys, time
variant, what = sys.argv[1], sys.argv[2:]
if variant == "running":
    import parsim.search.planner, parsim.sim.simulate
    parsim.search.planner.paused_gc = parsim.sim.simulate.paused_gc = contextlib.nullcontext
if what[0] == "search":
    sys.path.insert(0, "benchmarks")
    from bench_planner import _one
    print(json.dumps(_one(what[1], what[2])))
else:
    sys.path.insert(0, "benchmarks")
    from bench_simulator import case
    t = case(int(what[1]), int(what[2]), repeats=5)
    print(json.dumps({"search_time_s": t, "outcome": f"simulate p={what[1]} m={what[2]}, median of 5"}))
'''

CASES = [("GPT-3 175B on 1,024 A100 (search)", ["search", "examples/gpt3_175b.yaml", "dgx-a100:128x8"], 5),
         ("DeepSeek-V3 on 2,048 H100 (search)", ["search", "examples/deepseek_v3.yaml", "dgx-h100-superpod:256x8"], 3),
         ("simulate p=64, m=256, dp=8 (a whole event run: below the steady-state shortcut)", ["sim", "64", "256"], 5)]


def one(variant: str, what: list[str]) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, variant, *what], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["search_time_s"]


def main() -> None:
    for label, what, pairs in CASES:
        paused, running = [], []
        for _ in range(pairs):
            paused.append(one("paused", what))
            running.append(one("running", what))
        ratios = sorted(r / p for p, r in zip(paused, running))
        print(f"{label}: paused (shipped) {statistics.median(paused):.3f} s "
              f"[{min(paused):.3f}-{max(paused):.3f}], collector running {statistics.median(running):.3f} s "
              f"[{min(running):.3f}-{max(running):.3f}]; running / paused per pair "
              f"{', '.join(f'{x:.2f}' for x in ratios)} (median {statistics.median(ratios):.2f})", flush=True)


if __name__ == "__main__":
    main()
