"""Hardware-profile numbers fitted to published end-to-end figures, and scored on sources left out
of the fit (leave-one-source-out).

A fit spec (``results/published/fit.yaml``) names the profile numbers that per-kernel and
per-link measurements do not ground, each as one **parameter** that may set a field in several
profile files (one number for every NVIDIA GPU's memory-bound kernels, say), its **prior** (the
value before any end-to-end figure: cited, or the field's uncalibrated value) and bounds, and the
**families** of sources (tables one team published from one software stack, held out together),
and the **held-out** sources: drawn after the fit, scored, and fitted on by no fold (a test set:
a source the model or the fit is then changed for becomes a development source, and leaves the
list)::

    schema_version: 1
    prior_sigma: 0.25              # the prior's spread, in log: how far a fit may pull a parameter
    residual_sigma: 0.10           # a row's expected error, in log: the two set the prior's weight
    families: {megatron-bridge: [mbridge-2509, mbridge-26041]}   # other sources: a family each
    held_out: [narayanan2021-zero3]
    parameters:
      - name: mem
        fields: [dgx-a100:device.memory_efficiency, dgx-h100:device.memory_efficiency]
        prior: 0.85
        bounds: [0.4, 1.0]
        kind: rate                 # rate: time ~ 1/value (efficiencies); time: time ~ value (microseconds)
        prior_sigma: null          # this prior's own spread, in log, where a measurement gives it (else the file's)
        ratio_of: null             # a field name: the field is set to value x that field (conv_efficiency = r x gemm_efficiency)
        why: "..."

The fit, for a set of figures (``fit``): minimise over the parameters p

    sum over families f of  mean over f's rows of  log(t_pred(p) / t_meas)^2
    + sum over parameters of (residual_sigma / prior_sigma_p)^2 x log(p / prior)^2

a maximum a posteriori fit in log space, each family weighted alike (a source with forty rows
counts as much as one with three), each parameter drawn to its prior where no row pins it.
prior_sigma_p is the parameter's own where it has one (a prior fitted on microbenchmarks, whose
spread they measure: NCCL's bandwidth on nccl-tests' rows), else the file's.
t_pred(p) is a **surrogate**, linear in 1/p (rate) or p (time) around the prior, from one
exact pricing per row at the prior and one per parameter it depends on (``Surrogate``); the
result is then priced exactly.  The surrogate's point is the prior, which no figure chose, so a
fold's fit sees nothing of the source it leaves out.

``leave_one_source_out``: for each family, fit on every other family's rows and price that
family's rows exactly with the fit: the out-of-sample error.  ``fit`` on every family gives the
in-sample error and the values the shipped profiles hold.  A held-out source's rows take part in
neither: they are priced at the all-family values, out of sample for every fit there is.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares

from parsim.cost.kernels import REFERENCE_HEAD_DIM
from parsim.errors import InputError
from parsim.hardware.cluster import Profile, load_profile, profiles_dir
from parsim.hardware.device import ATTENTION_KERNEL_FIELDS
from parsim.inputs import Fields, load_file, read_text
from parsim.profile.profile_edit import get_field, set_field
from parsim.profile.published import Figure, Priced, UnpricedFigure, price

SCHEMA_VERSION = 1
KINDS = ("rate", "time")
STEP = 0.2          # the surrogate's finite difference: each parameter moved 20% from its prior


@dataclass(frozen=True)
class Parameter:
    name: str
    fields: tuple[tuple[str, str], ...]     # (profile name, dotted field)
    prior: float
    bounds: tuple[float, float]
    kind: str = "rate"
    ratio_of: str | None = None              # the field set to value x this field of the same profile
    why: str = ""
    prior_sigma: float | None = None         # this prior's own spread, in log (None: the spec's)

    def profiles(self) -> set[str]:
        return {p for p, _ in self.fields}


@dataclass(frozen=True)
class FitSpec:
    path: str
    parameters: tuple[Parameter, ...]
    families: dict = field(default_factory=dict)      # source key -> family name
    prior_sigma: float = 0.25
    residual_sigma: float = 0.10
    held_out: frozenset = frozenset()                 # source keys no fit may use
    # development sources no fit uses either: the model was changed in their view, so they are not held
    # out, but fitted on they would charge their misses to a number a measurement pins (fit.yaml says why)
    kept_out: frozenset = frozenset()

    def family(self, figure: Figure) -> str:
        return self.families.get(figure.source, figure.source)

    def fitted_on(self, figure: Figure) -> bool:
        """Whether some fit may use the row: a held-out or kept-out source's rows are only ever scored."""
        return figure.source not in self.held_out and figure.source not in self.kept_out

    def held_out_row(self, figure: Figure) -> bool:
        """Whether the row is a held-out source's: fitted on by no fit, and the model never changed for it."""
        return figure.source in self.held_out

    @property
    def prior(self) -> dict[str, float]:
        return {p.name: p.prior for p in self.parameters}


