"""Concurrent profilers' tables as one (``parsim profile --nproc N`` writes their merge): rounds
paired by index, a round kept where every process kept it, each entry the median over the kept
rounds with its interval (parsim.profile.rounds); the slowest rank's pace; the gradient
synchronisation diagnostics averaged.  Pure: no torch."""

from __future__ import annotations

import statistics

TIME_KEYS = ("fwd_s", "bwd_s", "bwd_input_s", "bwd_weight_s")


def fwd_plus_bwd(values: dict) -> dict:
    """{(layer, kind): seconds} of one round and size -> {layer: F + B}."""
    out: dict = {}
    for (layer, kind), v in values.items():
        if kind in ("fwd_s", "bwd_s"):
            out[layer] = out.get(layer, 0.0) + v
    return out


def widths(intervals, medians) -> list[float]:
    """Per size, an interval's width over its median: the entry's relative spread."""
    return [(hi - lo) / m if m > 0 else 0.0 for (lo, hi), m in zip(intervals, medians)]


def mean_tables(tables: list[dict]) -> dict:
    """The concurrent profilers' tables as one.  Profiles taken in rounds (lock-step, so their
    rounds pair by index): each round's value is the processes' mean, a round is kept where every
    process kept it, and each entry is the median over the kept rounds, with its interval
    (``parsim.profile.rounds``).  Older tables (no rounds): the mean of the processes' medians.
    Per row ``proc_spread`` is (max - min) / mean of the processes' F+B per size; entries whose
    interval is wider than the noise threshold either side are flagged ``noisy``; confirmed
    falls are those of any process."""
    from parsim.profile.rounds import HostSample, Rounds, kept_values, median_interval

    out = dict(tables[0])
    out["layers"] = []
    rounds = all("rounds" in t for t in tables)
    kept = [[all(k) for k in zip(*rows)] for rows in zip(*(t["rounds"]["kept"] for t in tables))] if rounds else None
    threshold = out.get("noise_threshold", 0.05)
    for rows in zip(*(t["layers"] for t in tables)):
        row = dict(rows[0])
        noisy = set()
        for key in TIME_KEYS:
            if key not in row:
                continue
            if not rounds:
                row[key] = [statistics.fmean(v) for v in zip(*(r[key] for r in rows))]
                continue
            per_round = [[statistics.fmean(v) for v in zip(*rs)] for rs in zip(*(r["round_s"][key] for r in rows))]
            row["round_s"] = {**row["round_s"], key: per_round}
            values = [kept_values(per_round, kept, j) for j in range(len(out["microbatch_sizes"]))]
            row[key] = [statistics.median(v) for v in values]
            intervals = [median_interval(v) for v in values]
            if key in ("fwd_s", "bwd_s"):
                row[key.replace("_s", "_spread")] = widths(intervals, row[key])
            noisy |= {b for b, (lo, hi), m in zip(out["microbatch_sizes"], intervals, row[key])
                      if m > 0 and max(m - lo, hi - m) > threshold * m}
        if not rounds:
            for key in ("fwd_spread", "bwd_spread"):
                if key in row:
                    row[key] = [max(v) for v in zip(*(r[key] for r in rows))]
            noisy = {b for r in rows for b in r.get("noisy", [])}
        totals = [[f + b for f, b in zip(r["fwd_s"], r["bwd_s"])] for r in rows]
        row["proc_spread"] = [(max(v) - min(v)) / statistics.fmean(v) if statistics.fmean(v) > 0 else 0.0
                              for v in zip(*totals)]
        falls = sorted({tuple(p) for r in rows for p in r.get("nonmonotone_confirmed", [])})
        row.pop("noisy", None)
        row.pop("nonmonotone_confirmed", None)
        if noisy:
            row["noisy"] = sorted(noisy)
        if falls:
            row["nonmonotone_confirmed"] = [list(p) for p in falls]
        out["layers"].append(row)
    if rounds:
        merged = {(row["name"], k): v for row in out["layers"] for k, v in row["round_s"].items()}
        foreign, steal = (_worst(t["rounds"][key] for t in tables) for key in ("foreign", "steal"))
        both = Rounds(tuple(out["microbatch_sizes"]), merged, tuple(map(tuple, kept)),
                      tuple(tuple(max(c) for c in zip(*rs)) for rs in zip(*(t["rounds"]["canary_s"] for t in tables))),
                      tuple(tuple(HostSample(f, s) for f, s in zip(rf, rs)) for rf, rs in zip(foreign, steal)),
                      tables[0]["rounds"]["stopped"], tables[0]["rounds"]["target"])
        out["rounds"] = {**tables[0]["rounds"], "kept": kept, "precision": both.precision,
                         "canary_s": [list(c) for c in both.canary_s], "foreign": foreign, "steal": steal,
                         "disturbed": both.disturbed,
                         "optimizer_s_per_param": [statistics.fmean(v) for v in
                                                   zip(*(t["rounds"]["optimizer_s_per_param"] for t in tables))]}
    out.pop("remeasured", None)
    out["optimizer_s_per_param"] = statistics.fmean(t["optimizer_s_per_param"] for t in tables)
    out.pop("chain_s", None)
    # a tensor- or expert-parallel profile's processes already wait for each other inside the layers
    if len(tables) > 1 and "tp" not in tables[0] and "ep" not in tables[0] and all(t.get("chain_s") for t in tables):
        out["slowest_rank"] = slowest_rank([t["chain_s"] for t in tables])
    if all("grad_sync" in t for t in tables):       # the same size on every process
        out["grad_sync"] = mean_entry([t["grad_sync"] for t in tables], ("backward_s", "all_reduce_s", "both_s", "cost"),
                                      "cost_min", "cost_max")
    if all("fsdp_sync" in t for t in tables):
        out["fsdp_sync"] = mean_entry([t["fsdp_sync"] for t in tables], ("backward_s", "fsdp_backward_s", "added_s"),
                                      "added_min_s", "added_max_s")
    out["concurrent_processes"] = len(tables)
    return out


def _worst(grids) -> list[list[float]]:
    """The largest of each [round][size] entry over the processes."""
    return [[max(v) for v in zip(*rows)] for rows in zip(*grids)]


def slowest_rank(chains: list[list[list[float]]]) -> list[float]:
    """Per size, what the slowest of N ranks stepping together costs over the mean rank's time:
    the median over repeats of the slowest process's chain time (F + B over the units), over the
    mean of the processes' median chain times.  The repeats of concurrent profilers are paired by
    index, one draw of each process's time at once, as the ranks of a synchronous step (a
    data-parallel all-reduce, a pipeline's sends) each wait for the slowest.  ``chains``: per
    process, per size, the repeats' chain times.  On 2026-11-27 (AMD EPYC, 2 cores, quiet) the two
    ranks of a bert-mini dp=2 run differed by 11% in F + B, and rank 0 waited that long at its
    all-reduce."""
    out = []
    for per_proc in zip(*chains):                       # one size: each process's repeats
        mean_s = statistics.fmean(statistics.median(r) for r in per_proc)
        out.append(statistics.median(max(v) for v in zip(*per_proc)) / mean_s if mean_s > 0 else 1.0)
    return out


def mean_entry(entries: list[dict], means: tuple[str, ...], low: str, high: str) -> dict:
    """The concurrent profilers' grad_sync (or fsdp_sync) entries as one: ``means`` the mean, the
    repeats' range (``low``, ``high``) the widest."""
    out = dict(entries[0])
    for key in means:
        out[key] = statistics.fmean(e[key] for e in entries)
    out[low] = min(e[low] for e in entries)
    out[high] = max(e[high] for e in entries)
    return out
