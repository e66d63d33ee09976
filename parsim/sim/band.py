"""A prediction's interval, and the step-time bands drawn from the public benchmark's
out-of-sample residuals.

``Interval`` is one value with its low and high, the nominal coverage (``level``) and where the
interval comes from (``source``, and the ``rows`` it rests on): out-of-sample residuals of
published rows here; the spread of profile repeats elsewhere.  It is one field of an Estimate
(``Estimate.step_time_band``), carried into the plan file and the report.

The step-time band of a plan rests on the residual table ``results/published/residuals.yaml``,
committed data that ``python benchmarks/bench_published.py --residuals`` regenerates: each public
row priced out of sample (its source left out of the fit, parsim.profile.loso), classed by
``PlanKind``: its device, its parallelism mix (``ep``, ``fsdp`` for ZeRO-3, ``3d`` for any
tensor or pipeline parallelism, ``cp``, ``dp``) and its model (``moe``, ``conv``, ``dense``).
Nothing is fitted at run time.  For a plan, ``step_band`` takes the rows of its kind, widening
the class until the rows of at least MIN_FAMILIES source families remain (device, mix and model;
device and model; mix and model; model; device; every row: the band's source says which, and why
it widened), and sets, with r_i = log(measured step / predicted step) of row i,

    b_f = the median of r over family f's rows,   m = the median of the F families' b_f,
    q_b = the ceil((F + 1) x level)-th smallest |b_f - m|          (between sources),
    q_e = the smallest |r_i - b_f(i)| whose share of the rows of families of two rows or more,
          each family weighing 1 / (its rows), reaches level       (within a source),
    band = predicted x [exp(m - q_b - q_e), exp(m + q_b + q_e)]

two-level split conformal prediction on log residuals (Vovk et al. 2005; Lei et al. 2018; Dunn,
Wasserman & Ramdas 2022, "Distribution-free prediction sets for two-layer hierarchical models"): a
new plan is a new source's, whose error is its source's bias plus its own, so a source's bias is
scored once per source, the exchangeable unit (one source's forty rows are not forty independent
draws), and a row's spread about its source's bias is scored apart.  Each part covers at ``level``; their sum
covers at least 1 - 2 (1 - level) by the union bound, and more where bias and spread are independent.
Until the fifty-eighth sitting the band was one family-weighted quantile of |r_i - m|: it covered
94.9% of development rows but 70.2% of held-out ones, whose sources' biases ran wider than the
development sources' (results/2026-12-05e-intel-xeon/band_rules.py, the rule chosen there and
committed before the sitting's new sources were priced: preregistered.md).  The (F + 1) is the
finite-sample correction over families; it asks for F >= MIN_FAMILIES (9 at 90%), the fewest
families whose ceil((F + 1) x level)-th smallest score exists.  Below that the quantile falls past
the largest residual: a class of three to eight sources was as wide as its one worst row (until the
forty-sixth sitting every 910B tensor-parallel plan's band was 0.19-5.7x, one MindFormers row's),
and no wider than those few sources had missed where they agreed (H100 tensor-parallel plans
0.88-1.11x, which held-out stacks ran outside): results/2026-12-03g-amd-epyc/band-families.txt.
benchmarks/bench_published.py scores the bands out of sample: each row's band drawn without its
own family.  A device no public row ran on takes the rows of its architecture for its own (an H200 the
H100's: ``architecture``, since the sixtieth sitting, when KempnerForge's H200 rows found every H200 plan
without a band), and its band says so; a device of an architecture no public row ran on (a CPU) gets no band,
and says so.

The rows of a held-out source (results/published/fit.yaml, ``held_out``: fitted on by no fit)
are in the table, marked, and in no band: they test the bands.  Where some ran plans of the same
parallelism mix and model as the plan's, on any device, the band's source says how they fared
against this band (``held_out_check``), so that a kind of plan a held-out test found the model
wrong about says so wherever it is priced.  A plan that states the stack it will run on (Training.stack)
is told, in the same way, how the public families on that stack ran (``stack_check``,
results/published/harnesses.yaml); that moves no bound.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

LEVEL = 0.9                     # the bands' nominal coverage
RESIDUALS = "results/published/residuals.yaml"


def conformal_rank(n: int, level: float) -> int:
    """Which of ``n`` exchangeable scores, counted from the smallest, a split-conformal band at ``level``
    takes: the ceil((n + 1) level)-th (Lei et al. 2018, "Distribution-free predictive inference for
    regression"; Dunn, Wasserman & Ramdas 2022, "Distribution-free prediction sets for two-layer
    hierarchical models", for groups as the units).  Past ``n`` where ``n`` is too few."""
    return math.ceil((n + 1) * level - 1e-9)


def families_needed(level: float) -> int:
    """The fewest exchangeable units (source families) a split-conformal band at ``level`` can rest
    on: the fewest whose conformal_rank exists among their scores.  9 at 90%."""
    f = 1
    while conformal_rank(f, level) > f:
        f += 1
    return f


MIN_FAMILIES = families_needed(LEVEL)


@dataclass(frozen=True)
class Interval:
    """``value`` with [``low``, ``high``] at nominal coverage ``level``, from ``source`` (the rows it
    rests on in ``rows``)."""

    value: float
    low: float
    high: float
    level: float
    source: str
    rows: tuple[str, ...] = ()

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high

    def scaled(self, factor: float) -> "Interval":
        """The same interval for a quantity ``factor`` times this one (in other units)."""
        lo, hi = sorted((self.low * factor, self.high * factor))
        return Interval(self.value * factor, lo, hi, self.level, self.source, self.rows)

    def relative(self) -> tuple[float, float]:
        """(low, high) as fractions off the value: (-0.08, +0.11)."""
        return self.low / self.value - 1, self.high / self.value - 1

    def to_json(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high, "level": self.level, "source": self.source,
                "rows": list(self.rows)}

    @classmethod
    def from_json(cls, d: dict | None) -> "Interval | None":
        return None if d is None else cls(float(d["value"]), float(d["low"]), float(d["high"]), float(d["level"]),
                                          str(d["source"]), tuple(d.get("rows", ())))


@dataclass(frozen=True)
class PlanKind:
    device: str
    mix: str                    # ep | fsdp | 3d | cp | dp
    model: str                  # moe | conv | dense

    def __str__(self) -> str:
        return f"{self.device}, {self.mix}, {self.model}"


def parallel_mix(tp: int = 1, pp: int = 1, cp: int = 1, ep: int = 1, zero: int = 0) -> str:
    """The plan's class of communication.  ``fsdp`` is ZeRO-3 alone: it gathers every layer's
    parameters in the forward and again in the backward, 3 Psi a step against data parallelism's
    2 Psi, while ZeRO-1 and ZeRO-2 move what data parallelism moves (a reduce-scatter of the
    gradients and an all-gather of the updated parameters: Rajbhandari et al. 2020, "ZeRO: Memory
    Optimizations Toward Training Trillion Parameter Models", Sec. 7.2), so they class with it."""
    if ep > 1:
        return "ep"
    if zero >= 3:
        return "fsdp"
    if tp > 1 or pp > 1:
        return "3d"
    return "cp" if cp > 1 else "dp"


def model_kind(graph) -> str:
    if getattr(graph, "moe", False):
        return "moe"
    return "conv" if any(k.klass == "conv" for layer in graph.layers for k in layer.kernels) else "dense"


def plan_kind(device_name: str, graph, cfg) -> PlanKind:
    return PlanKind(device_name, parallel_mix(cfg.tp, cfg.pp, cfg.cp, cfg.ep, cfg.zero), model_kind(graph))


@dataclass(frozen=True)
class Residual:
    id: str
    family: str
    kind: PlanKind
    log_ratio: float            # log(measured step / predicted step), out of sample
    held_out: bool = False      # a held-out source's row: it tests the bands, and is in none


def residuals_yaml(rows, command: str) -> str:
    """The residual table's text: ``rows`` of (figure, family, PlanKind, out-of-sample throughput
    error, whether its source is held out), the error e giving measured step / predicted step = 1 + e."""
    lines = [f"# Out-of-sample residuals of the public rows, written by {command} --residuals",
             "# (each row priced with the profile numbers fitted on every other source: parsim.profile.loso);",
             "# parsim.sim.band draws the step-time bands of simulate, plan and the report from them, all but",
             "# the held_out rows (results/published/fit.yaml's held-out sources), which test the bands.",
             "schema_version: 1", f"level: {LEVEL}", "rows:"]
    for f, family, kind, err, held_out in rows:
        lines.append(f"  - {{id: {f.id}, family: {family}, device: \"{kind.device}\", mix: {kind.mix}, "
                     f"model: {kind.model}, error: {err:+.4f}{', held_out: true' if held_out else ''}}}")
    return "\n".join(lines) + "\n"


def residuals_path() -> Path:
    """$PARSIM_RESIDUALS, else results/published/residuals.yaml beside hardware_profiles/."""
    env = os.environ.get("PARSIM_RESIDUALS")
    if env:
        return Path(env)
    from parsim.hardware.cluster import profiles_dir

    return profiles_dir().parent / RESIDUALS


def load_residuals(path: str | os.PathLike | None = None) -> tuple[Residual, ...]:
    """The residual table (() where the file is absent); a malformed one is an InputError."""
    from parsim.inputs import Fields, load_file

    path = Path(path or residuals_path())
    if not path.is_file():
        return ()
    r = Fields(load_file(str(path), "a residual table YAML"), str(path))
    r.schema_version(1)
    r.fraction("level")
    out = []
    for i, raw in enumerate(r.get("rows", list)):
        f = Fields(raw, str(path), f"rows[{i}].")
        err = f.get("error", float)
        if err <= -1:
            raise f.fail("error", f"{err}: a throughput error is above -1")
        out.append(Residual(f.get("id", str), f.get("family", str),
                            PlanKind(f.get("device", str), f.get("mix", str), f.get("model", str)), math.log1p(err),
                            f.get("held_out", bool, False)))
        f.done()
    r.done()
    return tuple(out)


def _classes(kind: PlanKind):
    yield "device, mix, model", lambda k: k == kind
    yield "device, model", lambda k: (k.device, k.model) == (kind.device, kind.model)
    yield "mix, model", lambda k: (k.mix, k.model) == (kind.mix, kind.model)
    yield "model", lambda k: k.model == kind.model
    yield "device", lambda k: k.device == kind.device
    yield "every row", lambda k: True


def _class_clause(label: str, kind: PlanKind, pool: list) -> str:
    """What the band's rows share with the plan, and, where the class was widened, why."""
    if label == "device, mix, model":
        return f"device, mix and model as this plan's: {kind}"
    own = [r for r in pool if r.kind == kind]
    n, f = len(own), len({r.family for r in own})
    share = (f"{n} row{'s' * (n != 1)} of {f} source{'s' * (f != 1)} share this plan's device, mix and model "
             f"({kind})")
    need = f"the {MIN_FAMILIES} sources a {LEVEL:.0%} band rests on"
    if label == "every row":
        return f"every public row, of any device, mix and model: {share}, and no narrower class holds {need}"
    return f"{label.replace(', ', ' and ')} as this plan's, widened: {share}, under {need}"


def _weighted_point(pairs: list[tuple[float, float]], share: float) -> float:
    """The smallest value whose weight, with every smaller value's, reaches ``share`` of the total."""
    pairs = sorted(pairs)
    total, acc = sum(w for _, w in pairs), 0.0
    for v, w in pairs:
        acc += w
        if acc >= share * total - 1e-12:
            return v
    return pairs[-1][0]


# Device names by architecture, a prefix each (NVIDIA's Hopper, Ampere, Blackwell and Volta datasheets;
# Huawei's Ascend 910 line): a plan on a device no public row ran on takes its architecture's rows for its
# device's (step_band), as the H200 is the H100's die with more memory (NVIDIA H200 datasheet, 2023).
ARCHITECTURES = (("Hopper", ("H100", "H800", "H200", "H20-")), ("Ampere", ("A100", "A800")),
                 ("Blackwell", ("B200", "GB200", "B300", "GB300")), ("Volta", ("V100",)),
                 ("Ascend 910", ("Ascend 910",)))


def architecture(device: str) -> str | None:
    """The architecture of a device name (ARCHITECTURES), None where it is none of them (a CPU)."""
    return next((arch for arch, prefixes in ARCHITECTURES if device.startswith(prefixes)), None)


def _device_pool(kind: PlanKind, pool: list) -> tuple[list, str]:
    """(the rows a band of ``kind`` draws on, a clause saying where its device's rows came from): the pool as
    it is where a row ran on the plan's device; else its architecture's rows counted as its device's, said so;
    ([], "") where none of them either."""
    if any(r.kind.device == kind.device for r in pool):
        return pool, ""
    arch = architecture(kind.device)
    same = sorted({r.kind.device for r in pool if arch and architecture(r.kind.device) == arch})
    if not same:
        return [], ""
    moved = [replace(r, kind=replace(r.kind, device=kind.device)) if r.kind.device in same else r for r in pool]
    return moved, (f"; no public row ran on {kind.device}: the rows of its architecture ({arch}: "
                   f"{', '.join(same)}) stand for its device's")


def step_band(step_s: float, kind: PlanKind, residuals: tuple[Residual, ...], level: float = LEVEL,
              leave_out: str = "", stack: str | None = None, stacks: dict[str, str] | None = None) -> Interval | None:
    """The band of a predicted step ``step_s`` of a plan of ``kind`` (module docstring); rows of
    the family ``leave_out`` are not used (to score a band on that family's rows).  None where no
    public row ran on the plan's device or its architecture (``_device_pool``).  A plan's ``stack``
    (Training.stack) adds how the public families on it ran (``stack_check``; ``stacks``, family -> stack:
    the committed harness table by default)."""
    pool, stand_in = _device_pool(kind, [r for r in residuals if r.family != leave_out and not r.held_out])
    if not pool:
        return None
    for label, match in _classes(kind):
        rows = [r for r in pool if match(r.kind)]
        families = {r.family for r in rows}
        if len(families) >= MIN_FAMILIES:
            break
    else:
        return None
    by_family: dict[str, list[float]] = {}
    for r in rows:
        by_family.setdefault(r.family, []).append(r.log_ratio)
    bias = {f: statistics.median(v) for f, v in by_family.items()}
    m = statistics.median(bias.values())
    between = sorted(abs(b - m) for b in bias.values())
    q_b = between[min(len(between), conformal_rank(len(between), level)) - 1]
    spread = [(abs(x - bias[f]), 1 / len(v)) for f, v in by_family.items() if len(v) > 1 for x in v]
    q_e = _weighted_point(spread, level) if spread else 0.0
    q = q_b + q_e
    source = (f"{level:.0%} band from the out-of-sample residuals of {len(rows)} public rows of {len(families)} "
              f"sources ({_class_clause(label, kind, pool)}{stand_in}); median bias {math.expm1(m):+.1%}, half-width "
              f"x{math.exp(q):.2f}: x{math.exp(q_b):.2f} between sources' biases, x{math.exp(q_e):.2f} within a source"
              + held_out_check(kind, m - q, m + q, residuals, leave_out) + stack_check(stack, residuals, stacks))
    return Interval(step_s, step_s * math.exp(m - q), step_s * math.exp(m + q), level, source,
                    tuple(r.id for r in rows))


def held_out_check(kind: PlanKind, low: float, high: float, residuals: tuple[Residual, ...],
                   leave_out: str = "") -> str:
    """How the held-out rows of ``kind``'s parallelism mix and model (any device; none of the
    family ``leave_out``) fared against a band of log ratios [``low``, ``high``]: a clause for the
    band's source per held-out family (each source is its own test: DeepSpeed's ZeRO-3 of 2021 and
    torch FSDP of 2024 fare apart), "" where there are none."""
    rows = [r for r in residuals if r.held_out and r.family != leave_out
            and (r.kind.mix, r.kind.model) == (kind.mix, kind.model)]
    clauses = []
    for family in sorted({r.family for r in rows}):
        own = [r for r in rows if r.family == family]
        ratios = sorted(math.exp(r.log_ratio) for r in own)
        inside = sum(low <= r.log_ratio <= high for r in own)
        devices = ", ".join(sorted({r.kind.device for r in own}))
        if len(own) == 1:
            clauses.append(f"; held-out test: 1 {kind.mix} {kind.model} row of {family} ({devices}), fitted on by "
                           f"nothing, ran {ratios[0]:.2f}x its predicted step, {'in' if inside else 'out'}side this band")
        else:
            clauses.append(f"; held-out test: {len(own)} {kind.mix} {kind.model} rows of {family} ({devices}), fitted on "
                           f"by nothing, ran {ratios[0]:.2f}-{ratios[-1]:.2f}x their predicted steps, {inside} of "
                           f"{len(own)} inside this band")
    return "".join(clauses)


def load_stacks() -> dict[str, str]:
    """family -> stack: the committed harness table beside hardware_profiles/ ({} where it is absent)."""
    from parsim.hardware.cluster import profiles_dir
    from parsim.model.stacks import HARNESSES, load_harnesses

    path = profiles_dir().parent / HARNESSES
    return load_harnesses(path) if path.is_file() else {}


def stack_check(stack: str | None, residuals: tuple[Residual, ...], stacks: dict[str, str] | None = None) -> str:
    """How the public families that ran on ``stack`` (``stacks``, family -> stack: load_stacks() by default)
    fared against parsim's out-of-sample prices, each family's median measured / predicted step counting
    once: a clause for the band's source; "" where the stack is unstated.  It widens nothing: a stack's
    families are too few for a band of their own (MIN_FAMILIES), and parsim prices every stack alike."""
    if stack is None:
        return ""
    if stacks is None:
        stacks = load_stacks()
    ratios: dict[str, list[float]] = {}
    for r in residuals:
        if stacks.get(r.family) == stack:
            ratios.setdefault(r.family, []).append(r.log_ratio)
    if not ratios:
        return f"; stack check: no public family ran on {stack}"
    medians = sorted(math.exp(statistics.median(v)) for v in ratios.values())
    slower = sum(x > 1 for x in medians)
    return (f"; stack check: the {len(medians)} public famil{'ies' if len(medians) > 1 else 'y'} that ran on {stack} "
            f"ran {medians[0]:.2f}-{medians[-1]:.2f}x their predicted steps (each family's median; median "
            f"{statistics.median(medians):.2f}x), {slower} of them slower than priced; this band does not include it")


def with_band(estimate, graph, cluster, cfg, residuals: tuple[Residual, ...] | None = None, stack: str | None = None,
              stacks: dict[str, str] | None = None):
    """``estimate`` with its step-time band (None where no public row ran on the device); ``stack``, the plan's
    (Training.stack), adds how the public families on it ran (stack_check)."""
    from dataclasses import replace

    if estimate.step_time_band is not None:          # a profiled prediction's own interval comes first
        return estimate
    table = load_residuals() if residuals is None else residuals
    band = step_band(estimate.step_time_s, plan_kind(cluster.device.name, graph, cfg), table, stack=stack,
                     stacks=stacks)
    return replace(estimate, step_time_band=band)


def band_text(band: Interval | None, device: str = "", unit: str = "s") -> str:
    """One line for a report: the band and what it rests on."""
    if band is None:
        return (f"no step-time band: no public row ran on {device} or its architecture" if device
                else "no step-time band") + \
            f" ({RESIDUALS})"
    return (f"{band.level:.0%} band [{band.low:.4g}, {band.high:.4g}] {unit}: {band.source}"
            + ("; rows: " + ", ".join(band.rows[:6]) + (f" and {len(band.rows) - 6} more" if len(band.rows) > 6 else "")
               if band.rows else ""))


def with_bands(result, graph, cluster, residuals: tuple[Residual, ...] | None = None, stack: str | None = None):
    """A planner's result (parsim.search.planner.PlanResult) with every candidate's step-time band."""
    from dataclasses import replace

    table = load_residuals() if residuals is None else residuals
    stacks = load_stacks() if stack is not None else None

    def banded(cand):
        return None if cand is None else replace(cand, estimate=with_band(cand.estimate, graph, cluster, cand.config,
                                                                           table, stack, stacks))
    return replace(result, chosen=banded(result.chosen), ranked=tuple(banded(c) for c in result.ranked),
                   pareto=tuple(banded(c) for c in result.pareto), manual=banded(result.manual),
                   all_devices=banded(result.all_devices))
