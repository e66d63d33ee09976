"""The public benchmark's fit and its leave-one-source-out scoring (parsim.profile.loso), on
synthetic rows whose true parameters are known, and the files it reads (every
results/published/*figures*.yaml; results/published/fit.yaml)."""

import math
from dataclasses import replace
from types import SimpleNamespace

import pytest

from parsim.errors import InputError
from parsim.profile.loso import (FitSpec, Parameter, Profiles, SurrogateRow, fit, load_fit_spec,
                                 surrogate_step_s)
from parsim.profile.published import load_all_figures

SPEC = FitSpec("test", (Parameter("mem", (("p", "device.memory_efficiency"),), 0.8, (0.2, 1.0), "rate"),
                        Parameter("lat", (("p", "device.kernels.launch_us"),), 3.0, (0.5, 20.0), "time")),
               {"a2": "a"}, prior_sigma=0.25, residual_sigma=0.10)


def _row(ident, source, t0, g_mem, g_lat, truth):
    """A row whose step is t0 + g_mem (1/mem - 1/0.8) + g_lat (lat - 3), measured at ``truth``."""
    fig = SimpleNamespace(id=ident, source=source)
    row = SurrogateRow(fig, t0, (("mem", g_mem), ("lat", g_lat)), 0.0)
    measured = surrogate_step_s(SPEC, row, truth)
    return SurrogateRow(fig, t0, row.slopes, measured)


def test_the_surrogate_is_linear_in_one_over_a_rate_and_in_a_time():
    row = SurrogateRow(SimpleNamespace(), 2.0, (("mem", 0.5), ("lat", 0.1)), 1.0)
    assert surrogate_step_s(SPEC, row, {"mem": 0.8, "lat": 3.0}) == 2.0
    assert surrogate_step_s(SPEC, row, {"mem": 0.5, "lat": 5.0}) == pytest.approx(2.0 + 0.5 * (2 - 1.25) + 0.1 * 2)


def test_the_fit_finds_the_parameters_the_rows_were_made_with():
    truth = {"mem": 0.6, "lat": 6.0}
    rows = [_row(f"r{i}", s, 1.0 + i, 0.3 + 0.1 * i, 0.02 * (5 - i), truth)
            for i, s in enumerate(["a", "a", "b", "b", "c", "c"])]
    weak = FitSpec("t", SPEC.parameters, {}, prior_sigma=100.0, residual_sigma=0.1)     # a flat prior
    got = fit(weak, rows)
    assert got["mem"] == pytest.approx(0.6, rel=1e-3) and got["lat"] == pytest.approx(6.0, rel=1e-3)
    # the prior pulls toward 0.8 and 3.0 as its weight grows
    pulled = fit(FitSpec("t", SPEC.parameters, {}, prior_sigma=0.05, residual_sigma=0.1), rows)
    assert 0.6 < pulled["mem"] < 0.8 and 3.0 < pulled["lat"] < 6.0


def test_a_parameter_with_its_own_prior_sigma_is_held_that_near_its_prior():
    """A prior measured on microbenchmarks carries its own spread (fit.yaml's nccl): the rows pull
    it only as far as that spread allows, while the other parameters keep the file's.  The same
    rows, the same file's sigma: only mem's own changes, and only mem moves less."""
    truth = {"mem": 0.5, "lat": 6.0}
    rows = [_row(f"r{i}", s, 1.0 + i, 0.3 + 0.1 * i, 0.02 * (5 - i), truth)
            for i, s in enumerate(["a", "a", "b", "b", "c", "c"])]
    loose = fit(SPEC, rows)
    held = replace(SPEC.parameters[0], prior_sigma=0.02)
    tight = fit(FitSpec("t", (held, SPEC.parameters[1]), {}, prior_sigma=0.25, residual_sigma=0.10), rows)
    assert loose["mem"] < 0.7                               # the file's 0.25 lets the rows draw it far
    assert abs(math.log(tight["mem"] / 0.8)) < 0.05 < abs(math.log(loose["mem"] / 0.8))
    assert tight["lat"] > loose["lat"] > 3.0                # lat takes up what mem may no longer
    spec = load_fit_spec("results/published/fit.yaml")
    assert {p.name: p.prior_sigma for p in spec.parameters}["nccl"] == 0.05
    assert {p.name: p.prior_sigma for p in spec.parameters}["memory-a100"] is None


def test_a_parameter_no_row_depends_on_stays_at_its_prior():
    row = SurrogateRow(SimpleNamespace(id="x", source="a"), 1.0, (("mem", 0.5),), 1.3)
    got = fit(SPEC, [row])
    assert got["lat"] == 3.0 and got["mem"] < 0.8


