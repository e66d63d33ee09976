"""Every public end-to-end training figure parsim is held to, priced out of sample: each source
(a family of sources one team published) priced with the profile numbers fitted on every other
source (leave-one-source-out, parsim.profile.loso), beside the in-sample error of the fit on all
sources.  Only the out-of-sample error is parsim's accuracy.

    python benchmarks/bench_published.py [--out results/published/bench_published.txt]
        [--residuals results/published/residuals.yaml] [--write-profiles] [--quick] [--only SUBSTRING]

The rows, their citations and every setting they assume live in results/published/*figures*.yaml
(parsim.profile.published.load_all_figures); the fitted parameters, their priors and the source
families in results/published/fit.yaml.  Each row prints its family, profile and configuration, the
measured value, the in-sample prediction and error, the out-of-sample prediction and error, and
whether it is scored (in the out-of-sample figures; "scored" says nothing of whether the model was
developed on it, which the figures files' headers and docs/accuracy.md say), excluded (printed, not
scored, with the reason) or not expressible (the
simulator cannot price it, with the reason).  Then, per family and overall: rows, out-of-sample
MAPE and max, rows beyond 25%, and the in-sample MAPE, labelled in-sample; the same per training
stack (parsim.profile.harness, on results/published/harnesses.yaml); the picks, how the measured speed
of the row parsim prices fastest compares with the fastest where a family ran one model several ways
(parsim.profile.picks); the fitted values, all sources and each fold; and the surrogate's error on
each scored row (the fit's linear model of the step against the exact pricing).

--residuals writes the out-of-sample residuals the step-time bands are drawn from
(parsim.sim.band); --write-profiles writes the all-source values into hardware_profiles/ with
their provenance.  --quick prices every row with the profiles as shipped, nothing fitted (a
development check; its errors are in-sample for whatever the shipped profiles were fitted on).
Takes about ten minutes (one exact pricing per row at the prior and per parameter it depends on,
one per row in and out of sample).
"""

from __future__ import annotations

import argparse
import datetime
import math
import io
import statistics
import sys

from parsim.errors import ParsimError
from parsim.fileio import write_text
from parsim.model.stacks import load_harnesses
from parsim.profile.harness import by_stack
from parsim.profile.loso import Profiles, leave_one_source_out, load_fit_spec
from parsim.profile.picks import pick_groups, picks_text
from parsim.profile.published import FOLDER, UnpricedFigure, load_all_figures, price
from parsim.profile.published import row_kind
from parsim.sim.band import LEVEL, RESIDUALS, Residual, residuals_yaml, step_band

FIT = "results/published/fit.yaml"
UNIT = {"samples_per_s": "img/s", "tflops_per_gpu": "TF/GPU", "tokens_per_s_per_gpu": "tok/s/GPU",
        "step_time_s": "s/step"}
COMMAND = "python benchmarks/bench_published.py --write-profiles"


def _pct(e) -> str:
    return "-" if e is None else f"{e:+.1%}"


def _summary(label: str, errors: list[float], ins: list[float]) -> str:
    if not errors:
        return f"{label}: no scored rows"
    a = [abs(e) for e in errors]
    return (f"{label}: {len(a)} rows, out-of-sample MAPE {statistics.mean(a):.1%}, max {max(a):.1%}, "
            f"{sum(x > 0.25 for x in a)} beyond 25%; in-sample MAPE {statistics.mean(abs(e) for e in ins):.1%}")


