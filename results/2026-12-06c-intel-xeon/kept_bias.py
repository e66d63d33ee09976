"""Do the canary's dropped measurements make the CPU profiles fast?  A layer profile's medians are taken over
the rounds whose canary kept the measurement (parsim.profile.rounds: a canary more than 10% slower than its
median, or other processes' CPU, drops it).  On a VM whose speed as a whole moves (this sitting's Intel host:
canary readings at 0.65-1.5x their median in a one-process profile, 6 to 12 of 15 rounds kept per size), the
kept rounds are the fast ones, while a run meets the host in every state.  Every run of set 2026-12-06's first
report but one was slower than priced.

For every run of the committed CPU evidence since profiles were taken in rounds, this prices the run's plan
again from the profiles of its pass twice: as shipped (medians over the kept rounds), and with every layer's
medians taken over all rounds (the profile's JSON rewritten in a temporary folder: each time field's median
over every round, every round kept).  It prints per evidence folder and overall the mean signed error
log(measured / predicted) and the MAPE, both ways, over runs (each pass's run against that pass's prediction,
not validate's per-plan medians).  A question, not a change: nothing in parsim reads this.

    python -W ignore results/2026-12-06c-intel-xeon/kept_bias.py > results/2026-12-06c-intel-xeon/kept-bias.txt
"""

from __future__ import annotations

import json
import math
import os
import shutil
import statistics
import sys
import tempfile
from dataclasses import replace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06b-amd-epyc"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from host_term_retro import FOLDERS, each_run, measured_for  # noqa: E402
from host_term_variants import HELDOUT  # noqa: E402

from parsim.model.spec import load_model  # noqa: E402
from parsim.sim import simulate  # noqa: E402
from parsim.validation import Measured, Pricing, check_shard_section  # noqa: E402


def all_rounds(src: str, dst: str) -> None:
    """``src``'s layer profile with every layer's time fields the median over all its rounds, all kept."""
    with open(src) as f:
        d = json.load(f)
    for layer in d["layers"]:
        for key, rows in layer.get("round_s", {}).items():
            if key in layer:
                layer[key] = [statistics.median(r[j] for r in rows if r[j] == r[j]) for j in range(len(rows[0]))]
    d["rounds"]["kept"] = [[True] * len(row) for row in d["rounds"]["kept"]]
    with open(dst, "w") as f:
        json.dump(d, f)


def rewritten(m: Measured, tmp: str, k: int) -> Measured:
    layers = {}
    for n, path in m.layers.items():
        out = os.path.join(tmp, f"pass{k + 1}.{n}proc.json")
        all_rounds(path, out)
        layers[n] = out
    return replace(m, layers=layers)


def errors(path: str, tmp: str):
    """(label, log error as shipped, log error over all rounds) of each run of one evidence folder."""
    root = os.path.dirname(path)
    d = json.load(open(path))
    passes = d["passes"]
    spec = check_shard_section(load_model(d["model"]))
    ways = {}
    for name in ("kept", "all"):
        ways[name] = [Pricing(spec, d["cluster"], d["set"], d["model"],
                              measured_for(root, k) if name == "kept" else rewritten(measured_for(root, k), tmp, k))
                      for k in range(passes)]
    for label, k, measured, cfg in each_run(d, spec, ways["kept"][0]):
        out = []
        for name in ("kept", "all"):
            priced = ways[name][k]
            step = simulate(spec.graph, spec.training, priced.cluster, cfg, priced.compute_for(cfg),
                            strategies=spec.shard, keep_timeline=False).step_time_s
            out.append(math.log(measured / step))
        yield label, out[0], out[1]


def line(name: str, rows) -> str:
    kept = [a for _, a, _ in rows]
    every = [b for _, _, b in rows]
    mape = lambda xs: statistics.fmean(abs(math.exp(-x) - 1) for x in xs)  # noqa: E731  |pred/meas - 1|
    return (f"{name:78s} {len(rows):4d} {statistics.fmean(kept):+9.1%} {mape(kept):7.1%} "
            f"{statistics.fmean(every):+9.1%} {mape(every):7.1%}")


def main() -> None:
    print(f"{'evidence':78s} {'runs':>4s} {'kept: bias':>9s} {'MAPE':>7s} {'all: bias':>9s} {'MAPE':>7s}")
    print("(bias: mean log(measured / predicted), > 0 = runs slower than priced; MAPE of the step time)")
    for name, paths in (("development (in-sample)", FOLDERS), ("set 2026-12-06, both reports", HELDOUT)):
        every = []
        for path in paths:
            tmp = tempfile.mkdtemp(prefix="kept-bias-")
            try:
                rows = list(errors(path, tmp))
            finally:
                shutil.rmtree(tmp)
            every += rows
            print(line(os.path.dirname(path)[8:], rows), flush=True)
        print(line(f"## {name}", every) + "\n", flush=True)


if __name__ == "__main__":
    main()