def test_each_family_counts_once_whatever_its_rows():
    """Twenty rows of one family measured slow and one row of another measured fast: the fit lands
    between them, not on the twenty (each family's mean squared residual weighs alike)."""
    slow = [_row(f"s{i}", "big", 1.0, 0.4, 0.0, {"mem": 0.5, "lat": 3.0}) for i in range(20)]
    fast = [_row("f", "small", 1.0, 0.4, 0.0, {"mem": 1.0, "lat": 3.0})]
    flat = FitSpec("t", SPEC.parameters, {}, prior_sigma=100.0, residual_sigma=0.1)
    mem = fit(flat, slow + fast)["mem"]
    assert 0.6 < mem < 0.85


def test_families_group_sources():
    assert SPEC.family(SimpleNamespace(source="a2")) == "a" == SPEC.family(SimpleNamespace(source="a"))


def test_profiles_set_every_field_of_a_parameter_and_ratios_of_their_own_profile():
    spec = load_fit_spec("results/published/fit.yaml")
    profiles = Profiles(spec)
    try:
        values = dict(spec.prior, **{"memory-a100": 0.7, "conv": 0.5})
        a100 = profiles.profile("dgx-a100", values)
        assert a100.device.memory_efficiency == pytest.approx(0.7)
        k = a100.device.kernels
        assert k.conv_efficiency == pytest.approx(0.5 * k.gemm_efficiency, rel=1e-3)
        # a profile that extends one the fit sets inherits it (dgx-h100-superpod extends dgx-h100)
        values["memory-h100"] = 0.66
        assert profiles.profile("dgx-h100-superpod", values).device.memory_efficiency == pytest.approx(0.66)
        assert "dgx-h100" in profiles.chain("dgx-h100-superpod")
    finally:
        profiles.close()


def test_the_fit_spec_names_shipped_profiles_and_refuses_a_bad_one(tmp_path):
    spec = load_fit_spec("results/published/fit.yaml")
    assert {p.name for p in spec.parameters} >= {"memory-a100", "memory-h100", "nccl", "conv", "attention-h100"}
    for p in spec.parameters:
        assert p.why and p.bounds[0] <= p.prior <= p.bounds[1], p.name
    bad = tmp_path / "fit.yaml"
    bad.write_text("schema_version: 1\nparameters:\n  - {name: x, fields: [dgx-a100:device.memory_efficiency], "
                   "prior: 2.0, bounds: [0.1, 1.0]}\n")
    with pytest.raises(InputError, match=r"fit.yaml: parameters\[0\]\.prior: 2.0 lies outside"):
        load_fit_spec(bad)


def test_every_figures_file_is_read_and_ids_stay_unique(tmp_path):
    figures = load_all_figures()
    files = {f.path for f in figures.figures}
    assert {"results/published/figures.yaml", "results/published/moe_figures.yaml",
            "results/published/llmfoundry_figures.yaml"} <= files
    one = open("results/published/figures.yaml").read()
    (tmp_path / "a_figures.yaml").write_text(one)
    (tmp_path / "b_figures.yaml").write_text(one)
    with pytest.raises(InputError, match="ids must be unique over the files"):
        load_all_figures(tmp_path)


def test_the_public_benchmark_covers_what_issue_37_asks():
    """At least 80 rows from at least 10 families; A100, H100/H800 and Ascend 910; dense and MoE;
    Megatron-style 3D, FSDP (ZeRO-3), long context (cp or >= 32K tokens) and FP8 among the held rows
    (their kinds as the committed residual table records them: benchmarks/bench_published.py)."""
    from parsim.sim.band import RESIDUALS, load_residuals

    spec = load_fit_spec("results/published/fit.yaml")
    figures = load_all_figures().figures
    assert len(figures) >= 80 and len({spec.family(f) for f in figures}) >= 10
    held = {f.id for f in figures if not f.excluded}
    residuals = load_residuals(RESIDUALS)
    assert {r.id for r in residuals} <= held and len(residuals) >= 70
    kinds = [r.kind for r in residuals]
    assert {"A100-SXM4-80GB", "H100-SXM5-80GB", "Ascend 910"} <= {k.device for k in kinds}
    assert {"dense", "moe", "conv"} <= {k.model for k in kinds} and {"3d", "fsdp", "ep", "dp"} <= {k.mix for k in kinds}
    scored = {r.id for r in residuals}
    assert any(dict(f.parallel).get("cp", 1) > 1 or "s32768" in f.id for f in figures if f.id in scored)
    assert any("fp8" in f.id for f in figures if f.id in scored)
    assert all(math.isfinite(f.measured) for f in figures)