def report(spec, scored, all_values, folds, surrogate_errors) -> str:
    out = io.StringIO()
    w = max(len(s.figure.id) for s in scored)
    print(f"{'row':<{w}} {'family':<18} {'profile':<18} {'measured':>10} {'in-sample':>10} {'err':>7} "
          f"{'out-of-sample':>13} {'err':>7}  configuration; status", file=out)
    by_family: dict[str, tuple[list, list]] = {}
    for s in scored:
        f = s.figure
        if s.unpriced:
            status = f"NOT EXPRESSIBLE: {s.unpriced}"
            print(f"{f.id:<{w}} {s.family:<18} {f.profile:<18} {f.measured:>10.4g} {'-':>10} {'-':>7} {'-':>13} "
                  f"{'-':>7}  {status} ({UNIT[f.metric]})", file=out)
            continue
        oos = s.out_of_sample
        status = (f"excluded: {f.excluded}" if f.excluded else "scored" if spec.fitted_on(f)
                  else "scored; a held-out source, fitted on by no fold" if spec.held_out_row(f)
                  else "scored; a development source kept out of the fit (fit.yaml's kept_out)")
        print(f"{f.id:<{w}} {s.family:<18} {f.profile:<18} {f.measured:>10.4g} {s.in_sample.predicted:>10.4g} "
              f"{_pct(s.in_sample.error):>7} {(f'{oos.predicted:.4g}' if oos else '-'):>13} "
              f"{_pct(oos.error if oos else None):>7}  {s.in_sample.config}; {status} ({UNIT[f.metric]})", file=out)
        if oos is not None:
            e, i = by_family.setdefault(s.family, ([], []))
            e.append(oos.error)
            i.append(s.in_sample.error)
    print("\nOut of sample (each family priced with the parameters fitted on the others); in-sample beside, "
          "labelled:", file=out)
    for fam, (e, i) in sorted(by_family.items()):
        print("  " + _summary(fam, e, i), file=out)
    def pooled(families) -> tuple[list[float], list[float]]:      # (out-of-sample, in-sample) errors of families
        families = list(families)
        return [x for f in families for x in by_family[f][0]], [x for f in families for x in by_family[f][1]]

    allo, alli = pooled(by_family)
    print("  " + _summary("OVERALL", allo, alli), file=out)
    if spec.held_out:
        test = sorted(f for f in by_family if f in spec.held_out)
        print("  " + _summary("development sources (fitted on by the other folds but kept_out's)",
                              *pooled(f for f in by_family if f not in spec.held_out)), file=out)
        print("  " + _summary(f"held-out sources ({', '.join(test)}: drawn after the fit, fitted on by no fold)",
                              *pooled(test)), file=out)
    worst = max(by_family.items(), key=lambda kv: statistics.mean(abs(x) for x in kv[1][0]))
    print(f"  families above 12% out-of-sample MAPE: "
          f"{', '.join(k for k, (e, _) in sorted(by_family.items()) if statistics.mean(abs(x) for x in e) > 0.12) or 'none'}"
          f" (worst {worst[0]})", file=out)
    excluded = sum(1 for s in scored if s.figure.excluded and not s.unpriced)
    unpriced = sum(1 for s in scored if s.unpriced)
    print(f"  rows: {len(scored)} ({len(allo)} held, {excluded} excluded, {unpriced} not expressible) from "
          f"{len({s.family for s in scored})} families", file=out)
    print("\nBy the stack that ran each family's rows (results/published/harnesses.yaml; + is a price too fast), "
          "out of sample:", file=out)
    stacks = load_harnesses()
    for line in by_stack({f: e for f, (e, _) in by_family.items()}, stacks, spec.held_out):
        print("  " + line, file=out)
    print("\nPicks (parsim.profile.picks): where one family ran one model on one cluster more than one way, the row "
          "parsim prices fastest, out of sample, against the measured fastest:", file=out)
    groups = pick_groups([(s.figure, s.family, s.figure.measured, s.out_of_sample.predicted) for s in scored
                          if s.out_of_sample is not None and not s.figure.excluded])
    for line in picks_text(groups, spec.held_out):
        print("  " + line, file=out)
    names = [p.name for p in spec.parameters]
    cw = {n: max(9, len(n) + 2) for n in names}
    print("\nFitted parameters (prior; all families; each fold, the family left out):", file=out)
    print("  " + f"{'':<20}" + "".join(f"{n:>{cw[n]}}" for n in names), file=out)
    print("  " + f"{'prior':<20}" + "".join(f"{spec.prior[n]:>{cw[n]}.4g}" for n in names), file=out)
    print("  " + f"{'all families':<20}" + "".join(f"{all_values[n]:>{cw[n]}.4g}" for n in names), file=out)
    for fam, v in sorted(folds.items()):
        print("  " + f"{'- ' + fam:<20}" + "".join(f"{v[n]:>{cw[n]}.4g}" for n in names), file=out)
    if surrogate_errors:
        a = [abs(x) for x in surrogate_errors.values()]
        worst_id = max(surrogate_errors, key=lambda k: abs(surrogate_errors[k]))
        print(f"\nSurrogate (the fit's linear model of each step) against the exact pricing, each scored row at its "
              f"fold's values: median {statistics.median(a):.2%}, max {max(a):.2%} ({worst_id})", file=out)
    return out.getvalue()


def coverage(spec, held) -> str:
    """The bands scored on the rows they would have priced: each scored row's 90% band drawn from the
    other families' out-of-sample residuals only (parsim.sim.band.step_band, leave_out), and whether
    the row's measurement falls inside.  The bands rest on the development sources' residuals (a
    held-out source's rows are in the table --residuals writes, marked, and in no band); those rows
    are scored against the bands apart, a test of the bands as of the point predictions.  ``held``:
    (scored row, its PlanKind) of each row priced out of sample."""
    table = tuple(Residual(s.figure.id, s.family, k, math.log1p(s.out_of_sample.error), spec.held_out_row(s.figure))
                  for s, k in held)
    banded, rows = [], []          # banded: (a development source's?, family, inside?, width) of each row with a band
    for s, k in held:
        band = step_band(1.0, k, table, LEVEL, leave_out=s.family)
        ratio = 1 + s.out_of_sample.error                       # measured step / predicted step
        hit = band is not None and band.contains(ratio)
        if band is not None:
            banded.append((not spec.held_out_row(s.figure), s.family, hit, band.high / band.low - 1))
        rows.append(f"    {s.figure.id:<48} {str(k):<36} measured/predicted {ratio:6.3f}  band "
                    + (f"[{band.low:.3f}, {band.high:.3f}] {'in' if hit else 'OUT'}" if band
                       else "none: no other source ran on this device"))
    dev = [b for b in banded if b[0]]
    test = [b for b in banded if not b[0]]
    inside, families, width = _tally(dev)
    unbanded = sum(1 for s, _ in held if not spec.held_out_row(s.figure)) - len(dev)
    text = (f"Bands ({LEVEL:.0%}, parsim.sim.band) scored out of sample: each scored row's band drawn from the other "
            f"families' residuals: {inside} of {len(dev)} rows inside ({inside / len(dev):.1%} against {LEVEL:.0%} "
            f"nominal; averaged per family {statistics.mean(families.values()):.1%}); {unbanded} rows have no band "
            f"(no other source ran on their device); median width (high / low - 1) {width:.1%}\n")
    if test:
        hits, families, width = _tally(test)
        text += (f"Held-out sources against the same bands (the development residuals; none of theirs): "
                 f"{hits} of {len(test)} rows inside ({hits / len(test):.1%}; averaged per family "
                 f"{statistics.mean(families.values()):.1%} over {len(families)} families); median width "
                 f"{width:.1%}\n  by family, the share of its rows inside: "
                 + ", ".join(f"{f} {v:.0%}" for f, v in sorted(families.items())) + "\n")
    return text + "\n".join(rows) + "\n"


