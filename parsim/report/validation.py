"""Predictions against measurements: per-plan errors, overall accuracy, and the figures.

Errors are signed, (predicted - measured) / measured.  MAPE is the mean of their absolute values.
The rank correlation is Spearman's, between predicted and measured throughput.

The step's shares (compute, bubble, waiting on other ranks, exposed communication;
parsim.sim.estimate.RankEstimate) are predicted; only compute has a measured counterpart.  The
executor times each rank's F, B, I and W on that rank's own clock and nothing else, so the rest
of its step cannot be told apart: a RECV's wait for its peer (bubble) from the transfer itself
(exposed), nor the optimizer and the gradient all-reduce from waiting on another rank's.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, replace

from scipy.stats import spearmanr

from parsim.report.errorbars import plan_errors
from parsim.schedule.actions import Action


@dataclass(frozen=True)
class Row:
    label: str
    dp: int
    pp: int
    microbatches: int
    schedule: str
    split: str
    predicted_step_s: float
    measured_step_s: float
    predicted_peak_bytes: float
    measured_peak_bytes: float
    predicted_compute_frac: float
    predicted_bubble_frac: float
    predicted_exposed_comm_frac: float
    measured_compute_frac: float     # busy share of the step from the measured per-action times
    measured_spread: float = 0.0     # (slowest - fastest) / median over validation passes
    predicted_spread: float = 0.0    # the same of the predictions, where each pass took its own profiles
    tp: int = 1
    predicted_collectives: str = ""  # tensor-parallel collectives per step on rank 0 (its stages), e.g. "all_reduce 36"
    measured_collectives: str = ""   # the same, counted in the run
    analytical_step_s: float = math.nan   # the analytical model calibrated to the profile, beside it
    predicted_sync_wait_frac: float = 0.0  # idle after the rank's own work, waiting on other ranks
    measured_steps_s: tuple = ()     # per run (one per pass), its timed steps after warm-up (the bootstrap's)
    predicted_runs_s: tuple = ()     # per run, the prediction of its pass (from that pass's profiles)
    pooled_with: str = ""            # the planner's pick when it is this very plan: both labels' runs pooled here
    ep: int = 1                      # expert parallelism (MoE): the dp ranks the experts are split over
    # per run, its pass's predicted step interval (low, high) (parsim.sim.interval), () where none
    predicted_intervals_s: tuple = ()
    memory_interval_bytes: tuple = ()   # (low, high) of the predicted peak memory, () where none
    interval_level: float = math.nan

    @property
    def covered_runs(self) -> tuple[int, int]:
        """(runs inside their pass's predicted interval, runs with one)."""
        pairs = [(m, iv) for m, iv in zip(self.measured_runs_s, self.predicted_intervals_s) if iv]
        return sum(iv[0] <= m <= iv[1] for m, iv in pairs), len(pairs)

    @property
    def measured_runs_s(self) -> tuple:
        """Each run's median step (the executor's own step_time_s)."""
        return tuple(statistics.median(steps) for steps in self.measured_steps_s if steps)

    def same_plan(self, other: "Row") -> bool:
        """The same configuration, predicted alike (a set's plan that the planner also picked)."""
        return (self.dp, self.pp, self.tp, self.ep, self.microbatches, self.schedule, self.split, self.predicted_step_s,
                self.predicted_peak_bytes) == (other.dp, other.pp, other.tp, other.ep, other.microbatches, other.schedule,
                                               other.split, other.predicted_step_s, other.predicted_peak_bytes)

    @property
    def analytical_step_error(self) -> float:
        return (self.analytical_step_s - self.measured_step_s) / self.measured_step_s

    @property
    def step_error(self) -> float:
        return (self.predicted_step_s - self.measured_step_s) / self.measured_step_s

    @property
    def memory_error(self) -> float:
        return (self.predicted_peak_bytes - self.measured_peak_bytes) / self.measured_peak_bytes

    def to_dict(self) -> dict:
        return {**asdict(self), "step_error": self.step_error, "memory_error": self.memory_error,
                "analytical_step_error": self.analytical_step_error,
                "predicted_throughput": 1 / self.predicted_step_s, "measured_throughput": 1 / self.measured_step_s}


def collectives_text(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def measured_compute_fraction(measured: dict) -> float:
    """Mean over pipeline ranks of compute time / step time, from the measured actions."""
    busy: dict[int, float] = {}
    for r, _, stream, t0, t1 in measured["actions"]:
        if stream == "compute":
            busy[r] = busy.get(r, 0.0) + (t1 - t0)
    if not busy or not measured["step_time_s"]:
        return math.nan
    return sum(busy.values()) / (len(busy) * measured["step_time_s"])


def pooled(rows: list[Row], pick_label: str = "planner") -> tuple[list[Row], list[str]]:
    """The plans as counted: where the planner's pick is one of the set's own plans (run twice,
    under two labels), one row for it, its measurement the median over every run of both labels
    (the two differ by run-to-run noise, not by plan), so that the plan counts once in MAPE and
    Spearman and the pick is judged by the same number as the plan it equals.  Returns the rows
    and the labels the pick was pooled into (empty when the pick is a plan of its own)."""
    pick = next((r for r in rows if r.label == pick_label), None)
    twins = [r for r in rows if r is not pick and r.same_plan(pick)] if pick is not None else []
    if not twins:
        return list(rows), []
    group = [*twins, pick]
    steps = tuple(s for r in group for s in r.measured_steps_s)
    runs = [statistics.median(s) for s in steps if s]
    times = sorted(runs) if runs else sorted(r.measured_step_s for r in group)
    merged = replace(twins[0], measured_step_s=statistics.median(times), measured_steps_s=steps,
                     predicted_runs_s=tuple(p for r in group for p in r.predicted_runs_s),
                     predicted_intervals_s=tuple(iv for r in group for iv in r.predicted_intervals_s),
                     measured_spread=(times[-1] - times[0]) / statistics.median(times) if len(times) > 1 else 0.0,
                     pooled_with=",".join(r.label for r in group[1:]))
    out = [merged if r is twins[0] else r for r in rows if all(r is not g for g in group[1:])]
    return out, [r.label for r in twins]


def summary(rows: list[Row], pick_label: str = "planner") -> dict:
    """The set's accuracy over ``pooled(rows)``: a plan the planner also picked counts once."""
    rows, same_as = pooled(rows, pick_label)
    step = [abs(r.step_error) for r in rows]
    mem = [abs(r.memory_error) for r in rows if r.measured_peak_bytes]
    rho = spearmanr([1 / r.predicted_step_s for r in rows], [1 / r.measured_step_s for r in rows]).statistic \
        if len(rows) > 2 else math.nan
    best = min(rows, key=lambda r: r.measured_step_s)
    pick = next((r for r in rows if r.label == pick_label or pick_label in r.pooled_with.split(",")), None)
    analytical = [abs(r.analytical_step_error) for r in rows if not math.isnan(r.analytical_step_s)]
    bars = plan_errors(rows)
    inside, counted = (sum(c) for c in zip(*(r.covered_runs for r in rows))) if rows else (0, 0)
    memory = [r for r in rows if r.memory_interval_bytes and r.measured_peak_bytes]
    return {
        # how often a run fell inside the interval its pass predicted (parsim.sim.interval)
        "interval_level": next((r.interval_level for r in rows if r.predicted_intervals_s), math.nan),
        "step_interval_coverage": inside / counted if counted else math.nan,
        "step_interval_runs": counted,
        "memory_interval_coverage": sum(r.memory_interval_bytes[0] <= r.measured_peak_bytes
                                        <= r.memory_interval_bytes[1] for r in memory) / len(memory)
        if memory else math.nan,
        # two profiles taken minutes apart: the median over plans and pairs of passes of how far
        # their predictions of one plan differ, |p_i / p_j - 1|
        "profile_repeatability": _median_pairwise([r.predicted_runs_s for r in rows]),
        "mape_step_time_ci": bars["mape_step_time_ci"],
        "mape_step_time_analytical_ci": bars["mape_step_time_analytical_ci"],
        "error_bars": {k: bars[k] for k in ("n_boot", "seed", "level")},
        "mape_step_time": sum(step) / len(step),
        "max_error_step_time": max(step),
        "mape_step_time_analytical": sum(analytical) / len(analytical) if analytical else math.nan,
        "max_error_step_time_analytical": max(analytical) if analytical else math.nan,
        "mape_peak_memory": sum(mem) / len(mem) if mem else math.nan,
        "max_error_peak_memory": max(mem) if mem else math.nan,
        "median_run_to_run_spread": sorted(r.measured_spread for r in rows)[len(rows) // 2],
        "median_profile_spread": sorted(r.predicted_spread for r in rows)[len(rows) // 2],
        "spearman_throughput": float(rho),
        "pick_is_best": bool(pick is not None and pick.measured_step_s <= best.measured_step_s * (1 + 1e-9)),
        "pick_gap_to_best": (pick.measured_step_s / best.measured_step_s - 1) if pick else math.nan,
        # the pick's stated noise: how far above its prediction its own interval reaches (median over passes)
        "pick_stated_noise": _upper_reach(pick),
        "measured_best": best.label,
        "pick_same_as": same_as,
        "plans": [{**r.to_dict(), **bars["plans"].get(r.label, {})} for r in rows],
    }


def _upper_reach(row) -> float:
    reach = [iv[1] / p - 1 for p, iv in zip(row.predicted_runs_s, row.predicted_intervals_s) if iv and p > 0] \
        if row is not None else []
    return statistics.median(reach) if reach else math.nan


def _median_pairwise(runs: list[tuple]) -> float:
    gaps = [abs(a / b - 1) for p in runs for i, a in enumerate(p) for b in p[i + 1:] if b > 0]
    return statistics.median(gaps) if gaps else math.nan


def table(rows: list[Row]):
    """One line per plan as counted (``pooled``): a pick that equals a set's plan is that plan's
    line, labelled ``plan = planner``."""
    import pandas as pd

    rows, _ = pooled(rows)
    bars = plan_errors(rows)["plans"]
    show_tp = any(r.tp > 1 for r in rows)
    show_ep = any(r.ep > 1 for r in rows)
    return pd.DataFrame([{
        "plan": r.label + "".join(f" = {p}" for p in r.pooled_with.split(",") if p), "dp": r.dp, "pp": r.pp,
        **({"tp": r.tp} if show_tp else {}), **({"ep": r.ep} if show_ep else {}), "m": r.microbatches,
        "schedule": r.schedule,
        "pred s": round(r.predicted_step_s, 4), "meas s": round(r.measured_step_s, 4),
        "err": f"{r.step_error:+.1%}" + _ci_text(bars.get(r.label, {}).get("step_error_ci")),
        **({"in interval": "{}/{}".format(*r.covered_runs)} if any(x.predicted_intervals_s for x in rows) else {}),
        "beyond noise": _beyond(bars.get(r.label, {}).get("step_error_ci")),
        "analyt. s": round(r.analytical_step_s, 4),
        "analyt. err": f"{r.analytical_step_error:+.1%}" + _ci_text(bars.get(r.label, {}).get("analytical_error_ci")),
        "pred MiB": round(r.predicted_peak_bytes / 2**20, 1),
        "meas MiB": round(r.measured_peak_bytes / 2**20, 1) if r.measured_peak_bytes else None,
        "mem err": f"{r.memory_error:+.1%}" if r.measured_peak_bytes else "",
        "compute p/m": f"{r.predicted_compute_frac:.0%}/{r.measured_compute_frac:.0%}",
        "bubble": f"{r.predicted_bubble_frac:.0%}", "sync wait": f"{r.predicted_sync_wait_frac:.0%}",
        "exp.comm": f"{r.predicted_exposed_comm_frac:.0%}",
        "spread": f"{r.measured_spread:.0%}", "pred spread": f"{r.predicted_spread:.0%}",
        **({"tp collectives p/m": "" if r.tp == 1 else
            ("same: " if r.predicted_collectives == r.measured_collectives else "DIFFER: ")
            + f"{r.predicted_collectives} / {r.measured_collectives}"} if show_tp else {}),
    } for r in rows])


def _ci_text(ci) -> str:
    """' [lo, hi]' of a 95% interval in percent, or '' where there is none."""
    return "" if ci is None or not all(map(math.isfinite, ci)) else f" [{ci[0]:+.1%}, {ci[1]:+.1%}]"


def _beyond(ci) -> str:
    """Whether the error's interval excludes 0 (parsim.report.errorbars.distinguishable)."""
    if ci is None or not all(map(math.isfinite, ci)):
        return ""
    return "yes" if ci[0] > 0 or ci[1] < 0 else "no"


_PREDICTED = ("params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "workspace_bytes",
              "comm_buffers_bytes")
# measured, before the step (pipeline_buffers: torch.distributed.pipelining's receive buffers, kept across steps)
_HELD = ("params_bytes", "grads_bytes", "optimizer_bytes", "buffers_bytes", "inputs_bytes", "pipeline_buffers_bytes")


def memory_breakdown(label: str, est, measured: dict) -> list[dict]:
    """Predicted against measured peak memory, one row per pipeline rank of replica 0, by part.

    Predicted: parameters, gradients, optimizer state (ZeRO's bytes per parameter), saved
    activations in flight, the backward's workspace and the pipeline's send/receive buffers
    (parsim.cost.memory).  Measured (the executor, on CPU): the bytes held between steps by kind
    (parameters, gradients, optimizer state, BatchNorm's running statistics as ``buffers``, the
    batch the rank read as ``inputs``, the pipeline's receive buffers as ``pipeline_buffers``), and
    ``step`` = the peak the step allocates above them, which the prediction's activations,
    workspace and buffers together stand for.  Each side's parts sum to its total; the measured
    side is empty (None) where the run reported no parts (CUDA: the allocator's peak only)."""
    parts_by_rank = measured.get("peak_memory_parts") or []
    peaks = measured.get("peak_memory_bytes") or []
    rows = []
    for r in est.ranks:
        mem = r.memory.to_dict()
        pred = {f"pred_{k.removesuffix('_bytes')}_bytes": float(mem[k]) for k in _PREDICTED}
        pred["pred_step_bytes"] = float(mem["activations_bytes"] + mem["workspace_bytes"] + mem["comm_buffers_bytes"])
        g = r.global_rank
        got = parts_by_rank[g] if g < len(parts_by_rank) and parts_by_rank[g] else {}
        meas = {f"meas_{k.removesuffix('_bytes')}_bytes": got.get(k) for k in _HELD}
        meas["meas_step_bytes"] = got.get("step_peak_bytes")
        total = float(peaks[g]) if g < len(peaks) and peaks[g] else None
        rows.append({"plan": label, "rank": r.rank, "global_rank": g, **pred, **meas,
                     "pred_total_bytes": float(mem["total_bytes"]), "meas_total_bytes": total,
                     "error": (mem["total_bytes"] - total) / total if total else None})
    return rows


def pipeline_rank_memory_line(rows) -> str | None:
    """The peak-memory error of each pipeline rank, for the plans with several (``memory_breakdown``'s
    rows): the table compares each side's largest rank, behind which another rank's miss hides
    (set 2026-12-06b's DenseNet-BC under GPipe: its table said +16.6%, and its first rank's -0.3%
    was in memory_breakdown.csv only).  None where no plan has two ranks with a measurement."""
    by_plan: dict[str, list] = {}
    for r in rows:
        if r.get("error") is not None:
            by_plan.setdefault(r["plan"], []).append(r)
    parts = [f"{plan} " + ", ".join(f"rank {r['rank']} {r['error']:+.1%}" for r in ranks)
             for plan, ranks in by_plan.items() if len(ranks) > 1]
    return "peak memory by pipeline rank: " + "; ".join(parts) if parts else None


def memory_table(rows: list[dict]):
    """The breakdown in MiB, for validation's table and CSV."""
    import pandas as pd

    df = pd.DataFrame(rows)
    for c in [c for c in df.columns if c.endswith("_bytes")]:
        df[c.removesuffix("_bytes") + "_mib"] = (df.pop(c) / 2**20).round(2)
    return df


def scatter(rows: list[Row], path: str) -> None:
    from parsim.report.plots import save, subplots

    fig, ax = subplots(figsize=(5.5, 5))
    xs, ys = [r.measured_step_s for r in rows], [r.predicted_step_s for r in rows]
    lo, hi = min(xs + ys) * 0.9, max(xs + ys) * 1.1
    ax.plot([lo, hi], [lo, hi], color="gray", lw=1, label="exact")
    ax.fill_between([lo, hi], [lo * 0.95, hi * 0.95], [lo * 1.05, hi * 1.05], color="gray", alpha=0.15, label="±5%")
    ax.scatter(xs, ys, zorder=3)
    for r in rows:
        ax.annotate(r.label, (r.measured_step_s, r.predicted_step_s), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")
    ax.set(xlabel="measured step time (s)", ylabel="predicted step time (s)", xlim=(lo, hi), ylim=(lo, hi),
           title="predicted against measured")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save(fig, path)


def overlay(est, measured: dict, path: str, title: str) -> None:
    """The simulated step above the measured one, on one time axis, action names lined up."""
    from parsim.fmt import human_time
    from parsim.report.plots import draw_records, kinds_legend, label_bars, save, subplots

    records = [(r, Action.parse(a), s, t0, t1) for r, a, s, t0, t1 in measured["actions"]]
    n = max(len(est.ranks), 1 + max((r for r, *_ in records), default=0))
    span = max(est.step_time_s, measured["step_time_s"] or 0)
    height_in = 2.0 + 1.2 * n
    fig, axes = subplots(2, 1, figsize=(12, height_in), sharex=True)
    drawn = draw_records(axes[0], est.timeline.records, n, span)
    axes[0].set_title(f"simulated: {human_time(est.step_time_s)}")
    axes[0].set_xlabel("")
    drawn |= draw_records(axes[1], records, n, span)
    measured_s = measured["step_time_s"]
    axes[1].set_title(f"measured (one step after warm-up): "
                      f"{human_time(measured_s) + ' median' if measured_s else 'no step time'}")
    fig.suptitle(title)
    fig.tight_layout(rect=(0, kinds_legend(fig, drawn, height_in), 1, 1))
    label_bars(axes[0], est.timeline.records, span)
    label_bars(axes[1], records, span)
    save(fig, path)


def load_validation(path: str) -> dict:
    """A validation.json from ``parsim validate``, checked for what a plan report shows of it: the
    set's errors and, per plan, its shape and errors.  Returned as read, with ``path`` and
    ``machine`` (where it was measured: the file's own record, or, for a file written before
    validate recorded it, that of the first layer profile it lists still readable, as recorded or
    beside the file; ``machine_from`` then names that profile)."""
    import json
    import os

    from parsim.errors import InputError
    from parsim.inputs import Fields, load_file

    data = load_file(path, "a validation.json from parsim validate")
    hint = "; pass the validation.json that parsim validate wrote"
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object{hint}")
    for key in ("mape_step_time", "max_error_step_time", "mape_peak_memory"):
        if isinstance(data.get(key), bool) or not isinstance(data.get(key), (int, float)):
            raise InputError(f"{path}: {key}: missing or not a number{hint}")
    if not isinstance(data.get("plans"), list) or not data["plans"]:
        raise InputError(f"{path}: plans: missing or empty{hint}")
    for i, p in enumerate(data["plans"]):
        f = Fields(p, path, f"plans[{i}].")
        f.get("label", str), f.get("schedule", str), f.get("step_error", float)
        f.positive_int("dp"), f.positive_int("pp"), f.positive_float("predicted_step_s")
        f.positive_float("measured_step_s")
    out = {**data, "path": path, "machine_from": ""}
    if not isinstance(out.get("machine"), dict):
        out["machine"] = None
        profiles = list((data.get("profiles") or {}).values()) + list(data.get("tp_profiles") or [])
        for recorded in profiles:
            for where in (recorded, os.path.join(os.path.dirname(path), os.path.basename(str(recorded)))):
                try:
                    with open(where) as fh:
                        machine = json.load(fh).get("machine")
                except (OSError, ValueError, TypeError, AttributeError):
                    continue
                if isinstance(machine, dict):
                    out["machine"], out["machine_from"] = machine, where
                    break
            if out["machine"]:
                break
    return out