def test_writing_the_fit_keeps_a_profiles_calibration_record(tmp_path):
    """The public fit writes its own ``fitted:`` section; a profile's ``calibrated:`` section is
    parsim calibrate --published's record and survives it (until 2026-11-29 the fit wrote over it),
    and the profile loads with both."""
    import shutil

    import yaml

    from parsim.hardware.cluster import load_profile, profiles_dir
    from parsim.profile.loso import write_profiles

    for f in profiles_dir().glob("*.yaml"):
        shutil.copy(f, tmp_path / f.name)
    before = yaml.safe_load((tmp_path / "atlas-900-a2.yaml").read_text())["calibrated"]
    spec = FitSpec("fit.yaml", (Parameter("attn", (("atlas-900-a2", "device.kernels.attention_efficiency"),),
                                          0.5, (0.2, 1.0)),))
    written = write_profiles(spec, Profiles(spec, tmp_path), {"attn": 0.4375}, "a command")
    assert written == [str(tmp_path / "atlas-900-a2.yaml")]
    after = yaml.safe_load((tmp_path / "atlas-900-a2.yaml").read_text())
    assert after["calibrated"] == before
    assert after["fitted"]["parameters"] == {"attn": 0.4375} and after["fitted"]["command"] == "a command"
    assert after["device"]["kernels"]["attention_efficiency"] == 0.4375
    again = write_profiles(spec, Profiles(spec, tmp_path), {"attn": 0.5}, "a command")      # refit: replaced
    after = yaml.safe_load(open(again[0]).read())
    assert after["calibrated"] == before and after["fitted"]["parameters"] == {"attn": 0.5}
    assert load_profile(again[0]).device.kernels.attention_efficiency == 0.5


def test_a_held_out_source_takes_part_in_no_fit_and_is_scored_at_the_shipped_values(monkeypatch):
    """results/published/fit.yaml's held_out: a source drawn after the fit is fitted on by no fold
    and by the all-family fit, and is priced at the all-family values (the shipped ones), which
    none of its rows moved; without the list its rows would pull every fit."""
    import parsim.profile.loso as loso
    from parsim.profile.published import Priced

    monkeypatch.setattr(loso, "_may_affect", lambda p, f: True)

    def step(f, values):                     # a row's step: t0 + g (1/mem - 1/0.8)
        return f.t0 + f.g * (1 / values["mem"] - 1 / 0.8)

    class FakeProfiles:
        def chain(self, profile):
            return {"p"}

        def price(self, f, values):
            s = step(f, values)
            return Priced(f, s, s, "")

    def row(ident, source, t0, g, mem):
        f = SimpleNamespace(id=ident, source=source, excluded="", metric="step_time_s", profile="p", t0=t0, g=g)
        f.measured = step(f, {"mem": mem})
        return f

    dev = [row(f"{s}{i}", s, 1.0 + i, 0.5, 0.6) for s in "abc" for i in range(2)]
    test = [row(f"z{i}", "z", 2.0, 0.5, 0.3) for i in range(2)]      # far off: measured at 0.3
    spec = FitSpec("t", SPEC.parameters, {}, prior_sigma=0.25, residual_sigma=0.1, held_out=frozenset({"z"}))
    values, folds, scored = loso.leave_one_source_out(spec, FakeProfiles(), dev + test)
    alone, _, _ = loso.leave_one_source_out(spec, FakeProfiles(), dev)
    assert values == alone and "z" not in folds
    for s in scored:
        if s.family == "z":
            assert s.out_of_sample.step_time_s == step(s.figure, values) and s.fold_values == values
    fitted_on_z = FitSpec("t", SPEC.parameters, {}, prior_sigma=0.25, residual_sigma=0.1)
    assert loso.leave_one_source_out(fitted_on_z, FakeProfiles(), dev + test)[0]["mem"] < values["mem"]
    # a kept-out source (a development source no fit uses) is priced alike, and is not held out
    kept = FitSpec("t", SPEC.parameters, {}, prior_sigma=0.25, residual_sigma=0.1, kept_out=frozenset({"z"}))
    assert loso.leave_one_source_out(kept, FakeProfiles(), dev + test)[0] == values
    assert not kept.fitted_on(test[0]) and not kept.held_out_row(test[0]) and spec.held_out_row(test[0])


def test_the_fit_spec_refuses_a_held_out_source_in_a_family(tmp_path):
    bad = tmp_path / "fit.yaml"
    bad.write_text("schema_version: 1\nfamilies: {f: [a, b]}\nheld_out: [b]\nparameters: []\n")
    with pytest.raises(InputError, match=r"fit.yaml: held_out: \['b'\] also sit in a family"):
        load_fit_spec(bad)
    bad.write_text("schema_version: 1\nheld_out: [b]\nkept_out: [b, c]\nparameters: []\n")
    with pytest.raises(InputError, match=r"fit.yaml: kept_out: \['b'\] also sit in a family or in held_out"):
        load_fit_spec(bad)
