"""How far the 910B's development rows draw attention-head-910b from its prior: the 910B parameters'
fit alone (as fixed_point.py beside it fits them: every 910B row of the development sources, the
surrogate at the priors, the shipped profiles otherwise), for priors 0.6667 (the GEMM's fill, the
rule before) and 0.5842 (pto-isa's cost model, the prior kept) and prior spreads 0.25 (the file's)
to 10, each with the surrogate's in-sample MAPE on those rows (not a score: in sample, surrogate,
the +467% row left out).

    python results/2026-12-02b-amd-epyc/head_fill_sigma.py
"""
import dataclasses
import sys

sys.path.insert(0, "benchmarks")

from bench_published import FIT                                                       # noqa: E402
from parsim.profile.loso import Profiles, Surrogate, fit, load_fit_spec, surrogate_step_s   # noqa: E402
from parsim.profile.published import load_all_figures                                 # noqa: E402

ASCEND = ("memory-910b", "attention-910b", "attention-head-910b", "hccl-overlap")
spec = load_fit_spec(FIT)
figures = [f for f in load_all_figures().scorable() if spec.fitted_on(f)]
for prior in (0.6667, 0.5842):
    params = tuple(dataclasses.replace(p, prior=prior) if p.name == "attention-head-910b" else p
                   for p in spec.parameters if p.name in ASCEND)
    sub = dataclasses.replace(spec, parameters=params)
    profiles = Profiles(sub)
    try:
        rows = Surrogate(sub, profiles, [f for f in figures if "atlas-900-a2" in profiles.chain(f.profile)]).rows
    finally:
        profiles.close()
    for sigma in (0.25, 1.0, 2.0, 3.0, 10.0):
        sp = dataclasses.replace(sub, parameters=tuple(dataclasses.replace(p, prior_sigma=sigma)
                                                       if p.name == "attention-head-910b" else p for p in params))
        v = fit(sp, rows)
        errs = [r.measured_s / surrogate_step_s(sp, r, v) - 1 for r in rows if "deepseek15" not in r.figure.id]
        print(f"prior {prior} spread {sigma:5}: " + ", ".join(f"{n} {v[n]:.4g}" for n in ASCEND)
              + f"; surrogate in-sample MAPE {100 * sum(map(abs, errs)) / len(errs):.2f}% on {len(errs)} rows", flush=True)