def load_fit_spec(path: str | os.PathLike) -> FitSpec:
    """Read and check a fit spec; every error names the file and the field."""
    path = os.fspath(path)
    r = Fields(load_file(path, "a published-fit YAML"), path)
    r.schema_version(SCHEMA_VERSION)
    prior_sigma = r.positive_float("prior_sigma", 0.25)
    residual_sigma = r.positive_float("residual_sigma", 0.10)
    families = {}
    if r.has("families"):
        fam = r.sub("families")
        for name in list(fam.data):
            members = fam.get(name, list)
            if not members or not all(isinstance(m, str) for m in members):
                raise fam.fail(name, "expected a list of source keys")
            for m in members:
                families[m] = name
        fam.done()
    held_out = r.get("held_out", list, [])
    if not all(isinstance(k, str) for k in held_out):
        raise r.fail("held_out", "expected a list of source keys")
    if set(held_out) & set(families):
        raise r.fail("held_out", f"{sorted(set(held_out) & set(families))} also sit in a family: a held-out "
                                 "source is fitted on by no fold, a family's by every other")
    kept_out = r.get("kept_out", list, [])
    if not all(isinstance(k, str) for k in kept_out):
        raise r.fail("kept_out", "expected a list of source keys")
    if set(kept_out) & (set(families) | set(held_out)):
        raise r.fail("kept_out", f"{sorted(set(kept_out) & (set(families) | set(held_out)))} also sit in a family or "
                                 "in held_out: a kept-out source is a development source no fold fits on")
    params, seen = [], set()
    for i, raw in enumerate(r.get("parameters", list)):
        p = Fields(raw, path, f"parameters[{i}].")
        name = p.get("name", str)
        if name in seen:
            raise p.fail("name", f"{name!r} appears twice")
        seen.add(name)
        fields = []
        for item in p.get("fields", list):
            if not isinstance(item, str) or ":" not in item:
                raise p.fail("fields", f"expected PROFILE:dotted.field items, got {item!r}")
            profile, dotted = item.split(":", 1)
            fields.append((profile, dotted))
        lo, hi = (p.get("bounds", list) + [None, None])[:2]
        if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and 0 < lo < hi):
            raise p.fail("bounds", "expected [low, high] with 0 < low < high")
        prior = p.positive_float("prior")
        if not lo <= prior <= hi:
            raise p.fail("prior", f"{prior} lies outside bounds [{lo}, {hi}]")
        params.append(Parameter(name, tuple(fields), prior, (float(lo), float(hi)), p.choice("kind", KINDS, "rate"),
                                p.get("ratio_of", str, None), p.get("why", str, ""),
                                p.positive_float("prior_sigma", None)))
        p.done()
    r.done()
    return FitSpec(path, tuple(params), families, prior_sigma, residual_sigma, frozenset(held_out),
                   frozenset(kept_out))


