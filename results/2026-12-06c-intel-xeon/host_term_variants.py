"""The host term of the CPU step intervals (parsim.sim.interval, source 3) taken apart by the profile that priced
each run: one process (the single-process plans) or two (dp=2 and pp=2), on every run of the committed CPU
evidence since profiles were taken in rounds.  For each run it prices the plan again from the profiles of its
pass (as ../2026-12-06b-amd-epyc/host_term_retro.py does) and forms its 90% interval six ways:

- ``none``: without the term;
- ``readings``: the term as shipped at 0c93e1d, every canary reading of the plan's own profile (a two-process profile
  keeps the larger of its ranks' readings per measurement, parsim.profile.tables);
- ``one-process``: every plan takes the canary readings of its pass's one-process profile;
- ``round-medians``: the plan's own profile, one reading per round (the median over that round's sizes): the
  host's slower movements only, the 2-ms bursts that a seconds-long run averages out left out;
- ``kept-reference``: every reading of the plan's own profile, as log(reading / the median of the readings
  whose measurement the canary kept): the prediction rests on the kept measurements only
  (parsim.profile.rounds), so the host's state it stands for is theirs, not the median over all readings;
- ``by-processes``: ``round-medians`` for a plan priced from a one-process profile, ``readings`` for one priced
  from a profile of several processes (the profile's concurrent_processes).

The first five were run on the development evidence and both reports of set 2026-12-06 before parsim changed;
``round-medians`` is what parsim shipped from c98f155, and ``by-processes`` what it ships since the sixty-fifth
sitting (parsim.sim.interval.host_log_errors), after set 2026-12-06b's first report
(../2026-12-06d-intel-xeon/); this script checks that its own spelling of that rule gives parsim's interval for
every run (host-term-variants.txt was written under c98f155, when it checked ``round-medians``).  The CPU devices only: the rules
here do not check the profile's device, as every profile of this evidence is a CPU's.

It prints, per profile kind and variant, the runs inside, the median upper reach above the prediction, and the
mean interval score (Gneiting and Raftery 2007, eq. 43: width + (2/alpha) x the distance outside; lower is better,
as a share of the measured step).  In-sample for the development sets; set 2026-12-06's two reports are what
the change was chosen on, so that set is a development set from the change on (set 2026-12-06b measures it).

    python -W ignore results/2026-12-06c-intel-xeon/host_term_variants.py \
        > results/2026-12-06c-intel-xeon/host-term-variants.txt

With validation.json paths as arguments it prints those runs alone (set 2026-12-06b's first report:
../2026-12-06d-intel-xeon/host-term-variants-2026-12-06b.txt).
"""

from __future__ import annotations

import glob
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-06b-amd-epyc"))

from host_term_retro import FOLDERS, each_run, measured_for  # noqa: E402

from parsim.model.spec import load_model  # noqa: E402
from parsim.plan import ParallelConfig  # noqa: E402
from parsim.sim import simulate  # noqa: E402
from parsim.sim.band import Interval  # noqa: E402
from parsim.sim.interval import LEVEL, compose, quantiles, residual_kind, residuals_for, step_interval  # noqa: E402
from parsim.validation import Pricing, check_shard_section  # noqa: E402

HELDOUT = sorted(glob.glob("results/2026-12-06b-amd-epyc/heldout-2026-12-06/*/validation.json")
                 + glob.glob("results/2026-12-06c-intel-xeon/heldout-2026-12-06/*/validation.json"))
VARIANTS = ("none", "readings", "one-process", "round-medians", "kept-reference", "by-processes")


def logs(values, ref=None) -> tuple[float, ...]:
    """log(v / ref) of each positive value, ref their median by default; () for fewer than two."""
    xs = [v for v in values if v > 0]
    if len(xs) < 2:
        return ()
    ref = statistics.median(xs) if ref is None else ref
    return tuple(math.log(v / ref) for v in xs)