def _tally(banded) -> tuple[int, dict[str, float], float]:
    """Of rows with a band: how many fall inside it; each family's share of its rows inside (averaged
    over the families, each counts once, as the bands count them: their exchangeable unit,
    parsim.sim.band, where the share of rows lets the largest source decide); the median width."""
    by_family: dict[str, list[bool]] = {}
    for _, family, hit, _ in banded:
        by_family.setdefault(family, []).append(hit)
    return (sum(hit for _, _, hit, _ in banded), {f: sum(v) / len(v) for f, v in by_family.items()},
            statistics.median(b[3] for b in banded))


def quick(only: str, folder: str = FOLDER) -> None:
    for f in load_all_figures(folder).figures:
        if only and only not in f.id:
            continue
        try:
            p = price(f)
        except UnpricedFigure as e:
            print(f"{f.id:<48} not expressible: {str(e)[len(f.where) + 2:]}")
            continue
        print(f"{f.id:<48} {f.profile:<18} {f.measured:>10.4g} {p.predicted:>10.4g} {p.error:+7.1%}  {p.config}"
              f"{'  (excluded)' if f.excluded else ''}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folder", default=FOLDER, help="the *figures*.yaml files' folder")
    ap.add_argument("--fit", default=FIT, help="the fit spec")
    ap.add_argument("--out", help="also write the report here")
    ap.add_argument("--residuals", help=f"write the out-of-sample residuals here (the bands' data: {RESIDUALS})")
    ap.add_argument("--write-profiles", action="store_true", help="write the all-source fit into hardware_profiles/")
    ap.add_argument("--quick", action="store_true", help="price with the shipped profiles, nothing fitted")
    ap.add_argument("--only", default="", help="with --quick: rows whose id contains this")
    args = ap.parse_args()
    if args.quick:
        quick(args.only, args.folder)
        return
    spec = load_fit_spec(args.fit)
    figures = load_all_figures(args.folder).scorable()     # calibration rows are in-sample: excluded
    profiles = Profiles(spec)
    try:
        def tick(f):
            print(".", end="", file=sys.stderr, flush=True)
        all_values, folds, scored = leave_one_source_out(spec, profiles, figures, tick)
        print(file=sys.stderr)
        surrogate_errors = _surrogate_errors(spec, scored)
        held = [(s, row_kind(s.figure)) for s in scored if s.out_of_sample is not None]    # each row's kind, once
        text = (f"# {COMMAND}, {datetime.date.today().isoformat()}: every results/published/*figures*.yaml row; "
                f"fit spec {args.fit}\n" + report(spec, scored, all_values, folds, surrogate_errors) + "\n"
                + coverage(spec, held))
        print(text, end="")
        if args.out:
            write_text(args.out, text)
        if args.residuals:
            write_text(args.residuals, residuals_yaml(
                [(s.figure, s.family, k, s.out_of_sample.error, spec.held_out_row(s.figure)) for s, k in held],
                COMMAND))
        if args.write_profiles:
            from parsim.profile.loso import write_profiles
            for path in write_profiles(spec, profiles, all_values, COMMAND):
                print(f"wrote {path}", file=sys.stderr)
    finally:
        profiles.close()


def _surrogate_errors(spec, scored) -> dict[str, float]:
    """Each scored row's surrogate step at its fold's values against the exact step."""
    from parsim.profile.loso import surrogate_step_s

    return {s.figure.id: surrogate_step_s(spec, s.surrogate_row, s.fold_values) / s.out_of_sample.step_time_s - 1
            for s in scored if s.out_of_sample is not None and s.surrogate_row is not None}


if __name__ == "__main__":
    try:
        main()
    except ParsimError as e:            # a bad path or field: one line, as parsim's commands give it
        print(f"bench_published.py: {e}", file=sys.stderr)
        sys.exit(1)