class Profiles:
    """The shipped profile files with the fitted fields set to given values, loaded as any profile
    is (``extends`` resolved in a folder holding every shipped file): what a fit prices with."""

    def __init__(self, spec: FitSpec, folder: str | os.PathLike | None = None):
        self.spec = spec
        self.folder = str(folder or profiles_dir())
        self.texts = {f[:-5]: read_text(os.path.join(self.folder, f), "a hardware profile YAML")
                      for f in os.listdir(self.folder) if f.endswith(".yaml")}
        for p in spec.parameters:
            for profile, dotted in p.fields:
                if profile not in self.texts:
                    raise InputError(f"{spec.path}: parameters: {p.name}: no profile {profile!r} in {self.folder}")
        self._loaded: dict[tuple, Profile] = {}
        self._tmp = tempfile.mkdtemp(prefix="parsim-fit-")

    def close(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)

    def texts_with(self, values: dict[str, float], comment=None) -> dict[str, str]:
        """Every profile's text with each parameter's fields set to its value (``comment(param)``:
        the field's inline comment)."""
        texts = dict(self.texts)
        for p in self.spec.parameters:
            v = values[p.name]
            for profile, dotted in p.fields:
                value = v
                if p.ratio_of:
                    base = get_field(self.texts[profile], p.ratio_of)
                    if not isinstance(base, (int, float)):
                        raise InputError(f"{self.spec.path}: parameters: {p.name}: {profile}'s {p.ratio_of} is not a number")
                    value = v * base
                texts[profile] = set_field(texts[profile], dotted, f"{value:.4g}", comment(p) if comment else "")
        return texts

    def profile(self, name: str, values: dict[str, float]) -> Profile:
        key = (name, tuple(sorted((k, round(v, 6)) for k, v in values.items())))
        hit = self._loaded.get(key)
        if hit is None:
            folder = os.path.join(self._tmp, str(len(self._loaded)))
            os.makedirs(folder)
            for n, text in self.texts_with(values).items():
                with open(os.path.join(folder, f"{n}.yaml"), "w", encoding="utf-8") as f:
                    f.write(text)
            hit = self._loaded[key] = load_profile(os.path.join(folder, f"{name}.yaml"))
        return hit

    def chain(self, name: str) -> set[str]:
        """The profile and every profile it extends."""
        out = set()
        while name and name not in out:
            out.add(name)
            name = get_field(self.texts.get(name, ""), "extends")
        return out

    def price(self, figure: Figure, values: dict[str, float]) -> Priced:
        return price(figure, self.profile(figure.profile, values))


def _may_affect(p: Parameter, figure: Figure) -> bool:
    """False where the parameter's fields price no kernel the row runs (no pricing needed to know
    its slope is 0): convolution efficiencies on a model without convolutions, attention's on one
    without the fused attention kernel (FlashAttention-2's or the Triton port's on a row that does
    not ask for it), the fused attention's fill at heads of 128 on a row whose heads are all 128 or
    more (parsim.cost.kernels.attention_head_efficiency prices only shorter ones by it), FP8's on a
    row without FP8 GEMMs."""
    from parsim.profile.published import figure_spec

    spec = figure_spec(figure)
    kernels = [k for layer in spec.graph.layers for k in layer.kernels]
    klasses = {k.klass for k in kernels}
    for _, dotted in p.fields:
        leaf = dotted.rsplit(".", 1)[-1]
        if leaf in ("conv_efficiency", "vector_conv_efficiency") and "conv" not in klasses:
            return False
        if leaf.startswith("attention_efficiency") and "attention" not in klasses:
            return False
        if leaf == "attention_head_fill" and not any(0 < k.head_dim < REFERENCE_HEAD_DIM for k in kernels):
            return False
        asked = ATTENTION_KERNEL_FIELDS.get(spec.training.attention_kernel)
        if leaf in ATTENTION_KERNEL_FIELDS.values() and leaf != asked:
            return False
        if leaf == "fp8_gemm_efficiency" and not spec.training.fp8:
            return False
    return True