def host_variants(table, one) -> dict:
    """variant -> the host's log errors (module docstring) for a plan priced from ``table``; each rule spelled
    here, so that this script reads the same whatever parsim ships (0c93e1d shipped ``readings``, c98f155
    ``round-medians``; since the sixty-fifth sitting ``by-processes``, which main() checks against parsim's own)."""
    r = table.rounds
    n = len(r.kept[0]) if r.kept else 0
    rows = [r.canary_s[i:i + n] for i in range(0, len(r.canary_s), n)] if n else []
    kept = [c for row, k in zip(rows, r.kept) for c, ok in zip(row, k) if ok and c > 0]
    readings = logs(r.canary_s)
    out = {"none": (), "readings": readings, "one-process": logs(one.rounds.canary_s),
           "round-medians": logs([statistics.median(x for x in row if x > 0) for row in rows
                                  if any(x > 0 for x in row)]),
           "kept-reference": logs(r.canary_s, statistics.median(kept)) if kept and readings else ()}
    out["by-processes"] = out["readings"] if r.processes > 1 else out["round-medians"]
    return out


def band(step, reps, res, kind, host) -> Interval:
    errors = res.step[kind] if res is not None else ()
    lo, hi = compose(reps, errors, LEVEL, host=host) if host or errors else quantiles(reps, LEVEL)
    return Interval(step, lo, hi, LEVEL, "")


def interval_score(lo: float, hi: float, y: float, alpha: float = 1 - LEVEL) -> float:
    return (hi - lo) + 2 / alpha * (max(lo - y, 0.0) + max(y - hi, 0.0))


def runs(path: str):
    """(profile kind, predicted step s, measured step s, {variant: interval}, plan label) of each run of one
    evidence folder."""
    root = os.path.dirname(path)
    d = json.load(open(path))
    spec = check_shard_section(load_model(d["model"]))
    kind = residual_kind(spec.graph)
    res = residuals_for(d["cluster"], kind)
    pricing = [Pricing(spec, d["cluster"], d["set"], d["model"], measured_for(root, k)) for k in range(d["passes"])]
    for label, k, measured, cfg in each_run(d, spec, pricing[0]):
        priced = pricing[k]
        model = priced.compute_for(cfg)
        one = priced.compute_for(ParallelConfig(1, 1, 1)).table
        step = simulate(spec.graph, spec.training, priced.cluster, cfg, model, strategies=spec.shard,
                        keep_timeline=False).step_time_s
        reps = [simulate(spec.graph, spec.training, priced.cluster, cfg, m, strategies=spec.shard,
                         keep_timeline=False).step_time_s for m in priced.replicates(model)]
        hosts = host_variants(model.table, one)
        bands = {v: band(step, reps, res, kind, h) for v, h in hosts.items()}
        shipped = step_interval(step, reps, model.table, res, kind)
        assert (shipped.low, shipped.high) == (bands["by-processes"].low, bands["by-processes"].high)
        procs = "2proc" if cfg.dp * cfg.pp > 1 else "1proc"
        yield procs, step, measured, bands, label


def main(paths: list[str]) -> None:
    groups = ((("development (in-sample)", FOLDERS),
               ("set 2026-12-06, both reports (the change was chosen on them)", HELDOUT)) if not paths
              else (("the validation.json files named", paths),))
    for name, paths in groups:
        rows = [r for p in paths for r in runs(p)]
        print(f"## {name}: {len(rows)} runs from {len(paths)} evidence folders")
        print(f"{'profile':7s} {'variant':14s} {'runs':>5s} {'inside':>7s} {'share':>6s} {'upper reach (median)':>21s} "
              f"{'interval score (mean)':>22s}")
        for procs in ("1proc", "2proc", "all"):
            sub = [r for r in rows if procs in ("all", r[0])]
            for v in VARIANTS:
                inside = sum(b[v].low <= y <= b[v].high for _, _, y, b, _ in sub)
                reach = statistics.median(b[v].high / s - 1 for _, s, _, b, _ in sub)
                score = statistics.fmean(interval_score(b[v].low, b[v].high, y) / y for _, _, y, b, _ in sub)
                print(f"{procs:7s} {v:14s} {len(sub):5d} {inside:7d} {inside / len(sub):6.1%} {reach:+21.1%} "
                      f"{score:22.3f}")
        print(flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
