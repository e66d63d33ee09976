"""Error bars for ``parsim validate``: a seeded bootstrap over a plan's runs and their steps.

A plan is run once per pass; a run's measurement is the median of its timed steps (after
warm-up), and the plan's is the median over its runs.  One bootstrap replicate redraws, with
replacement, the runs (passes) and, within each drawn run, its steps, and recomputes that median
of medians; a pass's prediction (priced from the profile taken right before it) is drawn with its
run, so drift that the profile saw moves both sides alike.  The 95% interval is the 2.5th to
97.5th percentile of the replicates (Efron & Tibshirani 1993, "An Introduction to the
Bootstrap", Ch. 13, the percentile interval; the two-stage redraw: Davison & Hinkley 1997,
"Bootstrap Methods and their Application", Sec. 3.8).  A plan's error is distinguishable from
run-to-run noise when its interval excludes 0.

The set's MAPE gets its interval from the plans' signed errors, not from the replicates' mean |error|: a mean
of absolute values is pulled up by noise alone (a plan priced exactly, whose runs scatter by 20%, has a replicate
|error| of several per cent in every draw), so the percentile interval of the replicates' MAPE can lie wholly
above the MAPE itself (set 2026-12-06's StableLM on an Intel host: 2.4% [3.2%, 17.0%]).  Instead each plan's
signed error gets its percentile interval at level 1 - 0.05/P for P plans (Bonferroni: all P hold at once with
probability at least 95%), and the MAPE's interval runs from the least to the greatest mean |error| that those
intervals allow: a plan whose interval holds 0 adds 0 to the lower end, and each plan adds the larger of its
interval's ends' magnitudes to the upper end (``mape_interval``).
"""

from __future__ import annotations

import math

import numpy as np

N_BOOT = 2000        # replicates; the percentiles of 2000 move by < 0.5% of the interval between seeds
SEED = 0
LEVEL = 0.95


def replicates(steps_per_run, predicted_per_run=None, n_boot: int = N_BOOT,
               rng: np.random.Generator | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(measured, predicted): ``n_boot`` replicates of the median over runs of each run's median
    step, and of the median over the same drawn runs of their predictions (NaN where
    ``predicted_per_run`` is None)."""
    rng = rng if rng is not None else np.random.default_rng(SEED)
    runs = [np.asarray(s, dtype=float) for s in steps_per_run if len(s)]
    if not runs:
        raise ValueError("no measured steps to resample")
    r = len(runs)
    pick = rng.integers(0, r, size=(n_boot, r))               # which run each slot draws
    meds = np.empty((n_boot, r))
    for j in range(r):                                         # slot j: its drawn run, its steps redrawn
        for i, steps in enumerate(runs):
            rows = np.nonzero(pick[:, j] == i)[0]
            if len(rows):
                draw = steps[rng.integers(0, len(steps), size=(len(rows), len(steps)))]
                meds[rows, j] = np.median(draw, axis=1)
    measured = np.median(meds, axis=1)
    if predicted_per_run is None or not len(predicted_per_run):
        return measured, np.full(n_boot, np.nan)
    pred = np.asarray(predicted_per_run, dtype=float)
    if len(pred) != r:
        raise ValueError(f"{len(pred)} predictions for {r} runs")
    return measured, np.median(pred[pick], axis=1)


def interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    lo, hi = np.percentile(values, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def distinguishable(ci: tuple[float, float]) -> bool:
    """The error's interval excludes 0: it is not run-to-run noise."""
    return ci[0] > 0 or ci[1] < 0


def plan_errors(rows, n_boot: int = N_BOOT, seed: int = SEED) -> dict:
    """Per plan (by label) and for the set: the bootstrap replicates' errors summarised.

    ``rows``: parsim.report.validation.Row with ``measured_steps_s`` (and ``predicted_runs_s``);
    a row without steps (an old validation.json) gets no interval.  Returns
    {"plans": {label: {"step_error_ci", "analytical_error_ci", "measured_step_ci_s",
    "distinguishable", "analytical_distinguishable"}}, "mape_step_time_ci",
    "mape_step_time_analytical_ci", "n_boot", "seed"}."""
    rng = np.random.default_rng(seed)
    per_plan, errs, analytical_errs = {}, [], []
    for row in rows:
        if not row.measured_steps_s:
            continue
        preds = row.predicted_runs_s if len(row.predicted_runs_s) == len(row.measured_steps_s) else None
        meas, pred = replicates(row.measured_steps_s, preds, n_boot, rng)
        if preds is None:
            pred = np.full(n_boot, row.predicted_step_s)
        err = pred / meas - 1
        ana = row.analytical_step_s / meas - 1
        errs.append(err)
        ci, ana_ci = interval(err), interval(ana) if np.isfinite(row.analytical_step_s) else (np.nan, np.nan)
        if np.isfinite(row.analytical_step_s):
            analytical_errs.append(ana)
        per_plan[row.label] = {"step_error_ci": ci, "analytical_error_ci": ana_ci,
                               "measured_step_ci_s": interval(meas), "distinguishable": distinguishable(ci),
                               "analytical_distinguishable": bool(np.isfinite(ana_ci[0]) and distinguishable(ana_ci))}
    return {"plans": per_plan, "mape_step_time_ci": mape_interval(errs),
            "mape_step_time_analytical_ci": mape_interval(analytical_errs),
            "n_boot": n_boot, "seed": seed, "level": LEVEL}


def mape_interval(errors, level: float = LEVEL) -> tuple[float, float]:
    """The interval of the mean |error| over plans (module docstring), from each plan's bootstrap replicates of its
    signed error (``errors``: one array per plan): every plan's percentile interval at level 1 - (1 - level) / P,
    and the least and greatest mean |error| inside them all.  (NaN, NaN) for no plans."""
    if not len(errors):
        return math.nan, math.nan
    each = 1 - (1 - level) / len(errors)
    ends = [interval(e, each) for e in errors]
    least = [0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi)) for lo, hi in ends]
    return float(np.mean(least)), float(np.mean([max(abs(lo), abs(hi)) for lo, hi in ends]))


def paired_ratio(a_s, b_s, n_boot: int = N_BOOT, seed: int = SEED) -> tuple[float, tuple[float, float]]:
    """The ratio of two alternated measurements, A over B, from pairs taken one after the other
    (A B A B ...): the geometric mean of the pairs' ratios a_i / b_i, and its percentile
    interval over ``n_boot`` replicates that redraw the pairs with replacement (Efron &
    Tibshirani 1993, Ch. 13).  A pair is drawn whole, so drift that moved both of its runs
    cancels in its ratio.  ``benchmarks/executor_vs_reference.py``: parsim's executor against
    plain torch."""
    a, b = np.asarray(a_s, dtype=float), np.asarray(b_s, dtype=float)
    if len(a) != len(b) or not len(a) or (a <= 0).any() or (b <= 0).any():
        raise ValueError(f"{len(a)} and {len(b)} times: needs as many of each, at least one, all positive")
    logs = np.log(a / b)
    pick = np.random.default_rng(seed).integers(0, len(logs), size=(n_boot, len(logs)))
    return float(np.exp(logs.mean())), interval(np.exp(logs[pick].mean(axis=1)))