def _phi(kind: str, x: float) -> float:
    return 1.0 / x if kind == "rate" else x


@dataclass(frozen=True)
class SurrogateRow:
    figure: Figure
    t0_s: float                         # step time at the prior
    slopes: tuple[tuple[str, float], ...]   # d step / d phi(parameter), for the parameters it depends on
    measured_s: float                   # the figure's measurement as a step time


def measured_step_s(p: Priced) -> float:
    """The figure's measurement as a step time: the predicted step scaled by the throughput error."""
    return p.step_time_s * (1 + p.error)


class Surrogate:
    """Each row's step time, linear in phi(p) = 1/p (rates) or p (times) around the prior: one
    exact pricing at the prior and one per parameter whose fields the row's profile chain holds."""

    def __init__(self, spec: FitSpec, profiles: Profiles, figures, progress=None):
        self.spec = spec
        self.rows: list[SurrogateRow] = []
        prior = spec.prior
        for f in figures:
            base = profiles.price(f, prior)
            chain = profiles.chain(f.profile)
            slopes = []
            for p in spec.parameters:
                if not p.profiles() & chain or not _may_affect(p, f):
                    continue
                moved = dict(prior)
                moved[p.name] = min(max(p.prior * (1 - STEP), p.bounds[0]), p.bounds[1])
                dt = profiles.price(f, moved).step_time_s - base.step_time_s
                dphi = _phi(p.kind, moved[p.name]) - _phi(p.kind, p.prior)
                if dt:
                    slopes.append((p.name, dt / dphi))
            self.rows.append(SurrogateRow(f, base.step_time_s, tuple(slopes), measured_step_s(base)))
            if progress:
                progress(f)

    def step_s(self, row: SurrogateRow, values: dict[str, float]) -> float:
        return surrogate_step_s(self.spec, row, values)


def surrogate_step_s(spec: FitSpec, row: SurrogateRow, values: dict[str, float]) -> float:
    """The row's step at ``values`` by its linear model (floored at a thousandth of the prior's)."""
    kinds = {p.name: p.kind for p in spec.parameters}
    t = row.t0_s + sum(g * (_phi(kinds[n], values[n]) - _phi(kinds[n], spec.prior[n])) for n, g in row.slopes)
    return max(t, 1e-3 * row.t0_s)


def fit(spec: FitSpec, rows: list[SurrogateRow]) -> dict[str, float]:
    """The maximum a posteriori parameters on ``rows`` (module docstring); a parameter no row
    depends on stays at its prior."""
    params = [p for p in spec.parameters if any(n == p.name for r in rows for n, _ in r.slopes)]
    values = dict(spec.prior)
    if not params:
        return values
    families: dict[str, list[SurrogateRow]] = {}
    for r in rows:
        families.setdefault(spec.family(r.figure), []).append(r)
    weight = {id(r): 1 / math.sqrt(len(members)) for members in families.values() for r in members}
    prior_w = [spec.residual_sigma / (p.prior_sigma or spec.prior_sigma) for p in params]

    def residuals(x):
        v = dict(values, **{p.name: math.exp(xi) for p, xi in zip(params, x)})
        res = [weight[id(r)] * math.log(surrogate_step_s(spec, r, v) / r.measured_s) for r in rows]
        return res + [w * (xi - math.log(p.prior)) for w, p, xi in zip(prior_w, params, x)]

    x0 = np.array([math.log(p.prior) for p in params])
    lo = np.array([math.log(p.bounds[0]) for p in params])
    hi = np.array([math.log(p.bounds[1]) for p in params])
    out = least_squares(residuals, x0, bounds=(lo, hi), xtol=1e-10, ftol=1e-12)
    values.update({p.name: float(f"{math.exp(xi):.4g}") for p, xi in zip(params, out.x)})
    return values


@dataclass(frozen=True)
class Scored:
    """One figure: its in-sample pricing (all families fitted) and its out-of-sample one (its own
    family left out of the fit), with the values each used."""

    figure: Figure
    family: str
    in_sample: Priced | None
    out_of_sample: Priced | None
    fold_values: dict
    unpriced: str = ""                  # why the simulator cannot price it ("": priced)
    surrogate_row: SurrogateRow | None = None   # a held row's linear model (the fit's)


def leave_one_source_out(spec: FitSpec, profiles: Profiles, figures, progress=None):
    """(all-family values, [Scored]) for ``figures``: rows that are excluded or unpriced are
    priced at the all-family fit only (or reported unpriced), and take no part in any fit; a
    held-out or kept-out source's rows are scored at the all-family fit, which none of them took part in."""
    held, scored = [], []
    for f in figures:
        if f.excluded or not spec.fitted_on(f):
            continue
        try:
            profiles.price(f, spec.prior)
        except UnpricedFigure:
            continue
        held.append(f)
    surrogate = Surrogate(spec, profiles, held, progress)
    models = {r.figure.id: r for r in surrogate.rows}
    all_values = fit(spec, surrogate.rows)
    folds = {}
    for fam in sorted({spec.family(r.figure) for r in surrogate.rows}):
        folds[fam] = fit(spec, [r for r in surrogate.rows if spec.family(r.figure) != fam])
    for f in figures:
        fam = spec.family(f)
        try:
            ins = profiles.price(f, all_values)
        except UnpricedFigure as e:
            scored.append(Scored(f, fam, None, None, {}, str(e)[len(f.where) + 2:]))
            continue
        if f.excluded:
            oos, fold = None, folds.get(fam, {})
        elif not spec.fitted_on(f):
            oos, fold = ins, all_values          # no fit used it: the all-family pricing is out of sample
        else:
            oos, fold = (profiles.price(f, folds[fam]), folds[fam]) if fam in folds else (None, {})
        scored.append(Scored(f, fam, ins, oos, fold, surrogate_row=models.get(f.id)))
        if progress:
            progress(f)
    return all_values, folds, scored


def write_profiles(spec: FitSpec, profiles: Profiles, values: dict[str, float], command: str) -> list[str]:
    """Write ``values`` (the all-source fit) into the shipped profile files that hold a fitted
    field, each field's comment naming its parameter, and a ``fitted:`` section: the command, the
    fit spec, the date and the values.  A profile's ``calibrated:`` section is another record,
    ``parsim calibrate --published``'s (parsim.profile.fit_published), and is kept as it is: a
    profile may carry both.  Returns the paths written."""
    import datetime

    from parsim.fileio import write_text
    from parsim.profile.profile_edit import set_section

    def comment(p: Parameter) -> str:
        ratio = f" x {p.ratio_of}" if p.ratio_of else ""
        return (f"fitted end to end: parameter {p.name} = {values[p.name]:.4g}{ratio} (prior {p.prior:g}) on every "
                f"public source, scored leave-one-source-out (fitted: at the end)")

    texts = profiles.texts_with(values, comment)
    written = []
    for name in sorted({prof for p in spec.parameters for prof, _ in p.fields}):
        mine = [p for p in spec.parameters if name in p.profiles()]
        body = (f"fitted:                         # written by {command}; rerun it to refit\n"
                f"  command: \"{command}\"\n"
                f"  fit_spec: {spec.path}\n"
                f"  date: \"{datetime.date.today().isoformat()}\"\n"
                f"  parameters: {{{', '.join(f'{p.name}: {values[p.name]:.4g}' for p in mine)}}}\n"
                f"  scored: \"results/published/bench_published.txt, out of sample: each source priced with the "
                f"parameters fitted on the others\"\n")
        path = os.path.join(profiles.folder, f"{name}.yaml")
        write_text(path, set_section(texts[name], "fitted", body))
        written.append(path)
    return written
